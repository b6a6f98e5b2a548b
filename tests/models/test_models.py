"""Real models through thunderlab.jit and torch.compile(backend="thunderlab"), equal to eager."""
import pytest
import torch

import thunderlab
from thunderlab.examples import EXAMPLES

MODELS = ["mlp", "nanogpt_block", "llama_block", "cnn", "gpt2"]


def _out(o):
    return getattr(o, "logits", o)


@pytest.mark.parametrize("entry", ["jit", "torch.compile"])
@pytest.mark.parametrize("name", MODELS)
def test_model_matches_eager(name, entry):
    model, args = EXAMPLES[name]()
    with torch.no_grad():
        ref = _out(model(*args))
        before = len(thunderlab.records())
        if entry == "jit":
            out = _out(thunderlab.jit(model)(*args))
        else:
            torch._dynamo.reset()
            out = _out(torch.compile(model, backend="thunderlab")(*args))
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    recs = thunderlab.records()[before:]
    assert recs and all(r.error is None for r in recs)
    assert all(s.verification.ok for r in recs for s in r.steps)


@pytest.mark.parametrize("name", MODELS)
def test_model_fully_decomposed_matches_eager(name):
    """Every torch-level op replaced by its prims: the decompositions are checked on real models."""
    model, args = EXAMPLES[name]()
    j = thunderlab.jit(model, pipeline="dce,cse,claim{decompose=all},del", verify=True)
    with torch.no_grad():
        out = _out(j(*args))
        ref = _out(model(*args))
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    rec = thunderlab.last_record(j)
    assert rec.steps[3].notes["decomposed"] > 0


def test_cnn_training_mode_matches_eager():
    model, args = EXAMPLES["cnn"]()
    ref_model, _ = EXAMPLES["cnn"]()
    model.train(), ref_model.train()
    out = thunderlab.jit(model)(*args)
    ref = ref_model(*args)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    for (n, b), (_, rb) in zip(model.named_buffers(), ref_model.named_buffers()):
        torch.testing.assert_close(b, rb, msg=f"buffer {n}")
