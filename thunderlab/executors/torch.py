"""The torch executor: runs every symbol eagerly with PyTorch. Always available; the reference."""
from __future__ import annotations

import torch

from thunderlab.core.symbols import BoundSymbol, Symbol

from .base import Executor, register_executor

_ATEN_OPS = (torch._ops.OpOverload, torch._ops.OpOverloadPacket)


class TorchExecutor(Executor):
    name = "torch"

    def can_execute(self, bsym: BoundSymbol) -> tuple[bool, str]:
        return True, ""

    def implementation(self, sym: Symbol):
        """The symbol's implementation; for an aten operator (``torch.ops.aten.*``), its C++ entry point.

        Calling ``torch.ops.aten.gelu_backward(...)`` first runs a Python layer (the packet's check for
        script objects that must be dispatched in Python, then the overload's ``__call__``) that costs
        as much as a small kernel; the entry point under it dispatches the same way. The symbol keeps
        the operator object itself, which tracers (TorchDynamo, for the inductor executor) understand.
        """
        impl = sym.impl
        if isinstance(impl, _ATEN_OPS):
            return getattr(impl, "_op", impl)
        return impl


register_executor(TorchExecutor())
