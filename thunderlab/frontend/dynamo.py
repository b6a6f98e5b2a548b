"""The torch.compile backend "thunderlab": each FX graph from TorchDynamo becomes a CompiledGraph.

Graph breaks, guards and recompiles are Dynamo's; each captured graph gets its own
CompiledGraph and its own records. Symbolic sizes are specialized per call: the graph is
lowered for the concrete sizes it is called with and cached by them.
"""
from __future__ import annotations

import itertools
import logging
import os
import re
import weakref
from collections.abc import Callable

import torch

from thunderlab.core.caller import warn
from thunderlab.core.notes import Notes
from thunderlab.runtime.compiled import CompiledGraph, Options

from .attribute_guards import collapse as collapse_attribute_guards
from .fx import lower, slim, source_of, value_inputs

_graph_ids = itertools.count()


class Backend:
    """A torch.compile backend with thunderlab options; it remembers the graphs it compiled."""

    def __init__(self, options: Options | None = None, name: str | None = None):
        self.options = options or Options()
        self.name = name
        self.graphs: list[CompiledGraph] = []
        self.eager: list[tuple[str, str]] = []  # (graph name, why it runs as captured) for graphs not compiled
        self.captures = None  # jit's captures.Store, told of each capture it may keep for a later process
        # TorchDynamo calls each graph through a name it puts in the function's module globals, and never
        # removes it: when this backend goes, its graphs let go of all they hold (programs, records, callables)
        weakref.finalize(self, _release, self.graphs)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs) -> Callable:
        skip_guard_latency_profile()
        store = self.captures
        before = _guards_now() if store is not None else None
        try:
            collapse_attribute_guards()
        except Exception as e:  # an optimization of guards only: the compile goes on with Dynamo's own
            warn(f"thunderlab: config guards left as TorchDynamo made them ({e!r})")
        index = next(_graph_ids)
        notes = origin(gm)
        why = _runs_as_captured(gm)
        if why is not None:
            name = self._name(notes, index)
            self.eager.append((name, why))
            warn(f"thunderlab: {name} runs eagerly, as TorchDynamo captured it: {why}")
            return gm.forward
        values = value_inputs(gm)
        graph = self.adopt(gm, notes, static=not values and _static(gm), value_inputs=values, index=index)
        if store is not None and before is not None:
            store.captured(gm, graph, before, notes)
        return graph

    def adopt(self, gm: torch.fx.GraphModule, notes: Notes, static: bool, value_inputs: tuple[int, ...],
              index: int | None = None) -> CompiledGraph:
        """A CompiledGraph for ``gm``, one of this backend's graphs: TorchDynamo's capture, or one kept on disk
        (``captures``)."""
        index = next(_graph_ids) if index is None else index
        graph = CompiledGraph(_Capture(gm), self.options, name=self._name(notes, index), graph_index=index,
                              eager=gm.forward, static=static, value_inputs=value_inputs, origin=notes)
        self.graphs.append(graph)
        return graph

    def _name(self, notes: Notes, index: int) -> str:
        # jit's graphs are named after its function; the registered backend's after the module or function captured
        name = self.name or notes.get("module") or notes.get("function") or f"graph{index}"
        taken = sum(1 for g in self.graphs if g.name == name or g.name.startswith(f"{name}["))
        return f"{name}[{taken}]" if taken else name


def _guards_now() -> list | None:
    """The guards of the frame TorchDynamo is capturing, as they are now (None outside a capture)."""
    try:
        from torch._guards import TracingContext

        context = TracingContext.try_get()
        return list(context.guards_context.dynamo_guards.inner) if context is not None else None
    except (ImportError, AttributeError):
        return None


class _Capture:
    """A graph's capture: ``lower(gm, args)``; after the first, ``gm`` is slimmed (``fx.slim``), since the first
    call of a graph comes after TorchDynamo has finished with it."""

    __slots__ = ("gm", "slimmed", "__weakref__")

    def __init__(self, gm: torch.fx.GraphModule):
        self.gm, self.slimmed = gm, False

    def __call__(self, args):
        try:
            return lower(self.gm, args)
        finally:
            if not self.slimmed:
                self.slimmed = True
                slim(self.gm)


def skip_guard_latency_profile() -> None:
    """Spare the frame TorchDynamo is compiling its guards' latency measurement, unless its guards log is on.

    After building a frame's guards, TorchDynamo runs them once on the frame's own locals, after flushing the CPU's
    caches, to log how long they take (``TORCH_LOGS=guards``) and as a check of itself; the flush alone is
    20-30 ms a captured frame on this machine (``benchmarks/first_call_fresh.py``), a twentieth of a small
    model's first call. Called by thunderlab's backend while TorchDynamo compiles the frame: it marks the frame's
    output graph as TorchDynamo's ``export`` does. With TorchDynamo's guards log on, the measurement is made.
    """
    try:
        from torch._dynamo.guards import guards_log
        from torch._dynamo.symbolic_convert import tls

        output = tls.current_tx.output
    except (ImportError, AttributeError):  # outside a compile, or a torch that keeps these elsewhere
        return
    if hasattr(output, "skip_guards_check") and not guards_log.isEnabledFor(logging.DEBUG):
        output.skip_guards_check = True


def _release(graphs: list[CompiledGraph]) -> None:
    for g in graphs:
        g.release()


class BackendLink:
    """What ``torch.compile`` is given for a Backend: a small callable that refers to it weakly.

    TorchDynamo keeps every backend it is given until ``torch._dynamo.reset()``; given the
    Backend itself, it would keep every graph and record of every function ever compiled.
    """

    __slots__ = ("_ref", "__weakref__")

    def __init__(self, backend: Backend):
        self._ref = weakref.ref(backend)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs) -> Callable:
        backend = self._ref()
        if backend is None:
            raise RuntimeError(
                "the thunderlab.jit function this graph belongs to was freed; compile again with thunderlab.jit"
            )
        return backend(gm, example_inputs)

    @property
    def graphs(self) -> list[CompiledGraph]:
        backend = self._ref()
        return backend.graphs if backend is not None else []


def _isolated() -> dict:
    """``torch.compile``'s keyword that gives each call its own cache entries, where this torch has it (2.13).

    Dynamo counts every compile of a code object against one limit (eight) across all ``torch.compile``
    calls: code that every model shares (a library's forward decorator, its loss function) would, after
    eight models jitted in one process, run the ninth eagerly, and look up shared frames in every other
    function's entries, a dropped function's among them. Isolated, each jit function compiles its own.
    """
    import inspect

    return {"isolate_recompiles": True} if "isolate_recompiles" in inspect.signature(torch.compile).parameters else {}


ISOLATED = _isolated()


def through_dynamo(compiled: Callable, args: tuple, kwargs: dict):
    """Call ``compiled`` (a ``torch.compile`` function) with once-only log warnings left out of what TorchDynamo
    captures, rather than breaking the graph at them.

    TorchDynamo cannot trace a ``logging.Logger`` method and breaks the graph at each call of one; with a graph
    break, every later call must go through Dynamo and the code after it runs in frames of its own.
    transformers adds ``Logger.warning_once``, and its models call it inside ``forward``: GPT-2's language-model
    head on every call with labels (the loss it picks by default), so its loss would be cut off from the
    model's graph. A once-only warning says nothing a result depends on, so thunderlab's captures leave it
    out (it is not printed from captured code); other logging calls still break the graph, as in
    ``torch.compile``. Only the calls made here do so: Dynamo's setting is restored on return. Where
    ``once_warnings_left_out`` is in place, every thunderlab capture (the registered backend's too) leaves them
    out already, and this calls ``compiled`` as it is.
    """
    once = getattr(logging.Logger, "warning_once", None)  # present once transformers is imported
    ignored = torch._dynamo.config.ignore_logging_functions
    if once is None or once in ignored or _ONCE_LEFT_OUT:
        return compiled(*args, **kwargs)
    ignored.add(once)
    try:
        return compiled(*args, **kwargs)
    finally:
        ignored.discard(once)


_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_RESUME = re.compile(r"^torch_dynamo_resume_in_(?P<function>.+)_at_(?P<line>\d+)$")


def origin(gm: torch.fx.GraphModule) -> Notes:
    """Where TorchDynamo's graph ``gm`` comes from, as the capture step's notes: TorchDynamo's frame id (as its
    ``TORCH_LOGS`` and tlparse name it), the function (or the part of one after a graph break) it was captured
    from, the graph break it ends at and why, and why TorchDynamo compiled the function again (the guard of an
    earlier capture that failed). Called inside TorchDynamo's compile; outside one (or on a torch that keeps these
    elsewhere) the notes hold what could be found."""
    facts: dict = {}
    compile_id = gm.meta.get("dynamo_compile_id")
    if compile_id is not None:
        facts["compile_id"] = str(compile_id)
    try:
        from torch._dynamo.symbolic_convert import tls

        tx = tls.current_tx
        code = tx.f_code
    except (ImportError, AttributeError):
        tx = code = None
    module = (getattr(tx, "f_locals", None) or {}).get("self")  # the frame's own locals: the objects it was called with
    if isinstance(module, torch.nn.Module):  # a module's method (or a decorator's wrapper of one, as transformers')
        facts["module"] = type(module).__name__
    # a module whose forward is torch's own (nn.Sequential) is captured through a wrapper of TorchDynamo's: no user
    # function to name
    if code is not None and not code.co_filename.startswith(_TORCH_DIR):
        resumed = _RESUME.match(code.co_name)
        facts["function"] = resumed["function"] if resumed else code.co_name
        facts["file"] = os.path.basename(code.co_filename)
        facts["line"] = code.co_firstlineno
        if resumed:
            facts["resumes_after_line"] = int(resumed["line"])
    reason = getattr(gm, "compile_subgraph_reason", None)
    if reason is not None and getattr(reason, "graph_break", False):
        text = str(getattr(reason, "reason", "")).strip()
        brk = {"reason": text.splitlines()[0] if text else "", "detail": text}
        stack = getattr(reason, "user_stack", None) or []
        if stack:
            frame = stack[-1]
            brk.update(file=os.path.basename(frame.filename), line=frame.lineno, code=(frame.line or "").strip())
        facts["graph_break"] = brk
    try:
        from torch._dynamo.utils import get_metrics_context

        metrics = get_metrics_context()  # what it holds outside a compile is the last compile's
        again = metrics._metrics.get("recompile_reason") if metrics.in_progress() else None
    except (ImportError, AttributeError):
        again = None
    if again:
        facts["recompiled_because"] = str(again)
    return Notes(_origin_summary(facts), facts)


def _origin_summary(facts: dict) -> str:
    """The capture step's notes in one line: "TorchDynamo frame 1/0: Gate.forward from line 16 on, after a graph
    break (model.py); ends at a graph break at model.py:17 `if n.sum() > 0:` (generic_jump TensorVariable())"."""
    if not facts:
        return ""
    head = f"TorchDynamo frame {facts.get('compile_id', '?')}"
    function = f"{facts['module']}.{facts.get('function')}" if "module" in facts else facts.get("function")
    if "resumes_after_line" in facts:
        head += f": {function} from line {facts['resumes_after_line']} on, after a graph break ({facts['file']})"
    elif "function" in facts:
        head += f": {function} ({facts['file']}:{facts['line']})"
    parts = [head]
    brk = facts.get("graph_break")
    if brk:
        at = ""
        if "file" in brk:
            at = f" at {brk['file']}:{brk['line']}" + (f" `{brk['code']}`" if brk.get("code") else "")
        parts.append(f"ends at a graph break{at} ({brk['reason']})")
    again = facts.get("recompiled_because")
    if again:
        earlier = re.match(r"^(\d+/\d+): (.*)$", again, re.S)
        parts.append(f"compiled again: frame {earlier[1]}'s guard failed ({earlier[2]})" if earlier
                     else f"compiled again: {again}")
    return "; ".join(" ".join(p.split()) for p in parts)


def _runs_as_captured(gm: torch.fx.GraphModule) -> str | None:
    """Why ``gm`` cannot be lowered to a trace and must run as captured, or None.

    A value only known when the graph runs (``x.sum().item()`` under ``capture_scalar_outputs``,
    ``nonzero`` under ``capture_dynamic_output_shape_ops``) cannot be specialized for the call, as
    thunderlab's traces are: TorchDynamo marks such nodes with the unbacked symbols they bind.
    """
    for node in gm.graph.nodes:
        if node.meta.get("unbacked_bindings"):
            target = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))
            src = source_of(node)
            where = f" at {src.short()} ({src.code})" if src else ""
            return (f"{target}{where} gives a value known only when the graph runs (TorchDynamo's "
                    f"capture_scalar_outputs or capture_dynamic_output_shape_ops is on); turn that option off to "
                    f"let TorchDynamo break the graph there and thunderlab compile the rest")
    return None


def _static(gm: torch.fx.GraphModule) -> bool:
    """Whether Dynamo captured ``gm`` with static shapes: only tensor inputs, none with a symbolic size."""
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            v = node.meta.get("example_value")
            if not isinstance(v, torch.Tensor) or any(not isinstance(s, int) for s in v.shape):
                return False
    return True


_default_backend = Backend()


def thunderlab_backend(gm: torch.fx.GraphModule, example_inputs):
    """``torch.compile(model, backend="thunderlab")``: compile with the default pipeline."""
    return _default_backend(gm, example_inputs)


def register() -> None:
    from torch._dynamo.backends.registry import _BACKENDS, register_backend

    if "thunderlab" not in _BACKENDS:
        register_backend(thunderlab_backend, name="thunderlab")
    lean_line_headers()
    once_warnings_left_out()


_ONCE_LEFT_OUT = False


def once_warnings_left_out() -> bool:
    """Leave transformers' once-only warnings (``Logger.warning_once``) out of thunderlab's captures, those of the
    registered backend (``torch.compile(model, backend="thunderlab")``) included, as ``through_dynamo`` does for
    ``thunderlab.jit``'s: a Hugging Face model's loss (``self.loss_function`` warns once about its ``loss_type``)
    then stays in the model's graph rather than after a graph break. TorchDynamo asks its logger variable what a
    logging call does; for thunderlab's captures a ``warning_once`` does nothing, and every other logging call,
    and every call in other backends' captures, goes to TorchDynamo as before. Returns whether the change is in
    place (False where this torch lays TorchDynamo out otherwise: ``thunderlab.jit`` still leaves them out).
    """
    global _ONCE_LEFT_OUT
    try:
        from torch._dynamo import variables
        from torch._dynamo.variables import misc
    except ImportError:
        return False
    cls = getattr(misc, "LoggingLoggerVariable", None)
    made = getattr(cls, "call_method", None)
    if made is None or not hasattr(variables, "ConstantVariable"):
        return False
    if not getattr(made, "thunderlab_once", False):
        def call_method(self, tx, name, args, kwargs):
            if name == "warning_once" and _ours(getattr(getattr(tx, "output", None), "compiler_fn", None)):
                return variables.ConstantVariable.create(None)
            return made(self, tx, name, args, kwargs)

        call_method.thunderlab_once = True
        call_method.__wrapped__ = made
        cls.call_method = call_method
    _ONCE_LEFT_OUT = True
    return True


def _ours(compiler_fn) -> bool:
    """Whether a TorchDynamo compile's backend is thunderlab's (``jit``'s link or the registered backend)."""
    inner = compiler_fn
    for _ in range(4):  # TorchDynamo wraps the backend it is given (its debug wrapper, torch.compile's)
        inner = getattr(inner, "compiler_fn", None) or getattr(inner, "_torchdynamo_orig_backend", None) or inner
    return isinstance(inner, BackendLink) or inner is thunderlab_backend


def lean_line_headers() -> bool:
    """Stop TorchDynamo tokenizing whole source files, for thunderlab's captures, to head debug logs that are off.

    For each call it records into a graph, TorchDynamo writes a header naming the line's file, line and enclosing
    function, for its ``trace_call`` debug log, whether or not that log is on: the header is made first and only
    its printing is skipped. The function's qualified name comes from tokenizing the whole file the line is in,
    once per file per process (``torch/nn/functional.py``, ``torch/nn/modules/module.py``, the model's own files):
    about 0.06 s of a small GPT's 0.7 s first call, more for a model in a large file (a BERT's first call in a
    new process, 1.4-1.6 s, became 1.2-1.3 s; ``benchmarks/first_call_fresh.py``). In thunderlab's
    captures, with TorchDynamo's ``trace_call`` and ``trace_source`` logs off, the header leaves that name out
    (nothing reads it); with either log on (``TORCH_LOGS=trace_call``), and in every other backend's captures,
    TorchDynamo makes its header as it always does. Returns whether the change is in place (False where this
    torch lays TorchDynamo out otherwise: then nothing changes).
    """
    try:
        from torch._dynamo import output_graph, symbolic_convert
    except ImportError:
        return False
    cls = getattr(symbolic_convert, "InstructionTranslatorBase", None)
    made = getattr(cls, "get_line_of_code_header", None)
    logs = [getattr(m, n, None) for m, n in ((output_graph, "trace_call_log"),
                                            (symbolic_convert, "trace_call_log"),
                                            (symbolic_convert, "trace_source_log"))]
    if made is None or not all(isinstance(log, logging.Logger) for log in logs):
        return False
    if getattr(made, "thunderlab_lean", False):
        return True

    def get_line_of_code_header(self, lineno: int | None = None) -> str:
        if any(log.isEnabledFor(logging.DEBUG) for log in logs) or not _ours(self.output.compiler_fn):
            return made(self, lineno)
        return f"{self.f_code.co_filename}:{self.lineno if lineno is None else lineno} in {self.f_code.co_name}"

    get_line_of_code_header.thunderlab_lean = True
    get_line_of_code_header.__wrapped__ = made
    cls.get_line_of_code_header = get_line_of_code_header
    return True
