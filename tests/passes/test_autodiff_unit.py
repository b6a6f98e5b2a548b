"""autodiff on hand-built traces: the training program's parts, checked against torch.autograd."""
import pytest
import torch

from thunderlab.core.verify import check_program
from thunderlab.ops import ltorch
from thunderlab.passes.autodiff import Autodiff

from .handbuilt import program, tensors


def f(x, w):
    return ltorch.sum(ltorch.mul(ltorch.sin(x), w)), ltorch.cos(x)


def _eager(x, w):
    return (torch.sin(x) * w).sum(), torch.cos(x)


def test_forward_and_backward_agree_with_autograd():
    before = program(f, ("x", (3, 4), True), ("w", (3, 4), True))
    after = Autodiff()(before)
    check_program(after)
    tr = after.training
    assert tr.grad_of == tuple(p.name for p in after.outputs)  # both outputs depend on x
    args = tensors(before.forward)
    out, saved = after.forward.callable()(*args)
    assert len(saved) == len(tr.saved)
    g_out = [torch.randn(()), torch.randn(3, 4)]
    grads = after.backward.callable()(*saved, *g_out)
    xs = [a.clone().requires_grad_() for a in args]
    ref = _eager(*xs)
    torch.testing.assert_close(out, ref)
    expect = torch.autograd.grad(ref, xs, g_out)
    torch.testing.assert_close(tuple(grads), expect)
    assert before.training is None and "backward" not in before.traces  # the input is left alone


def test_only_inputs_that_require_grad_get_gradients():
    after = Autodiff()(program(f, ("x", (3, 4), True), ("w", (3, 4), False)))
    assert after.backward.output[1] is None and after.backward.output[0] is not None


def test_nothing_to_differentiate_leaves_the_program():
    before = program(f, ("x", (3, 4)), ("w", (3, 4)))
    assert Autodiff()(before) is before


@pytest.mark.parametrize("bad", ["backward"])
def test_a_program_with_a_backward_is_not_differentiated_again(bad):
    once = Autodiff()(program(f, ("x", (3, 4), True), ("w", (3, 4), True)))
    assert Autodiff()(once) is once
