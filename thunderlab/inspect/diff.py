"""Diffs between steps: unified text diffs of the printed programs, and call-level diffs by stable id."""
from __future__ import annotations

import difflib

from thunderlab.core.trace import Trace

from .graph import GraphDiff, graph_diff, trace_graph


def text_diff(before: Trace, after: Trace, *, before_name: str = "before", after_name: str = "after") -> str:
    """The unified diff of two printed traces (without per-value comments, which only add noise)."""
    a = before.python(comments=False, imports=False).splitlines(keepends=True)
    b = after.python(comments=False, imports=False).splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, before_name, after_name))


def call_diff(before: Trace, after: Trace) -> GraphDiff:
    """Calls added, removed and changed between two traces, aligned by stable id."""
    return graph_diff(trace_graph(before), trace_graph(after))
