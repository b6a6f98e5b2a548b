"""Training step (forward + backward) time and saved-for-backward memory: eager, torch.compile, thunderlab.

For each model in --models (thunderlab.examples.EXAMPLES keys; default nanogpt_block,llama_block,mlp), these variants,
each on its own deep copy of the module (same weights, same input; eval() as the examples return it: dropout p=0):
  * eager          the module itself;
  * torch.compile  torch.compile(model), default inductor backend (TORCHINDUCTOR_CACHE_DIR defaults to a folder
                   under /tmp; its first step is slow when that cache is cold, fast when warm);
  * dynamo_passthrough  torch.compile with a backend returning the captured graph unchanged: eager autograd
                   behind TorchDynamo, i.e. what capturing alone costs per step (thunderlab captures the same way);
  * thunderlab     thunderlab.jit(model), pipeline "dce,cse,autodiff,remat,claim{executors=torch},del": the torch
                   executor, remat deciding for itself (recompute=auto: with no fusion after it, only views);
                   repeated calls run directly on Dynamo's bytecode once its guards pass (the default);
  * tl_via_dynamo  the same with direct=False: every call through TorchDynamo's frame machinery;
  * tl_no_remat    the same without remat;
  * tl_remat_all   remat{recompute=all}: every cheap op recomputed (least memory; each recomputed op is one
                   more kernel on the torch executor, which a fusing executor would fold into its kernels);
  * tl_eager_gelu  thunderlab with eager's GELU kernels everywhere (NATIVE_GELU_BELOW = 0 while its steps run):
                   the torch executor otherwise runs small exact GELUs (the MLP's) on ATen's own kernel, not
                   oneDNN's (see benchmarks/gelu_kernels.py); this variant separates that choice from the rest.
A step: loss = f(x).pow(2).mean(); loss.backward(); model.zero_grad(set_to_none=True). Each variant's first step
(compilation) is timed, then it is warmed up (--warmup steps and at least 1 s); then --iters rounds time one step
of every variant in turn (interleaved, so drift hits all alike; shuffled each round, so no variant always runs
after the same one). Reported: median (and min) per variant, paired
ratios (the median over rounds of each round's ratio, with a 95% bootstrap interval: see paired.py), ratios
of medians vs eager and vs torch.compile, and max |grad - eager grad| over the parameters.

Saved-for-backward bytes, measured alike for every variant: one forward under saved_tensors_hooks, summing the
nbytes of the unique storages of the tensors packed (thunderlab's runtime and inductor's both use
ctx.save_for_backward, which the hook sees), split into parameters / input / the rest ("activations", buffers
included). For thunderlab the record's figures stand beside it: the "autodiff" step's notes["saved_bytes"] and the
"remat" step's notes["saved_bytes_before"/"_after"] (counted per saved tensor, so views of one storage add up).
Memory: peak memory is NOT measured on CPU (no torch allocator statistics there); the hook-measured saved bytes
are the memory figure. As a labelled extra, the process max RSS (resource.getrusage, KiB, process-wide and
monotonic) is recorded before and after each variant's build and warm-up. With --device cuda,
torch.cuda.max_memory_allocated over one step is recorded too.

Instructions (--instructions N, off by default): for each model in --instruction-models (default mlp: under
valgrind a step runs about fifty times slower, and a transformer block's compile and warm-up alone take a quarter
of an hour), each of INSTRUCTION_VARIANTS runs N steps under valgrind's callgrind
(torch.utils.benchmark's collect_callgrind, one thread, in a subprocess each), which counts the
instructions a step executes. A count does not drift with the machine's load as times do, so it tells a change
in the work done from noise; it does not see what costs time without instructions (cache misses, other
threads). Needs valgrind (apt-get install valgrind); a few minutes per variant.

Run:  .venv/bin/python benchmarks/training.py [--models nanogpt_block,llama_block,mlp] [--iters 50]
      [--warmup 5] [--device cpu] [--instructions N [--instruction-models mlp]] [--out PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import json
import os
import platform
import random
import resource
import shutil
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/thunderlab_bench_inductor_cache")

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from paired import describe, paired_ratio  # noqa: E402

import thunderlab  # noqa: E402
from thunderlab.examples import EXAMPLES  # noqa: E402
from thunderlab.executors import torch as torch_executor  # noqa: E402

VARIANTS = {
    "eager": lambda m: m,
    "torch.compile": lambda m: torch.compile(m),
    # TorchDynamo with a backend that runs the captured graph as it is (eager autograd): the capture's own cost
    "dynamo_passthrough": lambda m: torch.compile(m, backend=lambda gm, example_inputs: gm.forward),
    "thunderlab": lambda m: thunderlab.jit(m, pipeline="dce,cse,autodiff,remat,claim{executors=torch},del"),
    "tl_via_dynamo": lambda m: thunderlab.jit(
        m, pipeline="dce,cse,autodiff,remat,claim{executors=torch},del", direct=False
    ),
    "tl_no_remat": lambda m: thunderlab.jit(m, pipeline="dce,cse,autodiff,claim{executors=torch},del"),
    "tl_remat_all": lambda m: thunderlab.jit(
        m, pipeline="dce,cse,autodiff,remat{recompute=all},claim{executors=torch},del"
    ),
    "tl_eager_gelu": lambda m: thunderlab.jit(m, pipeline="dce,cse,autodiff,remat,claim{executors=torch},del"),
}


@contextlib.contextmanager
def _eager_gelu_kernels():
    saved = torch_executor.NATIVE_GELU_BELOW
    torch_executor.NATIVE_GELU_BELOW = 0
    try:
        yield
    finally:
        torch_executor.NATIVE_GELU_BELOW = saved


# what a variant's steps run under (entered outside the timed span)
CONTEXTS = {"tl_eager_gelu": _eager_gelu_kernels}


def step(fn, model, x):
    fn(x).pow(2).mean().backward()
    model.zero_grad(set_to_none=True)


def timed_step(fn, model, x, device, context=None):
    """Seconds of one step (the device synchronised before and after on CUDA), under ``context()`` if given."""
    if context is not None:
        with context():
            return timed_step(fn, model, x, device)
    cuda = device == "cuda"
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    step(fn, model, x)
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def hook_saved(fn, model, x):
    """Unique storages packed for backward during one forward, split by what they belong to."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = {}

    def pack(t):
        s = t.untyped_storage()
        seen[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(x)
    step(lambda _: out, model, x)
    p_bytes = sum(n for k, n in seen.items() if k in params)
    x_bytes = seen.get(x.untyped_storage().data_ptr(), 0)
    total = sum(seen.values())
    return {"total": total, "params": p_bytes, "input": x_bytes, "activations": total - p_bytes - x_bytes,
            "storages": len(seen)}


def grads(fn, model, x):
    fn(x).pow(2).mean().backward()
    g = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    return g


def record_notes(jfn):
    rec = thunderlab.last_record(jfn)
    r = {"error": rec.error, "compile_pass_s": rec.compile_seconds}
    for s in rec.steps:
        if s.spec == "autodiff":
            r["autodiff_saved_bytes"] = s.notes.get("saved_bytes")
            r["autodiff_saved_count"] = len(s.notes.get("saved", []))
        if s.spec.startswith("remat"):
            for k in ("saved_bytes_before", "saved_bytes_after", "saved_before", "saved_after", "recomputed",
                      "recompute", "why"):
                r[f"remat_{k}"] = s.notes.get(k)
    return r


def measure(name, iters, warmup, device):
    base, (x,) = EXAMPLES[name]()
    base, x = base.to(device), x.to(device)
    ref = grads(base, base, x)
    res, live = {v: {} for v in VARIANTS}, {}
    for vname, make in VARIANTS.items():  # build, first step (compilation), warm-up
        r, model = res[vname], copy.deepcopy(base)
        r["process_max_rss_kib_before"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            fn = make(model)
            with CONTEXTS.get(vname, contextlib.nullcontext)():
                r["first_step_s"] = timed_step(fn, model, x, device)
                t0 = time.perf_counter()
                for i in range(10**6):  # at least `warmup` steps and at least 1 s
                    step(fn, model, x)
                    if i + 1 >= warmup and time.perf_counter() - t0 > 1.0:
                        break
            live[vname] = (fn, model)
            r["process_max_rss_kib_after"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        except Exception as e:  # report, keep the other variants
            r["error"] = f"{type(e).__name__}: {e}"
    times = {v: [] for v in live}
    order, rng = list(live.items()), random.Random(0)
    for _ in range(iters):  # interleaved, so that drift (e.g. compile workers winding down) hits all alike,
        rng.shuffle(order)  # in a new order each round, so that no variant always follows the same one
        for vname, (fn, model) in order:
            times[vname].append(timed_step(fn, model, x, device, CONTEXTS.get(vname)))
    for vname, (fn, model) in live.items():
        r = res[vname]
        r["step_median_s"], r["step_min_s"] = statistics.median(times[vname]), min(times[vname])
        try:
            with CONTEXTS.get(vname, contextlib.nullcontext)():
                r["saved_hook"] = hook_saved(fn, model, x)
                g = grads(fn, model, x)
                r["max_grad_err"] = max((g[k] - ref[k]).abs().max().item() for k in ref)
                if vname == "thunderlab" or vname.startswith("tl_"):
                    r["record"] = record_notes(fn)
                if device == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                    timed_step(fn, model, x, device)
                    r["cuda_peak_bytes"] = torch.cuda.max_memory_allocated()
        except Exception as e:
            r["error"] = f"{type(e).__name__}: {e}"
    med = {v: r["step_median_s"] for v, r in res.items() if "step_median_s" in r}
    ratios = {f"{v}/{b}": med[v] / med[b] for v in med for b in ("eager", "torch.compile", "dynamo_passthrough")
              if b in med}
    paired = {f"{v}/{b}": paired_ratio(times[v], times[b]) for v in times for b in ("eager", "torch.compile")
              if b in times and v != b}
    return {"model": name, "input_shape": list(x.shape), "variants": res, "time_ratios": ratios,
            "paired_ratios": paired}


INSTRUCTION_VARIANTS = ("eager", "dynamo_passthrough", "thunderlab")


def instructions(name: str, number: int) -> dict:
    """Instructions per training step of each of INSTRUCTION_VARIANTS, counted by callgrind (see the docstring)."""
    if shutil.which("valgrind") is None:
        return {"error": "valgrind not found; install it (apt-get install valgrind) to count instructions"}
    from torch.utils.benchmark import Timer

    # collect_callgrind runs `python` from PATH in a subprocess under valgrind: make it this interpreter
    here, path = os.path.dirname(sys.executable), os.environ.get("PATH", "")
    if path.split(os.pathsep)[0] != here:  # once, not once per model
        os.environ["PATH"] = here + os.pathsep + path

    def count(variant: str) -> float:
        setup = "\n".join([
            "import sys", f"sys.path.insert(0, {str(ROOT / 'benchmarks')!r})", "import training",
            f"model, (x,) = training.EXAMPLES[{name!r}]()", f"fn = training.VARIANTS[{variant!r}](model)",
            "for _ in range(3): training.step(fn, model, x)"])
        stats = Timer("training.step(fn, model, x)", setup=setup).collect_callgrind(number=number,
                                                                                  collect_baseline=False)
        return stats.counts(denoise=True) / number

    with ThreadPoolExecutor(max_workers=max(1, min(len(INSTRUCTION_VARIANTS), os.cpu_count() or 1))) as pool:
        counts = dict(zip(INSTRUCTION_VARIANTS, pool.map(count, INSTRUCTION_VARIANTS)))
    return {"steps": number, "per_step": counts,
            "ratios": {f"{v}/eager": counts[v] / counts["eager"] for v in INSTRUCTION_VARIANTS if v != "eager"}}


def print_table(results):
    mb = lambda b: "-" if b is None else f"{b / 2**20:8.2f}"  # noqa: E731
    for c in results:
        print(f"\n== {c['model']}  input {tuple(c['input_shape'])}")
        print(f"{'variant':14s} {'step ms':>9s} {'/eager':>7s} {'/compile':>8s} {'first s':>8s} "
              f"{'saved MiB':>9s} {'act MiB':>8s} {'record MiB':>10s} {'grad err':>9s} {'maxRSS MiB':>10s}")
        for v, r in c["variants"].items():
            if "error" in r and "step_median_s" not in r:
                print(f"{v:14s} ERROR {r['error'][:100]}")
                continue
            rec = r.get("record", {})
            rec_b = rec.get("remat_saved_bytes_after", rec.get("autodiff_saved_bytes"))
            h = r.get("saved_hook", {})
            q = c["time_ratios"]
            print(f"{v:14s} {r['step_median_s'] * 1e3:9.3f} {q.get(f'{v}/eager', 0):7.3f} "
                  f"{q.get(f'{v}/torch.compile', 0):8.3f} {r['first_step_s']:8.2f} {mb(h.get('total'))} "
                  f"{mb(h.get('activations'))} {mb(rec_b):>10s} {r.get('max_grad_err', float('nan')):9.2e} "
                  f"{r['process_max_rss_kib_after'] / 1024:10.1f}")
            if "error" in r:
                print(f"  error: {r['error'][:200]}")
        print("paired vs eager (median of per-round ratios [95% interval]): " + ", ".join(
            f"{k.split('/')[0]} {describe(p)}" for k, p in c["paired_ratios"].items() if k.endswith("/eager")))
        ins = c.get("instructions")
        if ins is not None:
            print("instructions per step (callgrind, one thread): " + (ins["error"] if "error" in ins else ", ".join(
                f"{v} {n / 1e6:.3f} M" + (f" ({ins['ratios'][f'{v}/eager']:.3f}x eager)" if v != "eager" else "")
                for v, n in ins["per_step"].items())))
        tl = c["variants"].get("thunderlab", {}).get("record", {})
        if "remat_saved_bytes_before" in tl:
            print(f"remat (record): {mb(tl['remat_saved_bytes_before'])} -> {mb(tl['remat_saved_bytes_after'])} "
                  f"MiB, {tl['remat_saved_before']} -> {tl['remat_saved_after']} tensors, "
                  f"{tl['remat_recomputed']} recomputed")
    print("\nsaved MiB: unique storages packed by saved_tensors_hooks in one forward; act MiB: the same less params"
          "\nand input; record MiB: thunderlab record notes (per tensor, remat 'after' where remat ran); peak memory"
          "\nis NOT measured on CPU; maxRSS: process-wide max RSS so far (monotonic), after build and warm-up.")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="nanogpt_block,llama_block,mlp", help="comma-separated EXAMPLES keys")
    ap.add_argument("--iters", type=int, default=50, help="timed steps per median")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps after the first")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--instructions", type=int, default=0, metavar="N",
                    help="also count instructions per step over N steps under callgrind (0: off)")
    ap.add_argument("--instruction-models", default="mlp", help="comma-separated models whose instructions are counted")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "training.json"))
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda but CUDA is not available")
    for k in ("cache_size_limit", "recompile_limit"):  # several compiled copies of one forward share a code object
        if hasattr(torch._dynamo.config, k):
            setattr(torch._dynamo.config, k, 64)
    t0 = time.perf_counter()
    results = [measure(m.strip(), a.iters, a.warmup, a.device) for m in a.models.split(",") if m.strip()]
    if a.instructions > 0:
        counted = {m.strip() for m in a.instruction_models.split(",")}
        for r in (r for r in results if r["model"] in counted):
            print(f"counting instructions: {r['model']} ({len(INSTRUCTION_VARIANTS)} variants under callgrind)",
                  flush=True)
            r["instructions"] = instructions(r["model"], a.instructions)
    print_table(results)
    report = {
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "machine": {
            "torch": torch.__version__, "python": platform.python_version(), "platform": platform.platform(),
            "processor": platform.processor(), "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "device": a.device, "cuda": torch.cuda.get_device_name() if a.device == "cuda" else None,
        },
        "settings": {"iters": a.iters, "warmup": a.warmup, "models": a.models, "instructions": a.instructions,
                     "instruction_models": a.instruction_models if a.instructions else None,
                     "inductor_cache_dir": os.environ["TORCHINDUCTOR_CACHE_DIR"], "loss": "out.pow(2).mean()"},
        "memory_note": ("peak memory is not measured on CPU; saved_hook = unique storages packed for backward "
                        "(saved_tensors_hooks); process_max_rss_kib_after = resource.getrusage max RSS, process-wide "
                        "and monotonic, an extra only" + ("; cuda_peak_bytes = max_memory_allocated over one step"
                                                          if a.device == "cuda" else "")),
        "total_wall_s": time.perf_counter() - t0,
        "cases": {r["model"]: r for r in results},
    }
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
