"""remat on hand-built training programs: fewer values saved, the same gradients."""
import torch

from thunderlab.core.verify import check_program
from thunderlab.ops import ltorch
from thunderlab.passes.autodiff import Autodiff
from thunderlab.passes.remat import Remat

from .handbuilt import program, tensors


def f(x, w):
    h = ltorch.tanh(ltorch.mul(ltorch.exp(x), 2.0))  # cheap elementwise chain: recomputable
    return ltorch.sum(ltorch.matmul(h, w))


def _grads(prog, args):
    out, saved = prog.forward.callable()(*args)
    return out, saved, prog.backward.callable()(*saved, torch.ones(()))


def test_recomputing_saves_less_and_differentiates_the_same():
    before = Autodiff()(program(f, ("x", (4, 4), True), ("w", (4, 4), True)))
    after = Remat(recompute="all")(before)
    check_program(after)
    assert len(after.saved) <= len(before.saved)
    saved_bytes = lambda p: sum(v.numel() * v.dtype.itemsize for v in p.saved)  # noqa: E731
    assert saved_bytes(after) < saved_bytes(before)
    assert any(b.origin is None and b.derived_from for b in after.backward.bound_symbols[:3])  # recomputed in backward
    args = tensors(before.forward)
    out0, _, g0 = _grads(before, args)
    out1, _, g1 = _grads(after, args)
    torch.testing.assert_close(out1, out0)
    torch.testing.assert_close(tuple(g1), tuple(g0))
    assert after.training.grad_of == before.training.grad_of


def test_no_backward_nothing_to_do():
    p = program(f, ("x", (4, 4)), ("w", (4, 4)))
    assert Remat(recompute="all")(p) is p
