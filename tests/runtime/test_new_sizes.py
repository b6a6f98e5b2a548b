"""Sizes that change on every call stop compiling (README, "Long sessions"): a graph with symbolic sizes that meets
new input signatures on ``new_sizes`` calls in a row runs later new ones as TorchDynamo captured it, and says so
once; what it compiled stays compiled. Every result is checked against eager."""
from __future__ import annotations

import warnings

import pytest
import torch

import thunderlab


@pytest.fixture(autouse=True)
def _limit():
    before = thunderlab.set_limits()["new_sizes"]
    yield
    thunderlab.set_limits(new_sizes=before)


def scaled_sum(x):
    return (x * 2 + 1).sum(0)


def test_a_size_new_on_every_call_compiles_four_times_then_runs_as_captured():
    jfn = thunderlab.jit(scaled_sum)
    xs = [torch.randn(n, 3) for n in range(2, 14)]
    with pytest.warns(UserWarning, match=r"4 calls in a row came with input sizes or values not compiled before") as w:
        outs = [jfn(x) for x in xs]
    assert sum("calls in a row" in str(m.message) for m in w) == 1  # once
    for x, out in zip(xs, outs):
        torch.testing.assert_close(out, scaled_sum(x))
    # TorchDynamo captures the first size statically and the second with a symbolic one: that graph compiles four
    # sizes (3 to 6) and runs the other seven as captured
    info = jfn.cache_info
    assert (info["graphs"], info["ran_as_captured"], len(jfn.records)) == (2, 7, 5)
    hits = info["hits"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning
        torch.testing.assert_close(jfn(xs[2]), scaled_sum(xs[2]))  # a compiled size runs its program
        torch.testing.assert_close(jfn(xs[-1]), scaled_sum(xs[-1]))  # a new one runs as captured
    assert jfn.cache_info["hits"] == hits + 1 and jfn.cache_info["ran_as_captured"] == 8


def test_sizes_that_come_back_keep_compiling_each_new_one():
    jfn = thunderlab.jit(scaled_sum)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for step in range(12):  # three lengths in turn, as a loop over a few sequence lengths
            x = torch.randn((2, 3, 4)[step % 3] * 8, 5)
            torch.testing.assert_close(jfn(x), scaled_sum(x))
    assert jfn.cache_info["ran_as_captured"] == 0


def test_set_limits_new_sizes():
    assert thunderlab.set_limits(new_sizes=1)["new_sizes"] == 1
    with pytest.raises(ValueError, match="new_sizes must be a whole number of at least 1"):
        thunderlab.set_limits(new_sizes=0)
    jfn = thunderlab.jit(scaled_sum)
    with pytest.warns(UserWarning, match="1 calls in a row"):
        for n in range(2, 6):
            x = torch.randn(n, 3)
            torch.testing.assert_close(jfn(x), scaled_sum(x))
    assert jfn.cache_info["ran_as_captured"] == 2  # 2 static, 3 compiled, 4 and 5 as captured


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 1.0

    def forward(self, x):
        return x * self.scale


def test_a_python_float_that_changes_every_call_stops_compiling_too():
    """TorchDynamo passes a module's float attribute as a tensor; the program is specialized on its value."""
    m = Scaled()
    jfn = thunderlab.jit(m)
    x = torch.randn(4)
    with pytest.warns(UserWarning, match="calls in a row"):
        for k in range(10):
            m.scale = 0.5 + k
            torch.testing.assert_close(jfn(x), x * m.scale)
    assert 0 < jfn.cache_info["ran_as_captured"] < 10


def test_hugging_face_generate_with_a_jitted_forward_matches_eager():
    """transformers documents compiling a model for generation as ``model.forward = torch.compile(model.forward)``;
    each token's call meets a longer cache."""
    pytest.importorskip("transformers")
    from thunderlab.examples import gpt2_from_config

    model = gpt2_from_config(n_layer=2, n_embd=32, n_head=2, vocab_size=64).eval()
    prompt = torch.randint(0, 64, (1, 6), generator=torch.Generator().manual_seed(0))

    def generate():
        with torch.no_grad():
            return model.generate(prompt, max_new_tokens=16, do_sample=False, pad_token_id=0)

    expected = generate()
    model.forward = thunderlab.jit(model.forward)
    with pytest.warns(UserWarning, match="calls in a row"):
        first = generate()
    assert torch.equal(first, expected) and torch.equal(generate(), expected)
    info = model.forward.cache_info
    assert info["ran_as_captured"] > 0
    assert len(model.forward.records) <= info["graphs"] + 4  # not one per token
