"""The executor race per region: what it kept on the example models, and what that is worth per call.

For each model in thunderlab.examples (inference, no_grad): eager, ``thunderlab.jit`` with the race (the
default) and with ``race=False`` (the kernel kept once compiled), all with Inductor fusion. Each jitted
function is called until its kernels are compiled and its races are over; then rounds of back-to-back
calls of the three, interleaved, give paired ratios (benchmarks/paired.py) of wall time (perf_counter)
and of process CPU time (process_time, which counts Inductor's OpenMP threads too). Writes
benchmarks/results/race.json with each region's verdict in words and the load average.
  .venv/bin/python benchmarks/race.py [--models mlp,nanogpt_block] [--rounds 15]
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from paired import describe, paired_ratio  # noqa: E402

import thunderlab  # noqa: E402
from thunderlab.examples import EXAMPLES  # noqa: E402
from thunderlab.executors.region import RACE_CALLS_MOST  # noqa: E402

PIPELINE = "dce,cse,claim{executors=inductor+torch},fuse,del"


def _sample(fn, args, inner: int) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    for _ in range(inner):
        fn(*args)
    return (time.perf_counter() - w) / inner, (time.process_time() - c) / inner


def run(name: str, rounds: int, inner: int) -> dict:
    model, args = EXAMPLES[name]()
    fns = {"eager": model}
    with torch.no_grad():
        for variant, race in (("race", True), ("no_race", False)):
            j = thunderlab.jit(model, pipeline=PIPELINE, race=race)
            j(*args)
            assert thunderlab.session(thunderlab.last_record(j)).wait(900)
            for _ in range(3 * RACE_CALLS_MOST):  # the race's calls: warm-up and timed, per version
                j(*args)
            fns[variant] = j
        regions = thunderlab.last_record(fns["race"]).regions
        samples = {v: ([], []) for v in fns}
        for _ in range(rounds):
            for v, fn in fns.items():
                w, c = _sample(fn, args, inner)
                samples[v][0].append(w)
                samples[v][1].append(c)
    out = {"regions": len(regions), "kept": {n: r["race"]["winner"] for n, r in regions.items()},
           "why": {n: r["race"]["why"] for n, r in regions.items()}}
    for clock, i in (("wall", 0), ("cpu", 1)):
        out[clock] = {
            "race/no_race": paired_ratio(samples["race"][i], samples["no_race"][i]),
            "race/eager": paired_ratio(samples["race"][i], samples["eager"][i]),
            "no_race/eager": paired_ratio(samples["no_race"][i], samples["eager"][i]),
            "eager_ms": 1e3 * sorted(samples["eager"][i])[len(samples["eager"][i]) // 2],
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="mlp,nanogpt_block,llama_block,cnn,gpt2")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--inner", type=int, default=10, help="calls per sample")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "race.json"))
    a = ap.parse_args()
    results = {"torch": torch.__version__, "threads": torch.get_num_threads(), "cpus": os.cpu_count(),
               "rounds": a.rounds, "inner": a.inner, "load_before": os.getloadavg(), "models": {}}
    for name in a.models.split(","):
        r = results["models"][name] = run(name, a.rounds, a.inner)
        print(f"{name:14s} kept {r['kept']}  wall race/no_race {describe(r['wall']['race/no_race'])}  "
              f"race/eager {describe(r['wall']['race/eager'])}  cpu race/no_race {describe(r['cpu']['race/no_race'])}"
              f"  load {os.getloadavg()[0]:.1f}", flush=True)
        for why in r["why"].values():
            print(f"    {why}")
    results["load_after"] = os.getloadavg()
    Path(a.out).write_text(json.dumps(results, indent=1) + "\n")
    print("wrote", a.out)


if __name__ == "__main__":
    main()
