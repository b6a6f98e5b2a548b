"""Real-size Hugging Face models on CPU: eager, thunderlab, thunderlab with every linear layer on MKL, torch.compile.

The model zoo's configurations are tiny (width 32, batch 4 by 16 tokens), so its products are too small for
the GEMM library to matter. This benchmark builds models at their published sizes from transformers' default
configs (random weights, nothing downloaded): BERT base (BertForMaskedLM, 12 layers, width 768) and GPT-2
small (GPT2LMHeadModel, 12 layers, width 768), batch 1 by --tokens tokens, and times an inference step
(torch.no_grad) and, with --train, a training step (forward with labels, loss.backward(), gradients set to
None) of:
  eager            the model as it is;
  thunderlab       thunderlab.jit(model), kernels built before the first call (tiered=False) and race off,
                   so that every call runs the kernel;
  thunderlab-mkl   the same with thunderlab.executors.gemm switched off while it compiles (each product on
                   MKL, as torch.compile has them);
  torch.compile    torch.compile(model), Inductor's defaults.
Each on its own copy of the model, in interleaved rounds (shuffled each round), CPU time on one thread; paired
ratios (benchmarks/paired.py). Outputs are checked against eager's (logits, and the loss's gradients).

Run:  .venv/bin/python benchmarks/real_size.py [--models bert,gpt2] [--tokens 128] [--rounds 15] [--train]
"""
from __future__ import annotations

import argparse
import copy
import functools
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]

import torch  # noqa: E402

import thunderlab  # noqa: E402
from benchmarks.paired import describe, interleaved, paired_ratio  # noqa: E402
from thunderlab.executors import gemm  # noqa: E402

MODELS = {"bert": ("BertConfig", "BertForMaskedLM"), "gpt2": ("GPT2Config", "GPT2LMHeadModel")}
VARIANTS = ("eager", "thunderlab", "thunderlab-mkl", "torch.compile")


def build(name: str):
    import transformers

    config_cls, model_cls = MODELS[name]
    config = getattr(transformers, config_cls)()
    for key, value in list(vars(config).items()):  # no dropout: steps comparable with eager's
        if isinstance(value, float) and ("dropout" in key or "pdrop" in key):
            setattr(config, key, 0.0)
    torch.manual_seed(0)
    return getattr(transformers, model_cls)(config)


def step(fn, model, x, train: bool):
    if train:
        out = fn(**x)
        out.loss.backward()
        grads = [p.grad for p in model.parameters()]
        model.zero_grad(set_to_none=True)
        return out.logits.detach(), grads
    with torch.no_grad():
        return fn(**x).logits, None


def measure(name: str, train: bool, tokens: int, rounds: int) -> dict:
    base = build(name).train(train)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, base.config.vocab_size, (1, tokens), generator=g)
    x = {"input_ids": ids, "labels": ids} if train else {"input_ids": ids}
    variants, first, checks = {}, {}, {}
    ref = None
    for v in VARIANTS:
        model = copy.deepcopy(base)
        fn = model if v == "eager" else torch.compile(model) if v == "torch.compile" else \
            thunderlab.jit(model, tiered=False, race=False)
        gemm.set_enabled(v != "thunderlab-mkl")  # read as its regions compile: on the first call
        t0 = time.perf_counter()
        out = step(fn, model, x, train)
        first[v] = time.perf_counter() - t0
        gemm.set_enabled(True)
        if v == "eager":
            ref = out
        else:
            try:
                torch.testing.assert_close(out[0], ref[0], rtol=1e-3, atol=1e-3)
                if train:
                    for a, b in zip(out[1], ref[1]):
                        if a is not None or b is not None:
                            torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4)
                checks[v] = True
            except AssertionError as e:
                checks[v] = str(e).strip().splitlines()[0]
        for _ in range(2):
            step(fn, model, x, train)
        variants[v] = (fn, model)
    times = interleaved({v: functools.partial(step, fn, model, x, train) for v, (fn, model) in variants.items()},
                        rounds)
    ratios = {f"{v} / eager": paired_ratio(times[v], times["eager"]) for v in VARIANTS[1:]}
    ratios["thunderlab / torch.compile"] = paired_ratio(times["thunderlab"], times["torch.compile"])
    ratios["thunderlab / thunderlab-mkl"] = paired_ratio(times["thunderlab"], times["thunderlab-mkl"])
    return {"first_call_s": first, "equal_to_eager": checks,
            "median_ms": {v: 1e3 * statistics.median(t) for v, t in times.items()}, "ratios": ratios}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="bert,gpt2")
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--train", action="store_true", help="also a training step")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "real_size.json"))
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    result = {"machine": {"torch": torch.__version__, "python": platform.python_version(), "cpus": os.cpu_count(),
                          "threads": torch.get_num_threads(), "load_average_at_start": list(os.getloadavg()),
                          "inductor_cache": os.environ.get("TORCHINDUCTOR_CACHE_DIR")},
              "tokens": args.tokens, "rounds": args.rounds, "rows": {}}
    for name in args.models.split(","):
        if name not in MODELS:
            raise SystemExit(f"unknown model {name!r}; valid: {', '.join(MODELS)}")
        for mode in ("inference", "train") if args.train else ("inference",):
            r = measure(name, mode == "train", args.tokens, args.rounds)
            result["rows"][f"{name} {mode}"] = r
            print(name, mode, {k: describe(v) for k, v in r["ratios"].items()}, "equal:", r["equal_to_eager"],
                  {k: round(v, 1) for k, v in r["median_ms"].items()}, flush=True)
    result["gemm_choices"] = gemm.choices()
    result["machine"]["load_average_at_end"] = list(os.getloadavg())
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
