"""dce on hand-built traces."""
import torch

from thunderlab.core.program import Program
from thunderlab.ops import ltorch, prims
from thunderlab.passes.dce import DCE

from .handbuilt import build, names, program, tensors


def test_unused_calls_go_and_used_ones_stay():
    def f(x, y):
        unused = ltorch.exp(ltorch.cos(x))  # noqa: F841  (nothing reads it)
        return ltorch.add(ltorch.sin(x), y)

    before = program(f, ("x", (4,)), ("y", (4,)))
    after = DCE()(before)
    assert names(before.forward) == ["cos", "exp", "sin", "add"]
    assert names(after.forward) == ["sin", "add"]
    assert [b.id for b in after.forward.bound_symbols] == [b.id for b in before.forward.bound_symbols[2:]]
    args = tensors(before.forward)
    torch.testing.assert_close(after.forward.callable()(*args), before.forward.callable()(*args))
    assert names(before.forward) == ["cos", "exp", "sin", "add"]  # the input program is left as it was


def test_calls_with_effects_stay_though_unused():
    def f(x):
        prims.uniform((4,), 0.0, 1.0, dtype=torch.float32, device=torch.device("cpu"))  # advances the generator
        prims.copy_(ltorch.neg(x), x)  # writes x
        return ltorch.sin(x)

    after = DCE()(program(f, ("x", (4,))))
    assert names(after.forward) == ["uniform", "neg", "copy_", "sin"]


def test_every_trace_of_a_program_is_cleaned():
    fw = build(lambda x: (ltorch.sin(x), ltorch.cos(x))[0], ("x", (3,)))
    other = build(lambda x: (ltorch.tanh(x), ltorch.exp(x))[1], ("x", (3,)), name="other")
    after = DCE()(Program({"forward": fw, "other": other}))
    assert names(after.forward) == ["sin"] and names(after.traces["other"]) == ["exp"]
