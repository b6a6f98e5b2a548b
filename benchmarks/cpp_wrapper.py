"""Inductor's C++ wrapper, for each compiler: what calling the kernels from C++ instead of Python saves a step.

Inductor writes each graph's module with Python lines that call its kernels and library functions one at a time
(allocating each buffer, checking each input's strides); with ``cpp_wrapper`` those calls are one compiled C++
function. thunderlab races that second module against the first in every tiered CPU region (version
``inductor-cpp``); torch.compile leaves it off unless asked (``options={"cpp_wrapper": True}``). Per --models zoo
model and --modes step, on its own copy each, in the same process and interleaved rounds (paired ratios, CPU time
on one thread, five steps a round):

  * eager                 the model itself;
  * thunderlab            thunderlab.jit(model): the default, every region racing torch, Inductor's module and the
                          one with the C++ wrapper;
  * thunderlab-python     the same with the C++ wrapper left out (THUNDERLAB_CPP_WRAPPER=0 while its regions are
                          bound, so they race torch and Inductor's module only);
  * torch.compile         Inductor's defaults (its Python wrapper);
  * torch.compile-cpp     torch.compile(model, options={"cpp_wrapper": True}).

thunderlab's two variants are timed once every race is decided, and each region's race verdict is kept: the
fastest call of each version, from the race itself (``why``). First calls are wall time (torch.compile-cpp's
includes compiling its C++ wrapper, which thunderlab does in its worker process, in the background).

Run:  .venv/bin/python benchmarks/cpp_wrapper.py [--models falcon,whisper,mobilenet_v2] [--modes train]
      [--rounds 20] [--out benchmarks/results/cpp_wrapper.json]
"""
from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/thunderlab_bench_inductor_cache")

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]

import thunderlab  # noqa: E402
from benchmarks.paired import describe, interleaved, paired_ratio  # noqa: E402
from benchmarks.zoo import _step, _unsettled, _wait, live_regions  # noqa: E402
from tests.zoo.models import ZOO, attn_implementations, inputs, pair  # noqa: E402

VARIANTS = ("eager", "thunderlab", "thunderlab-python", "torch.compile", "torch.compile-cpp")
PAIRS = (("thunderlab", "thunderlab-python"), ("torch.compile-cpp", "torch.compile"), ("thunderlab", "torch.compile"),
         ("thunderlab-python", "torch.compile"), ("thunderlab", "torch.compile-cpp"))


def _make(name: str, model):
    if name == "eager":
        return model
    if name.startswith("thunderlab"):
        return thunderlab.jit(model)
    return torch.compile(model, options={"cpp_wrapper": True} if name == "torch.compile-cpp" else None)


def _bound_as(name: str):
    """thunderlab-python's every untimed call runs with THUNDERLAB_CPP_WRAPPER=0, read when a region is bound (at
    its first call), so a record a later call compiles is bound the same way; the other variants' as they are."""
    return mock.patch.dict(os.environ, {"THUNDERLAB_CPP_WRAPPER": "0"} if name == "thunderlab-python" else {})


def _races(fn) -> dict:
    return {f"{i}:{name}": {"running": region["running"], "why": (region.get("race") or {}).get("why")}
            for i, name, region in live_regions(fn)}


def time_model(entry, attn, train: bool, rounds: int) -> dict:
    variants = {}
    for name in VARIANTS:
        model, _ = pair(entry, attn)
        model.train(train)
        variants[name] = (_make(name, model), model)
    x = inputs(entry, variants["eager"][1], batch=4, length=16)
    first, races = {}, {}
    for name, (fn, model) in variants.items():
        with _bound_as(name):
            t0 = time.perf_counter()
            _step(fn, model, x, train)
            first[name] = time.perf_counter() - t0
            for _ in range(3):
                _step(fn, model, x, train)
            if name.startswith("thunderlab"):
                for _ in range(200):  # until every record's kernels are built and every race decided
                    _wait(fn)
                    if not _unsettled(fn):
                        break
                    _step(fn, model, x, train)
                races[name] = _races(fn)
    times = interleaved({n: functools.partial(_step, fn, model, x, train) for n, (fn, model) in variants.items()},
                        rounds, calls=5, clock=time.thread_time)
    out = {"first_call_s": first, "races": races,
           "median_ms": {n: 1e3 * statistics.median(t) for n, t in times.items()}, "ratios": {}}
    for name in VARIANTS[1:]:
        out["ratios"][f"{name} / eager"] = paired_ratio(times[name], times["eager"])
    for a, b in PAIRS:
        out["ratios"][f"{a} / {b}"] = paired_ratio(times[a], times[b])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="falcon,whisper,mobilenet_v2,bert,resnet,llama")
    ap.add_argument("--modes", default="train", help="inference, train or both (comma-separated)")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "cpp_wrapper.json"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.environ.setdefault("THUNDERLAB_EXECUTORS", "inductor+torch")
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    entries = {e.name: e for e in ZOO}
    unknown = [n for n in names if n not in entries]
    if unknown:
        raise SystemExit(f"unknown zoo models: {', '.join(unknown)}; valid: {', '.join(entries)}")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if set(modes) - {"inference", "train"}:
        raise SystemExit(f"--modes takes inference and train, not {args.modes!r}")
    rows = []
    for n in names:
        entry = entries[n]
        attn = attn_implementations(entry)[-1]  # transformers' default
        row = {"model": n, "attn": attn, "load_average_before": os.getloadavg()}
        for mode in modes:
            row[mode] = time_model(entry, attn, mode == "train", args.rounds)
            r = row[mode]["ratios"]
            print(f"{n} {mode}: thunderlab / thunderlab-python {describe(r['thunderlab / thunderlab-python'])}; "
                  f"torch.compile-cpp / torch.compile {describe(r['torch.compile-cpp / torch.compile'])}; "
                  f"thunderlab / torch.compile {describe(r['thunderlab / torch.compile'])}", flush=True)
        row["load_average_after"] = os.getloadavg()
        rows.append(row)
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "torch": torch.__version__, "python": platform.python_version(), "cpus": os.cpu_count(), "threads": 1,
            "rounds": args.rounds, "calls_per_round": 5, "clock": "cpu (time.thread_time)", "batch": 4, "length": 16,
            "inductor_cache": os.environ["TORCHINDUCTOR_CACHE_DIR"], "variants": list(VARIANTS)}
    Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
