"""Robustness figures: memory over a long-lived process (many compiled functions dropped again, many
shapes of one function), the errors bad inputs get, and a random-pipeline fuzz campaign.

Writes benchmarks/results/robustness.json (merging into what other parts of the robustness
run wrote there). Figures are resident set size (RSS) from /proc, after a full collection.

    python benchmarks/robustness.py [--functions 1000] [--shapes 200] [--fuzz-examples 300] [--only PART]
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import time
import weakref
from pathlib import Path

import torch

os.environ.setdefault("THUNDERLAB_EXECUTORS", "torch")  # memory of records, not of Inductor's compile queue
import thunderlab  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "robustness.json"


def _statm_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def rss_mib(trim: bool = True) -> float:
    """Resident memory after a collection; with ``trim``, freed heap pages handed back first (glibc's
    malloc_trim(0): what is left is memory still in use or fragmented, not pages malloc merely keeps)."""
    gc.collect()
    if trim:
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except OSError:
            pass
    return _statm_mib()


def rss_both() -> tuple[float, float]:
    """(RSS before malloc_trim, RSS after it), after one collection."""
    untrimmed = rss_mib(trim=False)
    return untrimmed, rss_mib(trim=True)


def make_module(i: int, ns: dict) -> torch.nn.Module:
    """A small model with its own code object (as a new notebook cell makes) and a 1 MiB weight."""
    exec(f"class Cell{i}(torch.nn.Module):\n"
         f"    def __init__(self):\n"
         f"        super().__init__()\n"
         f"        self.w = torch.nn.Parameter(torch.randn(512, 512))\n"
         f"    def forward(self, x):\n"
         f"        return (x @ self.w).relu() + {i}\n", ns)
    return ns[f"Cell{i}"]()


def _compiler(kind: str):
    if kind == "thunderlab":
        return thunderlab.jit
    return lambda m: torch.compile(m, backend=lambda gm, example_inputs: gm.forward)  # TorchDynamo alone


def many_functions(n: int, kind: str = "thunderlab") -> dict:
    """Compile ``n`` fresh 1 MiB models (as notebook cells would), call each once, then drop them all."""
    compile_ = _compiler(kind)
    ns = {"torch": torch}
    x = torch.randn(8, 512)
    warm = compile_(make_module(n, ns))
    warm(x)
    del warm
    thunderlab.clear_records()
    start_untrimmed, start = rss_both()
    t0 = time.perf_counter()
    fns, weights = [], []
    for i in range(n):
        m = make_module(i, ns)
        weights.append(weakref.ref(m.w))
        j = compile_(m)
        j(x)
        fns.append(j)
    del m
    peak = rss_mib()
    kept = len(thunderlab.records())
    seconds = time.perf_counter() - t0
    del fns, j
    for i in range(n):
        del ns[f"Cell{i}"]
    dropped_untrimmed, dropped = rss_both()
    alive = sum(w() is not None for w in weights)
    thunderlab.clear_records()
    cleared = rss_mib()
    return {"compiler": kind, "functions": n, "seconds": round(seconds, 1), "records_kept": kept,
            "weights_alive_after_drop": alive, "rss_start_mib": round(start, 1),
            "rss_all_alive_mib": round(peak, 1), "rss_after_drop_mib": round(dropped, 1),
            "rss_after_clear_records_mib": round(cleared, 1), "after_drop_vs_start": round(dropped / start, 3),
            "retained_per_function_kib": round((dropped - start) * 1024 / n, 1),
            "without_malloc_trim": {"rss_start_mib": round(start_untrimmed, 1),
                                    "rss_after_drop_mib": round(dropped_untrimmed, 1),
                                    "after_drop_vs_start": round(dropped_untrimmed / start_untrimmed, 3)}}


def memory(n: int) -> dict:
    """``many_functions`` for thunderlab and for TorchDynamo alone, each in a fresh process."""
    import subprocess
    import sys

    out = {}
    for kind in ("thunderlab", "dynamo_passthrough"):
        code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import robustness; "
                f"print(json.dumps(robustness.many_functions({n}, {kind!r})))")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        out[kind] = json.loads(r.stdout.strip().splitlines()[-1])
    a, b = out["thunderlab"], out["dynamo_passthrough"]
    out["retained_vs_dynamo"] = round(a["retained_per_function_kib"] / max(b["retained_per_function_kib"], 1e-9), 2)
    # what TorchDynamo itself keeps of a dropped function (the pass-through run) is not thunderlab's:
    # thunderlab's share is the difference, and the total is what a user of thunderlab sees
    own = (a["rss_after_drop_mib"] - a["rss_start_mib"]) - (b["rss_after_drop_mib"] - b["rss_start_mib"])
    out["attribution"] = {
        "total_after_drop_vs_start": a["after_drop_vs_start"],
        "dynamo_own_after_drop_vs_start": b["after_drop_vs_start"],
        "thunderlab_attributable_mib": round(own, 1),
        "thunderlab_attributable_per_function_kib": round(own * 1024 / n, 1),
        "thunderlab_attributable_vs_start": round((a["rss_start_mib"] + own) / a["rss_start_mib"], 3),
    }
    return out


def many_shapes(n: int) -> dict:
    def f(x):
        return x.sin() * 2 + 1

    j = thunderlab.jit(f)
    start = rss_mib()
    for k in range(n):
        j(torch.randn(16 + k))
    caches = [len(g.cache) for g in j.backend.graphs]
    return {"shapes": n, "graphs": len(caches), "largest_cache": max(caches), "records_of_function": len(j.records),
            "limit": thunderlab.set_limits()["shapes"], "rss_growth_mib": round(rss_mib() - start, 1)}


def bad_inputs() -> list[dict]:
    """Mistakes a user can make, each with the error thunderlab answers (first line)."""
    import subprocess
    import sys
    import tempfile

    def f(x):
        return x.sin() * 2

    def jit_call(pipeline, env=None):
        def go():
            old = {k: os.environ.get(k) for k in (env or {})}
            os.environ.update(env or {})
            try:
                thunderlab.jit(f, pipeline=pipeline)(torch.randn(3))
            finally:
                for k, v in old.items():
                    os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
        return go

    def cli(*argv, files=None):
        def go():
            with tempfile.TemporaryDirectory() as d:
                for name, text in (files or {}).items():
                    Path(d, name).write_text(text)
                r = subprocess.run([sys.executable, "-m", "thunderlab", *[a.format(d=d) for a in argv]],
                                   capture_output=True, text=True, timeout=300)
                lines = [x for x in r.stderr.splitlines() if x.strip() and "Warning" not in x]
                raise RuntimeError(f"exit {r.returncode}, {len(lines)} line(s): {lines[-1] if lines else ''}")
        return go

    ok_file = {"ok.py": "import torch\ndef f(x):\n    return x * 2\ndef f_inputs():\n    return torch.randn(3)\n"}
    cases = [
        ("unknown pass", jit_call("dce,frobnicate,del")),
        ("option given twice", jit_call("claim{executors=torch,executors=inductor},del")),
        ("unknown symbol to decompose", jit_call("claim{decompose=layernorm},del")),
        ("bad option type", jit_call("fuse{max_size=big},del")),
        ("pass after del", jit_call("dce,del,cse")),
        ("fuse without claim", jit_call("dce,fuse,del")),
        ("unknown executor in THUNDERLAB_EXECUTORS", jit_call("dce,claim,del", {"THUNDERLAB_EXECUTORS": "cuda+torch"})),
        ("pipeline not a string", lambda: thunderlab.jit(f, pipeline=["dce"])),
        ("bad record limit", lambda: thunderlab.set_limits(records=0)),
        ("last_record before a call", lambda: thunderlab.last_record(thunderlab.jit(f))),
        ("CLI: file with a syntax error", cli("report", "{d}/bad.py:f", files={"bad.py": "def f(:\n"})),
        ("CLI: no such function", cli("report", "{d}/ok.py:g", files=ok_file)),
        ("CLI: unwritable --out", cli("report", "{d}/ok.py:f", "--out", "{d}/no/such/dir/r.html", files=ok_file)),
        ("CLI: bad pipeline", cli("report", "{d}/ok.py:f", "--pipeline", "dce,,frob", files=ok_file)),
    ]
    table = []
    for what, go in cases:
        try:
            go()
            table.append({"input": what, "error": None})
        except Exception as e:  # noqa: BLE001 - the table records what each mistake gets
            table.append({"input": what, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"})
    return table


def fuzz(examples: int) -> dict:
    """The random-pipeline fuzz (tests/fuzz) with fresh random draws: how much it ran and what it found."""
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        report = Path(d, "fuzz.json")
        env = dict(os.environ, THUNDERLAB_FUZZ_EXAMPLES=str(examples), THUNDERLAB_FUZZ_RANDOM="1",
                   THUNDERLAB_FUZZ_REPORT=str(report))
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:warnings", "tests/fuzz"],
                           capture_output=True, text=True, env=env, cwd=Path(__file__).parents[1])
        counts = json.loads(report.read_text()) if report.exists() else {}
    failures = [line for line in r.stdout.splitlines() if line.startswith(("E ", "FAILED"))][:20]
    return dict(counts, seconds=round(time.perf_counter() - t0, 1), passed=r.returncode == 0, bugs_found=failures)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--functions", type=int, default=1000)
    ap.add_argument("--shapes", type=int, default=200)
    ap.add_argument("--fuzz-examples", type=int, default=300)
    ap.add_argument("--only", choices=["memory", "shapes", "bad_inputs", "fuzz"], action="append",
                    help="run only these parts (default all)")
    args = ap.parse_args()
    parts = {"memory": lambda: memory(args.functions), "shapes": lambda: many_shapes(args.shapes),
             "bad_inputs": bad_inputs, "fuzz": lambda: fuzz(args.fuzz_examples)}
    out = {k: run() for k, run in parts.items() if not args.only or k in args.only}
    print(json.dumps(out, indent=1))
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    data.update(out)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
