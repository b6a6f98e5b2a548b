"""In-place writes through views and aliases, compared with eager PyTorch.

Written from PyTorch's documentation of views ("Tensor Views"): a view shares its base's
storage, so a write through the view is a write to the base and every other view of it;
an in-place op on an input mutates the caller's tensor; a returned view is still a view of
its base. Programs that write to a leaf that requires grad are errors in eager too, so the
gradient cases write to an intermediate.
"""
import pytest
import torch

from tests.semantics.harness import check


def _m(*shape, grad=False, dtype=torch.float32):
    return lambda: (torch.randn(*shape, dtype=dtype, requires_grad=grad),)


def diagonal_write(x):
    x.diagonal().mul_(2)
    return x


def diagonal_add_intermediate(x):
    y = x * 1
    y.diagonal().add_(1)
    return y * 3


def transpose_write(x):
    x.T.add_(torch.arange(3.0))
    return x


def t_write_intermediate(x):
    y = x + 0
    y.t()[0].mul_(5)
    return y


def movedim_write(x):
    x.movedim(0, -1).mul_(torch.tensor([1.0, 2.0]))
    return x


def unfold_write(x):
    x.unfold(0, 2, 2).select(-1, 0).zero_()
    return x


def complex_real_write(z):
    z.real.mul_(2)
    return z


def complex_imag_write(z):
    z.imag.add_(1)
    return z.abs()


def setitem_scalar(x):
    x[1] = 7.0
    return x


def setitem_slice(x):
    x[:, 1:3] = torch.ones(4, 2)
    return x * 2


def setitem_mask(x):
    x[x > 0] = 0.0
    return x


def setitem_index_tensor(x):
    idx = torch.tensor([0, 2])
    x[idx] = 1.0
    return x


def index_put_intermediate(x):
    y = x * 2
    y.index_put_((torch.tensor([1, 3]),), torch.tensor(5.0))
    return y


def slice_write(x):
    x[1:3].mul_(10)
    return x


def narrow_copy(x):
    x.narrow(1, 0, 2).copy_(torch.full((3, 2), 4.0))
    return x


def two_views_one_buffer(x):
    a = x[0]
    b = x.view(-1)
    a.add_(1)
    return b * 2


def views_read_after_write(x):
    v = x.view(2, 3)
    w = x[2:]
    x.mul_(3)
    return v + 0, w + 0


def view_of_view_write(x):
    v = x.view(2, 6)[:, ::2]
    v.fill_(0)
    return x.sum(), x


def write_base_read_view(x):
    y = x.clone()
    v = y[0]
    y.add_(1)
    return v * 2


def mutate_and_return_view(x):
    x.add_(1)
    return x.view(-1)


def mutate_and_return_transpose(x):
    x.mul_(2)
    return x.t()


def return_view_of_input(x):
    return x[1:]


def return_input_itself(x):
    return x


def return_mutated_input(x):
    return x.sub_(1)


def intermediate_view_mutated_grad(x):
    y = x.sin()
    y[:, 0].mul_(2)
    return y.sum(1)


def relu_inplace_on_slice(x):
    y = x * 1
    torch.relu_(y[1:])
    return y


def chained_inplace_on_view(x):
    y = x.clone()
    d = y.diagonal()
    d.mul_(2).add_(1)
    return y, d


def copy_into_expanded_target(x):
    out = torch.zeros(3, 4)
    out[:, :2].copy_(x[:, :1].expand(3, 2))
    return out


def inplace_on_view_of_input_returns_base(x):
    x[0].zero_()
    return x.sum()


def write_view_return_view(x):
    v = x[0]
    v.add_(1)
    return v


def detach_view_write(x):
    x.detach().zero_()
    return x.sum()


def same_dtype_conversion_is_the_input(x):
    y = x.float()
    y.add_(1)
    return x


def reshape_copy_is_not_a_view(x):
    x.t().reshape(-1).add_(1)
    return x


def contiguous_copy_is_not_a_view(x):
    y = x.t().contiguous()
    y.mul_(2)
    return x, y


def split_piece_write(x):
    a, b = x.split(2)
    b.mul_(2)
    return x


def unbind_write(x):
    rows = x.unbind(0)
    rows[1].fill_(3)
    return x


def masked_fill_on_view(x):
    x[:, 0].masked_fill_(x[:, 0] > 0, 0.0)
    return x


def clamp_on_slice(x):
    y = x * 2
    y[1:].clamp_(min=0)
    return y


def uniform_on_slice(x):
    x[::2].uniform_()
    return x


def two_views_returned(x):
    y = x * 2
    return y[0], y[1]


def relu_module_inplace(x):
    y = x * 1
    torch.nn.functional.relu(y[:, 1:], inplace=True)
    return y


def graph_break_write_to_nonleaf(x):
    h = x * 2
    torch._dynamo.graph_break()  # the next graph gets h, a tensor with a gradient history, and writes it
    h.mul_(3)
    torch._dynamo.graph_break()
    return h * 3


def graph_break_write_view_of_nonleaf(x):
    h = x * x
    torch._dynamo.graph_break()
    h[0].add_(h[1])
    torch._dynamo.graph_break()
    return h


def unsqueeze_inplace(x):
    x.unsqueeze_(0)
    return x


CASES = {
    "diagonal": (diagonal_write, _m(3, 3)),
    "diagonal-grad": (diagonal_add_intermediate, _m(3, 3, grad=True)),
    "T": (transpose_write, _m(3, 2)),
    "t-grad": (t_write_intermediate, _m(3, 4, grad=True)),
    "movedim": (movedim_write, _m(2, 3)),
    "unfold": (unfold_write, _m(6)),
    "complex-real": (complex_real_write, _m(4, dtype=torch.complex64)),
    "complex-imag": (complex_imag_write, _m(4, dtype=torch.complex64)),
    "setitem-scalar": (setitem_scalar, _m(3, 2)),
    "setitem-slice": (setitem_slice, _m(4, 4)),
    "setitem-mask": (setitem_mask, _m(5)),
    "setitem-index": (setitem_index_tensor, _m(4)),
    "index_put-grad": (index_put_intermediate, _m(4, grad=True)),
    "slice": (slice_write, _m(4)),
    "narrow-copy": (narrow_copy, _m(3, 3)),
    "two-views": (two_views_one_buffer, _m(2, 3)),
    "views-read-after-write": (views_read_after_write, _m(6)),
    "view-of-view": (view_of_view_write, _m(12)),
    "write-base-read-view": (write_base_read_view, _m(2, 3, grad=True)),
    "mutate-return-view": (mutate_and_return_view, _m(2, 3)),
    "mutate-return-t": (mutate_and_return_transpose, _m(2, 3)),
    "return-view": (return_view_of_input, _m(3)),
    "return-input": (return_input_itself, _m(3)),
    "return-mutated": (return_mutated_input, _m(3)),
    "intermediate-view-grad": (intermediate_view_mutated_grad, _m(3, 2, grad=True)),
    "relu_-slice": (relu_inplace_on_slice, _m(3, 2, grad=True)),
    "chained-on-view": (chained_inplace_on_view, _m(3, 3, grad=True)),
    "copy-into-slice": (copy_into_expanded_target, _m(3, 4, grad=True)),
    "view-of-input-zero": (inplace_on_view_of_input_returns_base, _m(2, 3)),
    "write-view-return-view": (write_view_return_view, _m(2, 3)),
    "detach-zero_": (detach_view_write, _m(2, 3)),
    "float-is-self": (same_dtype_conversion_is_the_input, _m(3)),
    "reshape-copy": (reshape_copy_is_not_a_view, _m(2, 3)),
    "contiguous-copy": (contiguous_copy_is_not_a_view, _m(2, 3)),
    "split-piece": (split_piece_write, _m(4)),
    "unbind-row": (unbind_write, _m(3, 2)),
    "masked_fill_-view": (masked_fill_on_view, _m(3, 2)),
    "clamp_-slice-grad": (clamp_on_slice, _m(3, 2, grad=True)),
    "uniform_-slice": (uniform_on_slice, _m(5)),
    "two-views-returned": (two_views_returned, _m(2, 3, grad=True)),
    "relu-inplace-kwarg": (relu_module_inplace, _m(3, 3, grad=True)),
    "graph-break-nonleaf": (graph_break_write_to_nonleaf, _m(4, grad=True)),
    "graph-break-nonleaf-view": (graph_break_write_view_of_nonleaf, _m(2, 3, grad=True)),
}


def test_inplace_view_ops_are_refused_by_name():
    """``unsqueeze_`` changes its tensor's shape in place: no functional value can stand for it."""
    check(unsqueeze_inplace, _m(3), refusal=r"unsqueeze_")


@pytest.mark.parametrize("name", list(CASES))
def test_single_input(name):
    fn, make = CASES[name]
    check(fn, make)


# two inputs that alias each other: the same tensor twice, or overlapping views of one base
def add_into_first(a, b):
    a.add_(b)
    return a + b


def add_one_then_sum(a, b):
    a.add_(1)
    return a + b


def write_then_read(a, b):
    a.mul_(2)
    return b.clone()


def _same_twice():
    x = torch.randn(4)
    return x, x


def _overlapping():
    base = torch.randn(6)
    return base[:4], base[2:]


def _row_and_column():
    base = torch.randn(3, 3)
    return base[0], base[:, 0]


def _disjoint_views():
    base = torch.randn(6)
    return base[:3], base[3:]


ALIASED = {
    "same-twice-add": (add_into_first, _same_twice),
    "same-twice-read": (write_then_read, _same_twice),
    "overlap-add": (add_one_then_sum, _overlapping),
    "overlap-read": (write_then_read, _overlapping),
    "row-column": (write_then_read, _row_and_column),
    "disjoint": (write_then_read, _disjoint_views),
}


@pytest.mark.parametrize("name", list(ALIASED))
def test_aliased_inputs(name):
    """Overlapping inputs of which one is written are refused, naming both (TorchDynamo passes a
    tensor given twice as one input, which is handled like any other)."""
    fn, make = ALIASED[name]
    check(fn, make, entries=("jit", "compile"), refusal=r"writes to input \w+, which shares memory with input \w+")
