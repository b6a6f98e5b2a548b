"""autodiff on hand-built traces: the training program's parts, checked against torch.autograd."""
import pytest
import torch

import thunderlab
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


def _backward_calls(j):
    import collections

    bw = thunderlab.last_record(j).steps[-1].program.traces["backward"]
    return collections.Counter(b.sym.qualname for b in bw.bound_symbols)


def test_gradients_of_slices_of_one_value_are_put_together_with_one_cat():
    """A fused projection split by slicing (``qkv[..., :4]``, ``qkv[..., 4:8]``, ``qkv[..., 8:]``): the gradients
    equal autograd's, and the backward joins the three slices' gradients with one cat instead of a zero tensor
    per slice. Overlapping or strided slices are summed as before, with the same gradients."""
    def fused(x, w):
        y = x @ w
        q, k, v = y[..., :4], y[..., 4:8], y[..., 8:]
        return (q * k).sum() + (v.sin() * 2).sum()

    def overlapping(x, w):
        y = x @ w
        return (y[:, :8].exp() * 3).sum() + (y[:, 4:].sin()).sum() + (y[:, ::2] ** 2).sum()

    for f, cats in ((fused, 1), (overlapping, 0)):
        x, w = torch.randn(3, 5, requires_grad=True), torch.randn(5, 12, requires_grad=True)
        x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        j = thunderlab.jit(f, pipeline="dce,cse,autodiff,claim{executors=torch},del")
        j(x, w).backward()
        f(x2, w2).backward()
        torch.testing.assert_close(x.grad, x2.grad)
        torch.testing.assert_close(w.grad, w2.grad)
        calls = _backward_calls(j)
        assert calls["prims.cat"] == cats, calls
        assert calls["ltorch.getitem_backward"] == (0 if cats else 3), calls
