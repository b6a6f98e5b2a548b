"""oneDNN's GEMM for a region's linear layers where it is faster than MKL's on this CPU.

On CPU, float32 ``addmm`` and ``mm`` run Intel MKL's ``sgemm``, and Inductor calls ATen for them (its
prepacked oneDNN linear needs frozen weights; ``torch.compile`` with ``freezing`` still picks MKL for float32).
oneDNN's matmul (``torch.ops.mkldnn._linear_pointwise``) takes the same unpacked weight, so it serves a
training step whose weights change, and on some CPUs it is much the faster: on an AMD EPYC with AVX-512, one
thread, a (256 x 256) by (256 x 768) linear takes 1.35 ms with MKL and 1.19 ms with oneDNN, (64 x 768) by
(768 x 3072) 4.7 ms and 3.7 ms; for small matrices oneDNN's fixed cost loses (64 x 128 by 128 x 128: 38 us
against 50 us). Which wins depends on the CPU, the shapes and the thread count, so nothing is assumed: the
first time a compile meets a shape it times both libraries on it (random inputs of that shape, alternating,
the fastest of several calls each; a few milliseconds per shape, in the process that compiles, once per
process) and uses oneDNN only where it took at most ``MARGIN`` of MKL's time. A GELU that alone reads the product
(recognised by what its calls compute, tanh or erf) is timed with it, after MKL's product as ATen's kernel and
as oneDNN's post-op, which makes no pass of its own over the result: where oneDNN wins, it becomes that post-op.

The rewrite is an Inductor post-grad pass (``LinearPass``) over the graphs thunderlab's regions hand Inductor:
``addmm(bias, x, w.t())`` and ``mm(x, w.t())`` with a contiguous 2-D ``x`` and row-major ``w`` (a linear layer,
as AOTAutograd writes ``F.linear``) become ``thunderlab::onednn_linear(x, w, bias)``, which Inductor lowers to
an extern call of ``mkldnn._linear_pointwise`` in the module it writes (its source says so). The backward's
products, whose operands are transposed, keep MKL. ``choices()`` lists every shape timed and the verdict;
``set_enabled(False)`` (or ``THUNDERLAB_ONEDNN_LINEAR=0`` in the environment, which the compile worker reads
too) keeps MKL everywhere.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time

import torch

MARGIN = 0.97  # oneDNN is used where its fastest call took at most this share of MKL's
CALLS = 7  # timed calls of each library per shape (after one untimed call each)
_BUDGET_S = 0.3  # at most about this long timing one shape (fewer calls for large ones)

_lock = threading.Lock()
_choices: dict[tuple, dict] = {}
_local = threading.local()  # .used: the list ``collecting`` gathers this thread's compile's products into
_enabled = os.environ.get("THUNDERLAB_ONEDNN_LINEAR", "1") not in ("0", "false", "no", "off")


def available() -> bool:
    return bool(torch._C._has_mkldnn) and torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled


def enabled() -> bool:
    return _enabled and available()


def set_enabled(on: bool) -> None:
    """Whether compiles from now on may put linear layers on oneDNN (compiled kernels keep what they have)."""
    global _enabled
    _enabled = bool(on)


def choices() -> list[dict]:
    """Every shape timed in this process: m, k, n, bias, dtype, threads, mkl_us, onednn_us and the verdict."""
    with _lock:
        return [dict(c) for c in _choices.values()]


@contextlib.contextmanager
def collecting():
    """Gather what the pass decides for each product in the compiles this thread runs meanwhile: per product its
    shape, the library it runs on, the two times (when this process timed that shape) and a fused GELU. A compile
    Inductor's cache answered runs no pass and adds nothing (the module's source still shows each call)."""
    used: list[dict] = []
    before, _local.used = getattr(_local, "used", None), used
    try:
        yield used
    finally:
        _local.used = before


def _note(m: int, k: int, n: int, bias: bool, onednn: bool, gelu: str | None = None) -> None:
    used = getattr(_local, "used", None)
    if used is None:
        return
    with _lock:
        timed = _choices.get((m, k, n, bias, torch.float32, torch.get_num_threads(), gelu))
    used.append({"m": m, "k": k, "n": n, "bias": bias, "library": "onednn" if onednn else "mkl",
                 "mkl_us": timed["mkl_us"] if timed else None, "onednn_us": timed["onednn_us"] if timed else None,
                 "gelu": gelu if onednn else None})  # a GELU fused as oneDNN's post-op (timed with it either way)


def _linear(x, w, b):
    return torch.ops.mkldnn._linear_pointwise(x, w, b, "none", [], "")


def faster_with_onednn(m: int, k: int, n: int, bias: bool, dtype: torch.dtype = torch.float32,
                       gelu: str | None = None) -> bool:
    """Whether oneDNN's linear beats MKL's addmm/mm for (m x k) @ (k x n) here, timed once per shape. With
    ``gelu`` (its ``approximate``) a GELU follows: MKL's product then ATen's GELU against oneDNN's product with
    the GELU as its post-op."""
    key = (m, k, n, bias, dtype, torch.get_num_threads(), gelu)
    with _lock:
        hit = _choices.get(key)
    if hit is not None:
        return hit["onednn"]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(m, k, generator=g, dtype=dtype)
    w = torch.randn(n, k, generator=g, dtype=dtype)
    b = torch.randn(n, generator=g, dtype=dtype) if bias else None
    wt = w.t()
    mkl = (lambda: torch.addmm(b, x, wt)) if bias else (lambda: torch.mm(x, wt))
    if gelu is None:
        runs = {"mkl": mkl, "onednn": lambda: _linear(x, w, b)}
    else:
        post = "tanh" if gelu == "tanh" else "none"
        runs = {"mkl": lambda: torch.nn.functional.gelu(mkl(), approximate=gelu),
                "onednn": lambda: torch.ops.mkldnn._linear_pointwise(x, w, b, "gelu", [], post)}
    best = {}
    with torch.no_grad():
        for name, f in runs.items():  # untimed: first-call setup (oneDNN builds its primitive)
            t0 = time.perf_counter()
            f()
            best[name] = time.perf_counter() - t0
        calls = max(1, min(CALLS, int(_BUDGET_S / max(1e-6, 2 * max(best.values())))))
        best = {name: float("inf") for name in runs}
        for _ in range(calls):
            for name, f in runs.items():
                t0 = time.perf_counter()
                f()
                best[name] = min(best[name], time.perf_counter() - t0)
    verdict = best["onednn"] <= MARGIN * best["mkl"]
    with _lock:
        _choices[key] = {"m": m, "k": k, "n": n, "bias": bias, "dtype": str(dtype).removeprefix("torch."),
                         "threads": key[5], "gelu": gelu, "mkl_us": round(best["mkl"] * 1e6, 1),
                         "onednn_us": round(best["onednn"] * 1e6, 1), "onednn": verdict}
    return verdict


# ---- the operator Inductor is handed, and its lowering ----

_lib = torch.library.Library("thunderlab", "FRAGMENT")
_lib.define("onednn_linear(Tensor x, Tensor w, Tensor? b, str attr='none', str algorithm='') -> Tensor")


@torch.library.impl(_lib, "onednn_linear", "CPU")
def _onednn_linear_cpu(x, w, b, attr="none", algorithm=""):
    return torch.ops.mkldnn._linear_pointwise(x, w, b, attr, [], algorithm)


@torch.library.register_fake("thunderlab::onednn_linear", lib=_lib)
def _onednn_linear_fake(x, w, b, attr="none", algorithm=""):
    return x.new_empty((*x.shape[:-1], w.shape[0]))


_lowered = False


def _register_lowering() -> None:
    """Inductor writes the op as a call of ``mkldnn._linear_pointwise`` (its own lowering of that op wants the
    weight a frozen constant)."""
    global _lowered
    if _lowered:
        return
    from torch._inductor import mkldnn_ir
    from torch._inductor.ir import TensorBox
    from torch._inductor.lowering import register_lowering

    @register_lowering(torch.ops.thunderlab.onednn_linear.default)
    def _lower(x, w, b, attr="none", algorithm=""):
        return TensorBox.create(mkldnn_ir.LinearUnary.create(x, w, b, attr, [], algorithm))

    _lowered = True


# ---- the post-grad pass ----

def _plain_weight(node) -> torch.fx.Node | None:
    """``w`` where ``node`` is ``w.t()`` (``permute(w, [1, 0])``) of a row-major 2-D ``w``, else None."""
    aten = torch.ops.aten
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return None
    if node.target is aten.permute.default and list(node.args[1]) == [1, 0]:
        w = node.args[0]
    elif node.target is aten.t.default:
        w = node.args[0]
    else:
        return None
    val = w.meta.get("val") if isinstance(w, torch.fx.Node) else None
    if val is None or val.dim() != 2 or not val.is_contiguous():
        return None
    return w


def _eligible(node) -> tuple | None:
    """(x, w, bias) for a linear layer's product that may go to oneDNN, else None."""
    aten = torch.ops.aten
    if node.op != "call_function" or node.target not in (aten.addmm.default, aten.mm.default):
        return None
    if node.target is aten.addmm.default:
        if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1 or len(node.args) != 3:
            return None
        bias, x, wt = node.args
    else:
        if len(node.args) != 2 or node.kwargs:
            return None
        bias, (x, wt) = None, node.args
    w = _plain_weight(wt)
    vals = [a.meta.get("val") if isinstance(a, torch.fx.Node) else None for a in (x, w, bias, node)]
    if w is None or not isinstance(x, torch.fx.Node) or any(v is None for v in (vals[0], vals[1], vals[3])):
        return None
    xv, wv, bv, out = vals
    if any(v.device.type != "cpu" or v.dtype != torch.float32 for v in (xv, wv, out)):
        return None
    if xv.dim() != 2 or not xv.is_contiguous() or any(not isinstance(s, int) for s in (*xv.shape, *wv.shape)):
        return None
    if bias is not None and (bv is None or bv.dtype != torch.float32 or tuple(bv.shape) != (wv.shape[0],)
                             or not bv.is_contiguous()):
        return None
    return x, w, bias


_POINTWISE = {"mul.Tensor", "add.Tensor", "sub.Tensor", "div.Tensor", "tanh.default", "erf.default",
              "pow.Tensor_Scalar"}
_GELU_NODES = 12  # a decomposed GELU is 5 (erf) or 9 (tanh) calls


def _gelu_of(graph: torch.fx.Graph, y: torch.fx.Node) -> tuple[torch.fx.Node, str] | None:
    """(the node that is ``gelu(y)``, its ``approximate``) where the calls between are GELU's decomposition and
    nothing else reads them or ``y``; else None. The calls are recognised by what they compute (run on sample
    values), not by their order, which decompositions are free to change."""
    nodes = list(graph.nodes)
    inside: list[torch.fx.Node] = []
    for node in nodes[nodes.index(y) + 1:]:
        if len(inside) >= _GELU_NODES:
            return None
        if node.op != "call_function" or not str(getattr(node.target, "_opname", "")) or \
                f"{node.target._opname}.{node.target._overloadname}" not in _POINTWISE or \
                node.target.namespace != "aten":
            continue
        args = [a for a in (*node.args, *node.kwargs.values()) if isinstance(a, torch.fx.Node)]
        if not args or any(a is not y and a not in inside for a in args):
            continue
        if any(not isinstance(a, (torch.fx.Node, int, float)) for a in node.args):
            continue
        inside.append(node)
        closed = all(u in inside for n in (y, *inside[:-1]) for u in n.users)
        if closed:
            approximate = _computes_gelu(y, inside)
            return (node, approximate) if approximate is not None else None
    return None


def _computes_gelu(y: torch.fx.Node, inside: list[torch.fx.Node]) -> str | None:
    sample = torch.linspace(-6, 6, 241, dtype=torch.float64)
    values = {y: sample}
    for node in inside:
        args = [values[a] if isinstance(a, torch.fx.Node) else a for a in node.args]
        values[node] = node.target(*args)
    got = values[inside[-1]]
    for approximate in ("none", "tanh"):
        if torch.allclose(got, torch.nn.functional.gelu(sample, approximate=approximate), rtol=1e-9, atol=1e-12):
            return approximate
    return None


def _gelu_after(graph: torch.fx.Graph, product: torch.fx.Node) -> tuple | None:
    """(y, the node that is ``gelu(y)``, its ``approximate``) where ``y`` is ``product`` (or its one reshape) and
    only a GELU reads it; else None."""
    y = product
    if len(product.users) == 1:
        (user,) = product.users
        if user.target in (torch.ops.aten.reshape.default, torch.ops.aten.view.default):
            y = user
    found = _gelu_of(graph, y)
    return None if found is None else (y, *found)


def _replace(graph: torch.fx.Graph, product: torch.fx.Node, x, w, bias, gelu: tuple | None) -> None:
    """``product`` as one oneDNN call; with ``gelu`` (from ``_gelu_after``) the GELU is the call's post-op, so
    no kernel of its own makes a pass over the product's result."""
    if gelu is None:
        with graph.inserting_before(product):
            new = graph.call_function(torch.ops.thunderlab.onednn_linear.default, (x, w, bias))
        new.meta.update(product.meta)
        product.replace_all_uses_with(new)
        return
    y, out, approximate = gelu
    with graph.inserting_before(product):
        new = graph.call_function(torch.ops.thunderlab.onednn_linear.default,
                                  (x, w, bias, "gelu", "tanh" if approximate == "tanh" else "none"))
    new.meta.update(product.meta)
    if y is product:
        out.replace_all_uses_with(new)
        return
    with graph.inserting_after(new):
        view = graph.call_function(y.target, (new, *y.args[1:]), dict(y.kwargs))
    view.meta.update(y.meta)
    out.replace_all_uses_with(view)


try:
    from torch._inductor.custom_graph_pass import CustomGraphPass
except ImportError:  # pragma: no cover - older torch: the pass is not offered
    CustomGraphPass = object


class LinearPass(CustomGraphPass):
    """Inductor post-grad pass: a linear layer's product on oneDNN where timing says it is faster (above)."""

    def __call__(self, graph: torch.fx.Graph) -> None:
        _register_lowering()
        for node in list(graph.nodes):
            found = _eligible(node)
            if found is None:
                continue
            x, w, bias = found
            (m, k), n = x.meta["val"].shape, w.meta["val"].shape[0]
            shape = (int(m), int(k), int(n), bias is not None)
            gelu = _gelu_after(graph, node)
            approximate = gelu[2] if gelu else None
            onednn = faster_with_onednn(*shape, gelu=approximate)
            _note(*shape, onednn=onednn, gelu=approximate)
            if onednn:
                _replace(graph, node, x, w, bias, gelu)
        graph.eliminate_dead_code()

    def uuid(self):
        # the verdicts are this machine's: a module cached with MKL or oneDNN for a shape is right either way
        return f"thunderlab-onednn-linear-3-{MARGIN}"


def config_patches() -> dict:
    """Inductor config patches that add the pass to a compile (none when it is off or oneDNN is missing)."""
    return {"post_grad_custom_post_pass": LinearPass()} if enabled() else {}
