"""Printing a trace as a deterministic, runnable Python function, and compiling it."""
from __future__ import annotations

import math
from types import SimpleNamespace
from typing import TYPE_CHECKING

import torch

from . import fastpaths
from .proxies import ScalarInput, TensorProxy
from .symbols import BoundSymbol, tree_flatten

if TYPE_CHECKING:  # annotations only: trace.py imports this module to print itself
    from .trace import Trace

HEADER_IMPORTS = "import torch\nfrom thunderlab.ops import prims, ltorch\n"
_COMMENT_COLUMN = 64


class Printer:
    """Turns values into source text; objects with no literal become named constants."""

    def __init__(self):
        self.constants: dict[str, object] = {}
        self._by_id: dict[int, str] = {}
        self.constant_uses = 0  # text that names a constant depends on this printer; it is not cached

    def value(self, v) -> str:
        if isinstance(v, (TensorProxy, ScalarInput)):
            return v.name
        if v is None or isinstance(v, (bool, int, str)):
            return repr(v)
        if isinstance(v, float):
            if math.isinf(v):
                return "float('inf')" if v > 0 else "-float('inf')"
            if math.isnan(v):
                return "float('nan')"
            return repr(v)
        if isinstance(v, complex):
            return repr(v)
        if v is Ellipsis:
            return "..."
        if isinstance(v, torch.dtype):
            return str(v)
        if isinstance(v, torch.device):
            return f"torch.device({str(v)!r})"
        if isinstance(v, (torch.memory_format, torch.layout)):
            return str(v)
        if isinstance(v, slice):
            return f"slice({self.value(v.start)}, {self.value(v.stop)}, {self.value(v.step)})"
        if isinstance(v, tuple):  # torch.Size included
            inner = ", ".join(self.value(e) for e in v)
            return f"({inner},)" if len(v) == 1 else f"({inner})"
        if isinstance(v, list):
            return "[" + ", ".join(self.value(e) for e in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k!r}: {self.value(e)}" for k, e in v.items()) + "}"
        return self.constant(v)

    def constant(self, v) -> str:
        self.constant_uses += 1
        name = self._by_id.get(id(v))
        if name is None:
            name = f"_c{len(self.constants)}"
            self._by_id[id(v)] = name
            self.constants[name] = v
        return name

    def call(self, bsym: BoundSymbol) -> str:
        parts = [self.value(a) for a in bsym.args]
        parts += [f"{k}={self.value(v)}" for k, v in bsym.kwargs.items()]
        return f"{bsym.sym.qualname}({', '.join(parts)})"

    def targets(self, out) -> str:
        if isinstance(out, TensorProxy):
            return out.name
        leaves = tree_flatten(out)
        if not leaves or all(not isinstance(v, TensorProxy) for v in leaves):
            return "_"
        if isinstance(out, (tuple, list)) and all(isinstance(e, TensorProxy) for e in out):
            return ", ".join(e.name for e in out) + ("," if len(out) == 1 else "")
        return self.pattern(out)

    def pattern(self, out) -> str:
        if isinstance(out, TensorProxy):
            return out.name
        if isinstance(out, (tuple, list)):
            inner = ", ".join(self.pattern(e) for e in out)
            return f"({inner},)" if len(out) == 1 else f"({inner})"
        return "_"


def _comment(bsym: BoundSymbol) -> str:
    outs = bsym.outputs
    text = ", ".join(p.type_string() for p in outs[:4])
    if len(outs) > 4:
        text += f", ... ({len(outs)} outputs)"
    if bsym.executor:
        text = f"{text}  [{bsym.executor}]" if text else f"[{bsym.executor}]"
    return text


def statement(printer: Printer, bsym: BoundSymbol) -> str:
    if bsym.sym.printer is not None:
        return bsym.sym.printer(printer, bsym)
    call = printer.call(bsym)
    if not bsym.outputs:
        return call
    return f"{printer.targets(bsym.output)} = {call}"


# A bound symbol never changes, so its printed line is kept while it lives, in its ``_printed`` slot
# (without comments, with them): the steps of a record share most of their calls, and each step is
# printed more than once (program, diff). A slot, not a table beside the calls: a table costs each
# call a weak reference and an entry, kept as long as the record.
def _line(p: Printer, bsym: BoundSymbol, comments: bool) -> str:
    fast = fastpaths.enabled()
    cached = bsym._printed if fast else None
    if cached is not None and cached[comments] is not None:
        return cached[comments]
    uses = p.constant_uses
    stmt = "    " + statement(p, bsym)
    note = _comment(bsym) if comments else ""
    if note:
        stmt = f"{stmt.ljust(_COMMENT_COLUMN)}  # {note}"
    if p.constant_uses == uses and fast:
        pair = list(bsym._printed or (None, None))
        pair[comments] = stmt
        object.__setattr__(bsym, "_printed", tuple(pair))
    return stmt


def python(trace: Trace, *, source: bool = True, comments: bool = True, imports: bool = True,
           header: str | None = None, printer: Printer | None = None, regions: bool = True,
           packed: bool = False) -> str:
    """The trace as Python source: stable names, one statement per bound symbol.

    Fusion regions print as functions of their own above the trace (``regions=False``
    leaves them out, for executors that supply compiled regions instead). ``packed=True``
    makes the function take its inputs as one list, which it unpacks and empties: the
    caller then holds no reference, so each input is freed at its ``del``, not at return.
    """
    p = printer or Printer()
    lines: list[str] = []
    if header:
        lines += [f"# {h}" for h in header.splitlines()]
    if imports:
        lines.append(HEADER_IMPORTS)
    return function(trace.name, trace.inputs, trace.bound_symbols, trace.output, lines, p, source=source,
                    comments=comments, regions=regions, packed=packed)


def function(name: str, inputs, bound_symbols, output, lines: list[str], p: Printer, *, source: bool, comments: bool,
             regions: bool, packed: bool = False) -> str:
    """One function's text (after ``lines``), with the fusion regions it calls printed above it."""
    if regions:
        for b in bound_symbols:
            if b.sym.is_region:
                lines.append(f"# fusion region {b.sym.name}: {len(b.subsymbols)} calls, run by {b.executor}")
                lines.append(function(b.sym.name, list(b.args), b.subsymbols, b.output, [], p, source=source,
                                      comments=comments, regions=True))
    params = ", ".join(p.value(i) for i in inputs)
    if packed:
        lines.append(f"def {name}(_inputs):")
        if inputs:
            lines.append(f"    {params}{',' if len(inputs) == 1 else ''} = _inputs")
        lines.append("    _inputs.clear()")
    else:
        lines.append(f"def {name}({params}):")
    if comments:
        for i in inputs:
            lines.append(f"    # {i.name}: {i.type_string()}")
    last_src = None
    for bsym in bound_symbols:
        src = bsym.source
        if source and src is not None and (src.file, src.line) != last_src:
            lines.append(f"    # {src.short()}   {src.code.strip()}".rstrip())
            last_src = (src.file, src.line)
        lines.append(_line(p, bsym, comments))
    lines.append(f"    return {p.value(output)}")
    return "\n".join(lines) + "\n"


# the modules printed programs refer to; thunderlab.ops adds prims and ltorch when imported
NAMESPACE: dict[str, object] = {"torch": torch}


def default_namespace() -> dict:
    """The globals a printed program runs with: torch, prims and ltorch."""
    return dict(NAMESPACE)


def to_callable(trace: Trace, namespace: dict | None = None, *, impls: dict | None = None, packed: bool = False):
    """Compile the printed trace into a Python function (``packed``: see :func:`python`).

    ``namespace`` replaces the default globals; ``impls`` maps a symbol's qualname
    (``ltorch.linear``) to the function that should run it, which is how executors bind
    their implementations without changing the printed text.
    """
    p = Printer()
    for bsym in trace.bound_symbols:  # opaque calls with no importable name
        if "." not in bsym.sym.qualname:
            p.constants.setdefault(bsym.sym.qualname, bsym.sym.impl)
    src = python(trace, source=False, comments=False, imports=False, printer=p, regions=impls is None,
                 packed=packed)
    g = dict(namespace if namespace is not None else default_namespace())
    g.update(p.constants)
    if impls:
        modules: dict[str, dict] = {}
        for qual, fn in impls.items():
            mod, _, attr = qual.partition(".")
            if mod in ("ltorch", "prims"):
                modules.setdefault(mod, {})[attr] = fn
            elif not attr:
                g[qual] = fn
        for mod, attrs in modules.items():
            g[mod] = SimpleNamespace(**attrs)
    code = compile(src, f"<thunderlab {trace.name}>", "exec")
    exec(code, g)
    fn = g[trace.name]
    fn.__thunderlab_source__ = src
    return fn
