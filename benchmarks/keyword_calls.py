"""Calls made with keywords, as Hugging Face models are called: direct calls binding the arguments with
``thunderlab.frontend.dispatch.Binder`` against ``inspect.Signature.bind`` (what they used before).

Two parts. ``bind``: the binding alone, per call, for a forward of Hugging Face's shape (ten parameters and
``**kwargs``) called with three keywords. ``models``: one ``thunderlab.jit`` of each zoo model, waited for until
every region's kernel is built and raced, then timed over interleaved rounds with its direct calls binding by
``Binder`` and, in turn, leaving every binding to ``inspect`` (the same compiled model both ways: two copies of a
model differ by several percent from where their memory lies), beside eager and ``torch.compile`` (--calls steps
of each in a row per round, paired ratios of the CPU time on one thread, batch 4, the zoo's inputs). A forward
written ``(self, *args, **kwargs)`` (transformers' decorated forwards: BERT, T5) binds nothing either way: its
binder / inspect ratio is the noise of the measurement.

Run:  .venv/bin/python benchmarks/keyword_calls.py [--models deberta_v2,bert] [--modes inference,train]
      [--rounds 40] [--calls 5] [--out benchmarks/results/keyword_calls.json]
"""
from __future__ import annotations

import argparse
import datetime
import functools
import inspect
import json
import os
import platform
import random
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/thunderlab_bench_inductor_cache")

from benchmarks.paired import describe, interleaved, paired_ratio  # noqa: E402

VARIANTS = ("eager", "binder", "inspect", "torch.compile")


def _forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
             inputs_embeds=None, labels=None, output_attentions=None, output_hidden_states=None, return_dict=None,
             **kwargs):
    pass


def time_binding(n: int = 100_000) -> dict:
    """Microseconds per binding of one keyword call, each way (best of three runs of ``n``)."""
    from thunderlab.frontend.dispatch import Binder

    signature = inspect.signature(_forward)
    binder = Binder(_forward.__code__, _forward.__defaults__, _forward.__kwdefaults__)
    kwargs = {"input_ids": 1, "attention_mask": 2, "labels": 3}

    def with_inspect():
        bound = signature.bind("model", **kwargs)
        bound.apply_defaults()
        return bound.arguments, bound.args, bound.kwargs

    def with_binder():
        return binder.bind(("model",), kwargs)

    assert with_binder() == with_inspect()
    out = {}
    for name, fn in (("inspect", with_inspect), ("binder", with_binder)):
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            best = min(best, (time.perf_counter() - t0) / n)
        out[f"{name}_us"] = round(best * 1e6, 3)
    return out


def time_model(model: str, train: bool, rounds: int, calls: int) -> dict:
    import torch

    import thunderlab
    from benchmarks.zoo import _make, _step, _wait
    from tests.zoo.models import ZOO, inputs, pair

    entry = next(e for e in ZOO if e.name == model)
    fns = {}
    for v in ("eager", "binder", "torch.compile"):
        m, _ = pair(entry, None)
        m.train(train)
        fns[v] = (thunderlab.jit(m) if v == "binder" else _make(v, m), m)
    fns["inspect"] = fns["binder"]
    x = inputs(entry, fns["eager"][1], batch=4, length=16)
    for v in ("eager", "binder", "torch.compile"):
        fn, m = fns[v]
        for _ in range(12):  # the first call compiles; then every region's kernel is built and raced
            _step(fn, m, x, train)
            if v == "binder":
                _wait(fn)
        for _ in range(20):
            _step(fn, m, x, train)
    direct = fns["binder"][0].direct
    binder = direct.binder()
    binds = {"binder": binder.bind, "inspect": lambda args, kwargs: None}  # None: every binding left to inspect
    hits = {"binder": 0, "inspect": 0}

    def run(v):
        fn, m = fns[v]
        if v not in binds:
            return functools.partial(_step, fn, m, x, train)

        def with_binding():  # the same compiled model, binding by this variant's way
            binder.bind = binds[v]
            before = direct.hits
            _step(fn, m, x, train)
            hits[v] += direct.hits - before
        return with_binding

    times = interleaved({v: run(v) for v in VARIANTS}, rounds, calls=calls)
    del binder.bind  # the class's method again
    torch._dynamo.reset()
    return {"median_ms": {v: round(1e3 * statistics.median(t), 4) for v, t in times.items()},
            "direct_calls": hits,
            "ratios": {"binder / inspect": paired_ratio(times["binder"], times["inspect"]),
                       "binder / torch.compile": paired_ratio(times["binder"], times["torch.compile"]),
                       "inspect / torch.compile": paired_ratio(times["inspect"], times["torch.compile"]),
                       "binder / eager": paired_ratio(times["binder"], times["eager"])}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="deberta_v2,deberta,bert,llama,t5")
    ap.add_argument("--modes", default="inference,train")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "keyword_calls.json"))
    args = ap.parse_args()
    if args.rounds < 1 or args.calls < 1:
        raise SystemExit(f"--rounds and --calls must be at least 1 (got {args.rounds} and {args.calls})")
    import torch

    from benchmarks.zoo import _names
    from tests.zoo.models import ZOO

    torch.set_num_threads(1)
    random.seed(0)
    modes = _names(args.modes, ["inference", "train"], "--modes")
    models = _names(args.models, [e.name for e in ZOO], "--models")
    out = {"meta": {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                    "torch": torch.__version__, "python": platform.python_version(), "cpus": os.cpu_count(),
                    "threads": 1, "rounds": args.rounds, "calls_per_round": args.calls,
                    "load_average_at_start": os.getloadavg()},
           "bind": time_binding(), "models": {}}
    print("binding one keyword call:", out["bind"], flush=True)
    for model in models:
        for mode in modes:
            row = time_model(model, mode == "train", args.rounds, args.calls)
            out["models"][f"{model} {mode}"] = row
            print(f"{model:12s} {mode:9s} " + ", ".join(f"{k} {describe(p)}" for k, p in row["ratios"].items()),
                  flush=True)
            out["meta"]["load_average_at_end"] = os.getloadavg()
            with open(args.out, "w") as f:
                json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
