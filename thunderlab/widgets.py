"""Notebook widgets: ``thunderlab.widgets.PassDebugger(record)``, the step-through pass debugger."""
from thunderlab.jupyter.widget import PassDebugger

__all__ = ["PassDebugger"]
