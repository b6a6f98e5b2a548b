"""A pass may not change the program it is given, nor the program's interface; the pass is named either way."""
from dataclasses import dataclass

import pytest
import torch

import thunderlab
from thunderlab import Pass, register_pass
from thunderlab.core.program import Boundary
from thunderlab.ops import torch_ops as lt
from thunderlab.runtime.compiled import CompileError


def f(x, y):
    return (x * y).sin() + y, x.cos()


def _compile(pipeline, verify=False):
    j = thunderlab.jit(f, pipeline=pipeline, verify=verify)
    with pytest.raises(CompileError) as e:
        j(torch.randn(4), torch.randn(4))
    return str(e.value), thunderlab.last_record(j)


def _mutating(pass_name, change):
    @dataclass(frozen=True)
    class Mutating(Pass):
        """Changes its input in place (for tests)."""

        name = pass_name

        def __call__(self, program):
            change(program)
            return program.map(lambda t: t.derive())

    return register_pass(Mutating)


_mutating("test-pop-call", lambda p: p.forward.bound_symbols.pop())
_mutating("test-swap-trace", lambda p: p.traces.__setitem__("forward", p.forward.derive(bound_symbols=[])))
_mutating("test-poke-boundary", lambda p: setattr(p, "boundary", Boundary(written_inputs=(0,))))
_mutating("test-swap-output", lambda p: setattr(p.forward, "output", p.forward.output[:1]))


@pytest.mark.parametrize("name, what", [("test-pop-call", "trace 'forward''s calls"), ("test-swap-trace", "its traces"),
                                        ("test-poke-boundary", "its boundary"),
                                        ("test-swap-output", "trace 'forward''s output")])
def test_a_pass_that_changes_its_input_is_named_and_earlier_steps_stay(name, what):
    msg, rec = _compile(f"dce,cse,{name},claim,del")
    assert f"pass '{name}' (step 3)" in msg and "changed the program it was given" in msg and what in msg
    before = rec.steps[2]
    prog = before.program
    assert prog.boundary == Boundary()
    assert len(prog.forward.bound_symbols) == before.symbols_after  # as the step recorded it
    assert len(prog.forward.output) == 2
    torch.manual_seed(0)
    x, y = torch.randn(4), torch.randn(4)
    got = prog.forward.callable()(x, y)  # the earlier step's program still runs and is right
    torch.testing.assert_close(got, f(x, y))


@register_pass
@dataclass(frozen=True)
class DropInput(Pass):
    """Removes the last input from the signature (for tests)."""

    name = "test-drop-input"

    def __call__(self, program):
        return program.map(lambda t: t.derive(inputs=t.inputs[:-1]))


@register_pass
@dataclass(frozen=True)
class DropOutput(Pass):
    """Returns one output fewer (for tests)."""

    name = "test-drop-output"

    def __call__(self, program):
        return program.map(lambda t: t.derive(output=t.output[:1]))


@register_pass
@dataclass(frozen=True)
class WidenOutput(Pass):
    """Makes the first output float64 (for tests): a valid program with a different interface."""

    name = "test-widen-output"

    def __call__(self, program):
        t = program.forward.derive()
        with t.active():
            wide = lt.to(t.output[0], torch.float64)
        return program.map(lambda u: t.derive(output=(wide, *t.output[1:])) if u is program.forward else u)


@pytest.mark.parametrize("verify", [False, True])
@pytest.mark.parametrize("name, says", [
    ("test-drop-input", "y dropped"),
    ("test-drop-output", "returns 1 values, the captured program 2"),
    ("test-widen-output", "output 0 is cpu f64[4], the captured program's is cpu f32[4]")])
def test_a_pass_that_changes_the_interface_fails_verification_named(name, says, verify):
    msg, rec = _compile(f"dce,{name},claim,del", verify=verify)
    assert f"pass '{name}' (step 2)" in msg and says in msg
    assert not rec.steps[2].verification.ok and rec.steps[1].verification.ok
