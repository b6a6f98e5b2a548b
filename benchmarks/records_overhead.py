"""What THUNDERLAB_RECORDS costs a training job: a 20-step job with and without it, in fresh processes.

Each job is its own process (the variable is read when thunderlab is imported): it builds a model from
thunderlab.examples, compiles it with thunderlab.jit, and runs --steps training steps (forward, loss,
backward, SGD step), timing each. With --shapes N the batch size cycles over N sizes, so the job compiles N
times and leaves N records (a job whose batches vary); with 1 it compiles once. The two variants run in turn,
--rounds times, their order alternating, so drift on a shared machine hits both alike.

Reported per variant: the first step (it compiles, and with records on hands the record to the writer), the
median of the other steps, and their sum (the writer serialises and writes while these run); paired ratios
(records / plain: the median over rounds of each round's ratio, with a 95% bootstrap interval; see paired.py);
and for the records variant the files and bytes each job left.

Run:  .venv/bin/python benchmarks/records_overhead.py [--model nanogpt_block] [--steps 20] [--rounds 5]
      [--shapes 1,4] [--out benchmarks/results/records_overhead.json]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from paired import describe, paired_ratio  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def job(model_name: str, steps: int, shapes: int) -> dict:
    """One training job in this process; per-step seconds and, when records are written, what was written."""
    import torch

    import thunderlab
    from thunderlab.examples import EXAMPLES
    from thunderlab.runtime import recorder

    model, (x,) = EXAMPLES[model_name]()
    model.train()
    step_fn = thunderlab.jit(model)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    batches = [x[: max(1, x.shape[0] - k)] for k in range(shapes)]
    times = []
    for i in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        step_fn(batches[i % shapes]).pow(2).mean().backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    out = {"step_s": times}
    if recorder._ACTIVE:
        w = recorder._ACTIVE[0]
        t0 = time.perf_counter()
        w.flush(300)
        out.update(flush_after_job_s=time.perf_counter() - t0, files=len(w.written), bytes=w.bytes,
                   dropped=w.dropped, errors=w.errors)
    return out


def run_job(args, records: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("THUNDERLAB_RECORDS", None)
    with tempfile.TemporaryDirectory() as d:
        if records:
            env["THUNDERLAB_RECORDS"] = d
        r = subprocess.run([sys.executable, __file__, "--child", "--model", args.model, "--steps", str(args.steps),
                            "--shapes", str(args.shape_count)], env=env, capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            raise SystemExit(f"job failed:\n{r.stderr[-3000:]}")
        out = json.loads(r.stdout.strip().splitlines()[-1])
        if records:
            out["files_on_disk"] = len(list(Path(d).glob("*.thunderlab.json")))
    return out


def summary(jobs: list[dict]) -> dict:
    first = [j["step_s"][0] for j in jobs]
    rest = [statistics.median(j["step_s"][1:]) for j in jobs]
    total = [sum(j["step_s"][1:]) for j in jobs]
    return {"first_step_s": first, "median_other_steps_s": rest, "sum_other_steps_s": total}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="nanogpt_block")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shapes", default="1,4", help="comma-separated: how many batch sizes a job cycles over")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "records_overhead.json"))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(job(args.model, args.steps, int(args.shapes))))
        return
    cases = []
    for shapes in (int(s) for s in args.shapes.split(",")):
        args.shape_count = shapes
        plain, recorded = [], []
        for r in range(args.rounds):
            order = (False, True) if r % 2 == 0 else (True, False)
            for records in order:
                (recorded if records else plain).append(run_job(args, records))
        sp, sr = summary(plain), summary(recorded)
        case = {
            "shapes": shapes, "plain": sp, "records": sr,
            "files_per_job": [j["files_on_disk"] for j in recorded],
            "bytes_per_job": [j["bytes"] for j in recorded],
            "flush_after_job_s": [j["flush_after_job_s"] for j in recorded],
            "dropped": sum(j["dropped"] for j in recorded), "errors": [e for j in recorded for e in j["errors"]],
            "ratio_records_over_plain": {
                k: paired_ratio(sr[k], sp[k]) for k in ("first_step_s", "median_other_steps_s", "sum_other_steps_s")
            },
        }
        cases.append(case)
        print(f"{args.model}, {shapes} batch size(s), {args.steps} steps, {args.rounds} rounds:")
        for k, p in case["ratio_records_over_plain"].items():
            print(f"  {k:<22} records/plain {describe(p)}   plain median {statistics.median(sp[k]) * 1e3:8.1f} ms")
        print(f"  files per job {case['files_per_job']}, bytes per job {case['bytes_per_job']}")
    result = {
        "benchmark": "records_overhead", "model": args.model, "steps": args.steps, "rounds": args.rounds,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "load_average_at_end": os.getloadavg()},
        "note": ("CPU, torch executor (THUNDERLAB_EXECUTORS as set); a shared, heavily loaded 2-core machine: "
                 "the paired ratios are the figure to read, absolute times are noisy"),
        "cases": cases,
    }
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
