"""Random pipelines over random small programs: every pipeline that parses compiles to eager's answers.

Hypothesis draws a program (inference or training) and a pipeline: passes in any order, any of
them disabled, with random options. A pipeline the parser refuses is skipped (its message is
checked to name a pass); every other one must compile and give eager's outputs and gradients.
``make fuzz`` runs a larger campaign (THUNDERLAB_FUZZ_EXAMPLES, default 25 here).
"""
import os

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thunderlab
from thunderlab.passes.base import PipelineError

EXAMPLES = int(os.environ.get("THUNDERLAB_FUZZ_EXAMPLES", "25"))
STATS = {"programs": 0, "pipelines": 0, "refused": 0}


def mlp(x, w1, w2):
    return torch.nn.functional.gelu(x @ w1).relu() @ w2


def norm_attention(x, w):
    h = torch.nn.functional.layer_norm(x, x.shape[-1:])
    q = h @ w
    return torch.softmax(q @ h.transpose(-1, -2) / 4.0, dim=-1) @ h + x


def shared(x, y):
    a = x * y + x * y  # a common subexpression
    b = (x - 1).exp()
    unused = b.sum()  # noqa: F841 - dead code
    return a.sin() + b, a.tanh().mean()


def writes_input(x, y):
    x.mul_(2)
    return (x + y).cumsum(0)


PROGRAMS = {
    "mlp": (mlp, lambda g: (torch.randn(4, 8), torch.randn(8, 16, requires_grad=g),
                            torch.randn(16, 8, requires_grad=g))),
    "attention": (norm_attention, lambda g: (torch.randn(2, 6, 8, requires_grad=g),
                                             torch.randn(8, 8, requires_grad=g))),
    "shared": (shared, lambda g: (torch.randn(5, requires_grad=g), torch.randn(5))),
    "writes_input": (writes_input, lambda g: (torch.randn(6), torch.randn(6, requires_grad=g))),
}

SPECS = st.sampled_from(["dce", "cse", "autodiff", "del", "fuse", "claim", "claim{decompose=all}",
                         "claim{decompose=layer_norm+gelu+softmax}", "claim{executors=torch}", "remat",
                         "remat{recompute=all}", "remat{recompute=views}", "fuse{max_size=2}"])


@st.composite
def pipelines(draw):
    specs = draw(st.lists(SPECS, min_size=1, max_size=9))
    off = draw(st.lists(st.booleans(), min_size=len(specs), max_size=len(specs)))
    return ",".join(("-" if o else "") + s for s, o in zip(specs, off))


def _clone(args):
    return tuple(a.detach().clone().requires_grad_(a.requires_grad) for a in args)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=not os.environ.get("THUNDERLAB_FUZZ_RANDOM"),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(name=st.sampled_from(sorted(PROGRAMS)), grad=st.booleans(), pipeline=pipelines())
def test_every_pipeline_that_parses_gives_eagers_answers(name, grad, pipeline):
    fn, make = PROGRAMS[name]
    try:
        thunderlab.Pipeline.parse(pipeline)
    except PipelineError as e:
        STATS["refused"] += 1
        assert any(p in str(e) for p in ("pass", "pipeline")), str(e)
        return
    STATS["pipelines"] += 1
    STATS["programs"] += 1
    torch._dynamo.reset()
    args = make(grad)
    ref_args, got_args = _clone(args), _clone(args)
    want = fn(*ref_args)
    got = thunderlab.jit(fn, pipeline=pipeline)(*got_args)
    want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
    for w, g in zip(want, got, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name} with {pipeline!r}: {m}")
    for w, g in zip(ref_args, got_args):
        torch.testing.assert_close(g.detach(), w.detach(), msg=lambda m: f"{name} with {pipeline!r}, inputs after: {m}")
    if grad:
        loss_w = sum(o.float().sum() for o in want if o.requires_grad)
        loss_g = sum(o.float().sum() for o in got if o.requires_grad)
        leaves = [a for a in ref_args if a.requires_grad]
        gw = torch.autograd.grad(loss_w, leaves, allow_unused=True)
        gg = torch.autograd.grad(loss_g, [a for a in got_args if a.requires_grad], allow_unused=True)
        for i, (w, g) in enumerate(zip(gw, gg)):
            assert (w is None) == (g is None), f"{name} with {pipeline!r}: gradient {i} present in one only"
            if w is not None:
                torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5,
                                           msg=lambda m, i=i: f"{name} with {pipeline!r}, gradient {i}: {m}")


@pytest.fixture(scope="module", autouse=True)
def _report_counts():
    yield
    out = os.environ.get("THUNDERLAB_FUZZ_REPORT")
    if out:
        import json

        with open(out, "w") as f:
            json.dump(dict(STATS, examples=EXAMPLES), f)
