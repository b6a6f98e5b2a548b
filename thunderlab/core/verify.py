"""Structural checks: a trace is SSA with every value defined before use and metadata consistent; a training
program's forward and backward keep their contract."""
from __future__ import annotations

from . import fastpaths
from .program import Program
from .proxies import TensorProxy
from .symbols import proxies_in
from .trace import ScalarInput, Trace


class VerificationError(Exception):
    """A trace is malformed; the message names the bound symbol and the value."""


def check_trace(trace: Trace, *, metas: bool = True, checked: dict | None = None) -> None:
    """Raise VerificationError if ``trace`` is not well formed.

    Calls whose outputs their meta function produced (``meta_ok``: what tracing records) are
    not re-derived. ``checked`` holds calls whose metadata was already re-derived: a call with the same symbol
    and the very same argument and output objects (as a call a pass only re-labelled, e.g. with
    its executor), whose inputs still match their definitions (checked here for every call),
    needs no second meta run. Calls checked now are added to it.
    """
    defined: dict[str, TensorProxy] = {}
    for i in trace.inputs:
        if i.name in defined:
            raise VerificationError(f"{trace.name}: input {i.name} is declared twice")
        if isinstance(i, TensorProxy):
            defined[i.name] = i
        elif not isinstance(i, ScalarInput):
            raise VerificationError(f"{trace.name}: input {i!r} is neither a tensor nor a scalar")
    deleted: set[str] = set()
    fast = fastpaths.enabled()
    if not fast:  # the plain path: every call's metadata derived again
        checked = None
    for k, b in enumerate(trace.bound_symbols):
        where = f"{trace.name}: statement {k} ({b.sym.qualname}, id {b.id})"
        for p in b.inputs:
            if p.name in deleted:
                raise VerificationError(f"{where} uses {p.name} after it was deleted")
            d = defined.get(p.name)
            if d is None:
                raise VerificationError(f"{where} uses {p.name} before it is defined")
            if d is not p and (d.shape, d.dtype) != (p.shape, p.dtype):
                raise VerificationError(
                    f"{where}: {p.name} is used as {p.type_string()} but defined as {d.type_string()}"
                )
        if b.sym.bookkeeping:
            deleted.update(p.name for p in b.inputs)
            continue
        for p in b.outputs:
            if p.name in defined:
                raise VerificationError(f"{where} defines {p.name} a second time (not SSA)")
            defined[p.name] = p
        if metas and b.sym.meta is not None and not b.random:
            if b.meta_ok and fast:
                continue
            key = b.meta_key()
            if checked is not None and key in checked:
                continue
            _check_meta(where, b)
            if checked is not None:
                checked[key] = b  # keeps the objects alive, so their ids stay theirs
    for p in trace.output_proxies():
        if p.name not in defined:
            raise VerificationError(f"{trace.name}: returns {p.name}, which is never defined")
        if p.name in deleted:
            raise VerificationError(f"{trace.name}: returns {p.name}, which was deleted")


def _check_meta(where, b) -> None:
    """Recompute the outputs' metadata from the inputs (as tracing did) and compare."""
    scratch = Trace("scratch")
    with scratch.active():
        try:
            out = scratch.bind(b.sym, b.args, b.kwargs)
        except Exception as e:  # a meta that no longer accepts its inputs is the finding
            raise VerificationError(f"{where}: its meta function rejects its inputs: {e}") from None
    new, old = proxies_in(out), b.outputs
    if len(new) != len(old):
        raise VerificationError(f"{where}: meta gives {len(new)} outputs, the trace records {len(old)}")
    for n, o in zip(new, old):
        if (n.shape, n.dtype) != (o.shape, o.dtype):
            raise VerificationError(
                f"{where}: {o.name} is recorded as {o.type_string()} but its inputs give {n.type_string()}"
            )


def check_program(program: Program) -> None:
    """Raise VerificationError unless a training program's traces keep their contract (see ``Training``)."""
    tr, bw = program.training, program.traces.get("backward")
    if tr is None:
        if bw is not None:
            raise VerificationError("the program has a backward trace but no training contract (Program.training); "
                                    "build programs with program.map(...) or dataclasses.replace(program, traces=...)")
        return
    if bw is None:
        raise VerificationError("the program has a training contract (Program.training) but no backward trace")
    fw = program.forward
    if not (isinstance(fw.output, tuple) and len(fw.output) == 2 and isinstance(fw.output[1], (tuple, list))):
        raise VerificationError("forward: a training forward returns (outputs, saved); it returns "
                                f"{type(fw.output).__name__}")
    out, saved = fw.output
    n_saved, n_grads = len(tr.saved), len(tr.grad_of)
    if len(saved) != n_saved:
        raise VerificationError(f"forward: saves {len(saved)} values for backward; the training contract says "
                                f"{n_saved} ({', '.join(tr.saved) or 'none'})")
    if len(bw.inputs) != n_saved + n_grads:
        raise VerificationError(f"backward: takes {len(bw.inputs)} inputs; the training contract says {n_saved} saved "
                                f"values then {n_grads} gradients")
    for k, (f, b) in enumerate(zip(saved, bw.inputs)):
        if not isinstance(f, TensorProxy) or not isinstance(b, TensorProxy):
            raise VerificationError(f"saved value {k}: forward and backward must pass a tensor, got {f!r} and {b!r}")
        if b.name != tr.saved[k]:
            raise VerificationError(f"backward: input {k} is {b.name}; the training contract saves {tr.saved[k]} there")
        if (f.shape, f.dtype) != (b.shape, b.dtype):
            raise VerificationError(f"saved value {k}: forward returns {f.name} as {f.type_string()}, backward takes "
                                    f"{b.name} as {b.type_string()}")
    outputs = {p.name: p for p in proxies_in(out)}
    for name, g in zip(tr.grad_of, bw.inputs[n_saved:]):
        p = outputs.get(name)
        if p is None:
            raise VerificationError(f"backward takes the gradient of {name}, which the forward does not return")
        if not isinstance(g, TensorProxy) or g.shape != p.shape:
            raise VerificationError(f"backward: the gradient of {name} ({p.type_string()}) comes in as {g!r}")
    n_in = len(fw.tensor_inputs())
    if not isinstance(bw.output, tuple) or len(bw.output) != n_in:
        got = len(bw.output) if isinstance(bw.output, tuple) else type(bw.output).__name__
        raise VerificationError(f"backward: returns {got} gradients; the forward has {n_in} tensor inputs")
