"""What keeping a capture on disk costs the process that keeps it, and what loading it saves the next one.

A script's second run loads the captures its first run kept (``thunderlab/frontend/captures.py``), and that run's
first call is ``benchmarks/first_call_fresh.py``'s subject. Here, per model and mode, with Inductor's cache and the
compile worker's answers warm (one unrecorded run fills them), each round runs three first calls in new processes,
in a new order each round:

* ``keeping``  no capture kept yet (the folder emptied before the run): TorchDynamo captures, and the capture is
               kept (its guards serialized, the file written): what a script's first run pays;
* ``off``      ``THUNDERLAB_CAPTURES=0``: TorchDynamo captures, nothing is kept (the code before, in effect);
* ``loading``  the capture the round's ``keeping`` run kept is loaded: a script's second run.

Reported: each first call's wall time (the call to its return; a training step's backward included) and the paired
ratios keeping / off (the cost of keeping) and loading / off (what a second run gains), over rounds
(``benchmarks/paired.py``).

Run:  .venv/bin/python benchmarks/captures.py [--models nanogpt,bert] [--modes inference,train] [--rounds 3]
      [--cache-dir DIR] [--out benchmarks/results/captures.json]
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = ("keeping", "off", "loading")


def main():
    sys.path.insert(0, ROOT)
    from benchmarks.first_call_fresh import run_one
    from benchmarks.paired import describe, paired_ratio, write_report

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="nanogpt,bert")
    ap.add_argument("--modes", default="inference,train")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cache-dir", default=os.path.join(tempfile.gettempdir(), "thunderlab_bench_captures_cache"))
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "captures.json"))
    args = ap.parse_args()
    base = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": args.cache_dir, "THUNDERLAB_EXECUTORS": "inductor+torch"}
    kept = os.path.join(args.cache_dir, "thunderlab_captures")
    rng = random.Random(0)
    results = {}
    for model in args.models.split(","):
        for mode in args.modes.split(","):
            run_one("thunderlab", model, mode, base)  # fills Inductor's cache and the worker's answers
            times = {v: [] for v in VARIANTS}
            for _ in range(args.rounds):
                order = ["off", "keeping"]
                rng.shuffle(order)
                for variant in order:
                    if variant == "keeping":
                        shutil.rmtree(kept, ignore_errors=True)
                    env = {**base, "THUNDERLAB_CAPTURES": "0" if variant == "off" else "1"}
                    times[variant].append(run_one("thunderlab", model, mode, env)["first_call_s"])
                times["loading"].append(run_one("thunderlab", model, mode, {**base, "THUNDERLAB_CAPTURES": "1"})
                                        ["first_call_s"])
            row = {"first_call_s": times, "median_s": {v: statistics.median(t) for v, t in times.items()},
                   "keeping / off": paired_ratio(times["keeping"], times["off"]),
                   "loading / off": paired_ratio(times["loading"], times["off"])}
            results[f"{model} {mode}"] = row
            med = row["median_s"]
            print(f"{model:10s} {mode:9s} off {med['off']:.2f}s keeping {med['keeping']:.2f}s "
                  f"loading {med['loading']:.2f}s  keeping/off {describe(row['keeping / off'])} "
                  f"loading/off {describe(row['loading / off'])}", flush=True)
    summary = {key: {"keeping / off": describe(r["keeping / off"]), "loading / off": describe(r["loading / off"])}
               for key, r in results.items()}
    write_report(args.out, "benchmarks/captures.py", {"settings": vars(args)}, summary, results=results)


if __name__ == "__main__":
    main()
