"""Comparing two compile records: pipelines, step tables, final programs and run time."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import torch

from thunderlab.inspect.record import CompileRecord
from thunderlab.passes.verification import fresh_copies

from .compiled import program_runner
from .session import live, session_of


def time_program(record: CompileRecord, repeats: int = 20, warmup: int = 3, wait_s: float = 300.0,
                 inputs: tuple | None = None) -> float:
    """Median seconds of one call of the record's compiled program (its fused kernels built) on copies of its inputs."""
    session = live(record, "timing a record's program", "its compiled program and the inputs it was compiled for",
                   "compare with time=False")
    inputs = inputs if inputs is not None else session.example_inputs
    if inputs is None or record.program is None:
        raise ValueError(f"{record!r} has no final program, or its inputs are gone (records hold tensors weakly; "
                         f"compile with thunderlab.jit(..., keep_inputs=True) to time it later)")
    fn = program_runner(record)
    inputs = fresh_copies(inputs)
    times = []
    with torch.no_grad():
        fn(*inputs)  # a region's first call starts its fused kernel's compile; the timing waits for it
        session.wait(wait_s)
        for i in range(warmup + repeats):
            t0 = time.perf_counter()
            fn(*inputs)
            if i >= warmup:
                times.append(time.perf_counter() - t0)
    return statistics.median(times)


@dataclass
class RecordComparison:
    a: CompileRecord
    b: CompileRecord
    program_diff: str
    symbols: tuple[int, int]
    regions: tuple[int, int]
    seconds: tuple[float, float] | None = None  # median call time of each final program
    steps: list[tuple] = field(default_factory=list)  # (index, spec a, ms a, spec b, ms b)
    note: str = ""  # why the call time is missing, when it was asked for

    @property
    def speedup(self) -> float | None:
        return self.seconds[0] / self.seconds[1] if self.seconds else None

    def __str__(self) -> str:
        lines = [
            f"pipeline  a: {self.a.pipeline}",
            f"          b: {self.b.pipeline}",
            f"symbols   {self.symbols[0]} -> {self.symbols[1]}; fusion regions {self.regions[0]} -> {self.regions[1]}",
        ]
        if self.seconds:
            lines.append(f"call time {self.seconds[0] * 1e3:.3f} ms -> {self.seconds[1] * 1e3:.3f} ms "
                         f"(b is {self.speedup:.2f}x as fast as a)")
        elif self.note:
            lines.append(f"call time not timed: {self.note}")
        lines.append(" step  " + "a".ljust(28) + "      ms  " + "b".ljust(28) + "      ms")
        for i, sa, ma, sb, mb in self.steps:
            fmt = lambda s, m: (s or "").ljust(28) + (f"{m:8.1f}" if m is not None else " " * 8)  # noqa: E731
            lines.append(f" {i:>4}  {fmt(sa, ma)}  {fmt(sb, mb)}")
        lines.append(self.program_diff or "(final programs print the same)")
        return "\n".join(lines)


def _regions(record: CompileRecord) -> int:
    return sum(1 for t in record.program for b in t.bound_symbols if b.sym.is_region)


def compare_records(a: CompileRecord, b: CompileRecord, *, time: bool = True) -> RecordComparison:
    """The difference between two records of the same captured graph (e.g. a record and its re-run)."""
    from thunderlab.inspect.diff import text_diff

    if a.program is None or b.program is None:
        raise ValueError("both records need a final program to compare")
    diff = text_diff(
        a.program.forward, b.program.forward, before_name=f"a: {a.pipeline}", after_name=f"b: {b.pipeline}"
    )
    n = max(len(a.steps), len(b.steps))
    rows = []
    for i in range(n):
        sa = a.steps[i] if i < len(a.steps) else None
        sb = b.steps[i] if i < len(b.steps) else None
        rows.append((i, sa and sa.spec, sa and sa.ms, sb and sb.spec, sb and sb.ms))
    seconds, note = None, ""
    sa, sb = session_of(a), session_of(b)
    ia, ib = (s.example_inputs if s is not None else None for s in (sa, sb))  # held here while both are timed
    if time and (sa is None or sb is None):
        dead = a if sa is None else b
        note = (f"record {dead.name!r} has no live session in this process (its function was dropped), so it has "
                f"no program to run; compare records of a live function to time them")
    elif time and (ia is None or ib is None):
        note = ("the inputs the records were compiled for are gone (records hold tensors weakly; "
                "compile with keep_inputs=True to time later)")
    elif time:
        seconds = (time_program(a, inputs=ia), time_program(b, inputs=ib))
    return RecordComparison(
        a, b, diff, (a.program.count(), b.program.count()), (_regions(a), _regions(b)), seconds, rows, note
    )
