"""Executors: who runs each symbol (torch eagerly; fusion executors own regions)."""
from .base import EXECUTORS, Executor, get_executor, register_executor
from .torch import TorchExecutor

__all__ = ["EXECUTORS", "Executor", "TorchExecutor", "get_executor", "register_executor"]
