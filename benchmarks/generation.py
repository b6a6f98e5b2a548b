"""Text generation with a growing cache: Hugging Face ``generate`` on a small GPT-2, its forward compiled.

transformers documents compiling a model for generation as ``model.forward = torch.compile(model.forward)``; the
same with thunderlab is ``model.forward = thunderlab.jit(model.forward)``. Each generated token calls forward with
a cache one token longer, so TorchDynamo's graph has symbolic sizes and every call meets new ones.

Variants, each in a fresh process of its own (imports and compiles counted), sharing one TORCHINDUCTOR_CACHE_DIR:
  * eager          the model as it is;
  * jit            ``model.forward = thunderlab.jit(model.forward)`` (its default executors);
  * jit_torch      the same with THUNDERLAB_EXECUTORS=torch (no fusion executor: no kernels compiled anywhere);
  * tc_eager       ``torch.compile(model.forward, backend="eager")``: TorchDynamo alone;
  * tc_inductor    ``torch.compile(model.forward)``;
  * ``--against DIR`` adds ``jit@DIR`` and ``jit_torch@DIR``: thunderlab from another source tree (a
    ``git worktree`` of an earlier commit), the same script.
Each process runs ``--generations`` greedy generations of ``--tokens`` tokens from one prompt and reports the first
generation's time (its compiles included), the median of the last quarter (steady: thunderlab's regions race their
versions over their first calls, while the C++ wrapper's kernels compile in the background), whether every
generation equals eager's tokens, and for thunderlab the function's ``cache_info`` (records made, calls run as
captured); thunderlab's variants also wait after the first generation until their regions' first kernels are compiled
(``--wait``, reported).

Run:  .venv/bin/python benchmarks/generation.py [--tokens 30] [--generations 60] [--against DIR]
      [--cache-dir DIR] [--out benchmarks/results/generation.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = ("eager", "jit", "jit_torch", "tc_eager", "tc_inductor")
MODEL = dict(n_layer=2, n_embd=64, n_head=2, vocab_size=100)


def child(variant: str, root: str, tokens: int, generations: int, wait: float) -> dict:
    sys.path.insert(0, root)
    import torch

    import thunderlab
    from thunderlab.examples import gpt2_from_config

    torch.manual_seed(0)
    model = gpt2_from_config(**MODEL).eval()
    prompt = torch.randint(0, MODEL["vocab_size"], (1, 8), generator=torch.Generator().manual_seed(1))

    def generate():
        with torch.no_grad():
            return model.generate(prompt, max_new_tokens=tokens, do_sample=False, pad_token_id=0)

    reference = generate()  # eager's tokens (and transformers' own first-call imports, outside the timing)
    kind = variant.split("@")[0]
    if kind in ("jit", "jit_torch"):
        model.forward = thunderlab.jit(model.forward)
    elif kind == "tc_eager":
        model.forward = torch.compile(model.forward, backend="eager")
    elif kind == "tc_inductor":
        model.forward = torch.compile(model.forward)
    times, equal, waited = [], True, 0.0
    for k in range(generations):
        t0 = time.perf_counter()
        out = generate()
        times.append(time.perf_counter() - t0)
        equal = equal and torch.equal(out, reference)
        if k == 0 and kind.startswith("jit"):  # the steady state: once the regions' kernels are in
            t0 = time.perf_counter()
            for rec in thunderlab.records():
                thunderlab.session(rec).wait(max(0.0, wait - (time.perf_counter() - t0)))
            waited = time.perf_counter() - t0
    result = {"first_s": times[0], "steady_s": statistics.median(times[-max(1, len(times) // 4):]), "times_s": times,
              "equal_to_eager": equal, "waited_for_kernels_s": waited}
    if kind.startswith("jit"):
        result["cache_info"] = model.forward.cache_info
        result["records"] = len(thunderlab.records())
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=30)
    ap.add_argument("--generations", type=int, default=60)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--wait", type=float, default=180.0,
                    help="seconds thunderlab's variants wait after the first generation for their regions' kernels")
    ap.add_argument("--against", help="another source tree: adds jit@DIR and jit_torch@DIR")
    ap.add_argument("--cache-dir", default=os.path.join(tempfile.gettempdir(), "thunderlab_bench_inductor_cache"))
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "generation.json"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        variant, root = a.child.split("|")
        print(json.dumps(child(variant, root, a.tokens, a.generations, a.wait)))
        return
    sys.path.insert(0, ROOT)
    from benchmarks.paired import write_report

    runs = [(v, ROOT) for v in a.variants.split(",")]
    if a.against:
        other = os.path.abspath(a.against)
        runs += [(f"jit@{other}", other), (f"jit_torch@{other}", other)]
    results = {}
    for variant, root in runs:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=a.cache_dir, PYTHONWARNINGS="ignore")
        if variant.split("@")[0] == "jit_torch":
            env["THUNDERLAB_EXECUTORS"] = "torch"
        proc = subprocess.run([sys.executable, __file__, "--child", f"{variant}|{root}", "--tokens", str(a.tokens),
                               "--generations", str(a.generations), "--wait", str(a.wait)],
                              env=env, capture_output=True, text=True, timeout=1200)
        if proc.returncode != 0:
            results[variant] = {"error": proc.stderr[-2000:]}
            print(variant, "failed:", proc.stderr[-500:], flush=True)
            continue
        results[variant] = json.loads(proc.stdout.strip().splitlines()[-1])
        r = results[variant]
        print(f"{variant:50s} first {r['first_s']:.3f} s  steady {r['steady_s'] * 1000:.1f} ms  "
              f"waited {r['waited_for_kernels_s']:.1f} s  "
              f"equal {r['equal_to_eager']}  {r.get('cache_info', '')}", flush=True)
    eager = results.get("eager", {}).get("steady_s")
    summary = {v: {"first_s": round(r["first_s"], 3), "steady_ms": round(r["steady_s"] * 1000, 2),
                   "steady_over_eager": round(r["steady_s"] / eager, 3) if eager else None,
                   "equal_to_eager": r["equal_to_eager"]}
               for v, r in results.items() if "error" not in r}
    write_report(a.out, "generation", {"tokens": a.tokens, "generations": a.generations, "model": MODEL,
                                       "load_before": os.getloadavg(), "against": a.against}, summary,
                 results=results)


if __name__ == "__main__":
    main()
