"""Per-call facts the views need beside a trace's text: where each call prints, who runs it, where it came from.

``trace_calls(code)`` lists every call of a printed trace (``Trace.python_code()``), fusion-region members
included, with its stable id (the same across steps, so two steps' programs can be aligned call by call),
the line it prints on (from the printer's line map), its executor and region, and the user's source line
(with the notebook cell's execution count when the call was written in a notebook cell).
``saved_for_backward(program)`` lists the values a training program keeps for the backward pass.
"""
from __future__ import annotations

import os
import sys

from thunderlab.core.codegen import PythonCode
from thunderlab.core.proxies import TensorProxy
from thunderlab.core.symbols import SourceInfo


def _cell(file: str) -> int | None:
    """The execution count of the notebook cell ``file`` names, when this runs in an IPython kernel."""
    ipython = sys.modules.get("IPython")
    ip = ipython.get_ipython() if ipython is not None else None
    names = getattr(getattr(ip, "compile", None), "_filename_map", None)
    count = names.get(file) if isinstance(names, dict) else None
    return count if isinstance(count, int) else None


def source_position(src: SourceInfo | None) -> dict | None:
    """A call's source as the views show and open it: file, line, code, module scope, and cell or relative path."""
    if src is None:
        return None
    cell = _cell(src.file)
    rel = None
    if cell is None and src.file and os.path.isabs(src.file):
        try:
            r = os.path.relpath(src.file)
        except ValueError:  # another drive (Windows)
            r = None
        rel = r if r is not None and not r.startswith("..") else None
    return {"file": os.path.basename(src.file), "line": src.line, "code": src.code.strip(),
            "scope": src.scope or None, "cell": cell, "path": rel}


def trace_calls(code: PythonCode) -> list[dict]:
    """Every call of a printed trace, in printed order, with the 1-based line of ``code.text`` it prints on."""
    out = []
    for c in code.calls:
        b = c.bsym
        if b.sym.bookkeeping:  # ``del``: not a call the views link to anything
            continue
        out.append({"id": f"b{b.id}", "line": c.line, "op": b.sym.qualname, "executor": b.executor,
                    "region": c.region, "origin": b.origin, "source": source_position(b.source)})
    return out


def _bytes(p: TensorProxy) -> int:
    n = 1
    for s in p.shape:
        n *= int(s)
    return n * p.dtype.itemsize


def saved_for_backward(program) -> dict | None:
    """The values the forward trace keeps for the backward one, each with its size; None before autodiff."""
    if program is None or "backward" not in program.traces:
        return None
    out = program.forward.output
    if not (isinstance(out, (tuple, list)) and len(out) == 2 and isinstance(out[1], (tuple, list))):
        return None
    values = [{"name": p.name, "type": p.type_string(), "bytes": _bytes(p)}
              for p in out[1] if isinstance(p, TensorProxy)]
    return {"values": values, "bytes": sum(v["bytes"] for v in values)}


def input_names(program) -> list[dict]:
    """The forward trace's inputs by name with their type ("x: cpu f32[2, 16]")."""
    if program is None or "forward" not in program.traces:
        return []
    return [{"name": i.name, "type": i.type_string()} for i in program.forward.inputs]
