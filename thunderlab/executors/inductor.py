"""The inductor executor: compiles each fusion region with TorchInductor (C++ on CPU, Triton on GPU)."""
from __future__ import annotations

import os
import shutil
import threading

import torch

from thunderlab.core.symbols import BoundSymbol, Kind, Symbol, Tag
from thunderlab.core.trace import region_trace

from .base import Executor, bind, register_executor
from .region import RegionRunner

# the torch-level or prim calls inductor is not handed
_DECLINE = {
    "eager_vjp": "runs PyTorch autograd itself",
}
_compiled: dict[tuple, tuple] = {}  # (region code, input metadata) -> (callable, kernel source)
_lock = threading.Lock()


def cache_dir() -> str:
    """Where Inductor keeps compiled regions across processes (TORCHINDUCTOR_CACHE_DIR, if set)."""
    d = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not d:
        d = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache")),
                         "thunderlab", "inductor")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = d
    return d


def _arg(b: BoundSymbol, i: int, name: str, default):
    return b.args[i] if len(b.args) > i else b.kwargs.get(name, default)


def _draws_random(b: BoundSymbol) -> bool:
    """Whether this call really draws random numbers (dropout that drops, attention with dropout)."""
    if not b.sym.random:
        return False
    if b.sym.name == "dropout":
        return bool(_arg(b, 2, "training", True)) and _arg(b, 1, "p", 0.5) > 0
    if b.sym.name == "scaled_dot_product_attention":
        return _arg(b, 4, "dropout_p", 0.0) > 0
    return True


class InductorExecutor(Executor):
    name = "inductor"
    fusion = True

    def available(self) -> tuple[bool, str]:
        if torch.cuda.is_available():
            try:
                import triton  # noqa: F401
            except ImportError:
                pass
            else:
                return True, ""
        if shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++") or shutil.which("clang++"):
            return True, ""
        return False, "TorchInductor on CPU needs a C++ compiler (install g++), or a GPU with Triton"

    def can_execute(self, bsym: BoundSymbol) -> tuple[bool, str]:
        s = bsym.sym
        if s.name in _DECLINE:
            return False, f"{s.qualname} {_DECLINE[s.name]}"
        if s.kind is Kind.OPAQUE:
            return False, f"{s.qualname} is an opaque torch call, which inductor is not handed"
        if Tag.BOOKKEEPING in s.tags:
            return False, f"{s.qualname} is bookkeeping"
        if s.side_effect:
            return False, f"{s.qualname} writes to an argument"
        if _draws_random(bsym):
            return False, f"{s.qualname} is random: inductor's generator differs from eager torch's"
        devices = {p.device.type for p in bsym.inputs + bsym.outputs}
        if devices - {"cpu", "cuda"}:
            return False, f"inductor runs on cpu and cuda, not {sorted(devices - {'cpu', 'cuda'})}"
        return True, ""

    def implementation(self, sym: Symbol):
        return sym.impl

    def bind_region(self, bsym: BoundSymbol, options: dict):
        region = region_trace(bsym).derive(bound_symbols=[b.replace(executor="torch") for b in bsym.subsymbols])
        eager = bind(region)
        device = next((p.device for p in region.tensor_inputs()), torch.device("cpu"))
        needs_autograd = options.get("grad_enabled", False) and any(p.requires_grad for p in region.tensor_inputs())
        key = (region.python(source=False, comments=False, imports=False),
               tuple((p.shape, p.dtype, p.device) for p in region.tensor_inputs()))

        def build(args):
            if needs_autograd:
                raise RuntimeError("its inputs require grad and no autodiff pass ran, so torch runs it "
                                   "(autograd must see every op); add 'autodiff' before 'claim'")
            return compile_region(key, region, args)

        return RegionRunner(bsym.sym.name, self.name, eager, build,
                            tiered=options.get("tiered", True), timing=options.get("timing", False), device=device)


def compile_region(key, region, args):
    """(compiled callable, generated kernel source) for a region, memoized by its code and input metadata."""
    with _lock:
        hit = _compiled.get(key)
    if hit is not None:
        return hit
    cache_dir()
    from unittest import mock

    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.graph import GraphLowering

    captured: list = []

    def backend(gm, example_inputs):
        sources = [getattr(getattr(n.meta.get("grapharg"), "source", None), "local_name", None)
                   for n in gm.graph.find_nodes(op="placeholder")]
        compiled = compile_fx(gm, example_inputs)
        captured.append((sources, compiled))
        return compiled

    guarded = torch.compile(bind(region, traced=True), backend=backend, fullgraph=True, dynamic=False)
    source: list[str] = []
    # Inductor hands each generated module to this hook; unlike its run_and_get_code helper,
    # catching it here leaves TorchDynamo's caches (the user's compiled frames) alone
    with mock.patch.object(GraphLowering, "save_output_code", staticmethod(source.append)), torch.no_grad():
        guarded(*args)  # compiles, with the first call's real inputs (their types and strides)
    if not source:
        source.append("# Inductor handed back no kernel source for this region")
    fn = _direct(region, captured, guarded)
    with _lock:
        _compiled[key] = (fn, source)
    return fn, source


def _direct(region, captured, guarded):
    """Call Inductor's compiled graph without a second TorchDynamo frame (and its guards) per call.

    thunderlab's cache already keys the region on its inputs' metadata, and Inductor checks
    sizes and strides itself; a call it rejects goes through the guarded function instead.
    """
    if len(captured) != 1:
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
