"""Running a pipeline: one observer hook between passes; verification after each pass."""
from __future__ import annotations

import gc
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import torch

from thunderlab.core.program import Program
from thunderlab.core.symbols import tree_flatten, tree_map
from thunderlab.core.verify import VerificationError, check_trace
from thunderlab.executors.base import bind
from thunderlab.inspect.record import Step, Verification

from .base import Pipeline

Observer = Callable[[Step], None]


def _mark_origins(before: Program | None, after: Program, origin: str) -> None:
    """Name the pass in every bound symbol it created or rewrote (the runner's job, not the pass's)."""
    old = {id(b) for t in before for b in t.bound_symbols} if before is not None else set()
    for t in after:
        for i, b in enumerate(t.bound_symbols):
            if id(b) not in old and b.origin is None:
                t.bound_symbols[i] = b.replace(origin=origin)


def run_program(program: Program, inputs, trace: str = "forward"):
    """Run one trace of ``program`` with its executors (torch where unclaimed; fusion regions call by call)."""
    fn = bind(program.traces[trace], options={"eager_regions": True})
    return fn(*inputs)


VERIFY_SEED = 0  # the seed every verification run and its eager reference start from


@contextmanager
def seeded(seed: int = VERIFY_SEED):
    """Run with the random generators seeded, and restored afterwards: a program and eager PyTorch,
    each run so, draw the same numbers when the program draws as eager does."""
    cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(seed)
        yield


@dataclass
class Reference:
    """What eager PyTorch did on the verification inputs: its outputs, and its inputs after the call
    (a program must mutate them the same way)."""

    outputs: object
    inputs: tuple


def _fresh(inputs) -> tuple:
    return tree_map(lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v, tuple(inputs))


def eager_reference(fn, inputs) -> Reference:
    """Run ``fn`` (eager PyTorch) on copies of ``inputs``, seeded as verification runs are."""
    fresh = _fresh(inputs)
    with torch.no_grad(), seeded():
        out = fn(*fresh)
    return Reference(out, fresh)


def compare(actual, expected, rtol: float = 1e-4, atol: float = 1e-5, what: str = "output") -> tuple[bool, float, str]:
    """(all close, max abs error, first mismatch) between two output structures."""
    a, e = tree_flatten(actual), tree_flatten(expected)
    if len(a) != len(e):
        return False, float("inf"), f"{len(a)} {what}s, eager gives {len(e)}"
    worst = 0.0
    for i, (x, y) in enumerate(zip(a, e)):
        if isinstance(y, torch.Tensor):
            if not isinstance(x, torch.Tensor) or x.shape != y.shape:
                return False, float("inf"), f"{what} {i}: {getattr(x, 'shape', x)} vs eager {tuple(y.shape)}"
            if x.dtype != y.dtype:
                return False, float("inf"), f"{what} {i}: dtype {x.dtype} vs eager {y.dtype}"
            if y.numel() == 0:
                continue
            xd, yd = x.detach(), y.detach()
            if y.dtype.is_floating_point or y.dtype.is_complex:
                err = (xd - yd).abs().nan_to_num(nan=0.0)
                both_nan = xd.isnan() & yd.isnan()
                m = float(err[~both_nan].max()) if (~both_nan).any() else 0.0
                worst = max(worst, m)
                if not torch.allclose(xd, yd, rtol=rtol, atol=atol, equal_nan=True):
                    return False, worst, f"{what} {i}: max |err| {m:.3g}"
            elif not torch.equal(xd, yd):
                return False, worst, f"{what} {i}: values differ"
        elif x != y and not (isinstance(x, float) and x != x and y != y):
            return False, worst, f"{what} {i}: {x!r} vs eager {y!r}"
    return True, worst, ""


def verify(program: Program, inputs=None, reference=None, checked: dict | None = None) -> Verification:
    """Check every trace's structure and, given inputs and eager outputs, the forward numerics.

    ``checked`` carries the calls whose metadata earlier steps re-derived (see ``check_trace``).
    """
    try:
        for t in program:
            check_trace(t, checked=checked)
    except VerificationError as e:
        return Verification(False, str(e), detail=str(e))
    if reference is None or inputs is None:
        return Verification(True)
    ref_out, ref_in = (reference.outputs, reference.inputs) if isinstance(reference, Reference) else (reference, None)
    fresh = _fresh(inputs)
    try:
        with torch.no_grad(), seeded():
            out = run_program(program, fresh)
        if "backward" in program.traces:  # the forward also returns what backward saves
            out = out[0]
    except Exception as e:  # a program that fails to run is a failed verification, not a crash
        return Verification(False, detail=f"running the program raised {type(e).__name__}: {e}")
    ok, err, why = compare(out, ref_out)
    if ok and ref_in is not None:  # inputs the eager call mutated (lifted constants follow; eager has none)
        ok, err_in, why = compare(fresh[:len(ref_in)], ref_in, what="input (after the call)")
        err = max(err, err_in)
    return Verification(ok, max_error=err, detail=why)


def run_pipeline(program: Program, pipeline: "str | Pipeline", *, observer: Observer | None = None,
                 inputs=None, reference=None, first_index: int = 1) -> tuple[list[Step], Program, str | None]:
    """Run each enabled pass in order; returns (steps, final program, error or None).

    A pass that raises ends the run: its step records the error (naming the pass), and
    every earlier step is kept.

    The cyclic garbage collector is paused meanwhile: passes make many small objects and no
    cycles worth collecting, and a full collection over a big model's heap can cost more than
    the passes themselves. It runs again (as before) when the pipeline ends.
    """
    pipeline = Pipeline.parse(pipeline)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _run(program, pipeline, observer, inputs, reference, first_index)
    finally:
        if was_enabled:
            gc.enable()


def _run(program, pipeline, observer, inputs, reference, first_index):
    steps: list[Step] = []
    current = program
    checked = {b.meta_key(): b for t in program for b in t.bound_symbols}  # verified at its own step
    specs = pipeline.enabled()
    for offset, spec in enumerate(specs):
        index = first_index + offset
        p = spec.instantiate().in_pipeline(tuple(specs[offset + 1:]))
        before = current.count()
        t0 = time.perf_counter()
        try:
            nxt = p(current)
            if not isinstance(nxt, Program):
                raise TypeError(f"returned {type(nxt).__name__}, not a Program")
        except Exception as e:
            seconds = time.perf_counter() - t0
            msg = f"pass {spec.name!r} (step {index}) raised {type(e).__name__}: {e}"
            step = Step(index, str(spec), seconds, None, before, before, error=msg,
                        notes={"traceback": traceback.format_exc()}, pass_type=type(p))
            steps.append(step)
            if observer:
                observer(step)
            return steps, current, msg
        seconds = time.perf_counter() - t0
        _mark_origins(current, nxt, spec.name)
        ver = verify(nxt, inputs, reference, checked)
        step = Step(index, str(spec), seconds, nxt, before, nxt.count(), ver, notes=p.describe(current, nxt),
                    pass_type=type(p), resolved=repr(p))
        steps.append(step)
        if observer:
            observer(step)
        current = nxt
    return steps, current, None


@dataclass
class Bisection:
    """Where numerics first broke: the step, its pass, the first differing output, and the steps run to find it."""

    step: int
    spec: str
    detail: str
    checked: list[int]

    def __str__(self) -> str:
        return (f"pass {self.spec!r} (step {self.step}) is the first to change the outputs: {self.detail} "
                f"(checked steps {', '.join(map(str, self.checked))})")


def bisect(record, inputs=None, reference=None) -> "Bisection | None":
    """Binary search over a record's steps for the first whose program disagrees with eager.

    ``inputs`` are the captured graph's inputs, in ``record.inputs`` order; they default to the inputs the record was compiled for; ``reference`` (the eager
    outputs) defaults to the record's, else to running the captured program with torch.
    Returns None when the final program agrees.
    """
    inputs = inputs if inputs is not None else record.example_inputs
    if inputs is None:
        raise ValueError("this record kept no inputs: pass the inputs to check on, e.g. record.bisect((x,))")
    inputs = tuple(inputs)
    if len(inputs) != len(record.inputs):
        raise ValueError(f"the captured graph takes {len(record.inputs)} inputs ({', '.join(record.inputs)}), "
                         f"got {len(inputs)}; sizes TorchDynamo made symbolic and a module's parameters count "
                         f"too: record.example_inputs has them in order")
    steps = [s for s in record.steps if s.program is not None]
    if reference is None:
        reference = record.reference
    if reference is None:
        reference = eager_reference(lambda *a: run_program(record.steps[0].program, a), inputs)
    checked: list[int] = []
    results: dict[int, Verification] = {}

    def check(k: int) -> bool:
        checked.append(steps[k].index)
        results[k] = verify(steps[k].program, inputs, reference)
        return results[k].ok

    if check(len(steps) - 1):
        return None
    lo, hi = -1, len(steps) - 1  # steps[lo] agrees (capture, by definition of the reference), steps[hi] does not
    if check(0):
        lo = 0
    else:
        hi = 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if check(mid):
            lo = mid
        else:
            hi = mid
    bad = steps[hi]
    v = results[hi]
    return Bisection(bad.index, bad.spec, v.detail or v.structural, checked)
