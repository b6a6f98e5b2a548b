"""del: free each intermediate value right after its last use."""
from __future__ import annotations

from dataclasses import dataclass

from thunderlab.core.program import Program
from thunderlab.executors.base import freeing

from .base import Pass, register_pass


@register_pass
@dataclass(frozen=True)
class Del(Pass):
    """Insert `del` after each value's last use so memory is freed early."""

    name = "del"
    last = True

    def __call__(self, program: Program) -> Program:
        return program.map(freeing)
