"""Fine-tuning with a Hugging Face ``Trainer`` and dynamic padding: each batch padded to a multiple of 8.

The common fine-tuning recipe: a sequence classifier (a small BERT from its config), texts of varying length (5 to
119 tokens), batches of 8 padded to their longest text rounded up to a multiple of 8 (what ``DataCollatorWithPadding
(pad_to_multiple_of=8)`` does), AdamW with the Trainer's defaults, one CPU thread. So every compiler meets a
handful of sequence lengths, in the order the shuffled data brings them.

Variants, each in a fresh process of its own (imports, captures and compiles counted), sharing one
TORCHINDUCTOR_CACHE_DIR:
  * eager          the model as it is;
  * jit            ``Trainer(model=thunderlab.jit(model), ...)``;
  * tc_thunderlab  ``Trainer(model=torch.compile(model, backend="thunderlab"), ...)`` (the Trainer's own
                   ``torch_compile_backend`` takes only the backends accelerate names), with
                   ``remove_unused_columns=False``: a compiled module's forward takes ``*args, **kwargs``;
  * tc_inductor    ``TrainingArguments(torch_compile=True)``: torch.compile's defaults;
  * ``--against DIR`` adds ``jit@DIR``: thunderlab from another source tree (a ``git worktree``), the same script.

Reported per variant: the whole ``trainer.train()`` time, each step's time (a ``TrainerCallback`` from step begin to
step end), the median of the last quarter of the steps, the sum of the second half (what a long job's steady part
costs), the losses the Trainer logged (every variant must log eager's, to the tolerance printed), and for
thunderlab's variants the records made and the calls run as captured.

Run:  .venv/bin/python benchmarks/finetune.py [--steps 600] [--variants ...] [--against DIR]
      [--cache-dir DIR] [--out benchmarks/results/finetune.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = ("eager", "jit", "tc_thunderlab", "tc_inductor")
CONFIG = dict(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
              max_position_embeddings=128)
BATCH, PAD_TO, SHORTEST, LONGEST = 8, 8, 5, 120


def child(variant: str, root: str, steps: int) -> dict:
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, root)
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainerCallback, TrainingArguments

    import thunderlab

    g = torch.Generator().manual_seed(0)
    texts = []
    for _ in range(4000):
        n = int(torch.randint(SHORTEST, LONGEST, (1,), generator=g))
        texts.append({"input_ids": torch.randint(5, CONFIG["vocab_size"], (n,), generator=g).tolist(),
                      "labels": int(torch.randint(0, 2, (1,), generator=g))})

    def pad(features):  # DataCollatorWithPadding(pad_to_multiple_of=8), without a tokenizer
        n = max(len(f["input_ids"]) for f in features)
        n = -(-n // PAD_TO) * PAD_TO
        return {"input_ids": torch.tensor([f["input_ids"] + [0] * (n - len(f["input_ids"])) for f in features]),
                "attention_mask": torch.tensor([[1] * len(f["input_ids"]) + [0] * (n - len(f["input_ids"]))
                                                for f in features]),
                "labels": torch.tensor([f["labels"] for f in features])}

    class StepTimes(TrainerCallback):
        def __init__(self):
            self.times, self._t0 = [], 0.0

        def on_step_begin(self, args, state, control, **kw):
            self._t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            self.times.append(time.perf_counter() - self._t0)

    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(**CONFIG))
    name = variant.split("@")[0]
    if name == "jit":
        model = thunderlab.jit(model)
    elif name == "tc_thunderlab":
        model = torch.compile(model, backend="thunderlab")
    args = TrainingArguments(
        output_dir=tempfile.mkdtemp(), per_device_train_batch_size=BATCH, max_steps=steps, logging_steps=20,
        report_to=[], save_strategy="no", use_cpu=True, seed=0, dataloader_num_workers=0, disable_tqdm=True,
        torch_compile=name == "tc_inductor", remove_unused_columns=name != "tc_thunderlab")
    times = StepTimes()
    trainer = Trainer(model=model, args=args, train_dataset=texts, data_collator=pad, callbacks=[times])
    t0 = time.perf_counter()
    trainer.train()
    train_s = time.perf_counter() - t0
    out = {"train_s": train_s, "step_s": times.times,
           "steady_step_s": statistics.median(times.times[-len(times.times) // 4:]),
           "second_half_s": sum(times.times[len(times.times) // 2:]),
           "losses": [h["loss"] for h in trainer.state.log_history if "loss" in h]}
    if name in ("jit", "tc_thunderlab"):
        out["records"] = len(thunderlab.records())
        if name == "jit":
            out["cache_info"] = model.cache_info
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--against", help="another source tree: adds jit@DIR")
    ap.add_argument("--cache-dir", default=os.path.join(tempfile.gettempdir(), "thunderlab_bench_inductor_cache"))
    ap.add_argument("--label", default="", help="what this run was (code, cache, load): kept beside its results")
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "finetune.json"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        variant, root = a.child.split("|")
        print(json.dumps(child(variant, root, a.steps)))
        return
    sys.path.insert(0, ROOT)
    from benchmarks.paired import write_report

    runs = [(v, ROOT) for v in a.variants.split(",")]
    if a.against:
        runs.append((f"jit@{os.path.abspath(a.against)}", os.path.abspath(a.against)))
    results = {}
    for variant, root in runs:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=a.cache_dir, PYTHONWARNINGS="ignore")
        load = os.getloadavg()[0]
        proc = subprocess.run([sys.executable, __file__, "--child", f"{variant}|{root}", "--steps", str(a.steps)],
                              env=env, capture_output=True, text=True, timeout=3600)
        if proc.returncode != 0:
            results[variant] = {"error": proc.stderr[-2000:]}
            print(variant, "failed:", proc.stderr[-500:], flush=True)
            continue
        r = results[variant] = json.loads(proc.stdout.strip().splitlines()[-1])
        r["load_before"] = load
        print(f"{variant:40s} train {r['train_s']:.2f} s  steady {r['steady_step_s'] * 1000:.1f} ms  "
              f"second half {r['second_half_s']:.2f} s  {r.get('cache_info', '')}  load {load:.1f}", flush=True)
    eager = results.get("eager", {})
    summary = {}
    for variant, r in results.items():
        if "train_s" not in r:
            summary[variant] = {"error": r["error"].strip().splitlines()[-1:]}
            continue
        s = summary[variant] = {"train_s": round(r["train_s"], 2), "steady_ms": round(r["steady_step_s"] * 1e3, 2),
                                "second_half_s": round(r["second_half_s"], 2)}
        if "train_s" in eager:
            s["vs_eager"] = {"train": round(r["train_s"] / eager["train_s"], 3),
                             "steady": round(r["steady_step_s"] / eager["steady_step_s"], 3),
                             "second_half": round(r["second_half_s"] / eager["second_half_s"], 3)}
            s["losses_match_eager"] = len(r["losses"]) == len(eager["losses"]) and all(
                abs(x - y) <= 1e-3 + 1e-3 * abs(y) for x, y in zip(r["losses"], eager["losses"]))
        if "cache_info" in r:
            s["records"], s["ran_as_captured"] = r["records"], r["cache_info"]["ran_as_captured"]
    write_report(a.out, "benchmarks/finetune.py",
                 {"steps": a.steps, "config": CONFIG, "batch": BATCH, "pad_to_multiple_of": PAD_TO,
                  "lengths": [SHORTEST, LONGEST - 1], "label": a.label, "torch_threads": 1,
                  "inductor_cache_dir": a.cache_dir}, summary, results=results)


if __name__ == "__main__":
    main()
