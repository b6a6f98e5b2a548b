"""The executor interface and registry, and binding a trace to its executors to run it."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

from thunderlab.core.symbols import BoundSymbol, Symbol
from thunderlab.core.trace import Trace
from thunderlab.ops import collectives, prims

EXECUTORS: dict[str, Executor] = {}


def freeing(trace: Trace) -> Trace:
    """``trace`` with each value deleted right after its last use.

    The ``del`` pass does this to a program; a fusion region's torch version does it to the region's
    members, which run in one function (a backward region can hold a whole backward): without the
    deletions every intermediate would live until the region returns, where eager PyTorch frees each one
    after its last use and its allocator hands the memory to the next call.
    """
    seen = {p.name for p in trace.output_proxies()}
    out: list[BoundSymbol] = []
    for b in reversed([b for b in trace.bound_symbols if not b.sym.bookkeeping]):
        dead = []
        for p in b.inputs + b.outputs:
            if p.name not in seen:
                seen.add(p.name)
                dead.append(p)
        if dead:
            out.append(BoundSymbol(prims.python_del, tuple(dead), {}, None))
        out.append(b)
    return trace.derive(bound_symbols=out[::-1])


@dataclass(frozen=True)
class RunOptions:
    """How a bound program runs: what the runtime, verification and autograd ask of ``bind`` and of regions."""

    tiered: bool = True  # a region runs with torch while its kernel compiles, then switches to it
    timing: bool = False  # each region times its calls
    # once its kernels are compiled, a region times each version (torch, its executor's kernel, other fusion
    # executors' that can run it) on its next calls and keeps the fastest; False keeps the kernel, unraced
    race: bool = True
    racers: tuple[str, ...] = ()  # the fusion executors whose kernels may race a region's own (its rivals)
    # the caller's grad mode is on and no backward trace differentiates the program: a region whose inputs
    # require grad must keep autograd's graph, which a compiled kernel does not record
    grad_enabled: bool = False
    in_autograd_function: bool = False  # inside autograd.Function.forward: grad-mode changes record nothing
    eager_regions: bool = False  # regions run their members one by one with torch: nothing is compiled


class Executor:
    """Claims symbols and supplies the functions that run them.

    ``can_execute`` answers yes or no with a reason (kept so a view can say why an op was
    not claimed). ``available`` says whether the executor can run here at all, and why not.
    """

    name: str = ""
    fusion: bool = False  # whether it owns multi-symbol regions (the fuse pass uses it)

    def available(self) -> tuple[bool, str]:
        return True, ""

    def can_execute(self, bsym: BoundSymbol) -> tuple[bool, str]:
        raise NotImplementedError

    def implementation(self, sym: Symbol) -> Callable:
        raise NotImplementedError

    def bind_region(self, bsym: BoundSymbol, options: RunOptions) -> Callable:
        """For fusion executors: the callable that runs the fusion region ``bsym`` (see FusionExecutor)."""
        raise NotImplementedError(f"{self.name} does not run fusion regions")

    def describe(self, bsym: BoundSymbol) -> str | None:
        """For fusion executors: what it would make of the region ``bsym``, as text (None: nothing to show)."""
        return None

    def __repr__(self) -> str:
        return f"<executor {self.name}>"


def register_executor(ex: Executor) -> Executor:
    EXECUTORS[ex.name] = ex
    return ex


def get_executor(name: str) -> Executor:
    try:
        return EXECUTORS[name]
    except KeyError:
        raise KeyError(f"unknown executor {name!r}; valid executors: {', '.join(sorted(EXECUTORS))}") from None


def _keep_grad_mode(mode):
    """A grad-mode change inside autograd.Function.forward: nothing there records a graph anyway."""


def bind(trace: Trace, default: str = "torch", *, regions: dict | None = None, options: RunOptions = RunOptions(),
         packed: bool = False, traced: bool = False, communication=None):
    """Compile ``trace`` into a function whose calls run on their claiming executors.

    ``packed=True``: the function takes its inputs as one list and empties it (see codegen.python).
    ``traced=True``: the function is for a tracer (TorchDynamo, when the inductor executor compiles a
    region), so every symbol outside a region runs its own implementation, which tracers understand,
    rather than the entry point an executor would call (see TorchExecutor.implementation).

    Fusion regions are bound by their executor; pass ``regions`` (a dict) to receive the
    callable of each region by name (the runtime times them and shows their kernels). ``options`` says
    how they run (see ``RunOptions``). ``communication`` (a ``CommunicationTimer``): with ``options.timing``
    on, the collectives run through it, which times each exchange.
    """
    if not isinstance(options, RunOptions):
        raise TypeError(f"bind: options must be a RunOptions ({', '.join(f.name for f in fields(RunOptions))}), "
                        f"not {type(options).__name__}")
    impls: dict[str, Callable] = {}
    for b in trace.bound_symbols:
        ex = get_executor(b.executor or default)
        if b.sym.is_region and options.eager_regions:
            fn = b.sym.impl  # the members one by one, with torch: no kernel is compiled
        elif b.sym.is_region:
            fn = ex.bind_region(b, options)
            if regions is not None:
                regions[b.sym.name] = fn
        elif b.sym.qualname == "prims.set_grad_enabled" and options.in_autograd_function:
            fn = _keep_grad_mode
        else:
            fn = b.sym.impl if traced else ex.implementation(b.sym)
            if b.sym.communicates and communication is not None and options.timing and not traced:
                if b.sym.qualname in impls:  # wrapped at its first call already
                    continue
                fn = communication.wait(fn) if b.sym is collectives.wait else communication.issue(b.sym.name, fn)
        prev = impls.setdefault(b.sym.qualname, fn)
        if prev is not fn:
            raise ValueError(f"{b.sym.qualname} is claimed by two executors in one trace; give one of them a region")
    return trace.callable(impls=impls, packed=packed)
