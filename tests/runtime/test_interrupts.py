"""A KeyboardInterrupt during a compile leaves the function usable and the record marked as interrupted."""
from dataclasses import dataclass

import pytest
import torch

import thunderlab
from thunderlab import Pass, register_pass

_STOP = {"armed": False}


@register_pass
@dataclass(frozen=True)
class StopOnce(Pass):
    """Raises KeyboardInterrupt once while armed, as a user pressing stop mid-compile (for tests)."""

    name = "test-stop-once"

    def __call__(self, program):
        if _STOP["armed"]:
            _STOP["armed"] = False
            raise KeyboardInterrupt
        return program.map(lambda t: t.derive())


def test_interrupted_compile_is_recorded_and_the_next_call_compiles():
    def f(x):
        return x.cos() * 3

    j = thunderlab.jit(f, pipeline="dce,cse,test-stop-once,claim,del")
    x = torch.randn(5)
    _STOP["armed"] = True
    with pytest.raises(KeyboardInterrupt):
        j(x)
    first = thunderlab.records()[-1]
    assert first.error and "interrupted (KeyboardInterrupt) at step 3 'test-stop-once'" in first.error
    assert [s.spec for s in first.steps] == ["capture", "dce", "cse", "test-stop-once"]
    assert "was interrupted" in first.steps[3].error and first.steps[2].program is not None
    torch.testing.assert_close(j(x), f(x))  # usable: compiles again
    assert thunderlab.last_record(j).error is None


def test_threads_calling_while_a_region_compiles_in_the_background_get_eager_results():
    import threading

    def f(x):
        return (x.sin() * 2 + x.cos()).relu()

    j = thunderlab.jit(f, pipeline="dce,cse,claim{executors=inductor+torch},fuse,del")
    xs = [torch.randn(64) + k for k in range(4)]
    j(xs[0])  # compiles the program; its region's kernel now compiles in the background
    rec = thunderlab.last_record(j)
    assert rec.regions, "the region must be fused for this test to mean anything"
    wrong, errors = [], []

    def call(k):
        try:
            for _ in range(200):
                out = j(xs[k])
                if not torch.allclose(out, f(xs[k]), rtol=1e-5, atol=1e-6):
                    wrong.append(k)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=call, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and not wrong
    assert thunderlab.session(rec).wait(120)
    versions = {v for r in rec.timings().values() for _, v in r["history"]}
    assert "torch" in versions  # the calls overlapped the background compile or ran before it
    torch.testing.assert_close(j(xs[1]), f(xs[1]))
