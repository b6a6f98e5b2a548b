"""A fusion region at run time: which version runs (torch first, then the fused kernel), and its timings."""
from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import torch

from thunderlab.core.listeners import Listeners

from .generators import leaving_generators_alone

_pool: ThreadPoolExecutor | None = None
# set by thunderlab.profile: each region call is then marked for the torch profiler
PROFILING = threading.Event()
# called with a region runner after each timed call (the JupyterLab sidebar streams timings from here)
TIMING_LISTENERS = Listeners("a region call timed")
_pool_lock = threading.Lock()


# regions whose first (torch) call ran and whose compile waits for the program call to return
PENDING: list[RegionRunner] = []
# A background compile starts this long after it is queued. The program call that queued it is
# then still returning through a few frames (TorchDynamo's, the caller's); a compile that took the
# interpreter lock at once would hold it for a switch interval (5 ms) at a time and slow that return.
YIELD_S = 0.02


def start_pending() -> None:
    """Start the background compiles of the regions that ran for the first time in the call just made.

    The runtime calls this once a compiled program has returned, so that a compile competing
    for the interpreter never slows the call that triggered it (the tiered first call costs
    what the torch executor's does).
    """
    while PENDING:
        r = PENDING.pop()
        r._start_pending()


def background() -> ThreadPoolExecutor:
    """One worker: fused kernels compile one after another, off the calling thread."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="thunderlab-compile")
        return _pool


class RegionRunner:
    """Runs one region. Starts with ``eager`` and switches to the compiled version when it is ready.

    ``history`` records which version ran and when it switched; with ``timing`` on, every
    call is timed (CUDA events on a GPU, a synchronized perf_counter on CPU).
    """

    def __init__(self, name: str, executor: str, eager: Callable,
                 compile: Callable[[tuple], tuple[Callable, list[str]]],
                 *, tiered: bool = True, timing: bool = False, device="cpu",
                 compile_in_background: Callable[[tuple], tuple[Callable, list[str]]] | None = None):
        self.name, self.executor = name, executor
        self.fn = eager
        self.version = "torch"
        self.history: list[tuple[float, str]] = [(time.time(), "torch")]
        self.error: str | None = None
        self.source: list[str] = []  # the generated kernel code, once compiled
        self.compile_seconds: float | None = None
        # where the fused version was compiled: "this process", or "worker process" (see compile_process.py),
        # and why a background compile could not go to the worker (None when it went, or was never asked)
        self.compiled_in: str | None = None
        self.compiled_here_because: str | None = None
        self.timing = timing
        self.times: dict[str, deque] = {}
        self._cuda = torch.device(device).type == "cuda"
        self._compile = compile
        self._compile_in_background = compile_in_background or compile  # what the compile thread calls
        self._tiered = tiered
        self._started = False
        self._pending: tuple | None = None  # the first call's inputs, until its compile starts
        self._box: list | None = None  # the inputs handed to the background compile, until it takes them
        self.ready = threading.Event()

    def _start(self, args) -> None:
        """Compile with the first call's inputs: in the background (tiered) or right here."""
        self._started = True
        if self._tiered:
            # handed over in a box the build empties: the pool's work item would otherwise keep the inputs
            # alive until after ``ready`` is set, and a record that holds them weakly would still see them
            self._box = [args]  # emptied by ``release`` too: a released region's queued compile keeps nothing
            background().submit(self._build_boxed, self._box, YIELD_S, True)
        else:
            self._build(args)

    def _build_boxed(self, box: list, after: float, on_worker: bool) -> None:
        if not box:  # released while it waited in the queue
            self.ready.set()
            return
        self._build(box.pop(), after, on_worker)

    def _build(self, args, after: float = 0.0, on_worker: bool = False) -> None:
        if after:
            time.sleep(after)  # lets the calling thread return before the compile takes the interpreter lock
        t0 = time.perf_counter()
        compile_ = self._compile
        if compile_ is None:  # released while it waited in the queue
            self.ready.set()
            return
        try:
            # on the worker, the draws the other threads make meanwhile must stand (see generators.py)
            with leaving_generators_alone() if on_worker else contextlib.nullcontext():
                fn, source = ((self._compile_in_background or compile_) if on_worker else compile_)(args)
        except Exception as e:  # the region keeps running with torch, and says why
            self.error = f"{type(e).__name__}: {e}"
            self.history.append((time.time(), "torch (compile failed)"))
        else:
            self.source = source
            self.compiled_in = getattr(fn, "compiled_in", "this process")
            self.compiled_here_because = getattr(fn, "compiled_here_because", None)
            # released while compiling: the kernel is not kept
            self.fn, self.version = (fn if self._compile is not None else None), self.executor
            self.history.append((time.time(), self.executor))
        finally:
            self.compile_seconds = time.perf_counter() - t0
            args = None  # noqa: F841  (the inputs are let go before anyone waiting is told the build is done)
            self.ready.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the fused version is built (or failed); True if it is ready. Compiling starts at the first
        call."""
        self._start_pending()
        return self._started and self.ready.wait(timeout)

    def __call__(self, *args):
        if not self._started:
            if self._tiered:
                if self._pending is None:
                    # the first call runs with torch; the compile starts when the program call returns
                    out = self._run(args)
                    self._pending = args
                    PENDING.append(self)
                    return out
                self._start_pending()  # called again before the program returned (or outside one)
            else:
                self._start(args)
        return self._run(args)

    def release(self) -> None:
        """Let go of the kernel, its compiler and any inputs kept for compiling it (no program runs this region
        any more); what ran, when and how fast stays for ``summary``."""
        self._compile = self._compile_in_background = self.fn = self._pending = None
        if self._box is not None:
            self._box.clear()  # a compile still queued drops the inputs it was handed
        self._started = True  # no compile starts from now on
        self.ready.set()  # and ``wait`` does not wait for one

    def _start_pending(self) -> None:
        if not self._started and self._pending is not None:
            args, self._pending = self._pending, None
            self._start(args)

    def _run(self, args):
        if PROFILING.is_set():
            with torch.profiler.record_function(f"thunderlab::{self.name}"):
                return self._timed(args) if self.timing else self.fn(*args)
        if not self.timing:
            return self.fn(*args)
        return self._timed(args)

    def _timed(self, args):
        version = self.version
        if self._cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = self.fn(*args)
            end.record()
            end.synchronize()
            seconds = start.elapsed_time(end) / 1e3
        else:
            t0 = time.perf_counter()
            out = self.fn(*args)
            seconds = time.perf_counter() - t0
        self.times.setdefault(version, deque(maxlen=10000)).append(seconds)
        TIMING_LISTENERS(self)
        return out

    def stats(self) -> dict:
        """Per version: count, median and min seconds."""
        return {v: {"count": len(t), "median_s": statistics.median(t), "min_s": min(t)}
                for v, t in self.times.items() if t}

    def summary(self) -> dict:
        return {"name": self.name, "executor": self.executor, "running": self.version,
                "history": [(round(t, 3), v) for t, v in self.history], "error": self.error,
                "compile_seconds": self.compile_seconds, "timings": self.stats(),
                "device": "cuda" if self._cuda else "cpu"}
