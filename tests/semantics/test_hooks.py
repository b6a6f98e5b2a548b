"""Gradient hooks registered inside a compiled function, compared with eager.

Written from the documentation of ``Tensor.register_hook``: the hook is called every time a
gradient with respect to the tensor is computed, receives that gradient (the sum over all the
tensor's uses), and may return a new gradient to use in its place, or None to leave it.
"""
import torch

import thunderlab
from tests.semantics.harness import check


def _x():
    return (torch.randn(4, 4, requires_grad=True),)


def scaled(x):
    y = x * 2
    y.register_hook(lambda g: g * 3)
    return y.sum(1)


def used_twice(x):
    y = torch.sin(x)
    y.register_hook(lambda g: g.clamp(-0.1, 0.1))
    return y * y.T + y  # the hook sees the gradient summed over all three uses


def chained(x):
    y = x.exp()
    y.register_hook(lambda g: g + 1)
    z = y * 3
    z.register_hook(lambda g: g * 0.5)
    return z.mean(0)


def test_hooks_that_return_a_gradient():
    for fn in (scaled, used_twice, chained):
        check(fn, _x)


def test_a_hook_that_returns_none_sees_the_gradient_once_per_backward():
    seen = {"eager": [], "compiled": []}

    def make(key):
        def fn(x):
            y = torch.tanh(x) * 2
            y.register_hook(lambda g: seen[key].append(g.clone()))
            return (y * y).sum()
        return fn

    x = torch.randn(3, 3, requires_grad=True)
    make("eager")(x).backward()
    want = x.grad.clone()
    x.grad = None
    thunderlab.jit(make("compiled"))(x).backward()
    torch.testing.assert_close(x.grad, want)
    assert len(seen["compiled"]) == len(seen["eager"]) == 1
    torch.testing.assert_close(seen["compiled"][0], seen["eager"][0])
