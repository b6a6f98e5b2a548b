"""The base of fusion executors: a region becomes a torch program, runs with torch until its kernel is ready.

Every fusion executor does the same around its own compiler: take the region's members as a
trace of their own, bind them to torch (what runs until the fused version is ready, and what
verification runs), find the region's device, refuse to compile a region whose inputs need
autograd (no autodiff pass ran, so autograd must see every op), find the other fusion executors
that could run every member (its rivals in the region's race), and hand all that to a
``RegionRunner``, which tiers, races, times and reports. A subclass supplies two hooks:

* ``compile(region, args)``: the fused callable for this region and the source text to show
  (``compile_in_background``, for a tiered region, may do it elsewhere; by default it is ``compile``);
* ``describe(bsym)``: what the executor would make of a region, as text, without compiling
  (the ``fuse`` pass puts it in its notes; the views show it).
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from thunderlab.core.symbols import BoundSymbol, Kind, Symbol
from thunderlab.core.trace import Trace
from thunderlab.ops.rules import draws

from .base import EXECUTORS, Executor, RunOptions, bind, freeing
from .region import RegionRunner

NEEDS_AUTODIFF = ("its inputs require grad and no autodiff pass ran, so torch runs it "
                  "(autograd must see every op); add 'autodiff' before 'claim'")


def make_region(name: str, executor: str, members, outputs) -> BoundSymbol:
    """The fusion region ``name``: ``members`` (calls, in order) run as one unit by ``executor``, returning
    ``outputs``. Every region is made here (``fuse`` asks for them).

    Its inputs are the values its members read and do not make, in the order first read; its symbol
    runs the members one by one with torch, which is what printed programs and verification run, and
    what an executor's region runner starts with while its kernel compiles.
    """
    members = tuple(members)
    made = {p.name for b in members for p in b.outputs}
    read: dict = {}  # name -> proxy, in the order first read
    for b in members:
        for p in b.inputs:
            if p.name not in made:
                read.setdefault(p.name, p)
    inputs = tuple(read.values())
    sym = Symbol(name, Kind.FUSION, impl=_EagerRegion(name, inputs, members, tuple(outputs)), qualname=name)
    return BoundSymbol(sym, inputs, {}, tuple(outputs), members, members[-1].source, executor=executor)


def torch_region(bsym: BoundSymbol) -> Trace:
    """A fusion region's members as a trace of their own, every call run by torch."""
    return _torch_trace(bsym.sym.name, bsym.args, bsym.subsymbols, bsym.output)


def _torch_trace(name: str, inputs, members, outputs) -> Trace:
    names = {p.name for p in inputs} | {p.name for b in members for p in b.outputs}
    return Trace(name=name, inputs=list(inputs), bound_symbols=[b.replace(executor="torch") for b in members],
                 output=outputs, _names=names)


class _EagerRegion:
    """Runs a region's members one by one with torch (bound when first called: most regions never are)."""

    def __init__(self, name: str, inputs: tuple, members: tuple, outputs: tuple):
        self._parts = (name, inputs, members, outputs)
        self._fn = None

    def __call__(self, *args):
        if self._fn is None:
            self._fn = bind(freeing(_torch_trace(*self._parts)))
        return self._fn(*args)


class FusionExecutor(Executor):
    """An executor that owns fusion regions; subclasses implement ``compile`` and ``describe``."""

    fusion = True
    default_device = "cpu"  # where a region with no tensor input runs

    def compile(self, region: Trace, args: tuple) -> tuple[Callable, list[str]]:
        """(a function running ``region`` on inputs like ``args``, the source text to show for it).

        Called once per region, with the first call's real inputs, in the background when tiered.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement compile(region, args)")

    def compile_in_background(self, region: Trace, args: tuple) -> tuple[Callable, list[str]]:
        """``compile`` for a tiered region, called on the compile thread while the program keeps running."""
        return self.compile(region, args)

    def describe(self, bsym: BoundSymbol) -> str | None:
        """What this executor would make of the fusion region ``bsym``, as text (None: nothing to show)."""
        return None

    def writes_in_place(self, bsym: BoundSymbol) -> bool:
        """Whether a region of this executor can end with ``bsym``, a write (``prims.copy_``) of a value the region
        makes into one of its inputs, its kernel writing that input in place (the fuse pass decides where that
        keeps the program's meaning). None can by default."""
        return False

    def bind_region(self, bsym: BoundSymbol, options: RunOptions) -> RegionRunner:
        region = torch_region(bsym)
        eager = bind(freeing(region))
        device = next((p.device for p in region.tensor_inputs()), torch.device(self.default_device))
        needs_autograd = options.grad_enabled and any(p.requires_grad for p in region.tensor_inputs())

        def builders(compile_, compile_in_background):
            def build(args):
                if needs_autograd:
                    raise RuntimeError(NEEDS_AUTODIFF)
                return compile_(region, args)

            def build_in_background(args):
                if needs_autograd:
                    raise RuntimeError(NEEDS_AUTODIFF)
                return compile_in_background(region, args)

            return build, build_in_background

        build, build_in_background = builders(self.compile, self.compile_in_background)
        rivals = ()
        if options.race:
            rivals = tuple((ex.name, *builders(ex.compile, ex.compile_in_background))
                           for ex in self.rivals(bsym, options.racers))
            rivals += tuple((name, *builders(*compilers)) for name, *compilers in self.variants(region, options))
        return RegionRunner(bsym.sym.name, self.name, eager, build, tiered=options.tiered,
                            timing=options.timing, device=device,
                            compile_in_background=build_in_background,
                            rivals=rivals, race=options.race, race_off=unraceable(bsym))

    def variants(self, region: Trace, options: RunOptions) -> tuple:
        """Other kernels of this executor's own for ``region`` that join its race after the first, each as (version
        name, compile, compile in the background), the two called like ``compile``; none by default."""
        return ()

    def rivals(self, bsym: BoundSymbol, racers: tuple[str, ...]) -> list[FusionExecutor]:
        """Of the executors named in ``racers``, the other fusion executors that can run here and take every member
        of the region ``bsym``: their kernels race this executor's (nvFuser and Inductor on a GPU; on CPU only
        Inductor exists, so its kernel races torch alone)."""
        out = []
        for ex in (EXECUTORS[n] for n in racers if n in EXECUTORS):
            if (isinstance(ex, FusionExecutor) and ex is not self and ex.available()[0]
                    and all(ex.can_execute(b)[0] for b in bsym.subsymbols)):
                out.append(ex)
        return out


def unraceable(bsym: BoundSymbol) -> str | None:
    """Why the region ``bsym`` must not be raced, or None. A race runs each call with one version or another,
    which is the same only where every version computes the same: a random draw is each version's own (their
    generators advance differently). A write to an argument is not a reason: each call runs one version,
    which writes once, as the tiered start's switch from torch to the kernel already relies on (batch norm
    in training updates its running statistics once a call whichever version runs)."""
    for b in bsym.subsymbols:
        if draws(b):
            return f"not raced: {b.sym.qualname} draws random numbers, which each version draws its own way"
    return None
