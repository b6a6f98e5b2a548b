"""First calls in a fresh process with warm caches: what a user waits for when a script starts again.

``benchmarks/zoo.py`` times first calls inside one long process, after TorchDynamo has been primed and with whatever
either compiler already imported there; an empty Inductor cache is its other case (``--out`` with a fresh
``TORCHINDUCTOR_CACHE_DIR``). The common case between the two is a second run of the same script: a new process,
Inductor's cache (and thunderlab's worker answers beside it) filled by the run before. Here each first call runs
in a process of its own, for thunderlab's default (``thunderlab.jit``, tiered) and ``torch.compile`` (Inductor's
defaults), on zoo models, inference (eval, no_grad) and a training step (forward, loss.backward()).

Per model and mode: one unrecorded run of each variant fills the caches (thunderlab's waits for its regions'
kernels, so that the worker's answers are kept), then ``--repeats`` rounds run both variants in turn (in a new order
each round). The first call is timed by wall clock from the call to its return (a training step: the backward
too); imports (thunderlab's in both variants' processes), building the model and its inputs come before and are
not counted. thunderlab's rows also say when
every region had switched to its kernel (``ready_s``, from the first call's start). Ratios are paired per round
(``benchmarks/paired.py``).

``nanogpt`` among the models is the training loop's model (``benchmarks/training_loop.py``: TinyGPT, dropout on,
a batch of 8 sequences of 64 tokens; its step returns the loss, whose backward runs: training mode only).

``--against DIR`` adds thunderlab from another source tree (a ``git worktree`` of an earlier commit, say) as a third
variant, ``thunderlab@DIR``, run in the same rounds: each row then also gives thunderlab / thunderlab@DIR, paired,
what a change did to first calls.

Run:  .venv/bin/python benchmarks/first_call_fresh.py [--models bert,llama,nanogpt,...] [--modes inference,train]
      [--repeats 5] [--against DIR] [--cache-dir DIR] [--out benchmarks/results/first_call_fresh.json]
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
VARIANTS = ("thunderlab", "torch.compile")
MODELS = "bert,llama,t5,whisper,vit,resnet"

CHILD = r"""
import json, sys, time
import torch
torch.set_num_threads(1)
sys.path.insert(0, ROOT)
from benchmarks.zoo import _step  # imports thunderlab in either variant's process (before the clock starts)
from tests.zoo.models import BY_NAME, attn_implementations, inputs, pair

variant, name, mode = sys.argv[1:4]
train = mode == "train"
if name == "nanogpt":
    from benchmarks.training_loop import BATCH, MODEL
    from tests.training.test_loops import TinyGPT

    torch.manual_seed(0)
    model = TinyGPT(**MODEL).train(train)
    g = torch.Generator().manual_seed(1)
    shape = (BATCH, MODEL["block"])
    x = {"idx": torch.randint(0, MODEL["vocab"], shape, generator=g),
         "targets": torch.randint(0, MODEL["vocab"], shape, generator=g)}

    def _step(fn, model, x, train):
        fn(**x).backward()
        model.zero_grad(set_to_none=True)
else:
    entry = BY_NAME[name]
    model, _ = pair(entry, attn_implementations(entry)[-1])
    model.train(train)
    x = inputs(entry, model, batch=4, length=16)
if variant.startswith("thunderlab"):
    import thunderlab
    fn = thunderlab.jit(model)
else:
    fn = torch.compile(model)
t0 = time.perf_counter()
_step(fn, model, x, train)
out = {"first_call_s": time.perf_counter() - t0}
if variant.startswith("thunderlab"):
    for rec in thunderlab.records():
        thunderlab.session(rec).wait(600)
    out["ready_s"] = time.perf_counter() - t0
print(json.dumps(out))
"""


def run_one(variant: str, model: str, mode: str, env: dict, root: str = ROOT) -> dict:
    """One first call in a new process, with thunderlab (and the zoo) imported from the source tree ``root``."""
    child = CHILD.replace("ROOT", repr(root))
    proc = subprocess.run([sys.executable, "-c", child, variant, model, mode], env=env, capture_output=True,
                          text=True, timeout=1200, cwd=root)
    if proc.returncode != 0:
        raise RuntimeError(f"{variant} on {model} ({mode}) failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    sys.path.insert(0, ROOT)
    from benchmarks.paired import describe, paired_ratio, write_report

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=MODELS, help=f"zoo models, comma-separated (default {MODELS})")
    ap.add_argument("--modes", default="inference,train")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--against", help="another source tree: its thunderlab runs as a third variant, thunderlab@DIR")
    ap.add_argument("--cache-dir", default=os.path.join(tempfile.gettempdir(), "thunderlab_bench_inductor_cache"))
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "first_call_fresh.json"))
    a = ap.parse_args()
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=a.cache_dir)
    variants = VARIANTS
    roots = dict.fromkeys(VARIANTS, ROOT)
    if a.against:
        other = f"thunderlab@{os.path.abspath(a.against)}"
        variants, roots[other] = (*VARIANTS, other), os.path.abspath(a.against)
    rows = []
    for model in a.models.split(","):
        for mode in a.modes.split(","):
            for variant in variants:  # fills the caches
                run_one(variant, model, mode, env, roots[variant])
            samples = {v: [] for v in variants}
            ready = []
            load = [os.getloadavg()]
            for _ in range(a.repeats):
                order = list(variants)
                random.shuffle(order)
                for variant in order:
                    r = run_one(variant, model, mode, env, roots[variant])
                    samples[variant].append(r["first_call_s"])
                    if "ready_s" in r and variant == "thunderlab":
                        ready.append(r["ready_s"])
            load.append(os.getloadavg())
            ratio = paired_ratio(samples["thunderlab"], samples["torch.compile"])
            rows.append({"model": model, "mode": mode, "first_call_s": samples, "ready_s": ready,
                         "median_s": {v: statistics.median(s) for v, s in samples.items()},
                         "thunderlab / torch.compile": ratio, "load_average": load})
            against = ""
            if a.against:
                rows[-1]["thunderlab / thunderlab@other"] = change = paired_ratio(samples["thunderlab"], samples[other])
                against = f"  against {a.against} {describe(change)}"
            print(f"{model:10s} {mode:9s} thunderlab {statistics.median(samples['thunderlab']):.2f}s "
                  f"torch.compile {statistics.median(samples['torch.compile']):.2f}s  ratio {describe(ratio)}  "
                  f"ready {statistics.median(ready):.2f}s{against}", flush=True)
    summary = {}
    for mode in a.modes.split(","):
        rs = [r["thunderlab / torch.compile"]["median"] for r in rows if r["mode"] == mode]
        summary[mode] = {"models": len(rs), "geomean thunderlab / torch.compile":
                         statistics.geometric_mean(rs) if rs else None}
        if a.against:
            cs = [r["thunderlab / thunderlab@other"]["median"] for r in rows if r["mode"] == mode]
            summary[mode]["geomean thunderlab / thunderlab@other"] = statistics.geometric_mean(cs) if cs else None
    write_report(a.out, "benchmarks/first_call_fresh.py",
                 {"threads": 1, "repeats": a.repeats, "inductor_cache": a.cache_dir, "against": a.against},
                 summary, rows=rows)

if __name__ == "__main__":
    main()
