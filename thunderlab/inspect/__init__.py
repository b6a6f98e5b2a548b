"""Inspection data: compile records and their steps."""
from .record import CompileRecord, Step, Verification

__all__ = ["CompileRecord", "Step", "Verification"]
