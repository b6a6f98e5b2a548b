"""Notebook side of thunderlab: the step-through pass debugger widget."""
