"""Instructions per call (callgrind) of a one-op function and a tiny module, eager and jitted.

The machine's load moves timings, not instruction counts. One process runs under ``valgrind --tool=callgrind``:
it sets everything up (jit, compile, warm-up calls of every variant), then for each variant zeroes callgrind's
counters, makes N calls, and has callgrind write out the counts (the zero and the dump are triggered by calls
of two libc functions the interpreter makes nowhere else, ``getppid`` and ``getpgrp``, through callgrind's
``--zero-before`` and ``--dump-before``). The same is done with no call at all ("empty"); a variant's
instructions per call are its count minus the empty one's, over N.

Variants: fn_eager / fn_jit (``lambda x: x + 1`` on a float32[4]); mod_eager / mod_jit (``nn.Linear(8, 8)``
on a float32[2, 8] under no_grad); mod_grad_eager / mod_grad_jit (the same with grad on, a training program).

Run:  python benchmarks/overhead_instructions.py [--calls 2000] [--out PATH]
      (runs the child processes itself; ``--child`` is the measured process). The thunderlab it measures is the
      one the child imports: the repository's, or another checkout's with ``--thunderlab DIR``.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = ("fn_eager", "fn_jit", "mod_eager", "mod_jit", "mod_grad_eager", "mod_grad_jit")
PIPELINE = "dce,cse,autodiff,remat,claim{executors=torch},del"  # as compile_and_overhead.py: the torch executor


def child(calls: int, variants: list[str]) -> None:
    import ctypes

    import torch

    import thunderlab

    libc = ctypes.CDLL(None)
    zero, dump = libc.getppid, libc.getpgrp
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = torch.randn(4)
    fn = lambda t: t + 1  # noqa: E731
    lin = torch.nn.Linear(8, 8)
    xm = torch.randn(2, 8)
    jfn, jmod = thunderlab.jit(fn, pipeline=PIPELINE), thunderlab.jit(lin, pipeline=PIPELINE)
    no_grad = torch.no_grad()
    setups = {"fn_eager": (fn, x, False), "fn_jit": (jfn, x, False), "mod_eager": (lin, xm, True),
              "mod_jit": (jmod, xm, True), "mod_grad_eager": (lin, xm, False), "mod_grad_jit": (jmod, xm, False)}
    for f, a, ng in setups.values():  # compile and warm up every variant
        for _ in range(5):
            if ng:
                with no_grad:
                    f(a)
            else:
                f(a)
    for name in ["empty", *variants]:
        f, a, ng = setups.get(name, (None, None, False))
        n = calls if f is not None else 0
        if ng:
            with no_grad:
                zero()
                for _ in range(n):
                    f(a)
                dump()
        else:
            zero()
            for _ in range(n):
                f(a)
            dump()


def measure(calls: int, variants: list[str], thunderlab_dir: Path) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        env = {**os.environ, "PYTHONPATH": str(thunderlab_dir), "OMP_NUM_THREADS": "1"}
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--zero-before=getppid",
                        "--dump-before=getpgrp", sys.executable, str(Path(__file__).resolve()), "--child",
                        ",".join(variants), "--calls", str(calls)],
                       check=True, env=env, cwd=thunderlab_dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        dumps = sorted(Path(tmp).glob("callgrind.out.*"), key=lambda p: int(p.name.rsplit(".", 1)[1]))
        counts = []
        for d in dumps:
            text = d.read_text(errors="replace")
            counts.append(int(re.findall(r"^(?:summary|totals):\s*(\d+)", text, re.M)[-1]))
    empty, rest = counts[0], counts[1:]
    return {"empty_instructions": empty, **{v: (c - empty) / calls for v, c in zip(variants, rest)}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--thunderlab", default=str(ROOT), help="the checkout whose thunderlab is measured")
    ap.add_argument("--out", default=None, help="JSON file to write (default: print only)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    variants = a.variants.split(",")
    if a.child is not None:
        child(a.calls, a.child.split(","))
        return
    where = Path(a.thunderlab).resolve()
    per_call = measure(a.calls, variants, where)
    for v in variants:
        print(f"{v:16s} {per_call[v]:10.0f} instructions per call", flush=True)
    report = {"timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(), "thunderlab": str(where),
              "calls": a.calls, "instructions_per_call": per_call}
    if a.out:
        Path(a.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
