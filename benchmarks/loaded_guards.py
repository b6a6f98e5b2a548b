"""What a loaded capture's guards cost on every call, against TorchDynamo's own entry for the same capture.

A script's second run runs the capture its first run kept (``thunderlab/frontend/captures.py``) for as long as it
runs, so the loaded entry's guard check is paid on every call. Per model, each round runs, in new processes and a
new order each round, a jitted model's inference calls (batch 4, sequence 16, one thread, every fusion region's
kernel built first):

* ``loaded``  the capture a run before kept (``THUNDERLAB_CAPTURES=1``);
* ``off``     ``THUNDERLAB_CAPTURES=0``: TorchDynamo's own cache entry;
* ``loaded@DIR`` with ``--against DIR``: another source tree's thunderlab loading its own kept capture.

Reported per variant: the entry's guard check alone (its guard manager's C++ root on the call's frame locals, as
the direct call checks it, plus a kept capture's Python identity check where it has one), the whole call's CPU
time on its thread, and the time loading the capture took in its first call; and paired ratios against ``off``.

Run:  .venv/bin/python benchmarks/loaded_guards.py [--models bert,gpt2,llama] [--rounds 3] [--against DIR]
      [--cache-dir DIR] [--out benchmarks/results/loaded_guards.json]
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
import json, statistics, sys, time
import torch
torch.set_num_threads(1)
sys.path.insert(0, ROOT)
from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list
from tests.zoo.models import BY_NAME, attn_implementations, inputs, pair
import thunderlab

entry = BY_NAME[sys.argv[1]]
model, _ = pair(entry, attn_implementations(entry)[-1])
model.eval()
x = inputs(entry, model, batch=4, length=16)
fn = thunderlab.jit(model)
torch.set_grad_enabled(False)
fn(**x)
for record in fn.records:
    thunderlab.session(record).wait(600)
for _ in range(200):
    fn(**x)
d = fn.direct
[first, *_] = [*d._loaded, *_debug_get_cache_entry_list(d.code)]
# the call's frame locals, as the direct call binds them: seen by its check during one call
seen, known = {}, type(d)._known


def spying(self, e):
    k = known(self, e)
    return (k[0], lambda frame, check=k[1]: seen.setdefault("frame", frame) is not None and check(frame), *k[2:])


type(d)._known = spying
fn(**x)
type(d)._known = known
frame, check = seen["frame"], d._known(first)[1]
assert check(frame)
t0 = time.perf_counter()
for _ in range(5000):
    check(frame)
guard_us = (time.perf_counter() - t0) / 5000 * 1e6
calls = []
for _ in range(15):
    t0 = time.thread_time()
    for _ in range(40):
        fn(**x)
    calls.append((time.thread_time() - t0) / 40 * 1e6)
info = fn.cache_info
print(json.dumps({"guard_us": guard_us, "call_us": statistics.median(calls), "loaded": info["captures_loaded"],
                  "load_s": d.kept.load_s if d.kept is not None else 0.0}))
"""


def run(root: str, model: str, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD.replace("ROOT", repr(root)), model], env=env,
                          capture_output=True, text=True, timeout=1200, cwd=root)
    if proc.returncode != 0:
        raise RuntimeError(f"{model} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    sys.path.insert(0, ROOT)
    from benchmarks.paired import describe, paired_ratio, write_report

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="bert,gpt2,llama")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--against", help="another source tree: its thunderlab loading its own kept capture")
    ap.add_argument("--cache-dir", default=os.path.join(tempfile.gettempdir(), "thunderlab_bench_inductor_cache"))
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "loaded_guards.json"))
    args = ap.parse_args()
    base = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": args.cache_dir}
    variants = {"loaded": (ROOT, "1"), "off": (ROOT, "0")}
    if args.against:
        variants[f"loaded@{os.path.abspath(args.against)}"] = (os.path.abspath(args.against), "1")
    rng = random.Random(0)
    results, summary = {}, {}
    for model in args.models.split(","):
        for root, keep in variants.values():  # each tree keeps its capture (and fills the caches)
            if keep == "1":
                run(root, model, {**base, "THUNDERLAB_CAPTURES": "1"})
        got = {v: [] for v in variants}
        for _ in range(args.rounds):
            order = list(variants)
            rng.shuffle(order)
            for v in order:
                root, keep = variants[v]
                got[v].append(run(root, model, {**base, "THUNDERLAB_CAPTURES": keep}))
        row = {"runs": got, "median": {v: {k: statistics.median(r[k] for r in rs) for k in ("guard_us", "call_us",
                                                                                            "load_s")}
                                       for v, rs in got.items()},
               "loaded_every_run": {v: all(r["loaded"] == 1 for r in rs) for v, rs in got.items() if v != "off"}}
        for v in variants:
            if v != "off":
                for k in ("guard_us", "call_us"):
                    row[f"{v} / off {k}"] = paired_ratio([r[k] for r in got[v]], [r[k] for r in got["off"]])
        results[model] = row
        summary[model] = {v: {k: round(m[k], 4) for k in m} for v, m in row["median"].items()}
        print(model, json.dumps(summary[model]),
              " ".join(f"{k} {describe(p)}" for k, p in row.items() if " / off " in k), flush=True)
    write_report(args.out, "benchmarks/loaded_guards.py", {"settings": vars(args)}, summary, results=results)


if __name__ == "__main__":
    main()
