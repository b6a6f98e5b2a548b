"""The torch executor: runs every symbol eagerly with PyTorch. Always available; the reference."""
from __future__ import annotations

import torch

from thunderlab.core import fastpaths
from thunderlab.core.symbols import BoundSymbol, Symbol

from .base import Executor, register_executor

_ATEN_OPS = (torch._ops.OpOverload, torch._ops.OpOverloadPacket)

# Below this many elements, exact GELU and its gradient on CPU float32 tensors run on ATen's own
# kernel rather than oneDNN's, to which ATen hands them while oneDNN is enabled (the default):
# oneDNN sets up a primitive on every call, which on small tensors costs several times the
# arithmetic (benchmarks/gelu_kernels.py measures the crossover: ATen's kernel is 0.2x oneDNN's time
# at 1,024 elements, about even at 16,384). The two agree to float32 rounding (a few 1e-7), not
# bit for bit; set this to 0 for eager's choice everywhere. oneDNN is switched off (PyTorch's
# process-wide flag) only around such a kernel, and back on at once; an op another thread starts
# in those microseconds also runs without oneDNN (the same result, to rounding).
NATIVE_GELU_BELOW = 16384

_onednn_enabled = torch._C._get_mkldnn_enabled
_set_onednn = torch._C._set_mkldnn_enabled


def _native_when_small(kernel):
    """``kernel`` (gelu or gelu_backward, whose first argument is shaped like the result) run with
    oneDNN switched off for small CPU float32 tensors; unchanged for everything else."""

    def run(a, *args, **kwargs):
        if (a.numel() >= NATIVE_GELU_BELOW or not a.is_cpu or a.dtype is not torch.float32
                or kwargs.get("approximate", "none") != "none" or not _onednn_enabled()):
            return kernel(a, *args, **kwargs)
        _set_onednn(False)
        try:
            return kernel(a, *args, **kwargs)
        finally:
            _set_onednn(True)

    run.__name__ = run.__qualname__ = f"native_when_small({getattr(kernel, '__name__', 'kernel')})"
    return run


class TorchExecutor(Executor):
    name = "torch"

    def __init__(self):
        self._chosen: dict = {}  # kernel -> its size-choosing wrapper

    def can_execute(self, bsym: BoundSymbol) -> tuple[bool, str]:
        return True, ""

    def implementation(self, sym: Symbol):
        """What runs ``sym``: its implementation, called the fastest way that computes the same.

        An aten operator (``torch.ops.aten.*``) is called at its C++ entry point: calling
        ``torch.ops.aten.gelu_backward(...)`` first runs a Python layer (the packet's check for
        script objects that must be dispatched in Python, then the overload's ``__call__``) that
        costs as much as a small kernel, and the entry point under it dispatches the same way.
        The symbol keeps the operator object itself, which tracers (TorchDynamo, for the inductor
        executor) understand. Exact GELU and its gradient choose their CPU kernel by size (see
        NATIVE_GELU_BELOW).
        """
        impl = sym.impl
        if not fastpaths.enabled():  # the plain path: the symbol's implementation as it is
            return impl
        if isinstance(impl, _ATEN_OPS):
            impl = getattr(impl, "_op", impl)
        if sym.qualname in ("ltorch.gelu", "ltorch.gelu_backward"):
            # one wrapper per kernel: a program binds each symbol to a single function
            wrapped = self._chosen.get(impl)
            if wrapped is None:
                wrapped = self._chosen[impl] = _native_when_small(impl)
            impl = wrapped
        return impl


register_executor(TorchExecutor())
