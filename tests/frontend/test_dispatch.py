"""Direct calls: a jitted function skips TorchDynamo's frame machinery only where Dynamo would do the same."""
import functools
import inspect
import sys

import pytest
import torch

import thunderlab

SCALE = 2.0


def _direct(j) -> int:
    return j.cache_info["direct_calls"]


def test_repeated_calls_run_directly_and_match_eager():
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    j = thunderlab.jit(m)
    x = torch.randn(3, 8)
    for _ in range(4):
        torch.testing.assert_close(j(x), m(x))
    assert _direct(j) == 3 and j.cache_info["misses"] == 1


def test_direct_false_sends_every_call_through_dynamo():
    j = thunderlab.jit(lambda x: x.sin() * 2, direct=False)
    x = torch.randn(4)
    for _ in range(3):
        torch.testing.assert_close(j(x), x.sin() * 2)
    assert _direct(j) == 0 and j.cache_info["hits"] == 2


def test_train_eval_switch_recompiles_and_both_modes_stay_right():
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8))
    j = thunderlab.jit(m)
    x = torch.randn(6, 8)
    with torch.no_grad():
        j(x)
        m.eval()
        torch.testing.assert_close(j(x), m(x))
        for _ in range(2):
            torch.testing.assert_close(j(x), m(x))
        m.train()
        ref = torch.nn.functional.batch_norm(m[0](x), None, None, m[1].weight, m[1].bias, training=True)
        torch.testing.assert_close(j(x), ref)
    assert len(j.backend.graphs) == 2 and _direct(j) >= 2


def test_python_attribute_and_global_changes_are_seen():
    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = 2.0

        def forward(self, x):
            return x * self.scale * SCALE

    global SCALE
    m = Scaled()
    j = thunderlab.jit(m)
    x = torch.randn(5)
    torch.testing.assert_close(j(x), x * 4.0)
    torch.testing.assert_close(j(x), x * 4.0)
    m.scale = 3.0
    torch.testing.assert_close(j(x), x * 6.0)
    try:
        SCALE = 5.0
        torch.testing.assert_close(j(x), x * 15.0)
        torch.testing.assert_close(j(x), x * 15.0)
    finally:
        SCALE = 2.0
    assert _direct(j) >= 2


def test_new_shapes_dtypes_and_requires_grad_go_through_dynamo():
    j = thunderlab.jit(lambda x: torch.relu(x) + 1)
    for x in (torch.randn(4), torch.randn(4), torch.randn(4, dtype=torch.float64), torch.randn(7),
              torch.randn(4, requires_grad=True)):
        out = j(x)
        torch.testing.assert_close(out, torch.relu(x) + 1)
        assert out.dtype == x.dtype and out.requires_grad == x.requires_grad


def test_side_effects_in_python_are_replayed_on_every_call():
    class Counting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            self.calls += 1
            return self.lin(x).relu()

    m = Counting()
    j = thunderlab.jit(m)
    x = torch.randn(2, 4)
    for _ in range(3):
        j(x)
    assert m.calls == 3


def test_hooks_keep_calls_on_dynamo_and_run():
    m = torch.nn.Linear(4, 4)
    seen = []
    m.register_forward_hook(lambda mod, args, out: seen.append(out.shape))
    j = thunderlab.jit(m)
    x = torch.randn(2, 4)
    for _ in range(3):
        torch.testing.assert_close(j(x), m(x))
    assert len(seen) == 6 and _direct(j) == 0
    assert "hooks" in j.direct.why_not


def test_global_module_hooks_keep_calls_on_dynamo():
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    j = thunderlab.jit(m)
    x = torch.randn(2, 4)
    j(x)
    j(x)
    assert _direct(j) == 1
    seen = []
    handle = torch.nn.modules.module.register_module_forward_hook(lambda mod, args, out: seen.append(type(mod)))
    try:
        torch.testing.assert_close(j(x), m[1](m[0](x)))
    finally:
        handle.remove()
    assert _direct(j) == 1 and seen and "hooks" in j.direct.why_not


def test_graph_break_keeps_calls_on_dynamo():
    def f(x):
        y = x.sin()
        torch._dynamo.graph_break()
        return y.cos()

    j = thunderlab.jit(f)
    x = torch.randn(5)
    for _ in range(3):
        torch.testing.assert_close(j(x), f(x))
    assert _direct(j) == 0 and "graph break" in j.direct.why_not
    assert j.cache_info["graphs"] == 2 and j.cache_info["hits"] == 4


def test_keyword_arguments_and_defaults():
    def f(x, y=None, *, scale=1.0):
        return (x + (0 if y is None else y)) * scale

    j = thunderlab.jit(f)
    x, y = torch.randn(3), torch.randn(3)
    for _ in range(2):
        torch.testing.assert_close(j(x, scale=3.0), x * 3.0)
        torch.testing.assert_close(j(x, y), x + y)
        torch.testing.assert_close(j(x, y=y, scale=0.5), (x + y) * 0.5)
    assert _direct(j) >= 3
    with pytest.raises(TypeError):
        j(x, y, 1.0)


def test_stance_force_eager_is_respected():
    j = thunderlab.jit(lambda x: x * 3)
    x = torch.randn(3)
    j(x)
    j(x)
    hits = j.cache_info["hits"]
    with torch.compiler.set_stance("force_eager"):
        torch.testing.assert_close(j(x), x * 3)
    assert j.cache_info["hits"] == hits and "stance" in j.direct.why_not


def test_training_through_direct_calls_matches_eager():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    ref.load_state_dict(m.state_dict())
    j = thunderlab.jit(m)
    opt, opt_ref = torch.optim.SGD(m.parameters(), lr=0.1), torch.optim.SGD(ref.parameters(), lr=0.1)
    x = torch.randn(5, 8)
    for _ in range(4):
        losses = []
        for o, fn in ((opt, j), (opt_ref, ref)):
            o.zero_grad()
            loss = fn(x).pow(2).mean()
            loss.backward()
            o.step()
            losses.append(loss.detach())
        torch.testing.assert_close(losses[0], losses[1])
    for p, q in zip(m.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q)
    assert _direct(j) == 3


def test_other_compiles_of_the_same_code_do_not_block_direct_calls():
    """Copies of one module class share a code object, and so Dynamo's cache entries: each finds its own."""
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x).tanh()

    a, b, c = Block(), Block(), Block()
    other = torch.compile(c, backend=lambda gm, example_inputs: gm.forward)
    ja, jb = thunderlab.jit(a), thunderlab.jit(b)
    x = torch.randn(2, 4)
    for _ in range(3):
        for fn, m in ((other, c), (ja, a), (jb, b)):
            torch.testing.assert_close(fn(x), m(x))
    assert _direct(ja) == 2 and _direct(jb) == 2


def test_replacing_forward_after_compiling_runs_the_new_forward():
    class Doubler(torch.nn.Module):
        def forward(self, x):
            return x * 2

    m = Doubler()
    j = thunderlab.jit(m)
    x = torch.randn(3)
    j(x)
    j(x)
    m.forward = lambda x: x * 3  # an instance attribute, as some libraries patch modules
    torch.testing.assert_close(j(x), x * 3)
    del m.forward
    torch.testing.assert_close(j(x), x * 2)
    Doubler.forward = lambda self, x: x * 5
    torch.testing.assert_close(j(x), x * 5)
    assert "replaced" in j.direct.why_not


def test_dynamo_reset_recompiles_instead_of_running_dropped_entries():
    j = thunderlab.jit(lambda x: x.cos() + 1)
    x = torch.randn(3)
    j(x)
    j(x)
    assert _direct(j) == 1 and len(j.records) == 1
    torch._dynamo.reset()
    torch.testing.assert_close(j(x), x.cos() + 1)
    assert len(j.records) == 2  # compiled again, through Dynamo
    j(x)
    assert _direct(j) == 2


def test_nested_outputs_train_through_direct_calls():
    def f(x, w):
        y = x @ w
        return y.sin(), (y.cos(), {"a": y * 2})

    j = thunderlab.jit(f)
    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 2, requires_grad=True)
    grads = []
    for fn in (j, j, f):
        a, (b, d) = fn(x, w)
        (a.sum() + b.pow(2).sum() + d["a"].sum()).backward()
        grads.append((x.grad, w.grad))
        x.grad = w.grad = None
    for g in grads[:2]:
        torch.testing.assert_close(g, grads[2])
    assert _direct(j) == 1


def test_direct_calls_reach_the_graph_without_dynamo_wrappers_and_keep_profiler_markers():
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    j = thunderlab.jit(m)
    x = torch.randn(2, 8)
    j(x)
    seen = []
    graph_type = type(j.backend.graphs[0])
    original = graph_type.__call__

    def spy(self, *args):  # the graph is entered from the direct call's bytecode, not from Dynamo's wrapper
        seen.append(sys._getframe(1).f_code.co_name)
        return original(self, *args)

    graph_type.__call__ = spy
    try:
        torch.testing.assert_close(j(x), m(x))
    finally:
        graph_type.__call__ = original
    assert _direct(j) == 1 and seen and "_fn" not in seen  # _fn: torch._dynamo.disable's wrapper
    with torch.profiler.profile() as prof:
        j(x)
    assert _direct(j) == 2
    assert any(e.name == "Pregraph bytecode" for e in prof.events())


def test_dynamo_run_only_mode_goes_through_dynamo():
    j = thunderlab.jit(lambda x: x.cos() + 1)
    x = torch.randn(3)
    j(x)

    @torch._dynamo.run
    def run_only(v):
        return j(v)

    torch.testing.assert_close(run_only(x), x.cos() + 1)
    assert _direct(j) == 0 and "frame hook" in j.direct.why_not


def test_a_direct_call_runs_no_python_layer_of_dynamo_outside_its_guards():
    """Per call, the direct path runs: thunderlab's entry, Dynamo's guards (C++; some guards call Python,
    e.g. the saved-tensor-hooks check), the rewritten bytecode, the compiled graph. Not the guard manager's
    Python check() wrapper, nor the profiler marker functions while no profiler runs."""
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    j = thunderlab.jit(m)
    x = torch.randn(2, 8)
    j(x)
    j(x)
    frames = []

    def record(frame, event, arg):
        if event == "call":
            frames.append((frame.f_code.co_filename, frame.f_code.co_name))

    sys.setprofile(record)
    try:
        j(x)
    finally:
        sys.setprofile(None)
    assert _direct(j) == 2
    names = {name for _, name in frames}
    assert not {n for n in names if n.startswith("record_pregraph_bytecode")}, frames
    assert not [f for f in frames if f[0].endswith("_dynamo/guards.py") and f[1] == "check"], frames
    assert not [f for f in frames if "eval_frame" in f[0]], frames  # no Dynamo frame-hook wrapper


def test_changed_defaults_are_the_ones_a_direct_call_uses():
    def f(x, a=2.0, *, b=1.0, t=torch.zeros(4)):  # noqa: B008 - a tensor default is what this test is about
        return x * a + b + t

    j = thunderlab.jit(f)
    x = torch.randn(4)
    for _ in range(2):
        torch.testing.assert_close(j(x), f(x))
    f.__defaults__ = (3.0,)  # seen by Dynamo's guards on the frame's values: a recompile
    torch.testing.assert_close(j(x), x * 3.0 + 1.0)
    f.__kwdefaults__["b"] = 5.0  # changed in place
    torch.testing.assert_close(j(x), x * 3.0 + 5.0)
    f.__kwdefaults__ = {"b": 5.0, "t": torch.ones(4)}  # a tensor of the same kind passes the guards
    before = _direct(j)
    torch.testing.assert_close(j(x), x * 3.0 + 6.0)
    torch.testing.assert_close(j(x), x * 3.0 + 6.0)
    assert _direct(j) > before  # and still runs directly


def _passing_through(forward):
    """A decorator as Hugging Face's models wrap their forward with: ``functools.wraps`` sets ``__wrapped__``, so
    ``inspect.signature`` shows the wrapped forward's parameters, while the frame Dynamo compiles is this wrapper's."""
    @functools.wraps(forward)
    def wrapper(self, *args, **kwargs):
        return forward(self, *args, **kwargs)

    return wrapper


class Decorated(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(6, 3)

    @_passing_through
    def forward(self, x, bias=None, scale=1.0):
        out = self.lin(x) * scale
        return out if bias is None else out + bias


def test_a_forward_under_a_functools_wraps_decorator_runs_directly():
    m = Decorated()
    j = thunderlab.jit(m)
    x, b = torch.randn(2, 6), torch.randn(3)
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(j(x=x, bias=b), m(x=x, bias=b))
            torch.testing.assert_close(j(x, b, 2.0), m(x, b, 2.0))
            torch.testing.assert_close(j(x, scale=0.5), m(x, scale=0.5))
    assert _direct(j) >= 6, j.direct.why_not


def test_a_call_that_cannot_run_directly_binds_no_arguments_of_its_own(monkeypatch):
    """A graph break's resumed frames need Dynamo, so such calls go to Dynamo at once: binding the arguments and
    checking the guards first (a model's guards may read its config through Python) would be wasted work."""
    def f(x, *, shift=0.0):
        y = x.sin()
        torch._dynamo.graph_break()
        return y + shift

    binds = []
    bind = inspect.Signature.bind
    monkeypatch.setattr(inspect.Signature, "bind", lambda self, *a, **k: binds.append(1) or bind(self, *a, **k))
    j = thunderlab.jit(f)
    x = torch.randn(5)
    for _ in range(3):
        torch.testing.assert_close(j(x, shift=1.0), f(x, shift=1.0))
    binds.clear()
    torch.testing.assert_close(j(x, shift=2.0), f(x, shift=2.0))
    assert binds == [] and _direct(j) == 0 and "graph break" in j.direct.why_not


def test_a_forward_with_a_declared_signature_runs_directly():
    """``__signature__`` (documented by ``inspect.signature``) may describe other parameters than the code has; the
    frame Dynamo compiled is filled by the code's own."""
    class Declared(torch.nn.Module):
        def forward(self, *args, **kwargs):
            x, scale = (*args, *kwargs.values(), 1.0)[:2]
            return x * scale

    Declared.forward.__signature__ = inspect.signature(lambda self, x, scale=1.0: None)
    m = Declared()
    j = thunderlab.jit(m)
    x = torch.randn(4)
    for _ in range(3):
        torch.testing.assert_close(j(x, scale=3.0), x * 3.0)
    assert _direct(j) >= 2, j.direct.why_not


def test_a_self_star_args_star_kwargs_forward_fills_its_frame_without_binding(monkeypatch):
    """A decorated forward's frame is ``(self, *args, **kwargs)``: its locals are the module and the arguments as
    they come, so a direct call binds nothing (``inspect`` costs microseconds a call), and a call with other
    keywords still fails the guards and compiles again."""
    m = Decorated()
    j = thunderlab.jit(m)
    x, b = torch.randn(2, 6), torch.randn(3)
    binds = []
    bind = inspect.Signature.bind
    monkeypatch.setattr(inspect.Signature, "bind", lambda self, *a, **k: binds.append(1) or bind(self, *a, **k))
    with torch.no_grad():
        torch.testing.assert_close(j(x=x, bias=b), m(x=x, bias=b))  # compiled by Dynamo (which binds, tracing)
        binds.clear()
        for _ in range(2):
            torch.testing.assert_close(j(x=x, bias=b), m(x=x, bias=b))
        hits = _direct(j)
        assert hits >= 2 and binds == [], j.direct.why_not
        for _ in range(3):  # other keywords: Dynamo compiles for them, then they run directly too
            torch.testing.assert_close(j(x=x, scale=0.5), m(x=x, scale=0.5))
            torch.testing.assert_close(j(x=x, bias=-b), m(x=x, bias=-b))
    assert _direct(j) >= hits + 4, j.direct.why_not
