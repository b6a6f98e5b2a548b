"""Printed traces: deterministic, golden, and runnable (executing the text equals the trace)."""
import os
from pathlib import Path

import pytest
import torch

import thunderlab
from thunderlab.core.codegen import Printer, default_namespace, statement

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


# The line map: the printer says which line holds which call, as torch.fx's codegen does, so nothing has to
# find calls by reading the text back.
def test_the_line_map_points_every_call_at_its_statement_regions_included():
    def f(x, w):
        return (torch.sin(x @ w) + 1).relu() * 2

    j = thunderlab.jit(f, pipeline="claim{executors=inductor+torch},fuse,del")
    j(torch.randn(4, 8), torch.randn(8, 8))
    step = thunderlab.last_record(j).steps[-1]
    trace = step.program.forward
    code = trace.python_code(header=step.header())
    assert code.text == step.python()
    lines = code.text.split("\n")
    regions = [b for b in trace.bound_symbols if b.sym.is_region]
    assert regions, "fuse made no region"
    expected = [(m, r.sym.name) for r in regions for m in r.subsymbols] + [(b, None) for b in trace.bound_symbols]
    assert [(c.bsym, c.region) for c in code.calls] == expected
    for c in code.calls:
        assert lines[c.line - 1].split("  # ")[0].strip() == statement(Printer(), c.bsym)
        function = next(ln for ln in reversed(lines[: c.line]) if ln.startswith("def "))
        assert function.startswith(f"def {c.region or trace.name}(")
        assert code.call_at(c.line) is c
    assert code.call_at(1) is None  # the header


def test_the_line_map_counts_a_statement_a_custom_printer_spreads_over_two_lines():
    from thunderlab.core.symbols import Symbol
    from thunderlab.core.trace import Trace, current_trace
    from thunderlab.ops import ltorch

    def two_lines(printer, b):  # a statement and a second line of its own, indented like the body
        return f"{printer.targets(b.output)} = {printer.call(b)}\n    assert {printer.value(b.output)} is not None"

    ident = Symbol("ident", module="torch", impl=lambda a: a, printer=two_lines, qualname="ident",
                   meta=lambda a: current_trace().proxy(a.shape, a.dtype, a.device))
    t = Trace("f")
    x = t.proxy((2,), torch.float32, "cpu", name="x")
    t.inputs.append(x)
    with t.active():
        y = ident(x)
        t.output = ltorch.sin(y)
    code = t.python_code(packed=True, header="two\nlines")
    lines = code.text.split("\n")
    assert [c.bsym.sym.name for c in code.calls] == ["ident", "sin"]
    assert lines[code.calls[0].line].split("  # ")[0].strip() == f"assert {y.name} is not None"
    assert lines[code.calls[1].line - 1].split("  # ")[0].strip() == f"{t.output.name} = ltorch.sin({y.name})"
    torch.testing.assert_close(t.callable(packed=True)([torch.ones(2)]), torch.sin(torch.ones(2)))


def test_a_compiled_program_has_its_lines_for_tracebacks_and_inspect():
    """A printed program compiled to a function keeps its text in linecache: a traceback through it shows the
    failing line, inspect finds its source (torch.compile takes such a function as it is), and a second program
    of the same name keeps its own lines."""
    import inspect
    import traceback

    from thunderlab.core.codegen import compile_program

    def build(src):
        g = {}
        exec(compile_program(src, "region_for_test"), g)
        return g["region_for_test"]

    first = build("def region_for_test(x):\n    return x.no_such_method()\n")
    second = build("def region_for_test(x):\n    y = x + 1\n    return y.also_missing()\n")
    assert inspect.getsourcefile(first) is not None and inspect.getsource(first).startswith("def region_for_test")
    assert first.__code__.co_filename != second.__code__.co_filename
    for fn, line in ((first, "return x.no_such_method()"), (second, "return y.also_missing()")):
        try:
            fn(torch.ones(1))
        except AttributeError:
            assert line in traceback.format_exc()
        else:
            raise AssertionError("the program should have raised")
