"""How long each tutorial takes to execute top to bottom in a fresh kernel, with the reference answers and as
shipped (blanks), on this machine; writes benchmarks/results/tutorials.json.

    python benchmarks/tutorials.py [--cold]

The times include starting the kernel and importing torch and thunderlab (most of each run). Inductor's disk cache
is a fresh folder per run with --cold (tutorial 04 then pays its one kernel compile), else the shared default.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

import nbformat
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.tutorials.fill import TUTORIALS, answers, execute, filled  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cold", action="store_true", help="a fresh TorchInductor cache for every run")
    a = ap.parse_args()
    os.environ.setdefault("THUNDERLAB_EXECUTORS", "torch")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    results = []
    for path in TUTORIALS:
        row = {"tutorial": path.stem}
        for mode in ("answers", "shipped"):
            nb = nbformat.read(path, as_version=4)
            if mode == "answers":
                nb = filled(nb, answers(path))
            with tempfile.TemporaryDirectory() as d:
                if a.cold:
                    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(d, "inductor")
                errors, seconds = execute(nb, Path(d))
            row[f"{mode}_s"] = round(seconds, 1)
            row[f"{mode}_failing_cells"] = len(errors)
        print(row, flush=True)
        results.append(row)
    out = {
        "benchmark": "tutorials",
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": {"python": sys.version.split()[0], "torch": torch.__version__, "platform": platform.platform(),
                    "cpus": os.cpu_count(), "load_average_1min": round(os.getloadavg()[0], 1)},
        "cold_inductor_cache": a.cold,
        "results": results,
        "total_answers_s": round(sum(r["answers_s"] for r in results), 1),
        "total_both_s": round(sum(r["answers_s"] + r["shipped_s"] for r in results), 1),
    }
    (ROOT / "benchmarks" / "results" / "tutorials.json").write_text(json.dumps(out, indent=2) + "\n")
    print("total with answers:", out["total_answers_s"], "s; both runs:", out["total_both_s"], "s")


if __name__ == "__main__":
    main()
