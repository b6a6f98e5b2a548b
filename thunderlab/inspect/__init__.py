"""Inspection data: compile records and their steps."""
from .diff import call_diff, text_diff
from .graph import Graph, GraphDiff, graph_diff, trace_graph
from .record import CompileRecord, Step, Verification

__all__ = ["CompileRecord", "Graph", "GraphDiff", "Step", "Verification", "call_diff", "graph_diff", "text_diff",
           "trace_graph"]
