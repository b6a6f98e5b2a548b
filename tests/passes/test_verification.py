"""Verification against eager: random programs are compared on the same seed, mutated inputs are compared too."""
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F

import thunderlab
from thunderlab.passes import Pass, register_pass
from thunderlab.runtime.compiled import CompileError


@register_pass
@dataclass(frozen=True)
class DropUnusedDraws(Pass):
    """Drops random calls whose results nothing uses: a different random stream afterwards (for tests)."""

    name = "test-drop-unused-draws"

    def __call__(self, program):
        def one(t):
            used = {p.name for b in t.bound_symbols for p in b.inputs} | {p.name for p in t.output_proxies()}
            return t.derive(bound_symbols=[b for b in t.bound_symbols
                                           if not (b.sym.random and not any(p.name in used for p in b.outputs))])
        return program.map(one)


@register_pass
@dataclass(frozen=True)
class DropWrites(Pass):
    """Drops every write to an input: the caller's tensors are left unchanged (for tests)."""

    name = "test-drop-writes"

    def __call__(self, program):
        return program.map(lambda t: t.derive(bound_symbols=[b for b in t.bound_symbols if b.sym.name != "copy_"]))


def _draws(x):
    torch.rand(3)  # unused, yet it moves the generator
    return F.dropout(x, 0.5) + torch.rand_like(x)


def test_random_programs_verify_against_eager_on_the_same_seed():
    j = thunderlab.jit(_draws, pipeline="dce,cse,claim,del", verify=True)
    j(torch.randn(16))
    assert all(s.verification.ok for s in thunderlab.last_record(j).steps)


def test_a_pass_that_changes_the_random_stream_is_named():
    j = thunderlab.jit(_draws, pipeline="cse,test-drop-unused-draws,claim,del", verify=True)
    with pytest.raises(CompileError, match="'test-drop-unused-draws' .step 2. produced wrong numbers"):
        j(torch.randn(16))
    rec = thunderlab.jit(_draws, pipeline="cse,claim,test-drop-unused-draws,del")
    x = torch.randn(16)  # records hold inputs weakly: bisection needs them alive
    rec(x)
    found = thunderlab.last_record(rec).bisect()
    assert found is not None and found.spec == "test-drop-unused-draws"


def _mutates(x):
    x.mul_(2)
    return x.sum()


def test_a_pass_that_loses_a_mutation_of_an_input_is_named():
    thunderlab.jit(_mutates, pipeline="dce,cse,claim,del", verify=True)(torch.randn(4))
    j = thunderlab.jit(_mutates, pipeline="dce,test-drop-writes,claim,del", verify=True)
    with pytest.raises(CompileError, match=r"'test-drop-writes' .step 2. produced wrong numbers: input \(after the call\) 0"):
        j(torch.randn(4))
