"""Executors: who runs each symbol (torch eagerly; fusion executors own regions)."""
import os

from . import inductor  # noqa: F401  (registers itself)
from .base import EXECUTORS, Executor, get_executor, register_executor
from .torch import TorchExecutor

try:  # registers itself; nvFuser itself is imported only when a region needs it
    from . import nvfuser  # noqa: F401
except ImportError:  # pragma: no cover - the translation module is part of the package
    pass

DEFAULT_ORDER = ("nvfuser", "inductor", "torch")


def default_order() -> tuple[str, ...]:
    """The executor priority used when a pipeline names none: THUNDERLAB_EXECUTORS (a+b+c) or nvfuser, inductor, torch."""
    env = os.environ.get("THUNDERLAB_EXECUTORS")
    names = tuple(n for n in env.split("+") if n) if env else DEFAULT_ORDER
    return tuple(n for n in names if n in EXECUTORS)


__all__ = ["DEFAULT_ORDER", "EXECUTORS", "Executor", "TorchExecutor", "default_order", "get_executor",
           "register_executor"]
