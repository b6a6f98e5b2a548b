"""The public face of thunderlab: jit, records and traces of compilations."""
from __future__ import annotations

import functools
import weakref

import torch

from thunderlab.core import fastpaths
from thunderlab.core.fastpaths import set_fast_paths
from thunderlab.core.trace import Trace
from thunderlab.executors import compile_process, default_order
from thunderlab.frontend import captures
from thunderlab.frontend.dispatch import MISS, UNCHECKED, DirectCalls
from thunderlab.frontend.dynamo import ISOLATED, Backend, BackendLink, through_dynamo
from thunderlab.inspect.document import SUFFIX, RecordFileError
from thunderlab.inspect.document import load as _load
from thunderlab.inspect.document import save as _save
from thunderlab.inspect.record import CompileRecord
from thunderlab.passes import DEFAULT_PIPELINE
from thunderlab.passes.base import PipelineError
from thunderlab.runtime.compiled import Options, all_records, clear_records, set_limits
from thunderlab.runtime.recorder import RecordWriter, from_environment
from thunderlab.runtime.recorder import record_to as _record_to
from thunderlab.runtime.session import NotLive, Session, live, refresh
from thunderlab.verbs import bisect, compare, rerun


class JitFunction:
    """A function or module compiled by thunderlab; call it like the original."""

    def __init__(self, fn, options: Options, direct: bool = True):
        self.fn = fn
        self.options = options
        if options.tiered:  # the kernel compiler's worker imports while the first call captures (compile_process)
            compile_process.expect(options.pipeline, tuple(fn.parameters()) if isinstance(fn, torch.nn.Module) else (),
                                   default_order())
        name = type(fn).__name__ if isinstance(fn, torch.nn.Module) else getattr(fn, "__name__", "fn")
        self.backend = Backend(options, name=name)
        link = BackendLink(self.backend)  # Dynamo keeps what it is given: the graphs go when this object goes
        hook = captures.GuardHook()  # tells the captures kept on disk when a frame's guards are built
        self._compiled = torch._dynamo.optimize(link, guard_export_fn=hook, **ISOLATED)(fn)
        # calls whose Dynamo guards pass skip Dynamo's frame hook (see thunderlab.frontend.dispatch)
        self.direct = DirectCalls(fn, self._compiled, link) if direct else None
        if self.direct is not None and self.direct.func is not None and captures.enabled():
            # a later process's first call runs this one's capture (see thunderlab.frontend.captures)
            store = captures.Store(self.direct.func, self.backend, link)
            self.direct.kept = self.backend.captures = store
            hook.store = weakref.ref(store)
        if not isinstance(fn, torch.nn.Module):
            functools.update_wrapper(self, fn)

    _module = False  # a JitModule's is True

    def __call__(self, *args, **kwargs):
        if self._module and (self._forward_hooks or self._forward_pre_hooks or self._backward_hooks
                             or self._backward_pre_hooks):
            return torch.nn.Module.__call__(self, *args, **kwargs)  # hooks registered on it run around its forward
        direct = self.direct
        if direct is not None and fastpaths._enabled:  # a fast path (see thunderlab.core.fastpaths)
            if not kwargs:
                out = direct.run(args)  # the printed checks of entries that ran directly before
                if out is not UNCHECKED:
                    return out
            out = direct(args, kwargs)
            if out is not MISS:
                return out
            out = through_dynamo(self._compiled, args, kwargs)
            direct.keep_captured()
            return out
        return through_dynamo(self._compiled, args, kwargs)

    @property
    def records(self) -> list[CompileRecord]:
        """This function's records, oldest first, their region snapshots brought up to date."""
        recs = sorted((r for g in self.backend.graphs for r in g.records), key=lambda r: r.created)
        refresh(recs)
        return recs

    @property
    def cache_info(self) -> dict[str, int]:
        """Calls that found a compiled program (``hits``) and that compiled one (``misses``); TorchDynamo's graphs,
        those ending at a graph break and those captured again after a guard failed (each record's capture step
        says where and why); calls that ran past Dynamo's frame hook (``direct_calls``); calls run as TorchDynamo
        captured their graph because its sizes kept changing (``ran_as_captured``: see ``set_limits(new_sizes=)``);
        captures this process kept on disk for a later one and loaded from an earlier one (``captures_kept``,
        ``captures_loaded``: see ``thunderlab.frontend.captures``)."""
        graphs = self.backend.graphs
        store = self.direct.kept if self.direct else None
        return {"hits": sum(g.hits for g in graphs), "misses": sum(g.misses for g in graphs), "graphs": len(graphs),
                "graph_breaks": sum(1 for g in graphs if "graph_break" in g.origin),
                "recompiles": sum(1 for g in graphs if "recompiled_because" in g.origin),
                "direct_calls": self.direct.hits if self.direct else 0,
                "ran_as_captured": sum(g.as_captured for g in graphs),
                "captures_kept": store.kept if store is not None else 0,
                "captures_loaded": store.loaded if store is not None else 0}

    def __repr__(self) -> str:
        return f"<thunderlab.jit {self.backend.name} pipeline={self.options.pipeline!r}>"

    def __reduce__(self):
        """A copy (``copy.deepcopy``, as of a model for its moving average; pickling; ``torch.save``) is a copy of
        the function or module jitted anew with the same options: records and compiled programs stay with this one."""
        return _jit_again, (self.fn, self.options, self.direct is not None)


def _jit_again(fn, options: Options, direct: bool) -> JitFunction:
    return (JitModule if isinstance(fn, torch.nn.Module) else JitFunction)(fn, options, direct=direct)


# what a JitModule shares with the module it compiles: the same dictionary objects, so that parameters, buffers,
# submodules and state-dict hooks added or replaced on either are the other's too
_SHARED = ("_parameters", "_buffers", "_non_persistent_buffers_set", "_modules", "_state_dict_hooks",
           "_state_dict_pre_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks")
# attributes a JitModule keeps for itself; every other attribute set on it is set on the module it compiles
_OWN = frozenset({"fn", "options", "backend", "_compiled", "direct", "forward"})


class JitModule(JitFunction, torch.nn.Module):
    """``thunderlab.jit`` of an ``nn.Module``: a module that runs the compiled program and is otherwise the original.

    It stands in for the module wherever a module goes, as ``model = thunderlab.jit(model)`` in a training script
    expects: it shares the original's parameters, buffers, submodules and state-dict hooks (the same
    dictionaries), so ``parameters()``, ``named_modules()``, ``state_dict()`` and ``load_state_dict()`` give and
    take the original's names, also as a submodule of another (``model.encoder = thunderlab.jit(model.encoder)``);
    ``train()``, ``eval()``, ``to()`` and ``apply()`` act on the original and return the jitted module; other
    attributes are read from and set on the original (``fn`` is the original itself). Hooks registered on the
    jitted module run around the compiled call; the original's own hooks are part of what is compiled.
    ``isinstance`` answers as for the original (``isinstance(jitted, type(module))``; ``type(jitted)`` is
    ``JitModule``), so libraries that choose by the model's class (a Trainer saving a checkpoint) treat it alike.
    """

    def __init__(self, module: torch.nn.Module, options: Options, direct: bool = True):
        torch.nn.Module.__init__(self)
        for name in _SHARED:
            object.__setattr__(self, name, getattr(module, name))
        JitFunction.__init__(self, module, options, direct)
        compiled = self._compiled

        def forward(*args, **kwargs):  # what nn.Module's call runs between hooks registered on this module
            return through_dynamo(compiled, args, kwargs)

        # with the original's signature, for those who read it (a Hugging Face Trainer keeps the dataset's columns
        # that the model's forward names)
        object.__setattr__(self, "forward", functools.update_wrapper(forward, module.forward))

    _module = True  # JitFunction.__call__ sends calls to nn.Module's while hooks are registered on it

    @property
    def __class__(self):
        """The original's class, so that ``isinstance(jitted, type(model))`` holds as it does for the model.

        Libraries decide by the model's class what to do with it: a Hugging Face ``Trainer`` saves a checkpoint
        with ``save_pretrained`` (which handles tied weights) only for a ``PreTrainedModel``. ``type(jitted)`` is
        still ``JitModule``, and ``isinstance(jitted, JitModule)`` holds too.
        """
        return type(self.__dict__["fn"]) if "fn" in self.__dict__ else type(self)

    @__class__.setter
    def __class__(self, cls) -> None:
        raise TypeError(f"cannot change the class of a module jitted by thunderlab (to {cls.__name__}); change the "
                        f"original's before jitting it (torch.nn.utils.parametrize does, for one)")

    @property
    def training(self) -> bool:
        return self.fn.training

    @training.setter
    def training(self, mode: bool) -> None:
        fn = self.__dict__.get("fn")
        if fn is not None:  # Module.__init__ sets it before the original is known
            fn.training = mode

    def train(self, mode: bool = True):
        self.fn.train(mode)
        return self

    def apply(self, fn):
        self.fn.apply(fn)
        return self

    def _apply(self, fn, recurse=True):  # to(), cuda(), float(), half(), ...: the original's own, which may add work
        self.fn._apply(fn, recurse)
        return self

    def state_dict(self, *args, **kwargs):
        return self.fn.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        return self.fn.load_state_dict(state_dict, strict=strict, assign=assign)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        self.fn._save_to_state_dict(destination, prefix, keep_vars)

    def _load_from_state_dict(self, *args, **kwargs):  # as a submodule of a module loading a state dict
        self.fn._load_from_state_dict(*args, **kwargs)

    def extra_repr(self) -> str:
        return self.fn.extra_repr()

    def __getattr__(self, name: str):
        try:
            return torch.nn.Module.__getattr__(self, name)  # the shared parameters, buffers and submodules
        except AttributeError:
            fn = self.__dict__.get("fn")
            if fn is None:
                raise
        return getattr(fn, name)

    def __setattr__(self, name: str, value) -> None:
        if name in _OWN or hasattr(type(self), name) or "fn" not in self.__dict__:
            object.__setattr__(self, name, value)
        else:
            setattr(self.fn, name, value)

    def __delattr__(self, name: str) -> None:
        if name in _OWN or name in self.__dict__:
            object.__delattr__(self, name)
        else:
            delattr(self.fn, name)

    def __dir__(self):
        return sorted(set(dir(self.fn)) | set(object.__dir__(self)))

    def __repr__(self) -> str:
        return f"thunderlab.jit(pipeline={self.options.pipeline!r}) of {self.fn!r}"


def jit(fn, *, pipeline: str = DEFAULT_PIPELINE, verify: bool = False, tiered: bool = True, race: bool = True,
        timing: bool = False, direct: bool = True, keep_inputs: bool = False) -> JitFunction:
    """Compile ``fn`` (a function or nn.Module) with thunderlab; results equal ``fn``'s.

    An nn.Module gives a ``JitModule``: a module that stands in for it (``model = thunderlab.jit(model)``), with
    its parameters, state dict, ``train()``, ``eval()`` and attributes.

    ``pipeline`` is the pass pipeline as text, e.g. ``"dce,cse,claim{executors=inductor+torch},fuse,del"``;
    ``verify=True`` checks every step against eager PyTorch on the first inputs.
    ``tiered=True`` runs each fusion region with torch at once while its kernel compiles in
    the background (``False`` compiles before the first call); ``timing=True`` times every
    region on every call (``thunderlab.last_record(jfn).timings()``).
    ``race=True``: once a region's kernels are compiled, its next calls take turns between torch and each
    fusion executor's kernel (a few timed calls each), and the fastest is kept, torch included (the verdict
    and its times are in ``record.regions[name]["race"]``); ``False`` keeps the kernel once it is compiled.
    ``direct=True`` runs a call whose TorchDynamo guards pass on the bytecode Dynamo made for it,
    without Dynamo's per-call frame machinery; ``False`` sends every call through Dynamo.
    ``keep_inputs=True`` makes records' sessions hold the inputs they were compiled for (by default they hold
    them weakly, so a record never keeps data or parameters alive; bisection needs them; ``verify=True`` keeps them).
    """
    try:  # THUNDERLAB_EXECUTORS is checked now, not at the first call
        default_order()
    except ValueError as e:
        raise PipelineError(str(e)) from None
    if not isinstance(race, bool):
        raise TypeError(f"thunderlab.jit: race must be True (race each region's versions and keep the fastest) "
                        f"or False (keep the kernel once compiled), not {race!r}")
    if isinstance(fn, JitFunction):
        raise TypeError(f"thunderlab.jit: {fn!r} is compiled by thunderlab already; jit the function or module it "
                        f"compiles ({type(fn).__name__}.fn) to compile it with other options")
    options = Options(pipeline=pipeline, verify=verify, tiered=tiered, race=race, timing=timing,
                      keep_inputs=keep_inputs)
    if isinstance(fn, torch.nn.Module):
        return JitModule(fn, options, direct=direct)
    return JitFunction(fn, options, direct=direct)


def last_record(jfn: JitFunction) -> CompileRecord:
    """The newest compile record of a jitted function."""
    recs = _records_of(jfn)
    if not recs:
        raise ValueError(f"{jfn!r} has not been compiled yet: call it once first")
    return recs[-1]


def last_traces(jfn: JitFunction, trace: str = "forward") -> list[Trace]:
    """One trace per step of the last compilation (step 0 is the captured trace)."""
    return [s.program.traces[trace] for s in last_record(jfn).steps if s.program is not None]


def records() -> list[CompileRecord]:
    """The compile records this process keeps (the newest 100 by default; see ``set_limits``), newest last."""
    recs = list(all_records())
    refresh(recs)  # their region snapshots brought up to date
    return recs


def session(record: CompileRecord) -> Session:
    """The live part of a record made in this process: ``example_inputs``, ``regions`` (each fusion region's
    runner), ``wait()``, ``timings()``. A record loaded from a file, or whose function was dropped, has none
    (``NotLive``)."""
    return live(record, "thunderlab.session", "a record made by a live function in this process")


def save(record: CompileRecord, path) -> str:
    """Write ``record`` to ``path`` (named ``NAME.thunderlab.json``) for ``thunderlab.load``; returns the path."""
    refresh([record])
    return str(_save(record, path))


def load(path) -> CompileRecord:
    """The record saved in ``path`` (a ``*.thunderlab.json`` file): its steps, programs, diffs, graphs, notes,
    timings and kernel profiles; no running code (``record.loaded`` is True).

    A file that is not such a record (damaged, cut short, another version) raises ``RecordFileError``.
    """
    return _load(path)


def record_to(directory, *, max_files: int = 1000, max_mb: float = 256.0) -> RecordWriter | None:
    """Write every record this process makes, as it is made, to ``directory`` (one ``*.thunderlab.json`` each).

    Writing happens on a background thread, never in the compiled call; at most ``max_files`` files and
    ``max_mb`` megabytes are written. ``None`` stops writing. ``THUNDERLAB_RECORDS=DIR`` does this at import.
    """
    return _record_to(directory, max_files=max_files, max_mb=max_mb)


def profile(jfn: JitFunction, *args, **kwargs) -> dict[str, list[dict]]:
    """Call ``jfn`` once under the torch profiler; the kernels each fusion region ran, by region.

    Each record that ran keeps its share as ``record.kernels`` (shown by the report, the widget and the sidebar).
    """
    from thunderlab.runtime.profile import merged_kernels, profile_records

    _, by_record = profile_records(jfn, *args, **kwargs)
    for r in all_records():
        if r.uid in by_record:
            r.kernels = by_record[r.uid]
    return merged_kernels(by_record)


def _records_of(jfn) -> list[CompileRecord]:
    if isinstance(jfn, JitFunction):
        return jfn.records
    raise TypeError(f"expected a function made by thunderlab.jit, got {type(jfn).__name__}; "
                    f"for torch.compile(backend='thunderlab') use thunderlab.records()")


from_environment()  # THUNDERLAB_RECORDS=DIR: records written as they are made (see record_to)

__all__ = ["JitFunction", "JitModule", "NotLive", "RecordFileError", "SUFFIX", "bisect", "set_fast_paths",
           "clear_records", "compare", "jit", "last_record", "last_traces", "load", "profile", "record_to", "records",
           "rerun", "save", "session", "set_limits"]
