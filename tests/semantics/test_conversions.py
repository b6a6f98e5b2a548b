"""Conversions that return their input itself when there is nothing to convert, compared with eager.

Each case is written from a sentence of PyTorch's documentation of the method (quoted in the
case's docstring or the comment above its group). Where that sentence says the input itself (or a
view of it) is returned, a write through the result must reach the input, and a returned result
must share the input's storage; where it says a copy is made, the input must stay as it was.
Writes to a leaf that requires grad are errors in eager, so the gradient cases write to an
intermediate, or write under ``torch.no_grad()`` (which eager allows).
"""
import copy

import pytest
import torch
import torch.nn as nn

import thunderlab
from tests.semantics import harness
from tests.semantics.harness import check


def _m(*shape, grad=False, dtype=torch.float32):
    return lambda: (torch.randn(*shape, dtype=dtype, requires_grad=grad),)


# -- Tensor.to: "If the self Tensor already has the correct torch.dtype and torch.device, then self
# is returned. Otherwise, the returned tensor is a copy of self with the desired torch.dtype and
# torch.device." / to(other): "Returns a Tensor with same torch.dtype and torch.device as the Tensor
# other." / "When copy is set, a new Tensor is created even when the Tensor already matches the
# desired conversion."
def to_same_device_write(x):
    x.to("cpu").add_(1)
    return x


def to_device_object_write(x):
    x.to(torch.device("cpu")).mul_(2)
    return x * 1


def to_same_dtype_write(x):
    y = x.to(torch.float32)
    y.mul_(2)
    return x, y


def to_same_dtype_and_device_write(x):
    x.to("cpu", torch.float32).sub_(1)
    return x


def to_dtype_kwarg_write(x):
    x.to(dtype=torch.float32, device="cpu").add_(3)
    return x


def to_other_same_type_write(x):
    other = torch.zeros(1)
    x.to(other).add_(1)
    return x


def to_other_dtype_is_a_copy(x):
    y = x.to(torch.float64)
    y.mul_(2)
    return x, y


def to_other_dtype_of_tensor_is_a_copy(x):
    y = x.to(torch.zeros(1, dtype=torch.float64))
    y.add_(1)
    return x, y


def to_copy_true_is_a_copy(x):
    y = x.to("cpu", copy=True)
    y.add_(1)
    return x, y


def to_same_returned(x):
    return x.to(torch.float32)


def to_same_write_returned(x):
    return x.to("cpu").add_(1)


def to_same_read_after_base_write(x):
    y = x.to("cpu")
    x.mul_(3)
    return y + 0


def to_same_grad_intermediate(x):
    y = x * 2
    y.to(torch.float32).mul_(3)
    return y


def to_copy_of_leaf_written_grad(x):
    y = x.to(torch.float64)  # a copy: no longer a leaf, so eager lets it be written
    y.mul_(2)
    return x + y.float()


def to_same_under_no_grad_leaf(x):
    with torch.no_grad():
        x.to("cpu").mul_(0.5)  # eager allows writing a leaf under no_grad; its gradient history stays
    return x * 2


# -- Tensor.cpu: "Returns a copy of this object in CPU memory. If this object is already in CPU memory
# and on the correct device, then no copy is performed and the original object is returned."
def cpu_write(x):
    x.cpu().add_(1)
    return x


def cpu_slice_write(x):
    x.cpu()[0].zero_()
    return x


def cpu_returned(x):
    return x.cpu()


def cpu_grad_intermediate(x):
    y = x.sin()
    y.cpu()[:, 0].mul_(2)
    return y.sum(1)


# -- Tensor.contiguous: "Returns a contiguous in memory tensor containing the same data as self tensor.
# If self tensor is already in the specified memory format, this function returns the self tensor."
def contiguous_write(x):
    x.contiguous().add_(1)
    return x


def contiguous_of_slice_rows_write(x):
    x[1:].contiguous().mul_(2)  # rows of a contiguous tensor are contiguous: the same tensor
    return x


def contiguous_of_transpose_is_a_copy(x):
    y = x.t().contiguous()
    y.add_(1)
    return x, y


def contiguous_channels_last_is_a_copy(x):
    y = x.contiguous(memory_format=torch.channels_last)
    y.add_(1)
    return x, y


def contiguous_returned(x):
    return x.contiguous()


# -- Tensor.type_as: "Returns this tensor cast to the type of the given tensor. This is a no-op if the
# tensor is already of the correct type. This is equivalent to self.type(tensor.type())"
def type_as_same_write(x):
    x.type_as(torch.zeros(1)).add_(1)
    return x


def type_as_other_is_a_copy(x):
    y = x.type_as(torch.zeros(1, dtype=torch.float64))
    y.add_(1)
    return x, y


def type_as_returned(x):
    return x.type_as(torch.zeros(1))


# -- Tensor.type: "Returns the type if dtype is not provided, else casts this object to the specified
# type. If this is already of the correct type, no copy is performed and the original object is returned."
def type_dtype_write(x):
    x.type(torch.float32).add_(1)
    return x


def type_string_write(x):
    x.type("torch.FloatTensor").mul_(2)
    return x


def type_class_write(x):
    x.type(torch.FloatTensor).sub_(1)
    return x


def type_other_is_a_copy(x):
    y = x.type(torch.DoubleTensor)
    y.add_(1)
    return x, y


# -- Tensor.float / double / half: "self.float() is equivalent to self.to(torch.float32)" (and so on),
# so the self tensor is returned when it has that dtype already
def float_on_float_write(x):
    x.float().add_(1)
    return x


def double_on_double_write(x):
    x.double().mul_(2)
    return x


def float_on_double_is_a_copy(x):
    y = x.float()
    y.add_(1)
    return x, y


def half_on_float_is_a_copy(x):
    y = x.half()
    y.add_(1)
    return x, y.float()


# -- torch.reshape: "When possible, the returned tensor will be a view of input. Otherwise, it will be
# a copy. Contiguous inputs and inputs with compatible strides can be reshaped without copying"
def reshape_contiguous_write(x):
    x.reshape(-1).mul_(2)
    return x


def reshape_contiguous_read_after_base_write(x):
    y = x.reshape(3, 2)
    x.add_(1)
    return y * 1


def reshape_contiguous_returned(x):
    return x.reshape(-1)


def reshape_as_contiguous_write(x):
    x.reshape_as(torch.zeros(6)).add_(1)
    return x


def reshape_transposed_is_a_copy(x):
    y = x.t().reshape(-1)
    y.add_(1)
    return x, y


# -- Tensor.expand: "Expanding a tensor does not allocate new memory, but only creates a new view on the
# existing tensor" (expand_as(other) is "equivalent to self.expand(other.size())"); "More than one
# element of an expanded tensor may refer to a single memory location", so writes go to the base
def expand_as_read_after_base_write(x):
    y = x[:1].expand_as(x)
    x.mul_(2)
    return y * 1


def expand_as_returned(x):
    return x[:1].expand_as(x)


def expand_as_same_shape_write(x):
    x.expand_as(torch.zeros(2, 3)).add_(1)  # nothing expanded: no element shared, so eager allows it
    return x


# -- Tensor.view_as: "This is equivalent to self.view(other.size())"
def view_as_returned(x):
    return x.view_as(torch.zeros(6))


def view_as_write(x):
    x.view_as(torch.zeros(3, 2))[0].fill_(5)
    return x


CASES = {
    "to-same-device": (to_same_device_write, _m(2, 3)),
    "to-device-object": (to_device_object_write, _m(2, 3)),
    "to-same-dtype": (to_same_dtype_write, _m(2, 3)),
    "to-same-dtype-and-device": (to_same_dtype_and_device_write, _m(2, 3)),
    "to-kwargs": (to_dtype_kwarg_write, _m(2, 3)),
    "to-other-same-type": (to_other_same_type_write, _m(2, 3)),
    "to-other-dtype-copy": (to_other_dtype_is_a_copy, _m(2, 3)),
    "to-other-tensor-dtype-copy": (to_other_dtype_of_tensor_is_a_copy, _m(2, 3)),
    "to-copy-true": (to_copy_true_is_a_copy, _m(2, 3)),
    "to-same-returned": (to_same_returned, _m(2, 3)),
    "to-same-write-returned": (to_same_write_returned, _m(2, 3)),
    "to-same-read-after-base-write": (to_same_read_after_base_write, _m(2, 3)),
    "to-same-grad": (to_same_grad_intermediate, _m(2, 3, grad=True)),
    "to-copy-of-leaf-grad": (to_copy_of_leaf_written_grad, _m(2, 3, grad=True)),
    "to-same-no_grad-leaf": (to_same_under_no_grad_leaf, _m(2, 3, grad=True)),
    "cpu": (cpu_write, _m(2, 3)),
    "cpu-slice": (cpu_slice_write, _m(2, 3)),
    "cpu-returned": (cpu_returned, _m(2, 3)),
    "cpu-grad": (cpu_grad_intermediate, _m(3, 2, grad=True)),
    "contiguous": (contiguous_write, _m(2, 3)),
    "contiguous-rows": (contiguous_of_slice_rows_write, _m(3, 2)),
    "contiguous-transposed-copy": (contiguous_of_transpose_is_a_copy, _m(2, 3)),
    "contiguous-channels-last-copy": (contiguous_channels_last_is_a_copy, _m(1, 2, 2, 3)),
    "contiguous-returned": (contiguous_returned, _m(2, 3)),
    "type_as-same": (type_as_same_write, _m(2, 3)),
    "type_as-other-copy": (type_as_other_is_a_copy, _m(2, 3)),
    "type_as-returned": (type_as_returned, _m(2, 3)),
    "type-dtype": (type_dtype_write, _m(2, 3)),
    "type-string": (type_string_write, _m(2, 3)),
    "type-class": (type_class_write, _m(2, 3)),
    "type-other-copy": (type_other_is_a_copy, _m(2, 3)),
    "float-on-float": (float_on_float_write, _m(2, 3)),
    "double-on-double": (double_on_double_write, _m(2, 3, dtype=torch.float64)),
    "float-on-double-copy": (float_on_double_is_a_copy, _m(2, 3, dtype=torch.float64)),
    "half-on-float-copy": (half_on_float_is_a_copy, _m(2, 3)),
    "reshape-contiguous": (reshape_contiguous_write, _m(2, 3)),
    "reshape-read-after-base-write": (reshape_contiguous_read_after_base_write, _m(2, 3)),
    "reshape-returned": (reshape_contiguous_returned, _m(2, 3)),
    "reshape_as": (reshape_as_contiguous_write, _m(2, 3)),
    "reshape-transposed-copy": (reshape_transposed_is_a_copy, _m(2, 3)),
    "expand_as-read-after-base-write": (expand_as_read_after_base_write, _m(2, 3)),
    "expand_as-returned": (expand_as_returned, _m(2, 3)),
    "expand_as-same-shape-write": (expand_as_same_shape_write, _m(2, 3)),
    "view_as-returned": (view_as_returned, _m(2, 3)),
    "view_as-write": (view_as_write, _m(2, 3)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_conversion(name):
    fn, make = CASES[name]
    check(fn, make)


# "then self is returned": the very tensor object, not only its storage
IDENTITY = {
    "to": lambda x: x.to("cpu", torch.float32),
    "cpu": lambda x: x.cpu(),
    "contiguous": lambda x: x.contiguous(),
    "type_as": lambda x: x.type_as(torch.zeros(1)),
    "float": lambda x: x.float(),
    "type": lambda x: x.type(torch.float32),
}


@pytest.mark.parametrize("entry", ["jit", "compile"])
@pytest.mark.parametrize("name", list(IDENTITY))
def test_returned_self_is_the_input_object(name, entry):
    fn = IDENTITY[name]
    x = torch.randn(2, 3)
    assert fn(x) is x  # eager's answer, as documented
    torch._dynamo.reset()
    cfn = harness.ENTRIES[entry](fn)
    for _ in range(2):
        assert cfn(x) is x
    harness.OUTCOMES.append((entry, "ok"))


# -- a module's parameter and buffer, written through a conversion that returns them (or a copy)
class Counter(nn.Module):
    """A buffer counted up through ``.to(its own device)``; a parameter scaled under no_grad through ``.cpu()``."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("seen", torch.zeros(3))
        self.register_buffer("steps", torch.zeros((), dtype=torch.float64))

    def forward(self, x):
        self.seen.to(self.seen.device).add_(x.detach().sum(0))
        self.steps.double().add_(1)  # a float64 buffer: .double() is the buffer itself
        with torch.no_grad():
            self.lin.weight.cpu().mul_(0.9)  # eager lets a parameter be written under no_grad
        return self.lin(x) * self.seen.float()


class Copies(nn.Module):
    """Conversions that copy: the buffer and parameter must stay as they are."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("seen", torch.zeros(3))

    def forward(self, x):
        y = self.seen.to(torch.float64)
        y.add_(1)
        w = self.lin.weight.t().contiguous()
        with torch.no_grad():
            w.mul_(2)
        return self.lin(x) + y.float() + w.sum()


class TypedBuffer(nn.Module):
    """A buffer written through ``type_as`` and ``contiguous`` of itself, read back through ``reshape``."""

    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.zeros(2, 3))
        self.scale = nn.Parameter(torch.ones(3))

    def forward(self, x):
        self.acc.type_as(x).contiguous().add_(x.detach())
        return self.acc.reshape(-1).sum() * self.scale + x.sum(0)


MODULES = {"counter": Counter, "copies": Copies, "typed-buffer": TypedBuffer}


@pytest.mark.parametrize("entry", ["jit", "compile"])
@pytest.mark.parametrize("name", list(MODULES))
def test_module_state_written_through_conversions(name, entry):
    """Outputs, gradients, and every parameter and buffer after each call equal eager's."""
    torch.manual_seed(0)
    eager = MODULES[name]()
    mine = copy.deepcopy(eager)
    torch._dynamo.reset()
    compiled = thunderlab.jit(mine) if entry == "jit" else torch.compile(mine, backend="thunderlab")
    for step in range(3):
        x = torch.randn(2, 3, generator=torch.Generator().manual_seed(step))
        want, got = eager(x), compiled(x)
        torch.testing.assert_close(got, want, msg=lambda m, step=step: f"step {step} output: {m}")
        want.sum().backward()
        got.sum().backward()
        for (n, pe), pm in zip(eager.named_parameters(), mine.parameters()):
            torch.testing.assert_close(pm, pe, msg=lambda m, n=n, step=step: f"step {step} parameter {n}: {m}")
            torch.testing.assert_close(pm.grad, pe.grad, msg=lambda m, n=n, step=step: f"step {step} grad {n}: {m}")
        for (n, be), bm in zip(eager.named_buffers(), mine.buffers()):
            torch.testing.assert_close(bm, be, msg=lambda m, n=n, step=step: f"step {step} buffer {n}: {m}")
    harness.OUTCOMES.append((entry, "ok"))


# -- Tensor.cuda: "If this object is already in CUDA memory and on the correct device, then no copy is
# performed and the original object is returned." (needs a GPU)
def cuda_write(x):
    x.cuda().add_(1)
    return x


def to_cuda_write(x):
    x.to("cuda").mul_(2)
    return x


def to_cpu_from_cuda_is_a_copy(x):
    y = x.to("cpu")
    y.add_(1)
    return x, y


def cuda_returned(x):
    return x.cuda()


CUDA_CASES = {
    "cuda": cuda_write, "to-cuda": to_cuda_write, "to-cpu-copy": to_cpu_from_cuda_is_a_copy,
    "cuda-returned": cuda_returned,
}


@pytest.mark.cuda
@pytest.mark.parametrize("name", list(CUDA_CASES))
def test_cuda_conversion(name):
    # a move between devices inside a trace is refused by name
    check(CUDA_CASES[name], lambda: (torch.randn(2, 3, device="cuda"),), entries=("jit", "compile"),
          random_stream=False, refusal=r"moving \w+ from cuda:0 to cpu is not supported")
