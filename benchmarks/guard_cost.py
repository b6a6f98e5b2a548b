"""What TorchDynamo's guard check costs a call of a zoo model, beside the call itself.

Every call of a compiled model first checks the guards TorchDynamo recorded while capturing it (tensors' sizes and
strides, module attributes, the model's config, globals): torch.compile's frame hook does it, and so do
thunderlab's direct calls (the tree's C++ check, given the frame's locals). thunderlab's tree differs from
torch.compile's in one way: the guards on a config's attributes are one dict-version guard
(``thunderlab/frontend/attribute_guards.py``). Per zoo model, after ``thunderlab.jit`` has compiled it and built
its kernels: the tree's size (guards, those that read the model's config, dict-version guards), the check's time
alone (best of three runs of --checks calls, on the frame's locals of the timed call), and the inference step's
time (median of --steps calls); then the same for ``torch.compile`` (Inductor, its defaults): its tree's size and
check time on the same call. One thread. --recursive-dict-tags compiles with TorchDynamo's
``use_recursive_dict_tags_for_guards`` on (off by default: before CPython 3.12 its fast path may read freed memory;
thunderlab keeps Dynamo's default), which skips a module's guards while its ``__dict__`` is unchanged.

Run:  .venv/bin/python benchmarks/guard_cost.py [--models bert,llama] [--recursive-dict-tags]
      [--out benchmarks/results/guard_cost.json]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/thunderlab_bench_inductor_cache")

MODELS = "bert,deberta_v2,gpt2,llama,mixtral,t5,whisper,vit,resnet,mobilenet_v2"


def frame_locals(model, code, kwargs: dict) -> dict:
    """The locals of ``model.forward``'s frame at a call ``model(**kwargs)``, as Python fills them (bound as
    thunderlab's direct calls bind them)."""
    from thunderlab.frontend.dispatch import Binder

    forward = type(model).forward
    out = Binder(code, forward.__defaults__, forward.__kwdefaults__).bind((model,), kwargs)[0]
    for name, cell in zip(code.co_freevars, forward.__closure__ or ()):
        out[name] = cell.cell_contents
    return out


def _check_time(code, locals_: dict, checks: int):
    """(the guard manager of the cache entry of ``code`` whose guards pass on ``locals_``, seconds per check: best
    of three runs of ``checks`` checks), or None where none passes."""
    from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

    entries = list(_debug_get_cache_entry_list(code))
    passing = [e for e in entries if getattr(e.guard_manager, "root", e.guard_manager).check(locals_)]
    if not passing:
        return None
    manager = passing[0].guard_manager
    check = getattr(manager, "root", manager).check
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(checks):
            check(locals_)
        best = min(best, (time.perf_counter() - t0) / checks)
    return manager, best


def _tree(manager) -> dict:
    tree = str(manager)
    return {"guards": len(re.findall(r"\+- ([A-Z_]+):", tree)),
            "guards_on_config": sum(1 for line in tree.splitlines()
                                    if re.search(r"\+- [A-Z_]+:", line) and ".config" in line),
            "dict_version_guards": tree.count("DICT_VERSION:")}


def measure(name: str, checks: int, steps: int) -> dict:
    import torch

    import thunderlab
    from benchmarks.zoo import _wait
    from tests.zoo.models import ZOO, inputs, pair

    entry = next(e for e in ZOO if e.name == name)
    model, _ = pair(entry, None)
    model.eval()
    fn = thunderlab.jit(model)
    x = inputs(entry, model, batch=4, length=16)
    code = type(model).forward.__code__
    with torch.no_grad():
        for _ in range(12):
            fn(**x)
            _wait(fn)
        locals_ = frame_locals(model, code, x)
        found = _check_time(code, locals_, checks)
        if found is None:
            return {"error": "no cache entry's guards pass on the timed call's locals"}
        manager, best = found
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            fn(**x)
            times.append(time.perf_counter() - t0)
        row = {**_tree(manager), "check_us": round(best * 1e6, 2)}
        step = statistics.median(times)
        row.update(step_us=round(step * 1e6, 1), check_share_of_step=round(best / step, 4),
                   direct_calls=fn.cache_info["direct_calls"])
        del manager, fn
        torch._dynamo.reset()
        # torch.compile's tree for the same model and call (Inductor, its defaults)
        compiled = torch.compile(model)
        for _ in range(3):
            compiled(**x)
        found = _check_time(code, locals_, checks)
        if found is not None:
            tc = _tree(found[0])
            row["torch_compile"] = {"guards": tc["guards"], "guards_on_config": tc["guards_on_config"],
                                    "check_us": round(found[1] * 1e6, 2)}
            del found
    torch._dynamo.reset()
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=MODELS)
    ap.add_argument("--checks", type=int, default=3000)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--recursive-dict-tags", action="store_true",
                    help="compile with torch._dynamo.config.use_recursive_dict_tags_for_guards on")
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "guard_cost.json"))
    args = ap.parse_args()
    import torch

    torch._dynamo.config.use_recursive_dict_tags_for_guards = args.recursive_dict_tags

    from benchmarks.zoo import _names
    from tests.zoo.models import ZOO

    torch.set_num_threads(1)
    models = _names(args.models, [e.name for e in ZOO], "--models")
    out = {"meta": {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                    "torch": torch.__version__, "python": platform.python_version(), "threads": 1,
                    "recursive_dict_tags": args.recursive_dict_tags, "load_average_at_start": os.getloadavg()},
           "models": {}}
    for name in models:
        row = measure(name, args.checks, args.steps)
        out["models"][name] = row
        print(name, row, flush=True)
        out["meta"]["load_average_at_end"] = os.getloadavg()
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
