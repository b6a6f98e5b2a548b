"""A real training loop, whole: eager, thunderlab.jit, torch.compile(backend="thunderlab"), torch.compile().

The loop is nanoGPT's (tests/training/test_loops.py: TinyGPT, AdamW with weight decay, warmup then cosine
learning rate, gradient clipping at 1.0, dropout 0.1), 45 steps of one batch each, one torch thread. Two cases:
  * fixed    every batch has the longest sequence length;
  * varying  three sequence lengths in turn (each compiler sees three shapes);
  * bucketed eight sequence lengths in turn, 8 to 64 (what padding each batch to a multiple of 8 gives):
             more lengths than thunderlab's new-sizes limit (4) meets in a row;
  * evaluated  the longest length, every tenth batch of 3 sequences instead of 8 (a dataset's smaller last batch)
             and after it an evaluation of the first batch (model.eval(), torch.no_grad(), then model.train()):
             each compiler meets a new batch size and a new grad mode, and the step's time includes the evaluation.
Variants, each in a fresh process of its own (so every compile, import and worker start is counted), all sharing
one TORCHINDUCTOR_CACHE_DIR (--cache-dir; Inductor's on-disk cache, warm after the first run that fills it):
  * eager            the module itself;
  * jit              thunderlab.jit(model) (tiered: regions run with torch until their kernels are compiled);
  * jit_untiered     thunderlab.jit(model, tiered=False): every kernel compiled before the first call runs;
  * tc_thunderlab    torch.compile(model, backend="thunderlab") (tiered like jit);
  * tc_inductor      torch.compile(model): Inductor, PyTorch's own backend.
THUNDERLAB_EXECUTORS is set to inductor+torch for the thunderlab variants (regions go to Inductor).

Reported per case and variant: the whole loop's wall time (45 steps, compiles included, from the first call to
the last optimizer step), the steady step (median of the last 15 steps), each step's time, the loop thread's CPU
time per step (time.thread_time: what the step costs itself, less sensitive than wall time to other processes),
and for thunderlab's variants each region's switch to its kernel in seconds from the loop's start (after the loop
the run waits for regions still compiling, so a switch later than the loop's end is reported too), where it was
compiled, how many records (compiles of the captured graph) the loop made, and the compile worker's timeline (when it
started, finished its imports, and got and answered each region, with its CPU seconds, and which regions' modules an
earlier run's worker had written, loaded without one: THUNDERLAB_WORKER_ANSWERS=0 in the environment turns that
off). The machine's load average is recorded before and after each run: this machine is shared, and timings taken
while other work runs are noisy.

The torch phase (``--phase-rounds``, in a process of its own): what a whole step costs in CPU time while a jitted
model's regions run their torch versions (their compiles held back), as paired ratios to eager's step over
interleaved rounds, for the default pipeline, the same with regions' torch versions keeping every intermediate
(as they did before they freed them), with remat recomputing only views, and for the torch executor alone.

Run:  .venv/bin/python benchmarks/training_loop.py [--steps 45] [--variants ...] [--cases fixed,varying]
      [--wait 120] [--phase-rounds 40] [--cache-dir DIR]
      [--out benchmarks/results/training_loop.json]
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = ("eager", "jit", "tc_thunderlab", "jit_untiered", "tc_inductor")
CASES = {"fixed": (64,), "varying": (32, 48, 64), "evaluated": (64,), "bucketed": tuple(range(8, 65, 8))}
EVALUATE_EVERY = 10  # the "evaluated" case: every tenth batch is SMALL_BATCH sequences, and an evaluation follows it
SMALL_BATCH = 3
MODEL = dict(vocab=128, n_embd=64, n_head=4, n_layer=2, block=64, dropout=0.1)
BATCH = 8


def run_one(variant: str, case: str, steps: int, wait: float) -> dict:
    """One loop in this process (called in a fresh process by ``main``)."""
    lengths, evaluated = CASES[case], case == "evaluated"
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, ROOT)
    import thunderlab
    from tests.training.test_loops import TinyGPT, lr_at

    torch.manual_seed(0)
    model = TinyGPT(**MODEL).train()
    run = {"eager": lambda: model,
           "jit": lambda: thunderlab.jit(model),
           "jit_untiered": lambda: thunderlab.jit(model, tiered=False),
           "tc_thunderlab": lambda: torch.compile(model, backend="thunderlab"),
           "tc_inductor": lambda: torch.compile(model)}[variant]()
    opt = torch.optim.AdamW(model.parameters(), lr=lr_at(0, total=steps), weight_decay=0.1, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(1)
    data = []
    for s in range(steps):
        t = lengths[s % len(lengths)]
        b = SMALL_BATCH if evaluated and s % EVALUATE_EVERY == EVALUATE_EVERY - 1 else BATCH
        data.append((torch.randint(0, MODEL["vocab"], (b, t), generator=g),
                     torch.randint(0, MODEL["vocab"], (b, t), generator=g)))
    thunderlab_variant = variant in ("jit", "jit_untiered", "tc_thunderlab")
    step_s, step_cpu_s, switched_by_step, losses = [], [], [], []
    start_wall = time.time()
    start = time.perf_counter()
    for i, (x, y) in enumerate(data):
        t0, c0 = time.perf_counter(), time.thread_time()
        for group in opt.param_groups:
            group["lr"] = lr_at(i, total=steps)
        loss = run(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if evaluated and i % EVALUATE_EVERY == EVALUATE_EVERY - 1:
            model.eval()
            with torch.no_grad():
                losses.append(run(*data[0]).item())  # the evaluation's loss, after the step's
            model.train()
        step_s.append(time.perf_counter() - t0)
        step_cpu_s.append(time.thread_time() - c0)
        if thunderlab_variant:
            regions = [r for rec in thunderlab.records() for r in thunderlab.session(rec).regions.values()]
            switched_by_step.append([sum(r.version != "torch" for r in regions), len(regions)])
    loop_s = time.perf_counter() - start
    out = {"loop_s": loop_s, "steady_step_s": statistics.median(step_s[-15:]), "first_step_s": step_s[0],
           "step_s": step_s, "losses": losses,
           # CPU time of the loop's thread: what the step itself costs, less sensitive to other processes' load
           "steady_step_cpu_s": statistics.median(step_cpu_s[-15:]), "step_cpu_s": step_cpu_s}
    if thunderlab_variant:
        recs = thunderlab.records()
        at_end = switched_by_step[-1]
        out.update(records=len(recs), switched_at_end=at_end[0], regions=at_end[1], switched_by_step=switched_by_step)
        if variant != "tc_thunderlab":  # calls run as TorchDynamo captured them (sizes past the new-sizes limit)
            out["cache_info"] = run.cache_info
        deadline = time.perf_counter() + wait
        for rec in recs:  # regions still compiling: when they switch, even after the loop (up to --wait seconds)
            thunderlab.session(rec).wait(max(0.0, deadline - time.perf_counter()))
        out["switches"] = [
            {"record": rec.uid, "region": name, "inputs": rec.inputs[:2],
             "switch_s": next((round(t - start_wall, 3) for t, v in r.history if v == r.executor), None),
             "compiled_in": r.compiled_in, "compiled_here_because": getattr(r.fn, "compiled_here_because", None),
             "compile_seconds": r.compile_seconds, "error": r.error}
            for rec in recs for name, r in thunderlab.session(rec).regions.items()]
        times = [s["switch_s"] for s in out["switches"] if s["switch_s"] is not None]
        out["first_switch_s"] = min(times) if times else None
        out["last_switch_s"] = max(times) if times else None
        # the compile worker's timeline, in seconds from the loop's start (before it: the worker started while the
        # first call captured): its start, its imports done, each region asked, sent, compiled (its own seconds) and
        # back; the C++ wrapper's worker's start and imports
        from thunderlab.executors import compile_process

        tl = compile_process.timeline()

        def rel(t):
            return None if t is None else round(t - start_wall, 3)

        out["worker"] = {"spawned_s": rel(tl["spawned_at"]), "imported_s": rel(tl["imported_at"]),
                         "imported_cpu_s": tl["imported_cpu_s"],
                         "requests": [{"region": r["region"], "cpp_wrapper": r["cpp_wrapper"],
                                       "asked_s": rel(r["asked_at"]), "sent_s": rel(r["sent_at"]),
                                       "answered_s": rel(r["answered_at"]), "compile_s": r["compile_s"],
                                       "compile_cpu_s": r["compile_cpu_s"], "ok": r["ok"]} for r in tl["requests"]],
                         "cpp_worker": tl["cpp_worker"] and {
                             "spawned_s": rel(tl["cpp_worker"]["spawned_at"]),
                             "imported_s": rel(tl["cpp_worker"]["imported_at"]),
                             "imported_cpu_s": tl["cpp_worker"]["imported_cpu_s"]},
                         # regions whose module a worker of an earlier run wrote, loaded with no request
                         "recalled": [{"region": r["region"], "at_s": rel(r["at"])} for r in tl["recalled"]]}
    return out


# the torch phase: what a jitted step costs while its regions run with torch, against eager, in one process
PHASE_PIPELINE = "dce,cse,autodiff,remat{recompute},claim{executors=inductor+torch},fuse,del"
PHASE_VARIANTS = {
    "eager": None,
    # the default pipeline with Inductor, its regions held on their torch versions
    "jit_on_torch": PHASE_PIPELINE.replace("{recompute}", ""),
    # the same, each region's torch version keeping its intermediates until it returns (as before they were freed)
    "jit_on_torch_unfreed": PHASE_PIPELINE.replace("{recompute}", ""),
    # the same, with remat recomputing only views in backward (what it does when no fusion executor follows)
    "jit_on_torch_views": PHASE_PIPELINE.replace("{recompute}", "{recompute=views}"),
    # the torch executor alone: no regions
    "jit_torch_executor": "dce,cse,autodiff,remat,claim{executors=torch},fuse,del",
}


def torch_phase(rounds: int) -> dict:
    """Paired CPU time of a whole training step (forward, backward, clipping, AdamW) per variant against eager's.

    Every variant's regions stay on their torch versions (their compiles are queued behind a wait), so this is the
    step a jitted loop runs until its kernels arrive. Rounds interleave the variants (in a rotating order), and each
    variant's per-round ratio to eager's step in the same round is summarised by its median and 95% interval.
    """
    import threading

    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, ROOT)
    import thunderlab
    from benchmarks.paired import paired_ratio
    from tests.training.test_loops import TinyGPT
    from thunderlab.executors import fusion
    from thunderlab.executors.region import background

    hold = threading.Event()
    background().submit(hold.wait, 3600)  # every compile waits behind this: regions run with torch
    g = torch.Generator().manual_seed(1)
    x, y = (torch.randint(0, MODEL["vocab"], (BATCH, CASES["fixed"][0]), generator=g) for _ in range(2))
    runs = {}
    for name, pipeline in PHASE_VARIANTS.items():
        torch.manual_seed(0)
        model = TinyGPT(**MODEL).train()
        run = model if pipeline is None else thunderlab.jit(model, pipeline=pipeline)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, betas=(0.9, 0.95))
        runs[name] = (model, run, opt)
    freeing = fusion.freeing

    def step(name):
        model, run, opt = runs[name]
        c0 = time.thread_time()
        loss = run(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
        return time.thread_time() - c0

    for name in runs:  # the first calls (capture), then a few warm steps
        if name == "jit_on_torch_unfreed":
            fusion.freeing = lambda trace: trace  # bound now: its regions' torch versions keep every intermediate
        try:
            for _ in range(3):
                step(name)
        finally:
            fusion.freeing = freeing
    names = list(runs)
    times = {n: [] for n in names}
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            times[n].append(step(n))
    regions = [(rec, r) for rec in thunderlab.records() for r in thunderlab.session(rec).regions.values()]
    if any(r.version != "torch" for _, r in regions):
        raise RuntimeError("a region switched to its kernel: the torch phase was not measured")
    hold.set()
    return {"rounds": rounds, "steady_step_cpu_s": {n: statistics.median(t) for n, t in times.items()},
            "vs_eager": {n: paired_ratio(times[n], times["eager"]) for n in names if n != "eager"},
            "load": os.getloadavg()}


NOISE = ("the machine (2 cores) was shared with other engineers' work during every run: timings are noisy; "
         "steady_step_cpu_ms (the loop thread's CPU time) is the less load-sensitive figure")


def summary(results: dict, phase: dict | None) -> dict:
    """The figures to read first, per case/variant, rounded."""
    out = {}
    for case, variants in results.items():
        for variant, r in variants.items():
            if "loop_s" not in r:
                out[f"{case}/{variant}"] = {"error": r.get("error")}
                continue
            row = {"loop_s": round(r["loop_s"], 2), "first_step_s": round(r["first_step_s"], 2),
                   "steady_step_ms": round(r["steady_step_s"] * 1e3, 1),
                   "steady_step_cpu_ms": round(r["steady_step_cpu_s"] * 1e3, 1),
                   "loop_vs_eager": round(r.get("vs_eager", {}).get("loop", float("nan")), 2),
                   "steady_vs_eager": round(r.get("vs_eager", {}).get("steady_step", float("nan")), 2)}
            if "regions" in r:
                row.update(switched_at_end=f"{r['switched_at_end']}/{r['regions']}", first_switch_s=r["first_switch_s"],
                           last_switch_s=r["last_switch_s"], records=r["records"])
                w = r.get("worker") or {}
                row["recalled"] = len(w.get("recalled", []))  # modules an earlier run's worker wrote
                if w.get("spawned_s") is not None:
                    row["worker"] = {"spawned_s": w["spawned_s"], "imported_s": w["imported_s"],
                                     "imported_cpu_s": round(w["imported_cpu_s"] or 0, 2),
                                     "compiles": len(w["requests"]),
                                     "compile_cpu_s": round(sum(q["compile_cpu_s"] or 0 for q in w["requests"]), 2)}
            row["load_before"] = round(r["load_before"][0], 1)
            out[f"{case}/{variant}"] = row
    if phase and "vs_eager" in phase:
        out["torch_phase_step_cpu_vs_eager"] = {n: f"{p['median']:.3f} [{p['lo95']:.3f}, {p['hi95']:.3f}]"
                                               for n, p in phase["vs_eager"].items()}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=45)
    ap.add_argument("--wait", type=float, default=120.0, help="seconds to wait after the loop for regions to switch")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--cases", default="fixed,varying", help=f"of {', '.join(CASES)}")
    ap.add_argument("--cache-dir", default=os.path.join(tempfile.gettempdir(), "thunderlab_bench_inductor_cache"))
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "training_loop.json"))
    ap.add_argument("--phase-rounds", type=int, default=40,
                    help="rounds of the torch-phase measurement (0: skip it)")
    ap.add_argument("--label", default="", help="what this run was (code, cache, load): kept beside its results")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # variant:case, run in this process (the parent's child)
    a = ap.parse_args()
    if a.one:
        variant, case = a.one.split(":")
        print(json.dumps(run_one(variant, case, a.steps, a.wait) if variant != "torch_phase"
                         else torch_phase(int(case))))
        return
    import torch

    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=a.cache_dir, THUNDERLAB_EXECUTORS="inductor+torch",
               PYTHONPATH=os.pathsep.join([ROOT, *filter(None, [os.environ.get("PYTHONPATH")])]))
    results = {}
    for case in a.cases.split(","):
        for variant in a.variants.split(","):
            load_before = os.getloadavg()
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, __file__, "--one", f"{variant}:{case}", "--steps", str(a.steps),
                                   "--wait", str(a.wait)],
                                  env=env, capture_output=True, text=True, timeout=1800)
            wall = time.perf_counter() - t0
            if proc.returncode != 0:
                lines = proc.stderr.strip().splitlines()
                r = {"error": lines[-1] if lines else f"exit {proc.returncode}"}
            else:
                r = json.loads(proc.stdout.strip().splitlines()[-1])
            r.update(process_wall_s=wall, load_before=load_before, load_after=os.getloadavg())
            results.setdefault(case, {})[variant] = r
            print(f"{case:8s} {variant:14s} " + (
                f"loop {r['loop_s']:.2f}s steady {r['steady_step_s'] * 1e3:.1f}ms"
                + (f" switched {r['switched_at_end']}/{r['regions']} at end, last switch {r['last_switch_s']}s,"
                   f" records {r['records']}" + (f", as captured {r['cache_info']['ran_as_captured']}"
                                                 if "cache_info" in r else "") if "regions" in r else "")
                if "loop_s" in r else r["error"]) + f"  load {load_before[0]:.1f}", flush=True)
        eager = results[case].get("eager", {})
        for r in results[case].values():
            if "loop_s" in r and "loop_s" in eager:
                r["vs_eager"] = {"loop": r["loop_s"] / eager["loop_s"], "steady_step": r["steady_step_s"] /
                                 eager["steady_step_s"]}
    phase = None
    if a.phase_rounds:
        load_before = os.getloadavg()
        proc = subprocess.run([sys.executable, __file__, "--one", f"torch_phase:{a.phase_rounds}"], env=env,
                              capture_output=True, text=True, timeout=1800)
        phase = (json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0
                 else {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]})
        phase["load_before"] = load_before
        for n, p in phase.get("vs_eager", {}).items():
            print(f"torch phase {n:22s} step CPU vs eager {p['median']:.3f} [{p['lo95']:.3f}, {p['hi95']:.3f}]")
    run = {
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "machine": {"torch": torch.__version__, "python": platform.python_version(), "cpu_count": os.cpu_count(),
                    "torch_threads": 1,
                    "shared": "this machine was shared with other engineers' work while this ran: the load averages "
                              "beside each run say how much; timings are noisy, compare them with care"},
        "settings": {"steps": a.steps, "model": MODEL, "batch": BATCH,
                     "cases": {c: CASES[c] for c in a.cases.split(",")}, "wait_after_loop_s": a.wait,
                     "inductor_cache_dir": a.cache_dir, "executors": "inductor+torch",
                     "loop": "AdamW(wd 0.1, betas 0.9/0.95), warmup+cosine lr, clip_grad_norm_ 1.0, dropout 0.1"},
        "label": a.label,
        "summary": summary(results, phase),
        "results": results,
        "torch_phase": phase,
    }
    # the file keeps every run, newest first, under its findings (written by hand from the runs)
    report = {"benchmark": "benchmarks/training_loop.py", "noise": NOISE, "findings": [], "runs": []}
    if os.path.exists(a.out):
        with open(a.out) as f:
            report.update(json.load(f))
    report["runs"] = [run, *report["runs"]]
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(report, f, indent=1)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
