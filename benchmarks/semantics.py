"""The semantics suite's counts by class: tests passed/failed, and entry checks equal to eager or refused by name.

    python benchmarks/semantics.py     # writes benchmarks/results/semantics.json

Counts: cases run, entry checks equal to eager ("ok") or refused by name ("refused"), and failed cases
split into "wrong" (a value, dtype, alias or gradient that differs from eager) and "raw errors" (any
other exception). A case passes when every entry point (thunderlab.jit, torch.compile(backend="thunderlab"), the
fully decomposed pipeline, and others where named) gives eager's values, dtypes, requires_grad,
aliasing, mutated inputs, gradients and random stream, or refuses with an error naming the construct.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]


def main():
    with tempfile.TemporaryDirectory() as d:
        report = Path(d, "semantics.json")
        env = dict(os.environ, THUNDERLAB_SEMANTICS_REPORT=str(report))
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:warnings", "tests/semantics"], cwd=ROOT,
                           env=env, capture_output=True, text=True)
        classes = json.loads(report.read_text())
    total = {k: sum(c.get(k, 0) for c in classes.values())
             for k in ("tests passed", "tests failed", "entry checks ok", "entry checks refused", "wrong",
                       "raw errors")}
    total["cases run"] = total["tests passed"] + total["tests failed"]
    out = {"classes": classes, "total": total, "seconds": round(time.perf_counter() - t0, 1),
           "pytest": r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr[-500:]}
    print(json.dumps(out, indent=1))
    path = ROOT / "benchmarks" / "results" / "semantics.json"
    path.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
