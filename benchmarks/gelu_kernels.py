"""Exact GELU and its gradient on CPU float32: oneDNN's kernel against ATen's own, by tensor size.

While oneDNN is enabled (PyTorch's default), ATen hands exact GELU (forward and backward) on
contiguous CPU float32 tensors to oneDNN, which sets up a primitive on every call. This benchmark
times both kernels at each size, in interleaved rounds with paired ratios (see paired.py), and
reports where ATen's own kernel stops being faster: thunderlab's torch executor uses it below
thunderlab.executors.torch.NATIVE_GELU_BELOW elements. Also the largest difference between the two
kernels' results (they agree to float32 rounding, not bit for bit).

Run:  .venv/bin/python benchmarks/gelu_kernels.py [--rounds 200] [--out PATH]
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from paired import describe, paired_ratio  # noqa: E402

from thunderlab.executors.torch import NATIVE_GELU_BELOW  # noqa: E402

SIZES = (1024, 4096, 16384, 65536, 262144)
gelu = torch._C._nn.gelu
gelu_backward = torch.ops.aten.gelu_backward.default


def timed(fn, onednn: bool, reps: int) -> float:
    torch._C._set_mkldnn_enabled(onednn)
    try:
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - t0) / reps
    finally:
        torch._C._set_mkldnn_enabled(True)


def measure(numel: int, rounds: int) -> dict:
    a = torch.randn(numel // 128, 128)
    g = torch.randn_like(a)
    reps = max(1, 20000 // numel)
    out = {"numel": numel, "reps_per_sample": reps}
    for name, fn in (("gelu", lambda: gelu(a)), ("gelu_backward", lambda: gelu_backward(g, a))):
        for onednn in (True, False):
            timed(fn, onednn, reps * 5)  # warm-up
        times = {True: [], False: []}
        for i in range(rounds):
            for onednn in ((True, False) if i % 2 else (False, True)):
                times[onednn].append(timed(fn, onednn, reps))
        torch._C._set_mkldnn_enabled(False)
        native = fn()
        torch._C._set_mkldnn_enabled(True)
        out[name] = {"onednn_median_us": sorted(times[True])[rounds // 2] * 1e6,
                     "native_median_us": sorted(times[False])[rounds // 2] * 1e6,
                     "native/onednn": paired_ratio(times[False], times[True]),
                     "max_abs_difference": float((native - fn()).abs().max())}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "kernels.json"))
    args = ap.parse_args()
    rows = [measure(n, args.rounds) for n in SIZES]
    print(f"exact GELU on CPU float32, ATen's kernel / oneDNN's (paired median [95% interval]); "
          f"thunderlab uses ATen's below {NATIVE_GELU_BELOW} elements")
    print(f"{'elements':>9} {'gelu':>24} {'gelu_backward':>24}  max |difference|")
    for r in rows:
        print(f"{r['numel']:>9} {describe(r['gelu']['native/onednn']):>24} "
              f"{describe(r['gelu_backward']['native/onednn']):>24}  "
              f"{max(r['gelu']['max_abs_difference'], r['gelu_backward']['max_abs_difference']):.2e}")
    result = {"when": datetime.datetime.now().isoformat(timespec="seconds"), "torch": torch.__version__,
              "machine": {"platform": platform.platform(), "processor": platform.processor(),
                          "threads": torch.get_num_threads(),
                          "cpu_capability": torch.backends.cpu.get_cpu_capability()},
              "native_gelu_below": NATIVE_GELU_BELOW, "rounds": args.rounds, "sizes": rows}
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
