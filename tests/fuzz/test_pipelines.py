"""Random pipelines over random small programs: every pipeline that parses compiles to eager's answers.

Hypothesis draws a program (inference or training) and a pipeline: every registered pass, in any
order, repeated (a pass drawn twice in a row as often as not), any of them disabled, each with its
options drawn from what the option takes. A pipeline the parser refuses must name a pass; one that
parses must either give eager's outputs, inputs after the call and gradients, or be refused while
compiling with an error that names the pass (never a raw exception from inside the compiler).
``make fuzz`` runs a larger campaign (THUNDERLAB_FUZZ_EXAMPLES, default 25 here); with
THUNDERLAB_FUZZ_REPORT set, the counts are written there (benchmarks/robustness.py records them).
"""
import os
import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thunderlab
from thunderlab.executors.base import EXECUTORS
from thunderlab.passes.base import REGISTRY, PipelineError, PipelineWarning
from thunderlab.passes.claim import ClaimError
from thunderlab.passes.remat import POLICIES
from thunderlab.runtime.compiled import CompileError

EXAMPLES = int(os.environ.get("THUNDERLAB_FUZZ_EXAMPLES", "25"))
# cases: pipelines tried; equal_to_eager: compiled and gave eager's answers; refused_by_name: refused by
# the parser or while compiling (of_them_while_compiling), naming a pass; repeated: cases whose enabled
# passes name one pass twice or more. A wrong answer or a raw error fails the test; they are counted
# first so that a campaign's report shows them.
STATS = {"cases": 0, "equal_to_eager": 0, "refused_by_name": 0, "of_them_while_compiling": 0, "wrong": 0,
         "raw_errors": 0, "repeated": 0}


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


def convs(x, w1, w2):
    h = torch.nn.functional.conv2d(torch.relu(torch.nn.functional.conv2d(x, w1, padding=1)), w2)
    return h.view(h.shape[0], -1).tanh(), h


def writes_input(x, y):
    x.mul_(2)
    return (x + y).cumsum(0)


PROGRAMS = {
    "mlp": (mlp, lambda g: (torch.randn(4, 8), torch.randn(8, 16, requires_grad=g),
                            torch.randn(16, 8, requires_grad=g))),
    "attention": (norm_attention, lambda g: (torch.randn(2, 6, 8, requires_grad=g),
                                             torch.randn(8, 8, requires_grad=g))),
    "shared": (shared, lambda g: (torch.randn(5, requires_grad=g), torch.randn(5))),
    "convs": (convs, lambda g: (torch.randn(2, 3, 6, 6, requires_grad=g), torch.randn(4, 3, 3, 3, requires_grad=g),
                                torch.randn(5, 4, 3, 3))),
    "writes_input": (writes_input, lambda g: (torch.randn(6), torch.randn(6, requires_grad=g))),
}

# every pass a pipeline can name; a pass added to the registry must be drawn here too (checked below)
PASSES = ("dce", "cse", "channels-last", "autodiff", "claim", "fuse", "remat", "ddp", "fsdp", "sink-waits", "del")
# symbols the programs above call, so that decompose=... often hits something, and a few they do not
DECOMPOSABLE = ("layer_norm", "gelu", "softmax", "matmul", "relu", "tanh", "mean", "cumsum", "exp", "sum", "linear")


@st.composite
def options(draw, name):
    opts = []
    if name == "claim":
        executors = draw(st.lists(st.sampled_from(sorted(EXECUTORS)), unique=True, max_size=3))
        if executors:
            opts.append(f"executors={'+'.join(executors)}")
        decompose = draw(st.one_of(st.just(()), st.just(("all",)),
                                   st.lists(st.sampled_from(DECOMPOSABLE), min_size=1, max_size=3, unique=True)))
        if decompose:
            opts.append(f"decompose={'+'.join(decompose)}")
    elif name == "fuse":
        size = draw(st.one_of(st.none(), st.integers(min_value=1, max_value=4), st.just(1024)))
        if size is not None:
            opts.append(f"max_size={size}")
    elif name == "ddp":  # one process: world=1 (nothing to average), or none (refused: no process group)
        world = draw(st.one_of(st.none(), st.just(1)))
        if world is not None:
            opts.append(f"world={world}")
        if draw(st.booleans()):
            opts.append(f"bucket_mb={draw(st.sampled_from([0.0001, 1, 25]))}")
    elif name == "fsdp":  # the programs' weights are arguments, not nn.Parameters: nothing to shard
        world = draw(st.one_of(st.none(), st.just(1), st.just(2)))
        if world is not None:
            opts.append(f"world={world}")
        opts.append(f"level={draw(st.sampled_from([2, 3]))}")
    elif name == "sink-waits":
        opts.append(f"kinds={draw(st.sampled_from(['all', 'all_reduce', 'all_gather+reduce_scatter']))}")
        opts.append(f"in_flight={draw(st.sampled_from([0, 1, 2]))}")
    elif name == "remat":
        policy = draw(st.one_of(st.none(), st.sampled_from(POLICIES)))
        if policy is not None:
            opts.append(f"recompute={policy}")
    opts = draw(st.permutations(opts))
    return name + ("{" + ",".join(opts) + "}" if opts else "")


@st.composite
def pipelines(draw):
    names = draw(st.lists(st.sampled_from(PASSES), min_size=1, max_size=7))
    specs = []
    for name in names:
        specs.append(draw(options(name)))
        if draw(st.booleans()):  # the same pass again at once, with options of its own
            specs.append(draw(options(name)))
    off = draw(st.lists(st.booleans(), min_size=len(specs), max_size=len(specs)))
    return ",".join(("-" if o else "") + s for s, o in zip(specs, off))


def test_the_fuzz_draws_every_registered_pass():
    assert set(PASSES) == {n for n in REGISTRY if not n.startswith("test-")}


def _clone(args):
    return tuple(a.detach().clone().requires_grad_(a.requires_grad) for a in args)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=not os.environ.get("THUNDERLAB_FUZZ_RANDOM"),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(name=st.sampled_from(sorted(PROGRAMS)), grad=st.booleans(), pipeline=pipelines())
def test_every_pipeline_that_parses_gives_eagers_answers(name, grad, pipeline):
    STATS["cases"] += 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PipelineWarning)  # a repeat that changes nothing is warned, and legal
            parsed = thunderlab.Pipeline.parse(pipeline)
    except PipelineError as e:
        STATS["refused_by_name"] += 1
        assert any(f"'{p}'" in str(e) or str(e).startswith(f"{p}:") for p in PASSES), str(e)
        return
    enabled = [s.name for s in parsed.enabled()]
    STATS["repeated"] += len(set(enabled)) < len(enabled)
    try:
        _check(name, grad, pipeline)
    except CompileError as e:
        # a deliberate refusal while compiling (e.g. claim{executors=inductor} and an op inductor declines)
        if not any(f"raised {kind.__name__} " in str(e) for kind in (ClaimError, PipelineError)):
            STATS["raw_errors"] += 1
            raise
        STATS["refused_by_name"] += 1
        STATS["of_them_while_compiling"] += 1
        return
    except AssertionError:
        STATS["wrong"] += 1
        raise
    except Exception:
        STATS["raw_errors"] += 1
        raise
    STATS["equal_to_eager"] += 1


def _check(name, grad, pipeline):
    fn, make = PROGRAMS[name]
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
