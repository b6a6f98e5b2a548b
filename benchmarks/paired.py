"""Paired ratios for interleaved timings: each round's two samples were taken back to back.

On a shared machine the speed drifts by more than the differences worth measuring. A ratio of
two variants' medians mixes that drift in; the median of per-round ratios cancels it, and a
bootstrap interval over the rounds says how sure the figure is.
"""
from __future__ import annotations

import random
import statistics


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
