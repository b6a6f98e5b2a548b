"""Fast paths: optimisations of a plain path, all behind one switch.

Each one computes what the plain path computes, sooner. Turning them off (``set_fast_paths(False)``,
or ``THUNDERLAB_FAST_PATHS=0`` in the environment before import) runs the plain path everywhere,
which is the way to rule them out when a result looks wrong. The model tests run both ways.

==========================  ====================================  ==================================
fast path                   where                                 plain path
==========================  ====================================  ==================================
direct calls                frontend/dispatch.py (JitFunction)    every call through TorchDynamo
printed direct-call checks  frontend/guards.py, bytecode.py       Dynamo's guard tree and bytecode
captures kept on disk       frontend/captures.py (direct calls)   every first call captured by TorchDynamo
aten entry points           executors/torch.py (implementation)   ``torch.ops.aten.x(...)`` as written
GELU kernel by size         executors/torch.py (NATIVE_GELU_...)  eager's kernel choice everywhere
Inductor graph, unguarded   executors/inductor.py (_direct)       TorchDynamo's guarded function
linear layers on oneDNN     executors/gemm.py (LinearPass)        MKL's GEMM for every product
compiles in a worker        executors/compile_process.py          tiered compiles on a thread here
worker answers recalled     executors/compile_process.py          every region sent to a worker
autograd.Function C++ apply runtime/autograd.py                   ``Function.apply``
metadata checked once       core/verify.py (meta_ok, checked)     every call's meta re-derived
meta results kept           ops/prims.py (torch_meta, _meta_key)  every meta run on meta tensors
printed lines cached        core/codegen.py (_line)               every line printed afresh
collector paused            compiles, kept captures' loads        Python's gc runs as it likes
==========================  ====================================  ==================================

A switch applies from the next call (direct calls, metadata, printing) or the next compilation
(what an executor binds); programs compiled before keep what they were bound to.

Three of them change process-wide state, each only for the work that needs it: the GELU kernel choice
switches oneDNN off around one small kernel call, a compile (the graph's lowering and the passes) and a kept
capture's load pause the garbage collector while they run (``collector_paused``), and keeping a capture on
disk gives TorchDynamo's guard pickler a rule for functions their module does not name while that capture's
guards are serialized (frontend/captures.py). One more process-wide change, the random-generator setters a
background compile replaces while it runs (executors/generators.py), is no fast path: it keeps draws correct.
"""
from __future__ import annotations

import gc
import os
import threading
from contextlib import contextmanager


def switched_on(name: str) -> bool:
    """Whether the environment switch ``name`` is on: unset, or anything but 0, false, off or no (any case)."""
    return os.environ.get(name, "1").strip().lower() not in ("0", "false", "off", "no")


_enabled = switched_on("THUNDERLAB_FAST_PATHS")


def enabled() -> bool:
    """Whether fast paths are on (the default)."""
    return _enabled


def set_fast_paths(on: bool) -> bool:
    """Turn every fast path on or off; returns the previous setting."""
    global _enabled
    if not isinstance(on, bool):
        raise TypeError(f"set_fast_paths takes True or False, got {on!r}")
    prev, _enabled = _enabled, on
    return prev


@contextmanager
def fast_paths(on: bool):
    """Run a block with fast paths on or off, restoring the setting afterwards."""
    prev = set_fast_paths(on)
    try:
        yield
    finally:
        set_fast_paths(prev)


_gc_lock = threading.Lock()
_gc_pausers = 0  # compiles and loads running with the collector paused, on every thread
_gc_resume = False  # whether the collector was on when the first of them began


@contextmanager
def collector_paused():
    """Pause Python's cyclic garbage collector while a graph compiles or a kept capture loads.

    Both make many small objects and no cycles worth collecting (lowering and passes their programs;
    loading the unpickled guard state and two guard trees), and a full collection over a big model's heap can
    cost more than the work itself. The collector is process-wide, so the pause is counted over every
    thread's pausers: it ends, as it was, when the last one does. With fast paths off the collector
    runs as usual.
    """
    global _gc_pausers, _gc_resume
    if not enabled():
        yield
        return
    with _gc_lock:
        if _gc_pausers == 0:
            _gc_resume = gc.isenabled()
            gc.disable()
        _gc_pausers += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_resume:
                gc.enable()
