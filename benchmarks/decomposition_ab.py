"""A decomposition thunderlab takes (``Tag.DECOMPOSE``) against the same call kept whole, on zoo models.

Some torch-level symbols are kept whole unless a case is better computed by their decomposition (average pooling
whose one window covers the map, adaptive pooling to 1 x 1: the map's mean). Whether that pays is measured here the
only fair way on a shared machine: two ``thunderlab.jit`` copies of one model in one process, one compiled with the
decomposition taken (the default) and one with the symbol's tag cleared while it compiled (so ``claim`` and
``autodiff`` keep the call whole, as before the tag), each waited for until every region's kernel was built and
raced, then timed over interleaved rounds beside eager and ``torch.compile`` (paired ratios of each step's CPU
time on one thread, batch 4, the zoo's inputs). Each model runs in a process of its own.

Run:  .venv/bin/python benchmarks/decomposition_ab.py --symbol adaptive_avg_pool2d --models resnet,mobilenet_v1
      [--modes inference,train] [--rounds 30] [--out benchmarks/results/decomposition_ab.json]
"""
from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/thunderlab_bench_inductor_cache")

from benchmarks.paired import describe, interleaved, paired_ratio  # noqa: E402

VARIANTS = ("eager", "decomposed", "whole", "torch.compile")


def run_one(symbol: str, model: str, mode: str, rounds: int, calls: int = 3) -> dict:
    import torch

    torch.set_num_threads(1)
    import thunderlab
    from benchmarks.zoo import _make, _step, _wait
    from tests.zoo.models import ZOO, inputs, pair
    from thunderlab.core.symbols import Tag
    from thunderlab.ops.declare import LTORCH

    sym = LTORCH[symbol]
    if Tag.DECOMPOSE not in sym.tags:
        raise SystemExit(f"--symbol {symbol}: its decomposition is not taken by default (no Tag.DECOMPOSE)")
    entry = next(e for e in ZOO if e.name == model)
    train = mode == "train"
    fns = {}
    for v in VARIANTS:
        m, _ = pair(entry, None)
        m.train(train)
        fns[v] = (thunderlab.jit(m) if v in ("decomposed", "whole") else _make(v, m), m)
    x = inputs(entry, fns["eager"][1], batch=4, length=16)
    tags = sym.tags
    for v, (fn, m) in fns.items():
        if v == "whole":
            object.__setattr__(sym, "tags", tags - {Tag.DECOMPOSE})  # read by claim and autodiff as it compiles
        try:
            for _ in range(12):  # the first call compiles (and captures every record the step makes)
                _step(fn, m, x, train)
                if v in ("decomposed", "whole"):
                    _wait(fn)
        finally:
            object.__setattr__(sym, "tags", tags)
        for _ in range(20):  # the race's calls, and warm-up
            _step(fn, m, x, train)
    times = interleaved({v: functools.partial(_step, fn, m, x, train) for v, (fn, m) in fns.items()}, rounds,
                        calls=calls)
    races = {v: [f"{i}/{n}: {reg['running']}: {(reg.get('race') or {}).get('why') or ''}"
                 for i, rec in enumerate(fns[v][0].records) for n, reg in thunderlab.session(rec).timings().items()]
             for v in ("decomposed", "whole")}  # which version each region runs, and why (the race's verdict)
    called = {}
    for v in ("decomposed", "whole"):
        names = set()
        for rec in fns[v][0].records:
            for t in rec.program.traces.values():
                names |= {s.sym.name for b in t.bound_symbols for s in (b.subsymbols or [b])}
        called[v] = sorted(n for n in names if symbol in n)
    return {"model": model, "mode": mode, "symbol": symbol, "rounds": rounds,
            "median_ms": {v: 1e3 * sorted(t)[len(t) // 2] for v, t in times.items()},
            "ratios": {"decomposed / whole": paired_ratio(times["decomposed"], times["whole"]),
                       "decomposed / torch.compile": paired_ratio(times["decomposed"], times["torch.compile"]),
                       "whole / torch.compile": paired_ratio(times["whole"], times["torch.compile"]),
                       "decomposed / eager": paired_ratio(times["decomposed"], times["eager"])},
            "calls_named_after_symbol": called, "regions": races, "load_average": os.getloadavg()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--symbol", required=True, help="a thunderlab symbol with Tag.DECOMPOSE (avg_pool2d, ...)")
    ap.add_argument("--models", required=True, help="comma-separated zoo names")
    ap.add_argument("--modes", default="inference,train")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "decomposition_ab.json"))
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        model, mode = a.one.split(":")
        print(json.dumps(run_one(a.symbol, model, mode, a.rounds)))
        return
    rows = []
    for model in a.models.split(","):
        for mode in a.modes.split(","):
            proc = subprocess.run([sys.executable, __file__, "--symbol", a.symbol, "--models", model, "--rounds",
                                   str(a.rounds), "--one", f"{model}:{mode}"], capture_output=True, text=True,
                                  timeout=1800)
            if proc.returncode != 0:
                print(f"{model} {mode}: failed: {proc.stderr.strip().splitlines()[-1:]}", flush=True)
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            rows.append(r)
            print(f"{model:18s} {mode:9s} " + "  ".join(f"{k} {describe(p)}" for k, p in r["ratios"].items()),
                  flush=True)
    report = {"benchmark": "benchmarks/decomposition_ab.py", "runs": []}
    if os.path.exists(a.out):
        with open(a.out) as f:
            report.update(json.load(f))
    import torch

    report["runs"] = [{"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                       "torch": torch.__version__, "symbol": a.symbol, "rows": rows}, *report["runs"]]
    with open(a.out, "w") as f:
        json.dump(report, f, indent=1)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
