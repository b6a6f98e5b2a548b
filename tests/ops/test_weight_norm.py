"""Weight norm (``torch.nn.utils.parametrizations.weight_norm``): PyTorch's documentation gives the weight as
g * v / ||v||, the norm taken over every dimension but ``dim`` (over the whole tensor for ``dim=None``). The
compiled layer gives eager's outputs and gradients for g, v and the bias, from the ops of that formula rather
than by running the weight's computation again under PyTorch's autograd."""
from __future__ import annotations

import pytest
import torch

import thunderlab


@pytest.mark.parametrize("dim", [0, 1, 2, -1, None])
def test_weight_norm_matches_eager_and_differentiates_by_its_formula(dim):
    torch.manual_seed(0)
    conv = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(4, 6, 3), dim=dim)
    x = torch.randn(2, 4, 9)

    def fn(x):
        return conv(x).sin().sum()

    j = thunderlab.jit(fn)
    out = j(x)
    params = list(conv.parameters())
    got = torch.autograd.grad(out, params)
    want = torch.autograd.grad(fn(x), params)
    torch.testing.assert_close(out, fn(x))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    backward = thunderlab.last_record(j).program.traces["backward"].python()
    assert "eager_vjp" not in backward, backward
