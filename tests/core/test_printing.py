"""Printed traces: deterministic, golden, and runnable (executing the text equals the trace)."""
import os
from pathlib import Path

import pytest
import torch

import thunderlab
from thunderlab.core.codegen import default_namespace

from .golden_fns import GOLDEN_CASES

GOLDEN = Path(__file__).parent / "golden"
PIPELINE = "dce,cse,claim{decompose=layer_norm+gelu},del"


def _steps(fn, args):
    jfn = thunderlab.jit(fn, pipeline=PIPELINE)
    jfn(*args)
    return thunderlab.last_record(jfn)


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_golden(case):
    fn, make = GOLDEN_CASES[case]
    rec = _steps(fn, make())
    text = "\n".join(f"## step {s.index} {s.spec}\n" + s.program.forward.python() for s in rec.steps)
    path = GOLDEN / f"{case}.txt"
    if os.environ.get("THUNDERLAB_UPDATE_GOLDEN") or not path.exists():
        path.write_text(text)
    assert text == path.read_text(), (
        f"printed trace of {case} changed; rerun with THUNDERLAB_UPDATE_GOLDEN=1 if intended"
    )


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_printing_is_deterministic(case):
    fn, make = GOLDEN_CASES[case]
    args = make()
    a = _steps(fn, args).steps[-1].program.forward.python()
    b = _steps(fn, args).steps[-1].program.forward.python()
    assert a == b


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_printed_program_runs_and_matches(case):
    """exec(trace.python()) as a user would, then compare with eager on every step."""
    fn, make = GOLDEN_CASES[case]
    args = make()
    rec = _steps(fn, args)
    expected = fn(*args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for step in rec.steps:
        src = step.python()
        g: dict = {}
        exec(compile(src, f"<step {step.index}>", "exec"), g)
        out = g["forward"](*args)
        for o, e in zip(out, expected):
            torch.testing.assert_close(o, e)


def test_source_lines_are_shown():
    fn, make = GOLDEN_CASES["mlp_layer"]
    text = _steps(fn, make()).steps[0].python()
    assert "golden_fns.py:7   return F.gelu(F.linear(x, w, b))" in text
    assert "# x: cpu f32[2, 8]" in text
    assert (
        "t0 = ltorch.linear(x, w, b)" in text.replace("  ", " ").replace("  ", " ") or "ltorch.linear(x, w, b)" in text
    )


def test_callable_round_trip_without_comments():
    fn, make = GOLDEN_CASES["norm_softmax"]
    args = make()
    trace = _steps(fn, args).steps[0].program.forward
    run = trace.callable(default_namespace())
    for o, e in zip(run(*args), fn(*args)):
        torch.testing.assert_close(o, e)
