"""The prims' derivative rules, and the fallback that asks PyTorch's autograd.

Rules are filed in ``rules.VJP`` by the symbol's printed name ("prims.mul"), one per symbol; a
torch-level op's rule sits beside its declaration (``elementwise.py``, ``normalization.py``, ...).
A rule receives the forward call and the gradient of its output(s) (a proxy, or a tuple
with None where an output has no gradient) and returns ``(input, gradient)`` pairs; pairs
whose first element is not a tensor are ignored, and a repeated input accumulates. Rules
run inside the backward trace, so every op they call is recorded there.

A call with no rule is differentiated through its decomposition; a call with neither
(an opaque torch call) falls back to ``ltorch.eager_vjp``, which asks PyTorch's autograd.
"""
from __future__ import annotations

import functools
import math

import torch

from thunderlab.core.proxies import TensorProxy
from thunderlab.core.symbols import BoundSymbol, Symbol, Tag, tree_flatten, tree_map
from thunderlab.core.trace import current_trace

from . import prims
from .common import expand_reduced as _bcast
from .common import is_tensor as _is_t
from .common import matrix_transpose as _mT
from .common import scatter_back, sum_to
from .declare import KNOWN_AS, LTORCH, OPAQUE, backward_symbol
from .prims import new_proxy
from .rules import VJP

__all__ = ["VJP", "vjp", "has_rule", "matmul_by_prims", "linear_by_prims", "eager_rule", "eager_vjp",
           "convolution_backward", "keeping_state_variant", "needs_state_to_differentiate"]

vjp = VJP.register


def has_rule(b: BoundSymbol) -> bool:
    return b.sym.qualname in VJP


# -- elementwise ----------------------------------------------------------------------------
def _unary(name):
    return vjp(f"prims.{name}")


@_unary("neg")
def _(b, g):
    return [(b.args[0], prims.neg(g))]


@_unary("abs")
def _(b, g):
    return [(b.args[0], prims.mul(g, prims.sign(b.args[0])))]


@_unary("exp")
def _(b, g):
    return [(b.args[0], prims.mul(g, b.output))]


@_unary("exp2")
def _(b, g):
    return [(b.args[0], prims.mul(g, prims.mul(b.output, math.log(2.0))))]


@_unary("expm1")
def _(b, g):
    return [(b.args[0], prims.mul(g, prims.add(b.output, 1.0)))]


@_unary("log")
def _(b, g):
    return [(b.args[0], prims.div(g, b.args[0]))]


@_unary("log1p")
def _(b, g):
    return [(b.args[0], prims.div(g, prims.add(b.args[0], 1.0)))]


@_unary("log2")
def _(b, g):
    return [(b.args[0], prims.div(g, prims.mul(b.args[0], math.log(2.0))))]


@_unary("log10")
def _(b, g):
    return [(b.args[0], prims.div(g, prims.mul(b.args[0], math.log(10.0))))]


@_unary("sin")
def _(b, g):
    return [(b.args[0], prims.mul(g, prims.cos(b.args[0])))]


@_unary("cos")
def _(b, g):
    return [(b.args[0], prims.neg(prims.mul(g, prims.sin(b.args[0]))))]


@_unary("tan")
def _(b, g):
    return [(b.args[0], prims.mul(g, prims.add(prims.mul(b.output, b.output), 1.0)))]


@_unary("tanh")
def _(b, g):
    return [(b.args[0], prims.mul(g, prims.sub(1.0, prims.mul(b.output, b.output))))]


@_unary("sigmoid")
def _(b, g):
    return [(b.args[0], prims.mul(g, prims.mul(b.output, prims.sub(1.0, b.output))))]


@_unary("sqrt")
def _(b, g):
    return [(b.args[0], prims.div(g, prims.mul(b.output, 2.0)))]


@_unary("rsqrt")
def _(b, g):
    o = b.output
    return [(b.args[0], prims.mul(g, prims.mul(prims.mul(o, prims.mul(o, o)), -0.5)))]


@_unary("reciprocal")
def _(b, g):
    return [(b.args[0], prims.neg(prims.mul(g, prims.mul(b.output, b.output))))]


@_unary("erf")
def _(b, g):
    a = b.args[0]
    return [(a, prims.mul(g, prims.mul(prims.exp(prims.neg(prims.mul(a, a))), 2.0 / math.sqrt(math.pi))))]


@_unary("erfc")
def _(b, g):
    a = b.args[0]
    return [(a, prims.mul(g, prims.mul(prims.exp(prims.neg(prims.mul(a, a))), -2.0 / math.sqrt(math.pi))))]


@_unary("asin")
def _(b, g):
    a = b.args[0]
    return [(a, prims.mul(g, prims.rsqrt(prims.sub(1.0, prims.mul(a, a)))))]


@_unary("acos")
def _(b, g):
    a = b.args[0]
    return [(a, prims.neg(prims.mul(g, prims.rsqrt(prims.sub(1.0, prims.mul(a, a))))))]


@_unary("atan")
def _(b, g):
    a = b.args[0]
    return [(a, prims.div(g, prims.add(prims.mul(a, a), 1.0)))]


@_unary("sinh")
def _(b, g):
    return [(b.args[0], prims.mul(g, prims.cosh(b.args[0])))]


@_unary("cosh")
def _(b, g):
    return [(b.args[0], prims.mul(g, prims.sinh(b.args[0])))]


@_unary("asinh")
def _(b, g):
    a = b.args[0]
    return [(a, prims.mul(g, prims.rsqrt(prims.add(prims.mul(a, a), 1.0))))]


@_unary("acosh")
def _(b, g):
    a = b.args[0]
    return [(a, prims.mul(g, prims.rsqrt(prims.sub(prims.mul(a, a), 1.0))))]


@_unary("atanh")
def _(b, g):
    a = b.args[0]
    return [(a, prims.div(g, prims.sub(1.0, prims.mul(a, a))))]


@_unary("erfinv")
def _(b, g):  # d erfinv(x) = sqrt(pi) / 2 * exp(erfinv(x) ** 2)
    return [(b.args[0], prims.mul(g, prims.mul(prims.exp(prims.mul(b.output, b.output)), math.sqrt(math.pi) / 2)))]


@_unary("lgamma")
def _(b, g):
    return [(b.args[0], prims.mul(g, prims.digamma(b.args[0])))]


@vjp("prims.floor", "prims.ceil", "prims.round", "prims.trunc", "prims.sign")
def _(b, g):
    return []  # zero almost everywhere


@vjp("prims.add")
def _(b, g):
    a, c = b.args
    return [(a, g), (c, g)]


@vjp("prims.sub")
def _(b, g):
    a, c = b.args
    return [(a, g), (c, prims.neg(g) if _is_t(c) else None)]


@vjp("prims.mul")
def _(b, g):
    a, c = b.args
    return [(a, prims.mul(g, c) if _is_t(a) else None), (c, prims.mul(g, a) if _is_t(c) else None)]


@vjp("prims.div")
def _(b, g):
    a, c = b.args
    ga = prims.div(g, c) if _is_t(a) else None
    gc = prims.neg(prims.div(prims.mul(g, b.output), c)) if _is_t(c) else None
    return [(a, ga), (c, gc)]


@vjp("prims.pow")
def _(b, g):
    a, e = b.args
    out = []
    if _is_t(a):
        em1 = prims.sub(e, 1.0) if _is_t(e) else e - 1
        out.append((a, prims.mul(g, prims.mul(e, prims.pow(a, em1)))))
    if _is_t(e):
        base = prims.log(a) if _is_t(a) else math.log(a) if a > 0 else float("nan")
        out.append((e, prims.mul(g, prims.mul(b.output, base))))
    return out


def _minmax(b, g, cmp):
    a, c = b.args
    win = cmp(a, c)
    tie = prims.eq(a, c)
    half = prims.mul(g, 0.5)
    zero = prims.full(g.shape, 0.0, dtype=g.dtype, device=g.device)
    ga = prims.where(tie, half, prims.where(win, g, zero))
    gc = prims.where(tie, half, prims.where(win, zero, g))
    return [(a, ga), (c, gc)]


@vjp("prims.maximum")
def _(b, g):
    return _minmax(b, g, prims.gt)


@vjp("prims.minimum")
def _(b, g):
    return _minmax(b, g, prims.lt)


@vjp("prims.atan2")
def _(b, g):
    a, c = b.args
    denom = prims.add(prims.mul(a, a), prims.mul(c, c))
    return [(a, prims.div(prims.mul(g, c), denom)), (c, prims.neg(prims.div(prims.mul(g, a), denom)))]


@vjp("prims.remainder")
def _(b, g):
    a, c = b.args
    gc = prims.neg(prims.mul(g, prims.floor(prims.div(a, c)))) if _is_t(c) else None
    return [(a, g), (c, gc)]


@vjp("prims.fmod")
def _(b, g):
    a, c = b.args
    gc = prims.neg(prims.mul(g, prims.trunc(prims.div(a, c)))) if _is_t(c) else None
    return [(a, g), (c, gc)]


@vjp("prims.where")
def _(b, g):
    pred, a, c = b.args
    zero = prims.full(g.shape, 0.0, dtype=g.dtype, device=g.device)
    return [(a, prims.where(pred, g, zero) if _is_t(a) else None),
            (c, prims.where(pred, zero, g) if _is_t(c) else None)]


@vjp("prims.convert_element_type")
def _(b, g):
    a = b.args[0]
    return [(a, prims.convert_element_type(g, a.dtype) if g.dtype != a.dtype else g)]


# -- shapes ---------------------------------------------------------------------------------
@vjp("prims.broadcast_in_dim")
def _(b, g):
    a, shape, bdims = b.args
    new_dims = tuple(i for i in range(len(shape)) if i not in bdims)
    expanded = tuple(d for d, s in zip(bdims, a.shape) if s == 1 and shape[d] != 1)
    dims = tuple(sorted(new_dims + expanded))
    out = prims.sum(g, dims) if dims else g
    return [(a, prims.reshape(out, a.shape))]


@vjp("prims.reshape", "prims.squeeze")
def _(b, g):
    a = b.args[0]
    return [(a, prims.reshape(g, a.shape))]


@vjp("prims.transpose")
def _(b, g):
    a, perm = b.args
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return [(a, prims.transpose(g, tuple(inv)))]


@vjp("prims.slice")
def _(b, g):
    p = b.params
    a, starts = p.a, p.start_indices
    strides = p.strides or (1,) * a.ndim
    config = []
    for s, st, n, m in zip(starts, strides, a.shape, g.shape):
        last = s + (m - 1) * st + 1 if m else s
        config.append((s, n - last, st - 1) if m else (s, n - s, 0))
    if any(m == 0 for m in g.shape):
        return [(a, prims.full(a.shape, 0.0, dtype=g.dtype, device=g.device))]
    return [(a, prims.pad(g, 0.0, tuple(config)))]


@vjp("prims.pad")
def _(b, g):
    # Input element i of a dimension lands at lo + i * (interior + 1) of the output; negative
    # low or high padding crops, so only the elements landing inside the output get a gradient
    # (the slice of g at their positions) and the cropped ones get 0 (padded back around it).
    a, _value, config = b.args
    starts, ends, steps, back = [], [], [], []
    for (lo, _hi, it), n, m in zip(config, a.shape, g.shape):
        step = it + 1
        first = max(0, -(lo // step) if lo < 0 else 0)  # the first i with lo + i * step >= 0
        last = min(n - 1, (m - 1 - lo) // step) if m - 1 - lo >= 0 else -1  # the last with position < m
        if n == 0 or first > last:
            return [(a, prims.full(a.shape, 0.0, dtype=g.dtype, device=g.device)), (_value, None)]
        starts.append(lo + first * step)
        ends.append(lo + last * step + 1)
        steps.append(step)
        back.append((first, n - 1 - last, 0))
    kept = prims.slice(g, tuple(starts), tuple(ends), tuple(steps))
    if any(lo or hi for lo, hi, _ in back):
        kept = prims.pad(kept, 0.0, tuple(back))
    return [(a, kept), (_value, None)]


@vjp("prims.cat")
def _(b, g):
    tensors, dim = b.args
    out, start = [], 0
    for t in tensors:
        starts = [0] * g.ndim
        ends = list(g.shape)
        starts[dim], ends[dim] = start, start + t.shape[dim]
        out.append((t, prims.slice(g, tuple(starts), tuple(ends), (1,) * g.ndim)))
        start += t.shape[dim]
    return out


@vjp("prims.flip")
def _(b, g):
    return [(b.args[0], prims.flip(g, b.args[1]))]


# -- reductions -----------------------------------------------------------------------------
@vjp("prims.sum")
def _(b, g):
    a, dims = b.args
    return [(a, _bcast(g, a.shape, dims) if dims else g)]


@vjp("prims.prod")
def _(b, g):
    # d prod / d a_i is the product of the other elements. out / a_i gives it only where the
    # group has no zero: with one zero, the zero's gradient is the product of the rest and
    # every other element's is 0; with two or more, all are 0.
    a, dims = b.args
    if not dims:
        return [(a, g)]
    if not a.dtype.is_floating_point:
        return []
    zero = prims.eq(a, 0.0)
    nonzero = prims.where(zero, prims.full(a.shape, 1.0, dtype=a.dtype, device=a.device), a)
    rest = _bcast(prims.prod(nonzero, dims), a.shape, dims)  # the product of the group's nonzero elements
    zeros = _bcast(prims.sum(prims.convert_element_type(zero, a.dtype), dims), a.shape, dims)
    nil = prims.full(a.shape, 0.0, dtype=a.dtype, device=a.device)
    at_zero = prims.where(prims.eq(zeros, 1.0), rest, nil)
    elsewhere = prims.where(prims.eq(zeros, 0.0), prims.div(rest, nonzero), nil)
    return [(a, prims.mul(_bcast(g, a.shape, dims), prims.where(zero, at_zero, elsewhere)))]


@vjp("prims.amax", "prims.amin")
def _(b, g):
    a, dims = b.args
    if not dims:
        return [(a, g)]
    hit = prims.convert_element_type(prims.eq(a, _bcast(b.output, a.shape, dims)), g.dtype)
    count = prims.sum(hit, dims)
    return [(a, prims.mul(hit, _bcast(prims.div(g, count), a.shape, dims)))]


def _var_grad(a, dims, correction, gv):
    n = math.prod(a.shape[d] for d in dims) if dims else 1
    mean = _bcast(prims.div(prims.sum(a, dims), n), a.shape, dims)
    scale = 2.0 / max(n - correction, 0) if n - correction > 0 else float("inf")
    return prims.mul(prims.mul(_bcast(gv, a.shape, dims), prims.sub(a, mean)), scale)


@vjp("prims.var")
def _(b, g):
    a, dims = b.args
    return [(a, _var_grad(a, dims, b.params.correction, g))]


@vjp("prims.var_mean")
def _(b, g):
    a, dims = b.args
    gv, gm = g
    grads = []
    if gv is not None:
        grads.append((a, _var_grad(a, dims, b.params.correction, gv)))
    if gm is not None:
        n = math.prod(a.shape[d] for d in dims) if dims else 1
        grads.append((a, prims.div(_bcast(gm, a.shape, dims), n)))
    return grads


@vjp("prims.topk")
def _(b, g):
    a, dim = b.params.a, b.params.dim
    gv = g[0]
    values, indices = b.output
    return [(a, scatter_back(a, dim, indices, gv))] if gv is not None else []


@vjp("prims.cumsum")
def _(b, g):
    a, dim = b.args
    return [(a, prims.flip(prims.cumsum(prims.flip(g, (dim,)), dim), (dim,)))]


# -- indexing -------------------------------------------------------------------------------
@vjp("prims.take")
def _(b, g):
    a, index, dim = b.args
    n = index.numel()
    flat_shape = a.shape[:dim] + (n,) + a.shape[dim + 1:]
    g2 = prims.reshape(g, flat_shape)
    idx = prims.broadcast_in_dim(prims.reshape(index, (n,)), flat_shape, (dim,))
    zero = prims.full(a.shape, 0.0, dtype=g.dtype, device=g.device)
    return [(a, prims.scatter_add(zero, dim, idx, g2))]


@vjp("prims.gather")
def _(b, g):
    a, dim, index = b.args
    zero = prims.full(a.shape, 0.0, dtype=g.dtype, device=g.device)
    return [(a, prims.scatter_add(zero, dim, index, g))]


# -- linear algebra -------------------------------------------------------------------------
@vjp("prims.matmul")
def matmul_by_prims(b, g):
    """The gradient of ``a @ c`` in prims (vectors and batches included)."""
    a, c = b.params.a, b.params.b
    a2 = prims.reshape(a, (1,) + a.shape) if a.ndim == 1 else a
    c2 = prims.reshape(c, c.shape + (1,)) if c.ndim == 1 else c
    g2 = g
    if a.ndim == 1:
        g2 = (
            prims.reshape(g2, g2.shape[:-1] + (1,) + g2.shape[-1:])
            if c.ndim > 1
            else prims.reshape(g2, g2.shape + (1,))
        )
    if c.ndim == 1:
        g2 = prims.reshape(g2, g2.shape + (1,))
    ga = sum_to(prims.matmul(g2, _mT(c2)), a2.shape)
    gc = sum_to(prims.matmul(_mT(a2), g2), c2.shape)
    return [(a, prims.reshape(ga, a.shape)), (c, prims.reshape(gc, c.shape))]


@vjp("prims.linear")
def linear_by_prims(b, g):
    """The gradient of ``linear(a, weight, bias)`` in prims (any rank, vectors included)."""
    p = b.params
    a, w, bias = p.a, p.weight, p.bias
    ga = prims.matmul(g, w)
    g2 = prims.reshape(g, (g.numel() // g.shape[-1], g.shape[-1])) if g.ndim != 2 else g
    a2 = prims.reshape(a, (a.numel() // a.shape[-1], a.shape[-1])) if a.ndim != 2 else a
    if g.ndim == 1:
        gw = prims.matmul(prims.reshape(g, (g.shape[0], 1)), prims.reshape(a, (1, a.shape[0])))
    else:
        gw = prims.matmul(_mT(g2), a2)
    pairs = [(a, ga), (w, gw)]
    if _is_t(bias):
        pairs.append((bias, prims.sum(g, tuple(range(g.ndim - 1))) if g.ndim > 1 else g))
    return pairs


# -- convolution: eager's backward kernel ---------------------------------------------------
def _convolution_backward(g, a, weight, has_bias, stride, padding, dilation, transposed, output_padding, groups,
                          need_input):
    bias_sizes = [weight.shape[1] * groups if transposed else weight.shape[0]] if has_bias else None
    return tuple(torch.ops.aten.convolution_backward(
        g, a, weight, bias_sizes, list(stride), list(padding), list(dilation), transposed, list(output_padding),
        groups, [need_input, True, has_bias]))


def _convolution_backward_meta(g, a, weight, has_bias, stride, padding, dilation, transposed, output_padding,
                               groups, need_input):
    channels = weight.shape[1] * groups if transposed else weight.shape[0]
    gb = new_proxy((channels,), g.dtype, g.device, [g]) if has_bias else None
    ga = new_proxy(a.shape, a.dtype, a.device, [g]) if need_input else None
    return ga, new_proxy(weight.shape, weight.dtype, weight.device, [g]), gb


convolution_backward = backward_symbol("convolution_backward", _convolution_backward, _convolution_backward_meta)


@vjp("prims.convolution")
def _(b, g):
    p = b.params
    a, weight, bias = p.a, p.weight, p.bias
    ga, gw, gb = convolution_backward(g, a, weight, _is_t(bias), p.stride, p.padding, p.dilation, p.transposed,
                                      p.output_padding, p.groups, a.requires_grad)
    return [(a, ga), (weight, gw), (bias, gb)]


# -- the fallback: ask PyTorch's autograd ------------------------------------------------------
def _resolve(qualname: str):
    root, _, rest = qualname.partition(".")
    if root == "ltorch":
        return LTORCH[rest].impl
    obj = {"prims": prims, "torch": torch}.get(root)
    if obj is None:
        if qualname in KNOWN_AS:  # a symbol made again from another process's recipe, by that process's name
            return KNOWN_AS[qualname].impl
        for sym in OPAQUE.values():
            if sym.qualname == qualname:
                return sym.impl
        raise KeyError(f"cannot find {qualname!r} to differentiate it")
    for part in rest.split("."):
        obj = getattr(obj, part)
    return obj.impl if isinstance(obj, Symbol) else obj


def _float_tensors(args, kwargs) -> list:
    return [v for v in tree_flatten((args, kwargs)) if isinstance(v, (torch.Tensor, TensorProxy))
            and (v.dtype.is_floating_point or v.dtype.is_complex)]


def _eager_vjp_impl(qualname, args, kwargs, grads, wrt=None, *, on_copies=False):
    """Gradients of the call for its floating tensor arguments, in order; ``wrt`` (one bool each)
    names those to differentiate (the others get zeros: some arguments, such as nll_loss's weight,
    PyTorch refuses to differentiate at all). ``on_copies``: the other tensor arguments are passed as
    copies, for a call that writes into an argument (instance norm's running statistics), which it did
    in forward and must not do again here."""
    fn = _resolve(qualname)
    if not on_copies and torch.compiler.is_compiling():
        return _vjp_traced(fn, args, kwargs, grads, wrt)
    floats = _float_tensors(args, kwargs)
    wanted = {id(v) for v, w in zip(floats, wrt if wrt is not None else [True] * len(floats)) if w}
    leaves, copies = {}, {}

    def leaf(v):
        if not isinstance(v, torch.Tensor):
            return v
        if id(v) in wanted:
            t = leaves.get(id(v))
            if t is None:
                t = leaves[id(v)] = v.detach().requires_grad_()
            return t
        if not on_copies:
            return v
        t = copies.get(id(v))
        if t is None:
            t = copies[id(v)] = v.clone()
        return t

    with torch.enable_grad():
        a2, k2 = tree_map(leaf, args), tree_map(leaf, kwargs)
        out = fn(*a2, **k2)
        outs = [o for o in tree_flatten(out) if isinstance(o, torch.Tensor)]
        pairs = [(o, gr) for o, gr in zip(outs, grads) if gr is not None and o.requires_grad]
        inputs = list(leaves.values())  # one leaf per tensor, however often the call takes it
        res = (torch.autograd.grad([o for o, _ in pairs], inputs, [gr for _, gr in pairs], allow_unused=True)
               if pairs and inputs else [None] * len(inputs))
    by_leaf = dict(zip(leaves, res))
    # a tensor passed several times (self-attention's query, key and value) gets its whole gradient once:
    # the gradients of an argument's occurrences are summed, so the others get zeros
    out = []
    for v in floats:
        r = by_leaf.pop(id(v), None)
        out.append(torch.zeros_like(v) if r is None else r)
    return tuple(out)


def _vjp_traced(fn, args, kwargs, grads, wrt):
    """``_eager_vjp_impl`` as TorchDynamo traces it into a fusion region's graph (the inductor executor):
    ``torch.func.vjp``, which Dynamo captures whole, where ``torch.autograd.grad`` would break the graph.
    AOTAutograd then lowers PyTorch's own derivative of the call to aten ops that Inductor fuses with the
    rest of the backward; what the derivative does not read of the forward is dropped."""
    import torch.utils._pytree as pytree

    leaves, spec = pytree.tree_flatten((args, kwargs))
    floats = [i for i, v in enumerate(leaves) if isinstance(v, torch.Tensor)
              and (v.dtype.is_floating_point or v.dtype.is_complex)]
    wrt = wrt if wrt is not None else [True] * len(floats)
    # one primal per tensor, however often the call takes it (its gradient is given once, as eager's)
    first: dict[int, int] = {}  # leaf position -> position of the primal it is
    primals: list[int] = []
    for i, w in zip(floats, wrt):
        if not w:
            continue
        same = next((j for j in primals if leaves[j] is leaves[i]), None)
        if same is None:
            primals.append(i)
            same = i
        first[i] = same

    # the tensors not differentiated enter as constants (nll_loss refuses a weight that requires grad)
    now_leaves = [v.detach() if isinstance(v, torch.Tensor) else v for v in leaves]

    def call(*values):
        now = list(now_leaves)
        for i, j in first.items():
            now[i] = values[primals.index(j)]
        a, k = pytree.tree_unflatten(now, spec)
        return tuple(o for o in pytree.tree_leaves(fn(*a, **k)) if isinstance(o, torch.Tensor))

    outs, pullback = torch.func.vjp(call, *(leaves[i] for i in primals))
    cotangents = tuple(g if g is not None else torch.zeros_like(o)
                       for o, g in zip(outs, tuple(grads) + (None,) * (len(outs) - len(grads))))
    got = pullback(cotangents)
    return tuple(got[primals.index(i)] if first.get(i) == i else torch.zeros_like(leaves[i]) for i in floats)


def _eager_vjp_meta(qualname, args, kwargs, grads, wrt=None):
    tr = current_trace()
    return tuple(tr.proxy(v.shape, v.dtype, v.device) for v in _float_tensors(args, kwargs))


@vjp("prims.bernoulli")
def _(b, g):
    return []  # the noise depends on its argument's layout, not on its values


eager_vjp = backward_symbol("eager_vjp", _eager_vjp_impl, _eager_vjp_meta, tags={Tag.DONT_RECOMPUTE})
eager_vjp_on_copies = backward_symbol("eager_vjp_on_copies", functools.partial(_eager_vjp_impl, on_copies=True),
                                      _eager_vjp_meta, tags={Tag.DONT_RECOMPUTE})


# ---- random calls with no rule: keep the generator's state, replay it in backward
#
# An opaque call that draws random numbers (``F.multi_head_attention_forward`` with dropout,
# ``F.rrelu`` in training) cannot simply run again under autograd in backward: it would draw
# other numbers and move the generator. Autodiff gives such a call, when an input needs a
# gradient, a forward variant that first reads the state of the generator it draws from and
# returns it with its outputs (a value saved for backward, like dropout's mask); the backward
# runs the call again under autograd from that state, inside ``torch.random.fork_rng``, so it
# draws the same numbers and the generator is left where the forward left it (as
# ``torch.utils.checkpoint`` does to recompute a random forward).


def _generator_device(args, kwargs) -> str:
    """The device whose generator the call draws from: that of its first tensor argument."""
    for v in tree_flatten((args, kwargs)):
        if isinstance(v, (torch.Tensor, TensorProxy)):
            return str(v.device)
    return "cpu"


def _generator_state(device: str) -> torch.Tensor:
    d = torch.device(device)
    return torch.cuda.get_rng_state(d) if d.type == "cuda" else torch.get_rng_state()


def _keeping_state_impl(qualname, device, args, kwargs):
    state = _generator_state(device)
    return _resolve(qualname)(*args, **kwargs), state


def _keeping_state_meta(qualname, device, args, kwargs):
    d = torch.device(device)
    n = _generator_state(device).numel() if d.type == "cpu" or torch.cuda.is_available() else 16
    # the call's own outputs are the original call's (autodiff puts them in place): only the state is new here
    return None, current_trace().proxy((n,), torch.uint8, d)


call_keeping_state = backward_symbol("call_keeping_state", _keeping_state_impl, _keeping_state_meta,
                                     tags={Tag.RANDOM, Tag.DONT_RECOMPUTE})


def _replay_vjp_impl(qualname, device, state, args, kwargs, grads, wrt=None):
    d = torch.device(device)
    with torch.random.fork_rng(devices=[d] if d.type == "cuda" else [], device_type="cuda"):
        if d.type == "cuda":
            torch.cuda.set_rng_state(state, d)
        else:
            torch.set_rng_state(state)
        return _eager_vjp_impl(qualname, args, kwargs, grads, wrt, on_copies=True)


def _replay_vjp_meta(qualname, device, state, args, kwargs, grads, wrt=None):
    return _eager_vjp_meta(qualname, args, kwargs, grads, wrt)


eager_vjp_replaying = backward_symbol("eager_vjp_replaying", _replay_vjp_impl, _replay_vjp_meta,
                                      tags={Tag.DONT_RECOMPUTE})


def keeping_state_variant(b: BoundSymbol):
    """The forward variant of a random call with no derivative rule: the call, and the generator's state before it.

    Recorded into the active trace; autodiff gives it ``b``'s id and outputs (see ``_with_residuals``).
    """
    return call_keeping_state(b.sym.qualname, _generator_device(b.args, b.kwargs), b.args, b.kwargs)


def needs_state_to_differentiate(b: BoundSymbol) -> bool:
    """A random call that only PyTorch's autograd can differentiate (no rule, no decomposition)."""
    return b.random and b.sym.qualname not in VJP and not b.subsymbols


@vjp(call_keeping_state)
def _(b, g):
    qualname, device, args, kwargs = b.args
    *outs, state = b.outputs
    grads = tuple(g)[:len(outs)] if isinstance(g, tuple) else (g,)
    return _by_autograd(args, kwargs,
                        lambda wrt: eager_vjp_replaying(qualname, device, state, args, kwargs, grads, wrt))


def _by_autograd(args, kwargs, backward) -> list:
    """(argument, gradient) pairs for the call's floating tensor arguments that need a gradient.

    ``backward(wrt)`` records the call that asks PyTorch's autograd; ``wrt`` says which arguments to
    differentiate, None when all of them.
    """
    floats = _float_tensors(args, kwargs)
    wrt = tuple(p.requires_grad for p in floats)
    if not any(wrt):
        return []
    got = backward(None if all(wrt) else wrt)
    return [(p, o) for p, o, w in zip(floats, got, wrt) if w]


# ---- custom operators with a registered derivative: their own backward, on the saved forward
#
# An operator made with ``torch.library.custom_op`` and given a derivative with
# ``torch.library.register_autograd(op, backward, setup_context=...)`` (transformers' grouped
# matmul for mixture-of-experts models) is opaque to thunderlab, but PyTorch's documentation says
# how autograd differentiates it: ``setup_context(ctx, inputs, output)`` runs after the forward and
# keeps on ``ctx`` what ``backward(ctx, *grads)`` reads; ``backward`` returns one gradient per input.
# The backward trace does the same with the forward's inputs and output, instead of running the
# forward again under autograd as ``eager_vjp`` would.


class _Context:
    """The ``ctx`` a custom operator's ``setup_context`` and ``backward`` share (what they may use of one)."""

    def __init__(self, needs_input_grad: tuple):
        self.needs_input_grad = needs_input_grad
        self.saved_tensors: tuple = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *tensors):
        pass  # the forward ran already; what needs a gradient was decided there

    def set_materialize_grads(self, value: bool):
        self.materialize_grads = value


def _overload(op):
    return getattr(op, "default", None) if isinstance(op, torch._ops.OpOverloadPacket) else op


def _registered_derivative(op):
    """The custom operator ``op``'s definition when it has a derivative registered with
    ``torch.library.register_autograd`` (its ``_backward_fn``), else None."""
    op = _overload(op)
    if not isinstance(op, torch._ops.OpOverload):
        return None
    opdef = torch._library.custom_ops._maybe_get_opdef(op)
    return opdef if opdef is not None and opdef._backward_fn is not None else None


def _bind(params, args, kwargs) -> tuple[tuple, dict]:
    """The operator's positional inputs and its keyword-only ones, defaults filled in (as setup_context gets them);
    ``params``: its schema's arguments as (name, keyword-only, default), ``custom_plan``'s."""
    pos, kw = [], {}
    for i, (name, kwarg_only, default) in enumerate(params):
        if kwarg_only:
            kw[name] = kwargs.get(name, default)
        else:
            pos.append(args[i] if i < len(args) else kwargs.get(name, default))
    return tuple(pos), kw


# qualname -> (the operator's definition, its schema's arguments as (name, keyword-only, default)), made when
# a backward first differentiates the operator: TorchDynamo then traces ``_custom_op_vjp_impl`` on plain data
_CUSTOM: dict[str, tuple] = {}


def custom_plan(qualname: str) -> tuple | None:
    """``_CUSTOM``'s entry for a custom operator with a registered derivative (made on first use), else None."""
    plan = _CUSTOM.get(qualname)
    if plan is None:
        op = _overload(_resolve(qualname))
        opdef = _registered_derivative(op)
        if opdef is None:
            return None
        plan = _CUSTOM[qualname] = (opdef, tuple((a.name, a.kwarg_only, a.default_value)
                                                 for a in op._schema.arguments))
    return plan


def _custom_op_vjp_impl(qualname, args, kwargs, output, grads, needs_input_grad):
    """The operator's ``setup_context`` on the forward's inputs and output, then its ``backward``; one gradient
    per floating tensor argument, as ``eager_vjp`` gives them. In a fusion region TorchDynamo inlines both (the
    library's Python; the operators they call are graph nodes), reading the operator's definition from
    ``_CUSTOM``, which the backward's trace filled."""
    import torch.utils._pytree as pytree

    opdef, params = custom_plan(qualname)
    inputs, keyword_only = _bind(params, args, kwargs)
    ctx = _Context(needs_input_grad)
    with torch.no_grad():
        if opdef._setup_context_fn is not None:
            if keyword_only:
                opdef._setup_context_fn(ctx=ctx, inputs=inputs, keyword_only_inputs=keyword_only, output=output)
            else:
                opdef._setup_context_fn(ctx=ctx, inputs=inputs, output=output)
        outs = [o for o in pytree.tree_leaves(output) if isinstance(o, torch.Tensor)]
        if ctx.materialize_grads:
            grads = tuple(torch.zeros_like(o) if gr is None else gr for o, gr in zip(outs, grads))
        got = opdef._backward_fn(ctx, *grads)
    got = got if isinstance(got, (tuple, list)) else (got,)
    summed: list[tuple] = []  # (input, its gradient), one per tensor however often it was passed
    for a, gr in zip(inputs, got):
        if isinstance(a, torch.Tensor) and isinstance(gr, torch.Tensor):
            k = next((k for k, (b, _) in enumerate(summed) if b is a), None)
            if k is None:
                summed.append((a, gr))
            else:
                summed[k] = (a, summed[k][1] + gr)
    out = []
    for v in pytree.tree_leaves((args, kwargs)):
        if isinstance(v, torch.Tensor) and (v.dtype.is_floating_point or v.dtype.is_complex):
            k = next((k for k, (b, _) in enumerate(summed) if b is v), None)
            out.append(torch.zeros_like(v) if k is None else summed.pop(k)[1])
    return tuple(out)


def custom_vjp_traceable(b: BoundSymbol) -> bool:
    """Whether TorchDynamo traces ``b`` (an ``ltorch.custom_op_vjp`` call) whole: the operator's registered
    ``setup_context`` and ``backward`` are a library's Python, which may do what Dynamo cannot (``.tolist()``,
    printing). Tried once per operator and argument layout, on zeros of the call's shapes with Dynamo's
    pass-through backend, so that a fusion region never takes in a call its compile would fail on."""
    qualname = b.args[0]
    if qualname not in _CUSTOM:
        return False
    key = (qualname, tuple((p.shape, p.dtype) for p in tree_flatten((b.args, b.kwargs)) if isinstance(p, TensorProxy)))
    known = _TRACEABLE.get(key)
    if known is None:
        def real(v):
            if not isinstance(v, TensorProxy):
                return v
            return torch.zeros(v.shape, dtype=v.dtype, device=v.device) if v.device.type == "cpu" else v
        args = tree_map(real, b.args)
        if any(isinstance(v, TensorProxy) for v in tree_flatten(args)):
            known = False  # only CPU calls are tried (a GPU's would need the device here)
        else:
            try:
                with torch._dynamo.config.patch(recompile_limit=64):
                    torch.compile(_custom_op_vjp_impl, backend="eager", fullgraph=True, dynamic=False)(*args)
                known = True
            except Exception:  # noqa: BLE001 - whatever Dynamo or the library raised: not traced whole
                known = False
        _TRACEABLE[key] = known
    return known


_TRACEABLE: dict[tuple, bool] = {}


def _custom_op_vjp_meta(qualname, args, kwargs, output, grads, needs_input_grad):
    return _eager_vjp_meta(qualname, args, kwargs, grads)


custom_op_vjp = backward_symbol("custom_op_vjp", _custom_op_vjp_impl, _custom_op_vjp_meta,
                                tags={Tag.DONT_RECOMPUTE})


def eager_rule(b: BoundSymbol, g):
    """Differentiate ``b`` by running it under PyTorch autograd in the backward trace."""
    grads = tuple(g) if isinstance(g, tuple) else (g,)
    if b.random and any(p.requires_grad for p in _float_tensors(b.args, b.kwargs)):
        # running it again in backward would draw other numbers than forward drew (and move the generator);
        # autodiff gives such a call its variant that keeps the generator's state (call_keeping_state)
        raise NotImplementedError(
            f"{b.sym.qualname} draws random numbers and has no derivative rule, and this call of it did not keep "
            f"the generator's state to replay it from (autodiff's residual variants give it one)")
    plan = None if b.side_effect or _registered_derivative(b.sym.impl) is None else custom_plan(b.sym.qualname)
    if plan is not None:  # the plan is also what a fusion region's trace of the call reads (_custom_op_vjp_impl)
        inputs, _ = _bind(plan[1], b.args, b.kwargs)
        needs = tuple(isinstance(a, TensorProxy) and a.requires_grad for a in inputs)
        return _by_autograd(b.args, b.kwargs,
                            lambda wrt: custom_op_vjp(b.sym.qualname, b.args, b.kwargs, b.output, grads, needs))
    # a call that writes into an argument runs again on copies of the tensors it does not differentiate
    vjp_call = eager_vjp_on_copies if b.side_effect else eager_vjp

    def backward(wrt):
        return vjp_call(b.sym.qualname, b.args, b.kwargs, grads, *(() if wrt is None else (wrt,)))

    return _by_autograd(b.args, b.kwargs, backward)
