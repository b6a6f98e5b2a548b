"""The inductor executor: compiles each fusion region with TorchInductor (C++ on CPU, Triton on GPU)."""
from __future__ import annotations

import os
import shutil
import threading

import torch

from thunderlab.core.symbols import BoundSymbol, Symbol
from thunderlab.core.trace import region_trace

from .base import Executor, bind, register_executor
from .region import RegionRunner

# the torch-level or prim calls inductor is not handed
_DECLINE = {
    "copy_": "writes to an argument",
    "python_del": "bookkeeping",
    "eager_vjp": "runs PyTorch autograd itself",
    "uniform": "random: inductor's generator differs from eager torch's",
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


def _example(p):
    if p.dtype.is_floating_point or p.dtype.is_complex:
        return torch.randn(p.shape, dtype=p.dtype, device=p.device)
    return torch.zeros(p.shape, dtype=p.dtype, device=p.device)  # zeros are valid indices


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
        if s.module == "torch":
            return False, f"{s.qualname} is an opaque torch call, which inductor is not handed"
        if s.side_effect:
            return False, f"{s.qualname} writes to an argument"
        if s.random and (s.name != "scaled_dot_product_attention" or bsym.kwargs.get("dropout_p", 0.0)):
            if not (s.name == "dropout" and (bsym.kwargs.get("training") is False or (len(bsym.args) > 2 and bsym.args[2] is False))):
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
        code = region.python(source=False, comments=False, imports=False)
        device = next((p.device for p in region.tensor_inputs()), torch.device("cpu"))

        def compile():
            key = (code, tuple((tuple(p.shape), p.dtype, p.device, p.requires_grad) for p in region.tensor_inputs()))

            def build(example_fn):
                with _lock:
                    hit = _compiled.get(key)
                if hit is not None:
                    return hit
                cache_dir()
                from torch._inductor.utils import run_and_get_code

                fn = torch.compile(bind(region), fullgraph=True, dynamic=False)
                with torch.no_grad():
                    _, source = run_and_get_code(fn, *example_fn())
                with _lock:
                    _compiled[key] = (fn, source)
                return fn, source

            return build

        def example():
            return tuple(_example(p) for p in region.inputs)

        return RegionRunner(bsym.sym.name, self.name, eager, compile, example,
                            tiered=options.get("tiered", True), timing=options.get("timing", False), device=device)


register_executor(InductorExecutor())
