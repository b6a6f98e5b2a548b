"""A fusion executor is two hooks on FusionExecutor (compile, describe); fuse asks a region's own executor
to describe it; compiling changes nothing process-wide."""
import os

import pytest
import torch

import thunderlab
from thunderlab.executors.base import EXECUTORS, register_executor
from thunderlab.executors.fusion import FusionExecutor


class Doubler(FusionExecutor):
    """A fusion executor in two hooks: its 'kernel' is the region's torch program, counted."""

    name = "testhooks"
    OPS = {"sin", "mul", "add", "tanh", "exp"}

    def __init__(self):
        self.compiled = []
        self.described = []

    def can_execute(self, bsym):
        return (True, "") if bsym.sym.name in self.OPS else (False, f"{bsym.sym.qualname} is not one of {self.OPS}")

    def implementation(self, sym):
        return sym.impl

    def compile(self, region, args):
        self.compiled.append(region.name)
        fn = region.callable()
        return fn, [f"# {self.name} kernel for {region.name}\n" + region.python(source=False)]

    def describe(self, bsym):
        self.described.append(bsym.sym.name)
        return f"{self.name} would run {len(bsym.subsymbols)} calls"


EX = EXECUTORS.get("testhooks") or register_executor(Doubler())


def f(x):
    return (x.sin() * 2 + 1).tanh() @ x.t()


def test_a_fusion_executor_is_compile_and_describe():
    EX.compiled.clear()
    EX.described.clear()
    j = thunderlab.jit(f, pipeline="dce,claim{executors=testhooks+torch},fuse,del", tiered=False)
    x = torch.randn(4, 4)
    torch.testing.assert_close(j(x), f(x))
    torch.testing.assert_close(j(x), f(x))
    rec = thunderlab.last_record(j)
    regions = next(s for s in rec.steps if s.spec == "fuse").notes["regions"]
    assert EX.described == list(regions) == ["testhooks0"]
    assert regions["testhooks0"]["description"] == "testhooks would run 4 calls"
    assert EX.compiled == ["testhooks0"]  # once, with the first call's inputs
    assert "testhooks kernel for testhooks0" in thunderlab.session(rec).regions["testhooks0"].source[0]


def test_fuse_asks_the_regions_own_executor():
    j = thunderlab.jit(lambda x: (x.sin() * 2).exp(), pipeline="claim{executors=inductor+torch},fuse,del")
    x = torch.randn(8)
    torch.testing.assert_close(j(x), (x.sin() * 2).exp())
    regions = next(s for s in thunderlab.last_record(j).steps if s.spec == "fuse").notes["regions"]
    (note,) = regions.values()
    assert note["executor"] == "inductor"
    assert "def inductor0(" in note["description"] and "nvFuser" not in note["description"]


def test_compiling_with_inductor_leaves_the_environment_alone(monkeypatch):
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    torch.compile(lambda x: x.cos() + 1, backend="inductor")(torch.randn(3))  # Inductor's own first-use settings
    # Inductor itself writes its cache directory into os.environ on every compile (its default when unset);
    # thunderlab must add nothing of its own, neither a directory of its choosing nor anything else
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    before = dict(os.environ)
    j = thunderlab.jit(lambda x: (x.cos() * 3).sin(), pipeline="claim{executors=inductor+torch},fuse,del", tiered=False)
    x = torch.randn(16)
    torch.testing.assert_close(j(x), (x.cos() * 3).sin())
    # it did compile, with its kernel source
    assert thunderlab.session(thunderlab.last_record(j)).regions["inductor0"].source
    after = dict(os.environ)
    assert after.pop("TORCHINDUCTOR_CACHE_DIR", default_cache_dir()) == os.path.abspath(default_cache_dir())
    assert after == before


def test_inductor_kernel_source_is_the_generated_module_compiled_or_cached(monkeypatch):
    """The region's source is the module Inductor wrote, also when Inductor reads it back from its caches,
    and no other library's code is patched to get it."""
    from torch._inductor.graph import GraphLowering

    from thunderlab.executors import inductor

    calls = []
    real = inductor.compile_region
    monkeypatch.setattr(inductor, "compile_region", lambda *a: calls.append(a) or real(*a))
    f = lambda x: (x.cos() * 5).tanh()  # noqa: E731
    j = thunderlab.jit(f, pipeline="claim{executors=inductor+torch},fuse,del", tiered=False)
    x = torch.randn(32)
    torch.testing.assert_close(j(x), f(x))
    (first,) = thunderlab.session(thunderlab.last_record(j)).regions["inductor0"].source
    assert "def call(" in first and "cpp_fused" in first, first[:300]
    assert GraphLowering.save_output_code is None
    # the same region again, past thunderlab's memo: TorchDynamo and AOTAutograd compile it anew and Inductor
    # answers from its caches
    (key, region, args), = calls
    del inductor._compiled[key]
    fn, again = real(key, region, args)
    assert again == [first]
    (out,) = fn(*args)  # a region returns its outputs as a list
    torch.testing.assert_close(out, f(x))


def test_background_compiles_go_to_the_worker_process_and_to_a_thread_here_with_fast_paths_off():
    from thunderlab.core.fastpaths import fast_paths

    def f(x):  # torch.histc is called by its torch name in the printed region, which the worker runs too
        return (x.sin() * 2).exp() + torch.histc(x, bins=4).sum()

    for on, where, n in ((True, "worker process", 8), (False, "this process", 9)):  # sizes apart: no shared kernel
        with fast_paths(on):
            j = thunderlab.jit(f, pipeline="claim{executors=inductor+torch},fuse,del")
            x = torch.randn(n)
            torch.testing.assert_close(j(x), f(x))  # runs with torch while the kernel compiles
            rec = thunderlab.last_record(j)
            assert thunderlab.session(rec).wait(300)
            r = thunderlab.session(rec).regions["inductor0"]
            assert (r.version, r.compiled_in, r.error) == ("inductor", where, None)
            torch.testing.assert_close(j(x), f(x))  # the kernel
            y = torch.randn(2 * n)[::2]  # strides it was not compiled for: the region's torch version runs
            torch.testing.assert_close(j(y), f(y))


def test_run_options_are_one_value_handed_to_every_region():
    """How a program runs (tiered, timed, eager regions) is one RunOptions, the same for bind and each region."""
    import dataclasses

    import pytest

    from thunderlab.executors.base import RunOptions, bind

    j = thunderlab.jit(f, pipeline="claim{executors=testhooks+torch},fuse")
    x = torch.randn(3, 3)
    j(x)
    final = thunderlab.last_record(j).steps[-1].program.forward
    seen = []
    bind_region = EX.bind_region
    EX.bind_region = lambda bsym, options: seen.append(options) or bind_region(bsym, options)
    try:
        opts = RunOptions(tiered=False, timing=True)
        (got,) = bind(final, options=opts)(x)  # the captured graph returns a tuple
        torch.testing.assert_close(got, f(x))
        assert seen and all(o is opts for o in seen)
        seen.clear()
        (got,) = bind(final, options=RunOptions(eager_regions=True))(x)
        torch.testing.assert_close(got, f(x))
        assert not seen, "eager regions run their members with torch: no executor is asked"
    finally:
        del EX.bind_region
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.timing = False
    with pytest.raises(TypeError, match=r"options must be a RunOptions \(tiered, timing, .*\), not dict"):
        bind(final, options={"tiered": False})


def test_a_kernel_called_with_other_strides_runs_torch_until_the_worker_compiled_it_for_them():
    """A worker-compiled region checks its inputs' strides (a backward region's saved values come in other strides
    once the forward's own kernel runs): such a call runs torch, the worker compiles the region again for those
    strides in the background, and later calls in them run that kernel. Every call equals eager."""
    def f(x, y):
        return (x.sin() * 2 + y).exp()

    j = thunderlab.jit(f, pipeline="claim{executors=inductor+torch},fuse,del", race=False)
    x, y = torch.randn(6, 6), torch.randn(6, 6)
    torch.testing.assert_close(j(x, y), f(x, y))
    rec = thunderlab.last_record(j)
    assert thunderlab.session(rec).wait(300)
    (r,) = thunderlab.session(rec).regions.values()
    if r.compiled_in != "worker process":
        pytest.skip(f"the region was compiled here: {r.compiled_here_because}")
    kernel = r.fn
    xt, yt = torch.randn(6, 6).t(), torch.randn(6, 6).t()  # the same shapes, transposed strides
    torch.testing.assert_close(kernel(xt, yt)[0], f(xt, yt))
    assert kernel.fallbacks == 1 and len(kernel.layouts) == 1
    assert thunderlab.session(rec).wait(300)  # waits for the compile for these strides too
    assert not kernel.compiling()
    (other,) = kernel.layouts.values()
    assert callable(other), "the worker compiled the region for the transposed strides"
    for _ in range(3):
        xt, yt = torch.randn(6, 6).t(), torch.randn(6, 6).t()
        torch.testing.assert_close(kernel(xt, yt)[0], f(xt, yt))
    assert kernel.fallbacks == 1  # no call ran torch once the kernel for these strides was there
    torch.testing.assert_close(kernel(x, y)[0], f(x, y))  # the first strides still run the first kernel
    # the record says so: its timings, and its payload (which the sidebar, the report and a saved file read)
    name = next(iter(thunderlab.session(rec).regions))
    want = {"compiled": 1, "compiling": False, "fallback_calls": 1}
    assert thunderlab.session(rec).timings()[name]["layouts"] == want
    assert rec.timings()[name]["layouts"] == want
    from thunderlab.inspect.serialize import validate

    payload = rec.payload().to_dict()
    assert payload["regions"][name]["layouts"] == want
    validate(payload)


def test_a_backward_runs_after_its_jitted_function_was_dropped():
    """``thunderlab.jit(model)(x).loss.backward()``: the function goes before its forward's backward runs. Dropping
    it lets go of its fused kernels, and the backward runs its regions with torch, equal to eager."""
    import gc

    def f(x):
        return (x.sin() * 2).exp().sum()

    x = torch.randn(16, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    out = thunderlab.jit(f, pipeline="dce,cse,autodiff,claim{executors=inductor+torch},fuse,del", tiered=False)(x)
    gc.collect()
    out.backward()
    f(x_ref).backward()
    torch.testing.assert_close(x.grad, x_ref.grad)
