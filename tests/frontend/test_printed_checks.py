"""Direct calls through the printed function (DirectCalls.run): a changed guarded input never runs a program
made for other inputs. Each case calls the jitted function until its printed function runs it, changes
one thing TorchDynamo guards (dtype, shape, grad mode, requires_grad, a module's training flag, a global,
a parameter), and checks the result against eager and that the right program ran."""
import pytest
import torch

import thunderlab
from thunderlab.frontend.bytecode import plain_call
from thunderlab.frontend.dispatch import UNCHECKED

OFFSET = 1.0


def _warm(j, *args):
    """Call ``j`` until its printed function runs the call (the second call is the first direct one)."""
    for _ in range(3):
        j(*args)
    assert j.direct.run(args) is not UNCHECKED, j.direct.why_not


def test_a_new_dtype_or_shape_is_not_run_by_the_printed_check():
    j = thunderlab.jit(lambda x: x * 2 + 1)
    x = torch.randn(4)
    _warm(j, x)
    for other in (torch.randn(4, dtype=torch.float64), torch.randn(5), torch.randn(2, 2), torch.randn(8)[::2]):
        assert j.direct.run((other,)) is UNCHECKED  # not the program made for float32[4], contiguous
        out = j(other)
        torch.testing.assert_close(out, other * 2 + 1)
        assert out.dtype == other.dtype and out.shape == other.shape
    _warm(j, torch.randn(5))  # float32[5] has an entry of its own now, printed beside the first
    misses = j.cache_info["misses"]
    for other in (torch.randn(5), torch.randn(4)):
        assert j.direct.run((other,)) is not UNCHECKED
        torch.testing.assert_close(j(other), other * 2 + 1)
    assert j.cache_info["misses"] == misses


def test_grad_mode_and_requires_grad_take_their_own_entries():
    j = thunderlab.jit(lambda x: (x.sin() * 3).sum())
    x = torch.randn(6)
    w = torch.randn(6, requires_grad=True)
    _warm(j, x)
    out = j(w)  # requires_grad differs: Dynamo's guards fail, a training program is compiled
    assert out.requires_grad and out.grad_fn is not None
    out.backward()
    torch.testing.assert_close(w.grad, w.detach().cos() * 3)
    w.grad = None
    _warm(j, w)
    with torch.no_grad():  # grad mode differs: the training entry's printed check must not pass
        assert j.direct.run((w,)) is UNCHECKED
        out = j(w)
        assert not out.requires_grad and out.grad_fn is None
        _warm(j, w)
    out = j(w)  # grad mode back on: the training entry again, through the printed function
    assert out.grad_fn is not None
    out.backward()
    torch.testing.assert_close(w.grad, w.detach().cos() * 3)
    assert not j(x).requires_grad


def test_a_module_training_flag_and_its_parameters_are_seen():
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5))
    j = thunderlab.jit(m)
    x = torch.randn(8, 4)
    m.eval()
    with torch.no_grad():
        _warm(j, x)
        torch.testing.assert_close(j(x), m[0](x))
        m.train()  # dropout now drops: the eval program must not run
        assert j.direct.run((x,)) is UNCHECKED
        out = j(x)
        assert (out == 0).any() and not torch.equal(out, m[0](x))
        m.eval()
        torch.testing.assert_close(j(x), m[0](x))
        m[0].weight = torch.nn.Parameter(torch.randn(4, 4))  # a parameter replaced
        torch.testing.assert_close(j(x), m[0](x))
        m[0].weight.mul_(2)  # changed in place: the same tensor, the program reads it as it is now
        torch.testing.assert_close(j(x), m[0](x))


def test_a_changed_global_is_seen():
    global OFFSET

    def f(x):
        return torch.cos(x) + OFFSET

    j = thunderlab.jit(f)
    x = torch.randn(3)
    _warm(j, x)
    try:
        OFFSET = 4.0
        torch.testing.assert_close(j(x), torch.cos(x) + 4.0)
        torch.testing.assert_close(j(x), torch.cos(x) + 4.0)
    finally:
        OFFSET = 1.0
    torch.testing.assert_close(j(x), torch.cos(x) + 1.0)


ACT = torch.relu


def test_a_rebound_global_function_is_seen():
    global ACT

    def f(x):
        return ACT(x) * 2

    j = thunderlab.jit(f)
    x = torch.randn(6)
    _warm(j, x)
    assert "_program1(" in j.direct.run_source and " is _e" in j.direct.run_source  # printed identity checks
    try:
        ACT = torch.tanh
        assert j.direct.run((x,)) is UNCHECKED
        torch.testing.assert_close(j(x), torch.tanh(x) * 2)
    finally:
        ACT = torch.relu
    torch.testing.assert_close(j(x), torch.relu(x) * 2)


def test_the_same_tensor_twice_is_not_run_by_a_program_for_two():
    j = thunderlab.jit(lambda a, b: a.add_(1) * b)
    a, b = torch.zeros(3), torch.ones(3)
    _warm(j, a, b)
    c = torch.zeros(3)
    assert j.direct.run((c, c)) is UNCHECKED  # Dynamo guards the two against being one object
    torch.testing.assert_close(j(c, c), torch.ones(3))


def test_autocast_and_torch_function_modes_are_not_run_by_the_printed_check():
    j = thunderlab.jit(lambda x, y: x @ y)
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    _warm(j, x, y)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert j.direct.run((x, y)) is UNCHECKED
        assert j(x, y).dtype == torch.bfloat16

    class Mode(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Mode():
        assert j.direct.run((x, y)) is UNCHECKED
    torch.testing.assert_close(j(x, y), x @ y)


def test_the_printed_function_runs_the_program_without_the_bytecode():
    j = thunderlab.jit(lambda x: torch.relu(x) - 1)
    x = torch.randn(5)
    _warm(j, x)
    assert "_program1(" in j.direct.run_source  # the graph's program is called by the printed function itself
    hits = j.cache_info["hits"]
    torch.testing.assert_close(j(x), torch.relu(x) - 1)
    assert j.cache_info["hits"] == hits + 1


def _call_graph(x):
    _o = __thunderlab_direct__compiled_fn_1(x, x.shape)  # noqa: F821 - never called, only read
    return _o[0], [_o[1], x]


def _store_attribute(x):
    _o = __thunderlab_direct__compiled_fn_1(x)  # noqa: F821
    x.seen = True
    return _o[0]


def _call_twice(x):
    _o = __thunderlab_direct__compiled_fn_1(x)  # noqa: F821
    return __thunderlab_direct__compiled_fn_1(_o[0])  # noqa: F821


@pytest.mark.parametrize("fn, expected", [
    (_call_graph, ("__thunderlab_direct__compiled_fn_1", ("_a0", "_a0.shape"), "(_o[0], [_o[1], _a0], )")),
    (_store_attribute, None),  # a side effect the bytecode replays: it must run
    (_call_twice, None),
])
def test_plain_call_reads_only_bytecode_that_calls_one_graph(fn, expected):
    plain = plain_call(fn.__code__, "__thunderlab_direct__compiled_fn", "utils", {"x": "_a0"})
    assert (tuple(plain) if plain else None) == expected
