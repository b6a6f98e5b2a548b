"""What a live function's record costs: its steps share what passes left unchanged, its IR has no per-object
dicts, and compiled training programs share one autograd.Function class; a record that is not among the recently
used keeps its steps packed, and a dropped function's record lets go of its programs."""
import gc
import sys
import types
import weakref
from dataclasses import dataclass

import pytest
import torch

import thunderlab
from thunderlab.core.program import Program, Training
from thunderlab.core.proxies import ScalarInput, TensorProxy
from thunderlab.core.symbols import SourceInfo
from thunderlab.core.trace import Trace
from thunderlab.inspect import packed
from thunderlab.inspect.record import CompileRecord, Step, Verification


def _step(record, spec):
    return next(s for s in record.steps if s.spec == spec)


def _calls(record):
    for s in record.steps:
        for t in s.program or ():
            for b in t.bound_symbols:
                yield b
                yield from b.flat()


def test_ir_values_have_no_instance_dict():
    x = torch.randn(2, 3)
    j = thunderlab.jit(lambda a: (a.sin() + 1).sum())
    j(x)
    record = thunderlab.last_record(j)
    step = record.steps[-1]
    trace = step.program.forward
    bsym = trace.bound_symbols[0]
    values = [trace, step.program, step, step.verification, bsym, trace.inputs[0],
              SourceInfo("f.py", 1), ScalarInput("s0", 3), Training(("a",), ("b",))]
    assert [type(v).__name__ for v in values if hasattr(v, "__dict__")] == []
    assert isinstance(trace.inputs[0], TensorProxy) and isinstance(trace, Trace) and isinstance(step.program, Program)
    assert isinstance(step.verification, Verification)


def test_steps_share_the_traces_a_pass_left_unchanged():
    def f(a, b):
        return (a @ b).relu() + 2  # nothing dead, nothing repeated: dce and cse change nothing

    x, w = torch.randn(4, 8), torch.randn(8, 8)
    j = thunderlab.jit(f)
    out = j(x, w)
    torch.testing.assert_close(out, f(x, w))
    record = thunderlab.last_record(j)
    capture, dce, cse = record.steps[0], _step(record, "dce"), _step(record, "cse")
    assert dce.program is capture.program and cse.program is capture.program
    # every record feature still reads the shared steps
    assert record.diff(0, 2) == "" and "ltorch.relu" in cse.python()
    gd = record.graph_diff(0, 2)
    assert (gd.added, gd.removed, gd.changed) == ([], [], [])
    assert "dce" in record.table()
    rerun = thunderlab.rerun(record, "cse,dce,del")
    assert rerun.error is None and [s.spec for s in rerun.steps] == ["capture", "cse", "dce", "del"]
    assert rerun.steps[2].program is rerun.steps[0].program
    assert thunderlab.bisect(record) is None


def test_a_changed_trace_is_a_new_trace():
    x = torch.randn(4, 8, requires_grad=True)
    j = thunderlab.jit(lambda a: (a * 3).exp().sum())
    j(x)
    record = thunderlab.last_record(j)
    del_step = _step(record, "del")
    before = record.steps[del_step.index - 1]
    assert del_step.program.forward is not before.program.forward  # del adds calls
    assert "    del " in del_step.python()


def test_compiled_training_programs_share_one_autograd_function():
    x = torch.randn(4, 8, requires_grad=True)
    y1 = thunderlab.jit(lambda a: (a * 2).tanh())(x)
    y2 = thunderlab.jit(lambda a: (a - 1).sigmoid())(x)
    assert type(y1.grad_fn) is type(y2.grad_fn)
    (y1.sum() + y2.sum()).backward()
    expected = 2 * (1 - torch.tanh(2 * x) ** 2) + torch.sigmoid(x - 1) * (1 - torch.sigmoid(x - 1))
    torch.testing.assert_close(x.grad, expected.detach())


def test_a_records_calls_keep_no_derived_caches_after_compiling():
    j = thunderlab.jit(lambda a: torch.nn.functional.layer_norm(a, (8,)).relu())
    j(torch.randn(4, 8))
    record = thunderlab.last_record(j)
    cached = [b for b in _calls(record) if any(getattr(b, n) is not None for n in ("_inputs", "_outputs", "_printed"))]
    assert cached == []
    assert "ltorch.layer_norm" in record.steps[-1].python()  # made again on demand
    assert all(b.outputs is not None for b in _calls(record))


# -- records beyond the recently used keep their steps packed ---------------------------------------------------

def _compiled_record(fn, *args):
    j = thunderlab.jit(fn)
    out = j(*args)
    return j, out, thunderlab.last_record(j)


def _program_objects(record):
    """Weak references to every program, trace and call the record's steps hold."""
    refs = []
    for s in record.steps:
        if s.program is None:
            continue
        refs.append(weakref.ref(s.program))
        for t in s.program:
            refs.append(weakref.ref(t))
            refs += [weakref.ref(b) for b in t.bound_symbols]
    return refs


def _views(record):
    """What a user reads of a record: each step's text per trace, the pass table, diffs, notes, verification."""
    steps = record.steps
    texts = [{n: s.python(n) for n in s.program.traces} if s.program is not None else None for s in steps]
    return {"texts": texts, "table": record.table(), "diff": record.diff(0, len(steps) - 1),
            "notes": [s.notes for s in steps], "verification": [s.verification for s in steps],
            "specs": [(s.index, s.spec, s.seconds, s.resolved, s.pass_type) for s in steps],
            "graph_diff": [(sorted(g.added), sorted(g.removed), sorted(g.changed))
                           for g in [record.graph_diff(0, len(steps) - 1)]]}


def _others(n):
    """``n`` more compiled functions, each with its record: the earlier records are no longer the recent ones."""
    x = torch.randn(3)
    return [_compiled_record(lambda a, k=k: a * k + 1, x)[0] for k in range(n)]


@pytest.fixture
def two_recent(monkeypatch):
    monkeypatch.setattr(packed, "RECENT", 2)


def test_a_dropped_functions_record_lets_go_of_its_programs_and_still_reads_the_same(two_recent):
    x = torch.randn(4, 8, requires_grad=True)
    j, out, record = _compiled_record(lambda a: (a.sin() * 2).sum(), x)
    before = _views(record)
    refs = _program_objects(record)
    assert refs and not record.packed
    del j, out
    gc.collect()
    assert all(r() is not None for r in refs)  # the process's list keeps the record, with its steps
    keep = _others(2)
    gc.collect()
    assert record.packed and record in thunderlab.records()
    assert repr(record).endswith(f"{len(before['texts'])} steps>") and record.packed  # shown without unpacking
    assert [r for r in refs if r() is not None] == []  # its programs, traces and calls are released
    assert _views(record) == before  # read again from the packed steps
    assert not record.packed  # read, so recent again
    del keep


def test_the_sidebars_list_of_records_reads_packed_records_without_unpacking_them(two_recent):
    from thunderlab.jupyter.comm import _row

    x = torch.randn(4, 8)
    j, _, record = _compiled_record(lambda a: (a.cos() + 1).sum(), x)
    row = _row(0, record)
    keep = _others(2)
    assert record.packed
    packed_row = _row(0, record)
    assert record.packed  # still: a row needs the step count and where the graph came from, kept beside the block
    assert packed_row == row and row["steps"] == len(record.steps) and row["origin"]["summary"].startswith(
        "TorchDynamo frame ")
    del j, keep


def test_a_packed_record_shares_steps_and_symbols_as_before(two_recent):
    def f(a, b):
        return (a @ b).relu() + 2  # dce and cse change nothing: their steps share capture's program

    x, w = torch.randn(4, 8), torch.randn(8, 8)
    j, out, record = _compiled_record(f, x, w)
    syms = [b.sym for b in record.steps[-1].program.forward.bound_symbols]
    keep = _others(2)
    assert record.packed
    capture, dce, cse = record.steps[0], record.steps[1], record.steps[2]
    assert (dce.spec, cse.spec) == ("dce", "cse")
    assert dce.program is capture.program and cse.program is capture.program
    assert [b.sym for b in record.steps[-1].program.forward.bound_symbols] == syms
    assert all(a is b for a, b in zip((b.sym for b in record.steps[-1].program.forward.bound_symbols), syms))
    torch.testing.assert_close(j(x, w), f(x, w))
    del keep


def test_a_packed_live_record_reruns_bisects_and_shows(two_recent):
    x = torch.randn(4, 8, requires_grad=True)
    j = thunderlab.jit(lambda a: (a * 3).exp().sum(), keep_inputs=True)
    j(x)
    record = thunderlab.last_record(j)
    payload = record.payload().to_dict()
    keep = _others(2)
    assert record.packed
    assert record.payload().to_dict() == payload
    rerun = thunderlab.rerun(record, "cse,dce,autodiff,del")
    assert rerun.error is None and [s.spec for s in rerun.steps] == ["capture", "cse", "dce", "autodiff", "del"]
    assert thunderlab.bisect(record) is None
    del keep


def test_what_a_step_refers_to_but_does_not_own_comes_back_as_itself(two_recent):
    marker = torch.ones(2)

    def hook():
        return marker

    @thunderlab.passes.register_pass
    @dataclass(frozen=True)
    class Noted(thunderlab.passes.Pass):
        """test-noted: keeps the program, notes a tensor and a function."""

        name = "test-noted"

        def __call__(self, program):
            return program

        def describe(self, before, after):
            return thunderlab.passes.Notes("noted", {"tensor": marker, "hook": hook})

    try:
        j = thunderlab.jit(lambda a: a + 1, pipeline="test-noted,del")
        j(torch.randn(2))
        record = thunderlab.last_record(j)
        keep = _others(2)
        assert record.packed
        facts = record.steps[1].notes.facts
        assert facts["tensor"] is marker and facts["hook"] is hook
        assert record.steps[1].pass_type is Noted
    finally:
        thunderlab.passes.base.REGISTRY.pop("test-noted", None)
    del keep


def test_a_record_is_packed_only_once_closed(two_recent):
    record = CompileRecord("f", [], "dce")
    record.steps.append(Step(0, "capture", 0.0, None, 0, 0))
    assert not record.pack() and not record.packed
    record.close()
    assert record.pack() and record.packed
    assert [s.spec for s in record.steps] == ["capture"]


def test_a_pass_class_defined_again_under_its_name_is_not_taken_for_the_one_that_ran(two_recent, monkeypatch):
    module = types.ModuleType("notebook_cell")
    monkeypatch.setitem(sys.modules, "notebook_cell", module)

    def define():
        @dataclass(frozen=True)
        class Cell(thunderlab.passes.Pass):
            """test-cell: keeps the program."""

            name = "test-cell"

            def __call__(self, program):
                return program

        Cell.__module__, Cell.__qualname__ = "notebook_cell", "Cell"
        module.Cell = Cell
        return thunderlab.passes.register_pass(Cell)

    first = define()
    try:
        j = thunderlab.jit(lambda a: a * 2, pipeline="test-cell,del")
        j(torch.randn(2))
        record = thunderlab.last_record(j)
        keep = _others(2)
        assert record.packed
        second = define()  # the cell run again: the name now means another class
        assert second is not first and record.steps[1].pass_type is first
        assert thunderlab.passes.base.REGISTRY["test-cell"] is second
    finally:
        thunderlab.passes.base.REGISTRY.pop("test-cell", None)
    del keep
