"""The nvFuser executor: translates fusion regions of prims into nvFuser definitions (CUDA only).

One rule table, ``TRANSLATIONS`` (a prim's printed name such as ``"prims.add"`` -> rule, one rule per prim:
a second one for the same prim raises ``RuleConflict`` unless added with ``override=True``), is written once
against an ``fd``
object. Run against the live nvFuser ``FusionDefinition`` it builds the real fusion; run
against ``_Recorder``, a stand-in that writes down each call, it prints the definition as
Python text. Text and real definition therefore cannot disagree, and the text can be
printed on a machine without a GPU. nvFuser is imported only when a region is compiled.

Input rule (``define_tensor``): a dimension of size 1 is a broadcast dimension (shape 1,
contiguity None); every other extent is symbolic (-1), as nvFuser itself does for PyTorch
inputs. Contiguity and stride order come from the real inputs' strides when compiling,
and from row-major strides when printing without example inputs. Ops take concrete
arguments (reshape shapes, slice bounds), so a definition is specialized to its shapes.
Python numbers become ``fd.define_scalar`` constants (the older ``nvfuser`` module
requires that), typed by the tensor they combine with: Double, Int or Bool.
"""
from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

import torch

from thunderlab.core.proxies import TensorProxy
from thunderlab.core.symbols import BoundSymbol, Symbol
from thunderlab.core.trace import Trace, region_trace
from thunderlab.ops.rules import RuleTable

from .base import register_executor
from .fusion import FusionExecutor

INSTALL_HINT = ("nvFuser is not installed (pip install 'thunderlab[nvfuser]'; it needs a CUDA GPU and an "
                "nvFuser wheel built for this torch)")
NO_GPU = "no CUDA GPU: nvFuser runs only on CUDA devices"

DTYPES = {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16",
          torch.int64: "Int", torch.int32: "Int32", torch.bool: "Bool"}
_MULTI_OUTPUT = {"var_mean": 2, "topk": 2}  # fd.ops that return a tuple


# -- the rule table -----------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    op: str  # the fd.ops function the translation calls (the main one, for composites)
    translate: Callable  # (ctx, bsym) -> the fd value(s) of bsym's outputs
    check: Callable | None = None  # bsym -> reason it cannot be translated, or None


def _like(b: BoundSymbol) -> torch.dtype:
    """The dtype a Python number in ``b`` is typed by: its first value tensor's, else its output's."""
    args = b.args[1:] if b.sym.name == "where" else b.args
    ts = [a for a in args if isinstance(a, TensorProxy)] or b.outputs
    return ts[0].dtype


def _elementwise(op: str) -> Rule:
    return Rule(op, lambda c, b: getattr(c.ops, op)(*(c.val(a, _like(b)) for a in b.args)))


def _as_bool(c, x):
    return c.ops.cast(c.val(x), dtype=c.dt(torch.bool)) if isinstance(x, TensorProxy) else c.scalar(bool(x), torch.bool)


def _where(c, b):
    pred, a, other = b.args
    like = _like(b)
    return c.ops.where(c.val(pred, torch.bool), c.val(a, like), c.val(other, like))


def _no_int(b):
    if not b.outputs[0].dtype.is_floating_point:
        return f"prims.div on {str(b.outputs[0].dtype)[6:]}: nvFuser's div truncates integers, the prim does not"


def _dims(b):
    dims = b.args[1] if len(b.args) > 1 else b.kwargs.get("dims")
    if not dims:
        return f"prims.{b.sym.name} over no dimensions is a copy; torch runs it"
    if b.sym.name in ("sum", "prod") and b.args[0].dtype == torch.bool:
        return f"prims.{b.sym.name} of a bool tensor: nvFuser would accumulate in Int"
    if b.sym.name in ("var", "var_mean"):
        corr = b.kwargs.get("correction", 1)
        if corr < 0 or float(corr) != int(corr):
            return f"prims.{b.sym.name}: nvFuser takes a non-negative integer correction, not {corr!r}"
        if b.args[0].dtype not in (torch.float32, torch.float64):
            return f"prims.{b.sym.name} of {b.args[0].dtype}: nvFuser computes variances in float32/float64 only"


def _reduce(op: str) -> Rule:
    def tr(c, b):
        a = b.args[0]
        kw = {}
        if op in ("sum", "prod"):  # Null keeps a floating dtype; integers would widen to Int unless told
            kw["dtype"] = c.DataType.Null if a.dtype.is_floating_point else c.dt(a.dtype)
        return getattr(c.ops, op)(c.val(a), dims=list(b.args[1]), keepdim=False, **kw)

    return Rule(op, tr, _dims)


def _var(op: str) -> Rule:
    return Rule(op, lambda c, b: getattr(c.ops, op)(c.val(b.args[0]), dims=list(b.args[1]),
                                                       correction=int(b.kwargs["correction"]), keepdim=False), _dims)


def _slice_check(b):
    strides = b.args[3] if len(b.args) > 3 else b.kwargs.get("strides")
    if strides and any(s != 1 for s in strides):
        return f"prims.slice with strides {list(strides)}: nvFuser slices with stride 1 only"


def _pad_check(b):
    if any(it != 0 for _, _, it in b.args[2]):
        return "prims.pad with interior padding: nvFuser pads edges only"


def _pad(c, b):
    a, value, config = b.args
    widths = [w for lo, hi, _ in reversed(config) for w in (lo, hi)]  # nvFuser: innermost dimension first
    return c.ops.pad(c.val(a), pad_widths=widths, value=c.scalar(value, a.dtype))


def _linear(c, b):
    ts = [c.val(a) for a in b.args + tuple(b.kwargs.values()) if a is not None]
    return c.ops.linear(*ts)


def _take(c, b):
    a, index, dim = b.args
    if index.ndim == 1:
        return c.ops.index_select(c.val(a), c.val(index), dim=dim)
    # index_select takes a 1-D index: flatten it, then give the result the index's dimensions
    flat = c.ops.index_select(c.val(a), c.ops.reshape(c.val(index), new_shape=[index.numel()]), dim=dim)
    return c.ops.reshape(flat, new_shape=list(b.outputs[0].shape))


def _iota(c, b):
    dtype = b.kwargs["dtype"]
    return c.ops.iota(c.scalar(b.args[0], torch.int64), c.scalar(b.kwargs["start"], dtype),
                      c.scalar(b.kwargs["step"], dtype), dtype=c.dt(dtype))


TRANSLATIONS = RuleTable("an nvFuser translation")
for _n in ("abs neg exp exp2 expm1 log log1p log2 log10 sin cos tan asin acos atan sinh cosh tanh asinh acosh "
           "atanh sqrt rsqrt reciprocal erf erfc erfinv floor ceil round trunc sign lgamma bitwise_not sigmoid "
           "isnan isinf isfinite signbit logical_not add sub mul remainder fmod pow maximum minimum atan2 "
           "bitwise_and bitwise_or bitwise_xor eq ne lt le gt ge logical_and logical_or").split():
    TRANSLATIONS.add(f"prims.{_n}", _elementwise(_n))
_NAMED = {  # prim -> rule, where the nvFuser op or its arguments differ from the prim's
    "div": Rule("div", _elementwise("div").translate, _no_int),
    "where": Rule("where", _where),
    # nvFuser has no logical_xor: ne of the operands cast to bool
    "logical_xor": Rule("ne", lambda c, b: c.ops.ne(*(_as_bool(c, a) for a in b.args))),
    "convert_element_type": Rule("cast", lambda c, b: c.ops.cast(c.val(b.args[0]), dtype=c.dt(b.args[1]))),
    "broadcast_in_dim": Rule("broadcast_in_dim", lambda c, b: c.ops.broadcast_in_dim(
        c.val(b.args[0]), shape=list(b.args[1]), broadcast_dims=list(b.args[2]))),
    "reshape": Rule("reshape", lambda c, b: c.ops.reshape(c.val(b.args[0]), new_shape=list(b.args[1]))),
    "transpose": Rule("permute", lambda c, b: c.ops.permute(c.val(b.args[0]), dims=list(b.args[1]))),
    "slice": Rule("slice", lambda c, b: c.ops.slice(c.val(b.args[0]), start_indices=list(b.args[1]),
                                                     end_indices=list(b.args[2])), _slice_check),
    "squeeze": Rule("squeeze", lambda c, b: c.ops.squeeze(c.val(b.args[0]), dims=list(b.args[1])),
                    lambda b: None if b.args[1] else "prims.squeeze of no dimensions is a view; torch runs it"),
    "cat": Rule("cat", lambda c, b: c.ops.cat([c.val(t) for t in b.args[0]], dim=b.args[1])),
    "pad": Rule("pad", _pad, _pad_check),
    "sum": _reduce("sum"), "prod": _reduce("prod"), "amax": _reduce("max"), "amin": _reduce("min"),
    "var": _var("var"), "var_mean": _var("var_mean"),
    "full": Rule("full", lambda c, b: c.ops.full(shape=list(b.args[0]),
                                                 fill_value=c.scalar(b.args[1], b.kwargs["dtype"]),
                                                 dtype=c.dt(b.kwargs["dtype"]))),
    "iota": Rule("iota", _iota),
    # random: nvFuser draws from its own Philox stream, so values differ from eager torch's
    "uniform": Rule("uniform", lambda c, b: c.ops.uniform(c.scalar(b.args[1], torch.float64),
                                                          c.scalar(b.args[2], torch.float64),
                                                          list(b.args[0]), dtype=c.dt(b.kwargs["dtype"])),
                    lambda b: None if b.kwargs["dtype"].is_floating_point
                    else "prims.uniform: nvFuser draws floating-point values only"),
    "matmul": Rule("matmul", lambda c, b: c.ops.matmul(c.val(b.args[0]), c.val(b.args[1]))),
    "linear": Rule("linear", _linear),
    "take": Rule("index_select", _take),
    "gather": Rule("gather", lambda c, b: c.ops.gather(c.val(b.args[0]), c.val(b.args[2]), dim=b.args[1])),
    # cumsum and topk: nvfuser_direct since mid-2025
    "cumsum": Rule("cumsum", lambda c, b: c.ops.cumsum(c.val(b.args[0]), dim=b.args[1])),
    "topk": Rule("topk", lambda c, b: c.ops.topk(c.val(b.args[0]), c.scalar(b.args[1], torch.int64), dim=b.args[2],
                                                 largest=bool(b.args[3]), sorted=bool(b.args[4]))),
}
for _n, _rule in _NAMED.items():
    TRANSLATIONS.add(f"prims.{_n}", _rule)

NOT_TRANSLATED = {
    "prims.digamma": "nvFuser has no digamma",
    "prims.flip": "nvFuser has no flip",
    "prims.argmax": "nvFuser has no argmax/argmin reduction", "prims.argmin": "nvFuser has no argmax/argmin reduction",
    "prims.scatter_add": "nvFuser's scatter has no accumulating form", "prims.index_put": "nvFuser has no index_put",
    "prims.convolution": "nvFuser has no convolution", "prims.copy_": "writes to an argument",
    "prims.python_del": "bookkeeping",
    "prims.bernoulli": "random: eager dropout's noise, which nvFuser's Philox stream would not reproduce",
    "prims.set_grad_enabled": "changes grad mode (a region boundary)",
    "prims.trunc_divide": "integer division is left to torch (exact for every int64)",
}


def translatable(bsym: BoundSymbol) -> tuple[bool, str]:
    """Whether the rule table can translate ``bsym``, ignoring devices and whether nvFuser is here."""
    s = bsym.sym
    if not s.is_prim:
        return False, f"{s.qualname} is not a prim; nvFuser translates prims only"
    rule = TRANSLATIONS.get(s.qualname)
    if rule is None:
        why = NOT_TRANSLATED.get(s.qualname)
        return False, f"{s.qualname} has no nvFuser translation" + (f" ({why})" if why else "")
    for p in bsym.inputs + bsym.outputs:
        if p.dtype not in DTYPES:
            return False, f"dtype {str(p.dtype).replace('torch.', '')} not supported ({p.name} of {s.qualname})"
    for v in list(bsym.args) + list(bsym.kwargs.values()):
        if isinstance(v, complex):
            return False, f"{s.qualname}: complex number {v!r} not supported"
    why = rule.check(bsym) if rule.check else None
    return (False, why) if why else (True, "")


# -- translating a region against an fd -----------------------------------------------------
def _contiguous_strides(shape) -> list[int]:
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return strides[::-1]


def layout(shape, strides) -> tuple[tuple, tuple]:
    """nvFuser's (contiguity, stride_order) for a tensor; stride_order is () when row-major.

    Dimensions with a stride are ordered outermost first by stride (ties keep their order);
    stride-0 (expanded) dimensions keep their own position. Broadcast dimensions (size 1 or
    stride 0) have contiguity None; any other is contiguous when its stride is the extent
    of the next inner non-broadcast dimension (1 for the innermost).
    """
    nd = len(shape)
    outer_first = sorted((d for d in range(nd) if strides[d] != 0), key=lambda d: -strides[d])
    for d in range(nd):
        if strides[d] == 0:
            outer_first.insert(d, d)
    order = [0] * nd
    for pos, d in enumerate(outer_first):
        order[d] = nd - 1 - pos
    contiguity: list = [None] * nd
    expected = 1
    for d in reversed(outer_first):
        if shape[d] != 1 and strides[d] != 0:
            contiguity[d] = strides[d] == expected
            expected = strides[d] * shape[d]
    return tuple(contiguity), (() if outer_first == list(range(nd)) else tuple(order))


class _Ctx:
    """What a rule sees: ``ops`` (fd.ops), ``dt`` (torch dtype -> DataType), ``val``, ``scalar``."""

    def __init__(self, fd, DataType):
        self.fd, self.ops, self.DataType, self.env = fd, fd.ops, DataType, {}

    def dt(self, dtype: torch.dtype):
        return getattr(self.DataType, DTYPES[dtype])

    def scalar(self, v, like: torch.dtype):
        if like.is_floating_point or (isinstance(v, float) and not v.is_integer()):
            return self.fd.define_scalar(float(v), dtype=self.DataType.Double)
        if like == torch.bool and isinstance(v, bool):
            return self.fd.define_scalar(v, dtype=self.DataType.Bool)
        return self.fd.define_scalar(int(v), dtype=self.DataType.Int)

    def val(self, x, like: torch.dtype | None = None):
        if isinstance(x, TensorProxy):
            return self.env[x.name]
        return self.scalar(x, like or torch.float64)


def _translate(region: Trace, fd, DataType, layouts, note: Callable | None = None) -> None:
    c = _Ctx(fd, DataType)
    for p, (contiguity, order) in zip(region.tensor_inputs(), layouts):
        shape = [1 if s == 1 else -1 for s in p.shape]
        extra = {"stride_order": list(order)} if order else {}
        c.env[p.name] = fd.define_tensor(shape=shape, contiguity=list(contiguity), dtype=c.dt(p.dtype),
                                         is_cpu=False, **extra)
        note and note(p.name)
    for b in region.bound_symbols:
        ok, why = translatable(b)
        if not ok:
            raise ValueError(f"nvFuser cannot translate {b.sym.qualname} (id {b.id}): {why}")
        out = TRANSLATIONS[b.sym.qualname].translate(c, b)
        outs = out if isinstance(b.output, tuple) else (out,)  # var_mean and topk make two
        for p, v in zip(b.outputs, outs):
            c.env[p.name] = v
        note and note(", ".join(p.name for p in b.outputs) + f" = {b.sym.qualname}")
    for p in region.output_proxies():
        fd.add_output(c.env[p.name])
        note and note(p.name)


# -- printing: the recording stand-in ------------------------------------------------------
class _Code(str):
    """Source text that prints as itself (a variable or DataType member)."""

    def __repr__(self) -> str:
        return str(self)


def _fmt(v) -> str:
    if isinstance(v, float) and not math.isfinite(v):
        return "float('nan')" if math.isnan(v) else ("float('inf')" if v > 0 else "-float('inf')")
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt(e) for e in v) + "]"
    return repr(v)


class _Attrs:
    """``x.name`` is ``fn(name)``: the recorder's ``fd.ops`` and ``DataType``."""

    def __init__(self, fn):
        self._fn = fn

    def __getattr__(self, name):
        return self._fn(name)


class _Recorder:
    """A stand-in ``fd`` that writes each call as a line of Python and names its results T0, S0, ..."""

    def __init__(self):
        self.lines: list[str] = []
        self._n = {"T": 0, "S": 0}
        self.ops = _Attrs(lambda op: lambda *a, **kw: self.call(f"fd.ops.{op}", a, kw, "T", _MULTI_OUTPUT.get(op, 1)))

    def call(self, fn, args, kwargs, prefix, n=1):
        names = [_Code(f"{prefix}{self._n[prefix] + i}") for i in range(n)]
        self._n[prefix] += n
        params = [_fmt(a) for a in args] + [f"{k}={_fmt(v)}" for k, v in kwargs.items()]
        self.lines.append(f"{', '.join(names)} = {fn}({', '.join(params)})")
        return tuple(names) if n > 1 else names[0]

    def define_tensor(self, **kw):
        return self.call("fd.define_tensor", (), kw, "T")

    def define_scalar(self, value, dtype=None):
        return self.call("fd.define_scalar", (value,), {"dtype": dtype}, "S")

    def add_output(self, v):
        self.lines.append(f"fd.add_output({v})")

    def note(self, text: str):
        self.lines[-1] += f"  # {text}"


def _layouts(region: Trace, inputs=None) -> list:
    if inputs is None:
        return [layout(p.shape, _contiguous_strides(p.shape)) for p in region.tensor_inputs()]
    return [layout(tuple(t.shape), t.stride()) for t in inputs if isinstance(t, torch.Tensor)]


def _record(region: Trace, inputs=None, comments: bool = True) -> list[str]:
    rec = _Recorder()
    _translate(region, rec, _Attrs(lambda n: _Code(f"DataType.{n}")), _layouts(region, inputs),
               rec.note if comments else None)
    return rec.lines


def definition_text(region: Trace, inputs=None) -> str:
    """The nvFuser definition of ``region`` as Python (``inputs``: example tensors for their layout)."""
    names = ", ".join(p.name for p in region.tensor_inputs())
    body = "\n".join("    " + line for line in _record(region, inputs))
    return (f"# nvFuser definition of region {region.name}\n"
            "from nvfuser_direct import FusionDefinition, DataType\n\n\n"
            "def nvfuser_fusion(fd: FusionDefinition) -> None:\n"
            f"{body}\n\n\n"
            "# with FusionDefinition() as fd:\n"
            "#     nvfuser_fusion(fd)\n"
            f"# outputs = fd.execute([{names}])  # CUDA tensors\n")


# -- running ------------------------------------------------------------------------------
_module = None
_availability: tuple[bool, str] | None = None
_definitions: dict[str, object] = {}  # the definition's calls, as text -> live FusionDefinition
_lock = threading.Lock()


def _nvfuser():
    global _module
    if _module is None:
        try:
            import nvfuser_direct as m
        except ModuleNotFoundError:
            import nvfuser as m  # the older frontend; the calls used here are the same
        _module = m
    return _module


def available() -> tuple[bool, str]:
    """(True, "") when nvFuser imports and a CUDA GPU is present; else what is missing. Cached."""
    global _availability
    if _availability is None:
        missing = []
        try:
            _nvfuser()
        except ModuleNotFoundError:
            missing.append(INSTALL_HINT)
        except Exception as e:  # e.g. a wheel built against another torch
            missing.append(f"nvFuser is installed but does not import ({type(e).__name__}: {e}); "
                           f"install an nvFuser wheel built for torch {torch.__version__}")
        if not torch.cuda.is_available():
            missing.append(NO_GPU)
        _availability = (not missing, "; ".join(missing))
    return _availability


def compile(region: Trace) -> Callable:
    """A function running ``region`` with nvFuser: ``fn(*inputs) -> tuple of outputs``.

    Definitions are built per input layout (shape, dtype, contiguity, stride order) and
    shared between regions whose definitions print the same.
    """
    ok, why = available()
    if not ok:
        raise RuntimeError(f"nvFuser cannot run region {region.name}: {why}")
    _record(region)  # an untranslatable member fails now, not on the first call
    tensor_pos = [i for i, p in enumerate(region.inputs) if isinstance(p, TensorProxy)]
    by_layout: dict[tuple, object] = {}

    def definition(tensors):
        key = tuple((tuple(t.shape), t.dtype, t.stride(), t.device) for t in tensors)
        fd = by_layout.get(key)
        if fd is None:
            text = "\n".join(_record(region, tensors, comments=False))  # the same calls, whatever the names
            with _lock:
                fd = _definitions.get(text)
                if fd is None:
                    m = _nvfuser()
                    with m.FusionDefinition() as fd:
                        _translate(region, fd, m.DataType, _layouts(region, tensors))
                    _definitions[text] = fd
            by_layout[key] = fd
        return fd

    def run(*args):
        tensors = [args[i] for i in tensor_pos]  # scalar inputs are specialized into the ops
        return tuple(definition(tensors).execute(tensors))

    run.definition_text = lambda *ts: definition_text(region, ts or None)
    return run


class NvFuserExecutor(FusionExecutor):
    name = "nvfuser"
    default_device = "cuda"

    def available(self) -> tuple[bool, str]:
        return available()

    def can_execute(self, bsym: BoundSymbol) -> tuple[bool, str]:
        ok, why = available()
        if not ok:
            return False, why
        if bsym.sym.communicates:
            return False, f"{bsym.sym.qualname} is a collective: torch.distributed runs it"
        off = sorted({p.device.type for p in bsym.inputs + bsym.outputs} - {"cuda"})
        if off:
            return False, f"{bsym.sym.qualname} has tensors on {', '.join(off)}; nvFuser runs on CUDA only"
        return translatable(bsym)

    def implementation(self, sym: Symbol):
        return sym.impl  # a call outside any region runs eagerly

    def compile(self, region: Trace, args: tuple) -> tuple[Callable, list[str]]:
        fn = compile(region)
        fn(*args)  # define and compile the kernels now (in the background when tiered)
        return fn, [definition_text(region, [a for a in args if isinstance(a, torch.Tensor)])]

    def describe(self, bsym: BoundSymbol) -> str:
        """The nvFuser definition of the region (its members as prims), or why it cannot be translated."""
        return definition_view(bsym)


def definition_view(region: BoundSymbol) -> str:
    """What nvFuser would be given for a fusion region (its members as prims), or why it cannot be.

    Needs neither nvFuser nor a GPU: the definition is printed, not built.
    """
    prims_only = region.replace(subsymbols=tuple(leaf for s in region.subsymbols for leaf in s.flat()))
    for b in prims_only.subsymbols:
        ok, why = translatable(b)
        if not ok:
            return f"# not translatable to nvFuser: {why}"
    return definition_text(region_trace(prims_only))


register_executor(NvFuserExecutor())
