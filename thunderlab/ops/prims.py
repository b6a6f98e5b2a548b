"""The primitives: the operations every torch-level op decomposes into.

Each prim has a meta function that checks its contract and computes output metadata, and
a torch implementation. Elementwise prims take tensors of one shape and one dtype (or
Python numbers); broadcasting and type promotion happen above, in the torch-level ops.
"""
from __future__ import annotations

import builtins
import contextlib
import math
import re
from numbers import Number

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode

from thunderlab.core import fastpaths
from thunderlab.core.proxies import TensorProxy
from thunderlab.core.symbols import Kind, Symbol, Tag, tree_flatten, tree_map
from thunderlab.core.trace import TraceError, current_trace

PRIMS: dict[str, Symbol] = {}


def _tensors(*args) -> list[TensorProxy]:
    return [a for a in tree_flatten(args) if isinstance(a, TensorProxy)]


def _rg(tensors, dtype) -> bool:
    return (dtype.is_floating_point or dtype.is_complex) and any(t.requires_grad for t in tensors)


def new_proxy(shape, dtype, device, inputs=()):
    """A new proxy in the current trace; it requires grad when it is floating and an input does."""
    return current_trace().proxy(shape, dtype, device, _rg(inputs, dtype))


def prim(name: str, impl, meta, **flags) -> Symbol:
    sym = Symbol(name=name, module="prims", impl=impl, meta=meta, is_prim=True, **flags)
    PRIMS[name] = sym
    if not hasattr(builtins, name):  # prims.sum, prims.abs, ... resolve through __getattr__
        globals()[name] = sym
    return sym


def __getattr__(name: str) -> Symbol:
    try:
        return PRIMS[name]
    except KeyError:
        raise AttributeError(f"thunderlab.ops.prims has no primitive {name!r}") from None


def _check(cond: bool, msg) -> None:
    if not cond:
        raise TraceError(msg() if callable(msg) else msg)


# -- a meta via the meta device, for prims whose shape rules torch already states ----------
def _to_meta(v):
    return v.meta_tensor().requires_grad_(False) if isinstance(v, TensorProxy) else v


def torch_meta(fn, name: str, watch: frozenset = frozenset()):
    """A meta function that runs ``fn`` on meta-device tensors and proxies the results.

    ``watch`` names the effects to look for while it runs, each noted on the call being traced
    (``Trace.note_effect``, so it becomes that call's ``BoundSymbol.effects``): ``Tag.RANDOM`` when
    ``fn`` turns out to draw random numbers (an aten op PyTorch tags ``nondeterministic_seeded``
    runs inside it), ``Tag.SIDE_EFFECT`` when it writes into one of its tensor arguments (an aten
    op whose schema writes to a tensor sharing an argument's storage, as ``torch.instance_norm``
    updates its running statistics). A call with no tensor arguments
    runs for real (on the CPU): the random generator is restored after it, so tracing draws
    nothing. What ``fn`` gave is kept by what it depends on (``_meta_key``): a model's repeated
    layers, and a pass's calls checked again (core/verify.py), run it once per shape.
    """

    known: dict = {}  # what the meta gave for inputs of these shapes and dtypes (see _meta_key)

    def meta(*args, **kwargs):
        ins = _tensors(args, kwargs)
        key = _meta_key(args, kwargs) if ins else None
        found = known.get(key) if key is not None else None
        if found is None:
            found = run(ins, args, kwargs)
            if key is not None:
                if len(known) >= _META_KEPT:
                    known.clear()
                known[key] = found
        out, effects = found
        if effects and (tr := current_trace()) is not None:
            for tag in effects:
                tr.note_effect(tag)
        device = ins[0].device if ins else torch.device("cpu")
        return tree_map(lambda t: new_proxy(t.shape, t.dtype, device, ins) if isinstance(t, torch.Tensor) else t, out)

    def run(ins, args, kwargs):
        margs, mkwargs = tree_map(_to_meta, args), tree_map(_to_meta, kwargs)
        probe = None
        if watch:
            probe = _EffectProbe([t for t in tree_flatten((margs, mkwargs)) if isinstance(t, torch.Tensor)])
        keep = contextlib.nullcontext() if ins else torch.random.fork_rng(devices=[])
        try:
            with keep, probe or contextlib.nullcontext():
                out = fn(*margs, **mkwargs)
        except NotImplementedError as e:
            kernel = _no_meta_kernel(e)
            if kernel is None:
                raise TraceError(f"{name}: {e}") from None
            # torch's own text points at custom-op registration, which is not what a caller of torch.geqrf can do;
            # guessing the shapes by running the op on real inputs is no answer either (shapes may follow values)
            own = kernel.split("::")[-1].split(".")[0] == name.rsplit(".", 1)[-1]
            raise TraceError(
                f"{name} has no meta kernel in PyTorch {torch.__version__} ({kernel}"
                f"{'' if own else ', which it calls,'} cannot run on meta tensors), "
                f"so thunderlab cannot tell what it returns without running it; call {name} outside the compiled "
                f"function and pass its result in"
            ) from None
        except Exception as e:  # the message of torch's own check is the useful part
            raise TraceError(f"{name}: {e}") from None
        effects = () if probe is None else tuple(tag for tag, seen in ((Tag.RANDOM, probe.drew),
                                                                       (Tag.SIDE_EFFECT, probe.wrote))
                                                 if seen and tag in watch)
        return out, effects

    return meta


_META_KEPT = 4096  # meta results kept per symbol; all are dropped when one more would exceed it
_PLAIN = (type(None), bool, int, float, complex, str, torch.dtype, torch.device, torch.memory_format, torch.layout)


class _Unkeyed(Exception):
    """An argument a meta's result cannot be looked up by."""


def _key_of(v):
    if isinstance(v, TensorProxy):
        if not all(type(d) is int for d in v.shape):
            raise _Unkeyed
        return (TensorProxy, v.shape, v.dtype)
    if type(v) in _PLAIN:
        return (type(v), v)  # the type too: 1, 1.0 and True are equal keys otherwise
    if type(v) in (tuple, list):
        return (type(v), tuple(_key_of(x) for x in v))
    raise _Unkeyed


def _meta_key(args, kwargs):
    """What a ``torch_meta`` result depends on: each tensor's shape and dtype (its meta-device stand-in is made
    from those alone), every other argument's type and value, and the default dtype (Python scalars promote to
    it). None where an argument is of another kind, or a dispatch or function mode or autocast is on (each may
    change what the meta computes), or fast paths are off: the meta then runs."""
    if not fastpaths.enabled() or torch._C._len_torch_dispatch_stack() or torch._C._len_torch_function_stack() or \
            torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda"):
        return None
    try:
        return (torch.get_default_dtype(), _key_of(args), tuple((k, _key_of(v)) for k, v in kwargs.items()))
    except _Unkeyed:
        return None


_NO_META = re.compile(r"([\w.]+::[\w.]+): attempted to run this operator with Meta tensors"
                      r"|Could not run '([\w.]+::[\w.]+)' with arguments from the 'Meta' backend")


def _no_meta_kernel(e: NotImplementedError) -> str | None:
    """The aten operator ``e`` says has no meta (or fake) kernel, or None for any other NotImplementedError."""
    m = _NO_META.search(str(e))
    return (m.group(1) or m.group(2)) if m else None


class _EffectProbe(TorchDispatchMode):
    """Notes whether any aten op run under it draws from a random generator, or writes into ``arguments``."""

    def __init__(self, arguments: list[torch.Tensor]):
        super().__init__()
        self.drew = self.wrote = False
        self._storages = {StorageWeakRef(t.untyped_storage()) for t in arguments}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if torch.Tag.nondeterministic_seeded in func.tags:
            self.drew = True
        if not self.wrote and func._schema.is_mutable:
            for a, v in zip(func._schema.arguments, list(args) + [kwargs.get(x.name) for x in
                                                                  func._schema.arguments[len(args):]]):
                if (a.alias_info is not None and a.alias_info.is_write and isinstance(v, torch.Tensor)
                        and StorageWeakRef(v.untyped_storage()) in self._storages):
                    self.wrote = True
        return func(*args, **kwargs)


# -- elementwise ----------------------------------------------------------------------------
def _elementwise_meta(name: str, out_dtype=None):
    def meta(*args):
        ts = _tensors(args)
        _check(bool(ts), f"prims.{name} needs at least one tensor argument")
        a = ts[0]
        for t in ts[1:]:
            _check(
                t.shape == a.shape,
                lambda t=t: f"prims.{name}: shapes differ ({list(a.shape)} vs {list(t.shape)}); broadcast first",
            )
            _check(
                t.dtype == a.dtype, lambda t=t: f"prims.{name}: dtypes differ ({a.dtype} vs {t.dtype}); convert first"
            )
            _check(t.device == a.device, lambda t=t: f"prims.{name}: devices differ ({a.device} vs {t.device})")
        for v in args:
            _check(
                isinstance(v, (TensorProxy, Number)),
                lambda v=v: f"prims.{name}: expected tensors or numbers, got {type(v).__name__}",
            )
        return new_proxy(a.shape, out_dtype or a.dtype, a.device, ts)

    return meta


UNARY = {
    "abs": torch.abs, "neg": torch.neg, "exp": torch.exp, "exp2": torch.exp2, "expm1": torch.expm1,
    "log": torch.log, "log1p": torch.log1p, "log2": torch.log2, "log10": torch.log10,
    "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "asin": torch.asin, "acos": torch.acos,
    "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh, "tanh": torch.tanh,
    "asinh": torch.asinh, "acosh": torch.acosh, "atanh": torch.atanh, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal, "erf": torch.erf, "erfc": torch.erfc,
    "erfinv": torch.erfinv, "floor": torch.floor, "ceil": torch.ceil, "round": torch.round,
    "trunc": torch.trunc, "sign": torch.sign, "lgamma": torch.lgamma, "digamma": torch.digamma,
    "bitwise_not": torch.bitwise_not, "sigmoid": torch.sigmoid,
}
PREDICATES = {
    "isnan": torch.isnan, "isinf": torch.isinf, "isfinite": torch.isfinite,
    "signbit": torch.signbit, "logical_not": torch.logical_not,
}
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.true_divide,
    "remainder": torch.remainder, "fmod": torch.fmod, "pow": torch.pow,
    # integer division rounded toward zero, exact for every int64 (a quotient through float64 is not)
    "trunc_divide": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "maximum": torch.maximum, "minimum": torch.minimum, "atan2": torch.atan2,
    "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or, "bitwise_xor": torch.bitwise_xor,
}
COMPARISONS = {
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or, "logical_xor": torch.logical_xor,
}


def _binary_impl(fn):
    def impl(a, b):
        if not isinstance(a, torch.Tensor):  # torch's binary ops want the tensor first
            a = torch.scalar_tensor(a, dtype=b.dtype, device=b.device)
        return fn(a, b)

    return impl


def _unary_params(a): ...


for _n, _f in UNARY.items():
    prim(_n, _f, _elementwise_meta(_n), signature=_unary_params)
for _n, _f in PREDICATES.items():
    prim(_n, _f, _elementwise_meta(_n, torch.bool), signature=_unary_params)
for _n, _f in BINARY.items():
    prim(_n, _binary_impl(_f), _elementwise_meta(_n))
for _n, _f in COMPARISONS.items():
    prim(_n, _binary_impl(_f), _elementwise_meta(_n, torch.bool))


def _where_meta(pred, a, b):
    ts = _tensors(pred, a, b)
    shape = ts[0].shape
    for t in ts:
        _check(
            t.shape == shape,
            lambda t=t: f"prims.where: shapes differ ({list(shape)} vs {list(t.shape)}); broadcast first",
        )
    _check(not isinstance(pred, TensorProxy) or pred.dtype == torch.bool, "prims.where: the condition must be bool")
    vals = [v for v in (a, b) if isinstance(v, TensorProxy)]
    dtype = vals[0].dtype if vals else torch.get_default_dtype()
    for v in vals:
        _check(v.dtype == dtype, "prims.where: branch dtypes differ; convert first")
    return new_proxy(shape, dtype, ts[0].device, vals)


def _where_impl(pred, a, b):
    return torch.where(pred, a, b)


prim("where", _where_impl, _where_meta)


# -- conversion and creation ----------------------------------------------------------------
def _convert_meta(a, dtype):
    _check(isinstance(dtype, torch.dtype), f"prims.convert_element_type: dtype must be a torch.dtype, got {dtype!r}")
    return new_proxy(a.shape, dtype, a.device, [a])


prim("convert_element_type", lambda a, dtype: a.to(dtype), _convert_meta)


def _full_meta(shape, fill_value, *, dtype, device, requires_grad=False):
    return current_trace().proxy(shape, dtype, device, requires_grad)


prim("full", lambda shape, fill_value, *, dtype, device, requires_grad=False:
     torch.full(shape, fill_value, dtype=dtype, device=device, requires_grad=requires_grad), _full_meta)


def _iota_meta(length, *, start, step, dtype, device):
    return current_trace().proxy((length,), dtype, device)


prim("iota", lambda length, *, start, step, dtype, device:
     torch.arange(start, start + length * step, step, dtype=dtype, device=device)[:length], _iota_meta)


def _uniform_meta(shape, minval, maxval, *, dtype, device):
    return current_trace().proxy(shape, dtype, device)


prim("uniform", lambda shape, minval, maxval, *, dtype, device:
     torch.empty(shape, dtype=dtype, device=device).uniform_(minval, maxval), _uniform_meta, tags={Tag.RANDOM})


def _bernoulli_meta(a, p):
    return current_trace().proxy(a.shape, a.dtype, a.device)


def _bernoulli_impl(a, p):
    # laid out like ``a`` (empty_like keeps its strides), as eager's dropout lays out its noise: values
    # are drawn in memory order, so the layout decides which element gets which
    return torch.empty_like(a).bernoulli_(p)


# ones with probability p, in ``a``'s dtype: the noise of eager's dropouts, drawn as they draw it
prim("bernoulli", _bernoulli_impl, _bernoulli_meta, tags={Tag.RANDOM})


# -- shapes -------------------------------------------------------------------------------
def _broadcast_in_dim_meta(a, shape, broadcast_dimensions):
    _check(len(broadcast_dimensions) == a.ndim,
           f"prims.broadcast_in_dim: {a.ndim} broadcast dimensions needed, got {list(broadcast_dimensions)}")
    for d, s in zip(broadcast_dimensions, a.shape):
        _check(0 <= d < len(shape) and s in (1, shape[d]),
               lambda s=s, d=d: f"prims.broadcast_in_dim: cannot place a dimension of size {s} at {d} of {list(shape)}")
    return new_proxy(shape, a.dtype, a.device, [a])


def _broadcast_in_dim_impl(a, shape, broadcast_dimensions):
    view = [1] * len(shape)
    for d, s in zip(broadcast_dimensions, a.shape):
        view[d] = s
    return a.reshape(view).expand(shape)


prim("broadcast_in_dim", _broadcast_in_dim_impl, _broadcast_in_dim_meta, tags={Tag.VIEW})


def _reshape_meta(a, shape):
    _check(
        math.prod(shape) == a.numel(),
        lambda: f"prims.reshape: cannot reshape {list(a.shape)} ({a.numel()} elements) to {list(shape)}",
    )
    return new_proxy(shape, a.dtype, a.device, [a])


prim("reshape", lambda a, shape: a.reshape(shape), _reshape_meta, tags={Tag.VIEW})


def _transpose_meta(a, permutation):
    _check(
        sorted(permutation) == list(range(a.ndim)),
        lambda: f"prims.transpose: {list(permutation)} is not a permutation of {a.ndim} dims",
    )
    return new_proxy(tuple(a.shape[p] for p in permutation), a.dtype, a.device, [a])


prim("transpose", lambda a, permutation: a.permute(permutation), _transpose_meta, tags={Tag.VIEW})


def _slice_meta(a, start_indices, end_indices, strides=None):
    strides = strides or (1,) * a.ndim
    _check(
        len(start_indices) == len(end_indices) == len(strides) == a.ndim,
        "prims.slice: one start, end and stride per dimension",
    )
    shape = []
    for s, e, st, n in zip(start_indices, end_indices, strides, a.shape):
        _check(
            0 <= s <= e <= n and st >= 1,
            lambda s=s, e=e, st=st, n=n: f"prims.slice: bad range {s}:{e}:{st} for a dimension of size {n}",
        )
        shape.append(max(0, (e - s + st - 1) // st))
    return new_proxy(shape, a.dtype, a.device, [a])


def _slice_impl(a, start_indices, end_indices, strides=None):
    strides = strides or (1,) * a.ndim
    return a[tuple(slice(s, e, st) for s, e, st in zip(start_indices, end_indices, strides))]


prim("slice", _slice_impl, _slice_meta, tags={Tag.VIEW})


def _squeeze_meta(a, dims):
    for d in dims:
        _check(a.shape[d] == 1, lambda d=d: f"prims.squeeze: dimension {d} has size {a.shape[d]}, not 1")
    return new_proxy([s for i, s in enumerate(a.shape) if i not in dims], a.dtype, a.device, [a])


prim("squeeze", lambda a, dims: a.squeeze(tuple(dims)) if dims else a.view(a.shape), _squeeze_meta, tags={Tag.VIEW})


def _cat_meta(tensors, dim):
    a = tensors[0]
    for t in tensors[1:]:
        _check(t.ndim == a.ndim and all(x == y for i, (x, y) in enumerate(zip(t.shape, a.shape)) if i != dim),
               lambda t=t: f"prims.cat: shapes {list(a.shape)} and {list(t.shape)} differ outside dimension {dim}")
        _check(t.dtype == a.dtype, "prims.cat: dtypes differ; convert first")
    shape = list(a.shape)
    shape[dim] = sum(t.shape[dim] for t in tensors)
    return new_proxy(shape, a.dtype, a.device, tensors)


prim("cat", lambda tensors, dim: torch.cat(tensors, dim), _cat_meta)


def _pad_meta(a, padding_value, padding_config):
    _check(len(padding_config) == a.ndim, "prims.pad: one (low, high, interior) triple per dimension")
    shape = []
    for (lo, hi, interior), n in zip(padding_config, a.shape):
        shape.append(lo + hi + n + max(n - 1, 0) * interior)
        _check(shape[-1] >= 0, "prims.pad: negative size after padding")
    return new_proxy(shape, a.dtype, a.device, [a])


def _pad_impl(a, padding_value, padding_config):
    if padding_config and all(lo >= 0 and hi >= 0 and it == 0 for lo, hi, it in padding_config):
        # plain padding: one kernel, and the result in the input's memory format (a channels-last activation
        # stays channels-last, as F.pad keeps it: the convolution it usually feeds wants it so)
        return torch.constant_pad_nd(a, [n for lo, hi, _ in reversed(padding_config) for n in (lo, hi)],
                                     padding_value)
    out_shape = [lo + hi + n + max(n - 1, 0) * it for (lo, hi, it), n in zip(padding_config, a.shape)]
    out = torch.full(out_shape, padding_value, dtype=a.dtype, device=a.device)
    src, dst = [], []
    for (lo, _hi, it), n, m in zip(padding_config, a.shape, out_shape):
        # negative low/high padding crops; positions of input elements in the output
        step = it + 1
        first = lo
        idx = [first + i * step for i in range(n)]
        keep = [i for i, p in enumerate(idx) if 0 <= p < m]
        if not keep:
            return out
        src.append(slice(keep[0], keep[-1] + 1))
        dst.append(slice(idx[keep[0]], idx[keep[-1]] + 1, step))
    out[tuple(dst)] = a[tuple(src)]
    return out


prim("pad", _pad_impl, _pad_meta)
prim("flip", lambda a, dims: torch.flip(a, dims), lambda a, dims: new_proxy(a.shape, a.dtype, a.device, [a]))


def _take_meta(a, index, dim):
    _check(not index.dtype.is_floating_point, "prims.take: indices must be integers")
    shape = list(a.shape[:dim]) + list(index.shape) + list(a.shape[dim + 1:])
    return new_proxy(shape, a.dtype, a.device, [a])


def _take_impl(a, index, dim):
    flat = torch.index_select(a, dim, index.reshape(-1))
    return flat.reshape(a.shape[:dim] + index.shape + a.shape[dim + 1:])


prim("take", _take_impl, _take_meta)
prim("gather", lambda a, dim, index: torch.gather(a, dim, index), torch_meta(torch.gather, "prims.gather"))
prim("scatter_add", lambda a, dim, index, src: torch.scatter_add(a, dim, index, src),
     torch_meta(torch.scatter_add, "prims.scatter_add"))
prim("index_put", lambda a, indices, values, accumulate=False: torch.index_put(a, indices, values, accumulate),
     torch_meta(torch.index_put, "prims.index_put"))


# -- reductions ---------------------------------------------------------------------------
def _reduced(a, dims):
    for d in dims:
        _check(0 <= d < max(a.ndim, 1), lambda d=d: f"reduction dimension {d} out of range for {a.ndim} dims")
    return [s for i, s in enumerate(a.shape) if i not in dims]


def _reduction_meta(name, out_dtype=None):
    def meta(a, dims, **kw):
        return new_proxy(_reduced(a, dims), out_dtype or a.dtype, a.device, [a])

    return meta


def _dims_impl(fn):
    return lambda a, dims: fn(a, dim=tuple(dims)) if dims else a.clone()


prim("sum", lambda a, dims: torch.sum(a, dim=tuple(dims), dtype=a.dtype) if dims else a.clone(), _reduction_meta("sum"))
prim("prod", lambda a, dims: _prod(a, dims), _reduction_meta("prod"))


def _extremum_meta(name):
    def meta(a, dims):
        for d in dims:
            _check(not (0 <= d < a.ndim) or a.shape[d] != 0,
                   lambda d=d: f"prims.{name}: dimension {d} has size 0, which has no {name[1:]}imum")
        return new_proxy(_reduced(a, dims), a.dtype, a.device, [a])

    return meta


prim("amax", _dims_impl(torch.amax), _extremum_meta("amax"))
prim("amin", _dims_impl(torch.amin), _extremum_meta("amin"))
prim("var", lambda a, dims, *, correction: torch.var(a, dim=tuple(dims), correction=correction),
     _reduction_meta("var"))


def _prod(a, dims):
    for d in sorted(dims, reverse=True):
        a = torch.prod(a, d, dtype=a.dtype)  # bool stays bool, as the meta says
    return a if dims else a.clone()


def _var_mean_meta(a, dims, *, correction):
    shape = _reduced(a, dims)
    out_dtype = a.dtype.to_real() if a.dtype.is_complex else a.dtype
    return new_proxy(shape, out_dtype, a.device, [a]), new_proxy(shape, a.dtype, a.device, [a])


prim(
    "var_mean", lambda a, dims, *, correction: torch.var_mean(a, dim=tuple(dims), correction=correction), _var_mean_meta
)


def _argmax_meta(a, dim):
    shape = [] if dim is None else _reduced(a, (dim,))
    return new_proxy(shape, torch.int64, a.device)


prim("argmax", lambda a, dim: torch.argmax(a, dim), _argmax_meta)
prim("argmin", lambda a, dim: torch.argmin(a, dim), _argmax_meta)
prim(
    "cumsum",
    lambda a, dim: torch.cumsum(a, dim, dtype=a.dtype),
    lambda a, dim: new_proxy(a.shape, a.dtype, a.device, [a]),
)


def _topk_meta(a, k, dim, largest, sorted):
    shape = list(a.shape)
    shape[dim] = k
    return new_proxy(shape, a.dtype, a.device, [a]), new_proxy(shape, torch.int64, a.device)


# a selection is real work, as sorting is: backward reads its saved values and indices (a router's choice of
# experts) rather than choosing again
prim("topk", lambda a, k, dim, largest, sorted: tuple(torch.topk(a, k, dim, largest, sorted)), _topk_meta,
     tags={Tag.DONT_RECOMPUTE})


# -- linear algebra and convolution -------------------------------------------------------
def _linear_params(a, weight, bias=None): ...
def _convolution_params(a, weight, bias, stride, padding, dilation, transposed, output_padding, groups): ...


prim("matmul", torch.matmul, torch_meta(torch.matmul, "prims.matmul"), signature=lambda a, b: None,
     tags={Tag.DONT_RECOMPUTE})
prim("linear", torch.nn.functional.linear, torch_meta(torch.nn.functional.linear, "prims.linear"),
     signature=_linear_params, tags={Tag.DONT_RECOMPUTE})
prim("convolution", torch.convolution, torch_meta(torch.convolution, "prims.convolution"),
     signature=_convolution_params, tags={Tag.DONT_RECOMPUTE})


# -- memory -------------------------------------------------------------------------------
def _copy_meta(src, dst):
    _check(src.shape == dst.shape, lambda: f"prims.copy_: shapes differ ({list(src.shape)} vs {list(dst.shape)})")
    return None


def _copy_impl(src, dst):
    """A write the program makes into ``dst`` (a buffer's new value, an in-place op's result), never recorded by
    autograd. Grad mode is switched off only where it is on and either side requires grad: a training program's
    forward runs with it off, and a CNN writes three running statistics per batch norm, each a microsecond."""
    if torch.is_grad_enabled() and (dst.requires_grad or src.requires_grad):
        with torch.no_grad():
            dst.copy_(src)
    else:
        dst.copy_(src)


prim("copy_", _copy_impl, _copy_meta, tags={Tag.SIDE_EFFECT})


def _set_grad_enabled_meta(mode):
    current_trace().grad_enabled = bool(mode)
    return None


# grad mode as part of the program: a no_grad / enable_grad region of the user's function
prim("set_grad_enabled", torch._C._set_grad_enabled, _set_grad_enabled_meta, tags={Tag.SIDE_EFFECT})


def _del_printer(printer, bsym):
    return "del " + ", ".join(printer.value(a) for a in bsym.args)


def _del_impl(*args):
    return None


prim("python_del", _del_impl, lambda *args: None, printer=_del_printer, kind=Kind.BOOKKEEPING)
