"""Torch-level symbols (``ltorch``): the operations a captured PyTorch program calls.

Each symbol runs eagerly with the torch function it stands for, and most carry a
decomposition into prims (broadcasting, type promotion and reductions spelled out), which
the ``claim`` pass uses when no executor takes the op whole. Symbols without a
decomposition compute their metadata on the meta device.
"""
from __future__ import annotations

import builtins
import math

import torch
import torch.nn.functional as F
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as K
from torch._prims_common import elementwise_dtypes

from thunderlab.core.proxies import TensorProxy
from thunderlab.core.symbols import Symbol, Tag
from thunderlab.core.trace import TraceError, current_trace

from . import prims
from .prims import torch_meta

# name -> (symbol, torch callables it stands for, Tensor method names)
TORCH_SYMBOLS: dict[str, tuple[Symbol, tuple, tuple]] = {}


def torchsymbol(*fns, name=None, methods=(), impl=None, decompose=True, **flags):
    """Declare a torch-level symbol whose decomposition is the decorated function.

    A decomposition may return ``NotImplemented`` for arguments it does not cover; the call
    is then kept whole, with metadata from the meta device.
    """

    def deco(fn):
        n = name or fn.__name__.strip("_")
        run = impl or fns[0]
        sym = Symbol(
            name=n, module="ltorch", impl=run,
            decomposition=fn if decompose else None,
            meta=torch_meta(run, f"ltorch.{n}"),
            **flags,
        )
        TORCH_SYMBOLS[n] = (sym, tuple(fns), tuple(methods))
        if not hasattr(builtins, n):  # ltorch.int, ltorch.abs, ... resolve through __getattr__
            globals()[n] = sym
        return sym

    return deco


def __getattr__(name: str) -> Symbol:
    try:
        return TORCH_SYMBOLS[name][0]
    except KeyError:
        raise AttributeError(f"thunderlab.ops.ltorch has no symbol {name!r}") from None


def opaque_symbol(name, *fns, methods=(), impl=None, **flags) -> Symbol:
    """A torch-level symbol with no decomposition: executors take it whole."""
    return torchsymbol(*fns, name=name, methods=methods, impl=impl, decompose=False, **flags)(lambda *a, **k: None)


def _is_t(x) -> bool:
    return isinstance(x, TensorProxy)


def _dim(d: int, ndim: int) -> int:
    n = builtins.max(ndim, 1)
    if not -n <= d < n:
        raise TraceError(f"dimension {d} is out of range for a tensor with {ndim} dimensions (valid: {-n}..{n - 1})")
    return d % n


def dims_of(a, dim) -> tuple[int, ...]:
    if dim is None or dim == [] or dim == ():
        return tuple(range(a.ndim))
    if isinstance(dim, int):
        dim = (dim,)
    return tuple(sorted({_dim(d, a.ndim) for d in dim}))


# -- promotion and broadcasting ------------------------------------------------------------
def _stand_in(x):
    if _is_t(x):
        return torch.empty(() if x.ndim == 0 else (1,), dtype=x.dtype, device="meta")
    return x


def _promote(*args, kind=K.DEFAULT):
    vals = [_stand_in(a) for a in args if a is not None]
    return elementwise_dtypes(*vals, type_promotion_kind=kind)


def broadcast_to_shape(a, shape):
    shape = tuple(shape)
    if not _is_t(a) or a.shape == shape:
        return a
    offset = len(shape) - a.ndim
    return prims.broadcast_in_dim(a, shape, tuple(range(offset, len(shape))))


def _broadcast(*args):
    shapes = [a.shape for a in args if _is_t(a)]
    try:
        shape = tuple(torch.broadcast_shapes(*shapes))
    except RuntimeError:
        raise TraceError(f"shapes {[list(s) for s in shapes]} cannot be broadcast together") from None
    return [broadcast_to_shape(a, shape) for a in args]


def _convert(a, dtype):
    if _is_t(a) and a.dtype != dtype:
        return prims.convert_element_type(a, dtype)
    return a


def _elementwise(prim, *args, kind=K.DEFAULT):
    comp, res = _promote(*args, kind=kind)
    if not builtins.any(_is_t(a) for a in args):  # numbers only (torch.add(2.0, 3.0)): a 0-d tensor results
        args = (prims.full((), args[0], dtype=comp, device=torch.device("cpu")),) + args[1:]
    args = _broadcast(*args)
    out = prim(*[_convert(a, comp) for a in args])
    return _convert(out, res) if out.dtype != res and res != torch.bool else out


# -- elementwise unary -------------------------------------------------------------------
def _unary(pname, kind, fn, methods=()):
    p = prims.PRIMS[pname]

    def decomposition(a):
        return _elementwise(p, a, kind=kind)

    decomposition.__name__ = pname
    return torchsymbol(fn, name=pname, methods=methods)(decomposition)


_INT_TO_FLOAT = ["exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "asin",
                 "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sqrt", "rsqrt",
                 "erf", "erfc", "erfinv", "lgamma", "digamma", "sigmoid", "reciprocal"]
_SAME = ["abs", "neg", "floor", "ceil", "trunc", "sign", "bitwise_not"]
for _n in _INT_TO_FLOAT:
    _unary(_n, K.INT_TO_FLOAT, getattr(torch, _n), methods=(_n,))
for _n in _SAME:
    _unary(_n, K.DEFAULT, getattr(torch, _n), methods=(_n,))
for _n in ["isnan", "isinf", "isfinite", "signbit", "logical_not"]:
    _unary(_n, K.ALWAYS_BOOL, getattr(torch, _n), methods=(_n,))


@torchsymbol(torch.round, methods=("round",))
def round(a, *, decimals=0):
    if decimals == 0:
        return _elementwise(prims.round, a)
    if not a.dtype.is_floating_point:
        return NotImplemented
    # as torch does: scale, round half to even, scale back (dividing by 10**-d for negative d)
    if decimals > 0:
        scale = 10.0 ** decimals
        return prims.div(prims.round(prims.mul(a, scale)), scale)
    scale = 10.0 ** -decimals
    return prims.mul(prims.round(prims.div(a, scale)), scale)


TORCH_SYMBOLS["sigmoid"] = (sigmoid, (torch.sigmoid, torch.nn.functional.sigmoid), ("sigmoid",))  # noqa: F821
TORCH_SYMBOLS["tanh"] = (tanh, (torch.tanh, torch.nn.functional.tanh), ("tanh",))  # noqa: F821


# -- elementwise binary ------------------------------------------------------------------
def _binary(pname, fn, kind=K.DEFAULT, methods=(), extra=()):
    p = prims.PRIMS[pname]

    def decomposition(a, b):
        return _elementwise(p, a, b, kind=kind)

    decomposition.__name__ = pname
    return torchsymbol(fn, *extra, name=pname, methods=methods)(decomposition)


import operator  # noqa: E402

_binary("maximum", torch.maximum, methods=("maximum",))
_binary("minimum", torch.minimum, methods=("minimum",))
_binary("atan2", torch.atan2, kind=K.INT_TO_FLOAT, methods=("atan2",))
_binary("fmod", torch.fmod, methods=("fmod",))
_binary("remainder", torch.remainder, methods=("remainder",), extra=(operator.mod,))
_binary("bitwise_and", torch.bitwise_and, methods=("bitwise_and", "__and__"), extra=(operator.and_,))
_binary("bitwise_or", torch.bitwise_or, methods=("bitwise_or", "__or__"), extra=(operator.or_,))
_binary("bitwise_xor", torch.bitwise_xor, methods=("bitwise_xor", "__xor__"), extra=(operator.xor,))
for _n, _op in [("eq", operator.eq), ("ne", operator.ne), ("lt", operator.lt), ("le", operator.le),
                ("gt", operator.gt), ("ge", operator.ge)]:
    _binary(_n, getattr(torch, _n), kind=K.ALWAYS_BOOL, methods=(_n, f"__{_n}__"), extra=(_op,))
for _n in ["logical_and", "logical_or", "logical_xor"]:
    _binary(_n, getattr(torch, _n), kind=K.ALWAYS_BOOL, methods=(_n,))


@torchsymbol(torch.add, operator.add, methods=("add", "__add__", "__radd__"))
def add(a, b, *, alpha=None):
    if alpha is not None and alpha != 1:
        b = mul(b, alpha)
    return _elementwise(prims.add, a, b)


@torchsymbol(torch.sub, operator.sub, methods=("sub", "__sub__"))
def sub(a, b, *, alpha=None):
    if alpha is not None and alpha != 1:
        b = mul(b, alpha)
    return _elementwise(prims.sub, a, b)


@torchsymbol(torch.rsub, methods=("__rsub__",))
def rsub(a, b, *, alpha=None):
    return sub(b, a) if alpha is None else sub(b, a, alpha=alpha)


@torchsymbol(torch.mul, operator.mul, methods=("mul", "__mul__", "__rmul__"))
def mul(a, b):
    return _elementwise(prims.mul, a, b)


def _div_impl(a, b, *, rounding_mode=None):
    return torch.div(a, b, rounding_mode=rounding_mode)


@torchsymbol(torch.div, torch.true_divide, operator.truediv, methods=("div", "true_divide", "__truediv__"), impl=_div_impl)
def div(a, b, *, rounding_mode=None):
    if rounding_mode is None:
        return _elementwise(prims.div, a, b, kind=K.INT_TO_FLOAT)
    comp, res = _promote(a, b)
    if comp.is_floating_point:
        q = _elementwise(prims.div, a, b, kind=K.INT_TO_FLOAT)
        q = prims.trunc(q) if rounding_mode == "trunc" else prims.floor(q)
        return _convert(q, res)
    if rounding_mode == "floor":
        return floor_divide(a, b)
    # integer truncation: divide in float64, exact for the magnitudes torch tests use
    q = _elementwise(prims.div, _convert(a, torch.float64) if _is_t(a) else float(a),
                     _convert(b, torch.float64) if _is_t(b) else float(b))
    return _convert(prims.trunc(q), res)


@torchsymbol(torch.floor_divide, operator.floordiv, methods=("floor_divide", "__floordiv__"))
def floor_divide(a, b):
    comp, res = _promote(a, b)
    if comp.is_floating_point:
        return _convert(prims.floor(_elementwise(prims.div, a, b, kind=K.INT_TO_FLOAT)), res)
    # integers: floor of the exact quotient, computed in float64
    q = _elementwise(prims.div, _convert(a, torch.float64) if _is_t(a) else float(a),
                     _convert(b, torch.float64) if _is_t(b) else float(b))
    return _convert(prims.floor(q), res)


@torchsymbol(torch.pow, operator.pow, methods=("pow", "__pow__"))
def pow(a, b):
    return _elementwise(prims.pow, a, b)


@torchsymbol(torch.where)
def where(condition, a, b):
    comp, res = _promote(a, b)
    condition, a, b = _broadcast(condition, a, b)
    if not _is_t(a) and not _is_t(b):
        a = prims.full(condition.shape, a, dtype=res, device=condition.device)
    return prims.where(condition, _convert(a, res) if _is_t(a) else a, _convert(b, res) if _is_t(b) else b)


def _tensor_where_impl(a, condition, other):
    return torch.where(condition, a, other)


@torchsymbol(torch.Tensor.where, name="tensor_where", methods=("where",), impl=_tensor_where_impl)
def tensor_where(a, condition, other):
    """``a.where(condition, other)``: the method takes the values first, unlike ``torch.where``."""
    return where(condition, a, other)


@torchsymbol(torch.clamp, torch.clip, methods=("clamp", "clip"))
def clamp(a, min=None, max=None):
    out = a
    if min is not None:
        out = maximum(out, min) if _is_t(min) else where(lt(out, min), min, out)
    if max is not None:
        out = minimum(out, max) if _is_t(max) else where(gt(out, max), max, out)
    if out is a:
        raise TraceError("clamp: at least one of min and max must be given")
    return out


@torchsymbol(torch.masked_fill, methods=("masked_fill",))
def masked_fill(a, mask, value):
    if _is_t(value):
        return where(mask, broadcast_to_shape(_convert(value, a.dtype), a.shape), a)
    return _convert(where(mask, value, a), a.dtype)  # the result keeps a's dtype (True for 10 in a bool tensor)


@torchsymbol(torch.lerp, methods=("lerp",))
def lerp(a, end, weight):
    return add(a, mul(weight, sub(end, a)))


@torchsymbol(torch.addcmul, methods=("addcmul",))
def addcmul(a, t1, t2, *, value=1):
    return add(a, mul(mul(t1, t2), value))


# -- activations -------------------------------------------------------------------------
@torchsymbol(torch.relu, F.relu, methods=("relu",), impl=F.relu)
def relu(a, inplace=False):
    return where(le(a, 0), 0, a)


@torchsymbol(F.gelu, torch._C._nn.gelu, methods=())
def gelu(a, approximate="none"):
    if approximate == "tanh":
        inner = mul(math.sqrt(2 / math.pi), add(a, mul(0.044715, mul(a, mul(a, a)))))
        return mul(mul(0.5, a), add(1, tanh(inner)))  # noqa: F821
    if approximate != "none":
        raise TraceError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return mul(mul(0.5, a), add(1, erf(mul(a, 1 / math.sqrt(2)))))  # noqa: F821


@torchsymbol(F.silu, torch._C._nn.silu)
def silu(a, inplace=False):
    return mul(a, sigmoid(a))  # noqa: F821


@torchsymbol(F.softplus, torch._C._nn.softplus)
def softplus(a, beta=1.0, threshold=20.0):
    scaled = mul(a, beta)
    soft = div(log1p(exp(scaled)), beta)  # noqa: F821
    return where(gt(scaled, threshold), a, soft)


@torchsymbol(F.leaky_relu, torch._C._nn.leaky_relu)
def leaky_relu(a, negative_slope=0.01, inplace=False):
    return where(gt(a, 0), a, mul(a, negative_slope))


@torchsymbol(F.elu, torch._C._nn.elu)
def elu(a, alpha=1.0, scale=1.0, input_scale=1.0, inplace=False):
    neg = mul(mul(expm1(mul(a, input_scale)), alpha), scale)  # noqa: F821
    return where(gt(a, 0), mul(a, scale), neg)


@torchsymbol(F.hardtanh, torch._C._nn.hardtanh)
def hardtanh(a, min_val=-1.0, max_val=1.0, inplace=False):
    if not a.dtype.is_floating_point:  # the result keeps a's dtype: torch truncates the bounds
        min_val, max_val = int(min_val), int(max_val)
    return clamp(a, min_val, max_val)


@torchsymbol(F.relu6, torch._C._nn.relu6 if hasattr(torch._C._nn, "relu6") else F.relu6)
def relu6(a, inplace=False):
    return clamp(a, 0, 6)


# -- conversion --------------------------------------------------------------------------
def _to_impl(a, *args, **kwargs):
    return a.to(*args, **kwargs)


@torchsymbol(torch.Tensor.to, methods=("to",), impl=_to_impl)
def to(a, *args, dtype=None, device=None, non_blocking=False, copy=False, memory_format=None):
    for v in args:
        if isinstance(v, torch.dtype):
            dtype = v
        elif isinstance(v, (torch.device, str)):
            device = torch.device(v)
        elif _is_t(v):
            dtype, device = v.dtype, v.device
    if device is not None and torch.device(device) != a.device:
        raise TraceError(f"to: moving {a.name} from {a.device} to {device} is not supported inside a trace")
    return prims.convert_element_type(a, dtype or a.dtype)


@torchsymbol(torch.Tensor.cpu, methods=("cpu",))
def cpu(a, memory_format=None):
    return to(a, device="cpu")  # the tensor itself when it is on the CPU already, as in eager


def _as(dtype, mname):
    def decomposition(a, memory_format=None):
        return prims.convert_element_type(a, dtype)

    torchsymbol(getattr(torch.Tensor, mname), name=mname, methods=(mname,))(decomposition)


for _d, _m in [(torch.float32, "float"), (torch.float64, "double"), (torch.float16, "half"),
               (torch.bfloat16, "bfloat16"), (torch.int64, "long"), (torch.int32, "int"), (torch.bool, "bool")]:
    _as(_d, _m)


@torchsymbol(torch.Tensor.type_as, methods=("type_as",))
def type_as(a, other):
    return prims.convert_element_type(a, other.dtype)


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


opaque_symbol("contiguous", torch.Tensor.contiguous, methods=("contiguous",),
              signature=lambda a, memory_format=torch.contiguous_format: None)

# -- creation ----------------------------------------------------------------------------
def shape_arg(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        return tuple(size[0])
    return tuple(size)


def _creation(name, fn, value):
    # torch.zeros(2, 3), torch.zeros((2, 3)) and torch.zeros(size=(2, 3)) (as BEiT calls it) are one call
    def decomposition(*sizes, size=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False,
                      out=None):
        return prims.full(shape_arg(sizes if size is None else (size,)), value, dtype=dtype or torch.get_default_dtype(),
                          device=torch.device(device or "cpu"), requires_grad=requires_grad)

    torchsymbol(fn, name=name)(decomposition)


_creation("zeros", torch.zeros, 0)
_creation("ones", torch.ones, 1)
_creation("empty", torch.empty, 0)


@torchsymbol(torch.full)
def full(size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
    if dtype is None:
        dtype = torch.bool if isinstance(fill_value, bool) else torch.int64 if isinstance(fill_value, int) else torch.get_default_dtype()
    return prims.full(tuple(size), fill_value, dtype=dtype, device=torch.device(device or "cpu"), requires_grad=requires_grad)


def _like(name, fn, value):
    def decomposition(a, *, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False, memory_format=None):
        return prims.full(a.shape, value, dtype=dtype or a.dtype, device=torch.device(device or a.device), requires_grad=requires_grad)

    torchsymbol(fn, name=name)(decomposition)


_like("zeros_like", torch.zeros_like, 0)
_like("ones_like", torch.ones_like, 1)
_like("empty_like", torch.empty_like, 0)


@torchsymbol(torch.full_like)
def full_like(a, fill_value, *, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False, memory_format=None):
    return prims.full(a.shape, fill_value, dtype=dtype or a.dtype, device=torch.device(device or a.device))


def _new_impl(name):
    return lambda a, *size, **kw: getattr(a, name)(*size, **kw)


for _name, _v in [("new_zeros", 0), ("new_ones", 1), ("new_empty", 0)]:
    def _mk(v):
        def decomposition(a, *size, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
            return prims.full(shape_arg(size), v, dtype=dtype or a.dtype, device=torch.device(device or a.device))
        return decomposition

    torchsymbol(getattr(torch.Tensor, _name), name=_name, methods=(_name,), impl=_new_impl(_name))(_mk(_v))


@torchsymbol(torch.arange)
def arange(start, end=None, step=1, *, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False, out=None):
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = torch.int64 if builtins.all(isinstance(v, int) for v in (start, end, step)) else torch.get_default_dtype()
    if not (dtype.is_floating_point or dtype.is_complex):  # torch truncates the bounds to integers first
        start, end, step = int(start), int(end), int(step)
    length = builtins.max(0, math.ceil((end - start) / step))
    return prims.iota(length, start=start, step=step, dtype=dtype, device=torch.device(device or "cpu"))


def _random_params(*size, generator=None, dtype=None, layout=None, device=None, pin_memory=False,
                   requires_grad=False, out=None): ...
def _random_like_params(a, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None): ...


opaque_symbol("rand", torch.rand, tags={Tag.RANDOM}, signature=_random_params)
opaque_symbol("randn", torch.randn, tags={Tag.RANDOM}, signature=_random_params)
opaque_symbol("rand_like", torch.rand_like, tags={Tag.RANDOM}, signature=_random_like_params)
opaque_symbol("randn_like", torch.randn_like, tags={Tag.RANDOM}, signature=_random_like_params)


# -- reductions --------------------------------------------------------------------------
def _keep(out, a, dims):
    shape = tuple(1 if i in dims else s for i, s in enumerate(a.shape))
    return prims.reshape(out, shape)


def _acc_dtype(a, dtype):
    if dtype is not None:
        return dtype
    return torch.int64 if (a.dtype == torch.bool or not (a.dtype.is_floating_point or a.dtype.is_complex)) else a.dtype


def _reduction(prim, a, dim, keepdim, dtype=None):
    dims = dims_of(a, dim)
    out = prim(_convert(a, dtype) if dtype else a, dims)
    return _keep(out, a, dims) if keepdim else out


@torchsymbol(torch.sum, methods=("sum",))
def sum(a, dim=None, keepdim=False, *, dtype=None):
    return _reduction(prims.sum, a, dim, keepdim, _acc_dtype(a, dtype))


@torchsymbol(torch.prod, methods=("prod",))
def prod(a, dim=None, keepdim=False, *, dtype=None):
    return _reduction(prims.prod, a, dim, keepdim, _acc_dtype(a, dtype))


@torchsymbol(torch.mean, methods=("mean",))
def mean(a, dim=None, keepdim=False, *, dtype=None):
    if not (a.dtype.is_floating_point or a.dtype.is_complex or dtype is not None):
        raise TraceError(f"mean: {a.name} has dtype {a.dtype}; mean needs a floating point or complex input")
    dims = dims_of(a, dim)
    n = math.prod(a.shape[d] for d in dims) if a.ndim else 1
    comp = dtype or a.dtype
    comp_up = torch.float32 if comp in (torch.float16, torch.bfloat16) else comp
    s = prims.sum(_convert(a, comp_up), dims)
    out = _convert(prims.div(s, n), comp)
    return _keep(out, a, dims) if keepdim else out


@torchsymbol(torch.amax, methods=("amax",))
def amax(a, dim=(), keepdim=False):
    return _reduction(prims.amax, a, dim, keepdim)


@torchsymbol(torch.amin, methods=("amin",))
def amin(a, dim=(), keepdim=False):
    return _reduction(prims.amin, a, dim, keepdim)


def _minmax(name, red, arg, cmp_prim):
    def decomposition(a, dim=None, keepdim=False):
        if _is_t(dim):  # torch.max(a, b) is maximum
            return cmp_prim(a, dim)
        if dim is None:
            return red(a)
        # argmax and argmin take no bool tensors; the positions are those of the same values as bytes
        return red(a, dim, keepdim), arg(_convert(a, torch.uint8) if a.dtype == torch.bool else a, dim, keepdim)

    return decomposition


@torchsymbol(torch.argmax, methods=("argmax",))
def argmax(a, dim=None, keepdim=False):
    if dim is None:
        out = prims.argmax(prims.reshape(a, (a.numel(),)) if a.ndim != 1 else a, 0)
        return prims.reshape(out, (1,) * a.ndim) if keepdim else out
    d = _dim(dim, a.ndim)
    out = prims.argmax(a, d) if a.ndim else prims.argmax(prims.reshape(a, (1,)), 0)
    return _keep(out, a, (d,)) if keepdim and a.ndim else out


@torchsymbol(torch.argmin, methods=("argmin",))
def argmin(a, dim=None, keepdim=False):
    if dim is None:
        out = prims.argmin(prims.reshape(a, (a.numel(),)) if a.ndim != 1 else a, 0)
        return prims.reshape(out, (1,) * a.ndim) if keepdim else out
    d = _dim(dim, a.ndim)
    out = prims.argmin(a, d) if a.ndim else prims.argmin(prims.reshape(a, (1,)), 0)
    return _keep(out, a, (d,)) if keepdim and a.ndim else out


torchsymbol(torch.max, name="max", methods=("max",))(_minmax("max", amax, argmax, maximum))  # noqa: F821
torchsymbol(torch.min, name="min", methods=("min",))(_minmax("min", amin, argmin, minimum))  # noqa: F821


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


def _var_impl(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):
        return torch.var(a, unbiased=dim)
    return torch.var(a, dim, correction=_correction(unbiased, correction), keepdim=keepdim)


@torchsymbol(torch.var, methods=("var",), impl=_var_impl)
def var(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    dims = dims_of(a, dim)
    out = prims.var(a, dims, correction=_correction(unbiased, correction))
    return _keep(out, a, dims) if keepdim else out


def _std_impl(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):
        return torch.std(a, unbiased=dim)
    return torch.std(a, dim, correction=_correction(unbiased, correction), keepdim=keepdim)


@torchsymbol(torch.std, methods=("std",), impl=_std_impl)
def std(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return prims.sqrt(var(a, dim, unbiased, keepdim, correction=correction))


def _var_mean_impl(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):
        return torch.var_mean(a, unbiased=dim)
    return torch.var_mean(a, dim, correction=_correction(unbiased, correction), keepdim=keepdim)


@torchsymbol(torch.var_mean, impl=_var_mean_impl)
def var_mean(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    dims = dims_of(a, dim)
    v, m = prims.var_mean(a, dims, correction=_correction(unbiased, correction))
    if keepdim:
        v, m = _keep(v, a, dims), _keep(m, a, dims)
    return v, m


@torchsymbol(torch.logsumexp, methods=("logsumexp",))
def logsumexp(a, dim, keepdim=False):
    dims = dims_of(a, dim)
    if a.ndim and builtins.any(a.shape[d] == 0 for d in dims):  # no maximum to shift by; the sum is 0, its log -inf
        out = log(prims.sum(exp(a), dims))  # noqa: F821
        return _keep(out, a, dims) if keepdim else out
    m = prims.amax(a, dims)
    m = where(isinf(m), 0, m)  # noqa: F821
    shifted = sub(a, _keep(m, a, dims))
    out = add(log(prims.sum(exp(shifted), dims)), m)  # noqa: F821
    return _keep(out, a, dims) if keepdim else out


@torchsymbol(torch.cumsum, methods=("cumsum",))
def cumsum(a, dim, *, dtype=None):
    return prims.cumsum(_convert(a, _acc_dtype(a, dtype)), _dim(dim, a.ndim))


@torchsymbol(torch.all, methods=("all",))
def all(a, dim=None, keepdim=False):
    return eq(_reduction(prims.sum, logical_not(a), dim, keepdim, torch.int64), 0)  # noqa: F821


@torchsymbol(torch.any, methods=("any",))
def any(a, dim=None, keepdim=False):
    return ne(_reduction(prims.sum, ne(a, 0), dim, keepdim, torch.int64), 0)  # noqa: F821


@torchsymbol(torch.topk, methods=("topk",))
def topk(a, k, dim=-1, largest=True, sorted=True):
    if a.ndim == 0:  # a 0-d tensor is its own top 1
        v, i = prims.topk(prims.reshape(a, (1,)), k, 0, largest, sorted)
        return prims.reshape(v, ()), prims.reshape(i, ())
    return prims.topk(a, k, _dim(dim, a.ndim), largest, sorted)


# the shape ops, views and neural-network ops live beside this file
from .torch_shape_ops import *  # noqa: E402,F401,F403
from .torch_nn_ops import *  # noqa: E402,F401,F403
