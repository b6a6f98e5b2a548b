"""Inspection cost on a 12-layer Hugging Face GPT-2 (from a config, random weights; nothing downloaded).

(Named inspection.py: a script named inspect.py would shadow the standard library's inspect module.)

Measured, in one process, for inference (torch.no_grad) and training (parameters require grad) with the
default pipeline and the torch executor (THUNDERLAB_EXECUTORS=torch, so no kernel compile is timed):
  * capture_s    TorchDynamo's capture of the model (the first call minus thunderlab's steps), for scale;
  * build_s      thunderlab's share of the first call: lowering the captured graph to a trace, plus the wall
                 time of the whole pipeline with its verification (measured as a re-run reusing nothing);
                 passes_s is the passes' own seconds (record.compile_seconds);
  * serialise_s  producing the whole payload (every step's program, diff, graph, stats) and its JSON text;
  * payload_mb   the size of that JSON;
  * rerun_s      thunderlab.rerun(record, ...) after moving one pass (cse after claim), which reuses the steps before it
                 (median of five; rerun_first_s is the first of them);
  * rerun_full_s the same edit with nothing reused (for comparison: the prefix's share).
Targets: build + serialise < 2 s, payload < 20 MB, re-run < 0.5 s.

Run:  .venv/bin/python benchmarks/inspection.py [--layers 12] [--out benchmarks/results/inspect.json]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("THUNDERLAB_EXECUTORS", "torch")

import torch  # noqa: E402

import thunderlab  # noqa: E402
from thunderlab.examples import gpt2_from_config  # noqa: E402
from thunderlab.inspect.record import CompileRecord  # noqa: E402
from thunderlab.inspect.serialize import RecordPayload  # noqa: E402
from thunderlab.passes import DEFAULT_PIPELINE  # noqa: E402
from thunderlab.verbs import rerun  # noqa: E402


def moved(pipeline: str) -> str:
    """The pipeline with cse moved to just after claim."""
    names = pipeline.split(",")
    names.remove("cse")
    names.insert(names.index("claim") + 1, "cse")
    return ",".join(names)


def measure(layers: int, training: bool) -> dict:
    model = gpt2_from_config(n_layer=layers, n_embd=768 if layers >= 12 else 64, n_head=12 if layers >= 12 else 4,
                             n_positions=128, vocab_size=1024)
    for p in model.parameters():
        p.requires_grad_(training)
    ids = torch.randint(0, 1024, (1, 64))
    jfn = thunderlab.jit(model, tiered=False)
    t0 = time.perf_counter()
    with torch.set_grad_enabled(training):
        jfn(ids)
    first = time.perf_counter() - t0
    rec = thunderlab.last_record(jfn)
    assert rec.error is None, rec.error
    t0 = time.perf_counter()
    text = json.dumps(RecordPayload(rec).to_dict(), allow_nan=False)
    serialise = time.perf_counter() - t0
    edit = moved(rec.pipeline)
    times = []
    for _ in range(5):  # the first re-run, and the median of five (this machine's timings vary)
        t0 = time.perf_counter()
        new = rerun(rec, edit)
        times.append(time.perf_counter() - t0)
        assert new.error is None, new.error
    rerun_s, rerun_first = statistics.median(times), times[0]
    fresh = CompileRecord(rec.name, rec.inputs, rec.pipeline, steps=[rec.steps[0]])  # re-runs every pass
    full = []
    for _ in range(3):
        t0 = time.perf_counter()
        rerun(fresh, edit)
        full.append(time.perf_counter() - t0)
    rerun_full = statistics.median(full)
    # thunderlab's share of the first call: lowering the captured graph to a trace (step 0) plus
    # the whole pipeline's wall time with its verification and bookkeeping (the re-run reusing
    # nothing); the steps' own seconds (passes_s) leave those out
    build = rec.steps[0].seconds + rerun_full
    return {"training": training, "layers": layers, "symbols": {s.spec: s.symbols_after for s in rec.steps},
            "first_call_s": first, "capture_s": first - build, "build_s": build, "passes_s": rec.compile_seconds,
            "serialise_s": serialise, "build_plus_serialise_s": build + serialise,
            "payload_mb": len(text.encode()) / 2**20, "rerun_edit": edit, "rerun_reused_steps": new.reused,
            "rerun_s": rerun_s, "rerun_first_s": rerun_first, "rerun_full_s": rerun_full}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "inspect.json"))
    args = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() // 1))
    results = []
    for training in (False, True):
        print(f"GPT-2 {args.layers} layers, {'training' if training else 'inference'}...", flush=True)
        r = measure(args.layers, training)
        results.append(r)
        print(
            f"  build {r['build_s']:.2f} s + serialise {r['serialise_s']:.2f} s = {r['build_plus_serialise_s']:.2f} s "
            f"(target < 2); payload {r['payload_mb']:.1f} MB (< 20); re-run after moving cse {r['rerun_s']:.3f} s "
            f"(first {r['rerun_first_s']:.3f} s) "
            f"(< 0.5; {r['rerun_reused_steps']} steps reused; {r['rerun_full_s']:.3f} s reusing none); "
            f"TorchDynamo capture {r['capture_s']:.1f} s",
            flush=True,
        )
    out = {"benchmark": "inspect", "date": datetime.datetime.now().isoformat(timespec="seconds"),
           "machine": {"python": sys.version.split()[0], "torch": torch.__version__, "platform": platform.platform(),
                       "cpus": os.cpu_count()}, "pipeline": DEFAULT_PIPELINE, "results": results}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
