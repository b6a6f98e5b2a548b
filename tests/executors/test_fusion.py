"""The fuse pass and fusion regions at run time (tiering, timings), with a test executor and with Inductor."""

import pytest
import torch

import thunderlab
from thunderlab.core.symbols import BoundSymbol, Symbol
from thunderlab.core.trace import region_trace
from thunderlab.executors.base import EXECUTORS, Executor, bind, register_executor
from thunderlab.executors.region import RegionRunner
from thunderlab.passes.fuse import nvfuser_view


class EagerFuser(Executor):
    """A fusion executor for tests: claims elementwise torch-level ops; a region runs them with torch."""

    name = "testfuse"
    fusion = True
    OPS = {"add", "mul", "sub", "sin", "cos", "exp", "tanh", "relu", "div", "neg"}
    compiled: list = []

    def can_execute(self, bsym: BoundSymbol):
        if bsym.sym.name in self.OPS:
            return True, ""
        return False, f"{bsym.sym.qualname} is not elementwise"

    def implementation(self, sym: Symbol):
        return sym.impl

    def bind_region(self, bsym, options):
        region = region_trace(bsym).derive(bound_symbols=[b.replace(executor="torch") for b in bsym.subsymbols])
        fn = bind(region)

        def build(args):
            self.compiled.append(bsym.sym.name)
            return fn, [region.python()]

        return RegionRunner(bsym.sym.name, self.name, fn, build, tiered=options.tiered,
                            timing=options.timing)


if "testfuse" not in EXECUTORS:
    register_executor(EagerFuser())

PIPE = "dce,cse,claim{executors=testfuse+torch},fuse,del"


def f_split(x, w):
    a = torch.sin(x) * 2 + 1         # region
    m = a @ w                         # torch: breaks the chain
    b = torch.cos(a) - x              # depends on a but not on m: may join a's region
    return torch.tanh(m) * b.sum()    # m -> tanh; joining with a's region would make a cycle


def _run(fn, *args, **kw):
    j = thunderlab.jit(fn, pipeline=PIPE, verify=True, **kw)
    out = j(*args)
    torch.testing.assert_close(out, fn(*args))
    return j, thunderlab.last_record(j)


def test_regions_follow_dataflow_without_cycles():
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    _, rec = _run(f_split, x, w)
    step = next(s for s in rec.steps if s.spec == "fuse")
    regions = step.notes["regions"]
    assert len(regions) == 2, regions
    sizes = sorted(r["members"] for r in regions.values())
    assert sizes == [2, 5]  # {sin, mul, add, cos, sub} and {tanh, mul}
    assert step.verification.ok  # SSA and define-before-use hold after regrouping
    text = step.python()
    assert "def testfuse0(" in text and "testfuse1(" in text


def test_left_out_calls_keep_their_reason():
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    _, rec = _run(f_split, x, w)
    claim = next(s for s in rec.steps if s.spec.startswith("claim"))
    final = rec.steps[-1].program.forward.bound_symbols
    mm = [b for b in final if b.sym.name == "matmul"]
    assert mm and mm[0].executor == "torch"
    assert ("testfuse", "ltorch.matmul is not elementwise") in mm[0].declined
    assert ("testfuse", "ltorch.matmul is not elementwise") in claim.notes.declined()[mm[0].id]
    fuse = next(s for s in rec.steps if s.spec == "fuse")
    tanh_region = next(b for b in final if b.sym.module == "fusion" and any(m.sym.name == "tanh" for m in b.subsymbols))
    assert len(tanh_region.subsymbols) == 2  # it could not join the first region: that would be a cycle
    assert fuse.verification.ok


def test_single_call_regions_are_dissolved_with_a_reason():
    def f(x, w):
        return torch.sin(x @ w) @ w

    _, rec = _run(f, torch.randn(3, 3), torch.randn(3, 3))
    fuse = next(s for s in rec.steps if s.spec == "fuse")
    assert fuse.notes["regions"] == {}
    sin = next(b for b in rec.steps[-1].program.forward.bound_symbols if b.sym.name == "sin")
    assert sin.executor == "torch" and "alone in its region" in sin.declined[-1][1]


def test_regions_respect_max_size():
    def chain(x):
        for _ in range(6):
            x = torch.sin(x) + 1
        return x

    j = thunderlab.jit(chain, pipeline="claim{executors=testfuse+torch},fuse{max_size=4}")
    x = torch.randn(5)
    torch.testing.assert_close(j(x), chain(x))
    regions = next(s for s in thunderlab.last_record(j).steps if s.spec.startswith("fuse")).notes["regions"]
    assert len(regions) == 3 and all(r["members"] <= 4 for r in regions.values())


def test_fuse_requires_claim():
    from thunderlab.passes import Pipeline, PipelineError

    with pytest.raises(PipelineError, match="'fuse' requires 'claim'"):
        Pipeline.parse("dce,fuse")


def test_tiered_region_switches_and_timings_are_kept():
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    j, rec = _run(f_split, x, w, tiered=True, timing=True)
    assert thunderlab.session(rec).wait(30)
    for _ in range(3):
        torch.testing.assert_close(j(x, w), f_split(x, w))
    assert thunderlab.last_record(j) is rec  # handed out again: its snapshot of the regions is taken now
    t = rec.timings()
    assert set(t) == {"testfuse0", "testfuse1"}
    for r in t.values():
        assert r["running"] == "testfuse"
        assert [v for _, v in r["history"]] == ["torch", "testfuse"]
        assert sum(s["count"] for s in r["timings"].values()) == 4
        for s in r["timings"].values():
            assert 0 < s["min_s"] <= s["median_s"]


def test_tiered_compiles_start_only_after_the_first_call_returns(monkeypatch):
    """No compile competes with the call that triggers it: they are queued until it returns."""
    import thunderlab.executors.region as region
    import thunderlab.runtime.compiled as compiled

    events = []
    real_start, real_pending = region.RegionRunner._start, compiled.start_pending
    monkeypatch.setattr(
        region.RegionRunner, "_start", lambda self, args: (events.append(self.name), real_start(self, args))
    )
    monkeypatch.setattr(compiled, "start_pending", lambda: (events.append("returned"), real_pending()))
    j = thunderlab.jit(f_split, pipeline=PIPE, tiered=True)
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    torch.testing.assert_close(j(x, w), f_split(x, w))  # the regions ran on torch
    assert events[0] == "returned" and sorted(events[1:]) == ["testfuse0", "testfuse1"]
    assert thunderlab.session(thunderlab.last_record(j)).wait(30)
    torch.testing.assert_close(j(x, w), f_split(x, w))


def test_synchronous_compile():
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    _, rec = _run(f_split, x, w, tiered=False)
    assert all(r["running"] == "testfuse" for r in rec.timings().values())


def test_default_executor_order(monkeypatch):
    from thunderlab.executors import default_order

    monkeypatch.delenv("THUNDERLAB_EXECUTORS", raising=False)
    assert default_order() == ("nvfuser", "inductor", "torch")
    monkeypatch.setenv("THUNDERLAB_EXECUTORS", "inductor+torch")
    assert default_order() == ("inductor", "torch")


def test_unavailable_nvfuser_declines_with_install_reason(monkeypatch):
    monkeypatch.delenv("THUNDERLAB_EXECUTORS", raising=False)
    j = thunderlab.jit(lambda x: torch.sin(x) + 1, pipeline="claim{executors=nvfuser+torch}")
    j(torch.randn(3))
    b = thunderlab.last_record(j).program.forward.bound_symbols[0]
    assert b.executor == "torch" and b.declined[0][0] == "nvfuser"
    assert "install" in b.declined[0][1] or "GPU" in b.declined[0][1]


# -- TorchInductor for real (each cold compile costs seconds on a laptop CPU) ---------------------
INDUCTOR = "dce,cse,claim{executors=inductor+torch},fuse,del"


@pytest.mark.parametrize("name", ["mlp", "nanogpt_block", "llama_block", "cnn", "gpt2"])
def test_inductor_regions_equal_eager_on_real_models(name):
    from thunderlab.examples import EXAMPLES

    model, args = EXAMPLES[name]()
    j = thunderlab.jit(model, pipeline=INDUCTOR, tiered=False)
    with torch.no_grad():
        out, ref = j(*args), model(*args)
    torch.testing.assert_close(getattr(out, "logits", out), getattr(ref, "logits", ref), rtol=1e-4, atol=1e-4)
    rec = thunderlab.last_record(j)
    t = rec.timings()
    assert t and all(r["running"] == "inductor" and r["error"] is None for r in t.values()), t
    assert all(thunderlab.session(rec).regions[n].source for n in t)


def test_pytorch_functions_without_rules_are_differentiated_inside_the_backward_region():
    """PyTorch functions thunderlab differentiates through PyTorch (bilinear upsampling, cummax, i0, xlogy
    given one tensor twice, reflection padding, einsum, weighted cross-entropy, digamma, max_pool1d) are
    differentiated by PyTorch's own formulas inside the fused backward region, not by running autograd
    between regions; gradients equal eager autograd's."""
    F = torch.nn.functional

    def f(x, table, weight, labels):
        t = F.interpolate(table * 2, size=(6, 6), mode="bilinear")
        c = torch.cummax(x, 1).values  # its indices are an output too, which has no gradient
        d = torch.special.i0(x) + torch.special.xlogy(x.abs(), x.abs())
        e = F.pad(x, (1, 2, 2, 1), mode="reflect").sum() + torch.einsum("bchw,bcwk->bchk", x, x).sum()
        loss = F.cross_entropy(x.flatten(2).mean(-1), labels, weight=weight, label_smoothing=0.1)
        g = torch.digamma(x.abs() + 1).sum() + F.max_pool1d(x.flatten(2), 3).sum()
        return (c * t).sum() + d.sum() + e + loss + g

    x, table = torch.randn(2, 4, 6, 6, requires_grad=True), torch.randn(1, 4, 3, 3, requires_grad=True)
    weight, labels = torch.rand(4), torch.tensor([1, 3])  # PyTorch differentiates no class weight
    x_ref, table_ref = (v.detach().clone().requires_grad_() for v in (x, table))
    j = thunderlab.jit(f, pipeline="dce,cse,autodiff,remat,claim{executors=inductor+torch},fuse,del", tiered=False)
    j(x, table, weight, labels).backward()
    f(x_ref, table_ref, weight, labels).backward()
    torch.testing.assert_close(x.grad, x_ref.grad)
    torch.testing.assert_close(table.grad, table_ref.grad)
    backward = thunderlab.last_record(j).program.traces["backward"].bound_symbols
    regions = [b for b in backward if b.sym.name.startswith("inductor")]
    assert len(regions) == 1 and len(backward) == 2, [b.sym.qualname for b in backward]  # the region and a del
    inside = {b.args[0] for b in regions[0].subsymbols if b.sym.name == "eager_vjp"}
    assert {"torch.nn.functional.interpolate", "torch.cummax", "ltorch.pad", "prims.digamma"} <= inside


@pytest.mark.parametrize("kernel", [128, 3])
def test_average_pooling_whose_ceil_mode_windows_overhang_gets_eager_gradients(kernel):
    """Windows that reach past the input (``ceil_mode``): Inductor's lowering of that backward gives wrong gradients
    (torch.compile's too), so the inductor executor leaves the call to torch's kernel and says why; the gradients
    equal eager's. EfficientNet's ``AvgPool2d(1280, ceil_mode=True)`` is one window over its whole map: that call
    is its mean, and its backward the mean's (ops.convolution.avg_pool2d)."""
    def f(x):
        return torch.nn.functional.avg_pool2d(x.tanh(), kernel, ceil_mode=True).sin().sum()

    x = torch.randn(2, 8, 4, 4, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    j = thunderlab.jit(f, pipeline="dce,cse,autodiff,remat,claim{executors=inductor+torch},fuse,del", tiered=False)
    j(x).backward()
    f(x_ref).backward()
    torch.testing.assert_close(x.grad, x_ref.grad)
    backward = thunderlab.last_record(j).program.traces["backward"].bound_symbols
    if kernel == 128:  # one window over the 4x4 map
        assert not any(b.sym.name == "avg_pool2d_backward" for b in backward)
        assert [b.sym.name for b in backward if b.sym.is_region] == ["inductor1"]  # the backward is one region
        return
    pool = next(b for b in backward if b.sym.name == "avg_pool2d_backward")
    assert pool.executor == "torch" and "overhang" in dict(pool.declined)["inductor"]


def test_inductor_training_with_autodiff():
    from thunderlab.examples import EXAMPLES

    model, (x,) = EXAMPLES["mlp"]()
    ref, _ = EXAMPLES["mlp"]()
    ref.load_state_dict(model.state_dict())
    j = thunderlab.jit(model, pipeline="dce,cse,autodiff,remat,claim{executors=inductor+torch},fuse,del", tiered=False)
    j(x).pow(2).mean().backward()
    ref(x).pow(2).mean().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
    rec = thunderlab.last_record(j)
    assert {"forward", "backward"} == set(rec.program.traces)
    assert all(r["running"] == "inductor" for r in rec.timings().values())


def test_inductor_region_without_autodiff_keeps_autograd_working():
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())
    j = thunderlab.jit(m, pipeline=INDUCTOR, tiered=False)
    x = torch.randn(2, 4)
    j(x).sum().backward()
    assert m[0].weight.grad is not None
    r = next(iter(thunderlab.last_record(j).timings().values()))
    assert r["running"] == "torch" and "autodiff" in r["error"]


def test_kernel_profile_attributes_kernels_to_regions():
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    j, rec = _run(f_split, x, w, tiered=False)
    kernels = thunderlab.profile(j, x, w)
    assert {"testfuse0", "testfuse1"} <= set(kernels)
    names0 = {k["name"] for k in kernels["testfuse0"]}
    assert "aten::sin" in names0 and "aten::cos" in names0
    assert any(k["name"] == "aten::mm" for k in kernels["(outside regions)"])


def test_every_region_shows_what_nvfuser_would_be_given():
    def f(x, w, b):
        return torch.nn.functional.layer_norm(x * 2 + 1, (8,), w, b).tanh()

    j = thunderlab.jit(f, pipeline="claim{executors=testfuse+torch},fuse")
    args = torch.randn(4, 8), torch.randn(8), torch.randn(8)
    j(*args)
    fused = next(s for s in thunderlab.last_record(j).steps if s.spec == "fuse").program.forward
    texts = [nvfuser_view(b) for b in fused.bound_symbols if b.sym.is_region]
    assert any("fd.ops.mul(" in t and "fd.add_output(" in t and "def nvfuser_fusion(fd" in t for t in texts), texts


def test_inductor_region_with_the_same_tensor_twice_stays_correct():
    """TorchDynamo merges inputs that are one tensor on the first call; later calls may differ."""
    def f(a, b):
        return torch.sin(a) * 2 + torch.cos(b)

    j = thunderlab.jit(f, pipeline=INDUCTOR, tiered=False)
    x = torch.randn(16)
    with torch.no_grad():
        torch.testing.assert_close(j(x, x), f(x, x))
        y = torch.randn(16)
        torch.testing.assert_close(j(x, y), f(x, y))


@pytest.fixture
def limits():
    before = thunderlab.set_limits()
    yield
    thunderlab.set_limits(**before)


def test_inductor_kernels_are_shared_while_used_then_let_go(limits):
    """Functions with the same region share its compiled kernel; once none runs it (and it is not among the newest
    kept for a cell run again), the process lets go of it and of the graph TorchDynamo installed for it."""
    import gc
    import weakref

    from thunderlab.executors import inductor

    thunderlab.set_limits(kernels=0)  # keep none besides those a function runs (earlier tests' go now)
    gc.collect()

    def f(x):
        return torch.sin(x) * 3 + 1

    def compiled_graphs():
        gc.collect()
        return sum(type(o).__name__ == "CompiledFxGraph" for o in gc.get_objects())

    x = torch.randn(8)
    before = set(inductor._compiled)
    j1, j2 = (thunderlab.jit(f, pipeline=INDUCTOR, tiered=False) for _ in range(2))
    with torch.no_grad():
        torch.testing.assert_close(j1(x), f(x))
        torch.testing.assert_close(j2(x), f(x))
    (key,) = set(inductor._compiled) - before
    (r1,), (r2,) = (thunderlab.session(thunderlab.last_record(j)).regions.values() for j in (j1, j2))
    assert r1.version == r2.version == "inductor" and r1.fn is r2.fn  # one kernel, compiled once
    kernel = weakref.ref(r1.fn)
    del j1, r1
    gc.collect()
    assert kernel() is not None and key in inductor._compiled  # j2 still runs it
    graphs = compiled_graphs()
    del j2, r2
    thunderlab.clear_records()
    assert compiled_graphs() < graphs
    assert kernel() is None and key not in inductor._compiled


def test_a_dropped_functions_records_keep_their_regions_summary_not_their_kernels(limits):
    """The process's list keeps a dropped function's newest records to read: a region's summary (which version ran,
    its kernel's source) stays, the compiled kernel goes with the function."""
    import gc
    import weakref

    thunderlab.set_limits(kernels=0)

    def f(x):
        return torch.cos(x) * 5 - 2

    x = torch.randn(8)
    j = thunderlab.jit(f, pipeline=INDUCTOR, tiered=False)
    with torch.no_grad():
        torch.testing.assert_close(j(x), f(x))
    record = thunderlab.last_record(j)
    (region,) = thunderlab.session(record).regions.values()
    assert region.version == "inductor"
    kernel = weakref.ref(region.fn)
    del j
    gc.collect()
    assert kernel() is None
    assert record in thunderlab.records()
    summary = record.timings()[region.name]
    assert summary["running"] == "inductor" and region.source and region.wait(0)


def test_nanogpt_block_forward_and_backward_are_one_inductor_region_each_dropout_included():
    # nanoGPT's block in training (dropout 0.1 on attention and both residuals): Inductor is handed the whole forward
    # and the whole backward; torch draws the dropout masks before the forward region, as eager draws them
    from thunderlab.examples import NanoGPTBlock

    torch.manual_seed(0)
    model = NanoGPTBlock(dropout=0.1).train()
    ref = NanoGPTBlock(dropout=0.1).train()
    ref.load_state_dict(model.state_dict())
    x = torch.randn(2, 16, 256)
    g = torch.randn(2, 16, 256)
    j = thunderlab.jit(model, pipeline="dce,cse,autodiff,claim{executors=inductor+torch},fuse,del", tiered=False)
    xs, xr = x.clone().requires_grad_(), x.clone().requires_grad_()
    torch.manual_seed(1)
    out = j(xs)
    out.backward(g)
    torch.manual_seed(1)
    want = ref(xr)
    want.backward(g)
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(xs.grad, xr.grad, rtol=1e-4, atol=1e-5)
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4, msg=n)
    rec = thunderlab.last_record(j)
    fuse = next(s for s in rec.steps if s.spec == "fuse")
    assert fuse.notes["regions_per_trace"] == {"forward": 1, "backward": 1}
    assert fuse.notes["boundaries"] == []
    outside = {b.sym.name for b in rec.program.forward.bound_symbols if not b.sym.is_region and not b.sym.bookkeeping}
    assert outside == {"full", "bernoulli"}  # the draws: views, linears, attention, layer norms all in the region
    t = rec.timings()
    assert len(t) == 2 and all(r["running"] == "inductor" and r["error"] is None for r in t.values()), t


def test_opaque_torch_calls_join_inductors_region_and_python_code_still_cuts_it():
    # T5's shift_right (an indexed assignment into a copy), MoE routing (torch.histc) and a torch.library custom op
    # are opaque to thunderlab but plain PyTorch to TorchDynamo and Inductor: they stay inside the one region
    @torch.library.custom_op("thunderlab_test::scaled", mutates_args=())
    def scaled(x: torch.Tensor, s: float) -> torch.Tensor:
        return x * s

    @scaled.register_fake
    def _(x, s):
        return torch.empty_like(x)

    def f(ids, h):
        shifted = ids.new_zeros(ids.shape)
        shifted[..., 1:] = ids[..., :-1].clone()
        counts = torch.histc(h.float(), bins=4, min=-2, max=2)
        g = h * 2
        g[:, 0].mul_(3)  # a write through a view of an intermediate
        return shifted * 2, torch.ops.thunderlab_test.scaled(g.relu() + 1, 3.0).sin() * counts.sum()

    ids, h = torch.randint(0, 9, (2, 6)), torch.randn(4, 8)
    j = thunderlab.jit(f, pipeline=INDUCTOR, tiered=False)
    with torch.no_grad():
        out, ref = j(ids, h), f(ids, h)
    torch.testing.assert_close(out, ref)
    rec = thunderlab.last_record(j)
    fuse = next(s for s in rec.steps if s.spec == "fuse")
    assert fuse.notes["regions_per_trace"] == {"forward": 1} and fuse.notes["boundaries"] == []
    (region,) = [b for b in rec.program.forward.bound_symbols if b.sym.is_region]
    inside = {b.sym.qualname for b in region.subsymbols}
    assert {"_setitem_functional", "torch.histc"} <= inside and any("scaled" in q for q in inside), inside
    assert any(q.endswith("_scatter") for q in inside), inside
    assert all(r["running"] == "inductor" and r["error"] is None for r in rec.timings().values()), rec.timings()

    # a call of the user's own Python (run as is, opaque to thunderlab) is still left to torch, with its reason
    @torch.compiler.allow_in_graph
    def python_step(x):
        return x * 2

    def g(x):
        return python_step(x.relu() + 1).sin() + 1

    j = thunderlab.jit(g, pipeline=INDUCTOR, tiered=False)
    x = torch.randn(4, 8)
    with torch.no_grad():
        torch.testing.assert_close(j(x), g(x))
    claim = next(s for s in thunderlab.last_record(j).steps if s.spec.startswith("claim"))
    assert any("python_step" in d.reason and "opaque call of Python code" in d.reason for d in claim.notes.declines)


def _bn_net():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                               torch.nn.Conv2d(8, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU())


def test_batch_norm_training_is_inside_inductors_region_and_updates_running_statistics_as_eager():
    # as torch.compile does, the running statistics are new values of the region, written into the buffers after
    # it: a CNN's training forward is one region instead of one cut at every batch norm
    torch.manual_seed(0)
    model, ref = _bn_net().train(), _bn_net().train()
    ref.load_state_dict(model.state_dict())
    j = thunderlab.jit(model, pipeline="dce,cse,autodiff,remat,claim{executors=inductor+torch},fuse,del",
                       tiered=False)
    for step in range(3):
        x = torch.randn(4, 3, 16, 16)
        j(x).square().mean().backward()
        ref(x).square().mean().backward()
        for (name, b), c in zip(model.named_buffers(), ref.buffers()):
            torch.testing.assert_close(b, c, rtol=1e-5, atol=1e-6, msg=f"step {step}: {name}")
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)
    rec = thunderlab.last_record(j)
    fuse = next(s for s in rec.steps if s.spec == "fuse")
    assert fuse.notes["regions_per_trace"]["forward"] == 1, fuse.notes
    assert all(r["running"] == "inductor" and r["error"] is None for r in rec.timings().values())


def test_profiling_a_record_compiled_under_no_grad_runs_it_under_no_grad():
    # the sidebar's "Profile one call" on a model compiled in inference: Inductor's kernel writes into out= buffers,
    # which PyTorch refuses for parameters that require grad while grad mode is on
    from thunderlab.runtime.profile import profile_record

    class Conv1D(torch.nn.Module):  # GPT-2's projection: addmm on its parameters
        def __init__(self, n_in, n_out):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(n_in, n_out) / n_in ** 0.5)
            self.bias = torch.nn.Parameter(torch.zeros(n_out))

        def forward(self, x):
            return torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight).view(*x.shape[:-1], -1)

    model = torch.nn.Sequential(Conv1D(16, 32), torch.nn.GELU(), Conv1D(32, 8))
    j = thunderlab.jit(model, pipeline=INDUCTOR, timing=True)
    x = torch.randn(2, 4, 16)
    with torch.no_grad():
        j(x)
        rec = thunderlab.last_record(j)
        assert thunderlab.session(rec).wait(300)
        for _ in range(12):
            j(x)
    assert torch.is_grad_enabled()
    kernels = profile_record(rec)
    (region,) = [name for name in kernels if name != "(outside regions)"]
    assert kernels[region] and all(k["count"] >= 1 for k in kernels[region])
