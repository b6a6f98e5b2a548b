"""Pipelines parse and print back; bad input is a clear error; the runner records every step."""
from dataclasses import dataclass

import pytest
import torch

import thunderlab
from thunderlab.core.program import Program
from thunderlab.passes import REGISTRY, Pass, Pipeline, PipelineError, register_pass
from thunderlab.runtime.compiled import CompileError


@pytest.mark.parametrize("text", [
    "dce,cse,claim,del",
    "dce,claim{executors=torch},del",
    "claim{executors=torch,decompose=all}",
    "cse,claim{decompose=layer_norm+gelu},-dce,del",
])
def test_parse_print_round_trip(text):
    assert str(Pipeline.parse(text)) == text
    assert Pipeline.parse(str(Pipeline.parse(text))) == Pipeline.parse(text)


def test_parse_tolerates_spaces():
    assert str(Pipeline.parse(" dce , claim{ executors = torch } ")) == "dce,claim{executors=torch}"


@pytest.mark.parametrize("text, words", [
    ("dce,fusee", ["unknown pass 'fusee'", "claim, cse, dce, ddp, del"]),
    ("claim{color=red}", ["no option 'color'", "executors", "decompose"]),
    ("claim{executors=cuda}", ["unknown executor 'cuda'", "torch"]),
    ("del,dce", ["'del' must be the last pass", "'dce'"]),
    ("dce;cse", ["expected ','"]),
    ("claim{executors}", ["key=value"]),
])
def test_bad_pipelines_name_the_problem_and_what_is_valid(text, words):
    with pytest.raises(PipelineError) as e:
        Pipeline.parse(text)
    for w in words:
        assert w in str(e.value)


def test_bad_pipeline_fails_at_jit_time():
    with pytest.raises(PipelineError):
        thunderlab.jit(lambda x: x + 1, pipeline="dce,nope")


def test_bad_option_type():
    @register_pass
    @dataclass(frozen=True)
    class Scale(Pass):
        """Test pass with a typed option."""

        name = "test-typed"
        factor: int = 1

        def __call__(self, program):
            return program

    with pytest.raises(PipelineError, match="takes an int, got 'two'"):
        Pipeline.parse("test-typed{factor=two}")
    assert Pipeline.parse("test-typed{factor=2}").passes()[0].factor == 2


def test_requires_is_enforced():
    @register_pass
    @dataclass(frozen=True)
    class AfterClaim(Pass):
        """Test pass that needs claim."""

        name = "test-after-claim"
        requires = ("claim",)

        def __call__(self, program):
            return program

    with pytest.raises(PipelineError, match="requires 'claim'"):
        Pipeline.parse("dce,test-after-claim")
    Pipeline.parse("claim,test-after-claim")


def f_dup(x):
    a = torch.exp(x) + 1
    b = torch.exp(x) + 1
    dead = torch.tanh(x) * 3  # noqa: F841
    return a * b


def _record(fn, pipeline, *args):
    j = thunderlab.jit(fn, pipeline=pipeline, verify=True)
    out = j(*args)
    torch.testing.assert_close(out, fn(*args))
    return thunderlab.last_record(j)


def test_dce_and_cse_counts():
    x = torch.randn(4, 4)
    rec = _record(f_dup, "dce,cse", x)
    counts = [(s.spec, s.symbols_before, s.symbols_after) for s in rec.steps]
    # capture: exp, add, exp, add, tanh, mul, mul = 7
    assert counts == [("capture", 0, 7), ("dce", 7, 5), ("cse", 5, 3)]
    assert all(s.verification.ok for s in rec.steps)
    assert rec.steps[-1].verification.max_error == 0.0


def test_del_frees_after_last_use():
    rec = _record(f_dup, "dce,cse,del", torch.randn(3))
    text = rec.steps[-1].python()
    assert "del x" in text
    lines = [ln.strip() for ln in text.splitlines()]
    use = max(i for i, ln in enumerate(lines) if "(x)" in ln or "(x," in ln)
    assert lines[use + 1].startswith("del") and "x" in lines[use + 1]


def test_claim_decompose_and_declines_kept():
    rec = _record(lambda x, w: torch.nn.functional.layer_norm(x, (8,), w), "claim{decompose=layer_norm}",
                  torch.randn(2, 8), torch.randn(8))
    step = rec.steps[-1]
    assert step.notes["decomposed"] == 1 and "ltorch.layer_norm" in step.notes["decomposed_symbols"]
    names = [b.sym.qualname for b in step.program.forward.bound_symbols]
    assert "ltorch.layer_norm" not in names and "prims.var_mean" in names
    assert all(b.executor == "torch" for b in step.program.forward.bound_symbols)


def test_stable_ids_and_origins():
    rec = _record(f_dup, "dce,cse,claim{decompose=all},del", torch.randn(3))
    cap = {b.id for b in rec.steps[0].program.forward.bound_symbols}
    after_cse = rec.steps[2].program.forward.bound_symbols
    assert {b.id for b in after_cse} <= cap  # cse keeps ids of what it keeps
    final = rec.steps[-1].program.forward.bound_symbols
    dels = [b for b in final if b.sym.name == "python_del"]
    assert dels and all(b.origin == "del" for b in dels)
    decomposed = [b for b in final if b.sym.is_prim and b.sym.name != "python_del"]
    assert decomposed and all(b.origin == "claim" for b in decomposed)


def test_failing_pass_keeps_earlier_steps_and_names_the_pass():
    @register_pass
    @dataclass(frozen=True)
    class Explode(Pass):
        """Always fails (for tests)."""

        name = "test-explode"

        def __call__(self, program: Program) -> Program:
            raise RuntimeError("boom")

    j = thunderlab.jit(f_dup, pipeline="dce,cse,test-explode,claim")
    with pytest.raises(CompileError) as e:
        j(torch.randn(3))
    assert "test-explode" in str(e.value) and "boom" in str(e.value)
    rec = e.value.record
    assert [s.spec for s in rec.steps] == ["capture", "dce", "cse", "test-explode"]
    assert rec.steps[2].program is not None and rec.steps[3].program is None
    assert rec.steps[3].error and rec.error
    assert thunderlab.last_record(j) is rec


def test_user_pass_from_a_cell_is_usable_at_once():
    from thunderlab.core.trace import Trace

    @register_pass
    @dataclass(frozen=True)
    class DropNothing(Pass):
        """Reverse nothing; count calls (a user-defined pass)."""

        name = "test-count"
        calls = []

        def __call__(self, program):
            self.calls.append(1)
            return program.map(lambda t: t.derive())

    assert "test-count" in REGISTRY
    rec = _record(f_dup, "dce,test-count,claim", torch.randn(2))
    assert DropNothing.calls == [1]
    assert rec.steps[2].spec == "test-count"
    assert isinstance(rec.steps[2].program.forward, Trace)


def test_broken_pass_is_caught_by_verification():
    from thunderlab.core.symbols import BoundSymbol

    @register_pass
    @dataclass(frozen=True)
    class Reverse(Pass):
        """Reverses statement order (breaks SSA; for tests)."""

        name = "test-reverse"

        def __call__(self, program):
            return program.map(lambda t: t.derive(bound_symbols=list(reversed(t.bound_symbols))))

    j = thunderlab.jit(f_dup, pipeline="dce,test-reverse")
    with pytest.raises(CompileError, match="'test-reverse' .step 2. produced an invalid program"):
        j(torch.randn(3))
    rec = thunderlab.last_record(j)
    step = rec.steps[2]
    assert step.spec == "test-reverse" and not step.verification.ok
    assert "before it is defined" in step.verification.structural
    assert BoundSymbol  # imported for the type of what the pass reorders


def test_rerun_with_an_edited_pipeline():
    rec = _record(f_dup, "dce,cse,claim", torch.randn(5))
    new = thunderlab.rerun(rec, "claim{decompose=all},del")
    assert new.steps[0] is rec.steps[0]
    assert [s.spec for s in new.steps] == ["capture", "claim{decompose=all}", "del"]
    assert new.steps[-1].symbols_after > rec.steps[-1].symbols_after
    assert all(s.verification.ok for s in new.steps)
