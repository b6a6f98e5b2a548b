"""The model zoo against eager and torch.compile: steady-state step ratios and first calls, per model.

For each zoo case (tests/zoo/models.py: a tiny Hugging Face model and an attention implementation) and each
--modes kind of step, inference (eval, no_grad, a forward) and train (train(), forward, loss.backward(),
zero_grad), the --variants below run on their own copies of the model (same weights), in the same process:
  eager              the model itself, the reference of every ratio;
  thunderlab         thunderlab.jit(model) as a new user runs it: the default pipeline with the default executors
                     (Inductor on CPU), tiered, and waited for until every fusion region's kernel is built
                     (thunderlab.session(record).wait() for each of its records) and warmed up until every
                     region's executor race is decided, in every record (those later calls compile too),
                     before it is timed;
  torch.compile      torch.compile(model), Inductor with its defaults;
  thunderlab-torch   thunderlab.jit with the default pipeline on the torch executor only (claim{executors=torch}):
                     what thunderlab's own passes and eager's kernels give, without generated kernels;
  thunderlab-channels-last  the default pipeline with channels-last{when=always} (2-D convolutions on NHWC
                     tensors whether or not its timing finds them faster), waited for as thunderlab is.
Each variant's first call is timed (wall clock: capture, passes, compiles, run); thunderlab's also with the wait
for its kernels (ready_s). TorchDynamo keeps some of what it works out for a function from one capture to the
next, so the first compiler to capture a model paid about 0.1 s more than the second (BERT, both ways round): before
the first calls, Dynamo alone (backend "eager") captures a copy of the model of its own, so that both compilers'
first calls start alike. Then every variant is warmed up and --rounds rounds time --calls steps of each in turn
(one after another, the time per step), in a new order each round; a ratio is the median of per-round ratios
with a 95% bootstrap interval (benchmarks/paired.py), which cancels the machine's drift. --clock cpu (the default on
CPU) runs on one thread and times each step by the CPU time its thread used (time.thread_time), which other
processes on a loaded machine inflate far less than wall time; the load average is recorded before and after each case.
--calls (default 5): a training loop calls one model again and again, so its weights and activations are in the
caches; a single step between two other copies' steps starts with caches those copies filled, and on CPU runs up
to twice as long (BERT-sized zoo models, thunderlab and torch.compile alike). --calls 1 times that cold step.
--device cuda runs every variant's model and inputs on the GPU (float32, TF32 off as in eager's default) and times
each step by wall clock between two torch.cuda.synchronize() calls (--clock wall, the only clock there).
TORCHINDUCTOR_CACHE_DIR (default /tmp/thunderlab_bench_inductor_cache) is shared by both compilers and by runs:
a case whose kernels an earlier run built finds them there (the meta says how many files it held at the start).

--checks also runs tests/zoo/check.py's correctness modes (jit, compile, train, shapes, train-cpp; none by default),
each pass / wrong / error against eager with its first-call time (the table in benchmarks/results/zoo.json);
--checks-built checks the fused kernels themselves, built before the first call (tiered=False).
Writes --out (default benchmarks/results/zoo_vs_compile.json), rewritten after every case, so a partial run keeps
its rows.

Run:  .venv/bin/python benchmarks/zoo.py [--models bert,llama] [--modes inference,train]
      [--variants thunderlab,torch.compile,thunderlab-torch] [--attn default|all] [--rounds 15] [--calls 5]
      [--clock cpu|wall]
      [--checks jit,compile,train,shapes,train-cpp] [--checks-built] [--no-timing] [--device cpu|cuda] [--out PATH]
      .venv/bin/python benchmarks/zoo.py --merge A.json B.json ... [--out PATH]
        one table from several runs (the whole zoo split across processes, timings taken apart from the
        correctness run): a case's checks and timings come from the last file that has them, and each
        file's meta is kept under meta.runs.
      .venv/bin/python benchmarks/zoo.py --table RESULTS.json
        prints the README's markdown table of a results file.
"""
from __future__ import annotations

import argparse
import datetime
import functools
import json
import math
import os
import platform
import random
import re
import statistics
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/thunderlab_bench_inductor_cache")

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]

import thunderlab  # noqa: E402
from benchmarks.paired import describe, interleaved, paired_ratio  # noqa: E402
from tests.zoo.check import ALL_MODES as CHECKS  # noqa: E402
from tests.zoo.check import JIT_OPTIONS as check_options  # noqa: E402
from tests.zoo.check import run  # noqa: E402
from tests.zoo.models import ZOO, attn_implementations, inputs, pair  # noqa: E402

KINDS = ("inference", "train")
VARIANTS = ("eager", "thunderlab", "torch.compile", "thunderlab-torch", "thunderlab-channels-last")


def torch_only(pipeline: str) -> str:
    """``pipeline`` with its claim pass limited to the torch executor."""
    out, n = re.subn(r"\bclaim(\{[^}]*\})?", "claim{executors=torch}", pipeline)
    if n != 1:
        raise ValueError(f"the pipeline {pipeline!r} has {n} claim passes; the thunderlab-torch variant needs one")
    return out


def with_channels_last(pipeline: str) -> str:
    """``pipeline`` with ``channels-last{when=always}`` (the one it has, or one just before autodiff)."""
    out, n = re.subn(r"\bchannels-last(\{[^}]*\})?", "channels-last{when=always}", pipeline)
    if n:
        return out
    if "autodiff" not in pipeline.split(","):
        raise ValueError(f"the pipeline {pipeline!r} has no autodiff pass to put channels-last before")
    return pipeline.replace("autodiff", "channels-last{when=always},autodiff", 1)


def _make(name: str, model):
    if name == "eager":
        return model
    if name == "thunderlab":
        return thunderlab.jit(model)
    if name == "thunderlab-torch":
        return thunderlab.jit(model, pipeline=torch_only(thunderlab.DEFAULT_PIPELINE))
    if name == "thunderlab-channels-last":
        return thunderlab.jit(model, pipeline=with_channels_last(thunderlab.DEFAULT_PIPELINE))
    return torch.compile(model)


def _step(fn, model, x, train: bool):
    if train:
        fn(**x).loss.backward()
        model.zero_grad(set_to_none=True)
    else:
        with torch.no_grad():
            fn(**x)


def _wait(fn) -> dict:
    """Wait for every fusion region of a jitted function to build its kernel; how many run which version now."""
    running: dict[str, int] = {}
    errors = []
    for record in fn.records:
        try:
            session = thunderlab.session(record)
        except thunderlab.NotLive:
            continue
        session.wait()
        for name, region in session.timings().items():
            running[region["running"]] = running.get(region["running"], 0) + 1
            if region["error"]:
                errors.append(f"{name}: {str(region['error'])[:200]}")
    return {"records": len(fn.records), "regions_running": running, "region_errors": errors}


def _unsettled(fn) -> frozenset:
    """The regions of a jitted function that still wait for their kernels or race their versions (each call
    then runs one of them in turn, the torch version included), with their state and timed calls: the steady
    state a user's loop reaches comes after every race is decided, in every record that calls still reach,
    those a later call compiled included (a classification model's second call compiles again: transformers'
    loss sets ``config.problem_type`` on the first, and the first record is not called after that)."""
    out = set()
    for i, name, region in live_regions(fn):
        race = region.get("race") or {}
        if race.get("state") in ("waiting", "racing"):
            out.add((i, name, race["state"], sum(t["count"] for t in race.get("times", {}).values())))
    return frozenset(out)


def live_regions(fn):
    """(record's index, region's name, its timings) for each region of each live record of a jitted function."""
    for i, record in enumerate(getattr(fn, "records", ())):
        try:
            session = thunderlab.session(record)
        except thunderlab.NotLive:
            continue
        for name, region in session.timings().items():
            yield i, name, region


CLOCK = time.thread_time
DEVICE = "cpu"


def _sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _to_device(x: dict) -> dict:
    return {k: v.to(DEVICE) if isinstance(v, torch.Tensor) else v for k, v in x.items()}


def time_steps(entry, attn, train: bool, rounds: int, names: list[str], calls: int = 5) -> dict:
    """Paired step times of the variants ``names`` (eager first) on their own copies of one model: per round,
    each variant's time per step over ``calls`` steps in a row."""
    variants = {}
    for name in names:
        model, _ = pair(entry, attn)
        model.to(DEVICE).train(train)
        variants[name] = (_make(name, model), model)
    x = _to_device(inputs(entry, variants["eager"][1], batch=4, length=16))
    if sum(not n.startswith("eager") for n in names) > 1:
        # TorchDynamo keeps some of what it works out for a function from one capture to the next: the first
        # compiler to capture it would pay for that and the next would not. A capture by Dynamo alone (backend
        # "eager") on a copy of its own pays for it before either is timed.
        model, _ = pair(entry, attn)
        model.to(DEVICE).train(train)
        _step(torch.compile(model, backend="eager"), model, x, train)
        del model
    first, ready, regions, captures = {}, {}, {}, {}
    for name, (fn, model) in variants.items():
        _sync()
        t0 = time.perf_counter()
        _step(fn, model, x, train)
        _sync()
        first[name] = time.perf_counter() - t0
        if name.startswith("thunderlab"):
            # whether the first call ran a capture kept on disk by an earlier run (no TorchDynamo) or captured anew
            captures[name] = {k: fn.cache_info[k] for k in ("captures_loaded", "captures_kept")}
            regions[name] = _wait(fn)
            ready[name] = time.perf_counter() - t0
        for _ in range(3):
            _step(fn, model, x, train)
        before, same = None, 0
        for _ in range(100):  # until every record's kernels are built and every race decided (about ten calls)
            if name.startswith("thunderlab"):
                _wait(fn)
            now = _unsettled(fn)
            same = same + 1 if now == before else 0
            if not now or same == 4:  # settled, or what is left ran in none of the last four steps (more than
                break  # a race's warm-up round)
            before = now
            _step(fn, model, x, train)
    for name in regions:  # after the warm-up calls: every region has switched to what it will run
        regions[name] = _wait(variants[name][0])
    times = interleaved({name: functools.partial(_step, fn, model, x, train) for name, (fn, model) in variants.items()},
                        rounds, calls=calls, clock=CLOCK, sync=_sync)
    out = {"first_call_s": first, "ready_s": ready, "regions": regions, "captures": captures,
           "median_ms": {n: 1e3 * statistics.median(t) for n, t in times.items()}, "ratios": {}}
    for name in names[1:]:
        out["ratios"][f"{name} / eager"] = paired_ratio(times[name], times["eager"])
    for name in [n for n in times if n.startswith("thunderlab")]:
        if "torch.compile" in times:
            out["ratios"][f"{name} / torch.compile"] = paired_ratio(times[name], times["torch.compile"])
    return out


def _geomean(values: list[float]) -> float | None:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def timing_summary(rows: list[dict]) -> dict:
    """Per kind of step: the geometric mean of each ratio, the models slower than 1.1x eager, and how often
    thunderlab is at most torch.compile's time."""
    out = {}
    for kind in KINDS:
        timed = [r for r in rows if "ratios" in r.get(kind, {})]
        if not timed:
            continue
        ratios = {}
        for r in timed:
            for what, p in r[kind]["ratios"].items():
                ratios.setdefault(what, []).append((r["case"], p["median"]))
        s = {"cases": len(timed), "geomean": {w: _geomean([v for _, v in cs]) for w, cs in ratios.items()}}
        s["over_1.1x_eager"] = {w: [c for c, v in cs if v > 1.1] for w, cs in ratios.items() if w.endswith("/ eager")}
        vs = ratios.get("thunderlab / torch.compile")
        if vs:
            s["thunderlab_at_most_torch_compile"] = f"{sum(v <= 1.0 for _, v in vs)} of {len(vs)}"
        firsts = [(r[kind]["first_call_s"].get("thunderlab"), r[kind]["first_call_s"].get("torch.compile"))
                  for r in timed]
        firsts = [a / b for a, b in firsts if a and b]
        if firsts:
            s["first_call_thunderlab_over_torch_compile_geomean"] = _geomean(firsts)
        out[kind] = s
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
    timing = timing_summary(rows)
    if timing:
        out["timing"] = timing
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
            row.update({k: r[k] for k in ("inference", "train", "load_average") if k in r})
    order = {(e.name, a): i for i, (e, a) in enumerate((e, a) for e in ZOO for a in attn_implementations(e))}
    merged = sorted(rows.values(), key=lambda r: order.get((r["model"], r["attn"]), len(order)))
    meta = {"merged": True, "date": max(r["date"] for r in runs), "runs": runs}
    return {"meta": meta, "summary": summary(merged), "rows": merged}


def readme_table(data: dict) -> str:
    """The README's zoo table (markdown) from a results file: per case, the paired ratios and first calls of
    inference and training, and the load average before and after."""

    def pair(row, fmt) -> str:
        return " / ".join(fmt(row[k]) if "ratios" in row.get(k, {}) else "-" for k in KINDS)

    def ratio(name):
        return lambda r: f"{r['ratios'][name]['median']:.2f}" if name in r["ratios"] else "-"

    def first(name):
        def fmt(r):
            t = r["first_call_s"].get(name)
            ready = r.get("ready_s", {}).get(name)
            return "-" if t is None else f"{t:.1f} s" + (f" ({ready:.0f} s)" if ready is not None else "")
        return fmt

    head = ("| model | thunderlab / eager, inference / train | torch.compile / eager, inference / train | "
            "thunderlab / torch.compile, inference / train | first call, thunderlab (kernels built), inference / "
            "train | first call, torch.compile, inference / train | load average |\n|---|---|---|---|---|---|---|")
    lines = [head]
    for row in data["rows"]:
        load = row.get("load_average", {})
        lines.append(f"| {row['case']} | {pair(row, ratio('thunderlab / eager'))} | "
                     f"{pair(row, ratio('torch.compile / eager'))} | "
                     f"{pair(row, ratio('thunderlab / torch.compile'))} | "
                     f"{pair(row, first('thunderlab'))} | {pair(row, first('torch.compile'))} | "
                     f"{load.get('before', [0])[0]:.0f}-{load.get('after', [0])[0]:.0f} |")
    return "\n".join(lines)


def _names(text: str, valid, what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in valid]
    if unknown:
        raise SystemExit(f"{what}: unknown {', '.join(unknown)}; valid: {', '.join(valid)}")
    return names


def _inductor_cache_files() -> int:
    root = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
    return sum(1 for p in root.rglob("*") if p.is_file()) if root.is_dir() else 0


def main():
    by_name = {e.name: e for e in ZOO}
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="", help="comma-separated zoo names, timed in this order (default: all); "
                                                 f"valid: {', '.join(by_name)}")
    ap.add_argument("--modes", default=",".join(KINDS), help="the steps timed: inference, train (default: both)")
    ap.add_argument("--variants", default="thunderlab,torch.compile",
                    help="timed beside eager: thunderlab (default pipeline and executors, waited for), torch.compile "
                         "(Inductor), thunderlab-torch (the torch executor only), thunderlab-channels-last (the "
                         "default pipeline with channels-last{when=always}); default thunderlab,torch.compile")
    ap.add_argument("--attn", default="default", choices=["all", "default"],
                    help="transformers' default attention implementation (sdpa where offered; the default), or "
                         "every one the model offers among eager and sdpa")
    ap.add_argument("--rounds", type=int, default=15, help="interleaved timing rounds per case and mode")
    ap.add_argument("--calls", type=int, default=5,
                    help="steps of one variant in a row per round, timed together (default 5; 1: each step starts "
                         "with caches the other copies filled)")
    ap.add_argument("--checks", default="", help="also run these correctness modes of tests/zoo/check.py: "
                                                 f"{', '.join(CHECKS)} (default: none)")
    ap.add_argument("--no-timing", action="store_true", help="only the --checks")
    ap.add_argument("--checks-built", action="store_true",
                    help="the --checks with every fused kernel built before the first call (tiered=False), so that "
                         "they check the kernels, where a tiered first call runs the torch executor")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="where the models run (default cpu); cuda times by wall clock between synchronisations")
    ap.add_argument("--clock", default=None, choices=["wall", "cpu"],
                    help="cpu (the default on CPU): one thread, each step timed by the CPU time it used "
                         "(time.thread_time); wall (the default and only clock on CUDA): every thread, wall time")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "zoo_vs_compile.json"))
    ap.add_argument("--merge", nargs="+", metavar="JSON", help="write one table from these runs' files; runs nothing")
    ap.add_argument("--table", metavar="JSON", help="print the README's markdown table of this results file; runs "
                                                    "nothing")
    args = ap.parse_args()
    if args.table:
        if not Path(args.table).is_file():
            raise SystemExit(f"--table: no such file: {args.table}")
        print(readme_table(json.loads(Path(args.table).read_text())))
        return
    if args.merge:
        missing = [p for p in args.merge if not Path(p).is_file()]
        if missing:
            raise SystemExit(f"--merge: no such file: {', '.join(missing)}")
        table = merge(args.merge)
        Path(args.out).write_text(json.dumps(table, indent=1))
        print(json.dumps(table["summary"], indent=1))
        return
    if args.calls < 1 or args.rounds < 1:
        raise SystemExit(f"--rounds and --calls must be at least 1 (got {args.rounds} and {args.calls})")
    names = _names(args.models, by_name, "--models")
    kinds = _names(args.modes, KINDS, "--modes")
    variants = ["eager"] + [v for v in _names(args.variants, VARIANTS[1:], "--variants")]
    checks = _names(args.checks, CHECKS, "--checks")
    if args.checks_built:
        check_options.update(tiered=False)
    warnings.filterwarnings("ignore")
    random.seed(0)
    global CLOCK, DEVICE
    DEVICE = args.device
    if DEVICE == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: torch.cuda.is_available() is False here (use --device cpu)")
        if args.clock == "cpu":
            raise SystemExit("--device cuda times by wall clock (--clock wall): CPU time misses the GPU's work")
        args.clock = "wall"
    args.clock = args.clock or "cpu"
    CLOCK = time.perf_counter if args.clock == "wall" else time.thread_time
    if args.clock == "cpu":
        torch.set_num_threads(1)
    torch._dynamo.config.cache_size_limit = 64
    rows = []
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "torch": torch.__version__, "python": platform.python_version(), "cpus": os.cpu_count(),
            "threads": torch.get_num_threads(), "pipeline": thunderlab.DEFAULT_PIPELINE,
            "executors": os.environ.get("THUNDERLAB_EXECUTORS", "default"), "clock": args.clock,
            "device": DEVICE, "gpu": torch.cuda.get_device_name(0) if DEVICE == "cuda" else None,
            "rounds": args.rounds, "calls_per_round": args.calls, "attn": args.attn, "modes": kinds,
            "variants": variants, "checks": checks,
            "checks_built": args.checks_built,
            "inductor_cache": os.environ["TORCHINDUCTOR_CACHE_DIR"],
            "inductor_cache_files_at_start": _inductor_cache_files(), "load_average_at_start": os.getloadavg()}
    for entry in [by_name[n] for n in names] if names else ZOO:  # in the order asked for
        attns = attn_implementations(entry)
        for attn in (attns if args.attn == "all" else attns[-1:]):
            case = entry.name if attn is None else f"{entry.name}-{attn}"
            row = {"case": case, "model": entry.name, "attn": attn, "family": entry.family, "modes": {},
                   "load_average": {"before": os.getloadavg()}}
            for mode in checks:
                torch.manual_seed(0)
                r = run(entry, attn, mode)
                row["modes"][mode] = {"status": r.status, "detail": r.detail, "first_call_s": r.first_call_s}
            if not args.no_timing:
                for kind in kinds:
                    torch._dynamo.reset()
                    try:
                        row[kind] = time_steps(entry, attn, kind == "train", args.rounds, variants, args.calls)
                    except Exception as e:  # noqa: BLE001 - a model that fails is recorded, not timed
                        row[kind] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
            row["load_average"]["after"] = os.getloadavg()
            rows.append(row)
            status = " ".join(f"{m}={v['status']}" for m, v in row["modes"].items())
            ratios = "  ".join(f"{k}: " + ", ".join(f"{w} {describe(p)}" for w, p in row[k]["ratios"].items())
                               + "; first " + ", ".join(f"{n} {t:.1f}s" for n, t in row[k]["first_call_s"].items()
                                                        if n != "eager")
                               for k in kinds if "ratios" in row.get(k, {}))
            errors = " ".join(f"{k}: {row[k]['error']}" for k in kinds if "error" in row.get(k, {}))
            print(f"{case:20s} {status} {ratios} {errors} (load {row['load_average']['after'][0]:.1f})", flush=True)
            meta["load_average_at_end"] = os.getloadavg()
            Path(args.out).write_text(json.dumps({"meta": meta, "summary": summary(rows), "rows": rows}, indent=1))
    print(json.dumps(summary(rows), indent=1))


if __name__ == "__main__":
    main()
