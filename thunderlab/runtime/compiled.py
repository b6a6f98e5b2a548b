"""A compiled captured graph: cache by input metadata, compile on a miss, keep the record."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import torch

from thunderlab.core.program import Program
from thunderlab.core.trace import Trace
from thunderlab.executors.base import bind
from thunderlab.executors.region import _PENDING, start_pending
from thunderlab.inspect.record import CompileRecord, Step
from thunderlab.passes import DEFAULT_PIPELINE, Pipeline, run_pipeline
from thunderlab.passes.runner import verify

from .aliases import overlap_with, with_input_views, with_recorded_writes
from .autograd import training_callable

_RECORDS: list[CompileRecord] = []


def all_records() -> list[CompileRecord]:
    return _RECORDS


@dataclass(frozen=True)
class Options:
    """How to compile: the pipeline text, and whether to check each step against eager."""

    pipeline: str = DEFAULT_PIPELINE
    verify: bool = False  # numerics after every pass on the captured inputs (runs the program per step)
    tiered: bool = True  # fused regions start on torch and switch when their kernel is compiled
    timing: bool = False  # time every region on every call

    def __post_init__(self):
        Pipeline.parse(self.pipeline)  # fail at jit time, not at the first call


def _meta(a):
    if isinstance(a, torch.Tensor):
        return (tuple(a.shape), a.dtype, a.device, a.requires_grad)
    return (type(a), a)


def describe_input(a) -> str:
    if isinstance(a, torch.Tensor):
        dims = ", ".join(str(s) for s in a.shape)
        return f"{a.device.type} {str(a.dtype).replace('torch.', '')}[{dims}]" + (" requires_grad" if a.requires_grad else "")
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
    """

    def __init__(self, capture: Callable, options: Options, name: str = "graph", graph_index: int = 0,
                 eager: Callable | None = None, static: bool = False, value_inputs: tuple[int, ...] = ()):
        self.capture = capture  # args -> (initial trace, lifted tensors)
        # a graph Dynamo captured with static shapes runs only behind guards that fix every input's
        # shape, dtype, device, strides and requires_grad, and the grad mode's part of the key is all that varies
        self.static = static
        self.value_inputs = value_inputs  # inputs whose value (not only metadata) the program was specialized on
        self.options = options
        self.name = name
        self.graph_index = graph_index
        self.eager = eager  # the uncompiled graph, for verification
        self.cache: dict[tuple, _Entry] = {}
        self.hits = 0
        self.misses = 0
        self.records: list[CompileRecord] = []

    def __call__(self, *args):
        if self.static:
            key = torch.is_grad_enabled()
        else:
            key = (torch.is_grad_enabled(), *map(_meta, args), *(args[i].item() for i in self.value_inputs))
        entry = self.cache.get(key)
        if entry is None:
            self.misses += 1
            entry = self.compile(args, key)
        else:
            self.hits += 1
            if entry.written and overlap_with((*args, *entry.lifted), entry.written):
                entry = self.compile(args, key)  # the lowering names the inputs that overlap
        out = entry.fn(*args, *entry.lifted)
        if _PENDING:  # regions that ran for the first time: their fused kernels compile from now on
            start_pending()
        return out

    def compile(self, args, key) -> _Entry:
        record = CompileRecord(self.name, [describe_input(a) for a in args], self.options.pipeline,
                               graph_index=self.graph_index)
        self.records.append(record)
        _RECORDS.append(record)
        reference = None
        if self.options.verify and self.eager is not None:
            with torch.no_grad():
                reference = self.eager(*_clone(args))
        t0 = time.perf_counter()
        trace, lifted = self.capture(args)
        capture_s = time.perf_counter() - t0
        program = Program({"forward": trace})
        full_inputs = tuple(args) + tuple(lifted)
        # the inputs are kept by reference (not copied) so that bisection and re-runs can check numerics later
        record.captured, record.example_inputs, record.reference = program, full_inputs, reference
        record.steps.append(Step(0, "capture", capture_s, program, 0, program.count(), verify(program, full_inputs, reference)))
        steps, final, error = run_pipeline(program, self.options.pipeline,
                                           inputs=full_inputs if reference is not None else None, reference=reference)
        record.steps.extend(steps)
        bad = next((s for s in record.steps if s.verification is not None and not s.verification.ok), None)
        if error is None and bad is not None:
            what = "an invalid program" if bad.verification.structural != "ok" else "wrong numbers"
            error = f"pass {bad.spec!r} (step {bad.index}) produced {what}: {bad.verification.detail or bad.verification.structural}"
        if error:
            record.error = error
            raise CompileError(error, record)
        # with a backward trace, regions run inside an autograd.Function, where no op records a graph
        run_options = {"tiered": self.options.tiered, "timing": self.options.timing,
                       "grad_enabled": torch.is_grad_enabled() and "backward" not in final.traces}
        if "backward" in final.traces:
            fn = training_callable(final, regions=record.regions, options=run_options)
            if not torch.is_grad_enabled():  # called under no_grad, the function turns grad on (enable_grad)
                fn = _with_grad(fn)
        else:
            fn = bind(final.forward, regions=record.regions, options=run_options)
        if trace.meta.get("recorded_writes"):
            fn = with_recorded_writes(fn, trace.meta["recorded_writes"])
        views = trace.meta.get("input_views")
        if views:
            fn = with_input_views(fn, views)
        entry = _Entry(fn, lifted, record, trace.meta.get("written_inputs", ()))
        self.cache[key] = entry
        return entry


def _with_grad(fn):
    def run(*args):
        with torch.enable_grad():
            return fn(*args)

    return run


def _clone(args):
    return tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args)


class CompileError(RuntimeError):
    """A pass failed; ``.record`` holds every step before it and the error."""

    def __init__(self, msg: str, record: CompileRecord):
        super().__init__(msg)
        self.record = record


def reusable_prefix(record: CompileRecord, pipeline: Pipeline) -> int:
    """How many of ``record``'s passes ``pipeline`` would run unchanged: same spec, same registered class."""
    from thunderlab.passes.base import REGISTRY

    specs, old = pipeline.enabled(), record.steps[1:]
    k = 0
    while (k < len(specs) and k < len(old) and old[k].error is None and old[k].program is not None
           and str(specs[k]) == old[k].spec and old[k].pass_type is REGISTRY.get(specs[k].name)
           and _resolves_alike(specs, k, old[k])):
        k += 1
    return k


def _resolves_alike(specs, k: int, step) -> bool:
    """Whether pass ``k`` would run as it did, given the passes now after it (see ``Pass.in_pipeline``)."""
    if step.resolved is None:
        return True
    try:
        return repr(specs[k].instantiate().in_pipeline(tuple(specs[k + 1:]))) == step.resolved
    except Exception:  # a spec that no longer instantiates is re-run, and reports its error there
        return False


def rerun(record: CompileRecord, pipeline: str | None = None, *, observer=None) -> CompileRecord:
    """Run an edited pipeline on a record's captured program; a new record.

    Steps before the first pass that changed (by spec, or because its name now means a
    newly registered class) are taken from ``record`` as they are; the rest run anew.
    """
    if record.captured is None:
        raise ValueError("this record has no captured program to re-run")
    parsed = Pipeline.parse(pipeline if pipeline is not None else record.pipeline)
    k = reusable_prefix(record, parsed)
    new = CompileRecord(record.name, record.inputs, str(parsed), graph_index=record.graph_index,
                        captured=record.captured, example_inputs=record.example_inputs, reference=record.reference,
                        reused=k)
    new.steps.extend(record.steps[:1 + k])
    verifying = record.reference is not None
    rest = Pipeline(parsed.enabled()[k:])
    steps, _final, error = run_pipeline(new.steps[-1].program, rest, observer=observer, first_index=k + 1,
                                        inputs=record.example_inputs if verifying else None, reference=record.reference)
    new.steps.extend(steps)
    new.error = error
    _RECORDS.append(new)
    return new


def final_trace(record: CompileRecord) -> Trace:
    return record.program.forward
