"""Compile time and per-call overhead of thunderlab against eager and a pass-through torch.compile.

Two cases, measured in one process:
  * nanogpt: thunderlab.examples.NanoGPTBlock on a (4, 64, 256) float32 input, under torch.no_grad();
  * tiny:    `lambda x: x + 1` on a (4,) tensor, where per-call overhead dominates.

For each case:
  * eager       per-call time (median of --repeat samples; a sample is the mean over a loop of calls);
  * passthrough torch.compile with a backend that returns gm.forward: first call (after
                torch._dynamo.reset() and gc.collect(), median of --cold samples after one discarded) and steady-state per call;
  * thunderlab  thunderlab.jit: first call (after torch._dynamo.reset()), steady state per call,
                its own share of the first call (first call minus pass-through first call, and the
                sum of per-pass seconds in thunderlab.last_record(jfn).steps), and the time to re-run
                the pass pipeline on the captured trace with thunderlab.rerun(rec), if available.
Ratios: thunderlab steady / eager and / passthrough; (thunderlab - passthrough) and
(passthrough - eager) per call in microseconds.

One throw-away compile runs before any measurement so that first-call numbers exclude the one-time
import cost of torch._dynamo. The thread count is left at torch's default.

Run:  .venv/bin/python benchmarks/compile_and_overhead.py [--repeat 30] [--cold 5] [--out PATH]
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

try:
    import thunderlab
    from thunderlab.examples import NanoGPTBlock

    if not hasattr(thunderlab, "jit"):
        raise ImportError("thunderlab has no attribute 'jit' yet")
    THUNDERLAB_ERROR = None
except Exception as e:  # ImportError etc.: the compiler is written in parallel; still measure eager and passthrough
    thunderlab = None
    THUNDERLAB_ERROR = f"thunderlab is not importable: {e}"
    if "NanoGPTBlock" not in globals():
        import importlib.util

        spec = importlib.util.spec_from_file_location("_examples", ROOT / "thunderlab" / "examples.py")
        _ex = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_ex)
        NanoGPTBlock = _ex.NanoGPTBlock


def passthrough(gm, example_inputs):
    return gm.forward


def per_call(fn, args, repeat, inner, warmup=5):
    """Median over `repeat` samples of the mean time of `inner` back-to-back calls (seconds)."""
    for _ in range(warmup):
        fn(*args)
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn(*args)
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def first_call(make, args, cold):
    """Median over `cold` samples of: reset dynamo, build the compiled callable, call it once.
    One extra leading sample is discarded: it pays one-time code-path warm-up, not compile work."""
    samples, fn = [], None
    for _ in range(cold + 1):
        torch._dynamo.reset()
        gc.collect()
        t0 = time.perf_counter()
        fn = make()
        fn(*args)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples[1:]), fn


# the compiler's own cost, on the torch executor (benchmarks/fusion.py measures the fusion executors)
PIPELINE = "dce,cse,autodiff,remat,claim{executors=torch},del"


def measure(name, fn, args, repeat, inner, cold):
    r = {"case": name}
    r["eager_s"] = per_call(fn, args, repeat, inner)
    r["passthrough_first_s"], pfn = first_call(lambda: torch.compile(fn, backend=passthrough), args, cold)
    r["passthrough_steady_s"] = per_call(pfn, args, repeat, inner)
    if thunderlab is not None:
        try:
            r["thunderlab_first_s"], jfn = first_call(lambda: thunderlab.jit(fn, pipeline=PIPELINE), args, cold)
            r["thunderlab_steady_s"] = per_call(jfn, args, repeat, inner)
            r["thunderlab_own_first_s"] = r["thunderlab_first_s"] - r["passthrough_first_s"]
            rec = thunderlab.last_record(jfn) if hasattr(thunderlab, "last_record") else None
            if rec is not None:
                r["thunderlab_pass_sum_s"] = sum(s.seconds for s in rec.steps)
                if hasattr(thunderlab, "rerun"):
                    times = []
                    for _ in range(5):
                        t0 = time.perf_counter()
                        thunderlab.rerun(rec)
                        times.append(time.perf_counter() - t0)
                    r["thunderlab_rerun_s"] = statistics.median(times)
                else:
                    r["note"] = "thunderlab.rerun does not exist yet; rerun column skipped"
            else:
                r["note"] = "thunderlab.last_record unavailable or returned None"
        except Exception as e:  # report, keep the other numbers
            r["thunderlab_error"] = f"{type(e).__name__}: {e}"
    us = 1e6
    ratios = {"passthrough_minus_eager_us": (r["passthrough_steady_s"] - r["eager_s"]) * us}
    if "thunderlab_steady_s" in r:
        ratios["thunderlab_over_eager"] = r["thunderlab_steady_s"] / r["eager_s"]
        ratios["thunderlab_over_passthrough"] = r["thunderlab_steady_s"] / r["passthrough_steady_s"]
        ratios["thunderlab_minus_passthrough_us"] = (r["thunderlab_steady_s"] - r["passthrough_steady_s"]) * us
    r["ratios"] = ratios
    return r


def fmt(v, unit):
    if v is None:
        return "-"
    return {"ms": f"{v * 1e3:10.3f} ms", "us": f"{v * 1e6:10.2f} us"}[unit]


def print_table(results):
    rows = [
        ("eager per call", "eager_s"), ("passthrough first call", "passthrough_first_s"),
        ("passthrough per call", "passthrough_steady_s"), ("thunderlab first call", "thunderlab_first_s"),
        ("thunderlab per call", "thunderlab_steady_s"), ("thunderlab own first-call share", "thunderlab_own_first_s"),
        ("thunderlab sum of pass seconds", "thunderlab_pass_sum_s"), ("thunderlab pipeline rerun", "thunderlab_rerun_s"),
    ]
    names = [r["case"] for r in results]
    print(f"{'':34s}" + "".join(f"{n:>16s}" for n in names))
    for label, key in rows:
        cells = []
        for r in results:
            v = r.get(key)
            unit = "us" if key.endswith("steady_s") or key == "eager_s" else "ms"
            cells.append(f"{fmt(v, unit):>16s}")
        print(f"{label:34s}" + "".join(cells))
    for r in results:
        print(f"{r['case']}: " + ", ".join(f"{k}={v:.3f}" for k, v in r["ratios"].items()))
        for k in ("note", "thunderlab_error"):
            if k in r:
                print(f"  {k}: {r[k]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30, help="samples per steady-state median")
    ap.add_argument("--cold", type=int, default=5, help="samples per first-call median")
    ap.add_argument("--tiny-inner", type=int, default=2000, help="calls per sample for the tiny op")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "compile_and_overhead.json"))
    a = ap.parse_args()
    if THUNDERLAB_ERROR:
        print(THUNDERLAB_ERROR + " -- measuring eager and passthrough only")

    # One-time dynamo import/initialisation, kept out of the first-call numbers.
    torch.compile(lambda t: t * 2, backend=passthrough)(torch.ones(2))
    torch._dynamo.reset()

    torch.manual_seed(0)
    block = NanoGPTBlock().eval()
    x = torch.randn(4, 64, 256, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        nano = measure("nanogpt", block, (x,), a.repeat, 1, a.cold)
    tiny = measure("tiny", lambda t: t + 1, (torch.randn(4),), a.repeat, a.tiny_inner, a.cold)
    results = [nano, tiny]
    print_table(results)

    report = {
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "machine": {
            "torch": torch.__version__, "python": platform.python_version(), "platform": platform.platform(),
            "processor": platform.processor(), "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
        },
        "settings": {"repeat": a.repeat, "cold": a.cold, "tiny_inner": a.tiny_inner},
        "thunderlab_error": THUNDERLAB_ERROR,
        "cases": {r["case"]: r for r in results},
    }
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
