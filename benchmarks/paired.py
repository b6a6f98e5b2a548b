"""Paired ratios for interleaved timings: each round's two samples were taken back to back.

On a shared machine the speed drifts by more than the differences worth measuring. A ratio of
two variants' medians mixes that drift in; the median of per-round ratios cancels it, and a
bootstrap interval over the rounds says how sure the figure is.
"""
from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable


def paired_ratio(a: list[float], b: list[float], *, resamples: int = 2000, seed: int = 0) -> dict:
    """Median of a[i] / b[i] over the rounds, with a 95% bootstrap interval of that median."""
    ratios = [x / y for x, y in zip(a, b) if y > 0]
    if not ratios:
        return {"median": None, "lo95": None, "hi95": None, "rounds": 0}
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(resamples))
    return {"median": statistics.median(ratios), "lo95": meds[int(0.025 * resamples)],
            "hi95": meds[int(0.975 * resamples) - 1], "rounds": len(ratios)}


def describe(p: dict) -> str:
    """'0.985 [0.970, 1.001]': the paired median and its 95% interval."""
    if p["median"] is None:
        return "-"
    return f"{p['median']:.3f} [{p['lo95']:.3f}, {p['hi95']:.3f}]"


def interleaved(runs: dict[str, Callable[[], object]], rounds: int, *, calls: int = 1,
                clock: Callable[[], float] = time.thread_time,
                sync: Callable[[], object] | None = None) -> dict[str, list[float]]:
    """Each variant's time per call, one sample per round: in each round, in a new order, ``runs[name]`` is called
    ``calls`` times in a row and timed by ``clock``; ``sync``, where given, is called before the clock is read at
    either end (to wait for a GPU's queued work)."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    order = list(runs)
    for _ in range(rounds):
        random.shuffle(order)
        for name in order:
            run = runs[name]
            if sync is not None:
                sync()
            t0 = clock()
            for _ in range(calls):
                run()
            if sync is not None:
                sync()
            times[name].append((clock() - t0) / calls)
    return times


def write_report(path: str, benchmark: str, meta: dict, summary: dict, **parts) -> None:
    """Write a benchmark's results as JSON: ``meta`` gains the date, torch, Python and the CPU count; the summary is
    printed too."""
    import datetime
    import json
    import os
    import platform

    import torch

    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "torch": torch.__version__, "python": platform.python_version(), "cpus": os.cpu_count(), **meta}
    with open(path, "w") as f:
        json.dump({"benchmark": benchmark, "meta": meta, "summary": summary, **parts}, f, indent=1)
    print(json.dumps(summary, indent=1))
    print("wrote", path)
