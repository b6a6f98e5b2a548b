"""Whole-program fusion on nanoGPT's block: regions per trace, and steady-state speed against eager and torch.compile.

Two cases, float32, CPU, one torch thread (--threads; on a shared machine a second thread's CPU time is mostly
spinning), model and input as thunderlab.examples' nanoGPT block
(4, 64, 256):
  forward   model.eval() under torch.no_grad();
  train     a training step, model.train() with dropout 0.1 (attention and both residuals): forward,
            out.pow(2).mean().backward(), gradients set to None.
Variants: eager; torch.compile(model) (Inductor, its defaults); tl_inductor, thunderlab.jit with
P_FORWARD / P_TRAIN below, tiered=False (compiled before the first call returns); tl_inductor_mkl, the same with
thunderlab.executors.gemm switched off while it compiles (every linear layer on MKL, as torch.compile has them).

For each case: the fuse step's regions per trace and the boundaries its notes give; each variant's first call;
then --warmup calls each, then --rounds rounds that time --inner calls of every variant in turn (shuffled each
round). Times are the process's CPU time (time.process_time: every thread of this process, not the other users of
a shared machine) and wall time; ratios are paired (the median of per-round ratios, with a 95% bootstrap interval:
see paired.py). Outputs (and, for train, the input's gradient) are compared with eager's under the same seed.

--regions-only prints the regions per trace without compiling or timing (the fuse pass on the captured program),
so the same script run against another checkout (--thunderlab DIR) gives the figures before a change.

Run:  .venv/bin/python benchmarks/fusion_whole_program.py [--rounds 30] [--inner 3] [--warmup 3] [--out PATH]
Inductor's compiles take its cache from TORCHINDUCTOR_CACHE_DIR (set one shared directory to reuse them).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _args():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--inner", type=int, default=3)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--cases", default="forward,train")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: CPU time is the work, not spinning)")
    p.add_argument("--regions-only", action="store_true")
    p.add_argument("--thunderlab", default=str(ROOT), help="the checkout whose thunderlab to import")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "fusion_whole_program.json"))
    return p.parse_args()


ARGS = _args()
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, ARGS.thunderlab)

import torch  # noqa: E402
from paired import describe, paired_ratio  # noqa: E402

import thunderlab  # noqa: E402
from thunderlab.examples import NanoGPTBlock  # noqa: E402
from thunderlab.executors import gemm  # noqa: E402
from thunderlab.passes import run_pipeline  # noqa: E402

P_FORWARD = "dce,cse,claim{executors=inductor+torch},fuse,del"
P_TRAIN = "dce,cse,autodiff,claim{executors=inductor+torch},fuse,del"
PAIRS = (("tl_inductor", "eager"), ("torch.compile", "eager"), ("tl_inductor", "torch.compile"),
         ("tl_inductor_mkl", "eager"), ("tl_inductor", "tl_inductor_mkl"))


def make(case: str):
    torch.manual_seed(0)
    model = NanoGPTBlock(dropout=0.1 if case == "train" else 0.0)
    model.train() if case == "train" else model.eval()
    x = torch.randn(4, 64, 256, generator=torch.Generator().manual_seed(1))
    return model, x


def regions(case: str) -> dict:
    """The fuse step's regions per trace and its boundaries, from the captured program (nothing compiled)."""
    model, x = make(case)
    pre = "dce,cse,autodiff" if case == "train" else "dce,cse"
    j = thunderlab.jit(model, pipeline=pre + ",claim{executors=torch},del")
    if case == "train":
        j(x.clone().requires_grad_()).pow(2).mean().backward()
    else:
        with torch.no_grad():
            j(x)
    rec = thunderlab.last_record(j)
    captured = [s for s in rec.steps if s.spec.split("{")[0] in ("cse", "autodiff")][-1].program
    steps, out, err = run_pipeline(captured, "claim{executors=inductor+torch},fuse")
    if err:
        raise RuntimeError(err)
    notes = steps[-1].notes
    return {"summary": notes.summary,
            "regions_per_trace": {t.name: sum(1 for b in t.bound_symbols if b.sym.is_region) for t in out},
            "outside_regions": {t.name: sorted(b.sym.qualname for b in t.bound_symbols if not b.sym.is_region)
                                for t in out},
            "boundaries": notes.get("boundaries")}


def step_fn(case: str, fn, model):
    if case == "forward":
        def run(x):
            with torch.no_grad():
                return fn(x)
        return run

    def run(x):
        x = x.clone().requires_grad_()
        out = fn(x)
        out.pow(2).mean().backward()
        for p in model.parameters():
            p.grad = None
        return out.detach(), x.grad
    return run


def measure(case: str) -> dict:
    variants = {}
    firsts = {}
    outs = {}
    for name in ("eager", "torch.compile", "tl_inductor", "tl_inductor_mkl"):
        model, x = make(case)
        fn = model if name == "eager" else torch.compile(model) if name == "torch.compile" else \
            thunderlab.jit(model, pipeline=P_TRAIN if case == "train" else P_FORWARD, tiered=False)
        run = step_fn(case, fn, model)
        torch.manual_seed(7)
        gemm.set_enabled(name != "tl_inductor_mkl")  # read when the region compiles: on the first call
        t0 = time.perf_counter()
        outs[name] = run(x)
        firsts[name] = time.perf_counter() - t0
        gemm.set_enabled(True)
        variants[name] = (run, x)
    ref = outs["eager"]
    equal = {}
    for name, got in outs.items():
        try:
            for a, b in zip(got if isinstance(got, tuple) else (got,), ref if isinstance(ref, tuple) else (ref,)):
                torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
            equal[name] = True
        except AssertionError as e:
            equal[name] = str(e).strip().splitlines()[0]
    for run, x in variants.values():
        for _ in range(ARGS.warmup):
            run(x)
    cpu = {n: [] for n in variants}
    wall = {n: [] for n in variants}
    rng = random.Random(0)
    for _ in range(ARGS.rounds):
        order = list(variants)
        rng.shuffle(order)
        for name in order:
            run, x = variants[name]
            c0, w0 = time.process_time(), time.perf_counter()
            for _ in range(ARGS.inner):
                run(x)
            cpu[name].append((time.process_time() - c0) / ARGS.inner)
            wall[name].append((time.perf_counter() - w0) / ARGS.inner)
    med = {n: sorted(v)[len(v) // 2] for n, v in cpu.items()}
    return {
        "first_call_s": firsts,
        "equal_to_eager": equal,
        "median_cpu_s": med,
        "median_wall_s": {n: sorted(v)[len(v) // 2] for n, v in wall.items()},
        "paired_cpu": {f"{a}/{b}": paired_ratio(cpu[a], cpu[b])
                       for a, b in PAIRS},
        "paired_wall": {f"{a}/{b}": paired_ratio(wall[a], wall[b])
                        for a, b in PAIRS},
    }


def main():
    torch.set_num_threads(ARGS.threads)
    cases = ARGS.cases.split(",")
    result = {"thunderlab": ARGS.thunderlab, "regions": {c: regions(c) for c in cases}}
    if ARGS.regions_only:
        print(json.dumps(result, indent=1))
        return
    result.update(machine={"torch": torch.__version__, "python": platform.python_version(),
                           "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                           "loadavg_1_5_15_start": list(os.getloadavg())},
                  settings={"rounds": ARGS.rounds, "inner": ARGS.inner, "warmup": ARGS.warmup,
                            "pipelines": {"forward": P_FORWARD, "train": P_TRAIN},
                            "inductor_cache": os.environ.get("TORCHINDUCTOR_CACHE_DIR")})
    t0 = time.perf_counter()
    result["steady_state"] = {}
    for c in cases:
        r = measure(c)
        result["steady_state"][c] = r
        print(c, result["regions"][c]["regions_per_trace"],
              {k: describe(v) for k, v in r["paired_cpu"].items()}, "equal:", r["equal_to_eager"], flush=True)
    result["machine"]["loadavg_1_5_15_end"] = list(os.getloadavg())
    result["gemm_choices"] = gemm.choices()  # each linear layer's shape timed on MKL and oneDNN (gemm.py)
    result["total_wall_s"] = time.perf_counter() - t0
    Path(ARGS.out).parent.mkdir(parents=True, exist_ok=True)
    Path(ARGS.out).write_text(json.dumps(result, indent=1) + "\n")
    print("wrote", ARGS.out)


if __name__ == "__main__":
    main()
