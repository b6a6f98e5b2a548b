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
    found = thunderlab.bisect(thunderlab.last_record(rec))
    assert found is not None and found.spec == "test-drop-unused-draws"


def _mutates(x):
    x.mul_(2)
    return x.sum()


def test_a_pass_that_loses_a_mutation_of_an_input_is_named():
    thunderlab.jit(_mutates, pipeline="dce,cse,claim,del", verify=True)(torch.randn(4))
    j = thunderlab.jit(_mutates, pipeline="dce,test-drop-writes,claim,del", verify=True)
    with pytest.raises(
        CompileError, match=r"'test-drop-writes' .step 2. produced wrong numbers: input \(after the call\) 0"
    ):
        j(torch.randn(4))


@register_pass
@dataclass(frozen=True)
class CopyTransposes(Pass):
    """Makes every ``t`` (a view) return a copy instead: the values stay, the aliasing does not (for tests)."""

    name = "test-copy-transposes"

    def __call__(self, program):
        from thunderlab.core.proxies import TensorProxy
        from thunderlab.core.symbols import BoundSymbol
        from thunderlab.ops import ltorch

        def one(t):
            new = t.derive(bound_symbols=[])
            for b in t.bound_symbols:
                if b.sym.name != "t":
                    new.bound_symbols.append(b)
                    continue
                o = b.output
                view = TensorProxy(new.add_name(f"{o.name}_view"), o.shape, o.dtype, o.device, o.requires_grad)
                new.bound_symbols += [b.replace(output=view), BoundSymbol(ltorch.clone, (view,), {}, o)]
            return new
        return program.map(one)


def _view_of_intermediate(x):
    y = x * 2
    return y, y.t()  # eager: the second output is a view of the first


def _view_of_input(x):
    return x.t() * 1, x.t()  # eager: the second output is a view of the input


def test_a_pass_that_returns_a_copy_where_eager_returns_a_view_is_named():
    x = torch.randn(3, 4)
    a, b = thunderlab.jit(_view_of_intermediate, pipeline="dce,cse,claim{executors=torch},del", verify=True)(x)
    assert b._base is a or torch._C._is_alias_of(a, b)
    j = thunderlab.jit(_view_of_intermediate, pipeline="dce,test-copy-transposes,cse,claim{executors=torch},del",
                       verify=True)
    with pytest.raises(CompileError, match=r"'test-copy-transposes' .step 2. produced different aliasing: "
                                           r"output 1 shares memory with output 0 in eager, not in the program"):
        j(x)
    rec = thunderlab.jit(_view_of_intermediate, pipeline="dce,test-copy-transposes,cse,claim{executors=torch},del")
    a, b = rec(x)
    assert torch.equal(a.t(), b) and not torch._C._is_alias_of(a, b)  # what verification catches: same values
    found = thunderlab.bisect(thunderlab.last_record(rec))
    assert found is not None and found.spec == "test-copy-transposes" and "aliasing" in found.detail


def test_returned_views_of_inputs_are_remade_by_the_runtime_so_a_copy_there_is_no_difference():
    x = torch.randn(3, 4)
    j = thunderlab.jit(_view_of_input, pipeline="dce,test-copy-transposes,cse,claim{executors=torch},del", verify=True)
    _, b = j(x)
    assert b._base is x  # the runtime returns eager's view of the caller's tensor whatever the program computed
    assert all(s.verification.ok for s in thunderlab.last_record(j).steps)


def test_a_program_that_returns_an_input_where_eager_returns_a_copy_fails_verification():
    from thunderlab.core.program import Program
    from thunderlab.passes.verification import Reference, verify

    def f(x):
        return x.clone()

    rec = thunderlab.jit(f, pipeline="dce,claim{executors=torch},del", keep_inputs=True)
    x = torch.randn(4)
    rec(x)
    program = thunderlab.last_record(rec).steps[0].program
    same = program.map(lambda t: t.derive(bound_symbols=[], output=t.inputs[0]))  # returns x itself
    ref = Reference(x.clone(), (x.clone(),))
    assert verify(program, (x,), ref).ok
    v = verify(Program(dict(same.traces)), (x,), ref)
    assert not v.ok and "output 0 shares memory with input 0 in the program, not in eager" in v.detail
