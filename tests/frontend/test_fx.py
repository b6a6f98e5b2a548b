"""FX graph -> trace: readable input names, source lines, opaque calls, clear errors."""
import re

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


def _lowered(fn, *args):
    gm = torch.fx.symbolic_trace(fn)
    program, _ = lower(gm, args)
    return program, program.forward.python(source=False)


def test_a_write_through_a_view_becomes_a_write_to_its_base():
    def f(x):
        x.diagonal().mul_(2)
        return x + 0

    program, code = _lowered(f, torch.randn(3, 3))
    assert "_diagonal_scatter(x, " in code  # the view's new value put back into the base
    assert code.count("prims.copy_(") == 1  # and the input written once, at the end
    assert program.boundary.written_inputs == (0,)
    x = torch.randn(3, 3)
    want = f(x.clone())
    torch.testing.assert_close(program.forward.callable()(x), want)


def test_views_read_after_a_write_are_regenerated_from_the_new_base():
    def f(x):
        v = x[1]
        x.add_(1)
        return v * 2

    program, code = _lowered(f, torch.randn(2, 3))
    x = torch.randn(2, 3)
    torch.testing.assert_close(program.forward.callable()(x.clone()), f(x.clone()))
    assert code.index("ltorch.add(") < code.rindex("getitem(")  # v is taken again after the write


def test_whether_a_call_is_a_view_is_pytorchs_answer():
    def f(x):
        x.t().reshape(-1).add_(1)  # reshape of a transposed tensor copies: x is not written
        x.reshape(-1).add_(1)  # reshape of a contiguous one is a view: x is written
        return x

    program, code = _lowered(f, torch.randn(2, 3))
    assert program.boundary.written_inputs == (0,) and code.count("ltorch.add(") == 2
    x = torch.randn(2, 3)
    got = x.clone()
    program.forward.callable()(got)
    torch.testing.assert_close(got, f(x.clone()))


def test_returned_views_of_inputs_are_listed_for_the_runtime():
    program, _ = _lowered(lambda x: x.add_(1).t(), torch.randn(2, 3))
    [(leaf, position, steps)] = program.boundary.input_views
    assert (leaf, position) == (0, 0) and [s.name for s in steps] == ["t"]


def test_inplace_ops_that_change_a_shape_are_refused_by_name():
    with pytest.raises(TraceError, match="unsqueeze_.*does not fit"):
        _lowered(lambda x: x.unsqueeze_(0), torch.randn(3))


def _dynamo_graph(fn, *args):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch.compile(fn, backend=backend, fullgraph=True)(*args)
    return graphs[0]


def test_an_autocast_region_is_one_call_under_the_same_autocast():
    def f(a, b):
        y = a.exp()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            z = y @ b
        return z + 1

    a, b = torch.randn(2, 3), torch.randn(3, 2)
    trace = lower(_dynamo_graph(f, a, b), (a, b))[0].forward
    code = trace.python(source=False)
    assert re.search(r"_autocast_region\w*\(t0, b\)", code) and "ltorch.exp(a)" in code  # only the region is opaque
    region = next(bs for bs in trace.bound_symbols if bs.sym.name == "autocast_region")
    assert region.output[0].dtype == torch.bfloat16  # autocast's dtype, not the inputs'
    torch.testing.assert_close(trace.callable()(a, b)[0], f(a, b), rtol=0, atol=0)


def test_a_write_inside_an_autocast_region_is_refused_by_name():
    def f(a):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            a.mul_(2)
        return a

    a = torch.randn(3)
    with pytest.raises(TraceError, match="in-place mul_ inside a torch.autocast region"):
        lower(_dynamo_graph(f, a.clone()), (a,))


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


def _geqrf(x):
    q, tau = torch.geqrf(x)
    return q * 2 + tau.sum()


def _geqrf_method(x):
    return x.geqrf()[0] + 1


def _histogram(x):
    return torch.histogram(x, bins=3).hist + 1


def _binomial(x):
    return torch.binomial(x.abs().round() + 1, torch.full_like(x, 0.5)) * 2


@pytest.mark.parametrize("fn, op, kernel", [
    (_geqrf, "torch.geqrf", "aten::geqrf"),
    (_geqrf_method, "torch.Tensor.geqrf", "aten::geqrf"),
    (_histogram, "torch.histogram", "aten::histogram"),
    (_binomial, "torch.binomial", "aten::binomial"),
])
def test_an_op_with_no_meta_kernel_is_refused_by_name(fn, op, kernel):
    """PyTorch documents these ops for CPU tensors but gives them no meta kernel, so their shapes are unknown."""
    try:
        fn(torch.randn(4, 3, device="meta"))
        pytest.skip(f"{op} has a meta kernel in PyTorch {torch.__version__}")
    except NotImplementedError:
        pass
    torch._dynamo.reset()
    with pytest.raises(TraceError) as e:
        thunderlab.jit(fn)(torch.randn(4, 3))
    msg = str(e.value)
    assert f"{op} has no meta kernel in PyTorch {torch.__version__} ({kernel}" in msg, msg
    assert f"call {op} outside the compiled function and pass its result in" in msg, msg
    assert "custom_ops_landing_page" not in msg  # torch's advice is for authors of custom ops


def test_an_op_with_no_meta_kernel_runs_outside_the_compiled_function():
    def rest(q, tau):
        return q * 2 + tau.sum()

    x = torch.randn(4, 3)
    q, tau = torch.geqrf(x)
    torch.testing.assert_close(thunderlab.jit(rest)(q, tau), _geqrf(x))
