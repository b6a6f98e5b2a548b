"""The live part of a compile record: what runs or checks its program, kept here by the record's uid.

A ``CompileRecord`` is data (``thunderlab.inspect.record``): steps, programs, notes, a snapshot of its
regions. What only this process has lives in its ``Session``: the inputs it was compiled for (held
weakly unless asked), the captured graph as PyTorch runs it (eager, the reference of checks), eager's
outputs, the fusion regions' runners and the compiled program. A record loaded from a file, or one whose
function was dropped, has no session; the verbs that need one raise ``NotLive`` saying what they need.
"""
from __future__ import annotations

import weakref
from typing import Any

import torch

from thunderlab.executors.communication import CommunicationTimer


class NotLive(RuntimeError):
    """A verb that runs code was asked of a record with no live session (loaded from a file, or its function
    dropped); the message names the verb, what it needs and what would make it work."""


class HeldInputs:
    """The inputs a record was compiled for: tensors held weakly unless ``strong``, other values as they are.

    A record must not keep a model's parameters or a batch of data alive after the user let go of
    them; checks that need the inputs (bisection, timing a re-run) take them while they live,
    or are given inputs, or the function is compiled with ``keep_inputs=True``.
    """

    __slots__ = ("_refs", "strong")

    def __init__(self, values, strong: bool = False):
        self.strong = strong
        self._refs = tuple(v if strong or not isinstance(v, torch.Tensor) else weakref.ref(v) for v in values)

    def get(self) -> tuple | None:
        """The inputs, or None once any tensor among them has been freed."""
        out = []
        for r in self._refs:
            if isinstance(r, weakref.ref):
                r = r()
                if r is None:
                    return None
            out.append(r)
        return tuple(out)

    def alive(self) -> bool:
        return self.get() is not None


class Session:
    """What runs and checks one record's program in this process (see the module's docstring)."""

    __slots__ = ("uid", "family", "held", "eager", "reference", "regions", "communication", "runner", "_record",
                 "__weakref__")

    def __init__(self, record, *, family: int | None = None, held: HeldInputs | None = None, eager=None,
                 reference=None):
        self.uid = record.uid
        # the uid of the compile this session's program came from: re-runs share it, and let go with it
        self.family = record.uid if family is None else family
        self.held = held
        self.eager = eager  # the captured graph run by PyTorch itself: the reference of bisection and re-runs
        self.reference: Any = reference  # eager's outputs on the inputs, when the function verifies
        self.regions: dict = {}  # name -> the runner of each fusion region (filled when the program is bound)
        # times the program's collectives when compiled with timing on (communication, beside the regions' compute);
        # None otherwise: most sessions never time, and one lives as long as each compiled function
        self.communication: CommunicationTimer | None = None
        self.runner = None  # the compiled program (all inputs, lifted ones included); None until bound
        self._record = weakref.ref(record)  # to write region snapshots into; never keeps the record alive

    @property
    def example_inputs(self) -> tuple | None:
        """The inputs the record was compiled for, while they are alive (see ``HeldInputs``); else None."""
        return self.held.get() if self.held is not None else None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every region's fused kernel is compiled (or failed); True if all are ready."""
        done = all(r.wait(timeout) for r in self.regions.values())
        self.refresh()
        return done

    def timings(self) -> dict:
        """Per fusion region, as it runs now: which version, when it switched, count/median/min per version, and its
        race (the versions' times, the winner and why)."""
        self.refresh()
        return {name: r.summary() for name, r in self.regions.items()}

    def snapshot(self) -> dict[str, dict]:
        """The regions as plain data (``CompileRecord.regions``): the payload's fields (the race's among them), and the
        device and compile seconds."""
        out = {}
        for name, r in self.regions.items():
            s = r.summary()
            code = getattr(r, "source", None)
            if isinstance(code, (list, tuple)):
                code = "\n\n".join(code) or None
            out[name] = {"executor": s["executor"], "version": s["running"], "error": s["error"],
                         "history": [list(h) for h in s["history"]],
                         "timings": {v: dict(t) for v, t in s["timings"].items()}, "code": code,
                         "device": s["device"], "compile_seconds": s["compile_seconds"]}
            if s.get("race") is not None:
                out[name]["race"] = s["race"]
            if s.get("layouts") is not None:
                out[name]["layouts"] = s["layouts"]
            if s.get("gemm"):
                out[name]["gemm"] = s["gemm"]
        return out

    def refresh(self) -> None:
        """Write the regions' state now into the record's snapshot (when the record is still alive)."""
        record = self._record()
        if record is not None and self.regions:
            record.regions = self.snapshot()
        if record is not None and self.communication is not None and self.communication.in_flight:
            record.communication = self.communication.stats()

    def release(self) -> None:
        """Let go of the compiled program, the regions' kernels, the captured graph and eager's outputs; the
        record keeps its last snapshot of the regions."""
        self.refresh()
        for region in self.regions.values():
            region.release()
        self.runner = self.eager = self.reference = self.held = None


GONE = ("the inputs this record was compiled for are gone (records hold tensors weakly, so that they never keep "
        "data or parameters alive); pass the inputs to use, or compile with thunderlab.jit(..., keep_inputs=True)")

# uid -> the session of a record made in this process; a session goes with its record (or with its function)
_SESSIONS: dict[int, Session] = {}


def open_session(record, **parts) -> Session:
    """Start the live session of ``record`` (a record made in this process); ``parts`` as ``Session`` takes them."""
    s = Session(record, **parts)
    _SESSIONS[record.uid] = s
    weakref.finalize(record, _SESSIONS.pop, record.uid, None)
    return s


def session_of(record) -> Session | None:
    """The live session of ``record``, or None (loaded from a file, its function dropped, or made by hand)."""
    return _SESSIONS.get(record.uid)


def sessions() -> list[Session]:
    return list(_SESSIONS.values())


def end(session: Session) -> None:
    """Release ``session`` and forget it: its record has no live part from now on."""
    session.release()
    _SESSIONS.pop(session.uid, None)


def live(record, verb: str, needs: str, instead: str = "") -> Session:
    """``record``'s session, or ``NotLive``: ``verb`` needs ``needs``, and what would make it work."""
    s = session_of(record)
    if s is not None:
        return s
    if record.loaded:
        why = (f"record {record.name!r} was loaded from {record.source_file or 'a file'}, which keeps its programs' "
               f"text only")
    else:
        why = (f"record {record.name!r} has no live session in this process (the function it was compiled from "
               f"was dropped, or the record was made by hand)")
    fix = "compile the function again with thunderlab.jit and call it, then use the new record"
    raise NotLive(f"{verb} needs {needs}, and {why}; {fix}" + (f", or {instead}" if instead else ""))


def refresh(records) -> None:
    """Bring each live record's region snapshot up to date (records without a session keep theirs)."""
    for r in records:
        s = _SESSIONS.get(r.uid)
        if s is not None:
            s.refresh()
