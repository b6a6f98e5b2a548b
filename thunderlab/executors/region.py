"""A fusion region at run time: which version runs (torch first, then the fused kernels raced), and its timings.

A region starts with torch (its members one by one) while its kernels compile in the background: the
owning executor's, and those of the other fusion executors that can run every member (Inductor and
nvFuser on a GPU). Once they are compiled it switches to the owner's kernel and, unless the program was
compiled with ``race=False``, races the versions on the calls that come next: each call runs one version
(they compute the same values, so which one runs changes nothing beyond its executor's tolerance), in
turn, one untimed warm-up call each and then ``RACE_CALLS`` timed calls each, and the version with the
lowest median is kept (torch included: a kernel slower than eager goes back to torch).
"""
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
_rival_pool: ThreadPoolExecutor | None = None
# set by thunderlab.profile: each region call is then marked for the torch profiler
PROFILING = threading.Event()
# the profiler mark around a region's call (``thunderlab.runtime.profile`` files the kernels under it by region);
# not ``thunderlab::``, the namespace of thunderlab's own operators (``thunderlab::onednn_linear``), whose profiler
# events carry their names
REGION_MARK = "thunderlab.region::"
# called with a region runner after each timed call (the JupyterLab sidebar streams timings from here)
TIMING_LISTENERS = Listeners("a region call timed")
_pool_lock = threading.Lock()


# regions whose first (torch) call ran and whose compile waits for the program call to return
PENDING: list[RegionRunner] = []
# A background compile starts this long after it is queued. The program call that queued it is
# then still returning through a few frames (TorchDynamo's, the caller's); a compile that took the
# interpreter lock at once would hold it for a switch interval (5 ms) at a time and slow that return.
YIELD_S = 0.02
# timed calls per version in a region's race (after one untimed warm-up call each: a kernel's first call may
# load or tune it); enough for a median that one slow call (a preempted thread) does not move
RACE_CALLS = 4
# a fused kernel this many times slower than the torch version of its own region is more likely held up (its
# threads spinning at a barrier while another process has the core) than slower at its work: before such a verdict
# sends the region back to torch, the race runs again, up to RERUNS times
SUSPECT_FACTOR = 5.0
RERUNS = 2
# two versions whose fastest calls are this close are timed for RACE_CALLS more calls each (the calls so far kept),
# up to CLOSE_ROUNDS times, before the verdict: on a shared machine the fastest of four calls of one kernel moves by
# a tenth from run to run (a backward region of MobileNet: 4.75 and 5.5 ms), which is enough to reverse a close
# verdict, and the calls after the first few run with their buffers' memory already in place
CLOSE = 0.10
CLOSE_ROUNDS = 2
# the most calls one race takes (a warm-up call and every timed call, per version; a held-up kernel's rerun aside)
RACE_CALLS_MOST = 1 + RACE_CALLS * (1 + CLOSE_ROUNDS)
# a race whose region has not been called for this long, and for five times its usual gap between calls, is shown
# as paused: a graph TorchDynamo compiled again for other inputs (or a function no longer called) keeps its race where
# it stopped, and the race goes on at its next call
PAUSED_AFTER_S = 10.0


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
    """The compile threads: fused kernels compile off the calling thread. Two, so that a region whose module an
    earlier process's worker wrote (loaded at once) need not wait behind one the worker is compiling (seconds, the
    thread waiting on its answer); compiles in this process still take turns (TorchDynamo compiles one frame at a
    time)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="thunderlab-compile")
        return _pool


def background_rivals() -> ThreadPoolExecutor:
    """The thread that compiles regions' second kernels (their rivals in the race), one region at a time.

    A rival's compile is long (Inductor's C++ wrapper: up to a minute cold) and nothing waits for it, since the
    region runs its first kernel meanwhile. On ``background``'s threads, two regions waiting for their rivals
    would hold both, and every later region's first kernel would wait behind them."""
    global _rival_pool
    with _pool_lock:
        if _rival_pool is None:
            _rival_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="thunderlab-compile-rivals")
        return _rival_pool


class Race:
    """The versions of one region timed against each other on the calls that run anyway; the fastest is kept.

    Plain bookkeeping, driven by the region's calls: ``next`` says which version runs a call and whether
    it is timed, ``add`` takes its time, and ``done`` is true once every version has ``calls`` times.
    """

    def __init__(self, versions: list[str], calls: int = RACE_CALLS, left_out: dict[str, str] | None = None):
        self.order = list(versions)  # the order calls take them in: the owner's kernel, torch, the others
        self.calls = calls
        self.samples: dict[str, list[float]] = {v: [] for v in self.order}
        self.left_out = dict(left_out or {})  # version -> why it is not in the race (its compile failed)
        self.started = time.time()
        self.last: float | None = None  # when the latest call of the race began (time.time())
        self.winner: str | None = None
        self.why = ""
        self._n = 0
        self.times = ""  # the versions' fastest calls, fastest first, as the last verdict put them
        self.earlier: list[str] = []  # those of the rounds run again (see ``suspect``)
        self.extended = 0  # rounds of more calls a close verdict asked for (see ``close``)

    def next(self) -> tuple[str, bool]:
        """The version the next call runs, and whether its time counts (the first round only warms up)."""
        n, self._n = self._n, self._n + 1
        self.last = time.time()
        return self.order[n % len(self.order)], n >= len(self.order)

    def idle(self, now: float | None = None) -> float | None:
        """Seconds since the race's latest call when it looks paused (no call for ``PAUSED_AFTER_S`` and for five
        times the usual gap between its calls); None while calls come, or once decided."""
        if self.winner is not None:
            return None
        now = time.time() if now is None else now
        since = now - (self.last if self.last is not None else self.started)
        gap = (self.last - self.started) / self._n if self.last is not None and self._n else 0.0
        return since if since > max(PAUSED_AFTER_S, 5 * gap) else None

    def add(self, version: str, seconds: float) -> None:
        self.samples[version].append(seconds)

    @property
    def done(self) -> bool:
        return all(len(t) >= self.calls for t in self.samples.values())

    def decide(self) -> str:
        """The winner (the fastest call; a tie goes to the version earlier in ``order``), and why, in words.

        Each version by its fastest timed call, not its median: a call's time is its work plus whatever delayed it
        (another thread holding the GIL for its 5 ms switch interval, another process on the core), and with four
        calls a version that two such delays hit has a median twice its work. Delays only add time, so the fastest
        call is the closest to the work itself."""
        best = {v: min(t[:self.calls]) for v, t in self.samples.items()}
        ranked = sorted(self.order, key=lambda v: (best[v], self.order.index(v)))
        self.winner = ranked[0]
        times = " vs ".join(f"{v} {best[v] * 1e3:.3g} ms" for v in ranked)
        verdict = f"kept {self.winner}" if self.winner != "torch" else "back to torch"
        self.times = times
        self.why = f"{times}, fastest of {self.calls} calls each: {verdict}"
        if self.extended:
            self.why += f" (within {CLOSE:.0%} after {self.calls - self.extended * RACE_CALLS} calls: timed longer)"
        if self.earlier:
            self.why += f" (raced {len(self.earlier) + 1} times: a kernel {SUSPECT_FACTOR:g}x slower than torch " \
                        f"looks held up; before: {'; '.join(self.earlier)})"
        return self.winner

    def suspect(self) -> bool:
        """Whether the verdict just made sends the region back to torch on a kernel ``SUSPECT_FACTOR`` times slower
        than torch, with a rerun left: the race then runs again (``again``)."""
        if self.winner != "torch" or len(self.earlier) >= RERUNS:
            return False
        best = {v: min(t[:self.calls]) for v, t in self.samples.items()}
        return any(v != "torch" and best[v] > SUSPECT_FACTOR * best["torch"] for v in best)

    def close(self) -> bool:
        """Whether the verdict just made was between versions whose fastest calls are within ``CLOSE`` of each other,
        with a round left: the race is then timed longer (``longer``) before the verdict is made again."""
        if self.extended >= CLOSE_ROUNDS or len(self.order) < 2:
            return False
        best = sorted(min(t[:self.calls]) for t in self.samples.values())
        return best[1] <= best[0] * (1 + CLOSE)

    def longer(self) -> None:
        """Time each version ``RACE_CALLS`` more calls, keeping those so far (no second warm-up)."""
        self.extended += 1
        self.calls += RACE_CALLS
        self.winner, self.why = None, ""

    def again(self) -> None:
        """Race once more, from a warm-up round, keeping the verdict just made for ``why``."""
        self.earlier.append(self.times)
        self.calls -= self.extended * RACE_CALLS
        self.extended = 0
        self.samples = {v: [] for v in self.order}
        self.winner, self.why, self._n = None, "", 0

    def summary(self) -> dict:
        """As plain data: state ("racing", "paused" or "done"), per version its timed calls, the winner and why."""
        times = {v: {"count": len(t), "median_s": statistics.median(t), "min_s": min(t), "samples_s": list(t)}
                 for v, t in self.samples.items() if t}
        why = self.why or (f"racing: {', '.join(self.order)} take turns, {self.calls} timed calls each "
                           f"after one warm-up call" + (f" (again: {'; '.join(self.earlier)})" if self.earlier else ""))
        idle = self.idle()
        if idle is not None:
            made = min(len(t) for t in self.samples.values())
            why = (f"paused: no call for {idle:.0f} s, {made} of {self.calls} timed calls each made "
                   f"({', '.join(self.order)}); the race goes on at the region's next call")
        if self.left_out:
            why += "; not raced: " + "; ".join(f"{v} ({w})" for v, w in self.left_out.items())
        state = "done" if self.winner is not None else "paused" if idle is not None else "racing"
        return {"state": state, "versions": list(self.order),
                "calls": self.calls, "times": times, "winner": self.winner, "why": why,
                "left_out": dict(self.left_out), "started": round(self.started, 3)}


class RegionRunner:
    """Runs one region. Starts with ``eager``, switches to the compiled version when it is ready, then races.

    ``rivals``: the other fusion executors that can run the region, as (name, compile, compile in
    the background); their kernels compile after the owner's and join the race. ``race=False`` keeps
    the owner's kernel once compiled (no race); ``race_off`` says why a region is not raced whatever
    ``race`` says (for example a member that draws random numbers). ``history`` records which version ran and when it
    switched; with ``timing`` on, every call is timed (CUDA events on a GPU, a perf_counter on CPU).
    ``clock`` times the race's calls on CPU; ``versions`` maps each version to what it runs.
    """

    def __init__(self, name: str, executor: str, eager: Callable,
                 compile: Callable[[tuple], tuple[Callable, list[str]]],
                 *, tiered: bool = True, timing: bool = False, device="cpu",
                 compile_in_background: Callable[[tuple], tuple[Callable, list[str]]] | None = None,
                 rivals: tuple = (), race: bool = False, race_off: str | None = None,
                 clock: Callable[[], float] = time.perf_counter):
        self.name, self.executor = name, executor
        self.fn = self._torch = eager
        self.version = "torch"
        self.history: list[tuple[float, str]] = [(time.time(), "torch")]
        self.error: str | None = None
        self.source: list[str] = []  # the generated kernel code, once compiled
        self.sources: dict[str, list[str]] = {}  # per compiled version (the owner's and its rivals'), its code
        self.compile_seconds: float | None = None
        # where the fused version was compiled: "this process", "worker process" (see compile_process.py), or
        # inductor.RECALLED (a worker of an earlier process wrote the module this process loaded),
        # and why a background compile could not go to the worker (None when it went, or was never asked)
        self.compiled_in: str | None = None
        self.compiled_here_because: str | None = None
        # per linear layer's product, the GEMM library Inductor's module calls and the times that chose it
        # (executors/gemm.py); None where no pass ran (another executor, or Inductor's cache had the module)
        self.gemm: list[dict] | None = None
        self.timing = timing
        self.times: dict[str, deque] = {}
        self._cuda = torch.device(device).type == "cuda"
        self._compile = compile
        self._compile_in_background = compile_in_background or compile  # what the compile thread calls
        self._rivals = tuple(rivals) if race else ()
        self._race_wanted = race
        self._race_off = race_off
        self.clock = clock  # times the race's calls on CPU
        # what each version runs: torch from the start, each kernel once compiled; after the race, torch and the winner
        self.versions: dict[str, Callable] = {"torch": eager}
        self.race: Race | None = None  # set once every kernel is compiled (when raced), kept when done
        self._racing = False  # read on every call: true while the race takes the calls
        self._pending_events: list = []  # a CUDA race call's (version, start, end) events, until they complete
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
        """The owner's kernel, then its rivals': here (``tiered=False``: before the first call returns), or, on the
        compile thread (``on_worker``), on the rivals' own thread (``background_rivals``) once the owner's kernel
        runs. ``compile_seconds`` is the owner's compile, what the region waited for a kernel; ``ready`` is set
        and the race starts once the rivals are compiled too."""
        if after:
            time.sleep(after)  # lets the calling thread return before the compile takes the interpreter lock
        t0 = time.perf_counter()
        compile_ = self._compile
        if compile_ is None:  # released while it waited in the queue
            self.ready.set()
            return
        rivals_later = False
        left_out: dict[str, str] = {}
        try:
            # on the worker, the draws the other threads make meanwhile must stand (see generators.py)
            with leaving_generators_alone() if on_worker else contextlib.nullcontext():
                try:
                    fn, source = ((self._compile_in_background or compile_) if on_worker else compile_)(args)
                except Exception as e:  # the region keeps running with torch, and says why
                    self.error = f"{type(e).__name__}: {e}"
                    self.history.append((time.time(), "torch (compile failed)"))
                else:
                    self.source = self.sources[self.executor] = source
                    self.compiled_in = getattr(fn, "compiled_in", "this process")
                    self.compiled_here_because = getattr(fn, "compiled_here_because", None)
                    self.gemm = getattr(fn, "gemm", None)
                    if self._compile is not None:  # released while compiling: the kernel is not kept
                        self.versions[self.executor] = fn
                    self.fn, self.version = (fn if self._compile is not None else None), self.executor
                    self.history.append((time.time(), self.executor))
                    # the rivals compile after the owner's kernel runs: a region is fused as soon as one kernel is
                    if self._rivals and self._compile is not None:
                        if on_worker:
                            self._box = [args]  # emptied by ``release``, as the first compile's box is
                            background_rivals().submit(self._build_rivals, self._box)
                            rivals_later = True
                        else:
                            left_out = self._compile_rivals(args, on_worker)
        finally:
            self.compile_seconds = time.perf_counter() - t0
            args = None  # noqa: F841  (the inputs are let go before anyone waiting is told the build is done)
            if not rivals_later:
                self._built(left_out)

    def _build_rivals(self, box: list) -> None:
        left_out: dict[str, str] = {}
        try:
            if box and self._compile is not None:  # not released while it waited in the queue
                with leaving_generators_alone():
                    left_out = self._compile_rivals(box.pop(), on_worker=True)
        finally:
            box.clear()
            self._built(left_out)

    def _compile_rivals(self, args, on_worker: bool) -> dict[str, str]:
        """Each rival's kernel, kept in ``versions``; why each that failed was left out."""
        left_out: dict[str, str] = {}
        for name, rival, rival_in_background in self._rivals:
            if self._compile is None:
                break
            try:
                rfn, rsource = ((rival_in_background or rival) if on_worker else rival)(args)
            except Exception as e:
                left_out[name] = f"compile failed: {type(e).__name__}: {e}"
            else:
                self.versions[name], self.sources[name] = rfn, rsource
        return left_out

    def _built(self, left_out: dict[str, str]) -> None:
        """Every kernel is compiled (or failed): the race starts where there is one, and ``wait`` returns."""
        if self._race_wanted and self._race_off is None and len(self.versions) > 1 and self._compile is not None:
            # turns: the owner's kernel, torch, then the rivals' kernels (a tie goes to the earlier)
            kernels = [v for v in self.versions if v != "torch"]
            self.race = Race(kernels[:1] + ["torch"] + kernels[1:], RACE_CALLS, left_out)
            self._racing = True
        self.ready.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the fused version is built (or failed), and any compile of it for other input strides
        under way (see ``layouts``); True if it is ready. Compiling starts at the first call."""
        self._start_pending()
        deadline = None if timeout is None else time.monotonic() + timeout
        if not (self._started and self.ready.wait(timeout)):
            return False
        fn = self.versions.get(self.executor)
        compiling = getattr(fn, "compiling", None)
        while compiling is not None and compiling():
            if deadline is not None and time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        return True

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
        if self._racing:
            return self._race_call(args)
        return self._run(args)

    def pin(self, version: str) -> None:
        """Run ``version`` (torch or a compiled kernel the region still holds) from now on, ending any race: to check
        one version's values, or time it, apart from the others."""
        fn = self.versions.get(version)
        if fn is None:
            raise ValueError(f"region {self.name} has no version {version!r}; it has {sorted(self.versions)}")
        self._racing = False
        self.fn = fn
        if version in self.sources:  # the code shown is the kernel that runs (the owner's when torch runs)
            self.source = self.sources[version]
        if version != self.version:
            self.version = version
            self.history.append((time.time(), version))

    def release(self) -> None:
        """Let go of the kernel, its compiler and any inputs kept for compiling it; what ran, when and how fast
        stays for ``summary``. A call that still comes runs the torch version: a backward whose forward ran before
        its function was dropped (``thunderlab.jit(model)(x).loss.backward()``) still has to run."""
        self._compile = self._compile_in_background = self._pending = None
        self.fn, self.version = self._torch, "torch"
        self.versions, self._rivals, self._racing = {}, (), False
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
            with torch.profiler.record_function(f"{REGION_MARK}{self.name}"):
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

    def _race_call(self, args):
        """One call of the race: the version whose turn it is runs, timed without waiting for the device."""
        race = self.race
        version, counts = race.next()
        fn = self.versions.get(version)
        if fn is None:  # released meanwhile
            return self._run(args)
        with (torch.profiler.record_function(f"{REGION_MARK}{self.name}") if PROFILING.is_set()
              else contextlib.nullcontext()):
            if self._cuda:
                # events are read once they complete, at a later call: a race call never waits for the GPU
                self._collect_events()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                out = fn(*args)
                end.record()
                if counts:
                    self._pending_events.append((version, start, end))
            else:
                fell = getattr(fn, "fallbacks", None)
                busy = fell is not None and fn.compiling()
                t0 = self.clock()
                out = fn(*args)
                seconds = self.clock() - t0
                # a kernel that ran torch while it compiles for these inputs' strides timed no kernel: not counted
                if counts and not (fell is not None and fn.fallbacks != fell and (busy or fn.compiling())):
                    race.add(version, seconds)
        if not self._cuda and self.timing:
            self.times.setdefault(version, deque(maxlen=10000)).append(seconds)
        if race.done:
            self._finish_race()
        elif self.timing:
            TIMING_LISTENERS(self)
        return out

    def _collect_events(self) -> None:
        still = []
        for version, start, end in self._pending_events:
            if end.query():
                seconds = start.elapsed_time(end) / 1e3
                self.race.add(version, seconds)
                if self.timing:
                    self.times.setdefault(version, deque(maxlen=10000)).append(seconds)
            else:
                still.append((version, start, end))
        self._pending_events = still

    def _finish_race(self) -> None:
        winner = self.race.decide()
        if self.race.suspect():
            self.race.again()  # the region keeps racing
            return
        if self.race.close():
            self.race.longer()  # the region keeps racing, from where it is
            return
        self.pin(winner)
        # the losing kernels go (torch stays: it is what verification and a re-run start from)
        self.versions = {v: f for v, f in self.versions.items() if v in (winner, "torch")}
        TIMING_LISTENERS(self)  # the sidebar hears the verdict at once

    def stats(self) -> dict:
        """Per version: count, median and min seconds."""
        return {v: {"count": len(t), "median_s": statistics.median(t), "min_s": min(t)}
                for v, t in self.times.items() if t}

    def race_summary(self) -> dict | None:
        """The race as plain data (see ``Race.summary``); None when the program was compiled with race=False."""
        if not self._race_wanted:
            return None
        if self.race is not None:
            return self.race.summary()
        if self._race_off is not None:
            why = self._race_off
        elif not self._started and self._pending is None:
            why = "waiting for the region's first call: its kernels compile after it, and the race starts after that"
        elif not self.ready.is_set():
            why = "waiting for the kernels to compile; the race starts at the call after"
        elif self.error is not None:
            why = f"no race: the kernel did not compile ({self.error.splitlines()[0]}), so torch runs it"
        else:
            why = "no race: there is no compiled version to race against torch"
        return {"state": "waiting" if not self.ready.is_set() and self._race_off is None else "off",
                "versions": [], "calls": RACE_CALLS, "times": {}, "winner": None, "why": why, "left_out": {},
                "started": None}

    def summary(self) -> dict:
        out = {"name": self.name, "executor": self.executor, "running": self.version,
               "history": [(round(t, 3), v) for t, v in self.history], "error": self.error,
               "compile_seconds": self.compile_seconds, "timings": self.stats(),
               "device": "cuda" if self._cuda else "cpu", "race": self.race_summary()}
        layouts = self.layouts()
        if layouts is not None:
            out["layouts"] = layouts
        if self.gemm:
            out["gemm"] = self.gemm
        return out

    def layouts(self) -> dict | None:
        """For a kernel that is compiled again for input strides it was not compiled for (the worker's kernels,
        see ``executors.inductor``): the other layouts compiled since its first, whether one is compiling now,
        and the calls torch ran meanwhile; None for other kernels, and while none runs."""
        fn = self.versions.get(self.executor)
        known = getattr(fn, "layouts", None)
        if not isinstance(known, dict):
            return None
        return {"compiled": sum(1 for v in list(known.values()) if callable(v)), "compiling": bool(fn.compiling()),
                "fallback_calls": int(fn.fallbacks)}
