"""thunderlab's captures leave out TorchDynamo's measurement of its guards' latency (a CPU-cache flush and one
timed run of the guards, 20-30 ms a frame) unless TorchDynamo's guards log, which prints it, is on; the guards
themselves are built and checked on every call as before. Other backends' captures are left as TorchDynamo makes
them."""
import pytest
import torch
import torch._dynamo.guards as dynamo_guards

import thunderlab


@pytest.fixture
def measured(monkeypatch):
    """How many times TorchDynamo measured a frame's guards."""
    calls = []
    real = dynamo_guards.profile_guard_manager

    def counting(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(dynamo_guards, "profile_guard_manager", counting)
    return calls


def two_frames(x):
    y = x.sin() * 2
    torch._dynamo.graph_break()
    return y.cos() + x


def test_thunderlab_frames_are_not_measured_and_their_guards_still_hold(measured):
    j = thunderlab.jit(two_frames)
    x = torch.randn(5)
    torch.testing.assert_close(j(x), two_frames(x))
    assert len(j.records) == 2  # both frames were captured
    assert measured == []
    other = torch.randn(3, 4)  # another shape fails the first captures' guards: captured again, and right
    torch.testing.assert_close(j(other), two_frames(other))
    assert len(j.records) == 4
    torch.testing.assert_close(j(x), two_frames(x))  # and the first captures still serve their shape
    assert len(j.records) == 4
    assert measured == []


def test_the_registered_backend_skips_it_too_and_other_backends_are_left_alone(measured):
    x = torch.randn(6)
    torch.testing.assert_close(torch.compile(two_frames, backend="thunderlab")(x), two_frames(x))
    assert measured == []
    torch.testing.assert_close(torch.compile(lambda t: t.tan() + 1, backend="eager")(x), x.tan() + 1)
    assert len(measured) == 1


def test_with_the_guards_log_on_the_measurement_is_made(measured):
    torch._logging.set_logs(guards=True)
    try:
        j = thunderlab.jit(lambda t: t.exp() - 1)
        x = torch.randn(4)
        torch.testing.assert_close(j(x), x.exp() - 1)
    finally:
        torch._logging.set_logs()
    assert len(measured) == 1
