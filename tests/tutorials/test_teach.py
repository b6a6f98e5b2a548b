"""thunderlab.teach: each check names what is wrong (the exercise, the statement, the pass, the element)."""
import pytest
import torch

from thunderlab import teach
from thunderlab.ops import ltorch
from thunderlab.passes.dce import dce_trace


def _trace():
    def fn(x, y):
        dead = ltorch.exp(x)  # noqa: F841
        return ltorch.add(ltorch.mul(x, y), 1.0)

    return teach.trace_of(fn, torch.randn(2, 3), torch.randn(2, 3), names=("x", "y"))


def test_blanks_are_not_done_yet():
    def blank():
        raise NotImplementedError("exercise 9.1: write me")

    with pytest.raises(teach.ExerciseError, match=r"^exercise 9.1: not done yet: blank raised NotImplementedError"):
        teach.attempt("9.1", blank)
    with pytest.raises(teach.ExerciseError, match=r"^exercise 9.2: not done yet: pipeline is still `...`"):
        teach.require("9.2", ..., "pipeline")
    with pytest.raises(teach.ExerciseError, match=r"exercise 9.3: f raised ZeroDivisionError"):
        teach.attempt("9.3", lambda: 1 / 0, what="f")


def test_check_close_names_the_element():
    want = torch.zeros(2, 3)
    got = want.clone()
    got[1, 2] = 0.5
    with pytest.raises(teach.ExerciseError, match=r"differs at element \[1, 2\]: got 0.5, expected 0 \(1 of 6"):
        teach.check_close("1.1", got, want)
    with pytest.raises(teach.ExerciseError, match=r"out 1 has dtype torch.int64, expected torch.float32"):
        teach.check_close("1.1", (want, torch.zeros(3, dtype=torch.long)), (want, torch.zeros(3)), what="out")
    with pytest.raises(teach.ExerciseError, match=r"shape \(3,\), expected \(2, 3\)"):
        teach.check_close("1.1", torch.zeros(3), want)
    teach.check_close("1.1", want, want)


def test_check_calls_names_the_statement():
    t = _trace()
    teach.check_calls("2.1", t, ["ltorch.exp", "ltorch.mul", "ltorch.add"])
    with pytest.raises(teach.ExerciseError, match=r"statement 1 of your trace is `t1 = ltorch.mul\(x, y\)`, "
                                                  r"expected a call of ltorch.sub"):
        teach.check_calls("2.1", t, ["ltorch.exp", "ltorch.sub", "ltorch.add"])
    with pytest.raises(teach.ExerciseError, match=r"ends after 3 statements; the next should call ltorch.neg"):
        teach.check_calls("2.1", t, ["ltorch.exp", "ltorch.mul", "ltorch.add", "ltorch.neg"])


def test_check_pass_checks_purity_form_numbers_and_reference():
    t = _trace()
    inputs = (torch.randn(2, 3), torch.randn(2, 3))
    out = teach.check_pass("3.1", dce_trace, t, inputs, reference=dce_trace)
    assert teach.calls(out) == ["ltorch.mul", "ltorch.add"]

    def mutates(trace):
        trace.bound_symbols.pop(0)
        return trace

    with pytest.raises(teach.ExerciseError, match="changed the trace it was given"):
        teach.check_pass("3.1", mutates, _trace(), inputs)

    def drops_a_needed_call(trace):
        return trace.derive(bound_symbols=trace.bound_symbols[2:])

    with pytest.raises(teach.ExerciseError, match=r"is malformed: .*uses t1 before it is defined"):
        teach.check_pass("3.1", drops_a_needed_call, t, inputs)

    with pytest.raises(
        teach.ExerciseError,
        match=r"statement 0 of the trace <lambda> returned is `t0 = ltorch.exp\(x\)`; "
        r"dce_trace's has `t1 = ltorch.mul\(x, y\)`",
    ):
        teach.check_pass("3.1", lambda tr: tr.derive(), t, inputs, reference=dce_trace)


def test_decomposition_prints_levels():
    t = teach.trace_of(lambda a, b: ltorch.add(a, b), torch.randn(2, 3), torch.randn(3))
    text = teach.decomposition(t.bound_symbols[0], depth=1)
    assert text.splitlines()[0].startswith("t1 = ltorch.add(a0, a1)")
    assert "prims.broadcast_in_dim(a1, (2, 3), (1,))   # prim" in text


def test_fill_writes_a_caught_up_notebook(tmp_path):
    """The catch-up file: answers filled in for the exercises named, blanks kept for the rest."""
    import subprocess
    import sys

    import nbformat

    from .fill import ROOT, TUTORIALS, tags

    src = next(p for p in TUTORIALS if p.name.startswith("03_"))
    out = tmp_path / "caught_up.ipynb"
    subprocess.run([sys.executable, str(ROOT / "tests/tutorials/fill.py"), str(src), "-o", str(out), "--only", "03.1"],
                   check=True, capture_output=True)
    cells = {t: c.source for c in nbformat.read(out, as_version=4).cells for t in tags(c)}
    assert "NotImplementedError" not in cells["exercise-03.1"] and "live" in cells["exercise-03.1"]
    assert "NotImplementedError" in cells["exercise-03.2"]
    assert cells["exercise-03.4"].strip() == "pipeline = ..."
