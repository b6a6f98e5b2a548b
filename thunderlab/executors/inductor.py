"""The inductor executor: compiles each fusion region with TorchInductor (C++ on CPU, Triton on GPU)."""
from __future__ import annotations

import functools
import os
import shutil
import threading
import weakref
from collections import deque
from collections.abc import Callable

import torch

from thunderlab.core import fastpaths
from thunderlab.core.symbols import BoundSymbol, Kind, Symbol, Tag
from thunderlab.core.trace import Trace
from thunderlab.ops.rules import draws

from . import compile_process, gemm
from .base import RunOptions, bind, register_executor
from .fusion import FusionExecutor, torch_region

# the torch-level or prim calls inductor is not handed
_DECLINE = {
    "eager_vjp": "differentiates Python code that is not PyTorch's own (PyTorch's go in, as torch.func.vjp)",
    "eager_vjp_on_copies": "runs PyTorch autograd itself",
    "eager_vjp_replaying": "runs PyTorch autograd itself, from a saved generator state",
    "apply_grad_hook": "calls the user's gradient hook, Python code",
    "custom_op_vjp": "calls a custom operator's registered backward, the user's Python code",
}
# compiled regions by (region code, input metadata) -> (the callable, weakly; the kernel source). Functions that
# have the same region share its kernel: an entry lasts while any function runs it, and the newest are kept
# besides (thunderlab.set_limits(kernels=...)), so a cell run again, its old function already dropped, finds
# them compiled. Each kept kernel holds Inductor's compiled graph and TorchDynamo's capture of the region
_compiled: dict[tuple, tuple[weakref.ref, list[str]]] = {}
_recent: deque[Callable] = deque(maxlen=64)
_lock = threading.RLock()  # re-entered when a collection during an update frees a callable (see _forget)


@functools.lru_cache(maxsize=8)
def _compiler(cxx: str, path: str) -> bool:
    """Whether a C++ compiler is on ``path`` (``cxx``, c++ or clang++); looked up once per setting, as claiming
    asks for every call of a program."""
    return any(shutil.which(c, path=path) for c in (cxx, "c++", "clang++"))


class InductorExecutor(FusionExecutor):
    name = "inductor"

    def available(self) -> tuple[bool, str]:
        if torch.cuda.is_available():
            try:
                import triton  # noqa: F401
            except ImportError:
                pass
            else:
                return True, ""
        if _compiler(os.environ.get("CXX", "g++"), os.environ.get("PATH", "")):
            return True, ""
        return False, "TorchInductor on CPU needs a C++ compiler (install g++), or a GPU with Triton"

    def can_execute(self, bsym: BoundSymbol) -> tuple[bool, str]:
        s = bsym.sym
        if s.name == "eager_vjp" and _traceable_vjp(bsym):
            return True, ""  # TorchDynamo captures it as torch.func.vjp (see ops.vjp._vjp_traced)
        if s.name == "custom_op_vjp" and _traceable_custom_vjp(bsym):
            return True, ""  # TorchDynamo inlines the operator's registered derivative (ops.vjp._custom_op_vjp_impl)
        if s.name in _DECLINE:
            return False, f"{s.qualname} {_DECLINE[s.name]}"
        if s.name == "avg_pool2d_backward" and _overhangs(bsym):
            return False, (f"{s.qualname} with ceil_mode windows that overhang the input: Inductor's lowering of it "
                           f"gives wrong gradients (torch 2.13; torch.compile alike), torch's kernel is right")
        if s.kind is Kind.OPAQUE and Tag.TORCH_TRACEABLE not in s.tags:
            return False, f"{s.qualname} is an opaque call of Python code, which inductor is not handed"
        if Tag.BOOKKEEPING in s.tags:
            return False, f"{s.qualname} is bookkeeping"
        if s.communicates:
            return False, f"{s.qualname} is a collective: torch.distributed runs it"
        if writes(bsym):
            return False, f"{s.qualname} writes to an argument"
        if draws(bsym):  # dropout that drops, attention with dropout: each op says when (ops.rules.DRAWS)
            return False, f"{s.qualname} is random: inductor's generator differs from eager torch's"
        devices = {p.device.type for p in bsym.inputs + bsym.outputs}
        if devices - {"cpu", "cuda"}:
            return False, f"inductor runs on cpu and cuda, not {sorted(devices - {'cpu', 'cuda'})}"
        return True, ""

    def implementation(self, sym: Symbol):
        return sym.impl

    def compile(self, region: Trace, args: tuple) -> tuple[Callable, list[str]]:
        return compile_region(_key(region), region, args)

    def bind_region(self, bsym: BoundSymbol, options: RunOptions):
        if options.tiered and fastpaths.enabled() and all(
                p.device.type == "cpu" for p in bsym.inputs if hasattr(p, "device")) and \
                not compile_process.answered_before(torch_region(bsym)):
            compile_process.start()  # its imports overlap the first call, which runs the region with torch
        return super().bind_region(bsym, options)

    def compile_in_background(self, region: Trace, args: tuple) -> tuple[Callable, list[str]]:
        """In the worker process where it can (see compile_process.py): a compile here would compete with the
        running program for the interpreter lock."""
        return compile_region(_key(region), region, args, elsewhere=fastpaths.enabled())

    def variants(self, region: Trace, options: RunOptions) -> tuple:
        """A tiered CPU region's second kernel, raced against its first: the same module with Inductor's C++ wrapper
        (``inductor-cpp``), which calls the kernels and library functions from C++ where the first module's Python
        lines call them one by one (a few microseconds each: a tenth of a small model's training step). Its compile
        takes longer (seconds to a minute, cold), so it comes after the first kernel runs, from a second worker
        process only, at the lowest CPU priority, never ahead of another region's first kernel; a fast path
        (``set_fast_paths(False)`` leaves it out, and so does ``THUNDERLAB_CPP_WRAPPER=0`` in the environment)."""
        if not (options.tiered and fastpaths.enabled() and cpp_wrapper_enabled()
                and compile_process.unavailable() is None and compile_process.unavailable(cpp_wrapper=True) is None
                and all(p.device.type == "cpu" for p in region.tensor_inputs())):
            return ()

        def here(region, args):
            raise RuntimeError("Inductor's C++ wrapper is compiled only by the worker process, in the background")

        def in_background(region, args):
            first = _cached(_key(region))[0]  # the region's first module (compiled before), for other strides
            return compile_region(_key(region) + (CPP_WRAPPER,), region, args, elsewhere=True, cpp_wrapper=True,
                                  fallback=first)

        return ((CPP_WRAPPER, here, in_background),)

    def writes_in_place(self, bsym: BoundSymbol) -> bool:
        """A ``prims.copy_`` into a region input: TorchDynamo captures it as an in-place write of a graph input,
        which AOTAutograd keeps in the inference graph it hands Inductor, and Inductor's kernel stores the value
        into the input's memory (batch norm's running statistics in training, as torch.compile writes them)."""
        return (bsym.sym.qualname == "prims.copy_"
                and {p.device.type for p in bsym.inputs} <= {"cpu", "cuda"})

    def describe(self, bsym: BoundSymbol) -> str:
        """The region as the torch program Inductor is handed (its kernels exist once it has run)."""
        return torch_region(bsym).python(source=False, imports=False)


def _traceable_vjp(bsym: BoundSymbol) -> bool:
    """Whether ``bsym`` (``ltorch.eager_vjp``) differentiates a call of one of PyTorch's own functions or
    operators, which TorchDynamo traces through ``torch.func.vjp`` (a user's Python function may do what
    Dynamo cannot; a library's operator may have autograd that torch.func refuses)."""
    from thunderlab.ops import prims
    from thunderlab.ops.declare import LTORCH, OPAQUE

    qualname = bsym.args[0] if bsym.args else None
    if not isinstance(qualname, str):
        return False
    module, _, name = qualname.partition(".")
    if module == "torch":  # an opaque call of a torch function (which the compile worker's torch has too)
        sym = next((s for s in OPAQUE.values() if s.qualname == qualname), None)
        if sym is None or Tag.TORCH_TRACEABLE not in sym.tags:
            return False
        op = sym.impl
        if isinstance(op, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)) and \
                op._qualified_op_name.partition("::")[0] != "aten":
            return False  # a library's operator: its autograd may not be one torch.func runs
    elif module in ("ltorch", "prims"):  # a torch-level symbol or a primitive: each runs its torch function
        sym = LTORCH.get(name) if module == "ltorch" else getattr(prims, name, None)
        if not isinstance(sym, Symbol):
            return False
    else:  # a function known only to this process (a user's, or one made at run time)
        return False
    return not sym.tags & {Tag.RANDOM, Tag.SIDE_EFFECT}


def _traceable_custom_vjp(bsym: BoundSymbol) -> bool:
    """Whether ``bsym`` (``ltorch.custom_op_vjp``) differentiates a custom operator whose registered derivative
    TorchDynamo traces whole (``ops.vjp.custom_vjp_traceable``); its region compiles here, as the worker lacks
    the operator."""
    from thunderlab.ops.vjp import custom_vjp_traceable

    return bool(bsym.args) and isinstance(bsym.args[0], str) and custom_vjp_traceable(bsym)


def _overhangs(bsym: BoundSymbol) -> bool:
    """Whether an ``avg_pool2d_backward(g, a, kernel_size, stride, padding, ceil_mode, ...)`` call has ceil_mode on
    and a last window that reaches past the (padded) input, as EfficientNet's whole-map pooling does."""
    _g, a, kernel, stride, padding, ceil_mode = bsym.args[:6]
    if not ceil_mode:
        return False
    size = a.shape[-2:]
    return any(k > n + 2 * p or (n + 2 * p - k) % s for n, k, s, p in zip(size, kernel, stride or kernel, padding))


def writes(bsym: BoundSymbol) -> bool:
    """Whether this call writes to an argument. Its symbol's tag says it may (batch_norm updates its running
    statistics, but only in training); where the call was decomposed, its decomposition says whether this one does."""
    if not bsym.side_effect:
        return False
    if not bsym.subsymbols or Tag.SIDE_EFFECT in bsym.effects:
        return True
    return any(writes(s) for s in bsym.subsymbols)


def keep_recent(n: int) -> None:
    """Keep the newest ``n`` compiled regions besides those a live function runs (the oldest go at once)."""
    global _recent
    with _lock:
        _recent = deque(_recent, maxlen=n)


def recent_limit() -> int:
    return _recent.maxlen


def _key(region: Trace) -> tuple:
    return (region.python(source=False, comments=False, imports=False),
            tuple((p.shape, p.dtype, p.device) for p in region.tensor_inputs()), gemm.enabled())


CPP_WRAPPER = "inductor-cpp"  # the version of a region whose module has Inductor's C++ wrapper


def cpp_wrapper_enabled() -> bool:
    """Whether tiered CPU regions race a second kernel with Inductor's C++ wrapper (``THUNDERLAB_CPP_WRAPPER``, on
    unless 0, false, off or no)."""
    return fastpaths.switched_on("THUNDERLAB_CPP_WRAPPER")


def compile_region(key, region, args, *, elsewhere: bool = False, cpp_wrapper: bool = False, fallback=None):
    """(compiled callable, generated kernel source) for a region, memoized by its code and input metadata.

    ``elsewhere``: compiled by the worker process when it can take the region (a fast path: see
    compile_process.py); the reason it could not is kept as the callable's ``compiled_here_because``.
    ``cpp_wrapper``: the module with Inductor's C++ wrapper, from the worker only (``Declined`` where it cannot);
    ``fallback`` runs its calls in strides it was not compiled for (see ``_loaded``).
    Inductor's cache directory is its own (TORCHINDUCTOR_CACHE_DIR when set): thunderlab sets nothing in
    os.environ.
    """
    fn, source = _cached(key)
    if fn is not None:
        return fn, source
    reason = None
    if elsewhere:
        try:
            loaded, source = compile_process.load(compile_process.request(region, args, cpp_wrapper=cpp_wrapper))
        except compile_process.Declined as e:
            if cpp_wrapper:
                raise
            reason = str(e)
        else:
            return _keep(key, _loaded(region, loaded, cpp_wrapper, fallback), source, {}), source
    from torch._inductor.compile_fx import compile_fx

    captured: list = []

    def backend(gm, example_inputs):
        sources = [getattr(getattr(n.meta.get("grapharg"), "source", None), "local_name", None)
                   for n in gm.graph.find_nodes(op="placeholder")]
        # each C++ kernel names itself to the torch profiler (thunderlab.profile lists cpp_fused_* per region);
        # outside a profile the mark costs a check of whether anything listens. A patch of this compile only.
        compiled = compile_fx(gm, example_inputs,
                              config_patches={"cpp.enable_kernel_profile": True, **gemm.config_patches()})
        captured.append((sources, compiled))
        return compiled

    traced = bind(region, traced=True)
    guarded = torch.compile(traced, backend=backend, fullgraph=True, dynamic=False)
    if any(writes(b) for b in region.bound_symbols):  # the compiling call must not write the caller's tensors
        args = tuple(compile_process.copy_like(a) for a in args)
    with torch.no_grad(), gemm.collecting() as products:
        guarded(*args)  # compiles, with the first call's real inputs (their types and strides)
    source = kernel_source(compiled for _, compiled in captured)
    fn = _direct(region, captured, guarded)
    fn.gemm = gemm.remembered([getattr(c, "source_code", None) for _, c in captured], products)
    captured.clear()  # TorchDynamo keeps every backend it was given, ``backend`` and this list with it
    if reason is not None:
        fn = _noted(fn, reason)
    return _keep(key, fn, source, traced.__globals__), source


def _cached(key) -> tuple:
    """(the compiled callable kept for ``key``, its source), or (None, None)."""
    with _lock:
        hit = _compiled.get(key)
    fn = hit[0]() if hit is not None else None
    return (fn, hit[1]) if fn is not None else (None, None)


def _keep(key, fn, source, globals_):
    with _lock:
        _compiled[key] = (weakref.ref(fn), source)
        _recent.append(fn)
    weakref.finalize(fn, _forget, key, globals_)
    return fn


def _noted(fn, reason: str):
    def run(*args):
        return fn(*args)

    run.compiled_here_because = reason
    run.gemm = getattr(fn, "gemm", None)
    return run


RECALLED = "worker process of an earlier run (its module found on disk)"
MAX_LAYOUTS = 4  # input strides a region is compiled for besides its first call's
PENDING = object()  # a layout whose compile is under way


def _layout(args) -> tuple:
    return tuple((tuple(a.stride()), a.storage_offset()) if isinstance(a, torch.Tensor) else None for a in args)


def _missed(e: Exception, cpp_wrapper: bool) -> bool:
    """Whether a module's call failed its check of its inputs' sizes and strides (and did nothing else): Python's
    ``assert_size_stride`` raises AssertionError, the C++ wrapper's a RuntimeError saying what it expected."""
    if cpp_wrapper:
        return isinstance(e, RuntimeError) and str(e).startswith("expected ")
    return isinstance(e, AssertionError)


def _loaded(region: Trace, call, cpp_wrapper: bool = False, fallback=None):
    """The worker's module for ``region``. Inductor's module checks its inputs' sizes and strides; a call whose
    strides it was not compiled for runs with torch (or ``fallback``: the C++ wrapper's module falls back to the
    region's first module, which runs in more layouts sooner), and the worker compiles the region again for those
    strides, in the background: a backward region compiled while the forward ran on the torch executor gets its
    saved values in other strides once the forward's own kernel runs, and would otherwise run torch on every call.
    ``run.layouts`` holds the modules by strides (``PENDING`` while its compile is under way, None when it
    failed); ``run.fallbacks`` counts the calls torch or ``fallback`` ran, and ``run.compiling()`` says whether a
    compile is under way (the executor race leaves out a call that ran another version meanwhile: it timed no kernel
    of its own)."""
    eager = fallback

    def compile_for(layout, specs) -> None:
        try:
            run.layouts[layout] = compile_process.load(
                compile_process.request_specs(region, specs, cpp_wrapper=cpp_wrapper))[0]
        except Exception:  # noqa: BLE001 - declined or failed: calls in these strides keep running torch
            run.layouts[layout] = None

    def run(*args):
        nonlocal eager
        try:
            return call(*args)
        except (AssertionError, RuntimeError) as e:  # Inductor's module checks sizes and strides itself
            if not _missed(e, cpp_wrapper):
                raise
        layout = _layout(args)
        other = run.layouts.get(layout, False)
        if callable(other):
            try:
                return other(*args)
            except (AssertionError, RuntimeError) as e:
                if not _missed(e, cpp_wrapper):
                    raise
        elif other is False and len(run.layouts) < MAX_LAYOUTS:
            run.layouts[layout] = PENDING
            try:
                specs = compile_process.input_specs(args)
            except compile_process.Declined:
                run.layouts[layout] = None
            else:
                threading.Thread(target=compile_for, args=(layout, specs), daemon=True,
                                 name=f"thunderlab-layout-{region.name}").start()
        if eager is None:
            eager = bind(region)
        run.fallbacks += 1
        return eager(*args)

    run.compiled_in = RECALLED if getattr(call, "recalled", False) else "worker process"
    run.gemm = getattr(call, "gemm", None)
    run.light = getattr(call, "light", False)  # loaded without Inductor's compile-time imports (compile_process.load)
    run.layouts = {}
    run.fallbacks = 0
    run.compiling = lambda: any(v is PENDING for v in list(run.layouts.values()))
    return run


def kernel_source(compiled_graphs) -> list[str]:
    """The Python module Inductor generated for each compiled graph (its kernels and their calls).

    Inductor's compiled graph carries the module it wrote (``source_code``), whether it was compiled now or
    read from Inductor's caches; a graph without it is said in a comment.
    """
    source = [code for code in (getattr(c, "source_code", None) for c in compiled_graphs) if code]
    return source or ["# Inductor handed back no kernel source for this region"]


def _forget(key: tuple, globals_: dict) -> None:
    """A region's callable was freed: drop its entry (unless a newer compile of the same region replaced it), and
    the compiled graph TorchDynamo put in the region function's globals. Dynamo keeps that function after its last
    caller is gone, and the name with it; the name stays (Dynamo removes it itself if it ever lets go), its graph
    goes."""
    with _lock:
        entry = _compiled.get(key)
        if entry is not None and entry[0]() is None:
            del _compiled[key]
    for name in [n for n in globals_ if n.startswith("__compiled_fn")]:
        globals_[name] = None


def _direct(region, captured, guarded):
    """Call Inductor's compiled graph without a second TorchDynamo frame (and its guards) per call.

    thunderlab's cache already keys the region on its inputs' metadata, and Inductor checks
    sizes and strides itself; a call it rejects goes through the guarded function instead.
    """
    if len(captured) != 1 or not fastpaths.enabled():
        return guarded
    sources, compiled = captured[0]
    names = [p.name for p in region.inputs]
    # every input must be a graph input of its own: TorchDynamo merges inputs that were the
    # same tensor on the first call, which only its guards would keep correct
    if sorted(sources, key=str) != sorted(names):
        return guarded
    order = [names.index(s) for s in sources]

    def run(*args):
        try:
            return compiled(*[args[i] for i in order])
        except AssertionError:  # a size or stride Inductor did not compile for
            return guarded(*args)

    return run


register_executor(InductorExecutor())
