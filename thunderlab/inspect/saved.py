"""What a record loaded from a file computes from its payload: diffs and graph changes between any two steps."""
from __future__ import annotations

import difflib
import io
import re
import tokenize

from .graph import GraphDiff, graph_diff, graph_from_payload

# a record (``thunderlab.inspect.record``) imports this module for its diffs: this one reads a record's steps
# and never imports it, so the two make no circle

# Diffs and graph changes of a loaded record: the payload keeps each step's against the step before it
# that has a program; other pairs are computed from the saved program text (comments left out, as
# text_diff leaves them out) and graphs.


def _previous_with_program(record, step) -> int | None:
    for s in reversed(record.steps[:step.index]):
        if s.saved is not None:
            return s.index
    return None


def _pair(sa, sb, trace: str) -> tuple[dict, dict]:
    for s in (sa, sb):
        if s.saved is None:
            raise ValueError(f"step {s.index} failed and has no program to compare")
    if trace not in sa.saved or trace not in sb.saved:
        raise ValueError(f"no {trace!r} trace in both steps; they have {list(sa.saved)} and {list(sb.saved)}")
    return sa.saved[trace], sb.saved[trace]


def saved_diff(record, sa, sb, trace: str) -> str:
    """``record.diff(a, b)`` for a loaded record."""
    ta, tb = _pair(sa, sb, trace)
    if _previous_with_program(record, sb) == sa.index and tb["diff"] is not None:
        return tb["diff"]
    a, b = code_lines(ta["program"]), code_lines(tb["program"])
    return "".join(difflib.unified_diff(a, b, f"{sa.index} {sa.spec}", f"{sb.index} {sb.spec}"))


def saved_graph_diff(record, sa, sb, trace: str):
    """``record.graph_diff(a, b)`` for a loaded record (the views' graphs: regions expanded)."""
    ta, tb = _pair(sa, sb, trace)
    if _previous_with_program(record, sb) == sa.index and tb.get("changes") is not None:
        c = tb["changes"]
        return GraphDiff(list(c["added"]), list(c["removed"]), list(c["changed"]), list(c["executor"]),
                         list(c["regrouped"]))
    return graph_diff(graph_from_payload(ta["graph"]), graph_from_payload(tb["graph"]))


def code_lines(text: str) -> list[str]:
    """A saved program's text as ``text_diff`` compares it: no header, imports or per-value comments.

    Source-line comments (``# block.py:31   code``) and the comment naming a fusion region stay, as they do there.
    """
    cut: dict[int, int] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                cut[tok.start[0]] = tok.start[1]
    except (tokenize.TokenError, SyntaxError):  # not Python after all: compare it as it is
        pass
    lines = text.splitlines()
    start = next((n + 1 for n, line in enumerate(lines) if line == _IMPORTS_END), 0)
    if start and start < len(lines) and not lines[start]:
        start += 1
    out = []
    for n in range(start, len(lines)):
        line = lines[n]
        col = cut.get(n + 1)
        if col is not None:
            if line[:col].strip():  # a comment after code: the value's type and executor
                line = line[:col]
            elif col and not _SOURCE_COMMENT.match(line[col:]):  # an input's type
                continue
        out.append(line.rstrip() + "\n")
    return out


_IMPORTS_END = "from thunderlab.ops import prims, ltorch"
_SOURCE_COMMENT = re.compile(r"# \S+:\d+(\s|$)")
