"""Bisection and a verified re-run agree, always: the step a re-run's verification blames first is the step
``bisect`` names, for training compiles (after the optimizer has changed the parameters), functions that
write into their inputs, records of a function with several graphs, and programs a later pass repairs."""
from dataclasses import dataclass

import pytest
import torch

import thunderlab
from thunderlab.examples import NanoGPTBlock
from thunderlab.passes import Pass, register_pass


@register_pass
@dataclass(frozen=True)
class NegateOutputs(Pass):
    """Negates the forward's first output (a wrong program, for tests)."""

    name = "test-negate-output"

    def __call__(self, program):
        from thunderlab.core.symbols import BoundSymbol
        from thunderlab.ops import ltorch

        def one(t):
            if t.name != "forward":
                return t
            out = t.output_proxies()[0]
            new = t.derive()
            neg = new.proxy(out.shape, out.dtype, out.device, out.requires_grad)
            new.bound_symbols = [*t.bound_symbols, BoundSymbol(ltorch.neg, (out,), {}, neg)]
            swap = {out.name: neg}

            def walk(s):
                if isinstance(s, tuple):
                    return tuple(walk(e) for e in s)
                if isinstance(s, list):
                    return [walk(e) for e in s]
                return swap.get(getattr(s, "name", None), s)

            new.output = walk(t.output) if program.training is None else (walk(t.output[0]), t.output[1])
            return new
        return program.map(one)


@register_pass
@dataclass(frozen=True)
class RemoveNegations(Pass):
    """Removes what test-negate-output added: a later pass that repairs the program (for tests)."""

    name = "test-undo-negation"

    def __call__(self, program):
        def one(t):
            neg = [b for b in t.bound_symbols if b.sym.name == "neg"]
            if not neg:
                return t
            b = neg[-1]
            swap = {b.output.name: b.args[0]}

            def walk(s):
                if isinstance(s, tuple):
                    return tuple(walk(e) for e in s)
                if isinstance(s, list):
                    return [walk(e) for e in s]
                return swap.get(getattr(s, "name", None), s)

            return t.derive(bound_symbols=[x for x in t.bound_symbols if x is not b], output=walk(t.output))
        return program.map(one)


def _first_failure(record):
    return next((s for s in record.steps if s.verification is not None and not s.verification.ok), None)


def _agree(record, pipeline):
    new = thunderlab.rerun(record, pipeline)
    failed = _first_failure(new)
    found = thunderlab.bisect(new)
    assert (found.step if found else None) == (failed.index if failed else None), (new.table(), found)
    return new, found


def test_bisect_after_training_steps_agrees_with_a_verified_rerun():
    # the defect this guards: the re-run compared against eager's outputs from before the optimizer's updates,
    # failing every step it ran, while bisect (comparing against eager now) blamed nothing
    torch.manual_seed(0)
    model = NanoGPTBlock(n_embd=32, n_head=2).train()
    jm = thunderlab.jit(model, verify=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randn(2, 8, 32)
    for _ in range(3):
        jm(x).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
    rec = thunderlab.last_record(jm)
    new, found = _agree(rec, "claim,autodiff,del")
    assert found is None and all(s.verification.ok for s in new.steps)
    new, found = _agree(rec, "dce,autodiff,test-negate-output,claim,del")
    assert found is not None and found.spec == "test-negate-output"


def _writes(x, y):
    x.add_(y)
    return x * 2


def test_bisect_on_a_function_that_writes_its_input_agrees_with_a_verified_rerun():
    x, y = torch.randn(4), torch.randn(4)
    j = thunderlab.jit(_writes, verify=True)
    j(x, y)
    j(x, y)  # x has changed twice since the record was made
    rec = thunderlab.last_record(j)
    _, found = _agree(rec, "dce,cse,claim,del")
    assert found is None
    _, found = _agree(rec, "dce,test-negate-output,claim,del")
    assert found is not None and found.spec == "test-negate-output"


def _two_graphs(x):
    y = x.sin() * 2
    print("", end="")  # TorchDynamo breaks the graph here: two graphs, two records
    return y.cos() + 1


def test_bisect_on_each_graph_of_a_function_with_a_graph_break():
    j = thunderlab.jit(_two_graphs, verify=True)
    x = torch.randn(5)
    torch.testing.assert_close(j(x), _two_graphs(x))
    recs = j.records
    assert len(recs) == 2
    for rec in recs:
        _, found = _agree(rec, "dce,test-negate-output,claim,del")
        assert found is not None and found.spec == "test-negate-output" and found.step == 2


def test_bisect_names_a_broken_step_that_a_later_pass_repairs():
    j = thunderlab.jit(lambda x: (x * 3).exp(), verify=True)
    x = torch.randn(6)
    j(x)
    rec = thunderlab.last_record(j)
    new, found = _agree(rec, "dce,test-negate-output,test-undo-negation,claim,del")
    assert new.steps[-1].verification.ok  # the final program is right again...
    assert found is not None and found.spec == "test-negate-output"  # ...and bisect still names where it broke


def test_bisect_on_an_autocast_record_compares_with_eager_under_the_same_autocast():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    j = thunderlab.jit(model, verify=True)
    x = torch.randn(4, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        j(x)
    rec = thunderlab.last_record(j)
    assert all(s.verification.ok for s in rec.steps), rec.table()
    # outside the autocast block now: both sides must still run as they were captured
    _, found = _agree(rec, "dce,cse,claim,del")
    assert found is None
    _, found = _agree(rec, "dce,test-negate-output,claim,del")
    assert found is not None and found.spec == "test-negate-output"


@pytest.mark.parametrize("pipeline", ["dce,cse,claim,del", "cse,claim{decompose=all},del"])
def test_bisect_on_an_unchanged_record_finds_nothing(pipeline):
    j = thunderlab.jit(lambda x: torch.nn.functional.gelu(x) * x, pipeline=pipeline, keep_inputs=True)
    j(torch.randn(3, 3))
    assert thunderlab.bisect(thunderlab.last_record(j)) is None
