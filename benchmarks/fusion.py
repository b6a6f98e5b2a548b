"""Fusion with thunderlab's inductor executor: steady-state speed, Inductor's disk cache, tiered start.

Inference only (torch.no_grad()), float32, CPU, torch's default thread count. tl_torch / tl_inductor: thunderlab.jit
with pipeline P_TORCH / P_INDUCTOR below (the torch executor only / Inductor fusion regions).

1. Steady state, in this process (TORCHINDUCTOR_CACHE_DIR = a fresh temp dir). Cases: "chain", a 17-op
   elementwise chain on (1024, 1024); "ln_gelu", gelu(layer_norm(x, w, b)) on (64, 256, 512); "nanogpt",
   EXAMPLES["nanogpt_block"] on (4, 64, 256). Variants: eager, torch.compile(fn) (default inductor), tl_torch,
   tl_inductor (tiered=False: compiled before the first call returns), tl_inductor_via_dynamo (the same with
   direct=False: every call through TorchDynamo's frame machinery). Each variant's first call is timed, then it is
   warmed up (--warmup calls and at least 0.5 s); then --iters rounds time --inner calls of every variant in turn
   (interleaved, so drift hits all alike; shuffled each round). Reported: median per-call time, ratios of medians,
   paired ratios (the median over rounds of each round's ratio, with a 95% bootstrap interval: see paired.py), and
   whether each variant's output equals eager's (torch.testing.assert_close, float32 default tolerances) with
   the max |difference|. First calls here share one cache dir (a later variant may hit what an earlier one
   compiled): cold figures are part 2's.
2. Disk cache, in fresh worker processes (this script with --worker): the nanoGPT block's first call with
   tl_inductor, tiered=False, with an empty cache dir ("cold"), then in a second process on the same dir ("warm").
   Done twice: raw, and after a "prewarm" (tl_inductor of an unrelated trivial function first) that takes the
   one-time C++ toolchain / Inductor import cost out of the nanoGPT figure; the prewarm itself is reported. Every
   worker first runs a pass-through torch.compile (TorchDynamo's one-time initialisation, reported, excluded).
3. Tiered start, in fresh processes with fresh cache dirs: first call of the nanoGPT block with tl_inductor
   tiered=True vs tl_torch; for tiered, when the region switched to inductor (RegionRunner history, seconds after the
   first call began) while this thread calls it back to back (worst case: it competes with the compile), how many
   calls ran on torch meanwhile, and that later calls run inductor (timing=True per-version counts). A diagnostic
   "tiered_quiet" process imports Inductor's modules first (timed) and then waits for the switch without calling.
Parts 2 and 3 repeat --procs times (alternating order) and report medians.

Run:  .venv/bin/python benchmarks/fusion.py [--iters 40] [--inner 3] [--warmup 5] [--procs 2] [--out PATH]
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if "--worker" not in sys.argv:  # the main process gets its own empty cache; workers are handed theirs
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="thunderlab_fusion_main_")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from paired import describe, paired_ratio  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

import thunderlab  # noqa: E402
from thunderlab.examples import EXAMPLES  # noqa: E402

P_TORCH = "dce,cse,claim{executors=torch},del"
P_INDUCTOR = "dce,cse,claim{executors=inductor+torch},fuse,del"
VARIANTS = {"eager": lambda f: f, "torch.compile": lambda f: torch.compile(f),
            "tl_torch": lambda f: thunderlab.jit(f, pipeline=P_TORCH),
            "tl_inductor": lambda f: thunderlab.jit(f, pipeline=P_INDUCTOR, tiered=False),
            # the same, every call through TorchDynamo's frame machinery (what direct calls save)
            "tl_inductor_via_dynamo": lambda f: thunderlab.jit(f, pipeline=P_INDUCTOR, tiered=False, direct=False)}


def chain(x):  # 17 elementwise ops
    y = (x * 1.5 + 0.5).sin() * x.cos()
    y = ((y.exp().tanh() * 2 - 1).abs() + 1e-3).sqrt()
    y = torch.sigmoid(y + x) * x
    return (y * y + 0.1).log()


def ln_gelu(x, w, b):
    return F.gelu(F.layer_norm(x, (x.shape[-1],), w, b))


def make_cases():
    g = torch.Generator().manual_seed(0)
    model, (x,) = EXAMPLES["nanogpt_block"]()
    return {"chain": (chain, (torch.randn(1024, 1024, generator=g),)),
            "ln_gelu": (ln_gelu, tuple(torch.randn(*s, generator=g) for s in ((64, 256, 512), (512,), (512,)))),
            "nanogpt": (model, (x,))}


def check(out, ref):
    try:
        torch.testing.assert_close(out, ref)
        return {"max_abs_diff": (out - ref).abs().max().item(), "equal_to_eager": True}
    except AssertionError as e:
        return {"max_abs_diff": (out - ref).abs().max().item(), "equal_to_eager": False, "mismatch": str(e)[:300]}


def regions(jfn):
    rec = thunderlab.last_record(jfn)
    return {"record_error": rec.error, "passes_s": rec.compile_seconds, "regions": {
        n: {"running": t["running"], "compile_seconds": t["compile_seconds"], "error": t["error"],
            "history": t["history"], "timings": t["timings"]} for n, t in rec.timings().items()}}


def steady(name, fn, args, iters, inner, warmup):
    ref, res, live = fn(*args), {}, {}
    for v, make in VARIANTS.items():
        r = res[v] = {}
        try:
            f = make(fn)
            t0 = time.perf_counter()
            out = f(*args)
            r["first_call_s"] = time.perf_counter() - t0
            r.update(check(out, ref))
            if v.startswith("tl_"):
                r.update(regions(f))
            t0, i = time.perf_counter(), 0
            while i < warmup or time.perf_counter() - t0 < 0.5:  # at least `warmup` calls and 0.5 s
                f(*args)
                i += 1
            live[v] = f
        except Exception as e:  # report, keep the other variants
            r["error"] = f"{type(e).__name__}: {e}"
    times = {v: [] for v in live}
    order, rng = list(live.items()), random.Random(0)
    for _ in range(iters):
        rng.shuffle(order)  # a new order each round: no variant always runs after the same one
        for v, f in order:
            t0 = time.perf_counter()
            for _ in range(inner):
                f(*args)
            times[v].append((time.perf_counter() - t0) / inner)
    for v in live:
        res[v]["median_s"], res[v]["min_s"] = statistics.median(times[v]), min(times[v])
    pairs = [("tl_inductor", "torch.compile"), ("tl_inductor_via_dynamo", "torch.compile"), ("tl_inductor", "eager"),
             ("tl_torch", "eager"), ("torch.compile", "eager")]
    ratios = {k: {f"{a}/{b}": res[a][k] / res[b][k] for a, b in pairs if k in res[a] and k in res[b]}
              for k in ("median_s", "min_s")}
    paired = {f"{a}/{b}": paired_ratio(times[a], times[b]) for a, b in pairs if a in times and b in times}
    return {"case": name, "shapes": [list(a.shape) for a in args], "variants": res, "ratios": ratios["median_s"],
            "ratios_of_min": ratios["min_s"], "paired_ratios": paired}


def worker(mode, prewarm):
    """One fresh-process measurement of the nanoGPT block; returns a dict (printed as JSON by main)."""
    r = {"mode": mode, "cache_dir": os.environ["TORCHINDUCTOR_CACHE_DIR"], "prewarm": prewarm}
    t0 = time.perf_counter()
    torch.compile(lambda t: t * 2, backend=lambda gm, ex: gm.forward)(torch.ones(2))
    torch._dynamo.reset()
    r["dynamo_warmup_s"] = time.perf_counter() - t0
    model, (x,) = EXAMPLES["nanogpt_block"]()
    with torch.no_grad():
        ref = model(x)
        if prewarm:
            t0 = time.perf_counter()
            thunderlab.jit(lambda t: (t * 3).cos() + 1, pipeline=P_INDUCTOR, tiered=False)(torch.ones(8))
            r["prewarm_s"] = time.perf_counter() - t0
        if mode == "tiered_quiet":
            t0 = time.perf_counter()
            for mod in ("torch._inductor.compile_fx", "torch._inductor.graph", "torch.fx.experimental.proxy_tensor"):
                importlib.import_module(mod)
            r["preimport_inductor_s"] = time.perf_counter() - t0
        tiered = mode.startswith("tiered")
        jfn = (thunderlab.jit(model, pipeline=P_TORCH) if mode == "torch_first" else
               thunderlab.jit(model, pipeline=P_INDUCTOR, tiered=tiered, timing=tiered))
        before = dict(counters["inductor"])
        start, t0 = time.time(), time.perf_counter()
        out = jfn(x)
        r["first_call_s"] = time.perf_counter() - t0
        r.update(check(out, ref))
        if tiered:
            rec, n = thunderlab.last_record(jfn), 0
            r["running_after_first_call"] = {k: t["running"] for k, t in rec.timings().items()}
            while mode == "tiered" and not thunderlab.session(rec).wait(0) and time.perf_counter() - t0 < 600:
                jfn(x)
                n += 1
            thunderlab.session(rec).wait(600)
            r["calls_while_compiling"] = n
            r["after_switch"] = check([jfn(x) for _ in range(5)][-1], ref)
            switch = [t["history"][-1][0] for t in rec.timings().values()]
            r["switch_after_first_call_start_s"] = max(switch) - start if switch else None
        if mode != "torch_first":
            r.update(regions(jfn))
        r["fxgraph_cache"] = {k.removeprefix("fxgraph_cache_"): v - before.get(k, 0)
                              for k, v in counters["inductor"].items() if k.startswith("fxgraph_cache")}
    return r


def spawn(mode, cache, prewarm=False):
    cmd = [sys.executable, __file__, "--worker", mode] + (["--prewarm"] if prewarm else [])
    p = subprocess.run(cmd, env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}, capture_output=True, text=True)
    line = [s for s in p.stdout.splitlines() if s.startswith("RESULT ")]
    if p.returncode or not line:
        return {"mode": mode, "error": f"worker rc={p.returncode}: {p.stderr.strip()[-2000:]}"}
    return json.loads(line[-1][7:])


def processes(n):
    runs = {k: [] for k in ("cold_raw", "warm_raw", "cold_prewarm", "warm_prewarm", "tiered", "torch_first",
                            "tiered_quiet")}
    dirs = []
    for i in range(n):
        for prewarm in (False, True):  # cold, then warm on the same dir
            dirs.append(tempfile.mkdtemp(prefix="thunderlab_fusion_disk_"))
            tag = "prewarm" if prewarm else "raw"
            runs[f"cold_{tag}"].append(spawn("first", dirs[-1], prewarm))
            runs[f"warm_{tag}"].append(spawn("first", dirs[-1], prewarm))
        for mode in (("tiered", "torch_first", "tiered_quiet") if i % 2 == 0 else
                     ("tiered_quiet", "torch_first", "tiered")):
            dirs.append(tempfile.mkdtemp(prefix="thunderlab_fusion_tier_"))
            runs[mode].append(spawn(mode, dirs[-1]))
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
    keys = ("first_call_s", "prewarm_s", "preimport_inductor_s", "dynamo_warmup_s",
            "switch_after_first_call_start_s", "calls_while_compiling")
    med = lambda rs, n: statistics.median([r[n] for r in rs if r.get(n) is not None] or [None])  # noqa: E731
    m = {k: {n: med(v, n) for n in keys if med(v, n) is not None} for k, v in runs.items()}
    for k in ("cold_raw", "warm_raw", "cold_prewarm", "warm_prewarm"):  # Inductor's FX graph cache, nanoGPT only
        m[k]["disk_cache_hits"] = sum(r.get("fxgraph_cache", {}).get("hit", 0) for r in runs[k])
    f = {k: m[k].get("first_call_s") for k in m}
    q = lambda a, b: a / b if a is not None and b else None  # noqa: E731
    ratios = {"warm/cold_raw": q(f["warm_raw"], f["cold_raw"]),
              "warm/cold_excl_toolchain": q(f["warm_prewarm"], f["cold_prewarm"]),
              "tiered_first/torch_first": q(f["tiered"], f["torch_first"]),
              "tiered_quiet_first/torch_first": q(f["tiered_quiet"], f["torch_first"])}
    return {"runs": runs, "medians": m, "ratios": ratios}


def print_table(cases, procs):
    ms = lambda v: f"{v * 1e3:9.3f}" if v is not None else f"{'-':>9s}"  # noqa: E731
    for c in cases:
        print(f"\n== {c['case']}  shapes {c['shapes']}")
        print(
            f"{'variant':14s} {'median ms':>9s} {'min ms':>9s} {'first s':>8s} {'=eager':>6s} {'max|diff|':>9s} regions"
        )
        for v, r in c["variants"].items():
            if "median_s" not in r:
                print(f"{v:14s} ERROR {r.get('error', '')[:150]}")
                continue
            reg = ",".join(f"{n}:{t['running']}" for n, t in r.get("regions", {}).items())
            print(f"{v:14s} {ms(r['median_s'])} {ms(r['min_s'])} {r['first_call_s']:8.2f} "
                  f"{str(r['equal_to_eager']):>6s} {r['max_abs_diff']:9.2e} {reg}")
        for k in ("ratios", "ratios_of_min"):
            print(f"  {k + ':':14s} " + ", ".join(f"{n}={v:.3f}" for n, v in c[k].items()))
        print("  paired (median of per-round ratios [95% interval]):")
        for n, p in c["paired_ratios"].items():
            print(f"    {n:40s} {describe(p)}")
    print("\n== fresh processes (nanoGPT block, first call; medians; seconds)")
    for k, m in procs["medians"].items():
        print(f"{k:13s} " + "  ".join(f"{n.removesuffix('_s')}={v:.2f}" if isinstance(v, float) else f"{n}={v}"
                                      for n, v in m.items() if n != "dynamo_warmup_s"))
        for r in (r for r in procs["runs"][k] if "error" in r):
            print(f"  error: {r['error'][-300:]}")
    print("  " + ", ".join(f"{k}={v:.3f}" for k, v in procs["ratios"].items() if v is not None))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=40, help="interleaved timing rounds per case")
    ap.add_argument("--inner", type=int, default=3, help="calls per timing sample")
    ap.add_argument("--warmup", type=int, default=5, help="untimed calls after the first")
    ap.add_argument("--procs", type=int, default=2, help="repeats of each fresh-process measurement")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "fusion.json"))
    ap.add_argument("--worker", choices=["first", "tiered", "tiered_quiet", "torch_first"], help=argparse.SUPPRESS)
    ap.add_argument("--prewarm", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print("RESULT " + json.dumps(worker(a.worker, a.prewarm)))
        return
    for k in ("cache_size_limit", "recompile_limit"):  # several compiled copies of one code object
        if hasattr(torch._dynamo.config, k):
            setattr(torch._dynamo.config, k, 64)
    t0, load = time.perf_counter(), os.getloadavg()
    with torch.no_grad():
        cases = [steady(n, fn, args, a.iters, a.inner, a.warmup) for n, (fn, args) in make_cases().items()]
    procs = processes(a.procs)
    print_table(cases, procs)
    pr, tf = procs["ratios"], procs["runs"]["tiered"]
    ok = lambda v, lim: v is not None and v <= lim  # noqa: E731
    # the paired median: each round's two calls ran back to back, so the machine's drift cancels
    targets = {f"{c['case']}: tl_inductor/torch.compile <= 1.0 (paired median)":
               ok(c["paired_ratios"].get("tl_inductor/torch.compile", {}).get("median"), 1) for c in cases}
    targets.update({
        "all variants equal eager": all(r.get("equal_to_eager") for c in cases for r in c["variants"].values()),
        "disk cache warm/cold < 0.25 (raw)": ok(pr["warm/cold_raw"], 0.2499),
        "disk cache warm/cold < 0.25 (toolchain warm-up excluded)": ok(pr["warm/cold_excl_toolchain"], 0.2499),
        "warm processes hit the disk cache": all(procs["medians"][k]["disk_cache_hits"] >= a.procs
                                                 for k in ("warm_raw", "warm_prewarm")),
        "tiered first call <= torch-executor first call": ok(pr["tiered_first/torch_first"], 1.0),
        "tiered: later calls run inductor, equal eager": bool(tf) and all(  # every region switched, served calls
            "error" not in r and r["regions"] and r["after_switch"]["equal_to_eager"] and all(
                t["running"] == "inductor" and t["timings"].get("inductor", {}).get("count", 0) > 0
                for t in r["regions"].values()) for r in tf)})
    print("\ntargets:\n" + "\n".join(f"  {'MET ' if v else 'MISS'}  {k}" for k, v in targets.items()))
    report = {
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "machine": {"torch": torch.__version__, "python": platform.python_version(), "platform": platform.platform(),
                    "processor": platform.processor(), "cpu_count": os.cpu_count(),
                    "torch_threads": torch.get_num_threads(), "loadavg_1_5_15_start": load,
                    "loadavg_1_5_15_end": os.getloadavg()},
        "settings": {"iters": a.iters, "inner": a.inner, "warmup": a.warmup, "procs": a.procs,
                     "pipelines": {"tl_torch": P_TORCH, "tl_inductor": P_INDUCTOR}, "grad": "torch.no_grad()"},
        "total_wall_s": time.perf_counter() - t0, "steady_state": {c["case"]: c for c in cases},
        "fresh_processes": procs, "targets_met": targets}
    (out := Path(a.out)).parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    shutil.rmtree(os.environ["TORCHINDUCTOR_CACHE_DIR"], ignore_errors=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
