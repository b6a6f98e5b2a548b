"""A fusion region's torch version: what a tiered region runs (in a training loop, for its first seconds)
until its kernel is compiled.

It must give eager PyTorch's results, forward and backward, and cost what eager costs: eager frees
each intermediate tensor once no later op reads it (Python drops the last reference), so the torch
version must not keep a region's intermediates alive until the region returns.
"""
from __future__ import annotations

import threading
import weakref

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import thunderlab
from thunderlab.executors.base import get_executor
from thunderlab.executors.region import background

# regions go to Inductor; nothing is compiled during the calls below (tiered: the first call runs with torch)
PIPELINE = "dce,cse,autodiff,remat,claim{executors=inductor+torch},fuse,del"

pytestmark = pytest.mark.skipif(not get_executor("inductor").available()[0], reason="no C++ compiler for Inductor")


class LiveTensors(TorchDispatchMode):
    """Counts the tensors made by ops that are still alive when each op runs; ``peak`` is the most at once."""

    def __init__(self):
        super().__init__()
        self.made: list[weakref.ref] = []
        self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.peak = max(self.peak, sum(r() is not None for r in self.made))
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.made.append(weakref.ref(t))
        return out


@pytest.fixture
def compiles_held():
    """Background compiles wait behind this one until the test ends: every region runs its torch version."""
    release = threading.Event()
    background().submit(release.wait, 600)
    yield
    release.set()


def chain(x):
    # one region: eight pointwise ops, each reading only the previous one's result
    for _ in range(4):
        x = torch.sin(x) * 1.5
    return x.sum()


def peak_live(fn, x) -> int:
    with LiveTensors() as mode:
        fn(x)
    return mode.peak


def test_torch_version_of_a_region_frees_intermediates_as_eager_does(compiles_held):
    x = torch.randn(64, 64)
    jfn = thunderlab.jit(chain, pipeline=PIPELINE)
    torch.testing.assert_close(jfn(x), chain(x))  # the first call captures; its region runs with torch
    (region,) = thunderlab.session(thunderlab.last_record(jfn)).regions.values()
    assert region.version == "torch"
    # the region's torch version, called as the program calls it (a call of the jitted function under a dispatch
    # mode would not reach it: TorchDynamo leaves such calls to eager)
    with LiveTensors() as mode:
        got = region.fn(x)[0]
    with LiveTensors() as eager:
        ref = chain(x)
    assert region.version == "torch" and len(mode.made) == len(eager.made) == 9
    torch.testing.assert_close(got, ref)
    # no more tensors alive at once than in eager (kept until the region returned, there would be eight)
    assert mode.peak <= eager.peak, (mode.peak, eager.peak)


class Block(torch.nn.Module):
    """A pre-norm MLP block with a residual, as in GPT-2: layer norm, linear, GELU, linear, dropout off."""

    def __init__(self, n: int = 32):
        super().__init__()
        self.ln = torch.nn.LayerNorm(n)
        self.fc = torch.nn.Linear(n, 4 * n)
        self.proj = torch.nn.Linear(4 * n, n)

    def forward(self, x):
        return x + self.proj(F.gelu(self.fc(self.ln(x))))


def test_torch_version_of_regions_matches_eager_forward_and_backward(compiles_held):
    torch.manual_seed(0)
    model = Block()
    twin = Block()
    twin.load_state_dict(model.state_dict())
    x = torch.randn(4, 8, 32)
    jm = thunderlab.jit(twin, pipeline=PIPELINE)
    out = jm(x)
    ref = model(x)
    torch.testing.assert_close(out, ref)
    g = torch.randn_like(ref)
    out.backward(g)
    ref.backward(g)
    for (name, a), b in zip(model.named_parameters(), twin.parameters()):
        torch.testing.assert_close(b.grad, a.grad, msg=name)
    regions = thunderlab.session(thunderlab.last_record(jm)).regions
    assert len(regions) >= 2 and all(r.version == "torch" for r in regions.values())  # forward's and backward's
