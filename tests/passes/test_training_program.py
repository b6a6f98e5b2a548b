"""The training program says what it is: saved values and differentiated outputs are data on Program,
checked after every pass, so a pass that breaks the contract is named."""
from dataclasses import dataclass, replace

import pytest
import torch

import thunderlab
from thunderlab import Pass, register_pass
from thunderlab.core.program import Program, Training
from thunderlab.core.verify import VerificationError, check_program
from thunderlab.runtime.compiled import CompileError


def f(x, w):
    return torch.tanh(x @ w).sum(-1) * 2.0, x.detach() + 1


def _inputs():
    torch.manual_seed(0)
    return torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)


@register_pass
@dataclass(frozen=True)
class ForgetTraining(Pass):
    """Rebuilds the program from its traces alone, losing the training contract (for tests)."""

    name = "test-forget-training"

    def __call__(self, program):
        return Program(dict(program.traces))


@register_pass
@dataclass(frozen=True)
class DropSaved(Pass):
    """Saves one value fewer in the forward without telling the backward (for tests)."""

    name = "test-drop-saved"

    def __call__(self, program):
        out, saved = program.forward.output
        return Program({**program.traces, "forward": program.forward.derive(output=(out, tuple(saved)[:-1]))},
                       program.training)


@register_pass
@dataclass(frozen=True)
class GradOfNothing(Pass):
    """Claims a gradient for a value the forward does not return (for tests)."""

    name = "test-grad-of-nothing"

    def __call__(self, program):
        return replace(program, training=replace(program.training, grad_of=("nowhere",)))


def test_autodiff_makes_the_contract_explicit_and_remat_keeps_it():
    j = thunderlab.jit(f, pipeline="dce,autodiff,remat,claim,del")
    x, w = _inputs()
    out, other = j(x, w)
    rec = thunderlab.last_record(j)
    after_autodiff, final = rec.steps[2].program, rec.program
    for prog in (after_autodiff, final):
        tr = prog.training
        assert isinstance(tr, Training)
        bw = prog.backward
        assert tr.saved == tuple(p.name for p in bw.inputs[:len(tr.saved)])
        assert len(prog.saved) == len(tr.saved) and len(bw.inputs) == len(tr.saved) + len(tr.grad_of)
        # one gradient, for the differentiable output; the detached one takes none
        assert tr.grad_of == (prog.outputs[0].name,)
        check_program(prog)
    assert rec.steps[1].program.training is None  # before autodiff: no backward, no contract
    out.sum().backward()
    x2, w2 = _inputs()
    ref, _ = f(x2, w2)
    ref.sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)
    torch.testing.assert_close(w.grad, w2.grad)


@pytest.mark.parametrize("name, says", [
    ("test-forget-training", "backward trace but no training contract"),
    ("test-drop-saved", "forward: saves 2 values for backward; the training contract says 3"),
    ("test-grad-of-nothing", "gradient of nowhere, which the forward does not return"),
])
def test_a_pass_that_breaks_the_training_contract_is_named(name, says):
    j = thunderlab.jit(f, pipeline=f"dce,autodiff,{name},claim,del")
    with pytest.raises(CompileError) as e:
        j(*_inputs())
    msg = str(e.value)
    assert f"pass '{name}' (step 3) produced an invalid program" in msg and says in msg, msg
    rec = thunderlab.last_record(j)
    assert rec.steps[2].verification.ok and not rec.steps[3].verification.ok


def test_a_contract_without_a_backward_is_an_error():
    j = thunderlab.jit(f, pipeline="dce,autodiff,claim,del")
    j(*_inputs())
    prog = thunderlab.last_record(j).program
    with pytest.raises(VerificationError, match="no backward trace"):
        check_program(Program({"forward": prog.forward}, prog.training))


def test_the_boundary_is_data_on_the_program_kept_by_every_pass():
    """What the call does to the caller's tensors (which inputs it writes, which outputs view an input) is the
    frontend's word to the runtime: a typed field of Program that passes hand on, never a key in a trace."""
    def g(x, w):
        w.mul_(2)  # a write to an input: eager leaves it doubled
        return (x @ w).t(), w[0]  # and an output that is a view of the input w

    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 5)
    j = thunderlab.jit(g, pipeline="dce,cse,autodiff,remat,claim,fuse,del")
    w_eager = w.clone()
    want = g(x, w_eager)
    got = j(x, w)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(w, w_eager)
    assert got[1]._base is w or got[1].data_ptr() == w.data_ptr(), "the returned view shares w's memory, as in eager"
    rec = thunderlab.last_record(j)
    captured = rec.steps[0].program.boundary
    (i,) = captured.written_inputs  # positions among the captured graph's inputs (TorchDynamo orders them)
    assert "w" in rec.steps[0].program.forward.inputs[i].name
    assert [(k, at) for k, at, _ in captured.input_views] == [(1, i)]
    assert all(s.program.boundary == captured for s in rec.steps), "every pass keeps it"
    assert not hasattr(rec.steps[-1].program.forward, "meta"), "not a bag of keys on a trace"
