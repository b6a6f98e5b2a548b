"""A compiled captured graph: cache by input metadata, compile on a miss, keep the record."""
from __future__ import annotations

import math
import os
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

import torch

from thunderlab.core import fastpaths
from thunderlab.core.aliases import overlap_with, with_input_views, with_recorded_writes
from thunderlab.core.amp import without_autocast
from thunderlab.core.caller import warn
from thunderlab.core.listeners import Listeners
from thunderlab.core.notes import Notes
from thunderlab.core.program import Program
from thunderlab.executors import compile_process, default_order, inductor
from thunderlab.executors.base import RunOptions, bind
from thunderlab.executors.communication import CommunicationTimer
from thunderlab.executors.region import PENDING, PROFILING, start_pending
from thunderlab.inspect.record import CompileRecord, Step
from thunderlab.passes import DEFAULT_PIPELINE, Pipeline, run_pipeline
from thunderlab.passes.runner import observers, structure
from thunderlab.passes.verification import NumericCheck, eager_reference

from .autograd import training_callable
from .session import HeldInputs, Session, end, live, open_session, sessions

_RECORDS: list[CompileRecord] = []
# called with each record once its pipeline has run (the JupyterLab sidebar and record_to listen here)
RECORD_LISTENERS = Listeners("a record made")
# a graph ran a call as TorchDynamo captured it (its sizes kept changing), announced with the graph's newest record
# and the graph's count of such calls; and with 0 for the record that was newest when a newer one is made
CAPTURED_LISTENERS = Listeners("a call run as captured")


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected a whole number of at least 1") from None
    if value < 1:
        raise ValueError(f"{name}={raw!r}: expected a whole number of at least 1")
    return value


# the process keeps the newest records only, so a kernel that compiles all day stays bounded
_RECORDS: deque[CompileRecord] = deque(maxlen=_env_int("THUNDERLAB_MAX_RECORDS", 100))
# each captured graph keeps this many compiled input signatures, the least recently used going first
_LIMITS = {"shapes": _env_int("THUNDERLAB_MAX_SHAPES", 16),
           # a graph with symbolic sizes that meets new sizes on this many calls in a row (a generation loop's
           # growing cache, a scalar input that changes every call) compiles no more new ones at once: in grad mode
           # a size that recurs (padded lengths) compiles once its calls have taken as long as a compile
           "new_sizes": _env_int("THUNDERLAB_MAX_NEW_SIZES", 4)}


# every live graph, for the sidebar's rows (how many calls each ran as captured)
_GRAPHS: weakref.WeakSet[CompiledGraph] = weakref.WeakSet()


def ran_as_captured() -> dict[int, int]:
    """The graphs that ran calls as TorchDynamo captured them (their sizes kept changing; see ``CompiledGraph``):
    each one's newest record's uid, and how many calls."""
    return {g.records[-1].uid: g.as_captured for g in list(_GRAPHS) if g.as_captured and g.records}


def all_records() -> deque[CompileRecord]:
    return _RECORDS


def clear_records() -> None:
    """Forget every record this process keeps (compiled functions keep working)."""
    _RECORDS.clear()


def set_limits(*, records: int | None = None, shapes: int | None = None,
               kernels: int | None = None, new_sizes: int | None = None) -> dict[str, int]:
    """Set how many records the process keeps, how many input signatures each graph keeps compiled, how
    many Inductor region kernels no live function runs stay compiled for reuse (the newest; 0: none), and after
    how many calls in a row with new sizes a graph with symbolic sizes stops compiling new ones at once
    (``new_sizes``: later calls with sizes it has no program for run the graph as TorchDynamo captured it, and in
    grad mode sizes that come again compile once their calls have taken as long as a compile, while the graph
    keeps fewer than ``shapes``).

    Returns the limits now in force. Lowering ``records`` or ``kernels`` drops the oldest at once.
    """
    global _RECORDS
    for name, value, least in (("records", records, 1), ("shapes", shapes, 1), ("kernels", kernels, 0),
                               ("new_sizes", new_sizes, 1)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < least):
            raise ValueError(f"set_limits: {name} must be a whole number of at least {least}, got {value!r}")
    if records is not None:
        _RECORDS = deque(_RECORDS, maxlen=records)
    if shapes is not None:
        _LIMITS["shapes"] = shapes
    if kernels is not None:
        inductor.keep_recent(kernels)
    if new_sizes is not None:
        _LIMITS["new_sizes"] = new_sizes
    return {"records": _RECORDS.maxlen, "shapes": _LIMITS["shapes"], "kernels": inductor.recent_limit(),
            "new_sizes": _LIMITS["new_sizes"]}


def keep(record: CompileRecord) -> None:
    """Add a record made in this process (a compile's, a re-run's) to the process's list, and tell the listeners."""
    _RECORDS.append(record)
    record.close()  # complete: it may keep its steps packed once others are used (see CompileRecord.close)
    _announce(record)


def _announce(record: CompileRecord) -> None:
    RECORD_LISTENERS(record)


@dataclass(frozen=True)
class Options:
    """How to compile: the pipeline text, and whether to check each step against eager."""

    pipeline: str = DEFAULT_PIPELINE
    verify: bool = False  # numerics after every pass on the captured inputs (runs the program per step)
    tiered: bool = True  # fused regions start on torch and switch when their kernel is compiled
    race: bool = True  # then time each version (torch, each fusion executor's kernel) and keep the fastest
    timing: bool = False  # time every region on every call
    keep_inputs: bool = False  # records hold the compiled-for inputs strongly (default: weakly, unless verify)

    def __post_init__(self):
        Pipeline.parse(self.pipeline)  # fail at jit time, not at the first call


def _meta(a):
    if isinstance(a, torch.Tensor):
        return (tuple(a.shape), a.dtype, a.device, a.requires_grad)
    return (type(a), a)


def describe_input(a) -> str:
    if isinstance(a, torch.Tensor):
        dims = ", ".join(str(s) for s in a.shape)
        return f"{a.device.type} {str(a.dtype).replace('torch.', '')}[{dims}]" + (
            " requires_grad" if a.requires_grad else ""
        )
    return repr(a)


class _Entry:
    __slots__ = ("fn", "lifted", "record", "written")

    def __init__(self, fn, lifted, record, written=()):
        self.fn, self.lifted, self.record = fn, tuple(lifted), record
        self.written = tuple(written)  # inputs the program writes: they must not share memory with other inputs


class CompiledGraph:
    """Runs one captured graph; compiles it once per input signature.

    The cache key is each tensor input's (shape, dtype, device, requires_grad) and each
    other input's value, so inputs that differ in any of these compile anew and never run
    a program made for others; an input in ``value_inputs`` (a Python number that TorchDynamo
    passes as a 0-d tensor) is keyed by its value too. A ``static`` graph (no symbolic sizes)
    is keyed by grad mode alone: TorchDynamo's guards, checked before every call of it,
    already fix the rest.

    Sizes that change on every call (a generation loop's growing cache) would compile a program per call: a
    graph with symbolic sizes that meets new input signatures on ``new_sizes`` calls in a row (``set_limits``,
    4 by default) compiles no more new ones at once. From then on a call with a signature it has no program for
    runs the graph as TorchDynamo captured it (eager PyTorch, counted in ``as_captured``), once saying so in a
    warning. In grad mode, a signature that comes again (a training loop's lengths padded to a multiple of 8)
    compiles once its calls run as captured have taken as long as one of this graph's compiles takes on average
    (rent until the rent paid equals the price, then buy; a call's rent is its forward's time, the backward is
    not timed), while the cache has room for it (``shapes``); a full cache evicts none for it. A signature whose
    compile fails there runs as captured from then on, and a warning says why. Without grad (a generation's cache
    lengths, which recur once per generation) they keep running as captured: a decode call's rent is small
    against what a compile costs beyond its own time (the kernels' builds and race), and compiling them measured
    slower over hundreds of generations (``benchmarks/generation.py``).
    """

    # no instance __dict__: TorchDynamo wraps the graph with functools.wraps, which copies an instance's
    # __dict__ into the wrapper, and the copy would keep what ``release`` lets go of for as long as Dynamo
    # keeps the wrapper (in the compiled function's module globals, which can be for good)
    __slots__ = ("capture", "static", "value_inputs", "options", "name", "graph_index", "eager", "cache", "hits",
                 "misses", "records", "made", "origin", "new_in_a_row", "as_captured", "as_captured_s", "compile_s",
                 "compiles", "__weakref__")

    def __init__(self, capture: Callable, options: Options, name: str = "graph", graph_index: int = 0,
                 eager: Callable | None = None, static: bool = False, value_inputs: tuple[int, ...] = (),
                 origin: Notes | None = None):
        self.capture = capture  # args -> (initial trace, lifted tensors)
        self.origin = origin or Notes()  # where the frontend's graph came from: the capture step's notes
        # a graph Dynamo captured with static shapes runs only behind guards that fix every input's
        # shape, dtype, device, strides and requires_grad, and the grad mode's part of the key is all that varies
        self.static = static
        self.value_inputs = value_inputs  # inputs whose value (not only metadata) the program was specialized on
        self.options = options
        self.name = name
        self.graph_index = graph_index
        self.eager = eager  # the uncompiled graph, for verification
        self.cache: OrderedDict[tuple, _Entry] = OrderedDict()
        self.hits = 0
        self.misses = 0
        self.records: list[CompileRecord] = []
        self.made: set[int] = set()  # the uid of every record this graph made, for ``release``
        self.new_in_a_row = 0  # calls in a row with a signature not compiled (up to the new_sizes limit)
        self.as_captured = 0  # calls run as TorchDynamo captured the graph, once its sizes kept changing
        # past the limit: the seconds each signature's calls ran as captured, the newest last (compiled once they
        # reach what a compile costs: the seconds this graph's compiles took, and how many there were)
        self.as_captured_s: OrderedDict[tuple, float] = OrderedDict()
        self.compile_s = 0.0
        self.compiles = 0
        _GRAPHS.add(self)

    def __call__(self, *args):
        if self.static:
            key = torch.is_grad_enabled()
        else:
            key = (torch.is_grad_enabled(), *map(_meta, args), *(args[i].item() for i in self.value_inputs))
        entry = self.cache.get(key)
        if entry is None:
            self.misses += 1
            late = False  # past the new-sizes limit: a signature that paid for its compile
            if not self.static:
                if self.new_in_a_row < _LIMITS["new_sizes"] or self.eager is None:
                    self.new_in_a_row += 1
                elif not self._worth_compiling(key):
                    return self._run_as_captured(args, key)
                else:
                    late = True
            try:
                entry = self.compile(args, key)
            except CompileError as e:
                if not late:
                    raise
                warn(f"thunderlab: {self.name}: compiling a signature that came again failed, so it keeps "
                     f"running as captured: {e}")
                self.as_captured_s[key] = -math.inf  # its rent never reaches a price again (while it is kept)
                return self._run_as_captured(args, key)
        else:
            self.hits += 1
            if not self.static:
                self.cache.move_to_end(key)
                if self.new_in_a_row < _LIMITS["new_sizes"]:
                    self.new_in_a_row = 0
            if entry.written and overlap_with((*args, *entry.lifted), entry.written):
                entry = self.compile(args, key)  # the lowering names the inputs that overlap
        if PROFILING.is_set():  # thunderlab.profile: the kernels of this call are filed under its record
            with torch.profiler.record_function(f"{RECORD_MARK}{entry.record.uid}"):
                out = entry.fn(*args, *entry.lifted)
        else:
            out = entry.fn(*args, *entry.lifted)
        if PENDING:  # regions that ran for the first time: their fused kernels compile from now on
            start_pending()
        return out

    def _worth_compiling(self, key) -> bool:
        """Past the new-sizes limit: whether ``key``'s signature has run as captured in grad mode for as long as a
        compile of this graph takes on average, and the cache has room for one more program."""
        spent = self.as_captured_s.get(key)
        if spent is None or len(self.cache) >= _LIMITS["shapes"] or spent < self.price():
            return False
        del self.as_captured_s[key]
        return True

    def price(self) -> float:
        """What compiling one more signature is taken to cost: the seconds this graph's compiles took on average."""
        return self.compile_s / max(1, self.compiles)

    def _run_as_captured(self, args, key):
        if not self.as_captured:
            warn(
                f"thunderlab: {self.name}: {self.new_in_a_row} calls in a row came with input sizes or values not "
                f"compiled before (its graph has symbolic sizes, and thunderlab compiles one program per signature). "
                f"From now on a call with a new signature runs the graph as TorchDynamo captured it. In grad mode a "
                f"signature that comes again compiles once its calls have taken as long as a compile, while fewer than "
                f"thunderlab.set_limits()['shapes'] are compiled. The {len(self.cache)} compiled ones stay compiled. "
                f"thunderlab.set_limits(new_sizes=...) sets how many new signatures in a row compile at once")
        self.as_captured += 1
        if self.records:
            CAPTURED_LISTENERS(self.records[-1], self.as_captured)
        if not key[0]:  # without grad no rent is kept: such a signature stays as captured (see the class)
            return self.eager(*args)
        t0 = time.perf_counter()
        out = self.eager(*args)
        self.as_captured_s[key] = self.as_captured_s.pop(key, 0.0) + time.perf_counter() - t0  # the newest last
        while len(self.as_captured_s) > 4 * _LIMITS["shapes"]:
            self.as_captured_s.popitem(last=False)
        return out

    def entry_now(self) -> _Entry | None:
        """The entry a call made now would run, where its inputs play no part in choosing it, or None.

        That is a static graph's (its key is the grad mode; TorchDynamo's guards fix the rest) whose program
        writes no input (no overlap to check per call). Direct calls whose guards fix the grad mode run its
        ``fn`` themselves, adding to ``hits`` and starting pending compiles as ``__call__`` does.
        """
        if not self.static:
            return None
        entry = self.cache.get(torch.is_grad_enabled())
        return entry if entry is not None and not entry.written else None

    def release(self) -> None:
        """Let go of the captured graph, the compiled callables and the records (the function was dropped).

        TorchDynamo keeps the callable it was given in the compiled function's module globals for good;
        what stays there afterwards is this empty object. The process's list keeps the newest records
        as data; the session of each of this graph's records (and of their re-runs) ends here.
        """
        for s in sessions():  # this graph's records' and their re-runs'
            if s.family in self.made:
                end(s)
        self.cache.clear()
        self.as_captured_s.clear()
        self.records = []
        self.made = set()
        self.capture = self.eager = None

    def compile(self, args, key) -> _Entry:
        if self.capture is None:
            raise RuntimeError(f"{self.name}: the thunderlab.jit function this graph belongs to was freed; "
                               f"compile again with thunderlab.jit")
        record = CompileRecord(self.name, [describe_input(a) for a in args], self.options.pipeline,
                               graph_index=self.graph_index)
        self.records.append(record)
        self.made.add(record.uid)
        if len(self.records) > 2 * _LIMITS["shapes"]:  # failed compiles have no cache entry to evict with
            self.records.pop(0)
        _RECORDS.append(record)
        if self.as_captured and len(self.records) > 1:  # the count moves to the new newest record: the last one's
            CAPTURED_LISTENERS(self.records[-2], 0)  # row says none any more
        t0 = time.perf_counter()
        try:
            return self._compile(record, args, key)
        finally:
            self.compile_s += time.perf_counter() - t0
            self.compiles += 1
            record.close()  # complete, made or failed (see CompileRecord.close)
            _announce(record)

    def _compile(self, record: CompileRecord, args, key) -> _Entry:
        reference = None
        if self.options.verify and self.eager is not None:
            reference = eager_reference(self.eager, args)
        if self.options.tiered:  # the kernel compiler's worker imports while this captures (see compile_process)
            compile_process.expect(self.options.pipeline, args, default_order())
        t0 = time.perf_counter()
        with fastpaths.collector_paused():  # lowering the graph, as the passes: many objects, no cycles
            program, lifted = self.capture(args)
        capture_s = time.perf_counter() - t0
        full_inputs = tuple(args) + tuple(lifted)
        # the inputs are kept by reference (not copied) so that bisection and re-runs can check numerics later;
        # verify=True checks re-runs against eager too, on these inputs: asking for it keeps them
        held = HeldInputs(full_inputs, strong=self.options.keep_inputs or self.options.verify)
        session = open_session(record, held=held, eager=self.eager, reference=reference)
        views = program.boundary.input_views  # the outputs the runtime re-makes as views of inputs
        check = NumericCheck(full_inputs, reference, views) if reference is not None else None
        step0 = Step(0, "capture", capture_s, program, 0, program.count(), structure(program), notes=self.origin)
        if check is not None and step0.verification.ok:
            check(step0)
        record.steps.append(step0)
        try:  # steps reach the record as they finish, so an interrupted compile keeps them
            _steps, final, error = run_pipeline(program, self.options.pipeline,
                                                observer=observers(check, record.steps.append))
        except KeyboardInterrupt:
            record.error = (
                f"interrupted (KeyboardInterrupt) at step {record.steps[-1].index} {record.steps[-1].spec!r}; "
                f"nothing was cached, so the next call compiles again"
            )
            raise
        bad = next((s for s in record.steps if s.verification is not None and not s.verification.ok), None)
        if error is None and bad is not None:
            what = ("an invalid program" if bad.verification.structural != "ok"
                    else "different aliasing" if bad.verification.detail.startswith("aliasing:") else "wrong numbers")
            detail = (bad.verification.detail or bad.verification.structural).removeprefix("aliasing: ")
            error = f"pass {bad.spec!r} (step {bad.index}) produced {what}: {detail}"
        if error:
            record.error = error
            raise CompileError(error, record)
        fn = _program_callable(session, program, final, tiered=self.options.tiered, timing=self.options.timing,
                               race=self.options.race)
        session.runner = _marked(fn, record.uid)
        session.refresh()
        _drop_caches(record)
        entry = _Entry(fn, lifted, record, program.boundary.written_inputs)
        self.cache[key] = entry
        while len(self.cache) > _LIMITS["shapes"]:
            _, old = self.cache.popitem(last=False)
            self.records = [r for r in self.records if r is not old.record]
        return entry


def _drop_caches(record: CompileRecord) -> None:
    """Let go of what each call in the record's steps derived while compiling (see ``BoundSymbol.drop_caches``):
    a record lives as long as its function, and views or a re-run make again what they read."""
    seen: set[int] = set()
    for step in record.steps:
        for trace in step.program or ():
            for b in trace.bound_symbols:
                if id(b) not in seen:
                    seen.add(id(b))
                    b.drop_caches()


def _program_callable(session: Session, captured: Program, final: Program, *, tiered: bool, timing: bool,
                      race: bool = True):
    """The function running ``final`` (all inputs, lifted ones included); its regions' runners land in the session."""
    boundary = captured.boundary  # the frontend's word on writes and aliases, whatever the passes did
    # with a backward trace, regions run inside an autograd.Function, where no op records a graph
    record = session._record()
    racers = _racers(record.pipeline) if race and record is not None else ()
    run_options = RunOptions(tiered=tiered, timing=timing, race=race, racers=racers,
                             grad_enabled=torch.is_grad_enabled() and "backward" not in final.traces)
    off = tuple(device for device, _ in boundary.autocast)  # called under torch.autocast: its casts are in the program
    if timing:
        session.communication = CommunicationTimer()
    if "backward" in final.traces:
        fn = training_callable(final, regions=session.regions, options=run_options, autocast_off=off,
                               recorded_writes=boundary.recorded_writes, communication=session.communication)
        if not torch.is_grad_enabled():  # called under no_grad, the function turns grad on (enable_grad)
            fn = _with_grad(fn)
    else:
        fn = bind(final.forward, regions=session.regions, options=run_options, communication=session.communication)
    if off:
        fn = without_autocast(fn, off)
    if boundary.recorded_writes:
        fn = with_recorded_writes(fn, boundary.recorded_writes)
    if boundary.input_views:
        fn = with_input_views(fn, boundary.input_views)
    return fn


def _racers(pipeline: str) -> tuple[str, ...]:
    """The executors whose kernels may race a region: those the pipeline's claim lists (the default order when it
    names none), so a region is never raced on an executor the pipeline left out."""
    for spec in Pipeline.parse(pipeline).specs:
        if spec.name == "claim" and spec.enabled:
            return tuple(spec.instantiate().executors) or default_order()
    return default_order()


# a profiled call of a record's program is marked with this and the record's uid (see runtime/profile.py)
RECORD_MARK = "thunderlab.record::"


def _marked(fn, uid: int):
    mark = f"{RECORD_MARK}{uid}"

    def run(*args):
        if PROFILING.is_set():
            with torch.profiler.record_function(mark):
                return fn(*args)
        return fn(*args)

    return run


def program_runner(record: CompileRecord):
    """The function that runs ``record``'s final program on all its inputs (its session's ``example_inputs``' order).

    A record made by a call is run by the very function its calls run; a re-run's program is bound
    here once, with its regions compiled on their first call (not in the background).
    """
    session = live(record, "running the record's program", "its regions and compiled program")
    if session.runner is None:
        final = record.program
        if record.error is not None or final is None or record.captured is None:
            raise ValueError(f"record {record.uid} ({record.name}) has no program to run"
                             + (f": {record.error.splitlines()[0]}" if record.error else ""))
        session.runner = _marked(_program_callable(session, record.captured, final, tiered=False, timing=False),
                                 record.uid)
    return session.runner


def _with_grad(fn):
    def run(*args):
        with torch.enable_grad():
            return fn(*args)

    return run


class CompileError(RuntimeError):
    """A pass failed; ``.record`` holds every step before it and the error."""

    def __init__(self, msg: str, record: CompileRecord):
        super().__init__(msg)
        self.record = record
