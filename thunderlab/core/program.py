"""A Program: the named traces that flow through the pipeline together."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

from .trace import Trace


@dataclass(eq=False)
class Program:
    """Named traces ("forward", and "backward" once autodiff has run), in order."""

    traces: dict[str, Trace] = field(default_factory=dict)

    @property
    def forward(self) -> Trace:
        return self.traces["forward"]

    def map(self, fn: Callable[[Trace], Trace]) -> "Program":
        """A new program with ``fn`` applied to every trace."""
        return Program({name: fn(t) for name, t in self.traces.items()})

    def count(self) -> int:
        return sum(t.count() for t in self.traces.values())

    def __iter__(self) -> Iterator[Trace]:
        return iter(self.traces.values())

    def python(self, **options) -> str:
        return "\n\n".join(t.python(**options) for t in self.traces.values())

    def __str__(self) -> str:
        return self.python()
