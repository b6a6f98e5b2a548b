"""A kernel-level profile of one call, with every kernel attributed to the fusion region that ran it."""
from __future__ import annotations

from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity
from torch.profiler import profile as torch_profile

from thunderlab.executors.region import PROFILING

_PREFIX = "thunderlab::"


def profile_call(fn, *args, **kwargs) -> tuple[object, dict[str, list[dict]]]:
    """Run ``fn(*args, **kwargs)`` under the torch profiler; (result, {region: kernels}).

    Kernels outside any region are listed under ``"(outside regions)"``. Each kernel entry
    has its name, call count, self CPU microseconds and device microseconds.
    """
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    PROFILING.set()
    try:
        with torch_profile(activities=activities) as prof:
            result = fn(*args, **kwargs)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
    finally:
        PROFILING.clear()
    table: dict[str, dict[str, dict]] = defaultdict(dict)
    for ev in prof.events():
        if ev.name.startswith(_PREFIX):
            continue  # the region markers themselves
        region = _region_of(ev)
        row = table[region].setdefault(ev.name, {"name": ev.name, "count": 0, "self_cpu_us": 0.0, "device_us": 0.0})
        row["count"] += 1
        row["self_cpu_us"] += ev.self_cpu_time_total
        row["device_us"] += getattr(ev, "self_device_time_total", 0.0) or 0.0
    return result, {
        r: sorted(rows.values(), key=lambda x: -(x["device_us"] or x["self_cpu_us"])) for r, rows in table.items()
    }


def _region_of(ev) -> str:
    p = ev.cpu_parent
    while p is not None:
        if p.name.startswith(_PREFIX):
            return p.name[len(_PREFIX):]
        p = p.cpu_parent
    return "(outside regions)"
