"""Listeners: the functions one kind of event is announced to.

A place that announces something (a record made, a region call timed, an op declared) owns one
``Listeners`` and calls it with the event; whoever wants to hear of it adds a function and keeps the
handle that ``add`` returns: calling the handle removes the function again. The functions are kept
as a tuple that each change replaces, so an announcement (which may come from any thread, and for
timings on every region call) reads them without a lock, and a function added or removed while one
runs takes effect from the next.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator


class Listeners:
    """The functions called, in the order added, with each event of one kind."""

    def __init__(self, event: str):
        self.event = event  # what is announced, for repr and errors: "a record made", ...
        self._fns: tuple[Callable, ...] = ()
        self._lock = threading.Lock()

    def add(self, fn: Callable) -> Callable[[], bool]:
        """Call ``fn`` with every event from now on (once, however often it is added); returns its remover."""
        if not callable(fn):
            raise TypeError(f"a listener for {self.event} must be callable, got {type(fn).__name__}")
        with self._lock:
            if fn not in self._fns:
                self._fns += (fn,)
        return lambda: self.remove(fn)

    def remove(self, fn: Callable) -> bool:
        """Stop calling ``fn``; False when it was not listening."""
        with self._lock:
            kept = tuple(f for f in self._fns if f != fn)
            removed, self._fns = len(kept) != len(self._fns), kept
        return removed

    def __call__(self, *args, **kwargs) -> None:
        """Announce an event: call every listener with it. A listener that raises stops the announcement."""
        for fn in self._fns:
            fn(*args, **kwargs)

    def __contains__(self, fn) -> bool:
        return fn in self._fns

    def __iter__(self) -> Iterator[Callable]:
        return iter(self._fns)

    def __len__(self) -> int:
        return len(self._fns)

    def __repr__(self) -> str:
        return f"<Listeners for {self.event}: {len(self._fns)}>"
