"""oneDNN's GEMM for a region's linear layers where it is faster than MKL's on this CPU.

On CPU, float32 ``addmm`` and ``mm`` run Intel MKL's ``sgemm``, and Inductor calls ATen for them (its
prepacked oneDNN linear needs frozen weights; ``torch.compile`` with ``freezing`` still picks MKL for float32).
oneDNN's matmul (``torch.ops.mkldnn._linear_pointwise``) takes the same unpacked weight, so it serves a
training step whose weights change, and on some CPUs it is much the faster: on an AMD EPYC with AVX-512, one
thread, a (256 x 256) by (256 x 768) linear takes 1.25 ms with MKL and 1.05 ms with oneDNN, (512 x 768) by
(768 x 3072) 29.6 ms and 24.1 ms; for small matrices oneDNN's fixed cost loses (64 x 128 by 128 x 128: 27 us
against 40 us; benchmarks/gemm_choice.py). Which wins depends on the CPU, the shapes and the thread count,
so nothing is assumed: the first time a compile meets a shape it times both libraries on it (random inputs of
that shape, alternating, the fastest of several calls each; a few milliseconds per shape, in the process that
compiles, once per process) and uses oneDNN only where it took at most ``MARGIN`` of MKL's time. A GELU that
alone reads the product (recognised by what its calls compute, tanh or erf) becomes oneDNN's post-op, which
makes no pass of its own over the result; for such a product oneDNN need only be as fast as MKL.

The rewrite is an Inductor post-grad pass (``LinearPass``) over the graphs thunderlab's regions hand Inductor:
each float32 ``addmm(bias, a, b)`` or ``mm(a, b)`` whose operands are row-major or transposed (a linear layer
as AOTAutograd writes ``F.linear``, ``x @ w.t()``; Hugging Face's ``Conv1D``, ``x @ w``; a backward's
``grad @ w`` and ``grad.t() @ x``) is timed in its own layouts, and where oneDNN wins it becomes
``thunderlab::onednn_linear(a, b.t(), bias)``. With both of those row-major, Inductor lowers it to an extern
call of ``mkldnn._linear_pointwise`` in the module it writes (its source says so); otherwise it is
``thunderlab::onednn_linear_strided``, which Inductor calls with the operands' strides as they are (oneDNN
reads transposed operands itself) through the op's Python kernel, a few microseconds a call that the timing
includes. ``choices()`` lists every shape timed and the verdict; ``set_enabled(False)`` (or
``THUNDERLAB_ONEDNN_LINEAR=0`` in the environment, which the compile worker reads too) keeps MKL everywhere, and
so does turning every fast path off (it is one: see ``thunderlab.core.fastpaths``).
"""
from __future__ import annotations

import contextlib
import hashlib
import threading
import time

import torch

from thunderlab.core import fastpaths
from thunderlab.core.files import keep, kept

MARGIN = 0.97  # oneDNN is used where its fastest call took at most this share of MKL's
CALLS = 7  # timed calls of each library per shape (after one untimed call each)
_BUDGET_S = 0.3  # at most about this long timing one shape (fewer calls for large ones)

_lock = threading.Lock()
_choices: dict[tuple, dict] = {}
_local = threading.local()  # .used: the list ``collecting`` gathers this thread's compile's products into
_enabled = fastpaths.switched_on("THUNDERLAB_ONEDNN_LINEAR")


def available() -> bool:
    return bool(torch._C._has_mkldnn) and torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled


def enabled() -> bool:
    """Whether compiles put products on oneDNN where it is faster: on unless switched off here or with every
    fast path (``thunderlab.set_fast_paths(False)``), and where this torch has oneDNN."""
    return _enabled and fastpaths.enabled() and available()


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
    Inductor's cache answered runs no pass and adds nothing here (``remembered`` then finds what the compile that
    wrote the module kept)."""
    used: list[dict] = []
    before, _local.used = getattr(_local, "used", None), used
    try:
        yield used
    finally:
        _local.used = before


def remembered(sources: list[str], products: list[dict]) -> list[dict] | None:
    """The products of the compile that wrote the modules ``sources``: ``products`` when this compile ran the pass
    (then kept beside Inductor's cache, by the modules' text), else what the compile that first wrote them kept. A
    compile that Inductor's cache answers runs no pass, so without this a region whose module came from the cache
    (a notebook run again, a new process) would not say which library its linear layers run on."""
    sources = [src for src in sources if src]
    if not sources:
        return products or None
    key = hashlib.sha256("\0".join(sources).encode()).hexdigest()[:32]
    if products:
        keep("thunderlab_gemm", key, products)
        return products
    return kept("thunderlab_gemm", key) or None


def _note(m: int, k: int, n: int, bias: bool, onednn: bool, gelu: str | None = None,
          layouts: tuple[str, str] = ("rows", "rows")) -> None:
    used = getattr(_local, "used", None)
    if used is None:
        return
    with _lock:
        timed = _choices.get((m, k, n, bias, torch.float32, torch.get_num_threads(), gelu, *layouts))
    used.append({"m": m, "k": k, "n": n, "bias": bias, "x": layouts[0], "w": layouts[1],
                 "library": "onednn" if onednn else "mkl",
                 "mkl_us": timed["mkl_us"] if timed else None, "onednn_us": timed["onednn_us"] if timed else None,
                 "gelu": gelu if onednn else None})  # a GELU fused as oneDNN's post-op


def _operand(rows: int, cols: int, layout: str, g: torch.Generator, dtype) -> torch.Tensor:
    """A (rows x cols) tensor, row-major (``"rows"``) or the transpose of a row-major one (``"cols"``)."""
    if layout == "rows":
        return torch.randn(rows, cols, generator=g, dtype=dtype)
    return torch.randn(cols, rows, generator=g, dtype=dtype).t()


def faster_with_onednn(m: int, k: int, n: int, bias: bool, dtype: torch.dtype = torch.float32,
                       gelu: str | None = None, x_layout: str = "rows", w_layout: str = "rows") -> bool:
    """Whether oneDNN's linear beats MKL's addmm/mm for (m x k) @ (k x n) here, timed once per shape and layout.

    The product is ``x @ w.t()`` with ``x`` (m x k) and ``w`` (n x k) each ``"rows"`` (row-major) or ``"cols"``
    (the transpose of a row-major tensor); oneDNN is timed as the op the pass would put in the graph. oneDNN wins
    where its fastest call took at most ``MARGIN`` of MKL's; with ``gelu`` (a GELU follows, which oneDNN then
    computes as its post-op, saving the pass Inductor's kernel makes over the result) where it took at most as
    long as MKL's. Only the products are timed: ATen's GELU after MKL's would stand in badly for Inductor's
    kernel (its fixed cost alone is tens of microseconds on small tensors)."""
    key = (m, k, n, bias, dtype, torch.get_num_threads(), gelu, x_layout, w_layout)
    with _lock:
        hit = _choices.get(key)
    if hit is not None:
        return hit["onednn"]
    g = torch.Generator().manual_seed(0)
    x = _operand(m, k, x_layout, g, dtype)
    w = _operand(n, k, w_layout, g, dtype)
    b = torch.randn(n, generator=g, dtype=dtype) if bias else None
    wt = w.t()
    if x_layout == w_layout == "rows":
        def onednn():
            return torch.ops.mkldnn._linear_pointwise(x, w, b, "none", [], "")
    else:
        def onednn():
            return torch.ops.thunderlab.onednn_linear_strided(x, w, b)
    runs = {"mkl": (lambda: torch.addmm(b, x, wt)) if bias else (lambda: torch.mm(x, wt)), "onednn": onednn}
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
    verdict = best["onednn"] <= (1.0 if gelu else MARGIN) * best["mkl"]
    with _lock:
        _choices[key] = {"m": m, "k": k, "n": n, "bias": bias, "dtype": str(dtype).removeprefix("torch."),
                         "threads": key[5], "gelu": gelu, "x": x_layout, "w": w_layout,
                         "mkl_us": round(best["mkl"] * 1e6, 1), "onednn_us": round(best["onednn"] * 1e6, 1),
                         "onednn": verdict}
    return verdict


# ---- the operator Inductor is handed, and its lowering ----

_lib = torch.library.Library("thunderlab", "FRAGMENT")


def _onednn_linear_cpu(x, w, b, attr="none", algorithm=""):
    return torch.ops.mkldnn._linear_pointwise(x, w, b, attr, [], algorithm)


def _onednn_linear_fake(x, w, b, attr="none", algorithm=""):
    return x.new_empty((*x.shape[:-1], w.shape[0]))


# onednn_linear: both operands row-major, lowered below to Inductor's extern call; onednn_linear_strided: operands
# in any strides, with no Inductor lowering, so Inductor calls it as it is (its CPU kernel above)
for _name in ("onednn_linear", "onednn_linear_strided"):
    _lib.define(f"{_name}(Tensor x, Tensor w, Tensor? b, str attr='none', str algorithm='') -> Tensor")
    _lib.impl(_name, _onednn_linear_cpu, "CPU")
    torch.library.register_fake(f"thunderlab::{_name}", _onednn_linear_fake, lib=_lib)


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

def _layout(val) -> str | None:
    """"rows" for a row-major 2-D tensor, "cols" for the transpose of one, else None."""
    if val.is_contiguous():
        return "rows"
    return "cols" if val.t().is_contiguous() else None


def _weight(b: torch.fx.Node) -> tuple[torch.fx.Node | None, str | None]:
    """The ``w`` with ``b == w.t()`` already in the graph (``b`` a ``permute(w, [1, 0])``), or None where the pass
    must add one; and the layout ``w`` has ("rows", "cols"), None where oneDNN cannot read it."""
    aten = torch.ops.aten
    if b.op == "call_function" and (b.target is aten.t.default or (
            b.target is aten.permute.default and list(b.args[1]) == [1, 0])):
        w = b.args[0]
        val = w.meta.get("val") if isinstance(w, torch.fx.Node) else None
        if val is not None and val.dim() == 2:
            return w, _layout(val)
    layout = _layout(b.meta["val"])
    return None, {"rows": "cols", "cols": "rows", None: None}[layout]


def _eligible(node) -> tuple | None:
    """(x, b, bias, w or None, x's layout, w's layout) for a product ``x @ b`` (``b`` is ``w.t()``) that may go to
    oneDNN, else None."""
    aten = torch.ops.aten
    if node.op != "call_function" or node.target not in (aten.addmm.default, aten.mm.default):
        return None
    if node.target is aten.addmm.default:
        if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1 or len(node.args) != 3:
            return None
        bias, x, b = node.args
    else:
        if len(node.args) != 2 or node.kwargs:
            return None
        bias, (x, b) = None, node.args
    if not isinstance(x, torch.fx.Node) or not isinstance(b, torch.fx.Node):
        return None
    xv, bv, out = x.meta.get("val"), b.meta.get("val"), node.meta.get("val")
    if xv is None or bv is None or out is None:
        return None
    if any(v.device.type != "cpu" or v.dtype != torch.float32 or v.dim() != 2 for v in (xv, bv, out)):
        return None
    if any(not isinstance(s, int) for s in (*xv.shape, *bv.shape)):
        return None
    if bias is not None:
        biv = bias.meta.get("val") if isinstance(bias, torch.fx.Node) else None
        if biv is None or biv.dtype != torch.float32 or tuple(biv.shape) != (bv.shape[1],) or not biv.is_contiguous():
            return None
    w, w_layout = _weight(b)
    x_layout = _layout(xv)
    if x_layout is None or w_layout is None:
        return None
    return x, b, bias, w, x_layout, w_layout


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


def _replace(graph: torch.fx.Graph, product: torch.fx.Node, x, b, bias, w, strided: bool,
             gelu: tuple | None) -> None:
    """``product`` (``x @ b``, ``b == w.t()``) as one oneDNN call; with ``gelu`` (from ``_gelu_after``) the GELU
    is the call's post-op, so no kernel of its own makes a pass over the product's result."""
    op = torch.ops.thunderlab.onednn_linear_strided.default if strided else torch.ops.thunderlab.onednn_linear.default
    with graph.inserting_before(product):
        if w is None:
            w = graph.call_function(torch.ops.aten.permute.default, (b, [1, 0]))
            w.meta["val"] = b.meta["val"].t()
        args = (x, w, bias) if gelu is None else (x, w, bias, "gelu", "tanh" if gelu[2] == "tanh" else "none")
        new = graph.call_function(op, args)
    new.meta.update(product.meta)
    if gelu is None:
        product.replace_all_uses_with(new)
        return
    y, out, _ = gelu
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
            x, b, bias, w, x_layout, w_layout = found
            (m, k), n = x.meta["val"].shape, b.meta["val"].shape[1]
            shape = (int(m), int(k), int(n), bias is not None)
            gelu = _gelu_after(graph, node)
            approximate = gelu[2] if gelu else None
            onednn = faster_with_onednn(*shape, gelu=approximate, x_layout=x_layout, w_layout=w_layout)
            _note(*shape, onednn=onednn, gelu=approximate, layouts=(x_layout, w_layout))
            if onednn:
                _replace(graph, node, x, b, bias, w, (x_layout, w_layout) != ("rows", "rows"), gelu)
        graph.eliminate_dead_code()

    def uuid(self):
        # the verdicts are this machine's: a module cached with MKL or oneDNN for a shape is right either way
        return f"thunderlab-onednn-linear-5-{MARGIN}"


def config_patches() -> dict:
    """Inductor config patches that add the pass to a compile (none when it is off or oneDNN is missing)."""
    return {"post_grad_custom_post_pass": LinearPass()} if enabled() else {}
