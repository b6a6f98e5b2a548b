"""Where thunderlab's inference step loses to torch.compile's on a zoo model, kernels apart from per-call Python.

For each --models zoo model (tests/zoo/models.py, transformers' default attention, batch 4, sequence 16), in
one process, on one thread, eval and no_grad, each on its own copy of the model (same weights):
  eager              the model itself;
  thunderlab         thunderlab.jit(model, race=--race), waited for until its regions' kernels are built;
  thunderlab-before  the same, with its direct calls binding a call's arguments by the signature that
                     ``inspect.signature`` shows by default: for a forward under a ``functools.wraps``
                     decorator (Hugging Face's ``can_return_tuple``, ``check_model_inputs``), the wrapped
                     forward's parameters, not those of the wrapper whose frame Dynamo compiled. Its guards
                     then never pass on those locals and every call went through Dynamo as well (the code
                     before the fix; only that binding differs);
  torch.compile      torch.compile(model), Inductor's defaults.
Every step's output is checked against eager's; then --rounds rounds time one step of each, in a new order
each round, by the CPU time of the thread (time.thread_time); ratios are paired medians with 95% bootstrap
intervals (benchmarks/paired.py). What each compiler handed Inductor is compared by the module Inductor
generated: thunderlab's region source against the graph of a separate torch.compile whose backend is
Inductor's compile_fx (what the "inductor" backend calls), kept for its source only: its kernels, the calls of
each, extern calls (mm/addmm/convolution/sdpa), and the lines of the two modules' ``call`` that differ.
Each model runs in a process of its own. Writes --out (default benchmarks/results/zoo_gap.json).

Run:  .venv/bin/python benchmarks/zoo_gap.py [--models vit,llama] [--rounds 200] [--race] [--out PATH]
"""
from __future__ import annotations

import argparse
import copy
import datetime
import difflib
import inspect
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/thunderlab_bench_inductor_cache")

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]

import thunderlab  # noqa: E402
from benchmarks.paired import describe, paired_ratio  # noqa: E402
from tests.zoo.models import ZOO, inputs, pair  # noqa: E402

VARIANTS = ("eager", "thunderlab", "thunderlab-before", "torch.compile")


def inductor_module_summary(source: str) -> dict:
    """Kernels and calls of one Inductor output module (its ``call`` function's body)."""
    body = source[source.index("def call(self, args)"):] if "def call(self, args)" in source else source
    body = body.split("\ndef benchmark_compiled_module", 1)[0]
    calls: dict[str, int] = {}
    for name in re.findall(r"\b(extern_kernels\.\w+|torch\.ops\.aten\.\w+)(?:\.default)?\(", body):
        calls[name] = calls.get(name, 0) + 1
    return {"kernels": len(re.findall(r"^(\w+) = async_compile\.\w+\(", source, flags=re.M)),
            "kernel_calls": len(re.findall(r"^\s+(cpp_fused_\w+|triton_\w+)\(", body, flags=re.M)),
            "extern_calls": dict(sorted(calls.items())),
            "clones": len(re.findall(r"\.clone\(|\.contiguous\(", body))}


def normalized_call(source: str) -> list[str]:
    """The ``call`` body with graph argument numbers and graph names blanked, comments dropped."""
    body = source[source.index("def call(self, args)"):].split("\ndef benchmark_compiled_module", 1)[0]
    lines = [re.sub(r"\s+#.*", "", re.sub(r"graph_\d+_", "", re.sub(r"arg\d+_1", "argN", ln))) for ln in
             body.splitlines()]
    return [ln for ln in lines if ln.strip()]


def compile_fx_source(model, kw) -> list[str]:
    """The modules Inductor generates for torch.compile(model)'s graphs (a copy compiled for its source only)."""
    from torch._inductor.compile_fx import compile_fx

    graphs = []

    def backend(gm, example_inputs):
        compiled = compile_fx(gm, example_inputs)
        graphs.append(compiled)
        return compiled

    with torch.no_grad():
        torch.compile(copy.deepcopy(model), backend=backend)(**kw)
    return [s for s in (getattr(g, "source_code", None) for g in graphs) if s]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="vit")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--race", action="store_true", help="thunderlab.jit's race=True (its default) instead of False")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/zoo_gap.json"))
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    by_name = {e.name: e for e in ZOO}
    out = {"meta": {"when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                    "torch": torch.__version__, "threads": 1, "clock": "time.thread_time", "batch": 4,
                    "length": 16, "rounds": a.rounds, "race": a.race,
                    "inductor_cache": os.environ["TORCHINDUCTOR_CACHE_DIR"]}, "models": {}}
    names = [m for m in a.models.split(",") if m]
    for name in names:
        if name not in by_name:
            raise SystemExit(f"zoo_gap.py: no zoo model {name!r}; valid: {', '.join(sorted(by_name))}")
    if len(names) == 1:
        out["models"][names[0]] = run(by_name[names[0]], a.rounds, a.race)
        Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
        return 0
    # one process a model: Hugging Face's forward decorators share one wrapper's code object, whose TorchDynamo
    # cache entries (every compile of every model) would reach Dynamo's recompile limit within a few models
    for name in names:
        part = Path(a.out).with_suffix(f".{name}.part.json")
        cmd = [sys.executable, __file__, "--models", name, "--rounds", str(a.rounds), "--out", str(part)]
        subprocess.run(cmd + (["--race"] if a.race else []), check=True)
        out["models"][name] = json.loads(part.read_text())["models"][name]
        part.unlink()
        Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


def run(entry, rounds: int, race: bool) -> dict:
    load_before = os.getloadavg()
    model, ref = pair(entry)
    copies = {v: copy.deepcopy(model).eval() for v in VARIANTS[1:]}
    ref.eval()
    kw = inputs(entry, ref, batch=4, length=16)
    fns = {"eager": ref, "thunderlab": thunderlab.jit(copies["thunderlab"], race=race),
           "thunderlab-before": thunderlab.jit(copies["thunderlab-before"], race=race),
           "torch.compile": torch.compile(copies["torch.compile"])}
    before = fns["thunderlab-before"].direct
    wrapped = inspect.signature(before.func)  # follows __wrapped__, as the code before the fix did
    before._signature = lambda: wrapped
    with torch.no_grad():
        for f in fns.values():
            f(**kw)
        for v in ("thunderlab", "thunderlab-before"):
            for r in fns[v].records:
                thunderlab.session(r).wait()
        for _ in range(20):
            for f in fns.values():
                f(**kw)
        expect = ref(**kw).logits
        for v, f in fns.items():
            torch.testing.assert_close(f(**kw).logits, expect, atol=1e-4, rtol=1e-4, msg=lambda m, v=v: f"{v}: {m}")
    times = {v: [] for v in fns}
    rng = random.Random(0)
    with torch.no_grad():
        for _ in range(rounds):
            order = list(fns)
            rng.shuffle(order)
            for v in order:
                t0 = time.thread_time()
                fns[v](**kw)
                times[v].append(time.thread_time() - t0)
    pairs = [("thunderlab", "torch.compile"), ("thunderlab-before", "torch.compile"),
             ("thunderlab", "thunderlab-before"), ("thunderlab", "eager"), ("torch.compile", "eager")]
    ratios = {f"{x} / {y}": paired_ratio(times[x], times[y]) for x, y in pairs}
    regions = {}  # "record index/region": what runs it
    sources = []  # each different module once (a recompile for a changed Python value makes the same regions)
    for i, r in enumerate(fns["thunderlab"].records):
        for rname, runner in thunderlab.session(r).regions.items():
            regions[f"{i}/{rname}"] = {"version": runner.version, "compiled_in": runner.compiled_in}
            sources.extend(src for src in runner.source if src not in sources)
    theirs = compile_fx_source(ref, kw)
    ours_calls = [normalized_call(s) for s in sources if "def call(self, args)" in s]
    theirs_calls = [normalized_call(s) for s in theirs if "def call(self, args)" in s]
    differing = None
    if len(ours_calls) == 1 and len(theirs_calls) == 1:  # one graph each: their lines compare one for one
        diff = difflib.unified_diff(theirs_calls[0], ours_calls[0], lineterm="", n=0)
        differing = [ln for ln in diff if ln[:1] in "+-" and ln[:3] not in ("+++", "---")]
    row = {"median_ms": {v: 1e3 * statistics.median(t) for v, t in times.items()},
           "ratios": ratios,
           "direct_calls": {v: fns[v].cache_info for v in ("thunderlab", "thunderlab-before")},
           "why_not_direct_before": before.why_not,
           "regions": regions,
           "inductor_code": {"thunderlab": [inductor_module_summary(s) for s in sources],
                             "torch.compile": [inductor_module_summary(s) for s in theirs],
                             "call_lines_differing": differing},
           "loadavg_before": load_before, "loadavg_after": os.getloadavg()}
    print(entry.name, {k: describe(p) for k, p in ratios.items()}, flush=True)
    return row


if __name__ == "__main__":
    raise SystemExit(main())
