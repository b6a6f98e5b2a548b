"""The model zoo through thunderlab, equal to eager PyTorch (see models.py for the table, check.py for the modes).

``make test`` runs the fast subset (one model per family, transformers' default sdpa attention);
``THUNDERLAB_ZOO=full`` (``make zoo``) runs every architecture with each attention implementation.
"""
from __future__ import annotations

import os

import pytest
import torch

from .check import MODES, run
from .models import ZOO, attn_implementations, cases

FULL = os.environ.get("THUNDERLAB_ZOO") == "full"
CASES = cases(fast_only=not FULL)


def _id(case) -> str:
    entry, attn = case
    return entry.name if attn is None else f"{entry.name}-{attn}"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_model_matches_eager(case, mode):
    entry, attn = case
    result = run(entry, attn, mode)
    assert result.status == "pass", f"{_id(case)} {mode}: {result.status}: {result.detail}"


def test_training_on_the_cpp_wrapper_kernels_matches_eager():
    """Every fusion region pinned to Inductor's module with its C++ wrapper (the race's ``inductor-cpp``), on BERT
    (``zoo.py --checks train-cpp`` runs it on the whole zoo; a CNN's C++ wrapper compiles for minutes, cold:
    tests/executors/test_cpp_wrapper.py trains a small one with batch norm)."""
    ((entry, attn),) = [c for c in cases(fast_only=True) if c[0].name == "bert"]
    result = run(entry, attn, "train-cpp")
    assert result.status == "pass", f"{_id((entry, attn))} train-cpp: {result.status}: {result.detail}"


def test_zoo_covers_the_families():
    families = {e.family for e in ZOO}
    assert {"encoder", "decoder", "encoder-decoder", "vision", "audio"} <= families
    assert len({e.config for e in ZOO}) >= 30, "fewer than 30 architectures"
    both = [e.name for e in ZOO if attn_implementations(e) == ("eager", "sdpa")]
    assert len(both) >= 20, f"only {both} offer both attention implementations"
    assert any("moe" in e.name or "mixtral" in e.name for e in ZOO)


def test_zoo_tables_from_split_runs_merge_case_by_case(tmp_path):
    """benchmarks/zoo.py --merge: the zoo run in parts (and timed apart) gives one table, in the zoo's order."""
    import json

    from benchmarks.zoo import merge

    def row(case, model, attn, modes, **timing):
        return {"case": case, "model": model, "attn": attn, "family": "x", "modes": modes, **timing}

    ok = {"status": "pass", "detail": "", "first_call_s": 1.0}
    bad = {"status": "error", "detail": "E", "first_call_s": None}
    ratio = {"vs_eager": {"median": 1.2, "lo95": 1.1, "hi95": 1.3, "rounds": 5}}
    a = {"meta": {"date": "2026-01-01T00:00:00+00:00"},
         "rows": [row("resnet", "resnet", None, {"jit": ok, "train": bad}),
                  row("bert-sdpa", "bert", "sdpa", {"jit": ok})]}
    b = {"meta": {"date": "2026-01-02T00:00:00+00:00"},
         "rows": [row("resnet", "resnet", None, {"train": ok}, train=ratio)]}
    paths = []
    for name, data in (("a.json", a), ("b.json", b)):
        (tmp_path / name).write_text(json.dumps(data))
        paths.append(str(tmp_path / name))
    table = merge(paths)
    assert [r["case"] for r in table["rows"]] == ["bert-sdpa", "resnet"]  # the zoo's order
    resnet = table["rows"][1]
    assert resnet["modes"] == {"jit": ok, "train": ok} and resnet["train"] == ratio
    assert table["summary"]["counts"]["train"] == {"pass": 1, "wrong": 0, "error": 0}
    assert table["summary"]["train"]["worst_case"] == "resnet"
    assert [r["file"] for r in table["meta"]["runs"]] == ["a.json", "b.json"]


@pytest.mark.parametrize("train", [False, True], ids=["inference", "train"])
@pytest.mark.parametrize("name", ["vit", "llama"])
def test_hugging_face_forwards_run_directly(name, train):
    """Hugging Face wraps a model's forward in decorators (``functools.wraps``); repeated calls with keyword inputs
    still skip TorchDynamo's frame, and give eager's results (in training, its loss and gradients too)."""
    import torch

    import thunderlab
    from thunderlab.passes import DEFAULT_PIPELINE

    from .models import inputs, pair

    entry = next(e for e in ZOO if e.name == name)
    model, ref = pair(entry)
    model.train(train), ref.train(train)
    kw = inputs(entry, ref, batch=2, length=8)
    j = thunderlab.jit(model, pipeline=DEFAULT_PIPELINE.replace("claim", "claim{executors=torch}"))
    with torch.set_grad_enabled(train):
        for _ in range(3):
            got, want = j(**kw), ref(**kw)
            torch.testing.assert_close(got.logits, want.logits)
            if train:
                got.loss.backward()
                want.loss.backward()
                grads = {n: p.grad for n, p in ref.named_parameters()}
                for n, p in model.named_parameters():
                    torch.testing.assert_close(p.grad, grads[n], rtol=1e-3, atol=1e-5, msg=lambda m, n=n: f"{n}: {m}")
                model.zero_grad(), ref.zero_grad()
    assert j.cache_info["direct_calls"] >= 1, j.direct.why_not


def test_the_float64_yardstick_passes_rounding_and_fails_a_wrong_gradient():
    from .check import Mismatch, _closer_than_eager

    g = torch.Generator().manual_seed(0)
    exact = torch.randn(64, 3, 3, 3, generator=g, dtype=torch.float64) * 1e3
    eager = exact.float()  # float32 rounding of the right values
    reordered = (exact + torch.randn(exact.shape, generator=g, dtype=torch.float64) * 3e-5).float()  # an ulp or so
    _closer_than_eager("rounding", reordered, eager, exact)
    wrong = eager.clone()
    wrong[0, 0, 0, 0] += 1.0  # one element off by one part in a thousand of the largest
    with pytest.raises(Mismatch, match="from the float64 result"):
        _closer_than_eager("wrong", wrong, eager, exact)


def test_the_yardstick_of_a_channels_last_program_is_eager_channels_last():
    """MobileNetV2's training logits in eager float32 are 5.8e-6 from float64 contiguous and 1.8e-5 in channels-last
    (``model.to(memory_format=torch.channels_last)``); a channels-last program's result is judged by the larger."""
    from .check import Mismatch, _closer_than_eager

    g = torch.Generator().manual_seed(0)
    exact = torch.randn(2, 1000, generator=g, dtype=torch.float64)

    def off(scale):
        return (exact + torch.randn(exact.shape, generator=g, dtype=torch.float64) * scale).float()

    eager, eager_cl = off(1e-7), off(3e-6)
    like_cl = off(3e-6)
    with pytest.raises(Mismatch, match="from the float64 result"):
        _closer_than_eager("no other layout", like_cl, eager, exact)
    _closer_than_eager("judged by channels-last", like_cl, eager, exact, eager_cl)
    with pytest.raises(Mismatch, match="in channels-last"):
        _closer_than_eager("far past both", off(3e-5), eager, exact, eager_cl)
