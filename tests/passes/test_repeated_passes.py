"""A pass repeated, or run again after later passes, either does nothing new or is refused by name.

Every pipeline here parses; each must give eager's outputs and gradients, on a forward-only call
and on a training one. A second ``fuse`` leaves the regions the first one made whole, and a second
``claim`` leaves a region with its executor (or, when that executor is no longer given, claims its
members afresh), so neither hands a region to an executor that cannot run one.
"""
import pytest
import torch

import thunderlab
from thunderlab.passes.base import Pipeline, PipelineError

pytestmark = pytest.mark.filterwarnings("ignore::thunderlab.passes.base.PipelineWarning")


def f(x, w):
    return torch.nn.functional.gelu(x @ w).relu().sum(-1) + x.mean()


# claim's default executors are torch alone under the tests (conftest); a region needs a fusing one
C = "claim{executors=inductor+torch}"
CD = "claim{executors=inductor+torch,decompose=all}"
REPEATS = [p.format(C=C, CD=CD) for p in (
    "dce,dce", "cse,cse", "{C},{C}", "{CD},{CD}", "claim{{decompose=all}},claim{{decompose=all}}",
    "{C},fuse,{C}", "{C},fuse,fuse", "{C},fuse,{C},fuse", "{C},fuse{{max_size=2}},fuse,fuse",
    "{CD},fuse,{CD},fuse", "{C},fuse,claim{{executors=torch}}", "{C},fuse,claim{{executors=torch}},fuse",
    "{C},fuse,dce,cse,fuse,del", "{C},fuse,autodiff,{C},fuse",
    "autodiff,autodiff", "autodiff,remat,remat", "autodiff,remat{{recompute=all}},remat{{recompute=all}}",
    "autodiff,{C},fuse,remat,fuse,del", "autodiff,{C},fuse,remat,{C},fuse,del",
)]


def _run(pipeline, grad):
    torch._dynamo.reset()
    x = torch.randn(3, 4)
    w = torch.randn(4, 5, requires_grad=grad)
    w2 = w.detach().clone().requires_grad_(grad)
    j = thunderlab.jit(f, pipeline=pipeline)
    got = j(x, w)
    want = f(x, w2)
    torch.testing.assert_close(got, want)
    if grad:
        got.sum().backward()
        want.sum().backward()
        torch.testing.assert_close(w.grad, w2.grad)
    return thunderlab.last_record(j)


@pytest.mark.parametrize("grad", [False, True], ids=["forward", "training"])
@pytest.mark.parametrize("pipeline", REPEATS)
def test_a_repeated_pass_gives_eagers_answers(pipeline, grad):
    _run(pipeline, grad)


def _texts(step):
    return {name: t.python() for name, t in step.program.traces.items()}


@pytest.mark.parametrize("grad", [False, True], ids=["forward", "training"])
def test_a_second_fuse_leaves_the_regions_of_the_first_whole(grad):
    rec = _run(f"{C},fuse,fuse", grad)
    first, second = rec.steps[-2], rec.steps[-1]
    assert any(b.sym.is_region for b in first.program.forward.bound_symbols)
    assert _texts(second) == _texts(first)


def test_claim_with_other_executors_after_fuse_claims_the_regions_members_afresh():
    rec = _run("claim{executors=inductor+torch},fuse,claim{executors=torch}", False)
    final = rec.steps[-1].program.forward.bound_symbols
    assert not any(b.sym.is_region for b in final) and {b.executor for b in final} == {"torch"}
    rec = _run("claim{executors=inductor+torch},fuse,claim{executors=inductor+torch}", False)
    assert _texts(rec.steps[-1]) == _texts(rec.steps[-2])


@pytest.mark.parametrize("pipeline, message", [
    ("del,del", "pass 'del' must be the last pass, but 'del' follows it"),
    ("claim,del,fuse", "pass 'del' must be the last pass, but 'fuse' follows it"),
    ("fuse,claim,fuse", "pass 'fuse' requires 'claim' to run before it"),
    ("remat,autodiff,remat", "pass 'remat' requires 'autodiff' to run before it"),
])
def test_a_repeat_that_cannot_work_is_refused_by_name(pipeline, message):
    with pytest.raises(PipelineError, match=message.replace("(", r"\(")):
        Pipeline.parse(pipeline)
