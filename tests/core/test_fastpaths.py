"""One switch turns every fast path off; each then takes its plain path."""
import pytest
import torch

import thunderlab
from thunderlab.core import fastpaths
from thunderlab.core.fastpaths import fast_paths
from thunderlab.core.trace import Trace
from thunderlab.core.verify import VerificationError, check_trace
from thunderlab.executors.torch import TorchExecutor
from thunderlab.ops import ltorch, prims


def test_the_switch_and_its_errors():
    assert fastpaths.enabled()
    with fast_paths(False):
        assert not fastpaths.enabled()
    assert fastpaths.enabled()
    assert thunderlab.set_fast_paths(True) is True
    with pytest.raises(TypeError, match="True or False"):
        thunderlab.set_fast_paths("no")


def test_the_torch_executor_binds_the_plain_implementation():
    ex = TorchExecutor()
    assert ex.implementation(ltorch.gelu) is not ltorch.gelu.impl  # the size-choosing GELU wrapper
    with fast_paths(False):
        assert ex.implementation(ltorch.gelu) is ltorch.gelu.impl


def test_direct_calls_are_a_fast_path():
    def f(x):
        return x.sin() + 1

    for on, expect in ((True, 2), (False, 0)):
        torch._dynamo.reset()
        with fast_paths(on):
            j = thunderlab.jit(f)
            x = torch.randn(3)
            for _ in range(3):
                torch.testing.assert_close(j(x), f(x))
        assert j.cache_info["direct_calls"] == expect


def test_metadata_trusted_from_tracing_is_checked_again_on_the_plain_path():
    t = Trace()
    x = t.proxy((2, 3), torch.float32, "cpu", name="x")
    t.inputs = [x]
    with t.active():
        y = prims.exp(x)
    t.output = y
    wrong = t.bound_symbols[0]
    # a call whose recorded output disagrees with its meta, yet marked as produced by it
    bad = wrong.replace(output=t.proxy((3, 2), torch.float32, "cpu", name="y"), meta_ok=True)
    t2 = t.derive(bound_symbols=[bad], output=bad.output)
    check_trace(t2)  # the fast path trusts tracing's record
    with fast_paths(False), pytest.raises(VerificationError, match="recorded as"):
        check_trace(t2)


def test_the_garbage_collector_waits_for_the_lowering_and_passes_only_on_the_fast_path(monkeypatch):
    import gc
    from dataclasses import dataclass

    from thunderlab.frontend import dynamo
    from thunderlab.passes import REGISTRY, Pass, register_pass

    seen, lowered = [], []
    lower = dynamo.lower

    def noting(gm, args):
        lowered.append(gc.isenabled())
        return lower(gm, args)

    monkeypatch.setattr(dynamo, "lower", noting)

    @register_pass
    @dataclass(frozen=True)
    class NoteCollector(Pass):
        """Notes whether the garbage collector is on."""
        name = "test-note-collector"  # "test-": the fuzz draws every registered pass but these

        def __call__(self, program):
            seen.append(gc.isenabled())
            return program

    assert gc.isenabled()
    try:
        for on in (True, False):
            with fast_paths(on):
                j = thunderlab.jit(lambda x: x.sin(), pipeline="test-note-collector")
                j(torch.randn(3))
            assert gc.isenabled()  # back on after the pipeline
    finally:
        REGISTRY.pop("test-note-collector", None)
    assert seen == [False, True] and lowered == [False, True]
