"""Sizes that change on every call stop compiling (README, "Long sessions"): a graph with symbolic sizes that meets
new input signatures on ``new_sizes`` calls in a row runs later new ones as TorchDynamo captured it, and says so
once; what it compiled stays compiled, and in grad mode a signature that comes again compiles once its calls have
taken as long as a compile, while the cache has room. Every result is checked against eager."""
from __future__ import annotations

import warnings

import pytest
import torch

import thunderlab
from thunderlab.runtime import compiled as compiled_module
from thunderlab.runtime.compiled import CompiledGraph


@pytest.fixture
def free_compiles(monkeypatch):
    """Compiles priced at nothing: a signature past the limit compiles on its second call (its first call's time
    covers the price), which makes the counts below exact."""
    monkeypatch.setattr(CompiledGraph, "price", lambda self: 0.0)


@pytest.fixture(autouse=True)
def _limit():
    before = thunderlab.set_limits()["new_sizes"]
    yield
    thunderlab.set_limits(new_sizes=before)


def scaled_sum(x):
    return (x * 2 + 1).sum(0)


def test_a_size_new_on_every_call_compiles_four_times_then_runs_as_captured(free_compiles):
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
        new = torch.randn(20, 3)
        torch.testing.assert_close(jfn(new), scaled_sum(new))  # a new one runs as captured
        assert jfn.cache_info["hits"] == hits + 1 and jfn.cache_info["ran_as_captured"] == 8
        torch.testing.assert_close(jfn(xs[-1]), scaled_sum(xs[-1]))  # one met before compiles on its second call
        assert jfn.cache_info["ran_as_captured"] == 8 and len(jfn.records) == 6
        torch.testing.assert_close(jfn(xs[-1]), scaled_sum(xs[-1]))  # and runs its program from then on
    assert jfn.cache_info["hits"] == hits + 2 and len(jfn.records) == 6


def test_lengths_padded_to_a_multiple_of_eight_all_compile_once_they_come_again(free_compiles):
    """A training loop's batches padded to a multiple of 8: eight lengths, more than the limit meets in a row. The
    ones past the limit run as captured the first time and compile the second, so none stays uncompiled."""
    jfn = thunderlab.jit(scaled_sum)
    lengths = range(8, 65, 8)
    with pytest.warns(UserWarning, match="calls in a row"):
        for cycle in range(3):
            for n in lengths:
                x = torch.randn(n, 5)
                torch.testing.assert_close(jfn(x), scaled_sum(x))
            if cycle == 0:
                # 8 is TorchDynamo's static graph; 16 to 40 compile (the limit), 48 to 64 run as captured
                assert jfn.cache_info["ran_as_captured"] == 3 and len(jfn.records) == 5
    # in the second cycle 48 to 64 compile, and 8 meets the symbolic graph (TorchDynamo's guards put it there now)
    # for the first time: it runs as captured and compiles in the third cycle, whose other lengths all hit
    info = jfn.cache_info
    assert info["ran_as_captured"] == 4 and len(jfn.records) == 9
    assert info["hits"] == 4 + 7


def test_past_the_limit_a_full_cache_evicts_nothing_for_a_size_that_comes_again(free_compiles):
    thunderlab.set_limits(new_sizes=2)
    before = thunderlab.set_limits()["shapes"]
    thunderlab.set_limits(shapes=3)
    try:
        jfn = thunderlab.jit(scaled_sum)
        with pytest.warns(UserWarning, match="2 calls in a row"):
            for _cycle in range(2):
                for n in (2, 3, 4, 5, 6):
                    x = torch.randn(n, 5)
                    torch.testing.assert_close(jfn(x), scaled_sum(x))
        # 2 static; 3 and 4 compile; 5 and 6 run as captured. Then 2 meets the symbolic graph and runs as captured;
        # 5 comes again and compiles, which fills the cache (3), and 6 keeps running as captured
        info = jfn.cache_info
        assert len(jfn.records) == 4 and info["ran_as_captured"] == 4
        hits = info["hits"]
        for n in (3, 4):  # still compiled: nothing was evicted
            x = torch.randn(n, 5)
            torch.testing.assert_close(jfn(x), scaled_sum(x))
        assert jfn.cache_info["hits"] == hits + 2
    finally:
        thunderlab.set_limits(shapes=before)


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


def test_a_size_that_comes_again_compiles_once_its_calls_have_cost_a_compile(monkeypatch):
    """Each call of a recurring size past the limit adds its time, and the size compiles when that reaches the price
    (here a fixed 20 ms, tens of calls: the average compile's time is another machine's load)."""
    monkeypatch.setattr(CompiledGraph, "price", lambda self: 0.02)

    def chain(x):  # about a millisecond a call, as captured
        for _ in range(4):
            x = torch.tanh(x @ x.T)
        return x.sum()

    jfn = thunderlab.jit(chain)
    lengths = [96 + 16 * k for k in range(8)]
    with pytest.warns(UserWarning, match="calls in a row"):
        for _cycle in range(3):
            for n in lengths:
                x = torch.randn(n, n, generator=torch.Generator().manual_seed(n))
                torch.testing.assert_close(jfn(x), chain(x), rtol=1e-4, atol=1e-3)
    graph = next(g for g in jfn.backend.graphs if not g.static)
    assert graph.compiles == len(graph.cache) >= 4 and graph.compile_s > 0
    compiled, captured = len(graph.cache), jfn.cache_info["ran_as_captured"]
    spent = dict(graph.as_captured_s)
    assert spent  # lengths whose few calls have not yet paid for a compile
    for _cycle in range(2000):  # until every length's calls have paid for its compile
        for n in lengths:
            x = torch.randn(n, n, generator=torch.Generator().manual_seed(n))
            torch.testing.assert_close(jfn(x), chain(x), rtol=1e-4, atol=1e-3)
        if not graph.as_captured_s:
            break
    assert len(graph.cache) == compiled + len(spent) and not graph.as_captured_s
    assert jfn.cache_info["ran_as_captured"] > captured


def test_without_grad_a_size_that_comes_again_stays_as_captured(free_compiles):
    jfn = thunderlab.jit(scaled_sum)
    with pytest.warns(UserWarning, match="calls in a row"), torch.no_grad():
        for _cycle in range(3):
            for n in range(2, 10):
                x = torch.randn(n, 3)
                torch.testing.assert_close(jfn(x), scaled_sum(x))
    assert len(jfn.records) == 5  # the static graph and the limit's four
    x = torch.randn(9, 3)
    torch.testing.assert_close(jfn(x), scaled_sum(x))  # in grad mode the same size is new: run as captured once
    torch.testing.assert_close(jfn(x), scaled_sum(x))  # and compiled on its second call
    assert len(jfn.records) == 6


def test_a_signature_whose_compile_fails_when_it_came_again_keeps_running_as_captured(free_compiles, monkeypatch):
    jfn = thunderlab.jit(scaled_sum)
    with pytest.warns(UserWarning, match="calls in a row"):
        for n in range(2, 8):  # 2 static, 3 to 6 compiled, 7 as captured
            x = torch.randn(n, 3)
            torch.testing.assert_close(jfn(x), scaled_sum(x))
    graph = next(g for g in jfn.backend.graphs if not g.static)

    def failing(args, key):
        raise compiled_module.CompileError("pass 'fuse' (step 3) failed: made to fail", graph.records[-1])

    real = CompiledGraph.compile
    monkeypatch.setattr(CompiledGraph, "compile", lambda self, args, key: failing(args, key))
    x = torch.randn(7, 3)
    with pytest.warns(UserWarning, match="compiling a signature that came again failed, so it keeps running as "
                                         "captured: pass 'fuse'"):
        torch.testing.assert_close(jfn(x), scaled_sum(x))  # no error: the call ran as captured
    monkeypatch.setattr(CompiledGraph, "compile", real)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            torch.testing.assert_close(jfn(x), scaled_sum(x))  # not tried again
    assert jfn.cache_info["ran_as_captured"] == 5 and len(jfn.records) == 5


def test_a_price_never_reached_keeps_a_size_as_captured(monkeypatch):
    monkeypatch.setattr(CompiledGraph, "price", lambda self: float("inf"))
    jfn = thunderlab.jit(scaled_sum)
    with pytest.warns(UserWarning, match="calls in a row"):
        for _cycle in range(5):
            for n in range(2, 10):
                x = torch.randn(n, 3)
                torch.testing.assert_close(jfn(x), scaled_sum(x))
    assert len(jfn.records) == 5  # the static graph and the limit's four: none of the rest, however often they came


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
    assert torch.equal(first, expected)
    info = model.forward.cache_info
    assert info["ran_as_captured"] > 0
    assert len(model.forward.records) <= info["graphs"] + 4  # not one per token
    # later generations meet the same sizes again, without grad: they stay as captured
    records = len(model.forward.records)
    assert torch.equal(generate(), expected) and torch.equal(generate(), expected)
    assert len(model.forward.records) == records


def test_the_warning_points_at_the_callers_line_through_a_hugging_face_models_wrappers(free_compiles):
    """A Hugging Face model's forward is wrapped by transformers' decorators, and a call passes through TorchDynamo's
    and thunderlab's frames too: the warning names the line of the script that called the model, where a user can
    act on it (Python's warnings show that line)."""
    from thunderlab.examples import gpt2_from_config

    model = gpt2_from_config(n_layer=1, n_embd=32, n_head=2).eval()
    jitted = thunderlab.jit(model)
    thunderlab.set_limits(new_sizes=2)

    def logits(ids):
        return jitted(ids).logits  # the line the warning names

    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        for n in range(2, 9):
            ids = torch.randint(0, 100, (1, n))
            torch.testing.assert_close(logits(ids), model(ids).logits)
    said = [w for w in caught if "calls in a row" in str(w.message)]
    assert len(said) == 1
    assert (said[0].filename, said[0].lineno) == (__file__, logits.__code__.co_firstlineno + 1)
