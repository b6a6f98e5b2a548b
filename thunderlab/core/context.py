"""The trace that symbol calls currently record into (none outside tracing).

It is held as the one thing a symbol call asks of it (``Recording.bind``), so that symbols.py can
record a call without importing trace.py, which imports symbols.py to build traces.
"""
from __future__ import annotations

import contextvars
from typing import Any, Protocol


class Recording(Protocol):
    """What a symbol call needs of the trace it records into (``core.trace.Trace`` is the one kind)."""

    def bind(self, sym: Any, args: tuple, kwargs: dict) -> Any: ...


CURRENT_TRACE: contextvars.ContextVar[Recording | None] = contextvars.ContextVar("thunderlab_trace", default=None)


def current_trace() -> Recording | None:
    """The trace being recorded, or None when symbols run eagerly (``core.trace.current_trace`` names it a Trace)."""
    return CURRENT_TRACE.get()
