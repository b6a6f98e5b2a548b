"""``detach`` and in-place writes on views of intermediates, in the backward, compared with eager.

Written from PyTorch's documentation of ``Tensor.detach`` (a new tensor sharing storage, outside
the graph: no gradient flows through it) and of in-place operations under autograd (a write
through a view of a non-leaf is recorded, and gradients flow through the written values).
"""
import pytest
import torch

from tests.semantics.harness import check


def _x(*shape):
    return lambda: (torch.randn(*shape, requires_grad=True),)


def times_detached(x):
    return x * x.detach()


def minus_detached(x):
    y = x.exp()
    return y - y.detach()


def straight_through(x):
    return x + (torch.round(x) - x).detach()


def detach_function(x):
    return torch.detach(x).sin() * x


def return_detached(x):
    return x.detach()


def detach_inplace(x):
    y = x * 2
    y.detach_()
    return y * x


def detach_in_sum(x):
    return (x.sin() * x.cos().detach()).sum()


def detached_then_written(x):
    y = x * 2
    y.detach().zero_()
    return y


def view_of_intermediate_add(x):
    y = x.sin()
    y.t()[0].add_(x[:, 0])
    return y


def slice_of_intermediate_mul(x):
    y = x * 2
    y[0].mul_(3)
    return y.sum()


def diagonal_of_clone_zero(x):
    y = x.clone()
    y.diagonal().zero_()
    return (y * x).sum()


def select_written_with_itself(x):
    y = x.cos()
    y[1].copy_(y[0] + x[1])
    return y


CASES = {
    "x*x.detach()": (times_detached, _x(4)),
    "y-y.detach()": (minus_detached, _x(4)),
    "straight-through": (straight_through, _x(4)),
    "torch.detach": (detach_function, _x(4)),
    "return-detached": (return_detached, _x(4)),
    "detach_": (detach_inplace, _x(4)),
    "detach-in-sum": (detach_in_sum, _x(4)),
    "detached-then-written": (detached_then_written, _x(4)),
    "view-of-intermediate-add": (view_of_intermediate_add, _x(3, 3)),
    "slice-of-intermediate-mul": (slice_of_intermediate_mul, _x(2, 3)),
    "diagonal-of-clone": (diagonal_of_clone_zero, _x(3, 3)),
    "select-written-with-itself": (select_written_with_itself, _x(2, 3)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_detach_and_views(name):
    fn, make = CASES[name]
    check(fn, make)
