"""A second function jitted while the first one's C++-wrapper kernels compile: how long until its regions switch.

In a notebook a user runs one jitted model, then another. With tiered CPU regions, each region's first kernel is
compiled by the worker process, then its second kernel, Inductor's module with its C++ wrapper (``inductor-cpp``,
seconds to a minute cold), which joins the region's race. Here, in a fresh process on an empty Inductor cache:
the nanoGPT training model (``training_loop.py``'s TinyGPT) takes training steps (forward and backward, one after
another) until its regions have their first kernels (their C++ wrappers then compile); then a second model, an MLP
with layer norm and GELU, takes training steps until every one of its regions has its first kernel: the time from
its first step's start is its switch time (``switch_s``; the race may then keep torch),
with the first model's C++-wrapper compiles still under way or not (``first_cpp_done``: whether they were all in
when the second model's regions switched).

``--against DIR`` runs thunderlab from another source tree (a ``git worktree`` of an earlier commit) in the same
rounds, in a new order each round; ratios are paired per round (``benchmarks/paired.py``).

Run:  .venv/bin/python benchmarks/second_function.py [--rounds 3] [--against DIR]
      [--out benchmarks/results/second_function.json]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, sys, time
import torch
torch.set_num_threads(1)
sys.path.insert(0, ROOT)
import thunderlab
from benchmarks.training_loop import BATCH, MODEL
from tests.training.test_loops import TinyGPT


def switched(fn):  # every region has its first kernel (the race may then keep torch), or failed to compile one
    regions = [r for rec in fn.records for r in thunderlab.session(rec).regions.values()]
    return bool(regions) and all(r.executor in r.versions or r.error is not None for r in regions)


def races_ready(fn):
    return all(r.ready.is_set() for rec in fn.records for r in thunderlab.session(rec).regions.values())


def train_until_switched(jfn, step):
    t0 = time.perf_counter()
    steps = 0
    while not switched(jfn):
        step()
        steps += 1
    return time.perf_counter() - t0, steps


torch.manual_seed(0)
first = TinyGPT(**MODEL).train()
g = torch.Generator().manual_seed(1)
idx = torch.randint(0, MODEL["vocab"], (BATCH, MODEL["block"]), generator=g)
jfirst = thunderlab.jit(first)
first_switch_s, first_steps = train_until_switched(jfirst, lambda: jfirst(idx, idx).backward())

second = torch.nn.Sequential(torch.nn.Linear(96, 384), torch.nn.LayerNorm(384), torch.nn.GELU(),
                             torch.nn.Linear(384, 96), torch.nn.Tanh()).train()
jsecond = thunderlab.jit(second)
x = torch.randn(32, 96)
switch_s, steps = train_until_switched(jsecond, lambda: jsecond(x).sum().backward())
first_cpp_done = races_ready(jfirst)
from thunderlab.executors import compile_process
tl = compile_process.timeline()
print(json.dumps({"first_switch_s": first_switch_s, "switch_s": switch_s, "first_cpp_done": first_cpp_done,
                  "first_steps": first_steps, "steps": steps,
                  "requests": [{k: q.get(k) for k in ("region", "cpp_wrapper", "asked_at", "sent_at", "answered_at",
                                                     "compile_s")} for q in tl["requests"]]}))
"""


def run_one(root: str) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, THUNDERLAB_CPP_WRAPPER="1")
        proc = subprocess.run([sys.executable, "-c", CHILD.replace("ROOT", repr(root))], env=env, cwd=root,
                              capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        raise RuntimeError(f"the run with {root} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    sys.path.insert(0, ROOT)
    from benchmarks.paired import describe, paired_ratio, write_report

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--against", help="another source tree, run in the same rounds")
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "second_function.json"))
    a = ap.parse_args()
    roots = {"thunderlab": ROOT}
    if a.against:
        roots["against"] = os.path.abspath(a.against)
    runs: dict[str, list] = {v: [] for v in roots}
    load = [os.getloadavg()]
    for i in range(a.rounds):
        order = list(roots)
        random.shuffle(order)
        for variant in order:
            r = run_one(roots[variant])
            runs[variant].append(r)
            print(f"round {i}: {variant:10s} first model switched {r['first_switch_s']:.1f}s, second model "
                  f"{r['switch_s']:.1f}s (first model's C++ wrappers done then: {r['first_cpp_done']})", flush=True)
    load.append(os.getloadavg())
    summary = {v: {"switch_s_median": statistics.median(r["switch_s"] for r in rs),
                   "first_switch_s_median": statistics.median(r["first_switch_s"] for r in rs)}
               for v, rs in runs.items()}
    if a.against:
        ratio = paired_ratio([r["switch_s"] for r in runs["thunderlab"]], [r["switch_s"] for r in runs["against"]])
        summary["switch_s thunderlab / against"] = ratio
        print("second model's switch, thunderlab / against:", describe(ratio))
    write_report(a.out, "benchmarks/second_function.py",
                 {"threads": 1, "rounds": a.rounds, "against": a.against, "load_average": load}, summary, runs=runs)

if __name__ == "__main__":
    main()
