"""Background compiles leave PyTorch's random generators alone.

TorchDynamo, AOTAutograd and Inductor each read the global generators' state when a compile
starts and set it back when it ends, so that tracing never changes what a program draws. On a
background thread that set-back also undoes the draws every other thread made meanwhile: a
dropout mask drawn by the program while its region compiles, or a ``torch.randn`` in the
training loop, would come again, the same numbers twice. thunderlab's compile worker therefore
runs with those set-backs turned off for its own thread (``leaving_generators_alone``). A
region's compile draws nothing itself (no executor that fuses is handed a random call), so there
is nothing of its own to undo.

This is process-wide state, kept to the work that needs it: while at least one thread is inside
the block, ``torch.random.set_rng_state`` and ``torch.cuda.set_rng_state`` are functions that
differ from PyTorch's only on such a thread; when the last one leaves, PyTorch's own are put back
(unless something else has replaced them meanwhile, which is then left as it is). It is not a
fast path: without it a background compile would change what the program draws.
"""
from __future__ import annotations

import contextlib
import functools
import threading

import torch

_local = threading.local()
_lock = threading.Lock()
_inside = 0  # threads (and nested blocks) inside leaving_generators_alone, all together
_originals: dict[object, object] = {}  # module -> its own set_rng_state, while ours stands in for it


def _quiet_on_compile_thread(setter):
    @functools.wraps(setter)
    def set_rng_state(*args, **kwargs):
        if getattr(_local, "leave_alone", False):
            return None
        return setter(*args, **kwargs)

    set_rng_state.thunderlab_wraps = setter
    return set_rng_state


def _modules() -> tuple:
    return (torch.random, torch.cuda)


def _enter() -> None:
    global _inside
    with _lock:
        _inside += 1
        if _inside == 1:
            for mod in _modules():
                _originals[mod] = mod.set_rng_state
                mod.set_rng_state = _quiet_on_compile_thread(mod.set_rng_state)


def _leave() -> None:
    global _inside
    with _lock:
        _inside -= 1
        if _inside == 0:
            for mod, setter in _originals.items():
                if getattr(mod.set_rng_state, "thunderlab_wraps", None) is setter:
                    mod.set_rng_state = setter
            _originals.clear()


@contextlib.contextmanager
def leaving_generators_alone():
    """On this thread, for the block: compiles do not set the global random generators back."""
    _enter()
    before = getattr(_local, "leave_alone", False)
    _local.leave_alone = True
    try:
        yield
    finally:
        _local.leave_alone = before
        _leave()
