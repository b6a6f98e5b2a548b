"""A kernel-level profile of one call, with every kernel attributed to the record and fusion region that ran it."""
from __future__ import annotations

import torch
from torch.profiler import ProfilerActivity
from torch.profiler import profile as torch_profile

from thunderlab.executors.region import PROFILING, REGION_MARK
from thunderlab.inspect.record import CompileRecord

from .compiled import RECORD_MARK, program_runner
from .session import GONE, live

OUTSIDE = "(outside regions)"


def profile_records(fn, *args, **kwargs) -> tuple[object, dict[int | None, dict[str, list[dict]]]]:
    """Run ``fn(*args, **kwargs)`` under the torch profiler; (result, {record uid: {region: kernels}}).

    A kernel run by a compiled program is filed under that program's record (None: outside any)
    and its fusion region (``"(outside regions)"`` for the calls between regions). Each kernel entry
    has its name, call count, self CPU microseconds and device microseconds, the costliest first.
    """
    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    PROFILING.set()
    try:
        with torch_profile(activities=activities) as prof:
            result = fn(*args, **kwargs)
            if cuda:
                torch.cuda.synchronize()
    finally:
        PROFILING.clear()
    table: dict[int | None, dict[str, dict[str, dict]]] = {}
    for ev in prof.events():
        if ev.name.startswith((REGION_MARK, RECORD_MARK)):
            continue  # the markers themselves
        uid, region = _place_of(ev)
        rows = table.setdefault(uid, {}).setdefault(region, {})
        row = rows.setdefault(ev.name, {"name": ev.name, "count": 0, "self_cpu_us": 0.0, "device_us": 0.0})
        row["count"] += 1
        row["self_cpu_us"] += ev.self_cpu_time_total
        row["device_us"] += getattr(ev, "self_device_time_total", 0.0) or 0.0
    return result, {uid: {r: _costliest_first(rows.values()) for r, rows in regions.items()}
                    for uid, regions in table.items()}


def merged_kernels(by_record: dict) -> dict[str, list[dict]]:
    """One {region: kernels} table from ``profile_records``' per-record tables (same-named kernels summed)."""
    merged: dict[str, dict[str, dict]] = {}
    for regions in by_record.values():
        for region, rows in regions.items():
            into = merged.setdefault(region, {})
            for row in rows:
                have = into.setdefault(row["name"], {"name": row["name"], "count": 0, "self_cpu_us": 0.0,
                                                     "device_us": 0.0})
                for k in ("count", "self_cpu_us", "device_us"):
                    have[k] += row[k]
    return {r: _costliest_first(rows.values()) for r, rows in merged.items()}


def profile_record(record: CompileRecord, *, wait_s: float = 300.0) -> dict[str, list[dict]]:
    """Profile one call of ``record``'s compiled program on the inputs it was compiled for; kept as ``record.kernels``.

    The call is a real one, as a call from the notebook would be (a program that updates buffers
    updates them once more). Regions whose fused kernel is not built yet are built first (one
    call starts them, then this waits up to ``wait_s``), so the profile shows the fused kernels.
    """
    session = live(record, "profile", "the inputs it was compiled for and its compiled program")
    inputs = session.example_inputs
    if inputs is None:
        raise ValueError(GONE)
    program = program_runner(record)
    # in the grad mode it was compiled for: a program compiled under no_grad has no backward, and its kernels
    # (Inductor's write into out= buffers) refuse inputs that require grad while grad mode is on
    training = "backward" in record.program.traces

    def run(*args):
        with torch.set_grad_enabled(training):
            return program(*args)

    if not all(r.ready.is_set() for r in session.regions.values()):
        run(*inputs)
        session.wait(wait_s)
    _, by_record = profile_records(run, *inputs)
    record.kernels = by_record.get(record.uid, {})
    return record.kernels


def _costliest_first(rows) -> list[dict]:
    return sorted(rows, key=lambda x: -(x["device_us"] or x["self_cpu_us"]))


def _place_of(ev) -> tuple[int | None, str]:
    region, p = None, ev.cpu_parent
    while p is not None:
        if region is None and p.name.startswith(REGION_MARK):
            region = p.name[len(REGION_MARK):]
        elif p.name.startswith(RECORD_MARK):
            return int(p.name[len(RECORD_MARK):]), region or OUTSIDE
        p = p.cpu_parent
    return None, region or OUTSIDE
