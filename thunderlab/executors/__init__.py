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
    """The executor priority used when a pipeline names none: THUNDERLAB_EXECUTORS (a+b+c) or nvfuser, inductor,
    torch."""
    env = os.environ.get("THUNDERLAB_EXECUTORS")
    if not env:
        return tuple(n for n in DEFAULT_ORDER if n in EXECUTORS)
    names = tuple(n.strip() for n in env.split("+") if n.strip())
    unknown = [n for n in names if n not in EXECUTORS]
    if unknown or not names:
        raise ValueError(f"THUNDERLAB_EXECUTORS={env!r} names {'no executor' if not names else 'unknown executor '}"
                         f"{', '.join(map(repr, unknown))}; valid executors: {', '.join(sorted(EXECUTORS))}, "
                         f"joined by '+' in priority order, e.g. 'inductor+torch'")
    return names


__all__ = ["DEFAULT_ORDER", "EXECUTORS", "Executor", "TorchExecutor", "default_order", "get_executor",
           "register_executor"]
