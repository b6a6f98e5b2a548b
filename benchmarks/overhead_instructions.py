"""Instructions per call (callgrind) of a one-op function and a tiny module, eager and jitted.

The machine's load moves timings, not instruction counts. Each variant is measured as the difference of
two processes under ``valgrind --tool=callgrind``: both set up the same things (jit, compile, warm-up calls
of every variant of the variant's family, fn or mod) with callgrind's instrumentation off (so that the setup
runs a few times faster), wait until this script has turned it on (``callgrind_control -i on``), then one
makes N calls of the variant and the other none, and both exit; the difference over N is the variant's
instructions per call.

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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = ("fn_eager", "fn_jit", "mod_eager", "mod_jit", "mod_grad_eager", "mod_grad_jit")
PIPELINE = "dce,cse,autodiff,remat,claim{executors=torch},del"  # as compile_and_overhead.py: the torch executor


def child(calls: int, family: str, variant: str | None) -> None:
    import torch

    import thunderlab

    torch.set_num_threads(1)
    torch.manual_seed(0)
    if family == "fn":
        x = torch.randn(4)
        fn = lambda t: t + 1  # noqa: E731
        setups = {"fn_eager": (fn, x, False), "fn_jit": (thunderlab.jit(fn, pipeline=PIPELINE), x, False)}
    else:
        lin, xm = torch.nn.Linear(8, 8), torch.randn(2, 8)
        jmod = thunderlab.jit(lin, pipeline=PIPELINE)
        setups = {"mod_eager": (lin, xm, True), "mod_jit": (jmod, xm, True), "mod_grad_eager": (lin, xm, False),
                  "mod_grad_jit": (jmod, xm, False)}
    for name in sorted(setups):  # compile and warm up every variant of the family, measured or not
        f, a, ng = setups[name]
        with torch.set_grad_enabled(not ng):
            for _ in range(5):
                f(a)
    f, a, ng = setups[variant] if variant is not None else (None, None, False)
    ready, go = Path(os.environ["OVERHEAD_READY"]), Path(os.environ["OVERHEAD_GO"])
    ready.touch()
    while not go.exists():  # the instrumentation is turned on meanwhile
        time.sleep(0.005)
    with torch.set_grad_enabled(not ng):
        for _ in range(calls if f is not None else 0):
            f(a)


def instructions(calls: int, family: str, variant: str | None, thunderlab_dir: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out, ready, go = Path(tmp) / "callgrind.out", Path(tmp) / "ready", Path(tmp) / "go"
        env = {**os.environ, "PYTHONPATH": str(thunderlab_dir), "OMP_NUM_THREADS": "1",
               "OVERHEAD_READY": str(ready), "OVERHEAD_GO": str(go)}
        proc = subprocess.Popen(["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                                 sys.executable, str(Path(__file__).resolve()), "--child", f"{family}:{variant or ''}",
                                 "--calls", str(calls)],
                                env=env, cwd=thunderlab_dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not ready.exists():
            if proc.poll() is not None:
                raise RuntimeError(f"the measured process for {family}:{variant} exited early ({proc.returncode})")
            time.sleep(0.1)
        subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], check=True, stdout=subprocess.DEVNULL)
        go.touch()
        if proc.wait() != 0:
            raise RuntimeError(f"the measured process for {family}:{variant} failed ({proc.returncode})")
        return int(re.findall(r"^(?:summary|totals):\s*(\d+)", out.read_text(errors="replace"), re.M)[-1])


def measure(calls: int, variants: list[str], thunderlab_dir: Path) -> dict[str, float]:
    """Instructions per call of each variant; the processes run two at a time (the machine has two cores)."""
    from concurrent.futures import ThreadPoolExecutor

    families = sorted({v.split("_")[0] for v in variants})
    jobs = [(f, None) for f in families] + [(v.split("_")[0], v) for v in variants]
    with ThreadPoolExecutor(2) as pool:
        counts = dict(zip(jobs, pool.map(lambda j: instructions(calls, j[0], j[1], thunderlab_dir), jobs)))
    return {v: (counts[(v.split("_")[0], v)] - counts[(v.split("_")[0], None)]) / calls for v in variants}


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
        family, variant = a.child.split(":")
        child(a.calls, family, variant or None)
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
