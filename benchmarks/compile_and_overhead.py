"""Compile time and per-call overhead of thunderlab against eager and a pass-through torch.compile.

Cases, measured in one process (--cases picks some):
  * nanogpt: thunderlab.examples.NanoGPTBlock on a (4, 64, 256) float32 input, under torch.no_grad();
  * tiny:    `lambda x: x + 1` on a (4,) tensor, where per-call overhead dominates;
  * tiny_module: torch.nn.Linear(8, 8) on a (2, 8) tensor under torch.no_grad();
  * tiny_module_grad: the same with grad on (a training program, run under autograd).

Variants: eager; passthrough (torch.compile with a backend that returns gm.forward: what TorchDynamo's
capture and frame machinery cost alone); thunderlab (thunderlab.jit on the torch executor, direct calls on);
thunderlab_unprinted (the same with no printed direct-call function: every direct call checks Dynamo's guard
tree and runs Dynamo's bytecode, as before the printed function existed; steady state only).
For each case:
  * first call of passthrough and thunderlab: torch._dynamo.reset(), gc.collect(), build, call once;
    --cold rounds after one discarded, the two variants in a new order each round. thunderlab's own share
    is the median over rounds of (thunderlab - passthrough) in the same round, beside the sum of the
    record's per-pass seconds and the time to re-run the pass pipeline on the captured trace
    (thunderlab.rerun, median of 5);
  * per call, steady state: --repeat rounds, each taking one sample of every variant in a new order (a
    sample is the mean over a loop of calls, in CPU seconds of the process: time.process_time, which the
    other processes on a shared machine move less than the wall clock); medians, and paired ratios (median
    over rounds of each round's ratio, with a 95% bootstrap interval: see paired.py), which cancel the
    machine's drift. The load average is recorded before and after.

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
import random
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from paired import describe, paired_ratio  # noqa: E402

import thunderlab  # noqa: E402
from thunderlab.examples import NanoGPTBlock  # noqa: E402

# the compiler's own cost, on the torch executor (benchmarks/fusion.py measures the fusion executors)
PIPELINE = "dce,cse,autodiff,remat,claim{executors=torch},del"


def passthrough(gm, example_inputs):
    return gm.forward


def sample(fn, args, inner):
    """Mean CPU seconds of `inner` back-to-back calls."""
    t0 = time.process_time()
    for _ in range(inner):
        fn(*args)
    return (time.process_time() - t0) / inner


def unprinted(fn):
    """thunderlab.jit with direct calls on but no printed direct-call function (see frontend/dispatch.py)."""
    j = thunderlab.jit(fn, pipeline=PIPELINE)
    j.direct.printing = False
    return j


def first_call(make, args):
    """Seconds to reset Dynamo, build the compiled callable and call it once."""
    torch._dynamo.reset()
    gc.collect()
    t0 = time.perf_counter()
    fn = make()
    fn(*args)
    return time.perf_counter() - t0, fn


def measure(name, fn, args, repeat, inner, cold):
    rng = random.Random(0)
    makers = {"passthrough": lambda: torch.compile(fn, backend=passthrough),
              "thunderlab": lambda: thunderlab.jit(fn, pipeline=PIPELINE)}
    firsts = {v: [] for v in makers}
    for i in range(cold + 1):  # the first round pays one-time code-path warm-up, not compile work: discarded
        for v in rng.sample(list(makers), len(makers)):
            t, _ = first_call(makers[v], args)
            if i:
                firsts[v].append(t)
    torch._dynamo.reset()  # both compiled anew for the steady state, side by side
    live = {"eager": fn, "passthrough": makers["passthrough"](), "thunderlab": makers["thunderlab"](),
            "thunderlab_unprinted": unprinted(fn)}
    for f in live.values():  # compile and warm up
        for _ in range(5):
            f(*args)
    jfn = live["thunderlab"]
    times = {v: [] for v in live}
    for _ in range(repeat):
        for v in rng.sample(list(live), len(live)):
            times[v].append(sample(live[v], args, inner))
    own = [t - p for t, p in zip(firsts["thunderlab"], firsts["passthrough"])]
    r = {"case": name, "eager_s": statistics.median(times["eager"]),
         "passthrough_first_s": statistics.median(firsts["passthrough"]),
         "passthrough_steady_s": statistics.median(times["passthrough"]),
         "thunderlab_first_s": statistics.median(firsts["thunderlab"]),
         "thunderlab_steady_s": statistics.median(times["thunderlab"]),
         "thunderlab_unprinted_steady_s": statistics.median(times["thunderlab_unprinted"]),
         "thunderlab_own_first_s": statistics.median(own),
         "thunderlab_direct_calls": jfn.cache_info["direct_calls"]}
    rec = thunderlab.last_record(jfn)
    r["thunderlab_pass_sum_s"] = sum(s.seconds for s in rec.steps)
    reruns = []
    for _ in range(5):
        t0 = time.perf_counter()
        thunderlab.rerun(rec)
        reruns.append(time.perf_counter() - t0)
    r["thunderlab_rerun_s"] = statistics.median(reruns)
    us = 1e6
    r["ratios"] = {
        "passthrough_minus_eager_us": (r["passthrough_steady_s"] - r["eager_s"]) * us,
        "thunderlab_minus_passthrough_us": (r["thunderlab_steady_s"] - r["passthrough_steady_s"]) * us,
        "thunderlab_over_eager": r["thunderlab_steady_s"] / r["eager_s"],
        "thunderlab_over_passthrough": r["thunderlab_steady_s"] / r["passthrough_steady_s"],
    }
    r["paired_ratios"] = {"thunderlab/eager": paired_ratio(times["thunderlab"], times["eager"]),
                          "thunderlab/passthrough": paired_ratio(times["thunderlab"], times["passthrough"]),
                          "passthrough/eager": paired_ratio(times["passthrough"], times["eager"]),
                          "thunderlab_unprinted/eager": paired_ratio(times["thunderlab_unprinted"], times["eager"]),
                          "thunderlab/thunderlab_unprinted": paired_ratio(times["thunderlab"],
                                                                          times["thunderlab_unprinted"])}
    return r


def fmt(v, unit):
    if v is None:
        return "-"
    return {"ms": f"{v * 1e3:10.3f} ms", "us": f"{v * 1e6:10.2f} us"}[unit]


def print_table(results):
    rows = [
        ("eager per call", "eager_s"), ("passthrough first call", "passthrough_first_s"),
        ("passthrough per call", "passthrough_steady_s"), ("thunderlab first call", "thunderlab_first_s"),
        ("thunderlab per call", "thunderlab_steady_s"),
        ("thunderlab per call, unprinted", "thunderlab_unprinted_steady_s"),
        ("thunderlab own first-call share", "thunderlab_own_first_s"),
        ("thunderlab sum of pass seconds", "thunderlab_pass_sum_s"),
        ("thunderlab pipeline rerun", "thunderlab_rerun_s"),
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
        print("  paired per call (median of per-round ratios [95% interval]): " + ", ".join(
            f"{k} {describe(p)}" for k, p in r["paired_ratios"].items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30, help="samples per steady-state median")
    ap.add_argument("--cold", type=int, default=5, help="samples per first-call median")
    ap.add_argument("--tiny-inner", type=int, default=2000, help="calls per sample for the tiny cases")
    ap.add_argument("--cases", default="nanogpt,tiny,tiny_module,tiny_module_grad", help="which cases to run")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "compile_and_overhead.json"))
    a = ap.parse_args()

    # One-time dynamo import/initialisation, kept out of the first-call numbers.
    torch.compile(lambda t: t * 2, backend=passthrough)(torch.ones(2))
    torch._dynamo.reset()

    cases = a.cases.split(",")
    load_before = os.getloadavg()
    torch.manual_seed(0)
    results = []
    if "nanogpt" in cases:
        block = NanoGPTBlock().eval()
        x = torch.randn(4, 64, 256, generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            results.append(measure("nanogpt", block, (x,), a.repeat, 1, a.cold))
    if "tiny" in cases:
        results.append(measure("tiny", lambda t: t + 1, (torch.randn(4),), a.repeat, a.tiny_inner, a.cold))
    lin, xm = torch.nn.Linear(8, 8), torch.randn(2, 8)
    if "tiny_module" in cases:
        with torch.no_grad():
            results.append(measure("tiny_module", lin, (xm,), a.repeat, a.tiny_inner, a.cold))
    if "tiny_module_grad" in cases:
        results.append(measure("tiny_module_grad", lin, (xm,), a.repeat, a.tiny_inner, a.cold))
    print_table(results)
    load_after = os.getloadavg()
    print(f"load average (1, 5, 15 min) before {load_before}, after {load_after}")

    report = {
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "machine": {
            "torch": torch.__version__, "python": platform.python_version(), "platform": platform.platform(),
            "processor": platform.processor(), "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
        },
        "settings": {"repeat": a.repeat, "cold": a.cold, "tiny_inner": a.tiny_inner, "clock": "process_time"},
        "load_average": {"before": load_before, "after": load_after},
        "cases": {r["case"]: r for r in results},
    }
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
