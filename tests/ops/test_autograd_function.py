"""``torch.autograd.Function`` subclasses in a compiled function: the class's own backward makes the gradient.

PyTorch's documentation (Extending torch.autograd): ``forward`` computes the outputs and saves with
``ctx.save_for_backward`` what ``backward`` needs; ``backward`` receives one gradient per output and
returns one per input (None for an input that needs none), and it is what autograd uses, whatever
the derivative of ``forward`` would be. Outputs that get no gradient are handed to ``backward`` as
zeros (``ctx.set_materialize_grads`` defaults to True).
"""
from __future__ import annotations

import torch

import thunderlab


class StraightThrough(torch.autograd.Function):
    """Rounds forward; backward passes the gradient on scaled by the saved weight, and a second output's gradient
    to the weight (not the derivative of forward: rounding has gradient 0)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return torch.round(x * w), x.sum()

    @staticmethod
    def backward(ctx, g, g_total):
        x, w = ctx.saved_tensors
        return g * w * 3, (g * x).sum(0) + g_total


def _uses_function(x, w):
    a, total = StraightThrough.apply(x, w)
    return (a.sin() * total).sum()


def _only_first_output(x, w):
    a, _ = StraightThrough.apply(x, w)  # the second output gets no gradient: backward sees zeros for it
    return a.cos().sum()


def _inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(4, 3, generator=g, requires_grad=True),
            torch.randn(3, generator=g, requires_grad=True))


def _grads(fn, x, w):
    out = fn(x, w)
    return (out, *torch.autograd.grad(out, (x, w)))


def test_the_class_backward_makes_the_gradient():
    for fn in (_uses_function, _only_first_output):
        x, w = _inputs()
        want = _grads(fn, x, w)
        got = _grads(thunderlab.jit(fn), x, w)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b)
        assert want[1].abs().sum() > 0, "the custom gradient is not zero (rounding's derivative would be)"


def test_forward_runs_once_and_backward_graph_runs_in_the_backward_trace():
    x, w = _inputs()
    j = thunderlab.jit(_uses_function)
    j(x, w)
    traces = thunderlab.last_record(j).program.traces
    forward, backward = traces["forward"].python(), traces["backward"].python()
    # the class's backward is called on the gradients and saved values; its forward is not run again under
    # PyTorch's autograd to reach it (as differentiating an opaque call would)
    assert "eager_vjp" not in backward, backward
    assert "autograd_function_backward" in backward, backward
    assert "autograd_function_forward" in forward and "autograd_function_forward" not in backward, backward


def test_inference_and_no_grad_give_the_forward():
    x, w = _inputs()
    j = thunderlab.jit(_uses_function)
    with torch.no_grad():
        torch.testing.assert_close(j(x, w), _uses_function(x, w))
    torch.testing.assert_close(j(x.detach(), w.detach()), _uses_function(x.detach(), w.detach()))


class MarksNonDifferentiable(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        idx = (x > 0).to(x.dtype)
        ctx.mark_non_differentiable(idx)
        return x * 2, idx

    @staticmethod
    def backward(ctx, g, _g_idx):
        return g * 5


def test_non_differentiable_outputs_keep_pytorchs_autograd():
    def fn(x):
        y, idx = MarksNonDifferentiable.apply(x)
        return (y * idx).sum()

    x = torch.randn(6, requires_grad=True)
    (want,) = torch.autograd.grad(fn(x), x)
    (got,) = torch.autograd.grad(thunderlab.jit(fn)(x), x)
    torch.testing.assert_close(got, want)


# -- custom operators with a derivative registered by torch.library.register_autograd ------------------------
# PyTorch's documentation (torch.library.register_autograd): setup_context(ctx, inputs, output) saves what
# backward(ctx, *grads) needs, after the forward ran; backward returns one gradient per input (None for an input
# that is not a tensor or needs none).

CALLS = {"forward": 0}


@torch.library.custom_op("thunderlab_tests::scale_rows", mutates_args=())
def scale_rows(x: torch.Tensor, w: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    CALLS["forward"] += 1
    return x * w * rows.to(x.dtype).unsqueeze(-1)


@scale_rows.register_fake
def _(x, w, rows):
    return torch.empty_like(x)


def _setup(ctx, inputs, output):
    x, w, rows = inputs
    ctx.save_for_backward(x, w)
    ctx.rows = rows  # an integer tensor kept as an attribute, as transformers' grouped matmul keeps its offsets


def _backward(ctx, g):
    x, w = ctx.saved_tensors
    r = ctx.rows.to(g.dtype).unsqueeze(-1)
    # deliberately not the derivative of forward (that has no factor 2): the registered formula must be used
    return 2 * g * w * r, (g * x * r).sum(0), None


torch.library.register_autograd("thunderlab_tests::scale_rows", _backward, setup_context=_setup)


def _uses_custom_op(x, w, rows):
    return scale_rows(x.tanh(), w, rows).sin().sum()


def test_a_custom_op_differentiates_by_its_registered_backward_without_running_forward_again():
    x, w = _inputs()
    rows = torch.tensor([1, 2, 0, 3])
    out = _uses_custom_op(x, w, rows)
    want = torch.autograd.grad(out, (x, w))
    j = thunderlab.jit(_uses_custom_op)
    j(x, w, rows)  # compiles
    before = CALLS["forward"]
    out = j(x, w, rows)
    got = torch.autograd.grad(out, (x, w))
    assert CALLS["forward"] - before == 1, "the forward ran again to differentiate it"
    torch.testing.assert_close(out, _uses_custom_op(x, w, rows))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    backward = thunderlab.last_record(j).program.traces["backward"].python()
    assert "custom_op_vjp" in backward and "eager_vjp" not in backward, backward


INDUCTOR_TRAINING = "dce,cse,autodiff,remat,claim{executors=inductor+torch},fuse,del"


def _custom_op_regions(j):
    record = thunderlab.last_record(j)
    backward = record.program.traces["backward"].bound_symbols
    regions = [b for b in backward if b.subsymbols and b.sym.module == "fusion"]
    assert regions, record.program.python()
    assert all(r["error"] is None for r in thunderlab.session(record).timings().values())
    return backward, regions


def test_inductor_fuses_a_registered_backward_it_can_trace():
    """A registered backward made of PyTorch calls goes into the backward's fusion region (TorchDynamo inlines it,
    as torch.compile does): the backward is one region, and the gradients are the registered formula's."""
    x, w = _inputs()
    rows = torch.tensor([1, 2, 0, 3])
    j = thunderlab.jit(_uses_custom_op, pipeline=INDUCTOR_TRAINING, tiered=False)
    got = torch.autograd.grad(j(x, w, rows), (x, w))
    want = torch.autograd.grad(_uses_custom_op(x, w, rows), (x, w))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    backward, regions = _custom_op_regions(j)
    assert len(regions) == 1 and "ltorch.custom_op_vjp" in {s.sym.qualname for s in regions[0].subsymbols}


@torch.library.custom_op("thunderlab_tests::scale_by_list", mutates_args=())
def scale_by_list(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    return x * rows.to(x.dtype).unsqueeze(-1)


@scale_by_list.register_fake
def _(x, rows):
    return torch.empty_like(x)


def _setup_list(ctx, inputs, output):
    ctx.rows = inputs[1]


@torch._dynamo.disable
def _host_scale(rows, dtype):
    """Work in plain Python that TorchDynamo is told to leave alone (a library's C extension is alike)."""
    return torch.tensor(rows.tolist(), dtype=dtype)


def _backward_list(ctx, g):
    return g * _host_scale(ctx.rows, g.dtype).unsqueeze(-1), None


torch.library.register_autograd("thunderlab_tests::scale_by_list", _backward_list, setup_context=_setup_list)


def test_inductor_leaves_a_registered_backward_it_cannot_trace_to_torch():
    """A registered backward that TorchDynamo cannot trace whole would make its region's compile fail and run on
    torch whole: it is left out, and the regions around it compile."""
    def f(x, rows):
        return scale_by_list(x.tanh(), rows).sin().sum()

    x = torch.randn(4, 3, requires_grad=True)
    rows = torch.tensor([1, 2, 0, 3])
    j = thunderlab.jit(f, pipeline=INDUCTOR_TRAINING, tiered=False)
    (got,) = torch.autograd.grad(j(x, rows), x)
    (want,) = torch.autograd.grad(f(x, rows), x)
    torch.testing.assert_close(got, want)
    backward, regions = _custom_op_regions(j)
    for region in regions:
        assert "ltorch.custom_op_vjp" not in {s.sym.qualname for s in region.subsymbols}, region
    assert "ltorch.custom_op_vjp" in {b.sym.qualname for b in backward}
