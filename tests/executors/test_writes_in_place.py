"""A training forward's writes into its inputs (batch norm's running statistics) made in place by Inductor's kernel:
the region ends with them, nothing else reads those inputs, and after every step the module's buffers are eager's,
whichever way the kernel was compiled (in the worker process, here, or before the first call)."""
import copy

import pytest
import torch

import thunderlab
from thunderlab.core.fastpaths import fast_paths

PIPELINE = "dce,cse,autodiff,remat,claim{executors=inductor+torch},fuse,del"


def _cnn(channels: int):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, channels, 3), torch.nn.BatchNorm2d(channels), torch.nn.ReLU(),
                               torch.nn.Conv2d(channels, 4, 1), torch.nn.BatchNorm2d(4), torch.nn.Flatten(),
                               torch.nn.Linear(4 * 36, 5))


def _steps(model, j, eager, n: int, live_after_first=None):
    opt, opt_e = torch.optim.SGD(model.parameters(), lr=0.01), torch.optim.SGD(eager.parameters(), lr=0.01)
    for step in range(n):
        x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(step))
        out, ref = j(x), eager(x)
        torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
        out.logsumexp(-1).sum().backward()
        ref.logsumexp(-1).sum().backward()
        opt.step(), opt_e.step(), opt.zero_grad(), opt_e.zero_grad()
        for (name, b), e in zip(model.named_buffers(), eager.buffers()):
            # num_batches_tracked counts steps exactly: a write made twice (or not at all) shows at once
            torch.testing.assert_close(b, e, atol=1e-5, rtol=1e-4, msg=f"{name} after step {step}")
        if step == 0 and live_after_first is not None:
            live_after_first(j)


@pytest.mark.parametrize("how", ["worker process", "this process", "before the first call"])
def test_running_statistics_are_written_by_the_kernel_and_equal_eager_after_every_step(how):
    model = _cnn({"worker process": 6, "this process": 7, "before the first call": 5}[how])  # no shared kernel
    eager = copy.deepcopy(model)
    with fast_paths(how != "this process"):
        j = thunderlab.jit(model, pipeline=PIPELINE, tiered=how != "before the first call", race=False)

        def built(j):
            assert thunderlab.session(thunderlab.last_record(j)).wait(300)

        _steps(model, j, eager, 5, built)
        rec = thunderlab.last_record(j)
        fwd = rec.steps[-1].program.traces["forward"]
        assert not any(b.sym.qualname == "prims.copy_" for b in fwd.bound_symbols), "every write is in a region"
        (region,) = [b for b in fwd.bound_symbols if b.sym.is_region]
        written = {s.args[1].name for s in region.subsymbols if s.sym.qualname == "prims.copy_"}
        assert len(written) == 6  # two batch norms: running mean, running variance, batches tracked
        r = thunderlab.session(rec).regions[region.sym.name]
        assert r.version == "inductor" and r.error is None
        if how != "before the first call":
            assert r.compiled_in == how
        source = "\n".join(r.source) if isinstance(r.source, list) else r.source
        assert "copy_" in source  # Inductor's kernel stores into the statistics (its fused kernel is named so)
