"""Training: autodiff and remat as passes, gradients equal to eager, optimizers work unchanged."""
import copy

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
    rec = _training_record("dce,cse,autodiff,remat{recompute=all},claim,del")
    notes = next(s for s in rec.steps if s.spec.startswith("remat")).notes
    assert notes["saved_bytes_after"] < notes["saved_bytes_before"]
    assert notes["recomputed"] > 0
    assert notes["recompute"] == "all"


@pytest.mark.parametrize("pipeline,policy,why", [
    ("dce,cse,autodiff,remat,claim,del", "views", "no fuse pass follows"),
    ("dce,cse,autodiff,remat,claim{executors=torch},fuse,del", "views", "no fusion executor is available among torch"),
    ("dce,cse,autodiff,remat,claim{executors=inductor+torch},fuse,del", "all", "inductor can fuse"),
])
def test_remat_auto_recomputes_only_views_unless_a_fusion_executor_follows(pipeline, policy, why):
    rec = _training_record(pipeline)
    step = next(s for s in rec.steps if s.spec == "remat")
    assert step.notes["recompute"] == policy and why in step.notes["why"]
    recomputed = [b for b in step.program.traces["backward"].bound_symbols if b.origin == "remat"]
    assert step.notes["recomputed"] == len(recomputed)
    if policy == "views":
        from thunderlab.core.symbols import Tag

        assert all(Tag.VIEW in b.sym.tags for b in recomputed)


def test_rerun_does_not_reuse_a_remat_step_decided_for_other_passes_after_it():
    rec = _training_record("dce,cse,autodiff,remat,claim{executors=inductor+torch},fuse,del")
    assert next(s for s in rec.steps if s.spec == "remat").notes["recompute"] == "all"
    same = thunderlab.rerun(rec, "dce,cse,autodiff,remat,claim{executors=inductor+torch},fuse{max_size=64},del")
    assert same.reused == 5  # remat would decide alike: reused with everything before the changed fuse
    other = thunderlab.rerun(rec, "dce,cse,autodiff,remat,claim{executors=inductor+torch},del")  # no fuse any more
    assert other.reused == 3
    assert next(s for s in other.steps if s.spec == "remat").notes["recompute"] == "views"


def test_remat_rejects_an_unknown_policy():
    from thunderlab.passes import PipelineError

    with pytest.raises(PipelineError, match="remat: recompute='some'; valid: auto, all, views"):
        thunderlab.jit(torch.nn.Linear(2, 2), pipeline="dce,autodiff,remat{recompute=some},claim")(torch.randn(1, 2))


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


def test_layer_norm_and_attention_keep_their_statistics_for_backward():
    """The forward runs the kernels that return mean/rstd and log-sum-exp; backward reads them."""
    from thunderlab.examples import EXAMPLES

    model, (x,) = EXAMPLES["nanogpt_block"]()
    ref = copy.deepcopy(model)
    j = thunderlab.jit(model)
    j(x).pow(2).mean().backward()
    ref(x).pow(2).mean().backward()
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=n)
    rec = thunderlab.last_record(j)
    step = next(s for s in rec.steps if s.spec == "autodiff")
    fw = [b.sym.qualname for b in step.program.forward.bound_symbols]
    bw = [b.sym.qualname for b in rec.program.traces["backward"].bound_symbols]
    assert fw.count("ltorch.native_layer_norm") == 2 and "ltorch.sdpa_cpu" in fw
    assert "ltorch.layer_norm_backward_saved" in bw and "ltorch.sdpa_cpu_backward" in bw
    assert not {"ltorch.layer_norm", "ltorch.native_layer_norm", "ltorch.sdpa_cpu", "ltorch.sdpa_backward"} & set(bw)
    # the variant keeps the call's id: the view still follows layer_norm from capture to here
    captured = {b.id: b.sym.qualname for b in rec.steps[0].program.forward.bound_symbols}
    norms = [b for b in step.program.forward.bound_symbols if b.sym.name == "native_layer_norm"]
    assert all(captured[b.id] == "ltorch.layer_norm" for b in norms)


class _SeparateProjections(torch.nn.Module):
    """Attention as wav2vec2 and BERT write it: q, k and v from their own linears, no causal mask."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (torch.nn.Linear(32, 32) for _ in range(4))

    def forward(self, x):
        b, t, c = x.shape
        heads = lambda y: y.view(b, t, 4, 8).transpose(1, 2)  # noqa: E731
        y = torch.nn.functional.scaled_dot_product_attention(heads(self.q(x)), heads(self.k(x)), heads(self.v(x)))
        return self.o(y.transpose(1, 2).reshape(b, t, c))


def test_attention_runs_once_per_training_step():
    """Backward reads the attention kernel's saved output and log-sum-exp: remat never runs the kernel
    again in backward, even where it recomputes every cheap op (as it does before a fusion executor)
    and the min-cut would save memory by it; eager autograd runs it once too."""
    model = _SeparateProjections()
    ref = copy.deepcopy(model)
    x = torch.randn(2, 16, 32)
    j = thunderlab.jit(model, pipeline="dce,cse,autodiff,remat{recompute=all},claim,del")
    j(x).pow(2).mean().backward()
    ref(x).pow(2).mean().backward()
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=n)
    step = next(s for s in thunderlab.last_record(j).steps if s.spec.startswith("remat"))
    bw = [b.sym.qualname for b in step.program.traces["backward"].bound_symbols]
    assert "ltorch.sdpa_cpu_backward" in bw and "ltorch.sdpa_cpu" not in bw


def test_a_router_chooses_its_experts_once_per_training_step():
    """A mixture-of-experts router's top-k and the sort that groups tokens by expert run in forward only:
    backward reads their saved results, as eager autograd does, even where remat recomputes every cheap op."""
    router, experts = torch.nn.Linear(16, 4), torch.nn.Parameter(torch.randn(4, 16, 16) * 0.1)

    def moe(x):
        weights, chosen = torch.topk(router(x).softmax(-1), 2, dim=-1)
        order = torch.sort(chosen.flatten(), stable=True).indices
        picked = experts[chosen.flatten()[order]]  # (tokens * 2, 16, 16)
        tokens = x.repeat_interleave(2, 0)[order]
        out = torch.bmm(tokens.unsqueeze(1), picked).squeeze(1)
        return (out * weights.flatten()[order].unsqueeze(-1)).pow(2).mean()

    x = torch.randn(6, 16)
    j = thunderlab.jit(moe, pipeline="dce,cse,autodiff,remat{recompute=all},claim,del")
    got = torch.autograd.grad(j(x), [router.weight, experts])
    want = torch.autograd.grad(moe(x), [router.weight, experts])
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    step = next(s for s in thunderlab.last_record(j).steps if s.spec.startswith("remat"))
    recomputed = {b.sym.qualname for b in step.program.traces["backward"].bound_symbols if b.origin == "remat"}
    assert recomputed and not recomputed & {"prims.topk", "ltorch.sort"}, recomputed


class _StandardizedConv(torch.nn.Conv2d):
    """Weight standardization as BiT writes it: batch_norm over the weight, with no running statistics."""

    def forward(self, x):
        w = torch.nn.functional.batch_norm(self.weight.reshape(1, self.out_channels, -1), None, None,
                                           training=True, momentum=0.0, eps=1e-8).reshape_as(self.weight)
        return torch.nn.functional.conv2d(x, w, self.bias, self.stride, self.padding)


def test_batch_norm_without_running_statistics_writes_nothing_and_fuses():
    """A batch_norm with no running statistics updates none: its call is not a write, so a fusion executor takes
    it into its region (the inductor executor declined it as one, which cut a BiT forward at every convolution);
    the gradients equal eager's."""
    from thunderlab.executors.base import get_executor

    model = torch.nn.Sequential(_StandardizedConv(3, 8, 3, padding=1), torch.nn.ReLU(), _StandardizedConv(8, 4, 3))
    ref = copy.deepcopy(model)
    x = torch.randn(2, 3, 8, 8)
    j = thunderlab.jit(model)
    j(x).pow(2).mean().backward()
    ref(x).pow(2).mean().backward()
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=n)
    forward = next(s for s in thunderlab.last_record(j).steps if s.spec == "autodiff").program.forward
    norms = [b for b in forward.bound_symbols if "batch_norm" in b.sym.name]
    assert len(norms) == 2 and all(not b.side_effect for b in norms), [b.sym.qualname for b in norms]
    assert all(get_executor("inductor").can_execute(b) == (True, "") for b in norms)


def test_backward_frees_each_saved_tensor_after_its_last_use():
    """As eager autograd frees a node's saved tensors once it has run, the backward program drops
    each saved tensor at its ``del``: the autograd context keeps none of them while it runs."""
    import weakref

    from thunderlab.ops import linalg

    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4))
    x = torch.randn(8, 16)
    live_at_call = []
    saved = []
    original = linalg.linear_backward.impl

    def spy(*args):
        live_at_call.append(sum(r() is not None for r in saved))
        return original(*args)

    # symbols are frozen (shared by every record); only a test swaps one's implementation, and puts it back
    object.__setattr__(linalg.linear_backward, "impl", spy)
    try:
        j = thunderlab.jit(model, pipeline="dce,cse,autodiff,claim{executors=torch},del")

        def pack(t):
            if not isinstance(t, torch.nn.Parameter) and t is not x:
                saved.append(weakref.ref(t))
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = j(x).pow(2).mean()
        n = len(saved)
        live_at_call.clear()
        loss.backward()
        assert n == 3 and len(live_at_call) == 3  # the two ReLU outputs, and the output pow saved
        assert live_at_call == [2, 1, 0]  # pow's was freed when its node ran; each ReLU output after its last use
    finally:
        object.__setattr__(linalg.linear_backward, "impl", original)
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).pow(2).mean().backward()
    for g, p in zip(grads, model.parameters()):
        torch.testing.assert_close(g, p.grad)


def test_backward_twice_with_retain_graph_matches_eager():
    model, ref, (x,) = _pair("mlp")
    j = thunderlab.jit(model)
    loss, loss_ref = j(x).pow(2).mean(), ref(x).pow(2).mean()
    loss.backward(retain_graph=True)
    loss.backward()  # the saved tensors were kept for the second pass
    loss_ref.backward(retain_graph=True)
    loss_ref.backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()  # as in eager: without retain_graph they are freed


def _saved_storage_bytes(fn, x) -> int:
    """Bytes of the unique storages autograd saves for backward in one forward (as benchmarks/training.py)."""
    fn(x).pow(2).mean().backward()  # compiled first: TorchDynamo's tracing packs fake tensors too
    seen = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(x).pow(2).mean().backward()
    return sum(seen.values())


@pytest.mark.parametrize("name,pipeline", [
    ("mlp", "dce,cse,autodiff,remat,claim{executors=torch},del"),
    ("nanogpt_block", "dce,cse,autodiff,remat,claim{executors=torch},del"),
    ("nanogpt_block", "dce,cse,autodiff,remat{recompute=all},claim{executors=torch},del"),
])
def test_saved_for_backward_is_at_most_eagers(name, pipeline):
    model, ref, (x,) = _pair(name)
    ours, eager = _saved_storage_bytes(thunderlab.jit(model, pipeline=pipeline), x), _saved_storage_bytes(ref, x)
    assert ours <= eager, f"{name}: thunderlab saves {ours} bytes for backward, eager {eager}"
    if "recompute=all" in pipeline:
        assert ours < eager


def test_torch_func_grad_through_a_jitted_function_matches_eager():
    def f(x, w):
        return torch.nn.functional.linear(x, w).sin().sum()

    j = thunderlab.jit(f)
    x, w = torch.randn(2, 4), torch.randn(3, 4, requires_grad=True)
    j(x, w).backward()  # compiled for training first; torch.func.grad then runs under a functorch transform
    want = torch.func.grad(lambda w: f(x, w))(w.detach())
    torch.testing.assert_close(torch.func.grad(lambda w: j(x, w))(w.detach()), want)


def _split(fn, *args):
    from thunderlab.frontend.fx import lower
    from thunderlab.passes.autodiff import split

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch.compile(fn, backend=backend, fullgraph=True)(*args)  # TorchDynamo's graph, grad-mode calls included
    trace = lower(graphs[0], args)[0].forward
    program = split(trace)
    return trace, program


def test_autodiff_stops_at_detach():
    def f(x):
        return x * x.detach()

    x = torch.randn(4, requires_grad=True)
    _, program = _split(f, x)
    bw = program.backward
    # one gradient term (x.detach() * g), not two: the detached factor is a constant
    assert sum(1 for b in bw.bound_symbols if b.sym.name == "mul") == 1
    out = thunderlab.jit(f)(x)
    (g,) = torch.autograd.grad(out.sum(), x)
    torch.testing.assert_close(g, x.detach())


def test_autodiff_honours_no_grad_regions_recorded_in_the_trace():
    def f(x):
        with torch.no_grad():
            y = x.exp()
        return x * y, y

    x = torch.randn(3, requires_grad=True)
    trace, program = _split(f, x)
    bw = program.backward
    assert "prims.set_grad_enabled(False)" in trace.python(source=False)  # the context is part of the program
    assert [b.sym.name for b in bw.bound_symbols if b.sym.name == "exp"] == []  # y is a constant to backward
    assert program.training.grad_of == (trace.output[0].name,)  # the second output takes no gradient
    out, y = thunderlab.jit(f)(x)
    assert out.requires_grad and not y.requires_grad


def test_autodiff_has_nothing_to_do_when_no_output_needs_grad():
    def f(x):
        with torch.set_grad_enabled(False):
            y = x * 2
        return y

    _, parts = _split(f, torch.randn(3, requires_grad=True))
    assert parts is None


def test_enable_grad_inside_a_function_called_under_no_grad():
    def f(x):
        with torch.enable_grad():
            y = x * 3
        return y, x * 4

    j = thunderlab.jit(f)
    x = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        y, z = j(x)
    assert y.requires_grad and not z.requires_grad
    (g,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(g, torch.full((3,), 3.0))


def test_cnn_backward_calls_eager_backward_kernels():
    """Convolution, batch norm and pooling differentiate to the kernels eager autograd calls, with nothing re-run
    (adaptive pooling to 1 x 1 is a mean, tests/ops/test_avg_pool_whole_map.py: here it pools to 1 x 2)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4),
                                torch.nn.ReLU6(inplace=True),
                                torch.nn.MaxPool2d(2), torch.nn.Conv2d(4, 4, 3, stride=2, groups=2, bias=False),
                                torch.nn.AvgPool2d(2), torch.nn.AdaptiveAvgPool2d((1, 2)), torch.nn.Flatten(),
                                torch.nn.Linear(8, 2)).train()
    ref = copy.deepcopy(model)
    x = torch.randn(2, 3, 16, 16)
    j = thunderlab.jit(model)
    j(x).square().sum().backward()
    ref(x).square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5,
                                   msg=lambda m, name=name: f"grad of {name}: {m}")
    for (name, b), c in zip(model.named_buffers(), ref.buffers()):
        torch.testing.assert_close(b, c, msg=lambda m, name=name: f"buffer {name}: {m}")
    program = thunderlab.last_record(j).program
    fw, bw = program.forward.python(source=False), program.traces["backward"].python(source=False)
    assert "eager_vjp" not in bw, bw
    for kernel in ("convolution_backward", "batch_norm_backward_saved", "max_pool2d_backward", "avg_pool2d_backward",
                   "adaptive_avg_pool2d_backward", "hardtanh_backward"):
        assert f"ltorch.{kernel}(" in bw, f"{kernel} missing from\n{bw}"
    assert "ltorch.native_batch_norm_functional(" in fw and "ltorch.max_pool2d_with_indices(" in fw, fw


class _StandardizedConv(torch.nn.Conv2d):
    """BiT's convolution: the weight standardized by a batch norm without running statistics,
    then ``padding='same'``."""

    def forward(self, x):
        w = torch.nn.functional.batch_norm(self.weight.reshape(1, self.out_channels, -1), None, None, training=True,
                                           momentum=0.0, eps=1e-8).reshape_as(self.weight)
        return torch.nn.functional.conv2d(x, w, self.bias, self.stride, "same", self.dilation, self.groups)


def test_group_norm_and_string_padding_differentiate_to_eager_backward_kernels():
    """EfficientNet's and BiT's layers (``padding='same'`` with an even kernel, depthwise, ``'valid'``; group norm;
    weight standardization) train on eager's kernels: before, a string padding ran the convolution again under
    autograd in backward and group norm went through a dozen small kernels each way."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 4, padding="same", dilation=1), torch.nn.GroupNorm(4, 8), torch.nn.SiLU(),
        torch.nn.Conv2d(8, 8, 3, padding="same", groups=8, bias=False), torch.nn.GroupNorm(2, 8, affine=False),
        _StandardizedConv(8, 6, 3, bias=False), torch.nn.Conv2d(6, 4, 2, padding="valid"),
        torch.nn.Flatten(), torch.nn.LazyLinear(2)).train()
    x = torch.randn(2, 3, 9, 9)
    model(x)  # the lazy layer takes its shape
    ref = copy.deepcopy(model)
    j = thunderlab.jit(model)
    out, want = j(x), ref(x)
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-5)
    out.square().sum().backward()
    want.square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5,
                                   msg=lambda m, name=name: f"grad of {name}: {m}")
    program = thunderlab.last_record(j).program
    fw, bw = program.forward.python(source=False), program.traces["backward"].python(source=False)
    assert "eager_vjp" not in bw and "ltorch.conv2d(" not in fw, fw + bw
    assert fw.count("ltorch.native_group_norm(") == 2 and bw.count("ltorch.group_norm_backward_saved(") == 2, fw + bw
    assert bw.count("ltorch.convolution_backward(") == 4 and "ltorch.batch_norm_backward_saved(" in bw, bw
    assert "prims.var_mean(" not in fw, fw


def test_batch_norm_running_statistics_are_written_after_the_last_read_as_eager_orders_them():
    """Batch norm in training computes its new running statistics as values; the writes into the buffers go to the
    end of the forward, except where a later call reads the buffer (one module called twice), which must see the
    first update, as in eager."""
    class Twice(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 3, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(3)

        def forward(self, x):
            return self.bn(self.conv(self.bn(x)).relu())

    for cls in (Twice, lambda: torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))):
        torch.manual_seed(0)
        model, ref = cls().train(), cls().train()
        ref.load_state_dict(model.state_dict())
        j = thunderlab.jit(model)
        for _ in range(2):
            x = torch.randn(2, 3, 8, 8)
            out = j(x)
            w = torch.randn_like(out)  # a weighted sum: a batch norm output's plain sum (or sum of squares) has
            (out * w).sum().backward()  # a gradient of zero analytically, rounding noise in float32
            (ref(x) * w).sum().backward()
        for (name, b), c in zip(model.named_buffers(), ref.buffers()):
            torch.testing.assert_close(b, c, msg=name)
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)
        fw = thunderlab.last_record(j).program.forward.bound_symbols
        names = [b.sym.name for b in fw if not b.sym.bookkeeping]
        if cls is not Twice:  # nothing reads the statistics after the normalization: written last
            assert names[-2:] == ["copy_", "copy_"] and "native_batch_norm_functional" in names, names
