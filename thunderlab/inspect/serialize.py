"""The versioned JSON payload of a compile record ("thunderlab.record/v1"), read by every view.

``RecordPayload(record)`` builds it lazily: ``summary()`` is the record with its steps' headers
only (pass, seconds, symbol counts, verification, error), and ``step(i)`` adds that step's
traces (program text, graph, text diff and graph changes against the previous step, stats)
when first asked for.
``to_dict()`` is the whole payload; ``thunderlab/inspect/schema/record-v1.json`` is its schema.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .calls import input_names, saved_for_backward, trace_calls
from .graph import graph_diff, trace_graph

# a record (``thunderlab.inspect.record``) imports this module to serialize itself: this one reads a record's
# fields and steps' fields and never imports it, so the two make no circle

SCHEMA_ID = "thunderlab.record/v1"
SCHEMA_PATH = Path(__file__).parent / "schema" / "record-v1.json"


def schema() -> dict:
    """The JSON Schema of the payload."""
    return json.loads(SCHEMA_PATH.read_text())


def jsonable(v: Any, depth: int = 0) -> Any:
    """Plain JSON data for notes and timings: tuples become lists, keys strings, the rest its repr."""
    if v is None or isinstance(v, (bool, str, int)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if depth > 8:
        return repr(v)
    if isinstance(v, dict):
        return {str(k): jsonable(e, depth + 1) for k, e in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [jsonable(e, depth + 1) for e in v]
    return repr(v)


def _graph(g) -> dict:
    return {"nodes": [{"id": n.id, "label": n.label, "kind": n.kind, "executor": n.executor,
                       "source": n.source, "group": n.group, "scope": n.scope, "derived_from": n.derived_from,
                       "outputs": [list(o) for o in n.outputs]} for n in g.nodes.values()],
            "edges": [{"src": e.src, "dst": e.dst, "value": e.value, "type": e.type} for e in g.edges]}


def _stats(trace) -> dict:
    executors: dict[str, int] = {}
    regions = 0
    for b in trace.bound_symbols:
        if b.sym.bookkeeping:
            continue
        if b.sym.is_region:
            regions += 1
        executors[b.executor or "unclaimed"] = executors.get(b.executor or "unclaimed", 0) + 1
    return {"symbols": sum(executors.values()), "regions": regions, "executors": executors}


class RecordPayload:
    """The payload of one record, built step by step on demand and cached.

    A record loaded from a file gets back the payload it was loaded from (``SavedPayload``).
    """

    def __new__(cls, record):
        if getattr(record, "document", None) is not None:
            return SavedPayload(record.document)
        return super().__new__(cls)

    def __init__(self, record):
        self.record = record
        self._traces: dict[int, dict | None] = {}
        self._graphs: dict[tuple[int, str], object] = {}

    def _graph_of(self, i: int, name: str):
        key = (i, name)
        if key not in self._graphs:
            self._graphs[key] = trace_graph(self.record.steps[i].program.traces[name], expand_regions=True)
        return self._graphs[key]

    def _previous(self, i: int):
        for s in reversed(self.record.steps[:i]):
            if s.program is not None:
                return s
        return None

    def _header(self, s) -> dict:
        v = s.verification
        return {"index": s.index, "spec": s.spec, "seconds": s.seconds, "symbols_before": s.symbols_before,
                "symbols_after": s.symbols_after, "error": s.error,
                "verification": None if v is None else {"ok": v.ok, "structural": v.structural,
                                                       "max_error": jsonable(v.max_error), "detail": v.detail},
                "notes": jsonable(s.notes.to_json())}

    def traces(self, i: int) -> dict | None:
        """Step ``i``'s traces: program text, graph, diff against the previous step and stats."""
        if i not in self._traces:
            s = self.record.steps[i]
            if s.program is None:
                self._traces[i] = None
            else:
                prev = self._previous(i)
                out = {}
                for name, t in s.program.traces.items():
                    diff = changes = None
                    g = self._graph_of(i, name)
                    if prev is not None:
                        if name in prev.program.traces:
                            diff = self.record.diff(prev.index, i, name)
                            d = graph_diff(self._graph_of(prev.index, name), g)
                            changes = {"added": d.added, "removed": d.removed, "changed": d.changed,
                                       "executor": d.executor, "regrouped": d.regrouped}
                        else:
                            diff = f"--- {prev.index} {prev.spec}\n+++ {i} {s.spec}\n@@ new trace {name!r} @@\n"
                            changes = {"added": [n for n, v in g.nodes.items() if v.kind != "output"],
                                       "removed": [], "changed": [], "executor": [], "regrouped": []}
                    code = t.python_code(header=s.header(name))  # Step.python's text, with its line map
                    out[name] = {"program": code.text, "diff": diff, "graph": _graph(g), "changes": changes,
                                 "stats": _stats(t), "calls": trace_calls(code)}
                saved = saved_for_backward(s.program)
                if saved is not None:
                    out["forward"]["saved"] = saved
                self._traces[i] = out
        return self._traces[i]

    def step(self, i: int) -> dict:
        if not -len(self.record.steps) <= i < len(self.record.steps):
            raise IndexError(f"step {i} out of range: this record has steps 0..{len(self.record.steps) - 1}")
        i %= len(self.record.steps)
        return {**self._header(self.record.steps[i]), "traces": self.traces(i)}

    def regions(self) -> dict:
        """Per fusion region, the record's snapshot (see ``CompileRecord.regions``); a region with no kernel code
        yet shows what ``fuse`` described of it."""
        described = {}
        for s in self.record.steps:
            regions = s.notes.get("regions")  # a pass that made regions names them in this fact
            if isinstance(regions, dict):
                described.update(regions)
        out = {}
        for name, r in self.record.regions.items():
            code = r.get("code")
            if code is None:
                code = described.get(name, {}).get("description")
            out[name] = {"executor": r["executor"], "version": r["version"], "error": r["error"],
                         "history": jsonable(r["history"]), "timings": jsonable(r["timings"]), "code": code}
            if r.get("race") is not None:  # compiled with race=False, or before regions were raced: none
                out[name]["race"] = jsonable(r["race"])
            if r.get("layouts") is not None:  # a worker's kernel, compiled again for other input strides
                out[name]["layouts"] = jsonable(r["layouts"])
            if r.get("gemm"):  # the library each linear layer's product runs on (executors/gemm.py)
                out[name]["gemm"] = jsonable(r["gemm"])
        return out

    def summary(self) -> dict:
        """The record without any step's traces (each step's ``traces`` is null)."""
        r = self.record
        first = r.steps[0].program if r.steps else None
        return {"schema": SCHEMA_ID, "name": r.name, "inputs": list(r.inputs), "input_names": input_names(first),
                "pipeline": r.pipeline,
                "created": r.created, "error": r.error, "compile_seconds": r.compile_seconds,
                "steps": [{**self._header(s), "traces": None} for s in r.steps], "regions": self.regions(),
                "kernels": None if r.kernels is None else jsonable(r.kernels),
                "communication": jsonable(r.communication)}

    def to_dict(self) -> dict:
        """The whole payload: every step with its traces."""
        d = self.summary()
        d["steps"] = [self.step(i) for i in range(len(self.record.steps))]
        return d


class SavedPayload:
    """The payload of a record loaded from a file: the document itself, with ``RecordPayload``'s interface."""

    def __init__(self, document: dict):
        self.document = document

    def traces(self, i: int) -> dict | None:
        return self.step(i)["traces"]

    def step(self, i: int) -> dict:
        steps = self.document["steps"]
        if not -len(steps) <= i < len(steps):
            raise IndexError(f"step {i} out of range: this record has steps 0..{len(steps) - 1}")
        return steps[i % len(steps)]

    def regions(self) -> dict:
        return self.document["regions"]

    def summary(self) -> dict:
        return {**self.document, "steps": [{**s, "traces": None} for s in self.document["steps"]]}

    def to_dict(self) -> dict:
        return self.document


def to_json(record, path: str | Path | None = None, *, indent: int | None = None) -> str:
    """The record's whole payload as JSON text; written to ``path`` when given."""
    text = json.dumps(RecordPayload(record).to_dict(), indent=indent, allow_nan=False)
    if path is not None:
        Path(path).write_text(text)
    return text


def validate(payload: dict) -> None:
    """Raise ``jsonschema.ValidationError`` if ``payload`` does not follow the v1 schema."""
    import jsonschema

    jsonschema.validate(payload, schema())
