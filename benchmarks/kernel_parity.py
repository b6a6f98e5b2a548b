"""Does thunderlab hand Inductor what torch.compile hands it? The generated kernels of both, per zoo model.

For each zoo case and each --modes step (inference: eval, no_grad, a forward; train: forward and backward),
the model is compiled twice on its own copy: with ``thunderlab.jit`` (the default pipeline, its kernels built
before the first call: ``tiered=False``) and with ``torch.compile`` (Inductor, its defaults, through a backend
that is Inductor's own ``compile_fx`` and only keeps each module it writes). Each Inductor module is reduced to
what runs: the sequence of its calls (each C++ kernel by its position, each library call by its op) and each C++
kernel's body, with what names it or only reorders its terms taken out (kernel names, the profiler mark
thunderlab's kernels carry, comments, the order of a commutative ``+`` or ``*``). A case's verdict:

  same            the same calls in the same order and the same kernel bodies: the steady-state step differs only
                  by what runs around the kernels (guards, wrappers) and by the machine's noise;
  same calls      the same calls, some kernel bodies differ (the count says how many);
  different       other calls (the counts of kernels and library calls say how).

A training step's forward and backward are cut where each compiler's partitioner chose (the values saved for
the backward), so training cases compare counts more than code. The verdicts explain the zoo benchmark's
steady-state ratios (benchmarks/zoo.py): where the code is the same, thunderlab / torch.compile is 1 within noise.

Run:  .venv/bin/python benchmarks/kernel_parity.py [--models bert,resnet] [--modes inference,train]
      [--out benchmarks/results/kernel_parity.json]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import sys
import warnings
from pathlib import Path

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/thunderlab_bench_inductor_cache")
# AOTAutograd's cache hands back a compiled graph without Inductor's inner compile, which is where the module's
# source is read: when thunderlab's region and torch.compile's graph are the same graph, the second would be a hit
os.environ["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]

import thunderlab  # noqa: E402
from benchmarks.zoo import _step  # noqa: E402  (one step, as the timing benchmark takes it)
from tests.zoo.models import ZOO, attn_implementations, inputs, pair  # noqa: E402

KINDS = ("inference", "train")
_KERNEL_DEF = re.compile(r"^(cpp_fused_\w+) = async_compile\.cpp_pybinding\(\[[^\]]*\], r'''\n(.*?)\n'''\)",
                         re.S | re.M)
_COMMUTATIVE = re.compile(r"^(\s*auto tmp\d+ = )(\w+) ([+*]) (\w+);$")
_CALL = re.compile(r"^\s+(?:\w+ = )?(cpp_fused_\w+|extern_kernels\.\w+|torch\.ops\.[\w.]+)\(")


def _body(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if "RAIIAtenRecordFunctionHandle" in line or line.startswith("#include") or line.strip().startswith("//"):
            continue
        m = _COMMUTATIVE.match(line)
        if m:
            a, b = sorted((m.group(2), m.group(4)))
            line = f"{m.group(1)}{a} {m.group(3)} {b};"
        lines.append(line)
    return "\n".join(lines)


def reduce_module(src: str) -> tuple[list[str], list[str]]:
    """(the calls of the module's ``call`` in order, each C++ kernel as ``kernelN``; the kernels' bodies in the
    order first called), named and ordered so that two modules computing alike reduce alike."""
    bodies = {name: _body(text) for name, text in _KERNEL_DEF.findall(src)}
    start = src.find("def call(")
    calls, order = [], {}
    for line in src[start:].splitlines()[1:] if start >= 0 else ():
        if line and not line.startswith(" "):
            break
        m = _CALL.match(line)
        if not m:
            continue
        name = m.group(1)
        if name in bodies:
            order.setdefault(name, len(order))
            calls.append(f"kernel{order[name]}")
        else:
            calls.append(name.removeprefix("extern_kernels.").removeprefix("torch.ops."))
    kernels = [re.sub(r"\bcpp_fused_\w+", "kernel", bodies[n]) for n in sorted(order, key=order.get)]
    return calls, kernels


def _counts(calls: list[str]) -> dict:
    kernels = sum(c.startswith("kernel") for c in calls)
    return {"kernels": kernels, "library_calls": len(calls) - kernels}


def verdict(ours: list[str], theirs: list[str]) -> dict:
    """Compare two lists of Inductor modules (each compiler's, in the order they were made)."""
    a = [reduce_module(s) for s in ours]
    b = [reduce_module(s) for s in theirs]
    calls_a, calls_b = [c for m in a for c in m[0]], [c for m in b for c in m[0]]
    out = {"thunderlab": {"modules": len(a), **_counts(calls_a)},
           "torch.compile": {"modules": len(b), **_counts(calls_b)}}
    # modules are matched in order; a kernel's number restarts in each module, so the calls are compared per module
    if len(a) != len(b) or any(x[0] != y[0] for x, y in zip(a, b)):
        out["verdict"] = "different"
        return out
    differ = sum(p != q for x, y in zip(a, b) for p, q in zip(x[1], y[1]))
    out["verdict"] = "same" if not differ else "same calls"
    out["kernel_bodies_differing"] = differ
    return out


class Capture:
    """torch.compile's Inductor backend (``compile_fx``), keeping the source of each module it writes."""

    def __init__(self):
        self.modules: list[str] = []

    def __call__(self, gm, example_inputs):
        from torch._inductor.compile_fx import compile_fx, compile_fx_inner

        def inner(g, inputs, **kwargs):
            out = compile_fx_inner(g, inputs, **kwargs)
            code = getattr(out, "source_code", None)
            if code:
                self.modules.append(code)
            return out

        with torch._functorch.config.patch(enable_autograd_cache=False):  # a hit would skip ``inner``
            return compile_fx(gm, example_inputs, inner_compile=inner)


def thunderlab_modules(fn) -> list[str]:
    """The Inductor module of each of a jitted function's regions, in the order its records were made."""
    out = []
    for record in fn.records:
        for region in thunderlab.session(record).snapshot().values():
            if region["executor"] == "inductor" and region["code"]:
                out.append(region["code"])
    return out


def compare(entry, attn, train: bool) -> dict:
    model, _ = pair(entry, attn)
    model.train(train)
    x = inputs(entry, model, batch=4, length=16)
    ours = thunderlab.jit(model, tiered=False, race=False)
    for _ in range(2):  # the second call compiles again where the first changed the model (a classifier's config)
        _step(ours, model, x, train)
    theirs_model, _ = pair(entry, attn)
    theirs_model.train(train)
    capture = Capture()
    theirs = torch.compile(theirs_model, backend=capture)
    for _ in range(2):
        _step(theirs, theirs_model, x, train)
    return verdict(thunderlab_modules(ours), capture.modules)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="", help="comma-separated zoo names (default: all)")
    ap.add_argument("--modes", default="inference,train")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/kernel_parity.json"))
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in modes if m not in KINDS]
    if bad:
        ap.error(f"--modes: {', '.join(bad)} not among {', '.join(KINDS)}")
    names = [n for n in args.models.split(",") if n]
    known = {e.name for e in ZOO}
    if set(names) - known:
        ap.error(f"--models: {', '.join(sorted(set(names) - known))} not in the zoo ({', '.join(sorted(known))})")
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    rows = []
    for entry in ZOO:
        if names and entry.name not in names:
            continue
        attn = attn_implementations(entry)[-1]  # sdpa where the model offers it, as the zoo benchmark's default
        row = {"case": f"{entry.name}-{attn}" if attn else entry.name, "model": entry.name}
        for mode in modes:
            try:
                row[mode] = compare(entry, attn, mode == "train")
            except Exception as e:  # noqa: BLE001 - one model's failure is its row's, the run goes on
                row[mode] = {"verdict": "error", "error": f"{type(e).__name__}: {str(e)[:300]}"}
            torch._dynamo.reset()
        print(row["case"].ljust(22), "  ".join(f"{m}: {row[m]['verdict']}" + (
            f" ({row[m]['kernel_bodies_differing']} kernel bodies differ)" if row[m].get("kernel_bodies_differing")
            else "") for m in modes), flush=True)
        rows.append(row)
        summary = {m: {v: sum(r[m]["verdict"] == v for r in rows if m in r)
                       for v in ("same", "same calls", "different", "error")} for m in modes}
        Path(args.out).write_text(json.dumps({
            "meta": {"date": datetime.date.today().isoformat(), "torch": torch.__version__,
                     "python": platform.python_version(), "pipeline": thunderlab.DEFAULT_PIPELINE,
                     "command": " ".join(sys.argv)},
            "summary": summary, "rows": rows}, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
