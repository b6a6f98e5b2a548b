"""Dtype conversion and copies: ``to``, ``float()`` and friends, ``clone``, ``detach``, ``contiguous``."""
from __future__ import annotations

import torch

from thunderlab.core.symbols import Tag
from thunderlab.core.trace import TraceError, current_trace

from . import prims
from .common import is_tensor
from .declare import backward_symbol, opaque_symbol, torchsymbol
from .rules import derivative


def _to_impl(a, *args, **kwargs):
    return a.to(*args, **kwargs)


def same_device(device, here: torch.device) -> bool:
    """Whether ``device`` as a user writes it (``"cuda"``, ``0``, ``torch.device("cpu")``) names ``here``.

    ``"cuda"`` without an index is the current CUDA device, as ``Tensor.to`` reads it."""
    d = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    if d.type != here.type:
        return False
    if d.index is None:
        return here.index is None or d.type != "cuda" or here.index == torch.cuda.current_device()
    return d.index == (here.index or 0)


def type_target(t) -> tuple[torch.dtype | None, str | None]:
    """``Tensor.type``'s argument as (dtype, device type): ``"torch.cuda.HalfTensor"``, ``torch.FloatTensor``,
    or a dtype (device None: the tensor's own)."""
    if isinstance(t, torch.dtype) or t is None:
        return t, None
    name = t if isinstance(t, str) else f"{t.__module__}.{t.__name__}"
    cls = getattr(torch.cuda if name.startswith("torch.cuda.") else torch, name.rsplit(".", 1)[-1], None)
    if not isinstance(getattr(cls, "dtype", None), torch.dtype):
        raise TraceError(f"type: {t!r} is not a tensor type (torch.FloatTensor, 'torch.cuda.HalfTensor', a dtype)")
    return cls.dtype, "cuda" if name.startswith("torch.cuda.") else "cpu"


@torchsymbol(torch.Tensor.to, methods=("to",), impl=_to_impl)
def to(a, *args, dtype=None, device=None, non_blocking=False, copy=False, memory_format=None):
    for v in args:
        if isinstance(v, torch.dtype):
            dtype = v
        elif isinstance(v, (torch.device, str)) or (isinstance(v, int) and not isinstance(v, bool)):
            device = v
        elif is_tensor(v):
            dtype, device = v.dtype, v.device
    if device is not None and not same_device(device, a.device):
        raise TraceError(f"to: moving {a.name} from {a.device} to {device} is not supported inside a trace")
    return prims.convert_element_type(a, dtype or a.dtype)


@torchsymbol(torch.Tensor.cpu, methods=("cpu",))
def cpu(a, memory_format=None):
    return to(a, device="cpu")  # the tensor itself when it is on the CPU already, as in eager


def _as(dtype, name):
    def decomposition(a, memory_format=None):
        return prims.convert_element_type(a, dtype)

    return torchsymbol(getattr(torch.Tensor, name), name=name, methods=(name,))(decomposition)


as_float = _as(torch.float32, "float")
as_double = _as(torch.float64, "double")
as_half = _as(torch.float16, "half")
as_bfloat16 = _as(torch.bfloat16, "bfloat16")
as_long = _as(torch.int64, "long")
as_int = _as(torch.int32, "int")
as_bool = _as(torch.bool, "bool")


def _type_impl(a, dtype=None, non_blocking=False, **kwargs):
    return a.type(dtype, non_blocking, **kwargs)


@torchsymbol(torch.Tensor.type, name="type", methods=("type",), impl=_type_impl)
def type_(a, dtype=None, non_blocking=False):
    if dtype is None:
        return NotImplemented  # the type's name, a string
    dtype, device = type_target(dtype)
    return to(a, dtype, device=device)  # the tensor itself when it has that type already, as in eager


@torchsymbol(torch.Tensor.type_as, methods=("type_as",))
def type_as(a, other):
    return prims.convert_element_type(a, other.dtype)


@derivative(to, type_, as_float, type_as, as_half, as_bfloat16, as_double)
def _(b, g):
    a = b.params.a
    return [(a, to(g, a.dtype) if g.dtype != a.dtype else g)]


@torchsymbol(torch.clone, methods=("clone",))
def clone(a, *, memory_format=None):
    return prims.convert_element_type(a, a.dtype)


@torchsymbol(torch.Tensor.detach, torch.detach, methods=("detach",))
def detach(a):
    # the same values, made with grad off: no gradient flows back through them
    tr = current_trace()
    mode, tr.grad_enabled = tr.grad_enabled, False
    try:
        return prims.convert_element_type(a, a.dtype)
    finally:
        tr.grad_enabled = mode


contiguous = opaque_symbol("contiguous", torch.Tensor.contiguous, methods=("contiguous",),
                           signature=lambda a, memory_format=torch.contiguous_format: None)


@derivative(contiguous, clone)
def _(b, g):
    return [(b.params.a, g)]


def _layout_like(a, like):
    """``a`` (contiguous or not) in ``like``'s memory format: channels-last when ``like`` is a channels-last 4-D
    tensor, else contiguous. The channels-last pass returns a convolution network's 4-D outputs this way: as eager
    returns them, in the layout of the input the network was given."""
    nhwc = like.dim() == 4 and not like.is_contiguous() and like.is_contiguous(memory_format=torch.channels_last)
    return a.contiguous(memory_format=torch.channels_last if nhwc else torch.contiguous_format)


layout_like = backward_symbol("layout_like", _layout_like)


@derivative(layout_like)
def _(b, g):
    return [(b.params.a, g)]


# -- gradient hooks ------------------------------------------------------------------------
# ``y.register_hook(fn)`` on a value the program computes: TorchDynamo hands it over as
# ``higher_order.register_hook(y, hook)``, whose result stands for ``y`` from then on. Forward, the
# same values; backward, the gradient of ``y`` is what ``hook`` makes of it (unchanged when it
# returns None), as eager autograd calls the hook when ``y``'s gradient is computed.


def _grad_hook_impl(a, hook):
    return a


try:  # torch 2.12 and later: Dynamo hands ``y.register_hook`` over as this higher-order op
    from torch._higher_order_ops.register_hook import register_hook_op
    _GRAD_HOOK_TARGETS: tuple = (register_hook_op,)
except ImportError:  # earlier torch has no such op, so no captured program holds one
    _GRAD_HOOK_TARGETS = ()


@torchsymbol(*_GRAD_HOOK_TARGETS, impl=_grad_hook_impl)
def grad_hook(a, hook):
    return prims.convert_element_type(a, a.dtype)


def _apply_grad_hook(hook, g):
    out = hook(g)
    return g if out is None else out


apply_grad_hook = backward_symbol("apply_grad_hook", _apply_grad_hook, lambda hook, g: prims.new_proxy(
    g.shape, g.dtype, g.device, [g]), tags={Tag.DONT_RECOMPUTE, Tag.SIDE_EFFECT})


@derivative(grad_hook)
def _(b, g):
    return [(b.params.a, apply_grad_hook(b.params.hook, g))]
