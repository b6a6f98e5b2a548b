"""The kernel side of the JupyterLab sidebar: a Jupyter comm named ``thunderlab``.

Importing thunderlab inside an IPython kernel (or ``%load_ext thunderlab``) calls ``start()``:
it registers the comm target (so a sidebar can open the link) and opens a comm itself (so a
sidebar that is already listening hears of it at once). ``Handler`` answers the requests
declared in ``thunderlab.jupyter.protocol`` and pushes a ``record.new`` event for every new
compile record, throttled ``timings`` events while a subscribed record runs, and throttled
``record.update`` events (a row again) while a graph runs calls as captured. It is plain Python,
tested without a kernel.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

from thunderlab.executors import region as _region
from thunderlab.inspect.serialize import RecordPayload, jsonable
from thunderlab.runtime import compiled as _compiled
from thunderlab.runtime.session import refresh

from .protocol import VERSION, ProtocolError, check

TARGET = "thunderlab"
PUSH_EVERY_S = 0.25  # at most four timing updates a second


def _row(i: int, r, as_captured: dict[int, int] | None = None) -> dict:
    """A record's row in the sidebar's list. ``as_captured`` (``compiled.ran_as_captured()``): the calls its graph
    ran as TorchDynamo captured it, on the graph's newest record."""
    return {"record": i, "name": r.name, "created": r.created, "pipeline": r.pipeline, "steps": r.step_count,
            "error": r.error, "graph": r.graph_index, "inputs": list(r.inputs), "reused": r.reused,
            "origin": _origin(r),
            "as_captured": (as_captured if as_captured is not None else _compiled.ran_as_captured()).get(r.uid, 0)}


def _origin(r) -> dict | None:
    """Where the record's graph came from, for its row: the capture step's summary and what made the graph (it ends
    at a graph break, resumes after one, was compiled again); None when the capture step says nothing of it."""
    notes = r.origin  # read without unpacking a packed record's steps: a list of records reads every row
    if notes is None or not notes.summary:
        return None
    return {"summary": notes.summary, "graph_break": "graph_break" in notes, "resumed": "resumes_after_line" in notes,
            "recompiled": "recompiled_because" in notes}


def _timings(i: int, r) -> dict:
    refresh([r])
    return {"record": i, "regions": {n: {"executor": s["executor"], "version": s["version"],
                                         "device": s.get("device", "cpu"), "timings": jsonable(s["timings"]),
                                         "race": jsonable(s.get("race")), "layouts": jsonable(s.get("layouts")),
                                         "gemm": jsonable(s.get("gemm"))}
                                     for n, s in r.regions.items()},
            "communication": jsonable(r.communication)}


class Handler:
    """Answers sidebar requests; ``send`` delivers replies and events to the browser."""

    def __init__(self, send: Callable[[dict], None]):
        self.send = send
        self.payloads: dict[int, RecordPayload] = {}
        self.subscribed: int | None = None
        self._last_push = 0.0
        self._last_captured = -PUSH_EVERY_S
        self._captured: dict = {}  # uid -> (record, count): the rows pushed next (see on_captured)
        self._captured_timer: threading.Timer | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ requests
    def handle(self, msg) -> dict:
        """The reply to one request (an ``error`` reply for an invalid one); also sent."""
        mid = msg.get("id") if isinstance(msg, dict) else None
        try:
            kind, mid, fields = check(msg)
            body = getattr(self, "_" + kind.replace(".", "_"))(**fields)
            reply = {"v": VERSION, "type": kind + ".reply", "reply_to": mid, **body}
        except ProtocolError as e:
            reply = {"v": VERSION, "type": "error", "reply_to": mid if type(mid) is int else None, "error": str(e)}
        except Exception as e:  # a failing pass or re-run: said in the sidebar, the kernel keeps going
            reply = {"v": VERSION, "type": "error", "reply_to": mid, "error": f"{type(e).__name__}: {e}"}
        self.send(reply)
        return reply

    def _record(self, i: int):
        """The record with id ``i`` (ids stay fixed while the oldest records are let go)."""
        recs = _compiled.all_records()
        found = next((r for r in reversed(recs) if r.uid == i), None)
        if found is None:
            kept = f"it keeps records {recs[0].uid}..{recs[-1].uid}" if recs else "nothing has been compiled yet"
            raise ProtocolError(
                f"no record {i} in this kernel ({kept}; the oldest are let go, see thunderlab.set_limits)"
            )
        refresh([found])  # its regions as they run now
        return found

    def _payload(self, i: int) -> RecordPayload:
        r = self._record(i)
        p = self.payloads.get(i)
        if p is None or p.record is not r:
            live = {x.uid for x in _compiled.all_records()}
            for gone in [k for k in self.payloads if k not in live]:
                del self.payloads[gone]
            p = self.payloads[i] = RecordPayload(r)
        return p

    def _hello(self) -> dict:
        from thunderlab.version import __version__

        return {"protocol": VERSION, "thunderlab": __version__, "records": len(_compiled.all_records())}

    def _records_list(self, offset: int = 0, limit: int = 50, filter: str = "") -> dict:
        recs = [(r.uid, r) for r in reversed(_compiled.all_records())]  # newest first
        if filter:
            recs = [(i, r) for i, r in recs if filter.lower() in r.name.lower()]
        captured = _compiled.ran_as_captured()
        return {"total": len(recs), "offset": offset,
                "records": [_row(i, r, captured) for i, r in recs[offset:offset + limit]]}

    def _record_summary(self, record: int) -> dict:
        return {"record": record, "payload": self._payload(record).summary()}

    def _step_traces(self, record: int, step: int) -> dict:
        p = self._payload(record)
        n = len(p.record.steps)
        if not 0 <= step < n:
            raise ProtocolError(f"no step {step} in record {record}: it has steps 0..{n - 1}")
        return {"record": record, "step": step, "traces": p.traces(step)}

    def _pipeline_validate(self, pipeline: str) -> dict:
        from thunderlab.passes import Pipeline, PipelineError

        try:
            parsed = Pipeline.parse(pipeline)
        except PipelineError as e:
            return {"ok": False, "error": str(e), "pipeline": pipeline}
        return {"ok": True, "error": None, "pipeline": str(parsed)}

    def _record_rerun(self, record: int, pipeline: str) -> dict:
        from thunderlab.verbs import rerun

        new = rerun(self._record(record), pipeline)  # announces itself as record.new
        return {"record": new.uid, "from": record}

    def _passes_list(self) -> dict:
        from thunderlab.passes import REGISTRY

        out = []
        for name, cls in sorted(REGISTRY.items()):
            opts = {k: {"type": t, "default": jsonable(d)} for k, (t, d) in cls.options().items()}
            out.append({"name": name, "summary": cls.summary(), "options": opts, "requires": list(cls.requires),
                        "last": cls.last, "module": cls.__module__})
        return {"passes": out}

    def _records_compare(self, a: int, b: int, time: bool = False) -> dict:
        from thunderlab.verbs import compare

        ra, rb = self._record(a), self._record(b)
        c = compare(ra, rb, time=time)
        return {"a": a, "b": b, "program_diff": c.program_diff, "symbols": list(c.symbols), "regions": list(c.regions),
                "seconds": list(c.seconds) if c.seconds else None, "note": c.note,
                "steps": [{"index": i, "a": sa, "a_ms": ma, "b": sb, "b_ms": mb} for i, sa, ma, sb, mb in c.steps],
                # each pipeline's own steps (a step b took over unchanged from a is marked shared), and the
                # final programs with their calls, for a side-by-side diff by stable call id
                "a_steps": [{"index": s.index, "spec": s.spec, "ms": s.ms, "shared": False} for s in ra.steps],
                "b_steps": [{"index": s.index, "spec": s.spec, "ms": s.ms, "shared": any(s is t for t in ra.steps)}
                            for s in rb.steps],
                "programs": {"a": self._final_programs(a), "b": self._final_programs(b)}}

    def _final_programs(self, i: int) -> dict:
        p = self._payload(i)
        last = max(s.index for s in p.record.steps if s.program is not None)
        return {name: {"program": t["program"], "calls": t["calls"]} for name, t in p.traces(last).items()}

    def _record_profile(self, record: int) -> dict:
        from thunderlab.runtime.profile import profile_record

        r = self._record(record)
        kernels = profile_record(r)
        refresh([r])
        return {"record": record, "kernels": jsonable(kernels),
                "versions": {n: rr["version"] for n, rr in r.regions.items()}}

    def _timings_subscribe(self, record: int | None = None) -> dict:
        if record is None:
            self.subscribed = None
            return {"record": None}
        r = self._record(record)
        self.subscribed = record
        return _timings(record, r)

    # ------------------------------------------------------------------ events
    def on_record(self, record) -> None:
        if any(r is record for r in _compiled.all_records()):
            self.payloads.pop(record.uid, None)
            self.send({"v": VERSION, "type": "record.new", **_row(record.uid, record)})

    def on_captured(self, record, count: int) -> None:
        """A graph ran a call as captured (``count`` such calls), or the count moved to a newer record (0): the
        record's row again. At most four pushes a second; what comes inside the quarter second after a push is
        pushed at its end, from a timer's thread, each record's latest count (so the last count shown is the last)."""
        with self._lock:
            self._captured[record.uid] = (record, count)
            wait = PUSH_EVERY_S - (time.monotonic() - self._last_captured)
            if wait > 0:
                if self._captured_timer is None:
                    self._captured_timer = threading.Timer(wait, self._push_captured)
                    self._captured_timer.daemon = True
                    self._captured_timer.start()
                return
        self._push_captured()

    def _push_captured(self) -> None:
        with self._lock:
            self._captured_timer = None
            pending, self._captured = self._captured, {}
            self._last_captured = time.monotonic()
            kept = {id(r) for r in tuple(_compiled.all_records())}  # a copy: the calls' thread may add records
            for uid, (record, count) in pending.items():
                if id(record) in kept:
                    self.send({"v": VERSION, "type": "record.update", **_row(uid, record, {uid: count})})

    def close(self) -> None:
        """Stop pushing (the link closed): a pending push is dropped."""
        with self._lock:
            if self._captured_timer is not None:
                self._captured_timer.cancel()
                self._captured_timer = None
            self._captured = {}

    def on_timed(self, _region_runner) -> None:
        if self.subscribed is None:
            return
        now = time.monotonic()
        if now - self._last_push < PUSH_EVERY_S:
            return
        self._last_push = now
        r = next((r for r in _compiled.all_records() if r.uid == self.subscribed), None)
        if r is not None:
            self.send({"v": VERSION, "type": "timings", **_timings(self.subscribed, r)})


class Link:
    """One comm to one sidebar, with the handler that answers it; it hears of records and timings until it closes."""

    def __init__(self, comm):
        self.comm = comm
        self.handler = Handler(self._send)
        self._stop = (_compiled.RECORD_LISTENERS.add(self.handler.on_record),
                      _compiled.CAPTURED_LISTENERS.add(self.handler.on_captured),
                      _region.TIMING_LISTENERS.add(self.handler.on_timed))
        comm.on_msg(lambda m: self.handler.handle(m["content"]["data"]))
        comm.on_close(lambda _m: self.close())

    def _send(self, data: dict) -> None:
        if self.comm is not None:
            self.comm.send(data)

    def close(self) -> None:
        for stop in self._stop:
            stop()
        self.handler.close()
        self.comm = None


def _kernel():
    import sys

    if "IPython" not in sys.modules:
        return None
    ip = sys.modules["IPython"].get_ipython()
    return getattr(ip, "kernel", None) if ip is not None else None


def start() -> bool:
    """Serve the sidebar from this kernel; False (and nothing done) outside a Jupyter kernel."""
    if _kernel() is None:
        return False
    from comm import create_comm, get_comm_manager

    global _started
    if not _started:
        _started = True
        get_comm_manager().register_target(TARGET, lambda comm, _msg: Link(comm))
        Link(create_comm(target_name=TARGET, data={"v": VERSION, "type": "hello.push"}))
    return True


_started = False  # the comm target is registered once per kernel
