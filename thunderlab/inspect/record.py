"""CompileRecord and Step: the plain-data account of one compilation."""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

from thunderlab.core.notes import Notes
from thunderlab.core.program import Program

from . import packed


@dataclass(slots=True)  # slots: a record keeps one per step for as long as its function lives
class Verification:
    """What was checked after a step: structure always, numerics when asked."""

    ok: bool
    structural: str = "ok"  # "ok" or the first problem found
    max_error: float | None = None  # largest |output - eager| when numerics were checked
    detail: str = ""

    def summary(self) -> str:
        if not self.ok:
            return f"FAIL  ({self.detail or self.structural})"
        if self.max_error is not None:
            return f"ok  (max |err| {self.max_error:.3g})"
        return "ok"


@dataclass(slots=True)
class Step:
    """One pass of a pipeline (step 0 is capture): its program afterwards and what it cost."""

    index: int
    spec: str
    seconds: float
    program: Program | None
    symbols_before: int
    symbols_after: int
    verification: Verification | None = None
    error: str | None = None
    notes: Notes = field(default_factory=Notes)  # what the pass did: summary, named facts, declines
    # the Pass class that ran (re-runs reuse a step only for the same class)
    pass_type: Any = field(default=None, repr=False)
    # the pass as it ran, "auto" options decided (see Pass.in_pipeline)
    resolved: str | None = field(default=None, repr=False)
    # a step loaded from a file has no program, only what the payload keeps of it: per trace its
    # text, graph, diff against the previous step and stats (the payload's ``traces``)
    saved: dict[str, dict] | None = field(default=None, repr=False)

    @property
    def ms(self) -> float:
        return self.seconds * 1e3

    def python(self, trace: str = "forward") -> str:
        """The program after this step as runnable Python (one trace, default forward)."""
        if self.program is None and self.saved is not None:
            return self._saved(trace)["program"]
        return self.program.traces[trace].python(header=self.header(trace))

    def graph(self, trace: str = "forward", *, expand_regions: bool = False):
        """The program after this step as a dataflow graph (see ``thunderlab.inspect.graph``).

        A step loaded from a file has its graph as the views show it (regions expanded).
        """
        if self.program is None and self.saved is not None:
            from .graph import graph_from_payload

            return graph_from_payload(self._saved(trace)["graph"])
        from .graph import trace_graph

        return trace_graph(self.program.traces[trace], expand_regions=expand_regions)

    def _saved(self, trace: str) -> dict:
        if trace not in self.saved:
            raise ValueError(f"no {trace!r} trace in step {self.index} ({self.spec}); it has {list(self.saved)}")
        return self.saved[trace]

    def header(self, trace: str = "forward") -> str:
        return (f"thunderlab · {trace} · step {self.index} \"{self.spec}\" · {self.ms:.1f} ms · "
                f"{self.symbols_before} -> {self.symbols_after} symbols")


_uids = itertools.count()


@dataclass
class CompileRecord:
    """Everything about compiling one captured graph for one input signature."""

    name: str
    inputs: list[str]
    pipeline: str
    # every pass's step; a closed record that was not used lately keeps them packed (see ``close``), and reading
    # ``steps`` unpacks them: a property, set up below the class
    steps: list[Step] = field(default_factory=list)
    error: str | None = None
    created: float = field(default_factory=time.time)
    graph_index: int = 0
    # per fusion region, as the payload keeps it (executor, version running, error, history, timings, code; a
    # live record's also device and compile_seconds): a snapshot the runtime takes when the program is compiled,
    # when the record is handed out (``thunderlab.last_record``, ``records``), waited on, saved, profiled or shown
    # in the sidebar, and when its function is dropped
    regions: dict[str, dict] = field(default_factory=dict)
    # per collective (all_reduce, all_gather, ...), its exchanges as timed with ``timing=True``: count,
    # median/min/total seconds from issue to its wait returning, median/total seconds blocked in the wait;
    # taken with ``regions``' snapshot; empty when the program exchanged nothing or was not timed
    communication: dict[str, dict] = field(default_factory=dict)
    # the latest kernel-level profile of one call: {region: [{name, count, self_cpu_us, device_us}]}
    kernels: dict[str, list[dict]] | None = None
    reused: int = 0  # passes taken unchanged from the record this one was re-run from
    uid: int = field(default_factory=lambda: next(_uids))  # stable for the process's life, unlike a position
    # the payload this record was loaded from (``thunderlab.load``); None for a record made in this process
    document: dict | None = field(default=None, repr=False)
    source_file: str | None = field(default=None, repr=False)  # the file it was loaded from

    # the steps' state besides ``steps`` itself (see ``_steps``): packed (a ``packed.Packed``), and whether the
    # record was closed
    _packed = None
    _closed = False

    def close(self) -> None:
        """No step will be added from now on: while the record is not among the recently used, it keeps its steps
        packed into one block of bytes, unpacked again when they are read (see ``thunderlab.inspect.packed``)."""
        if not self._closed and self.document is None:
            self._closed = True
            packed.touch(self)

    def pack(self) -> bool:
        """Pack this closed record's steps now (see ``close``); False if it keeps them as they are (not closed, or
        a step refers to something that cannot be copied, which then stays as it was)."""
        with packed.LOCK:
            steps = self.__dict__.get("_steps")
            if steps is None or not self._closed:
                return steps is None
            try:
                self._packed = packed.Packed(steps)
            except Exception:  # (pickling) a value that cannot be copied: the record keeps its steps as they are
                return False
            self._steps = None
            packed.forget(self)
            return True

    @property
    def packed(self) -> bool:
        """Whether the steps are packed now (see ``close``)."""
        return self._packed is not None

    @property
    def step_count(self) -> int:
        """How many steps the record has, without unpacking them."""
        return self._packed.count if self._packed is not None else len(self.steps)

    @property
    def origin(self) -> Notes | None:
        """The capture step's notes (where its graph came from), without unpacking the steps; None with no step."""
        if self._packed is not None:
            return self._packed.origin
        steps = self.steps
        return steps[0].notes if steps else None

    @property
    def loaded(self) -> bool:
        """Whether this record was read from a file: it has its steps' text, graphs and diffs, but no running code."""
        return self.document is not None

    def timings(self) -> dict:
        """Per fusion region: which version runs, when it switched, count/median/min per version, its race
        (None when compiled with ``race=False``) and, for a kernel compiled again for other input strides, its
        ``layouts`` (the layouts compiled since its first, whether one is compiling, the calls torch ran meanwhile)
        and, for an Inductor kernel with linear layers, ``gemm``: per product its shape, the library it runs on
        (MKL or oneDNN) and the times that chose it (see ``thunderlab.executors.gemm``).

        As of the record's snapshot (see ``regions``); ``thunderlab.session(rec).timings()`` reads the running
        regions of a live record.
        """
        return {name: {"executor": r["executor"], "running": r["version"], "error": r["error"],
                       "history": r["history"], "timings": r["timings"], "race": r.get("race"),
                       "layouts": r.get("layouts"), "gemm": r.get("gemm")}
                for name, r in self.regions.items()}

    @property
    def captured(self) -> Program | None:
        """The captured program (step 0's), which re-runs start from; None for a record loaded from a file."""
        return self.steps[0].program if self.steps else None

    @property
    def program(self) -> Program | None:
        """The final program (after the last pass that succeeded)."""
        return self.steps[-1].program if self.steps else None

    @property
    def compile_seconds(self) -> float:
        return sum(s.seconds for s in self.steps)

    def diff(self, a: int, b: int, trace: str = "forward") -> str:
        """The unified diff of one trace between steps ``a`` and ``b``."""
        from .diff import text_diff

        sa, sb = self.steps[a], self.steps[b]
        if self.loaded:
            from .saved import saved_diff

            return saved_diff(self, sa, sb, trace)
        if sa.program is None or sb.program is None:
            raise ValueError(f"step {a if sa.program is None else b} failed and has no program to compare")
        if trace not in sa.program.traces or trace not in sb.program.traces:
            raise ValueError(
                f"no {trace!r} trace in both steps; they have {list(sa.program.traces)} and {list(sb.program.traces)}"
            )
        return text_diff(sa.program.traces[trace], sb.program.traces[trace],
                         before_name=f"{a} {sa.spec}", after_name=f"{b} {sb.spec}")

    def graph_diff(self, a: int, b: int, trace: str = "forward", *, expand_regions: bool = False):
        """The calls added, removed and changed in one trace from step ``a`` to step ``b`` (by stable id)."""
        from .graph import graph_diff

        sa, sb = self.steps[a], self.steps[b]
        if self.loaded:
            from .saved import saved_graph_diff

            return saved_graph_diff(self, sa, sb, trace)
        if sa.program is None or sb.program is None:
            raise ValueError(f"step {a if sa.program is None else b} failed and has no program to compare")
        if trace not in sa.program.traces or trace not in sb.program.traces:
            raise ValueError(
                f"no {trace!r} trace in both steps; they have {list(sa.program.traces)} and {list(sb.program.traces)}"
            )
        return graph_diff(sa.graph(trace, expand_regions=expand_regions),
                          sb.graph(trace, expand_regions=expand_regions))

    # views; each lives in its own module (which never imports this one) and is imported when used

    def payload(self):
        """The lazy JSON payload ("thunderlab.record/v1") of this record: ``summary()``, ``step(i)``, ``to_dict()``."""
        from .serialize import RecordPayload

        return RecordPayload(self)  # a loaded record's is the payload it was loaded from

    def to_json(self, path=None, *, indent: int | None = None) -> str:
        """The whole payload as JSON text (written to ``path`` when given)."""
        from .serialize import to_json

        return to_json(self, path, indent=indent)

    def to_html(self, path=None) -> str:
        """One self-contained HTML file showing every step; written to ``path`` when given."""
        from .html import to_html

        return to_html(self, path)

    def table(self) -> str:
        """The pass table: one row per step with milliseconds, symbols and verification."""
        width = max([len(s.spec) for s in self.steps] + [8])
        rows = [f" step  {'pass'.ljust(width)}  {'ms':>8}  {'symbols':>10}  verified"]
        for s in self.steps:
            syms = f"{s.symbols_after}" if s.index == 0 else f"{s.symbols_before} -> {s.symbols_after}"
            ver = ("ERROR  " + s.error.splitlines()[0] if s.error
                   else (s.verification.summary() if s.verification else "-"))
            if s.notes.summary and not s.error:
                ver += f"  ({s.notes.summary})"
            rows.append(f" {s.index:>4}  {s.spec.ljust(width)}  {s.ms:>8.1f}  {syms:>10}  {ver}")
        return "\n".join(rows)

    def __repr__(self) -> str:
        count = self.step_count  # not unpacked to be shown
        status = f"error: {self.error.splitlines()[0]}" if self.error else f"{count} steps"
        return f"<CompileRecord {self.name} [{self.pipeline}] {status}>"


def _steps(record: CompileRecord) -> list[Step]:
    steps = record.__dict__["_steps"]
    if steps is None:
        with packed.LOCK:
            if record._steps is None:
                record._steps, record._packed = record._packed.unpack(), None
            packed.touch(record)
            return record._steps
    if record._closed:
        packed.touch(record)
    return steps


def _set_steps(record: CompileRecord, steps: list[Step]) -> None:
    with packed.LOCK:
        record._steps, record._packed = steps, None


# ``steps`` is a field (the constructor takes it, equality compares it) read through a property, which unpacks
# packed steps; installed after the dataclass is made, so the generated __init__ sets it through the property
CompileRecord.steps = property(_steps, _set_steps, doc="Every pass's step, step 0 the capture.")
