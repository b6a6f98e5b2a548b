"""The tutorials run top to bottom in a real kernel, twice: with the reference answers filled in (every
exercise passes) and as shipped (each exercise's check cell fails with its own message; nothing else fails).

Each tutorial runs once per mode in a test session (cached); the per-exercise tests read those runs, so
``pytest tests/tutorials -k 03.2`` checks one exercise and executes only its tutorial.
"""
from __future__ import annotations

import os
from functools import cache

import nbformat
import pytest

from .fill import TUTORIALS, answers, execute, exercise_ids, filled, tags

IDS = [p.stem for p in TUTORIALS]


@cache
def run(stem: str, mode: str, workdir: str):
    """Execute one tutorial ("answers" or "shipped"); returns (notebook, errors by cell index, seconds)."""
    path = next(p for p in TUTORIALS if p.stem == stem)
    nb = nbformat.read(path, as_version=4)
    if mode == "answers":
        nb = filled(nb, answers(path))
    cwd = os.path.join(workdir, f"{stem}-{mode}")
    os.makedirs(cwd, exist_ok=True)
    errors, seconds = execute(nb, cwd)
    return nb, errors, seconds


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    base = tmp_path_factory.mktemp("tutorials")
    with pytest.MonkeyPatch.context() as mp:  # the kernels get their own Jupyter and IPython folders
        for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
            d = base / var.lower()
            d.mkdir()
            mp.setenv(var, str(d))
        mp.setenv("THUNDERLAB_EXECUTORS", os.environ.get("THUNDERLAB_EXECUTORS", "torch"))
        yield str(base)


def _cell(nb, tag: str) -> int:
    return next(i for i, c in enumerate(nb.cells) if tag in tags(c))


def _describe(nb, errors) -> str:
    return "; ".join(f"cell {i} ({', '.join(tags(nb.cells[i])) or 'untagged'}): {o['ename']}: {o['evalue']}"
                     for i, o in sorted(errors.items()))


EXERCISES = [(p.stem, ex) for p in TUTORIALS for ex in exercise_ids(nbformat.read(p, as_version=4))]


@pytest.mark.parametrize("stem", IDS)
def test_runs_with_answers(stem, workdir):
    nb, errors, _ = run(stem, "answers", workdir)
    assert not errors, _describe(nb, errors)
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    for ex in exercise_ids(nb):
        assert f"exercise {ex}: correct" in printed


@pytest.mark.parametrize("stem", IDS)
def test_runs_as_shipped_failing_only_in_exercises(stem, workdir):
    nb, errors, _ = run(stem, "shipped", workdir)
    checks = {_cell(nb, f"check-{ex}") for ex in exercise_ids(nb)}
    assert set(errors) == checks, _describe(nb, errors)


@pytest.mark.parametrize("stem,ex", EXERCISES, ids=[f"{s[:2]}-{e}" for s, e in EXERCISES])
def test_exercise(stem, ex, workdir):
    """Solvable with the reference answer; as shipped, its check fails with a message naming it."""
    nb, errors, _ = run(stem, "answers", workdir)
    check = _cell(nb, f"check-{ex}")
    assert check not in errors, _describe(nb, {check: errors[check]})
    assert any(f"exercise {ex}: correct" in o.get("text", "") for o in nb.cells[check].outputs)
    nb, errors, _ = run(stem, "shipped", workdir)
    err = errors.get(_cell(nb, f"check-{ex}"))
    assert err is not None, f"exercise {ex} passed as shipped: its blank is not checked"
    assert err["ename"] == "ExerciseError" and err["evalue"].startswith(f"exercise {ex}: "), err["evalue"]


@pytest.mark.parametrize("path", TUTORIALS, ids=IDS)
def test_shipped_without_outputs_and_well_formed(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code)
    assert "You will learn to" in nb.cells[0].source and "Time:" in nb.cells[0].source
    assert "to_html(" in "".join(c.source for c in code[-2:])  # ends with the report
    assert "sys.exit" not in "".join(c.source for c in code)
    ids = exercise_ids(nb)
    assert ids and len(ids) == len(set(ids)) and all(i.startswith(path.stem[:2] + ".") for i in ids)
    assert set(answers(path)) == set(ids)
    for ex in ids:  # each exercise cell is followed by its check cell
        assert _cell(nb, f"check-{ex}") == _cell(nb, f"exercise-{ex}") + 1


def test_there_are_tutorials():
    assert [p.name[:2] for p in TUTORIALS] == [f"{i:02d}" for i in range(1, len(TUTORIALS) + 1)]
