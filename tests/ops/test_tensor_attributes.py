"""``x.T``, ``x.mT``, ``x.H``, ``x.mH``: PyTorch's documentation (torch.Tensor) says each is a view, the
dimensions reversed (T), or the last two swapped (mT), conjugated for H and mH. TorchDynamo captures these
properties as ``getattr(x, "T")``; they are transposes in the trace, differentiated by the transpose's rule,
and a write through one reaches the tensor it views."""
from __future__ import annotations

import pytest
import torch

import thunderlab


def _linear_by_attribute(name):
    def fn(x, w):  # as Falcon's linear layer writes it: x @ w.T
        return (x @ getattr(w, name)).tanh().sum()
    return fn


@pytest.mark.parametrize("name", ["T", "mT", "H", "mH"])
def test_transposing_attributes_differentiate_by_the_transpose_rule(name):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 3, generator=g, requires_grad=True)
    w = torch.randn(4, 3, generator=g, requires_grad=True)
    fn = _linear_by_attribute(name)
    want = torch.autograd.grad(fn(x, w), (x, w))
    j = thunderlab.jit(fn)
    got = torch.autograd.grad(j(x, w), (x, w))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    backward = thunderlab.last_record(j).program.traces["backward"].python()
    assert "eager_vjp" not in backward, backward  # not by running getattr again under PyTorch's autograd


def test_t_of_a_3d_tensor_reverses_every_dimension():
    x = torch.randn(2, 3, 4)
    with pytest.warns(UserWarning):  # PyTorch deprecates .T beyond 2 dimensions, and still computes it
        want = x.T * 2
    got = thunderlab.jit(lambda x: x.T * 2)(x)
    assert got.shape == (4, 3, 2)
    torch.testing.assert_close(got, want)


def test_a_write_through_the_view_reaches_the_tensor():
    def fn(x):
        y = x.clone()
        y.mT.mul_(2)  # writes y through its transposed view
        y.T[0].add_(1)  # the first column of y
        return y

    x = torch.randn(3, 4)
    torch.testing.assert_close(thunderlab.jit(fn)(x), fn(x))


def test_complex_conjugating_attributes_stay_whole_and_equal_eager():
    x = torch.randn(3, 2, dtype=torch.complex64)
    torch.testing.assert_close(thunderlab.jit(lambda x: x.mH * 1)(x), x.mH * 1)
