"""FX graph -> trace: readable input names, source lines, opaque calls, clear errors."""
import pytest
import torch

import thunderlab
from thunderlab.core.trace import TraceError
from thunderlab.frontend.fx import input_name, lower


@pytest.mark.parametrize("raw, want", [
    ("L_self_modules_fc_parameters_weight_", "fc_weight"),
    ("L_x_", "x"),
    ("L_self_modules_blocks_modules_0_modules_ln_parameters_bias_", "blocks_0_ln_bias"),
    ("s77", "s77"),
    ("L_lambda_", "a_lambda"),
])
def test_input_names(raw, want):
    assert input_name(raw) == want


def test_module_parameters_become_named_inputs():
    m = torch.nn.Sequential(torch.nn.Linear(3, 3))
    j = thunderlab.jit(m)
    j(torch.randn(2, 3))
    inputs = [i.name for i in thunderlab.last_record(j).steps[0].program.forward.inputs]
    assert len(inputs) == 3
    assert any(n.endswith("weight") for n in inputs) and any(n.endswith("bias") for n in inputs)


def test_wrong_number_of_inputs_is_a_clear_error():
    gm = torch.fx.symbolic_trace(lambda x, y: x + y)
    with pytest.raises(TraceError, match="takes 2 inputs, got 1"):
        lower(gm, (torch.randn(2),))


def test_shape_errors_name_the_op_and_source_line():
    def f(x, y):
        return x.view(7, -1) + y

    j = thunderlab.jit(f)
    with pytest.raises(Exception) as e:
        j(torch.randn(4, 4), torch.randn(4))
    msg = str(e.value)
    assert "view" in msg and "[7, -1]" in msg


def test_tensor_methods_and_views_trace():
    def f(x):
        a, b = x.chunk(2, dim=-1)
        y = torch.cat([a.transpose(0, 1), b.permute(1, 0)], dim=0)
        return y.contiguous().flatten()[1:-1:2].unsqueeze(0).expand(3, -1) * x.mean()

    j = thunderlab.jit(f, pipeline="dce,cse,claim{decompose=all},del", verify=True)
    x = torch.randn(4, 6)
    torch.testing.assert_close(j(x), f(x))


def test_python_unary_operators_map_to_symbols():
    def f(x):
        return -x + abs(x)

    j = thunderlab.jit(f)
    x = torch.randn(5)
    torch.testing.assert_close(j(x), f(x))
    code = thunderlab.last_record(j).steps[0].program.forward.python(source=False)
    assert "ltorch.neg(x)" in code and "ltorch.abs(x)" in code and "opaque" not in code


def test_arithmetic_on_symbolic_sizes_stays_python_after_a_shape_change():
    """After a second shape Dynamo passes sizes as SymInt inputs; `4 * n` on them is a number, not a tensor."""
    def f(x, y):
        n = x.shape[0]
        pad = max(3 - (x.shape[1] % 4), 0)  # MobileNet's TF padding: torch.sym_max of size arithmetic
        return y.expand(4 * n, n - 1, x.shape[1] // 2) + x[: n - 1, :2].sum(), torch.nn.functional.pad(x, (0, pad))

    j = thunderlab.jit(f)
    for rows, cols in ((3, 4), (5, 6)):
        x, y = torch.randn(rows, cols), torch.randn(1, 1, 1)
        torch.testing.assert_close(j(x, y), f(x, y))
    graph = thunderlab.last_record(j).steps[0].program.forward.python(source=False)
    assert "ltorch.mul" not in graph and "ltorch.sub" not in graph, graph


def test_creation_ops_take_their_size_by_keyword():
    """torch.zeros(size=...) (BEiT's relative position index) is the same call as torch.zeros(...)."""
    def f(x):
        return x + torch.zeros(size=(2, 3)) + torch.ones((2, 3)) + torch.empty(2, 3).zero_()

    j = thunderlab.jit(f)
    x = torch.randn(2, 3)
    torch.testing.assert_close(j(x), f(x))
    assert "ltorch.zeros(size=(2, 3))" in thunderlab.last_record(j).steps[0].program.forward.python(source=False)
