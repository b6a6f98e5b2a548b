"""Timing a program's collectives: how long each exchange was in flight, and how long the program waited for it.

A collective is two calls (see ops/collectives.py): the issue starts the exchange, ``wait`` blocks
until it is over. With ``timing`` on, ``bind`` runs both halves through a ``CommunicationTimer``,
which measures per exchange the wall time from the issue to its wait returning ("in flight": the
exchange, with the computation that overlapped it) and the time the program stood blocked in the
wait (what the exchange cost the program beyond that overlap). Fusion regions time compute; this
times communication, so the two sit side by side in the timings.
"""
from __future__ import annotations

import statistics
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable

from . import region

KEEP = 10000  # exchanges kept per collective, as a region keeps its calls


class CommunicationTimer:
    """Times the collectives of one program (its forward and backward); ``stats`` per collective name."""

    def __init__(self):
        self.in_flight: dict[str, deque] = {}  # collective -> seconds from issue to wait returning, per exchange
        self.blocked: dict[str, deque] = {}  # collective -> seconds blocked in its wait, per exchange
        self._open: dict[int, tuple[weakref.ref, str, float]] = {}  # id(tensor in flight) -> (it, collective, issued)
        self._lock = threading.Lock()

    def issue(self, name: str, impl: Callable) -> Callable:
        """``impl`` (a collective's issue) noting when each exchange started."""
        def issued(*args, **kwargs):
            t0 = time.perf_counter()
            out = impl(*args, **kwargs)
            with self._lock:
                self._open[id(out)] = (weakref.ref(out), name, t0)
            return out
        return issued

    def wait(self, impl: Callable) -> Callable:
        """``impl`` (``wait``) timing the exchange it ends: in flight since its issue, and blocked here."""
        def waited(a, *args, **kwargs):
            t0 = time.perf_counter()
            out = impl(a, *args, **kwargs)
            t1 = time.perf_counter()
            with self._lock:
                entry = self._open.pop(id(a), None)
                if entry is None or entry[0]() is not a:  # a wait on a tensor no timed collective issued
                    return out
                _, name, issued = entry
                self.in_flight.setdefault(name, deque(maxlen=KEEP)).append(t1 - issued)
                self.blocked.setdefault(name, deque(maxlen=KEEP)).append(t1 - t0)
            region.TIMING_LISTENERS(self)  # the sidebar streams timings from there, exchanges too
            return out
        return waited

    def stats(self) -> dict[str, dict]:
        """Per collective: count, median/min/total seconds in flight, and median/total seconds blocked in its wait."""
        with self._lock:
            return {name: {"count": len(t), "median_s": statistics.median(t), "min_s": min(t), "total_s": sum(t),
                           "blocked_median_s": statistics.median(self.blocked[name]),
                           "blocked_total_s": sum(self.blocked[name])}
                    for name, t in self.in_flight.items() if t}
