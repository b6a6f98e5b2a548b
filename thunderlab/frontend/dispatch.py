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

Calls with positional arguments only take a shorter way first (``DirectCalls.run``): a function printed
for this DirectCalls, made again whenever a cache entry joins it, that makes the checks above inline
and then, for each entry that ran directly before, checks its guards and runs it. An entry's guards are
printed as Python fixed to the values of the call that first ran it (see guards.py) where its guard
tree is small and of known kinds, and are Dynamo's C++ check, given the frame's locals, otherwise. An
entry Dynamo dropped (``torch._dynamo.reset()``) is known by its guard manager being freed: the function
is made again without it then.
When no printed check passes, ``run`` answers ``UNCHECKED`` and the call takes the way above.
"""
from __future__ import annotations

import inspect
import itertools
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch

from thunderlab.executors.region import PENDING, start_pending
from thunderlab.runtime.compiled import CompiledGraph

from .bytecode import plain_call
from .guards import compile_guards

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
UNCHECKED = object()  # DirectCalls.run: no entry's printed check passed; the call goes to DirectCalls.__call__
_MAX_PRINTED = 8  # entries a DirectCalls' printed function checks, in the order they first ran directly
_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")

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


class Binder:
    """Binds a call's arguments to a code object's parameters as Python fills its frame, defaults included.

    ``bind(args, kwargs)`` answers what ``inspect.Signature.bind`` followed by ``apply_defaults`` gives (the
    frame's locals, in parameter order, and the arguments to call with, every one explicit), or None where Python
    would raise (too many arguments or too few, an unknown keyword, a parameter given twice): ``inspect`` then
    finds the error. It runs on every call made with keywords, as Hugging Face models are called, in a fifth of
    ``inspect``'s time (``benchmarks/keyword_calls.py``).
    """

    def __init__(self, code: types.CodeType, defaults: tuple | None, kwdefaults: dict | None):
        n, kwonly = code.co_argcount, code.co_kwonlyargcount
        names = code.co_varnames
        self.positional = names[:n]
        self.kwonly = names[n:n + kwonly]
        i = n + kwonly
        self.varargs = names[i] if code.co_flags & inspect.CO_VARARGS else None
        i += self.varargs is not None
        self.varkw = names[i] if code.co_flags & inspect.CO_VARKEYWORDS else None
        # names a keyword may give: not the positional-only ones
        self.by_keyword = frozenset(self.positional[code.co_posonlyargcount:] + self.kwonly)
        self.defaults = dict(zip(self.positional[n - len(defaults or ()):], defaults or ()))
        self.defaults.update(kwdefaults or {})

    def bind(self, args: tuple, kwargs: dict) -> tuple[dict, tuple, dict] | None:
        positional = self.positional
        n = len(positional)
        if len(args) > n and self.varargs is None:
            return None
        given = dict(zip(positional, args))
        extra = {}
        for name, value in kwargs.items():
            if name in self.by_keyword:
                if name in given:
                    return None
                given[name] = value
            elif self.varkw is not None:
                extra[name] = value
            else:
                return None
        defaults = self.defaults
        frame = {}  # in the signature's order, as inspect gives it
        rest = args[n:]
        for names, star, value in ((positional, self.varargs, rest), (self.kwonly, self.varkw, extra)):
            for name in names:
                if name in given:
                    frame[name] = given[name]
                elif name in defaults:
                    frame[name] = defaults[name]
                else:
                    return None
            if star is not None:
                frame[star] = value
        call_kwargs = {name: frame[name] for name in self.kwonly}
        call_kwargs.update(extra)
        return frame, tuple(frame[name] for name in positional) + rest, call_kwargs


class DirectCalls:
    """Runs calls of ``fn`` on the bytecode Dynamo made for it, checking Dynamo's guards itself.

    ``compiled`` is ``torch.compile(fn, backend=backend)``; only cache entries made by ``backend``
    are used. ``hits`` counts the calls made directly; ``why_not`` says why the last call went
    through Dynamo.
    """

    printing = True  # False: no entry joins the printed function (calls take __call__'s way; for comparisons)

    def __init__(self, fn, compiled, backend: Callable):
        self.backend = backend
        self._hits = [0]  # a list, which the printed function shares (it holds no reference to this object)
        self.why_not = "not called yet"
        # entries that ran directly, for the printed function: (guard manager's weakref, check expression, names
        # it uses, runner while a profiler runs, runner while none does, and the program to call in place of the
        # latter with its inputs and result as expressions, or None), in the order they first ran
        self._printed: list[tuple[weakref.ref, str, dict, Callable, Callable, tuple | None]] = []
        self.run: Callable[[tuple], Any] = _unchecked  # see the module's docstring
        self._serial = itertools.count(1)  # names each printed entry's constants apart
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
        # captures kept on disk by earlier processes (captures.Store, set by jit), and those loaded here: they stand
        # before Dynamo's own entries, whose count alone says when the list must be made again
        self.kept = None
        self._loaded: list = []
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
        # a method written (self, *args, **kwargs) (Hugging Face's forward decorators) called on its module: the
        # frame's locals are the module and the two as they come, with no signature to bind them by
        self._star_method = (varargs == inspect.CO_VARARGS | inspect.CO_VARKEYWORDS and code.co_argcount == 1
                             and not code.co_kwonlyargcount and self.bound is not None)

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
        # Dynamo's cache entries for the code, fetched again only when their number changed: entries are
        # appended by compiles (through Dynamo, after a miss here) and dropped by torch._dynamo.reset(); both
        # change the count. Each entry's guards decide alone whether it may run, so a list kept across calls
        # chooses only among valid entries.
        count = _entry_count(self.code) if _entry_count is not None else -1
        listed = self._listed
        if listed is None or count != listed[0] or count < 0:
            listed = self._listed = (count, [*self._loaded, *_debug_get_cache_entry_list(self.code)])
            if any(p[0]() is None for p in self._printed):  # entries Dynamo dropped
                self._printed = [p for p in self._printed if p[0]() is not None]
                self._print()
        store = self.kept
        loadable = store is not None and store.untried()
        for entry in listed[1]:
            if self._known(entry)[2] == "ok":
                break
        else:
            # no entry of ours may run directly (a graph break, say): whichever guards pass, the call goes
            # through Dynamo, so neither the arguments are bound nor the guards checked here (a model's guards
            # read its config through Python attribute hooks: tens of microseconds a call), unless a capture kept
            # on disk may run it (the checks below skip entries that may not run directly)
            if not loadable:
                self.why_not = next((k[2] for k in map(self._known, listed[1]) if k[2]),
                                    "no cached graph's guards pass (Dynamo compiles a new one)")
                return MISS
        lead = (self.bound,) if self.bound is not None else ()
        if not kwargs and len(args) == self._n_positional:
            frame_locals = dict(zip(self._names, lead + args))
        elif self._star:
            frame_locals = {self.code.co_varnames[0]: args, self.code.co_varnames[1]: kwargs}
        elif self._star_method:
            names = self.code.co_varnames
            frame_locals = {names[0]: self.bound, names[1]: args, names[2]: kwargs}
        else:
            self._signature()  # the binder follows the function's defaults
            fast = self._binder.bind(lead + args, kwargs)
            if fast is not None:
                frame_locals, args, kwargs = fast
                lead = ()
            else:  # a call Python would refuse: inspect names the error
                try:
                    bound = self.signature.bind(*lead, *args, **kwargs)
                except TypeError:
                    self.why_not = "the arguments do not match the signature"
                    return MISS  # Dynamo (then Python) raises the error the user expects
                bound.apply_defaults()
                frame_locals = bound.arguments
                # every argument explicit: the runner's own defaults (those it was made with) play no part
                lead, args, kwargs = (), bound.args, bound.kwargs
        for name, cell in self._free:
            frame_locals[name] = cell.cell_contents
        profiling = torch.autograd.profiler._is_profiler_enabled
        for entry in listed[1]:
            _code, check, ours, run, quiet = self._known(entry)
            if not ours:  # another backend's entry (a second compile of the same code): Dynamo skips it too
                continue
            if check(frame_locals):
                if run is None:
                    self.why_not = ours
                    return MISS
                self._hits[0] += 1
                if getattr(entry, "rebuild", None) is not None:  # a kept capture on its loaded guards
                    if not entry.passed(frame_locals):
                        return (run if profiling else quiet)(*lead, *args, **kwargs)
                    del self._runnable[id(entry.code)]  # its guards were built again: checked anew
                    _code, check, ours, run, quiet = self._known(entry)
                if not kwargs and (len(args) == self._n_positional or self._star):
                    self._add_printed(entry, check, run, quiet, frame_locals)
                return (run if profiling else quiet)(*lead, *args, **kwargs)
        if loadable:
            for entry in store.load_for(frame_locals):
                self._loaded.append(entry)
                self._listed = None  # the loaded capture joins the list
                _code, check, ours, run, quiet = self._known(entry)
                if check(frame_locals) and run is not None:
                    self._hits[0] += 1
                    # its guards are built again on a later call (captures.Kept.passed), printed from then on
                    if entry.rebuild is not None:
                        entry.passed(frame_locals)
                    elif not kwargs and (len(args) == self._n_positional or self._star):
                        self._add_printed(entry, check, run, quiet, frame_locals)
                    return (run if profiling else quiet)(*lead, *args, **kwargs)
        self.why_not = "no cached graph's guards pass (Dynamo compiles a new one)"
        self._listed = None  # Dynamo is about to add one
        return MISS

    def keep_captured(self) -> None:
        """After a call that went through Dynamo: keep the capture it made, if any, for a later process."""
        store = self.kept
        if store is not None and store.ready is not None:
            store.flush(_debug_get_cache_entry_list(self.code))

    def _known(self, entry) -> tuple:
        """(code, its guards' check, "" / why not / "ok", and its two runners) for a Dynamo cache entry, made once."""
        known = self._runnable.get(id(entry.code))
        if known is None:
            # the guards' C++ root, called as Dynamo's frame hook calls it (the manager's own check() is a
            # Python method that only forwards to it)
            check = getattr(entry.guard_manager, "root", entry.guard_manager).check
            identity = getattr(entry, "identity", None)  # a kept capture's (captures.Kept)
            if identity is not None:
                check = _both(check, identity)
            known = self._runnable[id(entry.code)] = (entry.code, check, *self._make(entry))
        return known

    @property
    def hits(self) -> int:
        """Calls run directly (by ``run`` or by ``__call__``)."""
        return self._hits[0]

    def _variables(self) -> dict[str, str]:
        """The variable each frame local is in, in the printed function."""
        if self._star:
            return {self.code.co_varnames[0]: "args", self.code.co_varnames[1]: "_kwargs",
                    **{name: f"_f{i}" for i, (name, _) in enumerate(self._free)}}
        names = self._names[1:] if self.bound is not None else self._names
        return {**{name: f"_a{i}" for i, name in enumerate(names)},
                **({self._names[0]: "_lead"} if self.bound is not None else {}),
                **{name: f"_f{i}" for i, (name, _) in enumerate(self._free)}}

    def _add_printed(self, entry, check, run, quiet, frame_locals) -> None:
        """Let the printed function run ``entry`` from now on (its guards just passed on ``frame_locals``)."""
        if not self.printing or len(self._printed) >= _MAX_PRINTED:
            return
        if any(p[0]() is entry.guard_manager for p in self._printed):
            return
        variables = self._variables()
        k = next(self._serial)
        root = getattr(entry.guard_manager, "root", entry.guard_manager)
        printed = compile_guards(root, variables, frame_locals, self.func.__globals__, prefix=f"_e{k}")
        items = ", ".join(f"{name!r}: {v}" for name, v in variables.items())
        if printed is None:  # Dynamo's own check (and a kept capture's identity check), on the frame's locals as a dict
            expr, env = f"_e{k}check({{{items}}})", {f"_e{k}check": check}
        else:
            expr, env = printed
            identity = getattr(entry, "identity", None)  # a kept capture's (captures.Kept)
            if identity is not None:
                expr, env = f"({expr}) and _e{k}identity({{{items}}})", {**env, f"_e{k}identity": identity}
        self._printed.append((weakref.ref(entry.guard_manager, _dropped(self)), expr, env, run, quiet,
                              self._program(root, quiet, variables)))
        self._print()

    def _program(self, root, quiet: Callable, variables: dict[str, str]) -> tuple | None:
        """(the graph, its program entry, the inputs' and the result's expressions) where the entry's bytecode
        only calls one of our graphs and its guards fix the grad mode (which alone picks a static graph's
        program); else None, and the bytecode runs."""
        if not any(type(g).__name__ == "GLOBAL_STATE" for g in root.get_leaf_guards()):
            return None
        plain = plain_call(quiet.__code__, "__thunderlab_direct__compiled_fn", _QUIET_UTILS, variables)
        graph = self.func.__globals__.get(plain.graph) if plain is not None else None
        program = graph.entry_now() if isinstance(graph, CompiledGraph) else None
        return None if program is None else (graph, program, plain.inputs, plain.result)

    def _print(self) -> None:
        """Make ``run`` again for the entries in ``self._printed``."""
        if not self._printed:
            self.run = _unchecked
            return
        env: dict[str, Any] = {"UNCHECKED": UNCHECKED, "_cb": get_eval_frame_callback, "_ev": _eval_frame,
                               "_func": self.func, "_code": self.code, "_hits": self._hits, "_kwargs": {},
                               "_profiler": torch.autograd.profiler, "_lead": self.bound, "_m": self.module,
                               "_fwd": self._forward, "_nnm": _nn_module if self.module is not None else None,
                               "_cells": tuple(cell for _, cell in self._free),
                               "_PENDING": PENDING, "_start_pending": start_pending}
        n = len(self._names) - (self.bound is not None)
        params = [f"_a{i}" for i in range(n)]
        lead = "_lead, " if self.bound is not None else ""
        call_args = lead + ("*args" if self._star else ", ".join(params))
        checks, runs = [], []
        for k, (_alive, expr, names, run, quiet, program) in enumerate(self._printed, 1):
            env.update(names)
            env[f"_run{k}"], env[f"_quiet{k}"] = run, quiet
            checks.append(f"{'if' if k == 1 else 'elif'} {expr}: _k = {k}")
            if program is None:
                runs.append(f"if _k == {k}:\n"
                            f"        return (_run{k} if _profiler._is_profiler_enabled else _quiet{k})({call_args})")
                continue
            graph, entry, inputs, result = program  # what the bytecode and the graph's __call__ would do
            env[f"_graph{k}"], env[f"_program{k}"] = graph, entry.fn
            lifted = []
            for i, t in enumerate(entry.lifted):
                env[f"_lifted{k}_{i}"] = t
                lifted.append(f"_lifted{k}_{i}")
            runs.append(f"if _k == {k}:\n"
                        f"        if _profiler._is_profiler_enabled:\n            return _run{k}({call_args})\n"
                        f"        _o = _program{k}({', '.join((*inputs, *lifted))})\n"
                        f"        _graph{k}.hits += 1\n"
                        f"        if _PENDING:\n            _start_pending()\n"
                        f"        return {result}")
        # the checks __call__ makes before it looks at an entry, in the same order
        refuse = ["_st.stance != 'default'", "_st.backend is not None", "_func.__code__ is not _code"]
        if self.module is not None:
            refuse += ["type(_m).forward is not _fwd", "'forward' in _m.__dict__"]
            refuse += [f"_m.{h}" for h in _HOOKS] + [f"_nnm._global{h}" for h in _HOOKS]
        arity = "" if self._star else f"len(args) != {n} or "
        unpack = f"{', '.join(params)}, = args" if params and not self._star else "pass"
        cells = "".join(f"        _f{i} = _cells[{i}].cell_contents\n" for i in range(len(self._free)))
        src = (
            "def run(args):\n"
            f"    if {arity}_cb() is not None:\n        return UNCHECKED\n"
            "    _st = _ev._stance\n"
            f"    if {' or '.join(refuse)}:\n"
            "        return UNCHECKED\n"
            f"    {unpack}\n"
            "    _k = 0\n"
            f"    try:\n{cells}"
            + "".join(f"        {c}\n" for c in checks)
            + "    except Exception:  # a guarded value that reads in an unexpected way: Dynamo's check decides\n"
            "        return UNCHECKED\n"
            "    if not _k:\n        return UNCHECKED\n"
            "    _hits[0] += 1\n"
            + "".join(f"    {r}\n" for r in runs)
            + "    return UNCHECKED\n"
        )
        code = compile(src, f"<thunderlab direct calls of {self.func.__qualname__}>", "exec")
        exec(code, env)
        self.run = env.pop("run")  # its globals are env: kept there too, the two would outlive us as a cycle
        self.run_source = src

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
            # the parameters of the code Dynamo's frame runs: not those ``inspect.signature`` would otherwise
            # report for a decorated function (``__wrapped__``'s, from ``functools.wraps``) or a ``__signature__``
            plain = types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
            plain.__kwdefaults__ = kw
            self.signature = inspect.signature(plain)
            self._binder = Binder(f.__code__, f.__defaults__, kw)
            self._defaults = now
        return self.signature

    def binder(self) -> Binder:
        """What binds a call's arguments to the function's parameters now (made again when its defaults change)."""
        self._signature()
        return self._binder

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


def _both(check: Callable, identity: Callable) -> Callable:
    """A kept capture's check: its guards, then the identity of the objects its identity guards named."""
    def both(frame_locals) -> bool:
        return check(frame_locals) and identity(frame_locals)

    return both


def _unchecked(args: tuple):
    return UNCHECKED


def _dropped(calls: DirectCalls) -> Callable:
    """The callback of a printed entry's guard-manager weakref: Dynamo dropped the entry (``torch._dynamo.reset()``
    frees its guard manager at once), so the printed function is made again without it."""
    ref = weakref.ref(calls)

    def drop(manager_ref):
        c = ref()
        if c is not None:
            c._printed = [p for p in c._printed if p[0] is not manager_ref]
            c._print()

    return drop


def _forget(globals_: dict, names: tuple[str, ...]) -> None:
    for name in names:
        globals_.pop(name, None)


def _renamed(code: types.CodeType, renames: dict[str, str]) -> types.CodeType:
    if not renames:
        return code
    return code.replace(co_names=tuple(renames.get(n, n) for n in code.co_names))
