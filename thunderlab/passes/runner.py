"""Running a pipeline: one observer hook between passes; verification after each pass."""
from __future__ import annotations

import contextlib
import gc
import time
import traceback
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from thunderlab.core import amp
from thunderlab.core.program import Program
from thunderlab.core.symbols import tree_flatten
from thunderlab.core.verify import VerificationError, check_program, check_trace
from thunderlab.executors.base import bind
from thunderlab.inspect.record import Step, Verification

from .base import Pipeline

Observer = Callable[[Step], None]


class PassMutatedInput(RuntimeError):
    """A pass changed the program it was given instead of returning a new one."""


def _mark_origins(before: Program | None, after: Program, origin: str) -> None:
    """Name the pass in every bound symbol it created or rewrote (the runner's job, not the pass's)."""
    old = {id(b) for t in before for b in t.bound_symbols} if before is not None else set()
    for t in after:
        for i, b in enumerate(t.bound_symbols):
            if id(b) not in old and b.origin is None:
                t.bound_symbols[i] = b.replace(origin=origin)


class _Snapshot:
    """What a pass may not change in the program it is given: the traces and each one's calls, inputs, output, facts.

    Taken before a pass runs, compared by identity after it returns (cheap: no copies of calls),
    and used to put back an input the pass changed, so earlier steps of a record stay as they were.
    """

    def __init__(self, program: Program):
        self.program = program
        self.traces = dict(program.traces)
        self.parts = {n: (list(t.bound_symbols), list(t.inputs), t.output, tree_flatten(t.output), dict(t.meta))
                      for n, t in program.traces.items()}

    def changes(self) -> list[str]:
        """What differs now, in words; empty when the program is as it was."""
        found = []
        if self.program.traces.keys() != self.traces.keys() or any(
                self.program.traces[n] is not t for n, t in self.traces.items()):
            found.append(f"its traces ({', '.join(self.traces)} became {', '.join(self.program.traces)})")
        for n, t in self.traces.items():
            calls, inputs, output, leaves, meta = self.parts[n]
            if len(t.bound_symbols) != len(calls) or any(a is not b for a, b in zip(t.bound_symbols, calls)):
                found.append(f"trace {n!r}'s calls ({len(calls)} became {len(t.bound_symbols)}, or were replaced)")
            if len(t.inputs) != len(inputs) or any(a is not b for a, b in zip(t.inputs, inputs)):
                found.append(f"trace {n!r}'s inputs")
            now = tree_flatten(t.output)
            if t.output is not output or len(now) != len(leaves) or any(a is not b for a, b in zip(now, leaves)):
                found.append(f"trace {n!r}'s output")
            if t.meta.keys() != meta.keys() or any(t.meta[k] is not v for k, v in meta.items()):
                found.append(f"trace {n!r}'s meta")
        return found

    def restore(self) -> None:
        self.program.traces.clear()
        self.program.traces.update(self.traces)
        for n, t in self.traces.items():
            calls, inputs, output, _, meta = self.parts[n]
            t.bound_symbols[:] = calls
            t.inputs[:] = inputs
            t.output = output
            t.meta.clear()
            t.meta.update(meta)


_PLAIN = (int, float, complex, str, bool, type(None))


def _same_value(a, b) -> bool:
    """``a`` and ``b`` hold the same objects (containers compared element by element, plain constants by value)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_value(a[k], b[k]) for k in a)
    return isinstance(a, _PLAIN) and a == b


def _share_unchanged(before: Program, after: Program) -> Program:
    """``after`` with the previous step's trace wherever the pass returned one with the same calls, inputs,
    output and facts, or ``before`` itself when every trace is so: a record keeps every step's program, and
    most passes leave most traces as they were."""
    for name, t in after.traces.items():
        old = before.traces.get(name)
        if old is None or old is t or old.name != t.name or old.grad_enabled != t.grad_enabled:
            continue
        if (_same_value(old.bound_symbols, t.bound_symbols) and _same_value(old.inputs, t.inputs)
                and _same_value(old.output, t.output) and _same_value(old.meta, t.meta)):
            after.traces[name] = old
    if (after.traces.keys() == before.traces.keys() and after.training == before.training
            and all(after.traces[n] is t for n, t in before.traces.items())):
        return before
    return after


def signature(program: Program) -> tuple[list, list]:
    """The program's interface to its caller: each input's name and type, and each user-visible output's type."""
    fw = program.forward
    out = program.outputs
    inputs = [(getattr(i, "name", None), i.type_string()) for i in fw.inputs]
    outputs = [v.type_string() if hasattr(v, "type_string") else type(v).__name__ for v in tree_flatten(out)]
    return inputs, outputs


def signature_change(before: tuple[list, list], after: tuple[list, list]) -> str:
    """How a pass changed the program's interface, in words; "" when it did not."""
    (ins_a, outs_a), (ins_b, outs_b) = before, after
    if ins_a != ins_b:
        gone = [n for n, _ in ins_a if n not in {m for m, _ in ins_b}]
        if gone:
            return f"the program's inputs changed: {', '.join(gone)} dropped (a pass must keep every input)"
        return f"the program's inputs changed from {ins_a} to {ins_b}"
    if len(outs_a) != len(outs_b):
        return f"the program returns {len(outs_b)} values, the captured program {len(outs_a)}"
    for i, (a, b) in enumerate(zip(outs_a, outs_b)):
        if a != b:
            return f"output {i} is {b}, the captured program's is {a}"
    return ""


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
    fn = bind(program.traces[trace], options={"eager_regions": True})
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
    autocast keeps it in ``trace.meta["autocast"]``); None runs it under the autocast in force now.
    """
    fresh = fresh_copies(inputs)
    with torch.no_grad(), seeded(), (amp.entered(autocast) if autocast is not None else contextlib.nullcontext()):
        out = fn(*fresh)
    return Reference(out, fresh)


def current_reference(record, inputs) -> Reference:
    """Eager's outputs on ``inputs`` as they are now (copies), under the autocast the record was captured in.

    A reference saved at compile time belongs to the inputs as they were then: a training step since
    (an optimizer's update of the parameters) or the call itself (a write into an input) changes them.
    """
    captured = record.steps[0].program.forward
    autocast = captured.meta.get("autocast", {})
    if record.eager is not None:
        n = len(record.inputs)  # lifted constants follow the graph's own inputs: eager uses its own
        return eager_reference(record.eager, inputs[:n], autocast)
    return eager_reference(lambda *a: run_program(record.steps[0].program, a), inputs, autocast)


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


def verify(program: Program, inputs=None, reference=None, checked: dict | None = None,
           views: list | None = None) -> Verification:
    """Check every trace's structure and, given inputs and eager outputs, the forward numerics.

    With eager's inputs after the call (a ``Reference``), the inputs the program mutated and the
    returned aliases (which outputs share memory with an input or with another output) are compared too.
    ``checked`` carries the calls whose metadata earlier steps re-derived (see ``check_trace``);
    ``views`` lists the outputs the runtime re-makes as views of inputs (default: the program's own
    ``input_views``; the runtime takes them from the captured program).
    """
    try:
        for t in program:
            check_trace(t, checked=checked)
        check_program(program)
    except VerificationError as e:
        return Verification(False, str(e), detail=str(e))
    if reference is None or inputs is None:
        return Verification(True)
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

            views = program.forward.meta.get("input_views") if views is None else views
            if views:
                out = remake_input_views(out, fresh, views)
            why = alias_change(alias_relations(out, fresh[:len(ref_in)]), alias_relations(ref_out, ref_in))
            ok = not why
    return Verification(ok, max_error=err, detail=why)


def run_pipeline(program: Program, pipeline: str | Pipeline, *, observer: Observer | None = None,
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
    interface = signature(program)
    views = program.forward.meta.get("input_views") if "forward" in program.traces else None
    for offset, spec in enumerate(specs):
        index = first_index + offset
        before = current.count()
        t0 = time.perf_counter()
        p, doing = None, "setting up"
        snapshot = _Snapshot(current)
        try:  # the pass's own code runs in each of these: a user pass that raises anywhere is named
            p = spec.instantiate().in_pipeline(tuple(specs[offset + 1:]))
            doing = "running"
            nxt = p(current)
            changed = snapshot.changes()
            if changed:
                snapshot.restore()  # earlier steps share these objects: they must read as they did
                raise PassMutatedInput(f"it changed the program it was given ({'; '.join(changed)}); a pass must "
                                       f"return a new Program and leave its input as it was (use trace.derive(...) "
                                       f"or program.map(...))")
            if not isinstance(nxt, Program):
                raise TypeError(f"returned {type(nxt).__name__}, not a Program")
            seconds = time.perf_counter() - t0
            _mark_origins(current, nxt, spec.name)
            nxt = _share_unchanged(current, nxt)
            doing = "describing its result"
            notes = p.describe(current, nxt)
            resolved = repr(p)
        except KeyboardInterrupt:  # the user stopped it: say so in the record, then let it stop the caller
            if snapshot.changes():
                snapshot.restore()
            step = Step(index, str(spec), time.perf_counter() - t0, None, before, before,
                        error=f"pass {spec.name!r} (step {index}) was interrupted (KeyboardInterrupt) while {doing}")
            steps.append(step)
            if observer:
                observer(step)
            raise
        except Exception as e:
            seconds = time.perf_counter() - t0
            msg = f"pass {spec.name!r} (step {index}) raised {type(e).__name__} while {doing}: {e}"
            step = Step(index, str(spec), seconds, None, before, before, error=msg,
                        notes={"traceback": traceback.format_exc()}, pass_type=type(p) if p is not None else None)
            steps.append(step)
            if observer:
                observer(step)
            return steps, current, msg
        try:  # the interface is read through the training contract: check that first
            check_program(nxt)
            moved = signature_change(interface, signature(nxt))
        except VerificationError as e:
            moved = str(e)
        ver = Verification(False, moved, detail=moved) if moved else verify(nxt, inputs, reference, checked, views)
        step = Step(index, str(spec), seconds, nxt, before, nxt.count(), ver, notes=notes,
                    pass_type=type(p), resolved=resolved)
        steps.append(step)
        if observer:
            observer(step)
        current = nxt
    return steps, current, None


@dataclass
class Bisection:
    """Where the program first left eager's meaning (values, mutated inputs, returned aliases): the step, its pass,
    the first difference, and the steps run to find it."""

    step: int
    spec: str
    detail: str
    checked: list[int]

    def __str__(self) -> str:
        return (f"pass {self.spec!r} (step {self.step}) is the first to differ from eager: {self.detail} "
                f"(checked steps {', '.join(map(str, self.checked))})")


def bisect(record, inputs=None, reference=None) -> Bisection | None:
    """The first of a record's steps whose program disagrees with eager (values, mutated inputs, aliases).

    ``inputs`` are the captured graph's inputs, in ``record.inputs`` order; they default to the inputs the record
    was compiled for; ``reference`` (the eager outputs) defaults to the record's, else to running the captured
    program with torch (both on copies of the inputs as they are now, under the autocast of the capture).
    Returns None when every step agrees.
    """
    inputs = inputs if inputs is not None else record.example_inputs
    if inputs is None:
        raise ValueError("this record's inputs are gone (records hold tensors weakly, so that they never keep data or "
                         "parameters alive): pass the inputs to check on, e.g. record.bisect((x,)), or compile with "
                         "thunderlab.jit(..., keep_inputs=True)")
    inputs = tuple(inputs)
    if len(inputs) != len(record.inputs):
        raise ValueError(f"the captured graph takes {len(record.inputs)} inputs ({', '.join(record.inputs)}), "
                         f"got {len(inputs)}; sizes TorchDynamo made symbolic and a module's parameters count "
                         f"too: record.example_inputs has them in order")
    steps = [s for s in record.steps if s.program is not None]
    if reference is None:
        reference = current_reference(record, inputs)
    checked: list[int] = []
    views = steps[0].program.forward.meta.get("input_views") if steps else None  # the runtime re-makes these
    # every step in order, not a binary search: a pass can break a program that a later pass repairs (dce
    # dropping what was wrong), and the answer must be the step a re-run's verification would blame first
    last: tuple[Program, Verification] | None = None
    for bad in steps:
        if last is not None and bad.program is last[0]:  # the pass returned its input: the same answer
            v = last[1]
        else:
            checked.append(bad.index)
            v = verify(bad.program, inputs, reference, views=views)
        last = (bad.program, v)
        if not v.ok:
            break
    else:
        return None
    return Bisection(bad.index, bad.spec, v.detail or v.structural, checked)
