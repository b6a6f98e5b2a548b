"""cse on hand-built traces."""
import torch

from thunderlab.ops import ltorch, prims
from thunderlab.passes.cse import CSE

from .handbuilt import names, program, tensors


def test_the_same_call_on_the_same_inputs_is_computed_once():
    def f(x):
        a = ltorch.sin(x)
        b = ltorch.sin(x)
        return ltorch.mul(a, b)

    before = program(f, ("x", (4,)))
    after = CSE()(before)
    assert names(before.forward) == ["sin", "sin", "mul"]
    assert names(after.forward) == ["sin", "mul"]
    mul = after.forward.bound_symbols[-1]
    assert mul.args[0] is mul.args[1]  # both factors are the one sine
    x = tensors(before.forward)
    torch.testing.assert_close(after.forward.callable()(*x), before.forward.callable()(*x))


def test_constants_are_compared_exactly():
    def f(x):
        return ltorch.add(ltorch.mul(x, 0.0), ltorch.mul(x, -0.0)), ltorch.add(ltorch.mul(x, 2), ltorch.mul(x, 2.0))

    after = CSE()(program(f, ("x", (4,))))
    # 0.0 and -0.0 differ (1/-0.0), 2 and 2.0 promote differently: nothing merges
    assert names(after.forward).count("mul") == 4


def test_random_draws_and_writes_are_never_merged():
    def f(x):
        cpu = torch.device("cpu")
        u1 = prims.uniform((4,), 0.0, 1.0, dtype=torch.float32, device=cpu)
        u2 = prims.uniform((4,), 0.0, 1.0, dtype=torch.float32, device=cpu)
        before_write = ltorch.exp(x)
        prims.copy_(u1, x)
        after_write = ltorch.exp(x)  # reads x after the write: a different value
        return ltorch.add(u1, u2), ltorch.add(before_write, after_write)

    after = CSE()(program(f, ("x", (4,))))
    assert names(after.forward).count("uniform") == 2
    assert names(after.forward).count("exp") == 2
