"""Structural checks of a trace: SSA, every value defined before use, metadata consistent."""
from __future__ import annotations

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
    for k, b in enumerate(trace.bound_symbols):
        where = f"{trace.name}: statement {k} ({b.sym.qualname}, id {b.id})"
        for p in b.inputs:
            if p.name in deleted:
                raise VerificationError(f"{where} uses {p.name} after it was deleted")
            d = defined.get(p.name)
            if d is None:
                raise VerificationError(f"{where} uses {p.name} before it is defined")
            if d is not p and (d.shape, d.dtype) != (p.shape, p.dtype):
                raise VerificationError(f"{where}: {p.name} is used as {p.type_string()} but defined as {d.type_string()}")
        if b.sym.name == "python_del":
            deleted.update(p.name for p in b.inputs)
            continue
        for p in b.outputs:
            if p.name in defined:
                raise VerificationError(f"{where} defines {p.name} a second time (not SSA)")
            defined[p.name] = p
        if metas and b.sym.meta is not None and not b.sym.random:
            if b.meta_ok:
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
            raise VerificationError(f"{where}: {o.name} is recorded as {o.type_string()} but its inputs give {n.type_string()}")
