"""Background compiles leave PyTorch's random generators alone.

TorchDynamo, AOTAutograd and Inductor each read the global generators' state when a compile
starts and set it back when it ends, so that tracing never changes what a program draws. On a
background thread that set-back also undoes the draws every other thread made meanwhile: a
dropout mask drawn by the program while its region compiles, or a ``torch.randn`` in the
training loop, would come again, the same numbers twice. thunderlab's compile worker therefore
runs with those set-backs turned off for its own thread (``leaving_generators_alone``). A
region's compile draws nothing itself (no executor that fuses is handed a random call), so there
is nothing of its own to undo. Other threads, and this one outside the block, set states as
before: ``torch.random.set_rng_state`` and ``torch.cuda.set_rng_state`` are wrapped, the first
time a background compile starts, by functions that differ only on a thread inside the block.
"""
from __future__ import annotations

import contextlib
import functools
import threading

import torch

_local = threading.local()
_lock = threading.Lock()
_installed = False


def _quiet_on_compile_thread(setter):
    @functools.wraps(setter)
    def set_rng_state(*args, **kwargs):
        if getattr(_local, "leave_alone", False):
            return None
        return setter(*args, **kwargs)

    set_rng_state.thunderlab_wraps = setter
    return set_rng_state


def _install() -> None:
    global _installed
    with _lock:
        if _installed:
            return
        torch.random.set_rng_state = _quiet_on_compile_thread(torch.random.set_rng_state)
        torch.cuda.set_rng_state = _quiet_on_compile_thread(torch.cuda.set_rng_state)
        _installed = True


@contextlib.contextmanager
def leaving_generators_alone():
    """On this thread, for the block: compiles do not set the global random generators back."""
    _install()
    before = getattr(_local, "leave_alone", False)
    _local.leave_alone = True
    try:
        yield
    finally:
        _local.leave_alone = before
