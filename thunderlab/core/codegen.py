"""Printing a trace as a deterministic, runnable Python function, and compiling it.

``python_code`` gives the text with its line map (which line prints which call), so that whatever links
program lines to calls, graph nodes or source lines reads the map instead of parsing the text back.
This module knows a trace only by the fields it prints (see ``Printable``): trace.py imports it, not
the other way round.
"""
from __future__ import annotations

import itertools
import linecache
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NamedTuple, Protocol

import torch

from . import fastpaths
from .proxies import ScalarInput, TensorProxy
from .symbols import BoundSymbol, tree_flatten


class Printable(Protocol):
    """What printing needs of a trace (``core.trace.Trace`` is one)."""

    name: str
    inputs: list
    bound_symbols: list[BoundSymbol]
    output: Any


class PrintedCall(NamedTuple):  # a tuple: printing makes one per call, each time a trace prints
    """One call's place in a printed program."""

    line: int  # 1-based line of the text its statement starts on
    bsym: BoundSymbol
    region: str | None  # the fusion region whose function holds it; None for the trace's own function


@dataclass(frozen=True)
class PythonCode:
    """A printed trace and its line map: every call (fusion-region members included) in printed order."""

    text: str
    calls: tuple[PrintedCall, ...]

    def call_at(self, line: int) -> PrintedCall | None:
        """The call whose statement starts on ``line`` (1-based), or None (a comment, ``def``, ``return``)."""
        for c in self.calls:
            if c.line == line:
                return c
        return None

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


def python_code(trace: Printable, *, source: bool = True, comments: bool = True, imports: bool = True,
                header: str | None = None, printer: Printer | None = None, regions: bool = True,
                packed: bool = False) -> PythonCode:
    """The trace as Python source (see :func:`python`) with the line each call prints on."""
    calls: list[PrintedCall] = []
    text = _print(trace, calls, source=source, comments=comments, imports=imports, header=header, printer=printer,
                  regions=regions, packed=packed)
    return PythonCode(text, tuple(calls))


def python(trace: Printable, *, source: bool = True, comments: bool = True, imports: bool = True,
           header: str | None = None, printer: Printer | None = None, regions: bool = True,
           packed: bool = False) -> str:
    """The trace as Python source: stable names, one statement per bound symbol.

    Fusion regions print as functions of their own above the trace (``regions=False``
    leaves them out, for executors that supply compiled regions instead). ``packed=True``
    makes the function take its inputs as one list, which it unpacks and empties: the
    caller then holds no reference, so each input is freed at its ``del``, not at return.
    """
    return _print(trace, None, source=source, comments=comments, imports=imports, header=header, printer=printer,
                  regions=regions, packed=packed)


def _print(trace: Printable, calls: list[PrintedCall] | None, *, source: bool, comments: bool, imports: bool,
           header: str | None, printer: Printer | None, regions: bool, packed: bool) -> str:
    """The text, and into ``calls`` (unless None: the text alone is wanted more often) each call's place."""
    p = printer or Printer()
    lines: list[str] = []  # one line each, so that a call's line number is where it is appended
    if header:
        lines += [f"# {h}" for h in header.splitlines()]
    if imports:
        lines += HEADER_IMPORTS.split("\n")
    _function(lines, calls, trace.name, trace.inputs, trace.bound_symbols, trace.output, p, None, source=source,
              comments=comments, regions=regions, packed=packed)
    return "\n".join(lines) + "\n"


def _function(lines: list[str], calls: list[PrintedCall] | None, name: str, inputs,
              bound_symbols: Sequence[BoundSymbol], output, p: Printer, region: str | None, *, source: bool,
              comments: bool, regions: bool, packed: bool = False) -> None:
    """One function's lines, with the fusion regions it calls printed above it, each followed by a blank line."""
    if regions:
        for b in bound_symbols:
            if b.sym.is_region:
                lines.append(f"# fusion region {b.sym.name}: {len(b.subsymbols)} calls, run by {b.executor}")
                _function(lines, calls, b.sym.name, list(b.args), b.subsymbols, b.output, p, b.sym.name,
                          source=source, comments=comments, regions=True)
                lines.append("")
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
        stmt = _line(p, bsym, comments)
        if calls is not None:
            calls.append(PrintedCall(len(lines) + 1, bsym, region))
        if "\n" in stmt:  # a custom printer's statement over several lines
            lines += stmt.split("\n")
        else:
            lines.append(stmt)
    lines.append(f"    return {p.value(output)}")


# the modules printed programs refer to; thunderlab.ops adds prims and ltorch when imported
NAMESPACE: dict[str, object] = {"torch": torch}


def symbol_module(name: str, functions: dict) -> ModuleType:
    """A module object named ``name`` (``ltorch``, ``prims``) holding ``functions``: what a bound program's
    ``ltorch.linear(...)`` calls. A module rather than a plain namespace object, since TorchDynamo traces a
    module's functions in every torch release thunderlab supports (2.11's cannot call a SimpleNamespace's)."""
    module = ModuleType(name)
    module.__dict__.update(functions)
    return module


_SOURCES: OrderedDict[str, None] = OrderedDict()  # the filenames this module put in linecache, oldest first
_SOURCES_KEPT = 1000
_numbers = itertools.count(2)


def compile_program(src: str, name: str):
    """Compile a printed program's text, named ``<thunderlab NAME>``, with its lines registered in ``linecache``:
    tracebacks through it show its code, and ``inspect.getsourcefile`` finds it, so ``torch.compile`` takes the
    function as it is (torch 2.11 wraps a function without a source file in a frame of its own, one shared by
    every function so wrapped, whose compiles then count against one recompile limit). A name already registered
    for another text gets a number. The newest 1000 texts are kept."""
    filename = f"<thunderlab {name}>"
    entry = linecache.cache.get(filename)
    if entry is not None and "".join(entry[2]) != src:
        filename = f"<thunderlab {name} #{next(_numbers)}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    _SOURCES[filename] = None
    _SOURCES.move_to_end(filename)
    while len(_SOURCES) > _SOURCES_KEPT:
        linecache.cache.pop(_SOURCES.popitem(last=False)[0], None)
    return compile(src, filename, "exec")


def default_namespace() -> dict:
    """The globals a printed program runs with: torch, prims and ltorch."""
    return dict(NAMESPACE)


def to_callable(trace: Printable, namespace: dict | None = None, *, impls: dict | None = None, packed: bool = False):
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
            g[mod] = symbol_module(mod, attrs)
    code = compile_program(src, trace.name)
    exec(code, g)
    return g[trace.name]
