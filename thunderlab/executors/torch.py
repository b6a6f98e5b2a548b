"""The torch executor: runs every symbol eagerly with PyTorch. Always available; the reference."""
from __future__ import annotations

from thunderlab.core.symbols import BoundSymbol, Symbol

from .base import Executor, register_executor


class TorchExecutor(Executor):
    name = "torch"

    def can_execute(self, bsym: BoundSymbol) -> tuple[bool, str]:
        return True, ""

    def implementation(self, sym: Symbol):
        return sym.impl


register_executor(TorchExecutor())
