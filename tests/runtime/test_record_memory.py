"""What a live function's record costs: its steps share what passes left unchanged, its IR has no per-object
dicts, and compiled training programs share one autograd.Function class."""
import torch

import thunderlab
from thunderlab.core.program import Program, Training
from thunderlab.core.proxies import ScalarInput, TensorProxy
from thunderlab.core.symbols import SourceInfo
from thunderlab.core.trace import Trace
from thunderlab.inspect.record import Verification


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
