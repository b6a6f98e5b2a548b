"""Mistakes in pipelines are named before anything runs; a user pass that raises anywhere is named and loses nothing."""
from dataclasses import dataclass

import pytest
import torch

import thunderlab
from thunderlab import Pass, Pipeline, register_pass
from thunderlab.passes.base import PipelineError, PipelineWarning
from thunderlab.runtime.compiled import CompileError


def f(x):
    return (x * 2).sin() + x


def test_an_option_given_twice_is_an_error():
    with pytest.raises(PipelineError, match=r"option 'executors' of pass 'claim' is given twice .*give it once"):
        Pipeline.parse("dce,claim{executors=torch,executors=inductor},del")


def test_decompose_names_an_unknown_symbol_with_suggestions():
    with pytest.raises(PipelineError, match=r"decompose names 'layernorm'.*did you mean .*layer_norm"):
        Pipeline.parse("claim{decompose=layernorm},del")
    with pytest.raises(PipelineError, match=r"'frobnicate', 'gelu2'.*are not torch-level symbols.*'all'"):
        thunderlab.jit(f, pipeline="claim{decompose=frobnicate+gelu2},del")
    Pipeline.parse("claim{decompose=layer_norm+gelu},del")  # real names pass
    Pipeline.parse("claim{decompose=all},del")


def test_unknown_executor_in_the_environment_is_named_at_jit_time(monkeypatch):
    monkeypatch.setenv("THUNDERLAB_EXECUTORS", "inductor+trch")
    with pytest.raises(PipelineError, match=r"THUNDERLAB_EXECUTORS='inductor\+trch' names unknown executor 'trch'; "
                                            r"valid executors: .*torch"):
        thunderlab.jit(f)
    monkeypatch.setenv("THUNDERLAB_EXECUTORS", "+")
    with pytest.raises(PipelineError, match="names no executor"):
        thunderlab.jit(f)


def test_a_pass_that_does_nothing_the_second_time_is_warned():
    with pytest.warns(PipelineWarning, match="'autodiff' appears more than once"):
        Pipeline.parse("autodiff,dce,autodiff,claim,del")


@register_pass
@dataclass(frozen=True)
class BadDescribe(Pass):
    """Changes nothing, then fails to describe what it did (for tests)."""

    name = "test-bad-describe"

    def __call__(self, program):
        return program.map(lambda t: t.derive())

    def describe(self, before, after):
        raise KeyError("no such note")


@register_pass
@dataclass(frozen=True)
class BadSetup(Pass):
    """Fails while being set up for its place in the pipeline (for tests)."""

    name = "test-bad-setup"

    def in_pipeline(self, following):
        raise RuntimeError("cannot place me")

    def __call__(self, program):
        return program


@pytest.mark.parametrize("name, doing", [("test-bad-describe", "describing its result"),
                                         ("test-bad-setup", "setting up")])
def test_a_user_pass_that_raises_outside_its_call_is_named_and_keeps_earlier_steps(name, doing):
    j = thunderlab.jit(f, pipeline=f"dce,cse,{name},claim,del")
    with pytest.raises(CompileError, match=f"pass '{name}' .step 3. raised .* while {doing}"):
        j(torch.randn(4))
    rec = thunderlab.last_record(j)
    assert [s.spec for s in rec.steps] == ["capture", "dce", "cse", name]
    assert all(s.program is not None for s in rec.steps[:3]) and rec.steps[3].error
