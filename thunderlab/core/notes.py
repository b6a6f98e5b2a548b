"""A pass's notes: what it did, in one line, named facts, and the calls an executor said no to.

Every pass says what it did in this one shape (``Pass.describe`` returns it); the record keeps it with
the step, the payload carries it as ``{"summary", "facts", "declines"}``, and every view reads it the
same way, whichever pass wrote it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Decline:
    """One executor's no to one call: the call's stable id, who declined it, and why."""

    call: int
    executor: str
    reason: str


@dataclass(frozen=True)
class Notes:
    """What a pass did: ``summary`` (one line, for tables and headers), ``facts`` (named values: numbers,
    names, small tables, for views and tests to read by name) and ``declines`` (per call, why it was not
    handed to an executor or not fused)."""

    summary: str = ""
    facts: dict[str, Any] = field(default_factory=dict)
    declines: tuple[Decline, ...] = ()

    def __post_init__(self):
        if "\n" in self.summary:
            raise ValueError(f"a pass's summary is one line; got {self.summary!r}")
        object.__setattr__(self, "declines", tuple(self.declines))

    def __bool__(self) -> bool:
        return bool(self.summary or self.facts or self.declines)

    def get(self, name: str, default=None):
        """The fact named ``name`` (``notes.get("saved_bytes")``), or ``default``."""
        return self.facts.get(name, default)

    def __getitem__(self, name: str):
        if name not in self.facts:
            extra = "; per-call declines are notes.declines" if name in ("declines", "left_out") else ""
            raise KeyError(f"no fact {name!r} in these notes (facts: {', '.join(self.facts) or 'none'}){extra}")
        return self.facts[name]

    def __contains__(self, name: str) -> bool:
        return name in self.facts

    def declined(self) -> dict[int, list[tuple[str, str]]]:
        """The declines by call id: ``{id: [(executor, reason), ...]}``."""
        out: dict[int, list[tuple[str, str]]] = {}
        for d in self.declines:
            out.setdefault(d.call, []).append((d.executor, d.reason))
        return out

    def to_json(self) -> dict:
        """The payload's shape: ``{"summary": str, "facts": {...}, "declines": [[call, executor, reason], ...]}``
        (facts as given; the payload makes them plain JSON)."""
        return {"summary": self.summary, "facts": self.facts,
                "declines": [[d.call, d.executor, d.reason] for d in self.declines]}

    @classmethod
    def from_json(cls, data) -> Notes:
        """Notes from the payload's shape; a file written before notes were typed kept only a dict of facts."""
        if not isinstance(data, dict):
            raise ValueError(f"a step's notes are a JSON object, not {type(data).__name__}")
        if set(data) == {"summary", "facts", "declines"}:
            return cls(data["summary"], dict(data["facts"]),
                       tuple(Decline(int(c), str(e), str(r)) for c, e, r in data["declines"]))
        # the older shape: the pass's facts in one object, claim's declines ({id: [[executor, reason]]}), fuse's
        # left-outs ({id: reason}) and ddp's summary among them
        facts = dict(data)
        summary = facts.pop("summary", "") if isinstance(facts.get("summary"), str) else ""
        declines = [Decline(int(c), str(e), str(r)) for c, reasons in _table(facts.pop("declines", None))
                    for e, r in reasons]
        declines += [Decline(int(c), "fuse", str(r)) for c, r in _table(facts.pop("left_out", None))]
        return cls(summary.replace("\n", " "), facts, tuple(declines))


def _table(v) -> list:
    return list(v.items()) if isinstance(v, dict) else []


def byte_text(n: int) -> str:
    """``n`` bytes as a person reads them: ``512 B``, ``1.5 KiB``, ``3.2 MiB`` (as the views write them)."""
    if n < 1024:
        return f"{n} B"
    if n < 1024**2:
        return f"{n / 1024:.1f} KiB"
    if n < 1024**3:
        return f"{n / 1024**2:.1f} MiB"
    return f"{n / 1024**3:.2f} GiB"
