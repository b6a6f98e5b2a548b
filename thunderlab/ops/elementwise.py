"""Elementwise torch-level ops: unary math, binary arithmetic and comparisons, ``where`` and friends.

Each decomposes into one prim after torch's type promotion and broadcasting (``common.elementwise``).
Derivatives: the prims' rules (``thunderlab.ops.vjp``) cover the decompositions; the rules here
keep the common arithmetic whole in a differentiated program (one call per op, as eager runs it).
"""
from __future__ import annotations

import operator

import torch

from thunderlab.core.trace import TraceError

from . import prims
from .common import Promotion as K
from .common import broadcast, broadcast_to_shape, convert, elementwise, is_tensor, promote, sum_to
from .declare import torchsymbol
from .rules import derivative


def unary(pname: str, kind, *fns, methods=()):
    """The torch-level op that is prim ``pname`` after promotion (``kind``), standing for ``fns``."""
    p = prims.PRIMS[pname]

    def decomposition(a):
        return elementwise(p, a, kind=kind)

    decomposition.__name__ = pname
    return torchsymbol(*fns, name=pname, methods=methods or (pname,))(decomposition)


def binary(pname: str, *fns, kind=K.DEFAULT, methods=()):
    """The torch-level op that is binary prim ``pname`` after promotion and broadcasting."""
    p = prims.PRIMS[pname]

    def decomposition(a, b):
        return elementwise(p, a, b, kind=kind)

    decomposition.__name__ = pname
    return torchsymbol(*fns, name=pname, methods=methods or (pname,))(decomposition)


# -- unary: integers compute in the default float dtype ----------------------------------------
F = K.INT_TO_FLOAT
exp = unary("exp", F, torch.exp)
exp2 = unary("exp2", F, torch.exp2)
expm1 = unary("expm1", F, torch.expm1)
log = unary("log", F, torch.log)
log1p = unary("log1p", F, torch.log1p)
log2 = unary("log2", F, torch.log2)
log10 = unary("log10", F, torch.log10)
sin = unary("sin", F, torch.sin)
cos = unary("cos", F, torch.cos)
tan = unary("tan", F, torch.tan)
asin = unary("asin", F, torch.asin)
acos = unary("acos", F, torch.acos)
atan = unary("atan", F, torch.atan)
sinh = unary("sinh", F, torch.sinh)
cosh = unary("cosh", F, torch.cosh)
tanh = unary("tanh", F, torch.tanh, torch.nn.functional.tanh)
asinh = unary("asinh", F, torch.asinh)
acosh = unary("acosh", F, torch.acosh)
atanh = unary("atanh", F, torch.atanh)
sqrt = unary("sqrt", F, torch.sqrt)
rsqrt = unary("rsqrt", F, torch.rsqrt)
erf = unary("erf", F, torch.erf)
erfc = unary("erfc", F, torch.erfc)
erfinv = unary("erfinv", F, torch.erfinv)
lgamma = unary("lgamma", F, torch.lgamma)
digamma = unary("digamma", F, torch.digamma)
sigmoid = unary("sigmoid", F, torch.sigmoid, torch.nn.functional.sigmoid)
reciprocal = unary("reciprocal", F, torch.reciprocal)
# -- unary: the result keeps the input's dtype ---------------------------------------------------
abs_ = unary("abs", K.DEFAULT, torch.abs)
neg = unary("neg", K.DEFAULT, torch.neg)
floor = unary("floor", K.DEFAULT, torch.floor)
ceil = unary("ceil", K.DEFAULT, torch.ceil)
trunc = unary("trunc", K.DEFAULT, torch.trunc)
sign = unary("sign", K.DEFAULT, torch.sign)
bitwise_not = unary("bitwise_not", K.DEFAULT, torch.bitwise_not)
# -- unary predicates ----------------------------------------------------------------------------
isnan = unary("isnan", K.ALWAYS_BOOL, torch.isnan)
isinf = unary("isinf", K.ALWAYS_BOOL, torch.isinf)
isfinite = unary("isfinite", K.ALWAYS_BOOL, torch.isfinite)
signbit = unary("signbit", K.ALWAYS_BOOL, torch.signbit)
logical_not = unary("logical_not", K.ALWAYS_BOOL, torch.logical_not)
del F


@torchsymbol(torch.round, methods=("round",))
def round_(a, *, decimals=0):
    if decimals == 0:
        return elementwise(prims.round, a)
    if not a.dtype.is_floating_point:
        return NotImplemented
    # as torch does: scale, round half to even, scale back (dividing by 10**-d for negative d)
    if decimals > 0:
        scale = 10.0 ** decimals
        return prims.div(prims.round(prims.mul(a, scale)), scale)
    scale = 10.0 ** -decimals
    return prims.mul(prims.round(prims.div(a, scale)), scale)


# -- binary ------------------------------------------------------------------------------------
maximum = binary("maximum", torch.maximum)
minimum = binary("minimum", torch.minimum)
atan2 = binary("atan2", torch.atan2, kind=K.INT_TO_FLOAT)
fmod = binary("fmod", torch.fmod)
remainder = binary("remainder", torch.remainder, operator.mod)
bitwise_and = binary("bitwise_and", torch.bitwise_and, operator.and_, methods=("bitwise_and", "__and__"))
bitwise_or = binary("bitwise_or", torch.bitwise_or, operator.or_, methods=("bitwise_or", "__or__"))
bitwise_xor = binary("bitwise_xor", torch.bitwise_xor, operator.xor, methods=("bitwise_xor", "__xor__"))
eq = binary("eq", torch.eq, operator.eq, kind=K.ALWAYS_BOOL, methods=("eq", "__eq__"))
ne = binary("ne", torch.ne, operator.ne, kind=K.ALWAYS_BOOL, methods=("ne", "__ne__"))
lt = binary("lt", torch.lt, operator.lt, kind=K.ALWAYS_BOOL, methods=("lt", "__lt__"))
le = binary("le", torch.le, operator.le, kind=K.ALWAYS_BOOL, methods=("le", "__le__"))
gt = binary("gt", torch.gt, operator.gt, kind=K.ALWAYS_BOOL, methods=("gt", "__gt__"))
ge = binary("ge", torch.ge, operator.ge, kind=K.ALWAYS_BOOL, methods=("ge", "__ge__"))
logical_and = binary("logical_and", torch.logical_and, kind=K.ALWAYS_BOOL)
logical_or = binary("logical_or", torch.logical_or, kind=K.ALWAYS_BOOL)
logical_xor = binary("logical_xor", torch.logical_xor, kind=K.ALWAYS_BOOL)


@torchsymbol(torch.add, operator.add, methods=("add", "__add__", "__radd__"))
def add(a, b, *, alpha=None):
    if alpha is not None and alpha != 1:
        b = mul(b, alpha)
    return elementwise(prims.add, a, b)


@torchsymbol(torch.sub, operator.sub, methods=("sub", "__sub__"))
def sub(a, b, *, alpha=None):
    if alpha is not None and alpha != 1:
        b = mul(b, alpha)
    return elementwise(prims.sub, a, b)


@derivative(add, sub)
def _(b, g):
    a, c, alpha = b.params.a, b.params.b, b.params.alpha
    gc = neg(g) if b.sym is sub else g
    if alpha not in (None, 1) and is_tensor(c):
        gc = mul(gc, alpha)
    return [(a, sum_to(g, a.shape) if is_tensor(a) else None), (c, sum_to(gc, c.shape) if is_tensor(c) else None)]


@torchsymbol(torch.rsub, methods=("__rsub__",))
def rsub(a, b, *, alpha=None):
    return sub(b, a) if alpha is None else sub(b, a, alpha=alpha)


@derivative(rsub)
def _(b, g):
    # rsub(a, b, alpha) = b - alpha * a. (Its decomposition calls ltorch.sub with alpha=None,
    # which torch.sub rejects when autodiff runs that call by itself.)
    a, c, alpha = b.params.a, b.params.b, b.params.alpha
    ga = prims.neg(g) if alpha in (None, 1) else prims.mul(g, -alpha)
    return [(a, sum_to(ga, a.shape) if is_tensor(a) else None), (c, sum_to(g, c.shape) if is_tensor(c) else None)]


@torchsymbol(torch.mul, operator.mul, methods=("mul", "__mul__", "__rmul__"))
def mul(a, b):
    return elementwise(prims.mul, a, b)


@derivative(mul)
def _(b, g):
    a, c = b.params.a, b.params.b
    return [(a, sum_to(mul(g, c), a.shape) if is_tensor(a) else None),
            (c, sum_to(mul(g, a), c.shape) if is_tensor(c) else None)]


def _div_impl(a, b, *, rounding_mode=None):
    return torch.div(a, b, rounding_mode=rounding_mode)


def _int_floor_divide(a, b):
    """``a // b`` of integers, exactly: the quotient toward zero, one less where the remainder's sign differs
    from the divisor's."""
    q = elementwise(prims.trunc_divide, a, b)
    r = elementwise(prims.fmod, a, b)
    divisor_negative = lt(b, 0) if is_tensor(b) else b < 0
    down = logical_and(ne(r, 0), ne(lt(r, 0), divisor_negative) if is_tensor(b) else
                       (gt(r, 0) if divisor_negative else lt(r, 0)))
    return sub(q, convert(down, q.dtype))


@torchsymbol(torch.div, torch.true_divide, operator.truediv, methods=("div", "true_divide", "__truediv__"),
             impl=_div_impl)
def div(a, b, *, rounding_mode=None):
    if rounding_mode is None:
        return elementwise(prims.div, a, b, kind=K.INT_TO_FLOAT)
    comp, res = promote(a, b)
    if comp.is_floating_point:
        q = elementwise(prims.div, a, b, kind=K.INT_TO_FLOAT)
        q = prims.trunc(q) if rounding_mode == "trunc" else prims.floor(q)
        return convert(q, res)
    if rounding_mode == "floor":
        return floor_divide(a, b)
    return convert(elementwise(prims.trunc_divide, a, b), res)


@derivative(div)
def _(b, g):
    a, c = b.params.a, b.params.b
    if b.params.rounding_mode is not None:
        return []
    ga = sum_to(div(g, c), a.shape) if is_tensor(a) else None
    gc = sum_to(neg(div(mul(g, b.output), c)), c.shape) if is_tensor(c) else None
    return [(a, ga), (c, gc)]


@torchsymbol(torch.floor_divide, operator.floordiv, methods=("floor_divide", "__floordiv__"))
def floor_divide(a, b):
    comp, res = promote(a, b)
    if comp.is_floating_point:
        return convert(prims.floor(elementwise(prims.div, a, b, kind=K.INT_TO_FLOAT)), res)
    return convert(_int_floor_divide(a, b), res)


@torchsymbol(torch.pow, operator.pow, methods=("pow", "__pow__"))
def pow_(a, b):
    return elementwise(prims.pow, a, b)


@derivative(pow_)
def _(b, g):
    a, e = b.params.a, b.params.b
    if is_tensor(e) or not is_tensor(a):
        return NotImplemented
    if e == 2:
        return [(a, mul(g, mul(a, 2.0)))]
    return [(a, mul(g, mul(pow_(a, e - 1), e)))]


@derivative(neg)
def _(b, g):
    return [(b.params.a, neg(g))]


@derivative(exp)
def _(b, g):
    return [(b.params.a, mul(g, b.output))]


@derivative(tanh)
def _(b, g):
    return [(b.params.a, mul(g, sub(1.0, mul(b.output, b.output))))]


@derivative(sigmoid)
def _(b, g):
    return [(b.params.a, mul(g, mul(b.output, sub(1.0, b.output))))]


@derivative(rsqrt)
def _(b, g):
    o = b.output
    return [(b.params.a, mul(g, mul(mul(o, mul(o, o)), -0.5)))]


# -- selection ---------------------------------------------------------------------------------
@torchsymbol(torch.where)
def where(condition, a, b):
    comp, res = promote(a, b)
    condition, a, b = broadcast(condition, a, b)
    if not is_tensor(a) and not is_tensor(b):
        a = prims.full(condition.shape, a, dtype=res, device=condition.device)
    return prims.where(condition, convert(a, res) if is_tensor(a) else a, convert(b, res) if is_tensor(b) else b)


def _tensor_where_impl(a, condition, other):
    return torch.where(condition, a, other)


@torchsymbol(torch.Tensor.where, name="tensor_where", methods=("where",), impl=_tensor_where_impl)
def tensor_where(a, condition, other):
    """``a.where(condition, other)``: the method takes the values first, unlike ``torch.where``."""
    return where(condition, a, other)


@torchsymbol(torch.clamp, torch.clip, methods=("clamp", "clip"))
def clamp(a, min=None, max=None):
    out = a
    if min is not None:
        out = maximum(out, min) if is_tensor(min) else where(lt(out, min), min, out)
    if max is not None:
        out = minimum(out, max) if is_tensor(max) else where(gt(out, max), max, out)
    if out is a:
        raise TraceError("clamp: at least one of min and max must be given")
    return out


@torchsymbol(torch.masked_fill, methods=("masked_fill",))
def masked_fill(a, mask, value):
    if is_tensor(value):
        return where(mask, broadcast_to_shape(convert(value, a.dtype), a.shape), a)
    return convert(where(mask, value, a), a.dtype)  # the result keeps a's dtype (True for 10 in a bool tensor)


@torchsymbol(torch.lerp, methods=("lerp",))
def lerp(a, end, weight):
    return add(a, mul(weight, sub(end, a)))


@torchsymbol(torch.addcmul, methods=("addcmul",))
def addcmul(a, t1, t2, *, value=1):
    return add(a, mul(mul(t1, t2), value))
