"""The torch executor: aten operators are called at their C++ entry point, and tracers still see the operators."""
import copy

import pytest
import torch

import thunderlab
import thunderlab.executors.torch as torch_executor
from thunderlab.examples import EXAMPLES
from thunderlab.executors.base import bind, get_executor

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


def test_a_program_bound_for_a_tracer_calls_the_operators_themselves(operator_calls, monkeypatch):
    monkeypatch.setattr(torch_executor, "NATIVE_GELU_BELOW", 0)  # the same GELU kernels on both sides
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
        assert (a is None and b is None) or torch.equal(a, b)


def _gelu_step(model, x, fn=None):
    out = (fn or model)(x)
    out.pow(2).mean().backward()
    return [out.detach()] + [p.grad for p in model.parameters()]


def _gelu_model(width: int):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU(), torch.nn.Linear(width, 4)), \
        torch.randn(8, width)


def test_small_exact_gelu_runs_atens_kernel_not_onednns():
    model, x = _gelu_model(64)  # 512 elements: below NATIVE_GELU_BELOW
    ref = copy.deepcopy(model)
    native = copy.deepcopy(model)
    got = _gelu_step(model, x, thunderlab.jit(model, pipeline=PIPELINE))
    assert torch._C._get_mkldnn_enabled()  # switched off only around the kernels
    with torch.backends.mkldnn.flags(enabled=False):
        want = _gelu_step(native, x)
    for a, b in zip(got, want):
        assert torch.equal(a, b)  # bit for bit what ATen's own kernels give
    for a, b in zip(got, _gelu_step(ref, x)):
        torch.testing.assert_close(a, b)  # and eager's (oneDNN's) to float32 rounding


@pytest.mark.parametrize("case", ["threshold_zero", "large"])
def test_eager_gelu_kernels_where_they_are_chosen(case, monkeypatch):
    width = 2048  # 8 x 2048 = 16384 elements: oneDNN's, as eager
    if case == "threshold_zero":
        monkeypatch.setattr(torch_executor, "NATIVE_GELU_BELOW", 0)
        width = 64
    model, x = _gelu_model(width)
    ref = copy.deepcopy(model)
    got = _gelu_step(model, x, thunderlab.jit(model, pipeline=PIPELINE))
    for a, b in zip(got, _gelu_step(ref, x)):
        assert torch.equal(a, b)


def test_onednn_is_switched_back_on_when_the_kernel_raises():
    gelu_backward = get_executor("torch").implementation(torch_ops_symbol("gelu_backward"))
    with pytest.raises(RuntimeError):
        gelu_backward(torch.randn(4, 8), torch.randn(4, 7))  # shapes that do not match
    assert torch._C._get_mkldnn_enabled()


def torch_ops_symbol(name):
    from thunderlab.ops import torch_ops

    return getattr(torch_ops, name)
