"""The command line: ``thunderlab demo`` and ``thunderlab passes``."""
from __future__ import annotations

import argparse
import sys
import time


def demo(args) -> int:
    """Compile a built-in model, print the pass table and final program, then watch its regions switch to fused kernels."""
    import torch

    import thunderlab
    from thunderlab.examples import EXAMPLES

    model, inputs = EXAMPLES[args.example]()
    print(f"thunderlab demo: {args.example} ({type(model).__name__}), pipeline {args.pipeline!r}", flush=True)
    jfn = thunderlab.jit(model, pipeline=args.pipeline, verify=True, timing=True)
    t0 = time.perf_counter()
    with torch.no_grad():
        out = jfn(*inputs)
        ref = model(*inputs)
    first = time.perf_counter() - t0
    rec = thunderlab.last_record(jfn)
    print()
    print(rec.table())
    print()
    if rec.error:
        print(rec.error)
        return 1
    err = (getattr(out, "logits", out) - getattr(ref, "logits", ref)).abs().max().item()
    print(f"first call {first * 1e3:.0f} ms (TorchDynamo capture plus {rec.compile_seconds * 1e3:.1f} ms in thunderlab); "
          f"max |thunderlab - eager| = {err:.3g}")
    print()
    print(rec.steps[-1].python())
    if rec.regions:
        _watch_regions(jfn, rec, inputs, args.wait)
    return 0


def _watch_regions(jfn, rec, inputs, wait: float) -> None:
    """Keep calling while fused kernels compile in the background; report the switch and the timings."""
    import torch

    names = ", ".join(rec.regions)
    print(f"regions {names} ran with torch on the first call; their kernels compile in the background...", flush=True)
    t0 = time.perf_counter()
    with torch.no_grad():
        while not rec.wait(0) and time.perf_counter() - t0 < wait:
            jfn(*inputs)
            time.sleep(0.05)
        for _ in range(20):
            jfn(*inputs)
    for name, r in rec.timings().items():
        switched = [t for t, v in r["history"] if v == r["executor"]]
        when = f"switched to {r['executor']} after {switched[0] - r['history'][0][0]:.1f} s" if switched else \
            f"still on torch ({r['error'] or 'compiling'})"
        parts = [f"{v}: {s['count']} calls, median {s['median_s'] * 1e3:.2f} ms" for v, s in r["timings"].items()]
        print(f"  {name}: {when}; " + "; ".join(parts))


def passes(args) -> int:
    """List the registered passes with their summaries and options."""
    from thunderlab.passes import REGISTRY

    for name in sorted(REGISTRY):
        cls = REGISTRY[name]
        opts = ", ".join(f"{k}: {t} = {d!r}" for k, (t, d) in cls.options().items())
        print(f"{name:<10} {cls.summary()}")
        if opts:
            print(f"{'':<10} options: {opts}")
    return 0


def main(argv=None) -> int:
    from thunderlab.passes import DEFAULT_PIPELINE

    parser = argparse.ArgumentParser(prog="thunderlab", description="A tracing compiler for PyTorch whose every pass is an inspectable step.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="compile a built-in model and show every pass")
    p.add_argument("--example", default="nanogpt_block", choices=["mlp", "nanogpt_block", "llama_block", "cnn", "gpt2"])
    p.add_argument("--pipeline", default=DEFAULT_PIPELINE, help=f"pass pipeline (default {DEFAULT_PIPELINE!r})")
    p.add_argument("--wait", type=float, default=120.0, help="seconds to wait for fused kernels to compile (default 120)")
    p.set_defaults(fn=demo)
    p = sub.add_parser("passes", help="list the registered passes")
    p.set_defaults(fn=passes)
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
