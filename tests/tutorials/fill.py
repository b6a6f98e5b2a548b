"""Fill a tutorial's exercise cells with the reference answers, and run a notebook cell by cell.

Answers live in ``answers/NN_name.py``, one section per exercise, each opened by a line
``# %% exercise-NN.M``. As a command, this writes a tutorial with its answers filled in (the
workshop guide's catch-up file):

    python tests/tutorials/fill.py tutorials/03_dce_cse_and_your_own_pass.ipynb -o 03_solved.ipynb
"""
from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
ANSWERS = Path(__file__).resolve().parent / "answers"
TUTORIALS = sorted((ROOT / "tutorials").glob("[0-9][0-9]_*.ipynb"))


def tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def exercise_ids(nb) -> list[str]:
    """The exercises of a notebook, in order (from the tags ``exercise-NN.M`` of its cells)."""
    return [t.split("-", 1)[1] for c in nb.cells for t in tags(c) if t.startswith("exercise-")]


def answers(tutorial: Path) -> dict[str, str]:
    """Exercise id -> the reference source of its exercise cell."""
    text = (ANSWERS / (tutorial.stem + ".py")).read_text()
    out = {}
    for chunk in re.split(r"^# %% exercise-", text, flags=re.M)[1:]:
        ex, _, body = chunk.partition("\n")
        out[ex.strip()] = body.strip("\n")
    return out


def filled(nb, answer_map: dict[str, str]):
    """A copy of ``nb`` with each exercise cell's source replaced by its answer."""
    nb = nbformat.from_dict(nb)
    for c in nb.cells:
        for t in tags(c):
            if t.startswith("exercise-"):
                c.source = answer_map[t.split("-", 1)[1]]
    return nb


def execute(nb, cwd: Path, timeout: int = 300) -> tuple[dict[int, dict], float]:
    """Run every code cell in a fresh kernel, going on after errors; cell index -> its error output, and seconds."""
    from nbclient import NotebookClient

    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(cwd)}})
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    errors = {}
    for i, c in enumerate(nb.cells):
        for o in c.get("outputs", []) if c.cell_type == "code" else []:
            if o.get("output_type") == "error":
                errors[i] = o
    return errors, seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tutorial", type=Path)
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--only", help="fill only these exercises (comma-separated ids, e.g. 03.1,03.2)")
    a = ap.parse_args()
    nb = nbformat.read(a.tutorial, as_version=4)
    amap = answers(a.tutorial)
    if a.only:
        keep = set(a.only.split(","))
        amap = {k: v for k, v in amap.items() if k in keep}
        for c in nb.cells:
            for t in tags(c):
                ex = t.split("-", 1)[1] if t.startswith("exercise-") else None
                if ex and ex not in amap:
                    amap[ex] = c.source
    nbformat.write(filled(nb, amap), a.out)
    print(f"wrote {a.out} with {len(amap)} answers filled in")


if __name__ == "__main__":
    main()
