"""Where a training step's time goes, thunderlab against torch.compile: one zoo model, op by op.

For each --models zoo model: eager, ``thunderlab.jit`` (the default pipeline, timed once every region's kernel is
built and every race decided) and ``torch.compile`` (Inductor, its defaults), each on its own copy, warmed up,
then timed in interleaved rounds (paired ratios, CPU time on one thread, five steps a round), then each compiler's
step profiled over --steps steps (``torch.profiler``, CPU). The profile is summed by kind of event, by self CPU time:

  * aten         PyTorch's operators (``aten::``): the library calls both compilers make (convolutions and their
                 backwards, matrix products) and the tensors they make;
  * compiled     the compiled code and what wraps it: Inductor's C++ kernels (thunderlab's carry a profiler mark
                 each, torch.compile's run inside its graph's ``## Call CompiledFxGraph`` event) and the
                 autograd.Function of each (thunderlab's ``ProgramFunction``, torch.compile's ``CompiledFunction``);
  * other        the rest: the autograd engine's nodes, gradient accumulation, TorchDynamo's cache lookup (the
                 guard check, torch.compile only; thunderlab's direct calls check the guards outside any event).

and per event name, the costliest first, both compilers side by side (counts and self CPU microseconds per step).
Profiling adds a cost per event, more for thunderlab's marked kernels, so the paired ratio, not the profile, says
which step is faster; the profile says where the two differ.

Two more figures per model: ``guard_check_us``, thunderlab's guard check (TorchDynamo's guard tree, checked by its
direct calls) timed inside the unprofiled steps and alone, 2,000 checks in a row on the same call's locals; and
``first_call_s``, a training step's first call by TorchDynamo alone (the ``eager`` backend) and by ``thunderlab.jit``,
each on a new copy after ``torch._dynamo.reset()``, once a capture of another copy has paid Dynamo's one-time costs.

Run:  .venv/bin/python benchmarks/step_profile.py [--models mobilenet_v2,llama] [--rounds 15] [--steps 10]
      [--out benchmarks/results/step_profile.json]
"""
from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import platform
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/thunderlab_bench_inductor_cache")

COMPILED = ("graph_", "cpp_fused", "## Call", "ProgramFunction", "CompiledFunction")


def kind(name: str) -> str:
    if name.startswith(COMPILED) or "ProgramFunction" in name or "CompiledFunction" in name:
        return "compiled"
    return "aten" if name.startswith("aten::") else "other"


def measure(name: str, rounds: int, steps: int) -> dict:
    import torch
    from torch.profiler import profile

    import thunderlab
    from benchmarks.paired import interleaved, paired_ratio
    from benchmarks.zoo import _step, _unsettled, _wait
    from tests.zoo.models import BY_NAME, inputs, pair

    entry = BY_NAME[name]
    row = {"first_call_s": first_calls(entry)}
    variants = {}
    for v in ("eager", "thunderlab", "torch.compile"):
        model, _ = pair(entry, None)
        model.train()
        fn = model if v == "eager" else thunderlab.jit(model) if v == "thunderlab" else torch.compile(model)
        variants[v] = (fn, model)
    x = inputs(entry, variants["eager"][1], batch=4, length=16)
    for v, (fn, model) in variants.items():
        for _ in range(40):  # until every region's kernel is built and every race decided
            _step(fn, model, x, True)
            if v == "thunderlab":
                _wait(fn)
                if not _unsettled(fn):
                    break
    checks = _CheckTimer(variants["thunderlab"][0])
    times = interleaved({v: functools.partial(_step, fn, model, x, True) for v, (fn, model) in variants.items()},
                        rounds, calls=5)
    ours = variants["thunderlab"][1]
    row["guard_check_us"] = checks.result(type(ours).forward.__code__, ours, x)
    row |= {"ratios": {"thunderlab / torch.compile": paired_ratio(times["thunderlab"], times["torch.compile"]),
                      "thunderlab / eager": paired_ratio(times["thunderlab"], times["eager"]),
                      "torch.compile / eager": paired_ratio(times["torch.compile"], times["eager"])}}
    tables = {}
    for v in ("thunderlab", "torch.compile"):
        fn, model = variants[v]
        with profile() as prof:
            for _ in range(steps):
                _step(fn, model, x, True)
        tables[v] = {e.key: (e.count / steps, e.self_cpu_time_total / steps) for e in prof.key_averages()}
    row["ms_per_step_by_kind"] = {
        v: {k: round(sum(us for n, (_, us) in t.items() if kind(n) == k) / 1e3, 3)
            for k in ("aten", "compiled", "other")}
        for v, t in tables.items()}

    def cost(n):
        return -max(t.get(n, (0, 0))[1] for t in tables.values())

    names = sorted(set(tables["thunderlab"]) | set(tables["torch.compile"]), key=cost)
    row["events"] = [{"name": n, "kind": kind(n),
                      **{f"{v}_count": round(tables[v].get(n, (0, 0))[0], 1) for v in tables},
                      **{f"{v}_us": round(tables[v].get(n, (0, 0))[1], 1) for v in tables}} for n in names[:40]]
    return row


def first_calls(entry) -> dict:
    """Seconds of a training step's first call: TorchDynamo alone, and thunderlab.jit (see the module's docstring)."""
    import gc
    import time

    import torch

    import thunderlab
    from benchmarks.zoo import _step
    from tests.zoo.models import inputs, pair

    def copy():
        model, _ = pair(entry, None)
        return model.train()

    model = copy()
    x = inputs(entry, model, batch=4, length=16)
    _step(torch.compile(model, backend="eager"), model, x, True)  # Dynamo's one-time costs
    out = {}
    for name, make in (("dynamo_alone", lambda m: torch.compile(m, backend="eager")), ("thunderlab", thunderlab.jit)):
        torch._dynamo.reset()
        gc.collect()
        model = copy()
        fn = make(model)
        t0 = time.perf_counter()
        _step(fn, model, x, True)
        out[name] = round(time.perf_counter() - t0, 3)
    torch._dynamo.reset()
    return out


class _CheckTimer:
    """Times each guard check thunderlab's direct calls make on ``fn`` from now on (see ``result``)."""

    def __init__(self, fn):
        import time

        self.total, self.count = 0.0, 0
        direct, known = fn.direct, fn.direct._known

        def timed_known(entry):
            code, check, ours, run, quiet = known(entry)

            def timed(frame_locals):
                t0 = time.perf_counter()
                ok = check(frame_locals)
                self.total += time.perf_counter() - t0
                self.count += 1
                return ok

            return code, timed, ours, run, quiet

        direct._known = timed_known

    def result(self, code, model, x) -> dict:
        from benchmarks.guard_cost import _check_time, frame_locals

        found = _check_time(code, frame_locals(model, code, x), 2000)
        return {"in_steps": round(1e6 * self.total / max(self.count, 1), 1), "checks_in_steps": self.count,
                "alone": round(1e6 * found[1], 1) if found else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="mobilenet_v2,llama")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "step_profile.json"))
    a = ap.parse_args()
    import torch

    from benchmarks.zoo import _names
    from tests.zoo.models import ZOO

    torch.set_num_threads(1)
    load_before = os.getloadavg()
    rows = {}
    for name in _names(a.models, [e.name for e in ZOO], "model"):
        rows[name] = measure(name, a.rounds, a.steps)
        r = rows[name]
        q = r["ratios"]["thunderlab / torch.compile"]
        print(f"{name}: thunderlab / torch.compile {q['median']:.3f} [{q['lo95']:.3f}, {q['hi95']:.3f}]; "
              f"ms per profiled step by kind {r['ms_per_step_by_kind']}; guard check us {r['guard_check_us']}; "
              f"first call s {r['first_call_s']}", flush=True)
    out = {"meta": {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "torch": torch.__version__,
                    "python": platform.python_version(), "threads": 1, "rounds": a.rounds, "profiled_steps": a.steps,
                    "load_average_at_start": load_before, "load_average_at_end": os.getloadavg()},
           "models": rows}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
