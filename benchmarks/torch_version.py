"""thunderlab's tests against the torch release of the Python that runs this script (the package allows
torch>=2.10; CI tests the release the Makefile pins): `make test-torch TORCH_VERSION=2.11.0` makes a venv with
that release and runs this with it.

Runs pytest over --dirs (default: the compiler's own tests, which need nothing beyond torch, transformers and the
test helpers; the model zoo, the notebooks and the UI are left out) with THUNDERLAB_EXECUTORS=torch as
`make test` has it, and writes --out (default benchmarks/results/torch<version>_tests.json): torch's version, the
counts, each failure with its message, and the skip reasons.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))
from bench import junit_counts  # noqa: E402

DIRS = "tests/core,tests/executors,tests/passes,tests/frontend,tests/training,tests/ops"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dirs", default=DIRS, help=f"comma-separated test paths (default {DIRS})")
    ap.add_argument("--out", default=None, help="the JSON to write (default benchmarks/results/torch<v>_tests.json)")
    a = ap.parse_args()
    version = torch.__version__.split("+")[0]
    out = Path(a.out or ROOT / "benchmarks" / "results" / f"torch{version.replace('.', '')}_tests.json")
    dirs = [d for d in a.dirs.split(",") if d]
    missing = [d for d in dirs if not (ROOT / d).exists()]
    if missing:
        raise SystemExit(f"--dirs: no such test path: {', '.join(missing)}")
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        env = dict(os.environ, THUNDERLAB_EXECUTORS="torch", PYTHONPATH=str(ROOT))
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}",
                              *dirs], cwd=ROOT, env=env)
        counts = junit_counts(xml)
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "torch": torch.__version__, "python": platform.python_version(),
              "cuda_available": torch.cuda.is_available(),
              "dirs": dirs, "pytest_exit_status": rc, "wall_s": round(time.perf_counter() - t0, 1), **counts}
    out.write_text(json.dumps(result, indent=1) + "\n")
    failed = counts.get("failures", 0) + counts.get("errors", 0)
    print(f"torch {torch.__version__}: {counts.get('passed')} passed, {failed} failed, "
          f"{counts.get('skipped')} skipped; {out}")


if __name__ == "__main__":
    main()
