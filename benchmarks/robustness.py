"""Robustness figures: memory over a long-lived process (many compiled functions dropped again, many
shapes of one function), the errors bad inputs get, and a random-pipeline fuzz campaign.

Writes benchmarks/results/robustness.json (merging into what other parts of the robustness
run wrote there). Figures are resident set size (RSS) from /proc, after a full collection.

Memory is measured against two starts, both named in the results: "import" is the process
right after ``import thunderlab`` (nothing compiled yet: the target's definition, "memory back
within 10% of the start"); "start" is after one function was compiled, called and dropped
(TorchDynamo's and thunderlab's lazily imported modules and one-time caches are then in place).
A second round of as many new functions, compiled and dropped after the first, tells a leak
(memory that grows with every function) from a high-water mark (memory the allocators keep
after the first round and reuse in the second).

    python benchmarks/robustness.py [--functions 1000] [--shapes 200] [--fuzz-examples 300]
                                    [--inductor-functions 20] [--only PART]
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


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def _pymalloc_stats() -> dict[str, float]:
    """Python's small-object allocator: the arenas it holds and the bytes in live objects in them.

    An arena goes back to the system only when every object in it is freed; ``sys._debugmallocstats``
    writes these counts to the C stderr, so it is read back from a temporary file.
    """
    import re
    import sys
    import tempfile

    sys.stderr.flush()
    with tempfile.TemporaryFile(mode="w+") as out:
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read()

    def count(label):
        m = re.search(re.escape(label) + r"\s*=\s*([\d,]+)", text)
        return int(m.group(1).replace(",", "")) if m else 0

    arenas = count("# arenas allocated current")
    size = re.search(r"arenas \* ([\d,]+) bytes/arena", text)
    arena_bytes = arenas * (int(size.group(1).replace(",", "")) if size else 0)
    return {"pymalloc_arenas_mib": round(arena_bytes / 2**20, 1),
            "pymalloc_live_objects_mib": round(count("# bytes in allocated blocks") / 2**20, 1)}


def breakdown() -> dict[str, float | int]:
    """Where resident memory is, after a collection and malloc_trim: anonymous and file-backed pages
    (/proc/self/smaps_rollup), Python's small-object allocator (arenas held, bytes of live objects in
    them), glibc malloc's bytes in use (mallinfo2) and the objects the garbage collector tracks."""
    rss = rss_mib()
    kib = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                kib[parts[0].rstrip(":")] = int(parts[1])
    out = {"rss_mib": round(rss, 1), "anonymous_mib": round(kib.get("Anonymous", 0) / 1024, 1),
           "file_backed_mib": round((kib.get("Rss", 0) - kib.get("Anonymous", 0)) / 1024, 1)}
    out.update(_pymalloc_stats())
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _Mallinfo2
        info = libc.mallinfo2()
        out["malloc_in_use_mib"] = round((info.uordblks + info.hblkhd) / 2**20, 1)
    except (OSError, AttributeError):
        pass
    out["gc_objects"] = len(gc.get_objects())
    return out


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


class _RecordsLetGo:
    """A jitted function whose records are let go after every call (a diagnostic, not an option): beside
    thunderlab as it comes, it shows how much of thunderlab's memory is the records a live function keeps."""

    def __init__(self, jfn):
        self.jfn = jfn

    def __call__(self, *args):
        out = self.jfn(*args)
        for graph in self.jfn.backend.graphs:
            graph.records = []
            for entry in graph.cache.values():
                entry.record = None
        thunderlab.clear_records()
        return out


def _compiler(kind: str):
    if kind == "thunderlab":
        return thunderlab.jit
    if kind == "thunderlab_records_let_go":
        return lambda m: _RecordsLetGo(thunderlab.jit(m))
    if kind == "thunderlab_inductor":  # regions compiled before the first call returns, so each is in the figure
        return lambda m: thunderlab.jit(m, tiered=False)
    if kind == "dynamo_inductor":
        return torch.compile
    return lambda m: torch.compile(m, backend=lambda gm, example_inputs: gm.forward)  # TorchDynamo alone


def _round(compile_, ns: dict, x: torch.Tensor, first: int, n: int) -> dict:
    """Compile ``n`` fresh 1 MiB models (as notebook cells would), call each once, then drop them all."""
    t0 = time.perf_counter()
    fns, weights = [], []
    for i in range(first, first + n):
        m = make_module(i, ns)
        weights.append(weakref.ref(m.w))
        j = compile_(m)
        j(x)
        fns.append(j)
    del m, j
    alive = breakdown()
    kept = len(thunderlab.records())
    seconds = time.perf_counter() - t0
    del fns
    for i in range(first, first + n):
        del ns[f"Cell{i}"]
    dropped_untrimmed, _ = rss_both()
    dropped = breakdown()
    return {"seconds": round(seconds, 1), "records_kept": kept,
            "weights_alive_after_drop": sum(w() is not None for w in weights), "alive": alive, "dropped": dropped,
            "dropped_untrimmed": dropped_untrimmed}


def many_functions(n: int, kind: str = "thunderlab", kernels: int | None = None) -> dict:
    """Two rounds of ``n`` models compiled, called and dropped; memory against both starts (see the module doc).

    ``kernels``: thunderlab.set_limits(kernels=...), the Inductor kernels kept for reuse once no function runs them.
    """
    if kernels is not None:
        thunderlab.set_limits(kernels=kernels)
    compile_ = _compiler(kind)
    ns = {"torch": torch}
    x = torch.randn(8, 512)
    at_import = breakdown()
    import_untrimmed = rss_mib(trim=False)
    warm = compile_(make_module(2 * n, ns))
    warm(x)
    del warm
    thunderlab.clear_records()
    start_untrimmed, _ = rss_both()
    at_start = breakdown()
    first = _round(compile_, ns, x, 0, n)
    thunderlab.clear_records()
    cleared = rss_mib()
    second = _round(compile_, ns, x, n, n)
    thunderlab.clear_records()
    imp, start = at_import["rss_mib"], at_start["rss_mib"]
    d1, d2 = first["dropped"]["rss_mib"], second["dropped"]["rss_mib"]
    return {
        "compiler": kind, "functions": n, "kept_kernels_limit": thunderlab.set_limits()["kernels"],
        "seconds": first["seconds"], "records_kept": first["records_kept"],
        "weights_alive_after_drop": first["weights_alive_after_drop"] + second["weights_alive_after_drop"],
        "rss_import_mib": imp, "rss_start_mib": start, "rss_all_alive_mib": first["alive"]["rss_mib"],
        "rss_after_drop_mib": d1, "rss_after_clear_records_mib": round(cleared, 1),
        # the target's definition: against the process before anything was compiled
        "after_drop_vs_import": round(d1 / imp, 3),
        "retained_per_function_vs_import_kib": round((d1 - imp) * 1024 / n, 1),
        # against the process after one compile and drop
        "after_drop_vs_start": round(d1 / start, 3),
        "retained_per_function_kib": round((d1 - start) * 1024 / n, 1),
        "second_round": {"rss_all_alive_mib": second["alive"]["rss_mib"], "rss_after_drop_mib": d2,
                         "after_drop_vs_import": round(d2 / imp, 3), "after_drop_vs_start": round(d2 / start, 3),
                         "growth_per_function_kib": round((d2 - d1) * 1024 / n, 1)},
        "breakdown": {"import": at_import, "start": at_start, "all_alive": first["alive"],
                      "after_drop": first["dropped"], "second_round_all_alive": second["alive"],
                      "after_second_drop": second["dropped"]},
        "without_malloc_trim": {"rss_import_mib": round(import_untrimmed, 1),
                                "rss_start_mib": round(start_untrimmed, 1),
                                "rss_after_drop_mib": round(first["dropped_untrimmed"], 1),
                                "after_drop_vs_import": round(first["dropped_untrimmed"] / import_untrimmed, 3),
                                "after_drop_vs_start": round(first["dropped_untrimmed"] / start_untrimmed, 3)},
    }


def _in_fresh_process(n: int, kind: str, executors: str, kernels: int | None = None) -> dict:
    import subprocess
    import sys

    code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import robustness; "
            f"print(json.dumps(robustness.many_functions({n}, {kind!r}, {kernels!r})))")
    env = dict(os.environ, THUNDERLAB_EXECUTORS=executors)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    return json.loads(r.stdout.strip().splitlines()[-1])


def _compare(a: dict, b: dict, n: int) -> dict:
    """thunderlab's run ``a`` beside its TorchDynamo peer ``b``: thunderlab's own share, against either start."""
    own_start = (a["rss_after_drop_mib"] - a["rss_start_mib"]) - (b["rss_after_drop_mib"] - b["rss_start_mib"])
    own_import = (a["rss_after_drop_mib"] - a["rss_import_mib"]) - (b["rss_after_drop_mib"] - b["rss_import_mib"])
    return {
        "retained_vs_dynamo": round(a["retained_per_function_kib"] / max(b["retained_per_function_kib"], 1e-9), 2),
        # what TorchDynamo itself keeps of a dropped function (the peer's run) is not thunderlab's:
        # thunderlab's share is the difference, and the total is what a user of thunderlab sees
        "attribution": {
            "total_after_drop_vs_import": a["after_drop_vs_import"],
            "dynamo_own_after_drop_vs_import": b["after_drop_vs_import"],
            "thunderlab_attributable_vs_import_mib": round(own_import, 1),
            "thunderlab_attributable_vs_import_per_function_kib": round(own_import * 1024 / n, 1),
            "total_after_drop_vs_start": a["after_drop_vs_start"],
            "dynamo_own_after_drop_vs_start": b["after_drop_vs_start"],
            "thunderlab_attributable_mib": round(own_start, 1),
            "thunderlab_attributable_per_function_kib": round(own_start * 1024 / n, 1),
            "thunderlab_attributable_vs_start": round((a["rss_start_mib"] + own_start) / a["rss_start_mib"], 3),
            "second_round_growth_per_function_kib": {"thunderlab": a["second_round"]["growth_per_function_kib"],
                                                     "dynamo": b["second_round"]["growth_per_function_kib"]},
        },
    }


def memory(n: int) -> dict:
    """``many_functions`` for thunderlab and for TorchDynamo alone, each in a fresh process (torch executor); and
    for thunderlab with every record let go after each call, which tells the records' share."""
    kinds = ("thunderlab", "dynamo_passthrough", "thunderlab_records_let_go")
    out = {kind: _in_fresh_process(n, kind, "torch") for kind in kinds}
    out.update(_compare(out["thunderlab"], out["dynamo_passthrough"], n))
    out["records_let_go"] = _compare(out["thunderlab_records_let_go"], out["dynamo_passthrough"], n)
    return out


def inductor_memory(n: int) -> dict:
    """As ``memory``, with every fusion region compiled by Inductor, beside torch.compile's own Inductor backend;
    thunderlab twice: as it comes (idle kernels kept for reuse, up to the limit) and keeping none."""
    out = {"thunderlab": _in_fresh_process(n, "thunderlab_inductor", "inductor+torch"),
           "thunderlab_keeping_no_idle_kernels": _in_fresh_process(n, "thunderlab_inductor", "inductor+torch", 0),
           "dynamo_inductor": _in_fresh_process(n, "dynamo_inductor", "inductor+torch")}
    out.update(_compare(out["thunderlab"], out["dynamo_inductor"], n))
    out["keeping_no_idle_kernels"] = _compare(out["thunderlab_keeping_no_idle_kernels"], out["dynamo_inductor"], n)
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
    ap.add_argument("--inductor-functions", type=int, default=20)
    ap.add_argument("--only", choices=["memory", "inductor_memory", "shapes", "bad_inputs", "fuzz"], action="append",
                    help="run only these parts (default all)")
    args = ap.parse_args()
    parts = {"memory": lambda: memory(args.functions),
             "inductor_memory": lambda: inductor_memory(args.inductor_functions),
             "shapes": lambda: many_shapes(args.shapes),
             "bad_inputs": bad_inputs, "fuzz": lambda: fuzz(args.fuzz_examples)}
    out = {k: run() for k, run in parts.items() if not args.only or k in args.only}
    print(json.dumps(out, indent=1))
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    data.update(out)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
