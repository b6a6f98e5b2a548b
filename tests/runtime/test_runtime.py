"""The compiled callable: cache keyed on input metadata, recompiles, dynamic shapes, in-place ops."""
import pytest
import torch

import thunderlab


def test_cache_hits_and_misses():
    j = thunderlab.jit(lambda x: torch.relu(x) * 2)
    x = torch.randn(4)
    for _ in range(3):
        torch.testing.assert_close(j(x), torch.relu(x) * 2)
    assert j.cache_info["misses"] == 1 and j.cache_info["hits"] == 2


@pytest.mark.parametrize("other", [
    lambda: torch.randn(4, dtype=torch.float64),
    lambda: torch.randn(4, requires_grad=True),
    lambda: torch.randn(5),
])
def test_mismatched_inputs_recompile_and_stay_correct(other):
    def f(x):
        return torch.sin(x) + x.sum()

    j = thunderlab.jit(f)
    x = torch.randn(4)
    j(x)
    y = other()
    out = j(y)
    torch.testing.assert_close(out, f(y))
    assert out.dtype == y.dtype and out.requires_grad == y.requires_grad
    assert len(j.records) >= 2


def test_batch_size_change_with_dynamic_shapes():
    """After a shape change Dynamo hands over symbolic sizes; results must stay right per shape."""
    lin = torch.nn.Linear(16, 8)

    def f(x):
        b = x.shape[0]
        return lin(x).view(b, 2, 4).softmax(-1).reshape(b, -1) + x.size(0)

    j = thunderlab.jit(f)
    for b in (2, 3, 5, 3, 7):
        x = torch.randn(b, 16)
        with torch.no_grad():
            torch.testing.assert_close(j(x), f(x))
    recs = j.records
    # one capture for b=2, then one per new concrete size under the dynamic graph
    assert len(recs) == 4
    assert any("int" in r.steps[0].python() for r in recs)  # the symbolic size appears as an int input


def test_torch_compile_backend_records():
    before = len(thunderlab.records())
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU())
    cm = torch.compile(m, backend="thunderlab")
    x = torch.randn(3, 8)
    with torch.no_grad():
        torch.testing.assert_close(cm(x), m(x))
    recs = thunderlab.records()[before:]
    assert len(recs) == 1 and recs[0].steps[-1].spec == "del"


def test_graph_breaks_give_one_record_per_graph():
    def f(x):
        y = torch.cos(x) + 1
        print("graph break here", end="\r")
        return torch.sin(y) * 2

    j = thunderlab.jit(f)
    x = torch.randn(6)
    torch.testing.assert_close(j(x), f(x))
    assert j.cache_info["graphs"] == 2
    assert len(j.records) == 2


def test_inplace_on_intermediate_is_functionalized():
    def f(x):
        y = x * 2
        y.add_(1)
        y.mul_(3)
        return y

    j = thunderlab.jit(f)
    x = torch.randn(5)
    torch.testing.assert_close(j(x), f(x))
    code = thunderlab.last_record(j).steps[0].program.forward.python(source=False)
    assert "add_" not in code and "mul_" not in code
    assert "t1 = ltorch.add(t0, 1)" in code and "t2 = ltorch.mul(t1, 3)" in code


def test_inplace_on_input_writes_back():
    def f(x, buf):
        buf.add_(x)
        return buf * 2

    j = thunderlab.jit(f)
    x, buf = torch.randn(4), torch.zeros(4)
    buf_ref = buf.clone()
    out = j(x, buf)
    ref = f(x, buf_ref)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(buf, buf_ref)  # the input was mutated as in eager
    assert "prims.copy_(" in thunderlab.last_record(j).steps[-1].python()


def test_inplace_through_a_view_keeps_eager_semantics():
    def f(x):
        y = x.clone()
        v = y[0]
        v.mul_(10)
        return y + 1

    j = thunderlab.jit(f)
    x = torch.randn(3, 4)
    torch.testing.assert_close(j(x), f(x))


def test_batchnorm_training_updates_running_stats():
    bn = torch.nn.BatchNorm1d(6)
    bn_ref = torch.nn.BatchNorm1d(6)
    bn_ref.load_state_dict(bn.state_dict())
    j = thunderlab.jit(bn)
    for _ in range(2):
        x = torch.randn(8, 6)
        torch.testing.assert_close(j(x), bn_ref(x))
    torch.testing.assert_close(bn.running_mean, bn_ref.running_mean)
    torch.testing.assert_close(bn.running_var, bn_ref.running_var)
    assert int(bn.num_batches_tracked) == int(bn_ref.num_batches_tracked) == 2


def test_decomposed_batchnorm_training_updates_running_stats():
    bn = torch.nn.BatchNorm2d(3)
    bn_ref = torch.nn.BatchNorm2d(3)
    bn_ref.load_state_dict(bn.state_dict())
    j = thunderlab.jit(bn, pipeline="dce,cse,claim{decompose=all},del")
    x = torch.randn(4, 3, 5, 5)
    torch.testing.assert_close(j(x), bn_ref(x))
    torch.testing.assert_close(bn.running_mean, bn_ref.running_mean)
    torch.testing.assert_close(bn.running_var, bn_ref.running_var)


def test_unmapped_op_runs_as_opaque_torch_call():
    def f(x):
        return torch.cummax(x, 0).values + torch.special.i0(x)

    j = thunderlab.jit(f)
    x = torch.randn(7)
    torch.testing.assert_close(j(x), f(x))
    text = thunderlab.last_record(j).steps[0].python()
    assert "torch.cummax(" in text and "torch.special" in text or "_opaque_" in text


def test_gradients_flow_through_torch_executor():
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    ref = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    ref.load_state_dict(m.state_dict())
    x = torch.randn(5, 4)
    thunderlab.jit(m)(x).sum().backward()
    ref(x).sum().backward()
    for p, q in zip(m.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad)


def test_last_record_errors_are_clear():
    j = thunderlab.jit(lambda x: x + 1)
    with pytest.raises(ValueError, match="has not been compiled yet"):
        thunderlab.last_record(j)
    with pytest.raises(TypeError, match="thunderlab.records"):
        thunderlab.last_record(lambda x: x)


def test_last_traces_one_per_step():
    j = thunderlab.jit(lambda x: torch.exp(x) - 1)
    j(torch.randn(3))
    traces = thunderlab.last_traces(j)
    passes = thunderlab.Pipeline.parse(thunderlab.DEFAULT_PIPELINE)
    assert len(traces) == len(thunderlab.last_record(j).steps) == 1 + len(passes)
    assert all(t.name == "forward" for t in traces)


def test_python_float_that_changes_is_specialized_per_value():
    """After a float argument changes, Dynamo passes it as a 0-d tensor and reads it with .item():
    each value gets a program of its own, keyed by the value."""
    def f(x, scale):
        return torch.tanh(x) * scale

    from thunderlab.frontend.dynamo import _default_backend

    cm = torch.compile(f, backend="thunderlab")
    x = torch.randn(6)
    for s in (1.0, 2.0, 3.0, 2.0, 0.5):
        torch.testing.assert_close(cm(x, s), f(x, s))
    graph = _default_backend.graphs[-1]
    assert graph.value_inputs and not graph.static
    assert graph.misses == 3 and graph.hits == 1  # 2.0, 3.0 and 0.5 each compiled once; 2.0 again is a hit


def test_a_returned_view_of_a_written_input_is_a_view_of_the_callers_tensor():
    def f(x):
        x.mul_(2)
        return x[1:], x

    j = thunderlab.jit(f)
    x = torch.randn(3, 2)
    want = x * 2
    view, same = j(x)
    assert view._base is x and same is x
    torch.testing.assert_close(x, want)


def test_a_cached_program_that_writes_an_input_refuses_overlapping_inputs():
    def f(a, b):
        a.add_(1)
        return a + b

    j = thunderlab.jit(f)
    j(torch.randn(4), torch.randn(4))
    base = torch.randn(6)
    with pytest.raises(Exception, match="writes to input a, which shares memory with input b"):
        j(base[:4], base[2:])


def test_an_input_with_a_gradient_history_written_by_a_graph_keeps_the_write_in_its_history():
    def f(x):
        h = x * 2
        torch._dynamo.graph_break()
        h[1:].mul_(h[:1].detach() + 2)  # the second graph writes h, which autograd must see
        torch._dynamo.graph_break()
        return h * 3

    x = torch.randn(3, requires_grad=True)
    ref = x.detach().clone().requires_grad_()
    out = torch.compile(f, backend="thunderlab")(x)
    out.sum().backward()
    f(ref).sum().backward()
    torch.testing.assert_close(x.grad, ref.grad)
    torch.testing.assert_close(out, f(ref.detach()))


def test_the_overlap_check_of_a_program_that_writes_an_input_compares_only_tensors_on_that_inputs_storage(monkeypatch):
    """A model with batch norm writes its running statistics: each call asks whether a written input shares memory
    with another input. Comparing every pair of a CNN's hundreds of inputs cost milliseconds a step; only the
    tensors on a written input's storage need comparing, and the answer stays the same."""
    from thunderlab.core import aliases

    asked = []
    real = aliases.overlapping
    monkeypatch.setattr(aliases, "overlapping", lambda tensors: asked.append(sorted(tensors)) or real(tensors))
    base, others = torch.randn(10), [torch.randn(3) for _ in range(50)]
    assert aliases.overlap_with([*others, base[:6], base[4:]], [50])  # the written input meets the last one
    assert asked == [["50", "51"]]
    asked.clear()
    assert not aliases.overlap_with([*others, base[:5], base[5:]], [50])  # same storage, disjoint ranges
    assert not aliases.overlap_with([*others, base[:5], torch.randn(4)], [50])  # alone on its storage
    assert asked == [["50", "51"]]
    assert aliases.overlap_with([base, base[2:3], torch.empty(0)], [1])
    assert not aliases.overlap_with([torch.empty(0)] * 2, [0])
