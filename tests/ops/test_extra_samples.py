"""Samples OpInfo lacks, each one a call a real model makes that once went wrong in thunderlab.

Every entry is (op id in op_db, a sample, what the model does that the OpInfo samples do not);
the sample runs through the same checks as OpInfo's own: the forward in test_opinfo.py's
``check_sample`` and, where it requires grad, the gradients in test_opinfo_grad.py's
``check_grad_sample``, both against eager PyTorch.
"""
from __future__ import annotations

import os
import sys

import pytest
import torch
from torch.testing._internal.opinfo.core import SampleInput

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_opinfo import check_sample, covered_opinfos  # noqa: E402
from test_opinfo_grad import check_grad_sample  # noqa: E402


def _t(*shape, grad=True, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g).requires_grad_(grad)


def _padding_mask(batch, keys):
    """A boolean key-padding mask (batch, 1, 1, keys); the first row's last two keys are padding."""
    m = torch.ones(batch, 1, 1, keys, dtype=torch.bool)
    m[0, ..., keys - 2:] = False
    return m


def _samples():
    q, k, v = _t(2, 4, 6, 8, seed=1), _t(2, 4, 6, 8, seed=2), _t(2, 4, 6, 8, seed=3)
    return [
        ("nn.functional.scaled_dot_product_attention",
         SampleInput(q, args=(k, v), kwargs={"attn_mask": _padding_mask(2, 6)}),
         "a boolean padding mask in training (transformers' sdpa attention): the fused CPU kernel takes "
         "only an additive mask of the query's dtype"),
        ("nn.functional.scaled_dot_product_attention",
         SampleInput(q, args=(k, v), kwargs={"attn_mask": _padding_mask(2, 6).expand(2, 1, 6, 6)}),
         "a boolean mask expanded over the queries, broadcast over the heads"),
        ("baddbmm", SampleInput(_t(2, 3, 5, seed=4),
                                kwargs={"batch1": _t(2, 3, 4, seed=5), "batch2": _t(2, 4, 5, seed=6),
                                                             "beta": 0.5, "alpha": 2.0}),
         "the batches by keyword, as BLOOM's attention calls it (alibi.baddbmm(batch1=..., batch2=...))"),
        ("addmm", SampleInput(_t(3, 5, seed=7), kwargs={"mat1": _t(3, 4, seed=8), "mat2": _t(4, 5, seed=9)}),
         "the matrices by keyword"),
        ("nn.functional.conv2d", SampleInput(_t(2, 4, 7, 8, seed=10), args=(_t(6, 2, 4, 3, seed=11), _t(6, seed=12)),
                                             kwargs={"padding": "same", "dilation": (1, 2), "groups": 2}),
         "padding='same' whose total along one dimension is odd (an even kernel, as in EfficientNet): padded one "
         "more on the right, as eager's convolution does, then convolved"),
        ("nn.functional.conv1d", SampleInput(_t(2, 3, 9, seed=13), args=(_t(3, 1, 3, seed=14),),
                                             kwargs={"padding": "valid", "groups": 3}),
         "padding='valid' on a depthwise convolution (EfficientNet's strided blocks)"),
    ]


SAMPLES = _samples()
IDS = [f"{name}-{i}" for i, (name, _, _) in enumerate(SAMPLES)]
# where a sample's gradient must come from (test_opinfo_grad.gradient_source), where that was the bug: a string
# padding once left the convolution whole, and its backward ran the forward again under eager autograd
SOURCES = {"nn.functional.conv2d-4": "decomposition", "nn.functional.conv1d-5": "decomposition"}


@pytest.mark.parametrize("index", range(len(SAMPLES)), ids=IDS)
def test_forward(index):
    name, sample, why = SAMPLES[index]
    op = covered_opinfos()[name]
    try:
        check_sample(op, sample)
    except AssertionError as e:
        raise AssertionError(f"{name} ({why}): {e}") from None


@pytest.mark.parametrize("index", range(len(SAMPLES)), ids=IDS)
def test_gradient(index):
    name, sample, why = SAMPLES[index]
    if not any(isinstance(t, torch.Tensor) and t.requires_grad for t in (sample.input, *sample.args)):
        pytest.skip("nothing requires grad")
    op = covered_opinfos()[name]
    try:
        source = check_grad_sample(op, sample, index)
    except AssertionError as e:
        raise AssertionError(f"{name} ({why}): {e}") from None
    assert source is not None, f"{name}: no gradient was checked"
    assert SOURCES.get(IDS[index], source) == source, f"{name} ({why}): its gradient comes from {source}"
