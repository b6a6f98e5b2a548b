"""Runtime: compiled callables with a cache keyed on input metadata."""
from .compiled import CompiledGraph, Options, all_records

__all__ = ["CompiledGraph", "Options", "all_records"]
