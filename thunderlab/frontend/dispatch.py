"""Calling a jitted function without TorchDynamo's frame hook, under Dynamo's own guards.

After TorchDynamo has captured a function, each call still pays for Dynamo's frame machinery:
the Python wrapper that installs its frame hook, the hook itself, the cache lookup. Their sum
costs about as much as a small model's forward (tens of microseconds). ``DirectCalls`` keeps
the meaning and drops the cost: it evaluates the guards of the function's cache entries itself
(Dynamo's guard managers, the same checks in the same order, a few microseconds), and when one
passes it runs that entry's rewritten bytecode as a plain function. That bytecode is what
Dynamo would run: it reads the graph's inputs, calls the compiled graph and rebuilds the
outputs, replaying any side effects. Two of its calls are shortened, as they do nothing on this
path: the compiled graph is called without Dynamo's disable-wrapper (no frame hook is set to
remove), and the "Pregraph bytecode" profiler marker is made only while a profiler runs.

A call goes through Dynamo instead whenever the shortcut could differ from it: no cache entry's
guards pass (Dynamo recompiles; entries of other backends are skipped, as Dynamo skips them), its bytecode resumes
into other frames after a graph break (those frames must be compiled by Dynamo's hook), the
module has forward or backward hooks, a Dynamo stance other than the default is set, or the
call is made while Dynamo's hook is active. The Dynamo APIs used here are its debugging
interface; if one is missing, every call goes through Dynamo.
"""
from __future__ import annotations

import inspect
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch

try:  # Dynamo's debugging interface: cache entries, each with its guard manager and rewritten code
    from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list, get_eval_frame_callback
    try:
        from torch._C._dynamo.eval_frame import _get_total_cache_entry_count as _entry_count
    except ImportError:  # an older torch: the list is fetched on every call
        _entry_count = None
    from torch._dynamo import eval_frame as _eval_frame
    from torch._dynamo import utils as _dynamo_utils
    from torch.nn.modules import module as _nn_module
except ImportError:  # pragma: no cover - another torch: calls go through Dynamo
    _debug_get_cache_entry_list = None

MISS = object()  # the call must go through Dynamo

_UTILS = "__import_torch_dot__dynamo_dot_utils"  # the global by which Dynamo's bytecode reaches torch._dynamo.utils
_QUIET_UTILS = "__thunderlab_direct_dynamo_utils"  # ours, for calls made while no profiler runs


class _QuietUtils:
    """``torch._dynamo.utils`` as a direct call's bytecode sees it while no profiler runs: the
    "Pregraph bytecode" marker, which Dynamo makes (as a context manager) on every call, is not
    made. The two marker functions are builtins that do nothing, so that they cost no Python
    frame: ``tuple()`` returns the empty tuple and ``len`` is handed it back. Every other name
    is the module's."""

    record_pregraph_bytecode_enter = tuple
    record_pregraph_bytecode_exit = len

    def __getattr__(self, name):
        return getattr(_dynamo_utils, name)


_QUIET = _QuietUtils()


def _target(fn, compiled) -> tuple[types.FunctionType, Any] | None:
    """The plain function whose frame Dynamo compiles for ``fn``, and the object bound as its first argument."""
    if isinstance(fn, torch.nn.Module):
        wrapper = getattr(getattr(compiled, "forward", None), "__wrapped__", None)
        if isinstance(wrapper, types.FunctionType):  # torch.nn's own modules: Dynamo compiles a frame around __call__
            return wrapper, None
        fwd = type(fn).forward
        return (fwd, fn) if isinstance(fwd, types.FunctionType) and "forward" not in fn.__dict__ else None
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
        return fn.__func__, fn.__self__
    if isinstance(fn, types.FunctionType):
        return fn, None
    return None


class DirectCalls:
    """Runs calls of ``fn`` on the bytecode Dynamo made for it, checking Dynamo's guards itself.

    ``compiled`` is ``torch.compile(fn, backend=backend)``; only cache entries made by ``backend``
    are used. ``hits`` counts the calls made directly; ``why_not`` says why the last call went
    through Dynamo.
    """

    def __init__(self, fn, compiled, backend: Callable):
        self.backend = backend
        self.hits = 0
        self.why_not = "not called yet"
        target = _target(fn, compiled) if _debug_get_cache_entry_list is not None else None
        self.func, self.bound = target if target is not None else (None, None)
        self.module = fn if isinstance(fn, torch.nn.Module) else None
        # what the call would run: if the user swaps it, Dynamo compiles the new code and so must we
        self._forward = type(fn).forward if self.module is not None else None
        # by id of the rewritten code (hashing a code object hashes its bytecode), kept alive beside:
        # (code, its guards' check, "" for another backend's entry or why it can't run directly or "ok",
        # and the runners for calls made while a profiler runs and while none does, or None, None)
        self._runnable: dict[int, tuple[types.CodeType, Callable, str, Callable | None, Callable | None]] = {}
        self._listed: tuple[int, list] | None = None  # (entry count, Dynamo's cache entries) when last fetched
        if self.func is None:
            self.why_not = "only plain functions, methods and nn.Modules with a forward method are called directly"
            return
        code = self.func.__code__
        self.code = code
        self._defaults: tuple | None = None  # the defaults ``signature`` was made with (see _signature)
        self._signature()
        self._names = code.co_varnames[:code.co_argcount]
        varargs = code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
        simple = not varargs and not code.co_kwonlyargcount
        self._n_positional = code.co_argcount - (self.bound is not None) if simple else -1
        # a frame's locals include its closure's variables, which guards may read
        self._free = tuple(zip(code.co_freevars, self.func.__closure__ or ()))
        # a wrapper written (*args, **kwargs): its frame's locals are the two as they come
        self._star = (varargs == inspect.CO_VARARGS | inspect.CO_VARKEYWORDS and not code.co_argcount
                      and not code.co_kwonlyargcount and self.bound is None)

    def __call__(self, args: tuple, kwargs: dict):
        """The call's result, or ``MISS`` when it must go through Dynamo."""
        if self.func is None:
            return MISS
        # Everything below runs on every call and is kept inline: a small model's step is a few hundred
        # microseconds, and each Python frame on this path costs one or two of them with cold caches.
        if get_eval_frame_callback() is not None:  # a frame being compiled, or torch._dynamo.run()'s run-only mode
            self.why_not = "called while TorchDynamo's frame hook is active"
            return MISS
        stance = _eval_frame._stance
        if stance.stance != "default" or stance.backend is not None:
            self.why_not = f"torch.compiler stance {stance.stance!r} is set"
            return MISS
        if self.func.__code__ is not self.code:
            self.why_not = "the function's code was replaced"
            return MISS
        m = self.module
        if m is not None and (type(m).forward is not self._forward or "forward" in m.__dict__):
            self.why_not = "the module's forward was replaced"
            return MISS
        if m is not None and (m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or m._backward_pre_hooks
                              or _nn_module._global_forward_hooks or _nn_module._global_forward_pre_hooks
                              or _nn_module._global_backward_hooks or _nn_module._global_backward_pre_hooks):
            self.why_not = "the module has hooks, which run outside the captured graph"
            return MISS
        lead = (self.bound,) if self.bound is not None else ()
        if not kwargs and len(args) == self._n_positional:
            frame_locals = dict(zip(self._names, lead + args))
        elif self._star:
            frame_locals = {self.code.co_varnames[0]: args, self.code.co_varnames[1]: kwargs}
        else:
            try:
                bound = self._signature().bind(*lead, *args, **kwargs)
            except TypeError:
                self.why_not = "the arguments do not match the signature"
                return MISS  # Dynamo (then Python) raises the error the user expects
            bound.apply_defaults()
            frame_locals = bound.arguments
            # every argument explicit: the runner's own defaults (those it was made with) play no part
            lead, args, kwargs = (), bound.args, bound.kwargs
        for name, cell in self._free:
            frame_locals[name] = cell.cell_contents
        # Dynamo's cache entries for the code, fetched again only when their number changed: entries are
        # appended by compiles (through Dynamo, after a miss here) and dropped by torch._dynamo.reset(); both
        # change the count. Each entry's guards decide alone whether it may run, so a list kept across calls
        # chooses only among valid entries.
        count = _entry_count(self.code) if _entry_count is not None else -1
        listed = self._listed
        if listed is None or count != listed[0] or count < 0:
            listed = self._listed = (count, _debug_get_cache_entry_list(self.code))
        profiling = torch.autograd.profiler._is_profiler_enabled
        for entry in listed[1]:
            known = self._runnable.get(id(entry.code))
            if known is None:
                # the guards' C++ root, called as Dynamo's frame hook calls it (the manager's own check() is a
                # Python method that only forwards to it)
                check = getattr(entry.guard_manager, "root", entry.guard_manager).check
                known = self._runnable[id(entry.code)] = (entry.code, check, *self._make(entry))
            _code, check, ours, run, quiet = known
            if not ours:  # another backend's entry (a second compile of the same code): Dynamo skips it too
                continue
            if check(frame_locals):
                if run is None:
                    self.why_not = ours
                    return MISS
                self.hits += 1
                return (run if profiling else quiet)(*lead, *args, **kwargs)
        self.why_not = "no cached graph's guards pass (Dynamo compiles a new one)"
        self._listed = None  # Dynamo is about to add one
        return MISS

    def _signature(self) -> inspect.Signature:
        """The function's signature with the defaults it has now.

        Python fills a frame's parameters from ``__defaults__`` and ``__kwdefaults__`` as they are at
        the call, and Dynamo's guards check the frame so filled; both may be reassigned, or the
        keyword dict changed in place, at any time. The signature is made again when they change.
        """
        f = self.func
        kw = f.__kwdefaults__
        now = (f.__defaults__, tuple((k, id(v)) for k, v in kw.items()) if kw else None)
        if self._defaults is None or now[0] is not self._defaults[0] or now[1] != self._defaults[1]:
            self.signature = inspect.signature(f)
            self._defaults = now
        return self.signature

    def _make(self, entry) -> tuple[str, Callable | None, Callable | None]:
        """("", None, None) for another backend's entry; else "ok" and its two runners (for calls made
        while a profiler runs, and while none does), or why it can't run directly and None, None."""
        backend = getattr(entry.backend, "compiler_fn", entry.backend)
        code = entry.code
        if backend is not self.backend:
            return "", None, None
        if any(n.startswith("__resume_at") for n in code.co_names):
            return "the function has a graph break; its resumed frames are compiled through Dynamo", None, None
        if code.co_cellvars or code.co_freevars != self.code.co_freevars:
            return "the function defines closures over its locals", None, None
        f = self.func

        def runner(c):
            run = types.FunctionType(c, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
            run.__kwdefaults__ = f.__kwdefaults__
            return run

        direct = self._unwrapped(code, f.__globals__)
        return "ok", runner(direct), runner(self._quiet(direct, f.__globals__))

    def _unwrapped(self, code: types.CodeType, globals_: dict) -> types.CodeType:
        """``code`` calling our compiled graphs as they are, not through Dynamo's disable-wrapper.

        Dynamo's bytecode calls each graph through ``torch._dynamo.disable``, which removes the frame
        hook while the graph runs; a direct call runs with no hook set (``__call__`` checks), so the
        wrapper would only set it to None and back. The graph is reached under a name of its own,
        installed beside Dynamo's in the same globals.
        """
        graphs = getattr(self.backend, "graphs", ())
        renames = {}
        for name in code.co_names:
            wrapped = globals_.get(name) if name.startswith("__compiled_fn") else None
            inner = getattr(wrapped, "_torchdynamo_orig_callable", None)
            if getattr(wrapped, "_torchdynamo_disable", False) and any(inner is g for g in graphs):
                renames[name] = f"__thunderlab_direct{name}"
                globals_[renames[name]] = inner
        if renames:  # the names go when this object goes: a module's globals outlive every function compiled in it
            weakref.finalize(self, _forget, globals_, tuple(renames.values()))
        return _renamed(code, renames)

    @staticmethod
    def _quiet(code: types.CodeType, globals_: dict) -> types.CodeType:
        """``code`` reaching Dynamo's utils module as ``_QuietUtils`` (no profiler marker), under a name of its own."""
        if _UTILS not in code.co_names or _UTILS not in globals_:
            return code
        globals_[_QUIET_UTILS] = _QUIET
        return _renamed(code, {_UTILS: _QUIET_UTILS})


def _forget(globals_: dict, names: tuple[str, ...]) -> None:
    for name in names:
        globals_.pop(name, None)


def _renamed(code: types.CodeType, renames: dict[str, str]) -> types.CodeType:
    if not renames:
        return code
    return code.replace(co_names=tuple(renames.get(n, n) for n in code.co_names))
