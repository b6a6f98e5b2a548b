"""Memory over a long-lived process: many compiled functions dropped again, and many shapes of one function.

Writes benchmarks/results/robustness.json (merging into what other parts of the robustness
run wrote there). Figures are resident set size (RSS) from /proc, after a full collection.

    python benchmarks/robustness.py [--functions 1000] [--shapes 200]
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import time
import weakref
from pathlib import Path

import torch

os.environ.setdefault("THUNDERLAB_EXECUTORS", "torch")  # memory of records, not of Inductor's compile queue
import thunderlab  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "robustness.json"


def rss_mib() -> float:
    """Resident memory after a collection, with freed heap pages handed back (glibc keeps them otherwise)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def make_module(i: int, ns: dict) -> torch.nn.Module:
    """A small model with its own code object (as a new notebook cell makes) and a 1 MiB weight."""
    exec(f"class Cell{i}(torch.nn.Module):\n"
         f"    def __init__(self):\n"
         f"        super().__init__()\n"
         f"        self.w = torch.nn.Parameter(torch.randn(512, 512))\n"
         f"    def forward(self, x):\n"
         f"        return (x @ self.w).relu() + {i}\n", ns)
    return ns[f"Cell{i}"]()


def many_functions(n: int) -> dict:
    ns = {"torch": torch}
    x = torch.randn(8, 512)
    warm = thunderlab.jit(make_module(n, ns))
    warm(x)
    del warm
    thunderlab.clear_records()
    start = rss_mib()
    t0 = time.perf_counter()
    fns, weights = [], []
    for i in range(n):
        m = make_module(i, ns)
        weights.append(weakref.ref(m.w))
        j = thunderlab.jit(m)
        j(x)
        fns.append(j)
    del m
    peak = rss_mib()
    kept = len(thunderlab.records())
    seconds = time.perf_counter() - t0
    del fns, j
    for i in range(n):
        del ns[f"Cell{i}"]
    dropped = rss_mib()
    alive = sum(w() is not None for w in weights)
    thunderlab.clear_records()
    cleared = rss_mib()
    return {"functions": n, "seconds": round(seconds, 1), "records_kept": kept, "weights_alive_after_drop": alive, "rss_start_mib": round(start, 1),
            "rss_all_alive_mib": round(peak, 1), "rss_after_drop_mib": round(dropped, 1),
            "rss_after_clear_records_mib": round(cleared, 1),
            "after_drop_vs_start": round(dropped / start, 3), "after_clear_vs_start": round(cleared / start, 3)}


def many_shapes(n: int) -> dict:
    def f(x):
        return x.sin() * 2 + 1

    j = thunderlab.jit(f)
    start = rss_mib()
    for k in range(n):
        j(torch.randn(16 + k))
    caches = [len(g.cache) for g in j.backend.graphs]
    return {"shapes": n, "graphs": len(caches), "largest_cache": max(caches), "records_of_function": len(j.records),
            "limit": thunderlab.set_limits()["shapes"], "rss_growth_mib": round(rss_mib() - start, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--functions", type=int, default=1000)
    ap.add_argument("--shapes", type=int, default=200)
    args = ap.parse_args()
    out = {"memory": many_functions(args.functions), "shapes": many_shapes(args.shapes)}
    print(json.dumps(out, indent=1))
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    data.update(out)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
