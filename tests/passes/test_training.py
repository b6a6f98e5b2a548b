"""Training: autodiff and remat as passes, gradients equal to eager, optimizers work unchanged."""
import pytest
import torch

import thunderlab
from thunderlab.examples import EXAMPLES

MODELS = ["mlp", "nanogpt_block", "llama_block", "cnn", "gpt2"]


def _loss(out):
    out = getattr(out, "logits", out)
    return (out.float() ** 2).mean()


def _pair(name):
    model, args = EXAMPLES[name]()
    ref, _ = EXAMPLES[name]()
    ref.load_state_dict(model.state_dict())
    if name == "cnn":
        model.train(), ref.train()
    return model, ref, args


@pytest.mark.parametrize("entry", ["jit", "torch.compile"])
@pytest.mark.parametrize("name", MODELS)
def test_gradients_equal_eager(name, entry):
    model, ref, args = _pair(name)
    args_ref = tuple(a.clone().requires_grad_() if a.is_floating_point() else a for a in args)
    args = tuple(a.clone().requires_grad_() if a.is_floating_point() else a for a in args)
    compiled = thunderlab.jit(model) if entry == "jit" else torch.compile(model, backend="thunderlab")
    before = len(thunderlab.records())
    loss = _loss(compiled(*args))
    loss_ref = _loss(ref(*args_ref))
    loss.backward(), loss_ref.backward()
    torch.testing.assert_close(loss, loss_ref, rtol=1e-5, atol=1e-6)
    for (n, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        assert p.grad is not None, f"{n} has no gradient"
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=f"gradient of {n}")
    for a, b in zip(args, args_ref):
        if a.is_floating_point():
            torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-5)
    recs = thunderlab.records()[before:]
    assert any("backward" in r.program.traces for r in recs), "no backward trace was built"


def test_training_steps_with_an_optimizer_match_eager():
    model, ref, (x,) = _pair("nanogpt_block")
    target = torch.randn_like(x)
    jm = thunderlab.jit(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    opt_ref = torch.optim.AdamW(ref.parameters(), lr=1e-3)
    losses, losses_ref = [], []
    for _ in range(4):
        for m, o, acc in ((jm, opt, losses), (ref, opt_ref, losses_ref)):
            o.zero_grad()
            loss = torch.nn.functional.mse_loss(m(x), target)
            loss.backward()
            o.step()
            acc.append(loss.item())
    assert losses == pytest.approx(losses_ref, rel=1e-5)
    assert losses[-1] < losses[0]


def _training_record(pipeline="dce,cse,autodiff,remat,claim,del"):
    model, _, (x,) = _pair("mlp")
    j = thunderlab.jit(model, pipeline=pipeline)
    j(x.requires_grad_()).sum().backward()
    return thunderlab.last_record(j)


def test_record_has_forward_and_backward_after_autodiff():
    rec = _training_record()
    names = [s.spec for s in rec.steps]
    i = names.index("autodiff")
    for s in rec.steps[:i]:
        assert list(s.program.traces) == ["forward"]
    for s in rec.steps[i:]:
        assert list(s.program.traces) == ["forward", "backward"]
    assert "def backward(" in rec.steps[-1].program.python()


def test_backward_symbols_link_to_the_forward_symbols_they_differentiate():
    rec = _training_record()
    step = next(s for s in rec.steps if s.spec == "autodiff")
    fw_ids = {b.id: b for b in step.program.forward.bound_symbols}
    bw = step.program.traces["backward"].bound_symbols
    assert bw and all(b.derived_from in fw_ids for b in bw)
    linear_grads = [b for b in bw if fw_ids[b.derived_from].sym.name == "linear"]
    assert linear_grads, "the gradient of linear should link back to ltorch.linear"
    assert step.notes["backward_to_forward"][bw[0].id] == bw[0].derived_from
    # the link survives later passes
    final_bw = rec.steps[-1].program.traces["backward"].bound_symbols
    assert {b.derived_from for b in final_bw if b.derived_from is not None} & set(fw_ids)


def test_remat_reduces_saved_bytes_and_reports_them():
    rec = _training_record()
    notes = next(s for s in rec.steps if s.spec == "remat").notes
    assert notes["saved_bytes_after"] < notes["saved_bytes_before"]
    assert notes["recomputed"] > 0


def test_pipeline_without_autodiff_still_trains_through_torch_autograd():
    rec = _training_record("dce,cse,claim,del")
    assert "backward" not in rec.program.traces


def test_no_backward_under_no_grad():
    model, _, (x,) = _pair("mlp")
    j = thunderlab.jit(model)
    with torch.no_grad():
        j(x)
    assert "backward" not in thunderlab.last_record(j).program.traces
    j(x).sum().backward()  # grad mode on: a new entry with a backward
    assert "backward" in thunderlab.last_record(j).program.traces


def test_remat_requires_autodiff():
    from thunderlab.passes import Pipeline, PipelineError

    with pytest.raises(PipelineError, match="'remat' requires 'autodiff'"):
        Pipeline.parse("dce,remat,claim")


def test_opaque_op_gradient_through_eager_fallback():
    def f(x):
        return torch.cummax(x, 0).values.sum() + torch.special.i0(x).sum()

    x = torch.randn(6, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    thunderlab.jit(f)(x).backward()
    f(x_ref).backward()
    torch.testing.assert_close(x.grad, x_ref.grad)
