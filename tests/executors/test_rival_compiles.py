"""A region's rivals (its second kernels, raced against the first) compile on a thread of their own: a region whose
rival compiles long must not hold up another region's first kernel, which the compile threads build meanwhile."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from thunderlab.executors import region as region_module
from thunderlab.executors.region import RegionRunner


@pytest.fixture(autouse=True)
def own_threads(monkeypatch):
    """Compile threads of these tests' own: a kernel an earlier test left compiling must not take their turns."""
    pools = (ThreadPoolExecutor(max_workers=2, thread_name_prefix="test-compile"),
             ThreadPoolExecutor(max_workers=1, thread_name_prefix="test-compile-rivals"))
    monkeypatch.setattr(region_module, "_pool", pools[0])
    monkeypatch.setattr(region_module, "_rival_pool", pools[1])
    yield
    for pool in pools:
        pool.shutdown(wait=False)


def _runner(name: str, rival_started: threading.Event | None = None, release: threading.Event | None = None):
    def add(x):
        return x + 1

    def compile_(args):
        return (lambda x: x + 1), [f"{name}: the first kernel"]

    def rival(args):
        if rival_started is not None:
            rival_started.set()
            release.wait(20)
        return (lambda x: x + 1), [f"{name}: the rival"]

    rivals = (("rival", rival, rival),)
    return RegionRunner(name, "fake", add, compile_, compile_in_background=compile_, rivals=rivals, race=True)


def test_a_long_rival_compile_does_not_hold_up_other_regions_first_kernels():
    started, release = threading.Event(), threading.Event()
    # two regions whose rivals compile long: as many as the compile threads
    slow, slower = _runner("slow", started, release), _runner("slower", started, release)
    others = [_runner(f"other{i}") for i in range(3)]
    x = torch.zeros(2)
    try:
        torch.testing.assert_close(slow(x), x + 1)  # the first call runs torch; the compile starts after it
        torch.testing.assert_close(slower(x), x + 1)
        region_module.start_pending()
        assert started.wait(20)  # a slow region's first kernel is in, and its rival compiles (one at a time)
        deadline = time.monotonic() + 20  # the other's first kernel comes too (either may have been first)
        while (slow.version, slower.version) != ("fake", "fake") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert slow.version == slower.version == "fake" and not (slow.ready.is_set() and slower.ready.is_set())
        for r in others:
            r(x)
        region_module.start_pending()
        deadline = time.monotonic() + 20
        while any(r.version != "fake" for r in others) and time.monotonic() < deadline:
            time.sleep(0.01)
        # every other region runs its first kernel meanwhile; their rivals wait their turn on the rivals' thread
        assert [r.version for r in others] == ["fake"] * len(others)
        assert not slow.ready.is_set() or not slower.ready.is_set()  # one race waits for its rival
    finally:
        release.set()
    for r in others:
        assert r.wait(20) and set(r.versions) == {"torch", "fake", "rival"} and r.race is not None, r.name
    assert slow.wait(20) and set(slow.versions) == {"torch", "fake", "rival"}
    assert slower.wait(20) and set(slower.versions) == {"torch", "fake", "rival"}
    for _ in range(20):  # the race goes on: every version gives the same values
        torch.testing.assert_close(slow(x), x + 1)


def test_a_region_released_while_its_rival_waits_keeps_nothing():
    started, release = threading.Event(), threading.Event()
    blocker = _runner("blocker", started, release)  # holds the rivals' thread
    queued = _runner("queued")
    x = torch.zeros(2)
    try:
        blocker(x)
        region_module.start_pending()
        assert started.wait(20)
        queued(x)
        region_module.start_pending()
        deadline = time.monotonic() + 20
        while queued.version != "fake" and time.monotonic() < deadline:
            time.sleep(0.01)
        queued.release()  # its rival is still queued behind the blocker's
    finally:
        release.set()
    assert queued.wait(20) and queued.versions == {} and queued.race is None
    torch.testing.assert_close(queued(x), x + 1)  # a later call runs torch
