"""Lowering constructs outside thunderlab's own symbols: custom operators, allow_in_graph functions,
out= arguments, values known only at run time."""
import ast

import pytest
import torch

import thunderlab
from thunderlab.frontend.dynamo import Backend


@torch.library.custom_op("thunderlab_test::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("thunderlab_test::bump", mutates_args=("x",))
def bump(x: torch.Tensor) -> None:
    x.add_(1)


@bump.register_fake
def _(x):
    return None


def _program(j):
    return thunderlab.last_record(j).program.forward.python()


def test_a_custom_op_prints_as_the_operator_it_is():
    j = thunderlab.jit(lambda x: twice(x) + 1)
    x = torch.randn(3)
    torch.testing.assert_close(j(x), x * 2 + 1)
    assert "torch.ops.thunderlab_test.twice.default(x)" in _program(j)


def test_a_custom_op_that_mutates_is_kept_and_writes():
    def fn(x, y):
        bump(y)
        return x + 1

    y = torch.zeros(3)
    thunderlab.jit(fn)(torch.zeros(3), y)
    torch.testing.assert_close(y, torch.ones(3))


def test_an_allow_in_graph_lambda_prints_as_valid_python():
    inner = torch._dynamo.allow_in_graph(lambda x: x.cos() + 1)
    j = thunderlab.jit(lambda x: inner(x) * 2)
    x = torch.randn(3)
    torch.testing.assert_close(j(x), (x.cos() + 1) * 2)
    ast.parse(_program(j))


def test_out_argument_writes_the_buffer_and_returns_it():
    def fn(x, out):
        r = torch.sin(x, out=out)
        return r + 1

    x, out = torch.randn(3), torch.zeros(3)
    torch.testing.assert_close(thunderlab.jit(fn)(x, out), x.sin() + 1)
    torch.testing.assert_close(out, x.sin())


def test_a_graph_with_a_value_known_only_at_run_time_runs_as_captured_and_says_why():
    backend = Backend()

    def fn(x):
        return x * x.sum().item()

    x = torch.randn(3)
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        with pytest.warns(UserWarning, match="runs eagerly.*item.*capture_scalar_outputs"):
            got = torch.compile(fn, backend=backend)(x)
    torch.testing.assert_close(got, fn(x))
    assert len(backend.eager) == 1 and not backend.graphs
