"""Symbols (operations) and bound symbols (one call of an operation in a trace)."""
from __future__ import annotations

import enum
import functools
import inspect
import itertools
import os
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from types import SimpleNamespace
from typing import Any

from .context import current_trace
from .proxies import TensorProxy

_ids = itertools.count(1)


def next_id() -> int:
    return next(_ids)


@dataclass(frozen=True, slots=True)  # slots: see TensorProxy
class SourceInfo:
    """Where in user code a bound symbol came from."""

    file: str
    line: int
    code: str = ""
    scope: str = ""  # the module path Dynamo recorded, e.g. "blocks.0.attn"

    def short(self) -> str:
        """``file.py:31``: the file's base name and the line."""
        return f"{os.path.basename(self.file)}:{self.line}"


class Tag(enum.Enum):
    """A fact about what a symbol does beyond computing its outputs; passes read these, not names."""

    RANDOM = "random"  # draws from a random generator: never merged, never dropped, never recomputed
    SIDE_EFFECT = "side_effect"  # writes to an argument (copy_, in-place ops): never merged or dropped
    VIEW = "view"  # only re-describes its input's memory (shape, strides, a slice): recomputing moves no data
    DONT_RECOMPUTE = "dont_recompute"  # costs real work (matmul, convolution): computed once, in forward
    BOOKKEEPING = "bookkeeping"  # no computation at all (``del``)
    # talks to other processes (torch.distributed collectives, their waits): every process must make the same
    # calls in the same order, so such a call is never merged, dropped, recomputed, fused or moved across another
    COMMUNICATION = "communication"
    # an opaque call made only of PyTorch operators, with output sizes its input sizes decide (a torch function
    # or operator TorchDynamo put in the graph, an in-place op's functional twin): a compiler that traces
    # PyTorch (Inductor, through TorchDynamo) can take it inside a region, where other opaque calls cut one
    TORCH_TRACEABLE = "torch_traceable"
    # decomposes only the calls its decomposition is for, and those are better decomposed (avg_pool2d: one window
    # over the whole map is its mean; adaptive_avg_pool2d to 1 x 1 likewise): where a call has subsymbols,
    # autodiff differentiates them and claim claims them, rather than the call whole
    DECOMPOSE = "decompose"


class Kind(enum.Enum):
    """What sort of operation a symbol is; passes and views ask this, not the symbol's name."""

    PRIM = "prim"  # a primitive: executors implement it directly; no decomposition
    TORCH = "torch"  # a torch-level op (``ltorch``), usually with a decomposition into prims
    OPAQUE = "opaque"  # a torch function called as is: no decomposition, nothing known inside
    FUSION = "fusion"  # a fusion region: its subsymbols are the calls an executor runs as one
    BOOKKEEPING = "bookkeeping"  # no computation at all (``del``)

    @property
    def namespace(self) -> str:
        """The name printed programs call symbols of this kind through."""
        return _NAMESPACES[self]


_NAMESPACES = {Kind.PRIM: "prims", Kind.TORCH: "ltorch", Kind.OPAQUE: "torch", Kind.FUSION: "fusion",
               Kind.BOOKKEEPING: "prims"}
_BY_MODULE = {"prims": Kind.PRIM, "ltorch": Kind.TORCH, "torch": Kind.OPAQUE, "fusion": Kind.FUSION}


@dataclass(eq=False, init=False, frozen=True)
class Symbol:
    """An operation: its name, how to compute output metadata, and how to run it eagerly.

    A symbol is frozen: one is shared by every trace and every record that calls it, so what is
    learned about one call while tracing (an opaque call draws random numbers, or writes into an
    argument) is that call's ``BoundSymbol.effects``, never a change to the symbol.

    ``meta(*args, **kwargs)`` returns output proxies. When ``decomposition`` is set it is
    used as the meta as well: tracing it yields the outputs and the subsymbols at once.
    ``impl`` runs the operation on real tensors; it is also what a call outside a trace does,
    which is what makes printed traces runnable.
    """

    name: str
    kind: Kind
    impl: Callable
    meta: Callable | None
    decomposition: Callable | None
    tags: frozenset  # Tag values
    printer: Callable | None  # custom printing, e.g. `del`
    qualname: str  # how the printed program spells the call
    # a function whose parameters name the op's arguments (``BoundSymbol.params``) when neither the
    # decomposition nor the meta has named ones (an op kept whole, whose meta takes ``*args``)
    signature: Callable | None

    def __init__(self, name: str, kind: Kind | None = None, impl: Callable | None = None, meta: Callable | None = None,
                 decomposition: Callable | None = None, *, tags=frozenset(), printer: Callable | None = None,
                 qualname: str | None = None, module: str | None = None, is_prim: bool | None = None,
                 signature: Callable | None = None):
        # ``module`` ("prims", "ltorch", "torch", "fusion") names the kind by its printed namespace
        if kind is None:
            if module not in _BY_MODULE:
                raise ValueError(f"Symbol {name!r}: give kind= (one of {', '.join(k.name for k in Kind)}), "
                                 f"or module= one of {', '.join(_BY_MODULE)}; got module={module!r}")
            kind = _BY_MODULE[module]
        elif isinstance(kind, str):
            kind = _BY_MODULE.get(kind) or Kind(kind)
        if is_prim is not None and is_prim != (kind in (Kind.PRIM, Kind.BOOKKEEPING)):
            raise ValueError(f"Symbol {name!r}: is_prim={is_prim} contradicts kind {kind.name}")
        fields = dict(name=name, kind=kind, impl=impl, meta=meta, decomposition=decomposition,
                      tags=frozenset(tags) | ({Tag.BOOKKEEPING} if kind is Kind.BOOKKEEPING else frozenset()),
                      printer=printer, signature=signature,
                      qualname=qualname if qualname is not None else f"{kind.namespace}.{name}")
        for k, v in fields.items():
            object.__setattr__(self, k, v)  # the only writes a frozen symbol takes

    @property
    def module(self) -> str:
        """The namespace printed calls go through: "prims", "ltorch", "torch" or "fusion"."""
        return self.kind.namespace

    @property
    def is_prim(self) -> bool:
        return self.kind in (Kind.PRIM, Kind.BOOKKEEPING)

    @property
    def is_region(self) -> bool:
        """A fusion region (its subsymbols run as one compiled unit)."""
        return self.kind is Kind.FUSION

    @property
    def bookkeeping(self) -> bool:
        """No computation (``del``): not counted, not claimed, not drawn as a node."""
        return Tag.BOOKKEEPING in self.tags

    @property
    def random(self) -> bool:
        return Tag.RANDOM in self.tags

    @property
    def side_effect(self) -> bool:
        return Tag.SIDE_EFFECT in self.tags

    @property
    def communicates(self) -> bool:
        """A collective or its wait (``Tag.COMMUNICATION``): it stays in place, in the order written."""
        return Tag.COMMUNICATION in self.tags

    def parameters(self) -> inspect.Signature:
        """The op's parameters: from ``signature``, else the decomposition, the implementation or the meta."""
        for fn in (self.signature, self.decomposition, self.impl, self.meta):
            sig = _signature(fn) if fn is not None else None
            if sig is not None:
                return sig
        raise TypeError(f"{self.qualname} has no named parameters: declare it with signature=a function whose "
                        f"parameters name its arguments")

    def __call__(self, *args, **kwargs):
        tr = current_trace()
        if tr is None:
            return self.impl(*args, **kwargs)
        return tr.bind(self, args, kwargs)

    def __repr__(self) -> str:
        return f"Symbol({self.qualname})"


@functools.cache
def _signature(fn) -> inspect.Signature | None:
    """``fn``'s signature when it names its parameters (not only ``*args, **kwargs``)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    kinds = {p.kind for p in sig.parameters.values()}
    if not kinds - {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}:
        return None
    return sig


class Params(SimpleNamespace):
    """A call's arguments by the op's parameter names, defaults filled in (``p.eps``, ``p.weight``)."""

    def get(self, name: str, default=None):
        return getattr(self, name, default)


def tree_flatten(x) -> list:
    """Leaves of nested tuples, lists and dicts, in order."""
    out: list = []

    def walk(v):
        if isinstance(v, (tuple, list)):
            for e in v:
                walk(e)
        elif isinstance(v, dict):
            for e in v.values():
                walk(e)
        else:
            out.append(v)

    walk(x)
    return out


def tree_map(fn, x):
    """Apply ``fn`` to every leaf, keeping the structure (tuples stay tuples)."""
    if isinstance(x, tuple):
        return tuple(tree_map(fn, e) for e in x)
    if isinstance(x, list):
        return [tree_map(fn, e) for e in x]
    if isinstance(x, dict):
        return {k: tree_map(fn, v) for k, v in x.items()}
    return fn(x)


def _by_name(p: TensorProxy) -> tuple:
    return ("proxy", p.name)


def _canonical(v, tensor: Callable):
    if isinstance(v, TensorProxy):
        return tensor(v)
    if isinstance(v, (tuple, list)):
        return (type(v).__name__, *(_canonical(e, tensor) for e in v))
    if isinstance(v, dict):
        return ("dict", *sorted((k, _canonical(e, tensor)) for k, e in v.items()))
    if isinstance(v, float):
        return (type(v).__name__, v.hex())  # exact: keeps the sign of zero, every NaN alike
    if isinstance(v, complex):
        return (type(v).__name__, v.real.hex(), v.imag.hex())
    try:
        hash(v)
    except TypeError:
        return ("id", id(v))
    return (type(v).__name__, v)


def proxies_in(x) -> list[TensorProxy]:
    return [v for v in tree_flatten(x) if isinstance(v, TensorProxy)]


# slots (see TensorProxy); a weakref slot, so that a call can be referred to weakly as before
@dataclass(frozen=True, eq=False, slots=True, weakref_slot=True)
class BoundSymbol:
    """One call of a symbol in a trace.

    ``id`` is stable: passes that keep, move or rewrite a call keep its id, so views can
    follow it from step to step. ``origin`` names the pass that created or rewrote it
    (None for capture); the runner sets it.
    """

    sym: Symbol
    args: tuple
    kwargs: dict
    output: Any
    subsymbols: tuple[BoundSymbol, ...] = ()
    source: SourceInfo | None = None
    id: int = field(default_factory=next_id)
    origin: str | None = None
    executor: str | None = None
    declined: tuple[tuple[str, str], ...] = ()  # (executor, reason) for each executor that said no
    # Tags learned about this call while tracing it, beyond its symbol's (an opaque call seen to draw random
    # numbers or to write into an argument): facts about this call, not about every call of the symbol
    effects: frozenset = frozenset()
    derived_from: int | None = None  # in a backward trace: the id of the forward call it differentiates
    # True when the symbol's meta function produced ``output`` from these arguments (as tracing
    # does); verification then need not derive it again. Kept by re-labelling copies only.
    meta_ok: bool = field(default=False, repr=False)

    @property
    def tags(self) -> frozenset:
        """What this call does beyond computing its outputs: its symbol's tags and its own ``effects``."""
        return self.sym.tags | self.effects if self.effects else self.sym.tags

    @property
    def random(self) -> bool:
        """Draws from a random generator (``Tag.RANDOM``): never merged, dropped or recomputed."""
        return Tag.RANDOM in self.effects or self.sym.random

    @property
    def side_effect(self) -> bool:
        """Writes into an argument (``Tag.SIDE_EFFECT``): never merged or dropped, nothing moves across it."""
        return Tag.SIDE_EFFECT in self.effects or self.sym.side_effect

    # Arguments and outputs never change after construction (a rewrite makes a new bound
    # symbol), so their proxies are flattened once, on first use.
    _inputs: list | None = field(default=None, init=False, repr=False)
    _outputs: list | None = field(default=None, init=False, repr=False)
    _params: Params | None = field(default=None, init=False, repr=False)
    _printed: tuple | None = field(default=None, init=False, repr=False)  # its printed line (see codegen._line)

    @property
    def inputs(self) -> list[TensorProxy]:
        if self._inputs is None:
            object.__setattr__(self, "_inputs", proxies_in((self.args, self.kwargs)))
        return self._inputs

    @property
    def outputs(self) -> list[TensorProxy]:
        if self._outputs is None:
            object.__setattr__(self, "_outputs", proxies_in(self.output))
        return self._outputs

    @property
    def params(self) -> Params:
        """The arguments bound to the op's parameter names, with defaults: ``b.params.eps``."""
        if self._params is None:
            try:
                bound = self.sym.parameters().bind(*self.args, **self.kwargs)
            except TypeError as e:
                raise TypeError(f"{self.sym.qualname}: its arguments do not fit its parameters: {e}") from None
            bound.apply_defaults()
            object.__setattr__(self, "_params", Params(**bound.arguments))
        return self._params

    def drop_caches(self) -> None:
        """Let go of what was derived from this call and is made again when asked for (its flattened
        proxies, its params, its printed line), here and in its decomposition."""
        for name in ("_inputs", "_outputs", "_params", "_printed"):
            object.__setattr__(self, name, None)
        for s in self.subsymbols:
            s.drop_caches()

    def call_key(self, tensor: Callable | None = None) -> tuple:
        """A hashable key, equal for two calls of the same symbol on the same arguments.

        Constants compare exactly: ``0.0`` and ``-0.0``, or ``1``, ``1.0`` and ``True``, differ (each
        changes a result); an unhashable constant is only equal to itself. A tensor argument is
        ``tensor(proxy)``: by default its name (the same value, as ``cse`` merges); ``autodiff``
        passes its metadata (calls alike in shape and dtype).
        """
        return (self.sym.qualname, _canonical(self.args, tensor or _by_name),
                _canonical(self.kwargs, tensor or _by_name))

    def meta_key(self) -> tuple:
        """Identifies this call's symbol, argument and output objects (shared by re-labelled copies)."""
        return (self.sym, id(self.args), id(self.kwargs), id(self.output))

    def replace(self, **changes) -> BoundSymbol:
        if "meta_ok" not in changes and changes.keys() & {"sym", "args", "kwargs", "output"}:
            changes["meta_ok"] = False
        return _replaced(self, changes)

    def swap(self, mapping: dict[str, TensorProxy]) -> BoundSymbol:
        """The same call with input proxies renamed through ``mapping`` (name -> proxy)."""
        if not mapping:
            return self

        alike = True  # every replacement has the metadata of the value it replaces

        def sub(v):
            nonlocal alike
            if isinstance(v, TensorProxy):
                w = mapping.get(v.name, v)
                if w is not v and (w.shape, w.dtype) != (v.shape, v.dtype):
                    alike = False
                return w
            return v

        changes = {"args": tree_map(sub, self.args), "kwargs": tree_map(sub, self.kwargs),
                   "subsymbols": tuple(s.swap(mapping) for s in self.subsymbols)}
        # metas read only shapes and dtypes: renaming to alike values keeps the outputs right
        if not (alike and self.meta_ok):
            changes["meta_ok"] = False
        return _replaced(self, changes)

    def flat(self) -> list[BoundSymbol]:
        """This call's innermost decomposition, depth first (itself if it has none)."""
        if not self.subsymbols:
            return [self]
        return [leaf for s in self.subsymbols for leaf in s.flat()]

    def __repr__(self) -> str:
        outs = ", ".join(p.name for p in self.outputs)
        return f"<{outs} = {self.sym.qualname} #{self.id}>"


_SET = object.__setattr__
_BOUND_INIT = tuple(f.name for f in fields(BoundSymbol) if f.init)
_BOUND_NAMES = frozenset(_BOUND_INIT)
_BOUND_LATER = tuple((f.name, f.default) for f in fields(BoundSymbol) if not f.init)
if any(default is MISSING for _, default in _BOUND_LATER):  # _replaced gives them their default
    raise TypeError("every BoundSymbol field that __init__ leaves out needs a plain default")


def _replaced(b: BoundSymbol, changes: dict) -> BoundSymbol:
    """``dataclasses.replace(b, **changes)`` without its per-call look at the fields (passes copy thousands of
    calls): the fields ``__init__`` takes are copied or changed, the ones it leaves out start at their defaults."""
    unknown = changes.keys() - _BOUND_NAMES
    if unknown:
        raise TypeError(f"BoundSymbol.replace: no field {sorted(unknown)[0]!r}; the fields are "
                        f"{', '.join(_BOUND_INIT)}")
    new = object.__new__(BoundSymbol)
    for name in _BOUND_INIT:
        _SET(new, name, changes[name] if name in changes else getattr(b, name))
    for name, default in _BOUND_LATER:
        _SET(new, name, default)
    return new
