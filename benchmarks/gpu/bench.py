"""The GPU checks' Python side: benchmarks/gpu/run.sh runs each part in its own process, time-boxed.

  env      the machine: GPU, driver, torch, CUDA, nvFuser (its version, or why thunderlab cannot use it)
  fusion   steady-state time per call on CUDA, float32: eager, torch.compile, tl_inductor (thunderlab.jit with
           P_INDUCTOR), tl_nvfuser (P_NVFUSER) for "chain" (17 elementwise ops on --chain N x N), "ln_gelu"
           (gelu(layer_norm) on B x T x C), "nanogpt_fwd" (a nanoGPT block under torch.no_grad()) and
           "nanogpt_train" (its forward + backward: loss = out.pow(2).mean(); parameter gradients compared too).
           As in benchmarks/fusion.py: first call timed, warm-up, then --iters interleaved rounds (shuffled) of
           --inner calls each, synchronised before and after; medians, paired ratios with 95% bootstrap
           intervals (paired.py), and each variant's result checked against eager (rtol = atol = 1e-4).
           A case's results are written as soon as it ends, so a time-out keeps the finished cases.
  profile  one program: the nanoGPT block forward with thunderlab's default pipeline (timing=True,
           tiered=False, verify=True). Per fusion region, the CUDA-event time of the region (median over
           --calls calls; the region runner records events around the region and waits for the end event)
           beside the torch profiler's device time of the kernels that ran inside that region in one call.
           Then the record's HTML report (region timings and kernels included) is written to --html.
  merge    one JSON file from the parts' files, the test run's JUnit XML and run.sh's step log.

Without CUDA, fusion and profile write {"skipped": reason}. --cpu runs them on CPU at small sizes to check this
script itself; those figures say nothing about a GPU.
"""
from __future__ import annotations

import argparse
import datetime
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
import traceback
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

P_INDUCTOR = "dce,cse,autodiff,remat,claim{executors=inductor+torch},fuse,del"
P_NVFUSER = "dce,cse,autodiff,remat,claim{executors=nvfuser+torch},fuse,del"
# as the model zoo's checks: a GPU kernel may sum in another order than eager's
TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}
PAIRS = [("tl_inductor", "torch.compile"), ("tl_nvfuser", "torch.compile"), ("tl_nvfuser", "tl_inductor"),
         ("tl_inductor", "eager"), ("tl_nvfuser", "eager"), ("torch.compile", "eager")]


def write(path, data) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data, indent=2, default=str) + "\n")


def error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).strip()[:1500]}"


def device_or_skip(a) -> str | None:
    """'cuda', 'cpu' (with --cpu), or None when this part has nothing to measure here."""
    import torch

    if torch.cuda.is_available():
        return "cuda"
    return "cpu" if a.cpu else None


# -- env --------------------------------------------------------------------------------------------------------
def env(a) -> dict:
    import torch

    r = {"python": platform.python_version(), "platform": platform.platform(), "cpu_count": os.cpu_count(),
         "torch": torch.__version__, "torch_cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available(),
         "ld_preload": os.environ.get("LD_PRELOAD", "")}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        r["gpu"] = {"name": p.name, "capability": f"{p.major}.{p.minor}",
                    "memory_gib": round(p.total_memory / 2**30, 1), "multiprocessors": p.multi_processor_count,
                    "cudnn": torch.backends.cudnn.version()}
    if shutil.which("nvidia-smi"):
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        r["nvidia_smi"] = q.stdout.strip() or q.stderr.strip()
    else:
        r["nvidia_smi"] = "nvidia-smi not found"
    for mod in ("triton", "nvfuser_direct"):
        try:
            m = __import__(mod)
            r[mod] = getattr(m, "__version__", "imported (no __version__)")
        except Exception as e:  # the reason is the result here
            r[mod] = f"not importable: {error_text(e)}"
    from thunderlab.executors import default_order
    from thunderlab.executors import nvfuser as nv

    ok, why = nv.available()
    r["thunderlab_nvfuser"] = {"available": ok, "why_not": why}
    r["thunderlab_default_executors"] = list(default_order())
    return r


# -- fusion -----------------------------------------------------------------------------------------------------
def chain(x):  # the same 17 elementwise ops as benchmarks/fusion.py
    import torch

    y = (x * 1.5 + 0.5).sin() * x.cos()
    y = ((y.exp().tanh() * 2 - 1).abs() + 1e-3).sqrt()
    y = torch.sigmoid(y + x) * x
    return (y * y + 0.1).log()


def ln_gelu(x, w, b):
    import torch.nn.functional as F

    return F.gelu(F.layer_norm(x, (x.shape[-1],), w, b))


def make_cases(dev: str, a) -> dict:
    """name -> (fn or module, args, training?)."""
    import torch

    from thunderlab.examples import NanoGPTBlock

    g = torch.Generator().manual_seed(0)
    rnd = lambda *s: torch.randn(*s, generator=g).to(dev)  # noqa: E731
    c = a.embd
    torch.manual_seed(0)
    block = NanoGPTBlock(n_embd=c, n_head=a.heads, block_size=a.seq).to(dev)
    return {"chain": (chain, (rnd(a.chain, a.chain),), False),
            "ln_gelu": (ln_gelu, (rnd(a.batch, a.seq, c), rnd(c), rnd(c)), False),
            "nanogpt_fwd": (block.eval(), (rnd(a.batch, a.seq, c),), False),
            "nanogpt_train": (NanoGPTBlock(n_embd=c, n_head=a.heads, block_size=a.seq).to(dev).train(),
                              (rnd(a.batch, a.seq, c),), True)}


def variants(nvfuser_why: str) -> dict:
    import torch

    import thunderlab

    v = {"eager": lambda f: f, "torch.compile": lambda f: torch.compile(f),
         "tl_inductor": lambda f: thunderlab.jit(f, pipeline=P_INDUCTOR, tiered=False)}
    if not nvfuser_why:
        v["tl_nvfuser"] = lambda f: thunderlab.jit(f, pipeline=P_NVFUSER, tiered=False)
    return v


def step(f, args, train: bool, params):
    """One call: the output (inference), or the output and the parameters' gradients (training)."""
    if not train:
        return f(*args)
    for p in params:
        p.grad = None
    out = f(*args)
    out.pow(2).mean().backward()
    return out, [p.grad for p in params]


def compare(got, want) -> dict:
    import torch

    flat = lambda v: [v] if isinstance(v, torch.Tensor) else [t for x in v for t in flat(x)]  # noqa: E731
    g, w = flat(got), flat(want)
    diff = max(((x.float() - y.float()).abs().max().item() for x, y in zip(g, w) if x is not None and y is not None),
               default=0.0)
    try:
        for x, y in zip(g, w, strict=True):
            torch.testing.assert_close(x, y, **TOLERANCE)
        return {"equal_to_eager": True, "max_abs_diff": diff}
    except (AssertionError, ValueError) as e:
        return {"equal_to_eager": False, "max_abs_diff": diff, "mismatch": str(e)[:300]}


def regions(jfn) -> dict:
    import thunderlab

    rec = thunderlab.last_record(jfn)
    return {"record_error": rec.error, "passes_s": rec.compile_seconds,
            "regions": {n: {"running": t["running"], "error": t["error"], "compile_seconds": t["compile_seconds"]}
                        for n, t in rec.timings().items()}}


def run_case(name, fn, args, train, a, dev, nvfuser_why) -> dict:
    import torch

    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    params = [p for p in fn.parameters()] if train else []
    for x in args:
        x.requires_grad_(False)
    ref, res, live = step(fn, args, train, params), {}, {}
    ref = [t.detach().clone() if isinstance(t, torch.Tensor) else [g.clone() for g in t] for t in
           (ref if train else (ref,))]
    for v, make in variants(nvfuser_why).items():
        r = res[v] = {}
        try:
            f = make(fn)
            sync()
            t0 = time.perf_counter()
            out = step(f, args, train, params)
            sync()
            r["first_call_s"] = time.perf_counter() - t0
            r.update(compare(out if train else (out,), ref))
            if v.startswith("tl_"):
                r.update(regions(f))
            t0, i = time.perf_counter(), 0
            while i < a.warmup or time.perf_counter() - t0 < 0.3:
                step(f, args, train, params)
                i += 1
            sync()
            live[v] = f
        except Exception as e:  # report, keep the other variants
            r["error"] = error_text(e)
    if nvfuser_why:
        res["tl_nvfuser"] = {"skipped": nvfuser_why}
    times = {v: [] for v in live}
    order, rng = list(live.items()), random.Random(0)
    for _ in range(a.iters):
        rng.shuffle(order)  # no variant always runs right after the same one
        for v, f in order:
            sync()
            t0 = time.perf_counter()
            for _ in range(a.inner):
                step(f, args, train, params)
            sync()
            times[v].append((time.perf_counter() - t0) / a.inner)
    from paired import paired_ratio

    for v in live:
        res[v]["median_ms"], res[v]["min_ms"] = statistics.median(times[v]) * 1e3, min(times[v]) * 1e3
    return {"case": name, "training": train, "shapes": [list(x.shape) for x in args], "variants": res,
            "paired_ratios": {f"{x}/{y}": paired_ratio(times[x], times[y]) for x, y in PAIRS
                              if x in times and y in times}}


def fusion(a) -> dict:
    import torch

    from thunderlab.executors import nvfuser as nv

    dev = device_or_skip(a)
    if dev is None:
        return {"skipped": "no CUDA device: torch.cuda.is_available() is False"}
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="thunderlab_gpu_inductor_"))
    for k in ("cache_size_limit", "recompile_limit"):  # several compiled copies of one code object
        if hasattr(torch._dynamo.config, k):
            setattr(torch._dynamo.config, k, 64)
    ok, why = nv.available()
    if ok and a.no_nvfuser:
        ok, why = False, a.no_nvfuser
    out = {"device": dev, "settings": {k: getattr(a, k) for k in ("iters", "inner", "warmup", "chain", "batch",
                                                                  "seq", "embd", "heads")},
           "pipelines": {"tl_inductor": P_INDUCTOR, "tl_nvfuser": P_NVFUSER}, "dtype": "float32",
           "tolerance": TOLERANCE,
           "tf32_matmul": torch.backends.cuda.matmul.allow_tf32, "cases": {}}
    for name, (fn, args, train) in make_cases(dev, a).items():
        t0 = time.perf_counter()
        try:
            if train:
                c = run_case(name, fn, args, train, a, dev, "" if ok else why)
            else:
                with torch.no_grad():
                    c = run_case(name, fn, args, train, a, dev, "" if ok else why)
        except Exception as e:
            c = {"case": name, "error": error_text(e), "traceback": traceback.format_exc()[-3000:]}
        c["wall_s"] = time.perf_counter() - t0
        out["cases"][name] = c
        write(a.out, out)  # what is done survives a time-out
        print(f"{name}: {c['wall_s']:.1f} s", flush=True)
    return out


# -- profile ----------------------------------------------------------------------------------------------------
def profile(a) -> dict:
    import torch

    import thunderlab
    from thunderlab.examples import NanoGPTBlock

    dev = device_or_skip(a)
    if dev is None:
        return {"skipped": "no CUDA device: torch.cuda.is_available() is False"}
    torch.manual_seed(0)
    model = NanoGPTBlock(n_embd=a.embd, n_head=a.heads, block_size=a.seq).to(dev).eval()
    x = torch.randn(a.batch, a.seq, a.embd, device=dev)
    jfn = thunderlab.jit(model, pipeline=thunderlab.DEFAULT_PIPELINE, timing=True, tiered=False, verify=True)
    with torch.no_grad():
        t0 = time.perf_counter()
        jfn(x)
        first = time.perf_counter() - t0
        for _ in range(a.calls):
            jfn(x)
        kernels = thunderlab.profile(jfn, x)
    rec = thunderlab.last_record(jfn)
    per_region = {}
    for name, t in rec.timings().items():
        ks = kernels.get(name, [])
        st = t["timings"].get(t["running"], {})
        dev_us = sum(k["device_us"] for k in ks)
        per_region[name] = {
            "executor_running": t["running"], "timing_device": rec.regions[name].get("device"),
            "error": t["error"], "race": t.get("race"),
            "event_median_ms": st.get("median_s", 0) * 1e3 if st else None,
            "event_min_ms": st.get("min_s", 0) * 1e3 if st else None, "event_count": st.get("count", 0),
            "profiler_device_ms": dev_us / 1e3, "profiler_self_cpu_ms": sum(k["self_cpu_us"] for k in ks) / 1e3,
            "profiler_kernels": len(ks),
            "profiler_kernel_launches": sum(k["count"] for k in ks),
            "top_kernels": [{"name": k["name"][:120], "count": k["count"], "device_us": round(k["device_us"], 2),
                             "self_cpu_us": round(k["self_cpu_us"], 2)} for k in ks[:5]]}
    outside = kernels.get("(outside regions)", [])
    html = Path(a.html)
    html.parent.mkdir(parents=True, exist_ok=True)
    rec.to_html(str(html))
    return {"device": dev, "pipeline": rec.pipeline, "shape": list(x.shape), "first_call_s": first,
            "calls": a.calls, "record_error": rec.error, "pass_table": rec.table(), "regions": per_region,
            "outside_regions": {"profiler_device_ms": sum(k["device_us"] for k in outside) / 1e3,
                                "kernels": len(outside), "top_kernels": [k["name"][:120] for k in outside[:5]]},
            "html_report": html.name, "html_bytes": html.stat().st_size}


# -- merge ------------------------------------------------------------------------------------------------------
def junit_counts(path: Path) -> dict:
    if not path.exists():
        return {"error": f"no JUnit file {path.name}: pytest did not finish (see the steps' status)"}
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    c = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
    c["passed"] = c["tests"] - c["failures"] - c["errors"] - c["skipped"]
    skips, fails = {}, []
    for case in root.iter("testcase"):
        for el in case:
            if el.tag == "skipped":
                why = (el.get("message") or "").strip()[:200]
                skips[why] = skips.get(why, 0) + 1
            elif el.tag in ("failure", "error"):
                fails.append({"test": f"{case.get('classname')}::{case.get('name')}", "kind": el.tag,
                              "message": (el.get("message") or "").strip()[:500]})
    c["skip_reasons"] = skips
    c["failed"] = fails[:50]
    return c


def merge(a) -> dict:
    parts = Path(a.parts)
    load = lambda n: json.loads((parts / n).read_text()) if (parts / n).exists() else None  # noqa: E731
    steps = []
    if (parts / "steps.tsv").exists():
        for line in (parts / "steps.tsv").read_text().splitlines():
            name, rc, ms, note = (line.split("\t") + ["", "", "", ""])[:4]
            steps.append({"step": name, "rc": int(rc), "seconds": int(ms) / 1e3, "timed_out": rc in ("124", "137"),
                          "note": note})
    tests = junit_counts(parts / "tests.xml")
    report = {"kind": a.kind, "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(),
              "note": a.note, "total_wall_s": a.total, "steps": steps, "nvfuser_setup": load("nvfuser_setup.json"),
              "environment": load("env.json"), "tests": tests, "fusion": load("fusion.json"),
              "zoo": load("zoo.json"), "profile": load("profile.json")}
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=["env", "fusion", "profile", "merge"])
    ap.add_argument("--out", required=True, help="the JSON file to write")
    ap.add_argument("--cpu", action="store_true", help="without CUDA, run fusion/profile on CPU (checks the script)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--inner", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--chain", type=int, default=4096, help="the elementwise chain's input is N x N")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--embd", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--no-nvfuser", default="", metavar="REASON", help="fusion: leave nvFuser out, saying why")
    ap.add_argument("--calls", type=int, default=20, help="profile: timed calls before the profiled one")
    ap.add_argument("--html", default="gpu-nanogpt-report.html", help="profile: the HTML report to write")
    ap.add_argument("--parts", help="merge: the folder of the parts' files")
    ap.add_argument("--kind", default="", help="merge: what machine this was (goes into the JSON)")
    ap.add_argument("--note", default="", help="merge: a note for the JSON")
    ap.add_argument("--total", type=float, default=None, help="merge: run.sh's wall seconds")
    a = ap.parse_args()
    t0 = time.perf_counter()
    try:
        data = {"env": env, "fusion": fusion, "profile": profile, "merge": merge}[a.part](a)
    except Exception as e:  # a part that fails says how, in its own file
        data = {"error": error_text(e), "traceback": traceback.format_exc()[-3000:]}
    if a.part != "merge":
        data["part_wall_s"] = time.perf_counter() - t0
    write(a.out, data)
    print(f"{a.part}: wrote {a.out}" + (f" ({data['error']})" if "error" in data else ""), flush=True)
    sys.exit(1 if "error" in data else 0)


if __name__ == "__main__":
    main()
