"""The trace that symbol calls currently record into (none outside tracing)."""
from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: trace.py imports this module
    from .trace import Trace

CURRENT_TRACE: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("thunderlab_trace", default=None)


def current_trace() -> Trace | None:
    """The trace being recorded, or None when symbols run eagerly."""
    return CURRENT_TRACE.get()
