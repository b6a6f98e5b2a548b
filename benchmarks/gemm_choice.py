"""MKL against oneDNN for linear layers' products on this CPU: the timing thunderlab's gemm pass makes per shape.

Times, with ``thunderlab.executors.gemm.faster_with_onednn`` (the fastest of up to seven alternating calls each,
random inputs), every linear layer's shape that the model zoo's forwards meet (batch 4, sequence 16, each
model's small configuration; shapes found with forward hooks on ``nn.Linear``), and a set of common sizes: the
nanoGPT block's (4 x 64 tokens, width 256), GPT-2 small's and a LLaMA-style MLP's at 64 and 512 tokens, with
and without a GELU after the product (where oneDNN need only match MKL: the GELU becomes its post-op). Says
which library each gets and what share of MKL's time oneDNN took.

Run:  .venv/bin/python benchmarks/gemm_choice.py [--threads 1] [--no-zoo] [--out PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from thunderlab.executors import gemm  # noqa: E402

COMMON = {  # name: (m, k, n, bias, gelu)
    "nanoGPT block qkv": (256, 256, 768, True, None),
    "nanoGPT block proj": (256, 256, 256, True, None),
    "nanoGPT block fc + gelu": (256, 256, 1024, True, "tanh"),
    "nanoGPT block fc (training: gelu not fused)": (256, 256, 1024, True, None),
    "nanoGPT block mlp proj": (256, 1024, 256, True, None),
    "GPT-2 small qkv, 64 tokens": (64, 768, 2304, True, None),
    "GPT-2 small fc + gelu, 64 tokens": (64, 768, 3072, True, "tanh"),
    "GPT-2 small mlp proj, 64 tokens": (64, 3072, 768, True, None),
    "GPT-2 small qkv, 512 tokens": (512, 768, 2304, True, None),
    "GPT-2 small fc + gelu, 512 tokens": (512, 768, 3072, True, "tanh"),
    "BERT base fc + gelu (erf), 128 tokens": (128, 768, 3072, True, "none"),
    "LLaMA-style gate, 64 tokens": (64, 512, 1376, False, None),
    "small: 64 x 128 by 128 x 128": (64, 128, 128, True, None),
    "small: 64 x 64 by 64 x 256": (64, 64, 256, True, None),
}


def zoo_shapes() -> dict[tuple, list[str]]:
    from tests.zoo.models import ZOO, inputs, pair

    shapes: dict[tuple, set] = {}
    for entry in ZOO:
        model, _ = pair(entry, None)
        model.eval()
        x = inputs(entry, model, batch=4, length=16)

        def hook(mod, args, out, name=entry.name):
            rows = args[0].numel() // args[0].shape[-1]
            shapes.setdefault((rows, mod.in_features, mod.out_features, mod.bias is not None), set()).add(name)

        hooks = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, torch.nn.Linear)]
        with torch.no_grad():
            model(**x)
        for h in hooks:
            h.remove()
    return {k: sorted(v) for k, v in sorted(shapes.items())}


def row(m, k, n, bias, gelu) -> dict:
    gemm.faster_with_onednn(m, k, n, bias, gelu=gelu)
    (c,) = [c for c in gemm.choices() if (c["m"], c["k"], c["n"], c["bias"], c["gelu"]) == (m, k, n, bias, gelu)
            and c["threads"] == torch.get_num_threads()]
    return {**c, "onednn_over_mkl": round(c["onednn_us"] / c["mkl_us"], 3)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-zoo", action="store_true")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gemm_choice.json"))
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    out = {"machine": {"torch": torch.__version__, "python": platform.python_version(), "cpus": os.cpu_count(),
                       "threads": torch.get_num_threads(), "processor": platform.processor() or platform.machine(),
                       "load_average_at_start": list(os.getloadavg())},
           "margin": gemm.MARGIN, "common": {}, "zoo": None}
    for name, shape in COMMON.items():
        out["common"][name] = r = row(*shape)
        print(f"{name:45s} MKL {r['mkl_us']:8.1f} us  oneDNN {r['onednn_us']:8.1f} us  "
              f"{r['onednn_over_mkl']:.3f}  -> {'oneDNN' if r['onednn'] else 'MKL'}", flush=True)
    if not args.no_zoo:
        shapes = zoo_shapes()
        rows = [{**row(*shape, None), "models": names} for shape, names in shapes.items()]
        out["zoo"] = {"shapes": len(rows), "onednn": sum(r["onednn"] for r in rows),
                      "largest_mkl_us": max(r["mkl_us"] for r in rows), "rows": rows}
        print(f"zoo: {len(rows)} shapes, {out['zoo']['onednn']} on oneDNN")
    out["machine"]["load_average_at_end"] = list(os.getloadavg())
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
