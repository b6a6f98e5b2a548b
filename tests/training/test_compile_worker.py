"""The worker process that compiles tiered CPU regions (README, "Fusion, timings and the tiered start").

In a short training loop the kernels help only if they arrive early, so the worker starts when a tiered
``thunderlab.jit`` is made (its imports overlap the first call's capture), only when that function's
regions may go to Inductor and a core is free for it (otherwise when the first region is bound);
``compile_process.timeline()`` says when it started and when each region was sent, compiled and answered.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import thunderlab
from thunderlab.executors import compile_process
from thunderlab.executors.base import get_executor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@torch.library.custom_op("thunderlab_tests::scaled_sin", mutates_args=())
def scaled_sin(x: torch.Tensor, s: float) -> torch.Tensor:
    """A custom operator registered by importing this module (as transformers registers its MoE fallback)."""
    return torch.sin(x) * s


@scaled_sin.register_fake
def _(x, s):
    return torch.empty_like(x)


@torch.library.custom_op("thunderlab_tests::cubed", mutates_args=())
def cubed(x: torch.Tensor) -> torch.Tensor:
    """A custom operator with a derivative of its own (``register_autograd``), deliberately twice the true one."""
    return x * x * x


@cubed.register_fake
def _(x):
    return torch.empty_like(x)


def _cubed_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _cubed_backward(ctx, g):
    (x,) = ctx.saved_tensors
    return 2 * g * 3 * x * x


cubed.register_autograd(_cubed_backward, setup_context=_cubed_setup)


pytestmark = pytest.mark.skipif(not get_executor("inductor").available()[0], reason="no C++ compiler for Inductor")


FUSED = "dce,cse,claim{executors=inductor+torch},fuse,del"
TRAINING = "dce,cse,autodiff,claim{executors=inductor+torch},fuse,del"


def _compiled_in_worker(fn, check, pipeline=FUSED, regions=1):
    """``check(jit(fn))`` equals ``check(fn)`` on the torch versions and again once every region's kernel arrived,
    each compiled in the worker process (at least ``regions`` of them); the last record."""
    jfn = thunderlab.jit(fn, pipeline=pipeline)
    torch.testing.assert_close(check(jfn), check(fn))
    record = thunderlab.last_record(jfn)
    session = thunderlab.session(record)
    assert session.wait(600)
    torch.testing.assert_close(check(jfn), check(fn))
    where = {k: (r.version, r.compiled_in, getattr(r.fn, "compiled_here_because", None))
             for k, r in session.regions.items()}
    assert len(where) >= regions and all(v[:2] == ("inductor", "worker process") for v in where.values()), where
    return record

# each case in a fresh process: the worker, once started, lasts as long as its process
STARTED_AFTER_JIT = """
import json, os, torch, thunderlab
from thunderlab.executors import compile_process
kind = {kind!r}
# how busy the machine looks: idle (a core free for the worker), or every core taken by others
os.getloadavg = lambda: (100.0, 100.0, 100.0) if kind == "busy machine" else (0.0, 0.0, 0.0)
model = torch.nn.Linear(4, 4)
if kind in ("tiered", "busy machine"):
    thunderlab.jit(model)
elif kind == "untiered":
    thunderlab.jit(model, tiered=False)
elif kind == "torch only":
    thunderlab.jit(model, pipeline="dce,cse,autodiff,remat,claim{{executors=torch}},fuse,del")
elif kind == "no fuse":
    thunderlab.jit(model, pipeline="dce,cse,autodiff,claim,del")
print(json.dumps(compile_process.timeline()["spawned_at"] is not None))
"""


@pytest.mark.parametrize("kind, started", [("tiered", True), ("untiered", False), ("torch only", False),
                                           ("no fuse", False), ("busy machine", False)])
def test_worker_starts_when_a_tiered_jit_whose_regions_go_to_inductor_is_made(kind, started):
    env = dict(os.environ, THUNDERLAB_EXECUTORS="inductor+torch",
               PYTHONPATH=os.pathsep.join([ROOT, *filter(None, [os.environ.get("PYTHONPATH")])]))
    proc = subprocess.run([sys.executable, "-c", STARTED_AFTER_JIT.format(kind=kind)], env=env, capture_output=True,
                          text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) is started


def test_on_a_busy_machine_the_worker_starts_when_the_first_region_is_bound():
    script = STARTED_AFTER_JIT.format(kind="busy machine").replace("print(json.dumps(", "before = ((") + """
jm = thunderlab.jit(lambda x: torch.nn.functional.gelu(x) * 2)
jm(torch.randn(2, 4))  # its region is bound at this call: the worker starts then
print(json.dumps([before, compile_process.timeline()["spawned_at"] is not None]))
"""
    env = dict(os.environ, THUNDERLAB_EXECUTORS="inductor+torch",
               PYTHONPATH=os.pathsep.join([ROOT, *filter(None, [os.environ.get("PYTHONPATH")])]))
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [False, True]


def test_timeline_lists_each_region_the_worker_compiled():
    def f(x, w):
        return torch.nn.functional.gelu(x @ w).softmax(-1) * 2

    x, w = torch.randn(8, 16), torch.randn(16, 16)
    jfn = thunderlab.jit(f, pipeline="dce,cse,claim{executors=inductor+torch},fuse,del")
    torch.testing.assert_close(jfn(x, w), f(x, w))
    session = thunderlab.session(thunderlab.last_record(jfn))
    assert session.wait(600)
    torch.testing.assert_close(jfn(x, w), f(x, w))
    tl = compile_process.timeline()
    for name, r in session.regions.items():
        assert r.version == "inductor", (name, r.error)
        if r.compiled_in != "worker process":  # an identical region compiled before is reused, not sent again
            continue
        sent = [q for q in tl["requests"] if q["region"] == name and q["ok"]]
        assert sent, (name, tl)
        q = sent[-1]
        assert tl["spawned_at"] <= q["sent_at"] <= q["answered_at"]
        assert 0 < q["compile_s"] <= q["answered_at"] - q["sent_at"]
        assert tl["imported_at"] is not None and tl["imported_cpu_s"] > 0


def test_binding_a_region_does_not_wait_for_a_compile_in_flight(monkeypatch):
    """A model with a graph break has several programs: the next one's first call binds its regions while the
    worker compiles the first one's (holding the request lock, seconds when cold); starting the worker, which
    is running already, must not wait for that request."""
    import threading

    monkeypatch.setattr(compile_process._first, "proc", object())  # a worker that is running
    held, release = threading.Event(), threading.Event()

    def request_in_flight():
        with compile_process._first.lock:
            held.set()
            release.wait(30)

    t = threading.Thread(target=request_in_flight)
    t.start()
    try:
        assert held.wait(10)
        done = threading.Event()
        starter = threading.Thread(target=lambda: (compile_process.start(), done.set()))
        starter.start()
        assert done.wait(5), "start() waited for the request holding the lock"
    finally:
        release.set()
        t.join()


def test_in_place_calls_twins_are_compiled_in_the_worker():
    """An in-place call without a functional op of its own (``x[i] = v``) becomes a functional twin made while
    lowering; the worker makes the same twin again (``mapping.REBUILD``) and compiles the region, whose kernel gives
    eager's values."""
    def f(x, v):
        y = x * 2
        y[:, 1] = v  # setitem on an intermediate
        y.mul_(3)
        return torch.tanh(y) + 1

    x, v = torch.randn(6, 4), torch.randn(6)
    program = _compiled_in_worker(f, lambda fn: fn(x, v)).steps[-1].python()
    assert "_setitem_functional(" in program, program  # Tensor.mul_ is ltorch.mul's own (no twin)


def test_writes_through_views_are_compiled_in_the_worker():
    """A write through a view of an intermediate (``y[:, 1:3] *= 3``, a write to one of ``unbind``'s results) puts
    the view's inverse in the program, a scatter made while lowering; the worker makes it again and compiles the
    region, whose kernel gives eager's values."""
    def f(x):
        y = x * 2
        y[:, 1:3] *= 3
        first, _ = y.unbind(0)
        first.add_(1)
        return torch.tanh(y) + 1

    x = torch.randn(2, 5)
    program = _compiled_in_worker(f, lambda fn: fn(x)).steps[-1].python()
    assert "_getitem_scatter" in program and "_unbind_scatter" in program, program


def test_a_functional_twin_or_a_views_inverse_is_made_again_from_its_recipe():
    import operator

    from thunderlab.ops import mapping

    for fn, name in ((operator.setitem, "setitem"), (torch.Tensor.mul_, "mul_"),
                     (torch.Tensor.index_put_, "index_put_")):
        sym = mapping.functional_symbol(fn, name)
        recipe = mapping.REBUILD[sym.qualname]
        assert json.loads(json.dumps(recipe)) == recipe  # sent as JSON
        assert mapping.rebuild(recipe) is sym  # in one process, the very symbol
    for fn, index, name in ((operator.getitem, None, "getitem"), (torch.Tensor.unbind, 1, "unbind"),
                            (getattr, None, "T")):
        sym = mapping.scatter_symbol(fn, index, name)
        recipe = mapping.REBUILD[sym.qualname]
        assert json.loads(json.dumps(recipe)) == recipe
        assert mapping.rebuild(recipe) is sym
    with pytest.raises(LookupError, match="not a function of this torch"):
        mapping.rebuild({"functional": "torch.Tensor.no_such_method_", "name": "no_such_method_"})


@pytest.mark.parametrize("overload", [False, True], ids=["packet", "default overload"])
def test_a_custom_operators_region_is_compiled_in_the_worker(overload):
    """A custom operator is sent with the module that registers it; the worker imports that module, compiles the
    region, and its kernel gives eager's values. Called as ``torch.ops.ns.op`` (printed ``_opaque_<n>_op``) or as
    its overload (printed ``torch.ops.ns.op.default``)."""
    from thunderlab.ops import mapping

    op = torch.ops.thunderlab_tests.scaled_sin.default if overload else torch.ops.thunderlab_tests.scaled_sin

    def f(x):
        return op(x * 2, 3.0).relu() + 1

    x = torch.randn(5, 7)
    _compiled_in_worker(f, lambda fn: fn(x))
    recipes = [v for v in mapping.REBUILD.values()
               if v.get("op", "").startswith("torch.ops.thunderlab_tests.scaled_sin")]
    assert recipes and all(r["module"] == __name__ for r in recipes), recipes


class _TanhGelu(torch.autograd.Function):
    """BLOOM's GeLU: the tanh approximation, with a backward written out by hand (not its forward's derivative:
    the gradient is scaled by 2, so a backward taken from the forward would show)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        t = torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x))
        return 2 * g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.79788456 * (1 + 3 * 0.044715 * x * x))


def test_an_autograd_functions_regions_are_compiled_in_the_worker():
    """An ``autograd.Function``'s forward and backward reach the program as the graph modules TorchDynamo
    captured; they are sent to the worker as their code, and the forward's and backward's regions compile there.
    Values and gradients are eager's, the class's own backward included."""
    lin = torch.nn.Linear(6, 6)

    def f(x):
        return _TanhGelu.apply(lin(x)).sum(-1)

    x = torch.randn(4, 6, requires_grad=True)

    def step(fn):
        x.grad, lin.weight.grad = None, None
        out = fn(x)
        out.backward(torch.ones_like(out))
        return out.detach(), x.grad, lin.weight.grad

    record = _compiled_in_worker(f, step, pipeline=TRAINING, regions=2)
    assert "autograd_function_forward(" in record.steps[-1].python()


def test_a_graph_module_is_sent_as_its_code_or_declined():
    gm = torch.fx.symbolic_trace(lambda x: torch.tanh(x) * float("inf"))
    sent = compile_process._graph_sources({"_c0": gm})
    assert json.loads(json.dumps(sent)) == sent  # sent as JSON
    made = compile_process._graph_callable(sent["_c0"])
    x = torch.randn(3)
    torch.testing.assert_close(made(x), gm(x))
    holding = torch.fx.symbolic_trace(torch.nn.Linear(2, 2))  # a graph module with parameters stays here
    with pytest.raises(compile_process.Declined, match=r"cannot print \(_c1\)"):
        compile_process._graph_sources({"_c0": gm, "_c1": holding})


@pytest.mark.parametrize("overload", [False, True], ids=["packet", "default overload"])
def test_a_custom_operators_backward_is_compiled_in_the_worker(overload):
    """The backward of a custom operator with a derivative of its own names the operator it differentiates; the
    worker makes that operator again from its recipe, under the caller's name, and compiles the backward's
    regions too. Gradients are the operator's own (twice the true ones), as eager gives them."""
    op = torch.ops.thunderlab_tests.cubed.default if overload else torch.ops.thunderlab_tests.cubed

    def f(x):
        return (op(torch.sin(x)) * 2).tanh().sum()

    def grad(fn):
        x = torch.linspace(-1, 1, 12).reshape(3, 4).requires_grad_()
        fn(x).backward()
        return x.grad

    record = _compiled_in_worker(f, grad, pipeline=TRAINING, regions=2)
    assert "custom_op_vjp(" in record.steps[-1].python("backward"), record.steps[-1].python("backward")


def test_a_region_that_computes_an_index_from_its_integer_inputs_is_compiled_in_the_worker():
    """The worker checks the module it built on inputs like the caller's: integer inputs go with their values (made-up
    ones, zeros, would give an index of -1 here, and the check would fail), so the region compiles there."""
    def f(x, ids):
        last = ids.sum(1, keepdim=True) - 1  # the last non-padding position of each row
        return torch.gather(x * 2, 1, last).tanh()

    x, ids = torch.randn(4, 6), torch.ones(4, 5, dtype=torch.long)
    _compiled_in_worker(f, lambda fn: fn(x, ids))


def test_a_backward_region_compiles_once_the_backward_returns_without_another_call():
    """A notebook cell that runs one training step: the backward's regions ran with torch for the first time when the
    backward returned, and their kernels compile from then on, not at the function's next call (which may never
    come). Nothing here calls the function again, nor ``session.wait`` (which would start them itself)."""
    import time

    def f(x, w):
        return torch.tanh(x @ w).pow(2).sum()

    jf = thunderlab.jit(f, pipeline="dce,cse,autodiff,remat,claim{executors=inductor+torch},fuse,del")
    x, w = torch.randn(8, 16), torch.randn(16, 16, requires_grad=True)
    jf(x, w).backward()
    gw = w.grad.clone()
    w.grad = None
    f(x, w).backward()
    torch.testing.assert_close(gw, w.grad)
    regions = thunderlab.session(thunderlab.last_record(jf)).regions
    assert len(regions) == 2, regions  # the forward's region and the backward's
    deadline = time.monotonic() + 180
    while not all(r.ready.is_set() for r in regions.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert {name: "inductor" in r.versions for name, r in regions.items()} == dict.fromkeys(regions, True)


def test_a_worker_that_dies_before_its_first_answer_is_started_once_more(monkeypatch):
    """A worker whose imports fail would leave every later region of the process without its kernels: its process
    is started once more, and the timeline says why. A second death is final."""
    real_start = compile_process._start
    starts = []

    def dying_then_real(low_priority=False):
        starts.append(low_priority)
        if len(starts) == 1:  # exits as a worker whose import failed does
            return subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True, bufsize=1)
        return real_start(low_priority)

    monkeypatch.setattr(compile_process, "_start", dying_then_real)
    worker = compile_process._Worker()
    try:
        answer = worker.send({"name": "not a region"}, asked_at=0.0)  # declined by the worker, but answered
        assert answer["ok"] is False and answer["imported_at"] is not None
        assert len(starts) == 2 and worker.broken is None
        assert worker.times()["restarted_because"] == "the compile worker exited (code 3)"
    finally:
        compile_process._stop(worker.proc)

    def always_dying(low_priority=False):
        starts.append(low_priority)
        return subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(4)"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, bufsize=1)

    monkeypatch.setattr(compile_process, "_start", always_dying)
    worker, starts[:] = compile_process._Worker(), []
    with pytest.raises(compile_process.Declined, match=r"exited \(code 4\)"):
        worker.send({"name": "not a region"}, asked_at=0.0)
    assert len(starts) == 2 and worker.broken == "the compile worker exited (code 4)"
