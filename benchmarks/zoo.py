"""The model zoo's table: correctness per model x mode, first-call time, and steady-state step ratios.

For each zoo case (tests/zoo/models.py: a tiny Hugging Face model and an attention implementation):
  * the modes of tests/zoo/check.py (jit, compile, train, shapes: --modes), each pass / wrong / error
    against eager PyTorch, with the time of its first compiled call (capture, passes, run);
  * steady-state steps, inference (eval, no_grad, a forward) and training (train(), forward, loss.backward(),
    zero_grad), of eager, thunderlab.jit (the torch executor: THUNDERLAB_EXECUTORS=torch unless set) and, for the
    models in --compile-models, torch.compile with its default Inductor backend (compiling every model with
    Inductor takes minutes each on two cores, so only a subset is timed against it). Each variant is warmed up,
    then --rounds rounds time one step of every variant in turn, shuffled per round; the ratio is the median of
    per-round ratios with a 95% bootstrap interval (paired.py), which cancels the machine's drift.
Writes --out (default benchmarks/results/zoo.json), rewritten after every case so a partial run keeps its rows.

Run:  .venv/bin/python benchmarks/zoo.py [--models bert,llama] [--attn all|default] [--modes jit,compile,train,shapes]
      [--rounds 15] [--compile-models resnet,bert] [--clock wall|cpu] [--out PATH]
      .venv/bin/python benchmarks/zoo.py --merge A.json B.json ... [--out PATH]
        one table from several runs (the whole zoo split across processes, timings taken apart from the
        correctness run): a case's modes and timings come from the last file that has them, and each
        file's meta is kept under meta.runs.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import statistics
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("THUNDERLAB_EXECUTORS", "torch")
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/thunderlab_bench_inductor_cache")

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]

import thunderlab  # noqa: E402
from benchmarks.paired import describe, paired_ratio  # noqa: E402
from tests.zoo.check import MODES, run  # noqa: E402
from tests.zoo.models import ZOO, attn_implementations, inputs, pair  # noqa: E402


def _step(fn, model, x, train: bool):
    if train:
        fn(**x).loss.backward()
        model.zero_grad(set_to_none=True)
    else:
        with torch.no_grad():
            fn(**x)


CLOCK = time.perf_counter


def time_steps(entry, attn, train: bool, rounds: int, with_compile: bool) -> dict:
    """Paired step times of eager, thunderlab and (optionally) torch.compile on their own copies of one model."""
    variants = {}
    for name in ["eager", "thunderlab"] + (["torch.compile"] if with_compile else []):
        model, _ = pair(entry, attn)
        model.train(train)
        fn = {"eager": model, "thunderlab": thunderlab.jit(model), "torch.compile": torch.compile(model)}[name]
        variants[name] = (fn, model)
    x = inputs(entry, variants["eager"][1], batch=4, length=16)
    first = {}
    for name, (fn, model) in variants.items():
        t0 = time.perf_counter()
        _step(fn, model, x, train)
        first[name] = time.perf_counter() - t0
        for _ in range(3):
            _step(fn, model, x, train)
    times = {name: [] for name in variants}
    order = list(variants)
    for _ in range(rounds):
        random.shuffle(order)
        for name in order:
            fn, model = variants[name]
            t0 = CLOCK()
            _step(fn, model, x, train)
            times[name].append(CLOCK() - t0)
    out = {"first_call_s": first, "median_ms": {n: 1e3 * statistics.median(t) for n, t in times.items()},
           "vs_eager": paired_ratio(times["thunderlab"], times["eager"])}
    if with_compile:
        out["vs_torch_compile"] = paired_ratio(times["thunderlab"], times["torch.compile"])
        out["torch_compile_vs_eager"] = paired_ratio(times["torch.compile"], times["eager"])
    return out


def summary(rows: list[dict]) -> dict:
    counts = {}
    for r in rows:
        for mode, res in r["modes"].items():
            counts.setdefault(mode, {"pass": 0, "wrong": 0, "error": 0})[res["status"]] += 1
    out = {"counts": counts}
    for kind in ("inference", "train"):
        ratios = [(r[kind]["vs_eager"]["median"], r["case"]) for r in rows if r.get(kind, {}).get("vs_eager")]
        if ratios:
            vals = sorted(v for v, _ in ratios)
            worst = max(ratios)
            out[kind] = {"median_vs_eager": statistics.median(vals), "worst_vs_eager": worst[0], "worst_case": worst[1],
                         "cases": len(vals)}
    return out


def merge(paths: list[str]) -> dict:
    """The rows of several zoo.json files, case by case (see the module's docstring)."""
    rows: dict[str, dict] = {}
    runs = []
    for path in paths:
        data = json.loads(Path(path).read_text())
        runs.append({"file": Path(path).name, **data["meta"]})
        for r in data["rows"]:
            row = rows.setdefault(r["case"], {k: r[k] for k in ("case", "model", "attn", "family")} | {"modes": {}})
            row["modes"].update(r["modes"])
            row.update({k: r[k] for k in ("inference", "train") if k in r})
    order = {(e.name, a): i for i, (e, a) in enumerate((e, a) for e in ZOO for a in attn_implementations(e))}
    merged = sorted(rows.values(), key=lambda r: order.get((r["model"], r["attn"]), len(order)))
    meta = {"merged": True, "date": max(r["date"] for r in runs), "runs": runs}
    return {"meta": meta, "summary": summary(merged), "rows": merged}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="", help="comma-separated zoo names (default: all)")
    ap.add_argument("--attn", default="all", choices=["all", "default"],
                    help="every attention implementation, or transformers' default (sdpa where offered)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--compile-models", default="resnet,bert")
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--clock", default="wall", choices=["wall", "cpu"],
                    help="cpu: one thread, each step timed by the CPU time it used (time.thread_time), which "
                         "other processes on a loaded machine do not inflate as they do wall time")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "zoo.json"))
    ap.add_argument("--merge", nargs="+", metavar="JSON", help="write one table from these runs' files; runs nothing")
    args = ap.parse_args()
    if args.merge:
        missing = [p for p in args.merge if not Path(p).is_file()]
        if missing:
            raise SystemExit(f"--merge: no such file: {', '.join(missing)}")
        table = merge(args.merge)
        Path(args.out).write_text(json.dumps(table, indent=1))
        print(json.dumps(table["summary"], indent=1))
        return
    warnings.filterwarnings("ignore")
    random.seed(0)
    if args.clock == "cpu":
        global CLOCK
        CLOCK = time.thread_time
        torch.set_num_threads(1)
    torch._dynamo.config.cache_size_limit = 64
    names = [n for n in args.models.split(",") if n]
    modes = [m for m in args.modes.split(",") if m]
    compiled = set(args.compile_models.split(","))
    rows = []
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "torch": torch.__version__, "python": platform.python_version(), "cpus": os.cpu_count(),
            "threads": torch.get_num_threads(), "executors": os.environ["THUNDERLAB_EXECUTORS"],
            "clock": args.clock, "rounds": args.rounds, "attn": args.attn, "modes": modes,
            "compile_models": sorted(compiled)}
    by_name = {e.name: e for e in ZOO}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise SystemExit(f"not in the zoo: {', '.join(unknown)}; valid: {', '.join(by_name)}")
    for entry in [by_name[n] for n in names] if names else ZOO:  # in the order asked for
        attns = attn_implementations(entry)
        for attn in (attns if args.attn == "all" else attns[-1:]):
            case = entry.name if attn is None else f"{entry.name}-{attn}"
            row = {"case": case, "model": entry.name, "attn": attn, "family": entry.family, "modes": {}}
            for mode in modes:
                torch.manual_seed(0)
                r = run(entry, attn, mode)
                row["modes"][mode] = {"status": r.status, "detail": r.detail, "first_call_s": r.first_call_s}
            if not args.no_timing:
                for kind, train in (("inference", False), ("train", True)):
                    torch._dynamo.reset()
                    try:
                        row[kind] = time_steps(entry, attn, train, args.rounds, entry.name in compiled)
                    except Exception as e:  # noqa: BLE001 - a model that fails is recorded, not timed
                        row[kind] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
            rows.append(row)
            status = " ".join(f"{m}={v['status']}" for m, v in row["modes"].items())
            ratios = " ".join(f"{k} {describe(row[k]['vs_eager'])}" for k in ("inference", "train")
                              if "vs_eager" in row.get(k, {}))
            print(f"{case:28s} {status}  {ratios}", flush=True)
            Path(args.out).write_text(json.dumps({"meta": meta, "summary": summary(rows), "rows": rows}, indent=1))
    print(json.dumps(summary(rows), indent=1))


if __name__ == "__main__":
    main()
