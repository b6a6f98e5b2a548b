"""Numerical verification: a program checked against eager PyTorch on real inputs, as an observer of the runner.

The runner checks each step's structure (``thunderlab.passes.runner``); ``NumericCheck`` is the observer
that also runs each step's program on copies of the inputs and compares values, dtypes, mutated inputs and
returned aliases with what eager PyTorch did. A compile with ``verify=True`` and a re-run hand it each step
as the pass finishes; bisection hands it a record's steps again, in order, and stops at the first it fails.
"""
from __future__ import annotations

import contextlib
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from thunderlab.core import amp
from thunderlab.core.program import Program
from thunderlab.core.symbols import tree_flatten
from thunderlab.executors.base import RunOptions, bind
from thunderlab.inspect.record import Step, Verification

from .runner import structure


def fresh_copies(inputs) -> tuple:
    """Copies of ``inputs`` to run a program on, keeping which of them share memory.

    A tensor passed twice stays one tensor, and views of one buffer stay views of one copy of it,
    so a program that writes through one of them sees the write through the others, as it did.
    """
    bases: dict = {}

    def copy(v):
        if not isinstance(v, torch.Tensor):
            return v
        base = v._base if v._base is not None else v
        key = id(base)
        if key not in bases:
            bases[key] = base.detach().clone()
        b = bases[key]
        return b if v is base else b.as_strided(v.size(), v.stride(), v.storage_offset())

    return tuple(copy(v) for v in inputs)


def run_program(program: Program, inputs, trace: str = "forward"):
    """Run one trace of ``program`` with its executors (torch where unclaimed; fusion regions call by call)."""
    fn = bind(program.traces[trace], options=RunOptions(eager_regions=True))
    with amp.off():  # a program holds the casts of the autocast it was captured in (see thunderlab.core.amp)
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


def eager_reference(fn, inputs, autocast: dict | None = None) -> Reference:
    """Run ``fn`` (eager PyTorch) on copies of ``inputs``, seeded as verification runs are.

    ``autocast`` is the ``torch.autocast`` to run it under (device type -> dtype, as a program captured under
    autocast keeps it in ``Program.boundary.autocast``); None runs it under the autocast in force now.
    """
    fresh = fresh_copies(inputs)
    with torch.no_grad(), seeded(), (amp.entered(autocast) if autocast is not None else contextlib.nullcontext()):
        out = fn(*fresh)
    return Reference(out, fresh)


def current_reference(captured: Program, inputs, eager=None, n_inputs: int | None = None) -> Reference:
    """Eager's outputs on ``inputs`` as they are now (copies), under the autocast ``captured`` was captured in.

    ``eager`` is the captured graph as PyTorch runs it (the first ``n_inputs`` inputs are its own; lifted
    constants follow); without it, ``captured`` itself is run with torch. A reference saved at compile time
    belongs to the inputs as they were then: a training step since (an optimizer's update of the parameters)
    or the call itself (a write into an input) changes them.
    """
    autocast = dict(captured.boundary.autocast)
    if eager is not None:
        return eager_reference(eager, inputs[:n_inputs], autocast)
    return eager_reference(lambda *a: run_program(captured, a), inputs, autocast)


# (rtol, atol) per dtype: torch.testing.assert_close's defaults (its documented table), and never
# tighter than FLOOR. Fused kernels reassociate float arithmetic, so float32/float64 outputs differ
# from eager's by more than assert_close's float32 rtol (1.3e-6) would allow on real models; half
# precision rounds every intermediate eager keeps, so it needs its own, wider, tolerance.
FLOOR = (1e-4, 1e-5)
ASSERT_CLOSE_TOLERANCES = {
    torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5), torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7), torch.complex32: (1e-3, 1e-5), torch.complex64: (1.3e-6, 1e-5),
    torch.complex128: (1e-7, 1e-7),
}


def tolerances(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) that verification compares outputs of ``dtype`` with."""
    rtol, atol = ASSERT_CLOSE_TOLERANCES.get(dtype, (0.0, 0.0))
    return max(rtol, FLOOR[0]), max(atol, FLOOR[1])


def compare(actual, expected, rtol: float | None = None, atol: float | None = None,
            what: str = "output") -> tuple[bool, float, str]:
    """(all close, max abs error, first mismatch) between two output structures.

    Tolerances default per dtype (see ``tolerances``); ``rtol``/``atol`` given apply to every output.
    """
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
                dr, da = tolerances(y.dtype)
                if not torch.allclose(xd, yd, rtol=dr if rtol is None else rtol, atol=da if atol is None else atol,
                                      equal_nan=True):
                    return False, worst, f"{what} {i}: max |err| {m:.3g}"
            elif not torch.equal(xd, yd):
                return False, worst, f"{what} {i}: values differ"
        elif x != y and not (isinstance(x, float) and x != x and y != y):
            return False, worst, f"{what} {i}: {x!r} vs eager {y!r}"
    return True, worst, ""


def numerics(program: Program, inputs, reference, views: list | None = None) -> Verification:
    """Run ``program`` on copies of ``inputs`` and compare with eager's ``reference`` (a ``Reference``, or its
    outputs alone): outputs, and with eager's inputs after the call, the inputs mutated and the returned aliases.

    ``views`` lists the outputs the runtime re-makes as views of inputs (default: the program's own ``input_views``;
    the runtime takes them from the captured program).
    """
    ref_out, ref_in = (reference.outputs, reference.inputs) if isinstance(reference, Reference) else (reference, None)
    fresh = fresh_copies(inputs)
    try:
        with torch.no_grad(), seeded():
            out = run_program(program, fresh)
        if program.training is not None:  # the forward also returns what backward saves
            out = out[0]
    except Exception as e:  # a program that fails to run is a failed verification, not a crash
        return Verification(False, detail=f"running the program raised {type(e).__name__}: {e}")
    ok, err, why = compare(out, ref_out)
    if ok and ref_in is not None:  # inputs the eager call mutated (lifted constants follow; eager has none)
        ok, err_in, why = compare(fresh[:len(ref_in)], ref_in, what="input (after the call)")
        err = max(err, err_in)
        if ok:  # which outputs are views of an input or of each other, as the runtime returns them
            from thunderlab.core.aliases import alias_change, alias_relations, remake_input_views

            views = program.boundary.input_views if views is None else views
            if views:
                out = remake_input_views(out, fresh, views)
            why = alias_change(alias_relations(out, fresh[:len(ref_in)]), alias_relations(ref_out, ref_in))
            ok = not why
    return Verification(ok, max_error=err, detail=why)


def verify(program: Program, inputs=None, reference=None, views: list | None = None) -> Verification:
    """Check every trace's structure and, given inputs and eager's outputs, the numerics (see ``numerics``)."""
    v = structure(program)
    if not v.ok or reference is None or inputs is None:
        return v
    return numerics(program, inputs, reference, views)


class NumericCheck:
    """An observer of the runner: checks each step's program against eager on ``inputs`` (see ``numerics``).

    A step whose structure the runner found wrong keeps that verdict, and a step with no program (its pass
    failed) is passed over. With ``annotate`` each verdict becomes the step's ``verification``; either way
    ``verdicts`` keeps them by step, ``checked`` lists the steps whose program was run (a pass that returned
    its input gets its input's verdict) and ``failed`` is the first step that failed.
    """

    def __init__(self, inputs, reference, views: list | None = None, *, annotate: bool = True):
        self.inputs = tuple(inputs)
        self.reference = reference
        self.views = views
        self.annotate = annotate
        self.verdicts: dict[int, Verification] = {}
        self.checked: list[int] = []
        self.failed: Step | None = None
        self._last: tuple[Program, Verification] | None = None
        self.stopped = False  # a pass changed what the program takes (fsdp's shards): the inputs no longer fit

    def __call__(self, step: Step) -> None:
        if step.program is None:
            return
        if self.stopped or getattr(step.pass_type, "changes_inputs", False):
            self.stopped = True  # this step and every later one keep the runner's structural verdict
            return
        v = step.verification
        if v is not None and v.structural != "ok":
            verdict = v
        elif self._last is not None and step.program is self._last[0]:
            verdict = self._last[1]
        else:
            self.checked.append(step.index)
            verdict = numerics(step.program, self.inputs, self.reference, self.views)
        self._last = (step.program, verdict)
        self.verdicts[step.index] = verdict
        if not verdict.ok and self.failed is None:
            self.failed = step
        if self.annotate:
            step.verification = verdict
