"""The torch executor: aten operators are called at their C++ entry point, and tracers still see the operators."""
import copy

import pytest
import torch

import thunderlab
from thunderlab.examples import EXAMPLES
from thunderlab.executors.base import bind

PIPELINE = "dce,cse,autodiff,remat,claim{executors=torch},del"


@pytest.fixture
def operator_calls(monkeypatch):
    """Names of the torch.ops operators entered through their Python __call__."""
    seen = []
    for cls in (torch._ops.OpOverload, torch._ops.OpOverloadPacket):
        original = cls.__call__

        def spy(self, /, *args, _original=original, **kwargs):
            seen.append(str(self))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__call__", spy)
    return seen


def test_training_step_calls_aten_backward_kernels_without_their_python_layer(operator_calls):
    model, (x,) = EXAMPLES["mlp"]()  # GELU and ReLU: gelu_backward and threshold_backward are aten operators
    ref = copy.deepcopy(model)
    j = thunderlab.jit(model, pipeline=PIPELINE)
    j(x).pow(2).mean().backward()  # compiles: Dynamo and the passes call operators on fake tensors
    operator_calls.clear()
    j(x).pow(2).mean().backward()
    backward = thunderlab.last_record(j).program.traces["backward"]
    assert {"gelu_backward", "threshold_backward"} <= {b.sym.name for b in backward.bound_symbols}
    assert operator_calls == []
    ref(x).pow(2).mean().backward()
    ref(x).pow(2).mean().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad)


def test_a_program_bound_for_a_tracer_calls_the_operators_themselves(operator_calls):
    model, (x,) = EXAMPLES["mlp"]()
    j = thunderlab.jit(model, pipeline=PIPELINE)
    j(x).pow(2).mean().backward()
    backward = thunderlab.last_record(j).program.traces["backward"]
    inputs = [torch.randn(p.shape) for p in backward.inputs]
    fast, traced = bind(backward, packed=True), bind(backward, packed=True, traced=True)
    operator_calls.clear()
    expected = fast(list(inputs))
    assert operator_calls == []
    got = traced(list(inputs))
    assert {"aten.gelu_backward.default", "aten.threshold_backward.default"} <= set(operator_calls)
    for a, b in zip(expected, got):
        if a is None:
            assert b is None
        else:
            torch.testing.assert_close(a, b)
