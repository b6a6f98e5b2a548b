"""oneDNN's GEMM for linear layers in Inductor regions (thunderlab/executors/gemm.py), checked against eager."""
import re

import pytest
import torch
import torch.nn as nn

import thunderlab
from thunderlab.core import fastpaths
from thunderlab.executors import gemm

INDUCTOR = "dce,cse,claim{executors=inductor+torch},fuse,del"
TRAIN = "dce,cse,autodiff,claim{executors=inductor+torch},fuse,del"

pytestmark = pytest.mark.skipif(not gemm.available(), reason="this torch has no oneDNN (mkldnn)")


@pytest.fixture
def verdict(monkeypatch):
    """Force the timing's verdict; Inductor's graph cache off, so no compile of another verdict is reused."""
    def force(onednn: bool):
        monkeypatch.setattr(gemm, "faster_with_onednn", lambda *a, **k: onednn)
    with torch._inductor.config.patch(fx_graph_cache=False):
        yield force


class MLP(nn.Module):
    def __init__(self, d: int, hidden: int, approximate: str = "tanh"):
        super().__init__()
        self.up, self.down = nn.Linear(d, hidden), nn.Linear(hidden, d)
        self.approximate = approximate

    def forward(self, x):
        return self.down(nn.functional.gelu(self.up(x), approximate=self.approximate)).relu()


def _source(fn) -> str:
    live = thunderlab.session(thunderlab.last_record(fn))
    return "\n".join("\n".join(r.source) for r in live.regions.values())


def _infer(model, x):
    jfn = thunderlab.jit(model, pipeline=INDUCTOR, tiered=False, race=False)
    with torch.no_grad():
        got, want = jfn(x), model(x)
    return jfn, got, want


@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_a_linear_layer_and_its_gelu_go_to_onednn_as_one_call_and_match_eager(verdict, approximate):
    verdict(True)
    model = MLP(40, 72 if approximate == "tanh" else 88, approximate).eval()
    jfn, got, want = _infer(model, torch.randn(3, 5, 40))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    src = _source(jfn)
    assert "extern_kernels.addmm" not in src
    assert src.count("torch.ops.mkldnn._linear_pointwise.default(") == 2
    # GELU is the first product's post-op: no kernel of its own computes it
    assert f"'gelu', [-1], '{approximate}')" in src
    assert not re.search(r"\btanh\(|\.tanh\(\)|\berf\(|\.erf\(\)", src)
    # the record says which library each product runs on, and the GELU it took
    rec = thunderlab.last_record(jfn)
    thunderlab.session(rec).refresh()
    (region,) = rec.regions.values()
    assert [(g["m"], g["k"], g["n"], g["library"], g["gelu"]) for g in region["gemm"]] == [
        (15, 40, model.up.out_features, "onednn", approximate), (15, model.up.out_features, 40, "onednn", None)]


def test_where_mkl_is_faster_the_region_keeps_addmm(verdict):
    verdict(False)
    model = MLP(40, 56).eval()
    jfn, got, want = _infer(model, torch.randn(3, 5, 40))
    torch.testing.assert_close(got, want)
    src = _source(jfn)
    assert "_linear_pointwise" not in src and src.count("extern_kernels.addmm(") == 2
    (region,) = thunderlab.session(thunderlab.last_record(jfn)).timings().values()
    assert [g["library"] for g in region["gemm"]] == ["mkl", "mkl"]


def test_something_that_only_looks_like_gelu_is_not_fused(verdict):
    verdict(True)

    class NotGelu(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(24, 48)

        def forward(self, x):
            y = self.lin(x)
            return 0.5 * y * (1 + torch.tanh(0.7978845608028654 * (y + 0.04 * y * y * y)))  # not GELU's 0.044715

    model = NotGelu().eval()
    jfn, got, want = _infer(model, torch.randn(6, 24))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    src = _source(jfn)
    assert "_linear_pointwise" in src and "'gelu'" not in src


def test_training_gradients_match_eager_and_a_saved_pre_activation_is_not_fused(verdict):
    verdict(True)
    model = MLP(32, 80)
    ref = MLP(32, 80)
    ref.load_state_dict(model.state_dict())
    x = torch.randn(4, 7, 32)
    jfn = thunderlab.jit(model, pipeline=TRAIN, tiered=False, race=False)
    for f in (jfn, ref):
        f(x).square().mean().backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6, msg=name)
    src = _source(jfn)
    assert "torch.ops.mkldnn._linear_pointwise.default(" in src
    assert "'gelu'" not in src  # the backward reads up(x) itself, so GELU stays a kernel of its own
    # the backward's products read transposed operands (grad @ w, grad.t() @ x): oneDNN takes them in those strides
    assert "extern_kernels.mm" not in src and "torch.ops.thunderlab.onednn_linear_strided.default(" in src
    (fwd, bwd) = thunderlab.last_record(jfn).regions.values()
    assert {(g["x"], g["w"]) for g in bwd["gemm"]} == {("rows", "cols"), ("cols", "cols")}


def test_a_hugging_face_conv1d_product_x_at_w_goes_to_onednn_as_it_is_and_gpt2_matches_eager(verdict):
    verdict(True)
    from thunderlab.examples import gpt2_from_config

    model = gpt2_from_config(n_layer=2, n_embd=48, n_head=4).eval()
    ids = torch.randint(0, model.config.vocab_size, (2, 11))
    jfn = thunderlab.jit(model, pipeline=INDUCTOR, tiered=False, race=False)
    with torch.no_grad():
        got, want = jfn(ids).logits, model(ids).logits
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    src = _source(jfn)
    # Conv1D computes addmm(bias, x, w) with w (in x out) row-major: oneDNN reads it as a transposed weight
    assert "torch.ops.thunderlab.onednn_linear_strided.default(" in src
    region = next(iter(thunderlab.last_record(jfn).regions.values()))
    assert ("rows", "cols") in {(g["x"], g["w"]) for g in region["gemm"]}


def test_a_transformer_encoder_layer_matches_eager(verdict):
    verdict(True)
    layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=160, dropout=0.0,
                                       activation="gelu", batch_first=True)
    # in eval mode under no_grad PyTorch runs the whole layer as one fused op of its own (its "fast path")
    jfn, got, want = _infer(layer, torch.randn(2, 9, 64))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert "_linear_pointwise" in _source(jfn)


@pytest.mark.parametrize("layouts", [("rows", "rows"), ("cols", "rows"), ("rows", "cols"), ("cols", "cols")])
def test_the_strided_op_computes_x_at_w_t_for_every_layout(layouts):
    g = torch.Generator().manual_seed(3)
    x, w = gemm._operand(9, 13, layouts[0], g, torch.float32), gemm._operand(7, 13, layouts[1], g, torch.float32)
    b = torch.randn(7, generator=g)
    assert (x.is_contiguous(), w.is_contiguous()) == tuple(lay == "rows" for lay in layouts)
    torch.testing.assert_close(torch.ops.thunderlab.onednn_linear_strided(x, w, b), torch.addmm(b, x, w.t()))
    torch.testing.assert_close(torch.ops.thunderlab.onednn_linear_strided(x, w, b, "gelu", "tanh"),
                               nn.functional.gelu(torch.addmm(b, x, w.t()), approximate="tanh"), rtol=1e-5, atol=1e-5)


def test_each_shape_is_timed_once_and_the_verdict_says_both_times():
    m, k, n = 37, 29, 23  # a shape no other test times
    first = gemm.faster_with_onednn(m, k, n, True)
    timed = [c for c in gemm.choices() if (c["m"], c["k"], c["n"]) == (m, k, n)]
    assert len(timed) == 1
    c = timed[0]
    assert c["mkl_us"] > 0 and c["onednn_us"] > 0 and c["bias"] is True and c["threads"] == torch.get_num_threads()
    assert c["onednn"] == (c["onednn_us"] <= gemm.MARGIN * c["mkl_us"]) == first
    assert gemm.faster_with_onednn(m, k, n, True) == first
    assert len([c for c in gemm.choices() if (c["m"], c["k"], c["n"]) == (m, k, n)]) == 1


def test_switched_off_no_compile_gets_the_pass(monkeypatch):
    monkeypatch.setattr(gemm, "_enabled", True)
    assert isinstance(gemm.config_patches()["post_grad_custom_post_pass"], gemm.LinearPass)
    with fastpaths.fast_paths(False):  # one of the fast paths: off with them all
        assert gemm.config_patches() == {}
    assert gemm.config_patches()
    gemm.set_enabled(False)
    assert gemm.config_patches() == {}


def test_a_module_from_inductors_cache_still_says_which_library_each_product_runs_on(monkeypatch, tmp_path):
    # a compile that Inductor's graph cache answers runs no post-grad pass: the products come from what the compile
    # that wrote the module kept beside the cache (a notebook run again, a new process)
    from thunderlab.executors import inductor

    monkeypatch.setattr(gemm, "faster_with_onednn", lambda *a, **k: True)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    model, x = MLP(24, 48).eval(), torch.randn(2, 3, 24)
    seen = []
    with torch._inductor.config.patch(fx_graph_cache=True):  # tiered=False: compiled in this process
        for _ in range(2):
            inductor._compiled.clear()  # past thunderlab's own memo: Dynamo and AOTAutograd run again
            hits = torch._dynamo.utils.counters["inductor"]["fxgraph_cache_hit"]
            jfn, got, want = _infer(model, x)
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
            rec = thunderlab.last_record(jfn)
            thunderlab.session(rec).refresh()
            (region,) = rec.regions.values()
            seen.append((region["gemm"], torch._dynamo.utils.counters["inductor"]["fxgraph_cache_hit"] - hits))
    (first, first_hits), (second, second_hits) = seen
    assert first_hits == 0 and second_hits == 1, seen  # the second module came from Inductor's cache
    assert [g["library"] for g in first] == ["onednn", "onednn"] and second == first
    assert list((tmp_path / "thunderlab_gemm").glob("*.json"))
