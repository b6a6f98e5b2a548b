"""Traces: inputs, bound symbols in SSA order, outputs; and the tracing context."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from . import codegen
from .context import CURRENT_TRACE
from .proxies import ScalarInput, TensorProxy
from .symbols import BoundSymbol, SourceInfo, Symbol, proxies_in, tree_flatten

__all__ = ["ScalarInput", "Trace", "TraceError", "current_trace", "region_trace"]


class TraceError(Exception):
    """An operation could not be traced; the message names the op and what would be valid."""


@dataclass(eq=False, slots=True, weakref_slot=True)  # slots: a record keeps every step's traces (see TensorProxy)
class Trace:
    """A program in SSA form: ``inputs``, ``bound_symbols`` in order, ``output``.

    A trace owns its namespace: proxies created while it is active get fresh names.
    ``python()`` prints it as a runnable function; ``callable()`` compiles that text.
    """

    name: str = "forward"
    inputs: list = field(default_factory=list)
    bound_symbols: list[BoundSymbol] = field(default_factory=list)
    output: Any = None
    _names: set = field(default_factory=set, repr=False)
    # derive() shares the namespace until either trace adds a name: a record keeps every step's trace, and most
    # passes add none, so copying it at once would cost a set per trace per step
    _names_shared: bool = field(default=False, repr=False)
    _counter: int = field(default=0, repr=False)
    _scopes: list | None = field(default=None, repr=False)  # made when recording starts: most traces never record
    _source: SourceInfo | None = field(default=None, repr=False)
    _derived: int | None = field(default=None, repr=False)
    # grad mode while recording (a no_grad region of the user's function): values made while it
    # is off do not require grad, as in eager
    grad_enabled: bool = field(default=True, repr=False)
    # one set per call being bound (calls nest through decompositions): the effects its meta noted
    _effects: list = field(default_factory=list, repr=False)

    # -- names and proxies -------------------------------------------------
    def add_name(self, name: str) -> str:
        base, n = name, 0
        while name in self._names:
            n += 1
            name = f"{base}_{n}"
        self._own_names().add(name)
        return name

    def fresh_name(self, prefix: str = "t") -> str:
        while True:
            name = f"{prefix}{self._counter}"
            self._counter += 1
            if name not in self._names:
                self._own_names().add(name)
                return name

    def proxy(
        self, shape, dtype: torch.dtype, device, requires_grad: bool = False, name: str | None = None
    ) -> TensorProxy:
        name = self.add_name(name) if name else self.fresh_name()
        return TensorProxy(name, tuple(int(s) for s in shape), dtype, torch.device(device),
                           bool(requires_grad) and self.grad_enabled)

    def _own_names(self) -> set:
        """This trace's namespace, copied first if it is still shared with the trace it was derived from."""
        if self._names_shared:
            self._names, self._names_shared = set(self._names), False
        return self._names

    def derive(self, **changes) -> Trace:
        """A new trace with this one's namespace (copied when either adds a name) and fields replaced."""
        self._names_shared = True
        # a field given in ``changes`` is not copied first
        t = Trace(
            name=self.name,
            inputs=list(self.inputs) if "inputs" not in changes else None,
            bound_symbols=list(self.bound_symbols) if "bound_symbols" not in changes else None,
            output=self.output,
            _names=self._names,
            _names_shared=True,
            _counter=self._counter,
        )
        for k, v in changes.items():
            setattr(t, k, v)
        return t

    # -- recording ---------------------------------------------------------
    @contextmanager
    def active(self):
        """Make this the trace that symbol calls record into."""
        token = CURRENT_TRACE.set(self)
        if self._scopes is None:
            self._scopes = []
        self._scopes.append(self.bound_symbols)
        try:
            yield self
        finally:
            self._scopes.pop()
            CURRENT_TRACE.reset(token)

    @contextmanager
    def source(self, info: SourceInfo | None):
        prev, self._source = self._source, info
        try:
            yield
        finally:
            self._source = prev

    @contextmanager
    def deriving(self, forward: BoundSymbol):
        """Calls recorded inside come from differentiating ``forward``: they keep its id and source."""
        prev = self._derived, self._source
        self._derived, self._source = forward.id, forward.source
        try:
            yield
        finally:
            self._derived, self._source = prev

    def note_effect(self, tag) -> None:
        """The call being bound has effect ``tag`` (a ``Tag``), found while computing its metadata."""
        if self._effects:
            self._effects[-1].add(tag)

    def bind(self, sym: Symbol, args: tuple, kwargs: dict):
        """Record one call of ``sym``; return its output proxies."""
        effects: set = set()
        self._effects.append(effects)
        try:
            out, subsymbols = self._trace_call(sym, args, kwargs)
        finally:
            self._effects.pop()
        bsym = BoundSymbol(sym, tuple(args), dict(kwargs), out, subsymbols, self._source, derived_from=self._derived,
                           effects=frozenset(effects - sym.tags) if effects else frozenset(), meta_ok=True)
        self._scopes[-1].append(bsym)
        return out

    def _trace_call(self, sym: Symbol, args: tuple, kwargs: dict) -> tuple:
        """``sym``'s outputs for these arguments, and the calls its decomposition made (none without one)."""
        if sym.decomposition is not None:
            subs: list[BoundSymbol] = []
            self._scopes.append(subs)
            try:
                out = sym.decomposition(*args, **kwargs)
            finally:
                self._scopes.pop()
            if out is NotImplemented:
                out, subsymbols = sym.meta(*args, **kwargs), ()
            else:
                made = {p.name for s in subs for p in s.outputs}
                fresh = [p for p in proxies_in(out) if p.name not in made]
                if fresh:
                    raise TraceError(
                        f"internal: decomposition of {sym.qualname} returned an input unchanged ({fresh[0].name})"
                    )
                subsymbols = tuple(subs)
        else:
            out = sym.meta(*args, **kwargs)
            subsymbols = ()
        return out, subsymbols

    # -- queries -----------------------------------------------------------
    def tensor_inputs(self) -> list[TensorProxy]:
        return [p for p in self.inputs if isinstance(p, TensorProxy)]

    def output_proxies(self) -> list[TensorProxy]:
        return [p for p in tree_flatten(self.output) if isinstance(p, TensorProxy)]

    def count(self) -> int:
        """Number of bound symbols, not counting bookkeeping such as ``del``."""
        return sum(1 for b in self.bound_symbols if not b.sym.bookkeeping)

    def python(self, **options) -> str:
        return codegen.python(self, **options)

    def python_code(self, **options) -> codegen.PythonCode:
        """``python()``'s text with its line map: the line each call (region members included) prints on."""
        return codegen.python_code(self, **options)

    def callable(self, namespace: dict | None = None, *, impls: dict | None = None, packed: bool = False):
        return codegen.to_callable(self, namespace, impls=impls, packed=packed)

    def __str__(self) -> str:
        return self.python()


def current_trace() -> Trace | None:
    """The trace being recorded, or None when symbols run eagerly (``Trace.active`` sets it)."""
    return CURRENT_TRACE.get()


def region_trace(bsym: BoundSymbol) -> Trace:
    """The members of a fusion region as a trace of their own (inputs, calls, outputs)."""
    names = {p.name for p in bsym.inputs} | {p.name for s in bsym.subsymbols for p in s.outputs}
    return Trace(name=bsym.sym.name, inputs=list(bsym.args), bound_symbols=list(bsym.subsymbols),
                 output=bsym.output, _names=names)
