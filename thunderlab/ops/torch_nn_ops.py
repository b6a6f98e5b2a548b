"""Torch-level neural-network ops: linear algebra, normalization, attention, losses, convolution."""
from __future__ import annotations

import math
import operator

import torch
import torch.nn.functional as F

from thunderlab.core.symbols import Tag

from . import prims
from .torch_ops import _convert, _dims, _is_t, _keep, opaque_symbol, torchsymbol

__all__ = []
_nn = torch._C._nn
_T = globals()


def _sym(name, *fns, methods=(), impl=None, **flags):
    def deco(fn):
        sym = torchsymbol(*fns, name=name, methods=methods, impl=impl, **flags)(fn)
        _T[name] = sym
        return sym

    return deco


def _lt():
    from . import torch_ops

    return torch_ops


def _up(a):
    """Compute in float32 for half-precision inputs, as torch does."""
    return _convert(a, torch.float32) if a.dtype in (torch.float16, torch.bfloat16) else a


# -- linear algebra ------------------------------------------------------------------------
@_sym("linear", F.linear, _nn.linear)
def linear(a, weight, bias=None):
    return prims.linear(a, weight, bias)


@_sym("matmul", torch.matmul, operator.matmul, methods=("matmul", "__matmul__"))
def matmul(a, b):
    return prims.matmul(a, b)


@_sym("mm", torch.mm, methods=("mm",))
def mm(a, b):
    return prims.matmul(a, b)


@_sym("bmm", torch.bmm, methods=("bmm",))
def bmm(a, b):
    return prims.matmul(a, b)


def _scaled_sum(a, m1, m2, beta, alpha):
    """beta * a + alpha * (m1 @ m2): addmm and baddbmm, which differ only in their checks."""
    lt = _lt()
    if not m1.dtype.is_floating_point and not (isinstance(alpha, int) and isinstance(beta, int)):
        return NotImplemented  # torch truncates float scalars for integer tensors
    prod = prims.matmul(m1, m2)
    prod = lt.mul(prod, alpha) if alpha != 1 else prod
    if beta == 0:  # a is ignored: its nan and inf do not propagate
        return prod
    return lt.add(lt.mul(a, beta) if beta != 1 else a, prod)


@_sym("addmm", torch.addmm, methods=("addmm",))
def addmm(a, mat1, mat2, *, beta=1, alpha=1):  # torch's keyword names: addmm(x, mat1=..., mat2=...)
    return _scaled_sum(a, mat1, mat2, beta, alpha)


@_sym("baddbmm", torch.baddbmm, methods=("baddbmm",))
def baddbmm(a, batch1, batch2, *, beta=1, alpha=1):  # BLOOM calls x.baddbmm(batch1=..., batch2=...)
    return _scaled_sum(a, batch1, batch2, beta, alpha)


opaque_symbol("einsum", torch.functional.einsum, torch.einsum)


# -- normalization -------------------------------------------------------------------------
@_sym("layer_norm", F.layer_norm, torch.layer_norm)
def layer_norm(a, normalized_shape, weight=None, bias=None, eps=1e-5):
    lt = _lt()
    dims = tuple(range(a.ndim - len(normalized_shape), a.ndim))
    x = _up(a)
    var, mean = prims.var_mean(x, dims, correction=0)
    var, mean = _keep(var, a, dims), _keep(mean, a, dims)
    out = lt.mul(lt.sub(x, mean), lt.rsqrt(lt.add(var, eps)))
    if weight is not None:
        out = lt.mul(out, weight)
    if bias is not None:
        out = lt.add(out, bias)
    return _convert(out, a.dtype)


@_sym("rms_norm", F.rms_norm, torch.rms_norm)
def rms_norm(a, normalized_shape, weight=None, eps=None):
    lt = _lt()
    dims = tuple(range(a.ndim - len(normalized_shape), a.ndim))
    x = _up(a)
    if eps is None:
        eps = torch.finfo(a.dtype).eps
    ms = lt.mean(lt.mul(x, x), dims, keepdim=True)
    out = lt.mul(x, lt.rsqrt(lt.add(ms, eps)))
    if weight is not None:
        out = lt.mul(out, weight)
    return _convert(out, a.dtype)


@_sym("batch_norm", F.batch_norm, torch.batch_norm, tags={Tag.SIDE_EFFECT})
def batch_norm(a, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5,
               cudnn_enabled=None):
    lt = _lt()
    dims = tuple(d for d in range(a.ndim) if d != 1)
    bshape = tuple(a.shape[1] if d == 1 else 1 for d in range(a.ndim))
    if a.ndim < 2:
        return NotImplemented  # no channel dimension
    x = _up(a)

    def per_channel(v):
        return prims.broadcast_in_dim(v, bshape, (1,))

    if training or running_mean is None:
        var, mean = prims.var_mean(x, dims, correction=0)
        if training and running_mean is not None:
            if momentum is None:
                return NotImplemented  # cumulative averaging needs num_batches_tracked
            n = a.numel() // a.shape[1]
            new_mean = lt.add(lt.mul(running_mean, 1 - momentum), lt.mul(_convert(mean, running_mean.dtype), momentum))
            unbiased = lt.mul(var, n / max(n - 1, 1))
            new_var = lt.add(lt.mul(running_var, 1 - momentum), lt.mul(_convert(unbiased, running_var.dtype), momentum))
            prims.copy_(new_mean, running_mean)
            prims.copy_(new_var, running_var)
    else:
        mean, var = running_mean, running_var
    out = lt.mul(lt.sub(x, per_channel(mean)), per_channel(lt.rsqrt(lt.add(var, eps))))
    if weight is not None:
        out = lt.mul(out, per_channel(weight))
    if bias is not None:
        out = lt.add(out, per_channel(bias))
    return _convert(out, a.dtype)


@_sym("group_norm", F.group_norm, torch.group_norm)
def group_norm(a, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=None):
    lt = _lt()
    n, c = a.shape[0], a.shape[1]
    g = prims.reshape(_up(a), (n, num_groups, (c // num_groups) * math.prod(a.shape[2:])))
    var, mean = prims.var_mean(g, (2,), correction=0)
    out = lt.mul(lt.sub(g, _keep(mean, g, (2,))), lt.rsqrt(lt.add(_keep(var, g, (2,)), eps)))
    out = prims.reshape(out, a.shape)
    bshape = tuple(c if d == 1 else 1 for d in range(a.ndim))
    if weight is not None:
        out = lt.mul(out, prims.broadcast_in_dim(weight, bshape, (1,)))
    if bias is not None:
        out = lt.add(out, prims.broadcast_in_dim(bias, bshape, (1,)))
    return _convert(out, a.dtype)


# -- softmax family ------------------------------------------------------------------------
@_sym("softmax", torch.softmax, methods=("softmax",))
def softmax(a, dim, dtype=None):
    lt = _lt()
    x = _up(_convert(a, dtype) if dtype else a)
    d = _dims(a, dim)
    if a.numel():  # shift by the maximum for stability (an empty tensor has none)
        x = lt.sub(x, _keep(prims.amax(x, d), a, d))
    e = lt.exp(x)
    out = lt.div(e, _keep(prims.sum(e, d), a, d))
    return _convert(out, dtype or a.dtype)


@_sym("log_softmax", torch.log_softmax, methods=("log_softmax",))
def log_softmax(a, dim, dtype=None):
    lt = _lt()
    x = _up(_convert(a, dtype) if dtype else a)
    out = lt.sub(x, lt.logsumexp(x, dim, keepdim=True))
    return _convert(out, dtype or a.dtype)


# -- dropout, embedding, attention ---------------------------------------------------------
# (output, keep mask): what eager's dropout runs on these devices (ATen's fused kernel), kept whole
native_dropout = opaque_symbol("native_dropout", torch.native_dropout, tags={Tag.RANDOM})
FUSED_DROPOUT_DEVICES = {"cuda", "xpu"}


@_sym("dropout", F.dropout, torch.dropout, tags={Tag.RANDOM})
def dropout(a, p=0.5, training=True, inplace=False):
    lt = _lt()
    if not training or p == 0 or a.numel() == 0:
        return prims.convert_element_type(a, a.dtype)
    if p == 1:
        return lt.mul(a, 0)
    if a.device.type in FUSED_DROPOUT_DEVICES:
        return native_dropout(a, p, True)[0]
    if a.device.type == "cpu":  # eager's own steps, so the same draws: noise ~ Bernoulli(1 - p), scaled, times a
        return lt.mul(a, lt.div(prims.bernoulli(a, 1 - p), 1 - p))
    # elsewhere (mps, ...) eager's stream is not reproduced: a mask of the same distribution
    keep = lt.ge(prims.uniform(a.shape, 0.0, 1.0, dtype=torch.float32, device=a.device), p)
    return lt.where(keep, lt.mul(a, 1.0 / (1.0 - p)), 0.0)


@_sym("embedding", F.embedding, torch.embedding)
def embedding(a, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    if max_norm is not None:
        return NotImplemented  # renormalizes the weight in place
    if not _is_t(a):
        return NotImplemented
    return prims.take(weight, a, 0)


@_sym("scaled_dot_product_attention", F.scaled_dot_product_attention, _nn.scaled_dot_product_attention, tags={Tag.RANDOM})
def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    lt = _lt()
    if enable_gqa and q.shape[-3] != k.shape[-3]:
        return NotImplemented
    L, S = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    kt = prims.transpose(k, tuple(range(k.ndim - 2)) + (k.ndim - 1, k.ndim - 2))
    scores = lt.mul(lt.matmul(q, kt), scale)
    if is_causal:
        mask = lt.tril(prims.full((L, S), True, dtype=torch.bool, device=q.device))
        scores = lt.where(mask, scores, -float("inf"))
    if attn_mask is not None:
        scores = lt.where(attn_mask, scores, -float("inf")) if attn_mask.dtype == torch.bool else lt.add(scores, attn_mask)
    probs = softmax(scores, -1)
    if dropout_p > 0:
        probs = dropout(probs, dropout_p, True)
    return lt.matmul(probs, v)


# -- losses ------------------------------------------------------------------------------
def _reduce(loss, reduction):
    lt = _lt()
    if reduction == "mean":
        return lt.mean(loss)
    if reduction == "sum":
        return lt.sum(loss)
    if reduction == "none":
        return loss
    from thunderlab.core.trace import TraceError

    raise TraceError(f"loss reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


@_sym("nll_loss", F.nll_loss)
def nll_loss(a, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    lt = _lt()
    if weight is not None or size_average is not None or reduce is not None or a.ndim not in (1, 2):
        return NotImplemented
    unbatched = a.ndim == 1
    if unbatched:
        a, target = prims.reshape(a, (1,) + a.shape), prims.reshape(target, (1,))
    valid = lt.ne(target, ignore_index)
    safe = lt.where(valid, target, 0)
    picked = prims.reshape(prims.gather(a, 1, prims.reshape(safe, (safe.shape[0], 1))), (safe.shape[0],))
    loss = lt.where(valid, lt.neg(picked), 0.0)
    if reduction == "none" and unbatched:
        return prims.reshape(loss, ())  # an unbatched input gives an unbatched loss
    if reduction == "mean":
        return lt.div(lt.sum(loss), lt.sum(_convert(valid, a.dtype)))
    return _reduce(loss, reduction)


@_sym("cross_entropy", F.cross_entropy)
def cross_entropy(a, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    if label_smoothing or target.dtype.is_floating_point or a.ndim not in (1, 2):
        return NotImplemented
    return nll_loss(log_softmax(a, -1 if a.ndim == 1 else 1), target, weight, size_average, ignore_index, reduce, reduction)


@_sym("mse_loss", F.mse_loss)
def mse_loss(a, target, size_average=None, reduce=None, reduction="mean", weight=None):
    lt = _lt()
    if size_average is not None or reduce is not None or weight is not None:
        return NotImplemented
    d = lt.sub(a, target)
    return _reduce(lt.mul(d, d), reduction)


# -- convolution and pooling ---------------------------------------------------------------
def _tup(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def _string_padding(a, weight, padding, stride, dilation, n):
    """``padding="valid"`` or ``"same"`` as numbers, and the input padded on the right where "same" needs an odd
    total (as eager's convolution does); None where eager would refuse (another string, a strided "same")."""
    if padding == "valid":
        return a, (0,) * n
    if padding != "same" or any(s != 1 for s in _tup(stride, n)):
        return None
    left, config = [], [(0, 0, 0)] * a.ndim
    for i, (d, k) in enumerate(zip(_tup(dilation, n), weight.shape[2:])):
        total = d * (k - 1)
        left.append(total // 2)
        config[a.ndim - n + i] = (0, total - 2 * (total // 2), 0)
    if any(hi for _, hi, _ in config):
        a = prims.pad(a, 0, tuple(config))
    return a, tuple(left)


def _conv(n):
    def decomposition(a, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        if isinstance(padding, str):
            padded = _string_padding(a, weight, padding, stride, dilation, n)
            if padded is None:
                return NotImplemented  # eager's own error names what it accepts
            a, padding = padded
        if a.ndim == n + 1:  # unbatched: convolve a batch of one
            out = decomposition(prims.reshape(a, (1,) + a.shape), weight, bias, stride, padding, dilation, groups)
            return prims.reshape(out, out.shape[1:])
        return prims.convolution(a, weight, bias, _tup(stride, n), _tup(padding, n), _tup(dilation, n),
                                 False, (0,) * n, groups)

    return decomposition


_sym("conv1d", F.conv1d, torch.conv1d)(_conv(1))
_sym("conv2d", F.conv2d, torch.conv2d)(_conv(2))
_sym("conv3d", F.conv3d, torch.conv3d)(_conv(3))
opaque_symbol("max_pool2d", F.max_pool2d, torch.max_pool2d)
opaque_symbol("max_pool1d", F.max_pool1d, torch.max_pool1d)
opaque_symbol("avg_pool2d", F.avg_pool2d, _nn.avg_pool2d)
opaque_symbol("avg_pool1d", F.avg_pool1d, torch.avg_pool1d)
opaque_symbol("adaptive_avg_pool2d", F.adaptive_avg_pool2d, _nn.adaptive_avg_pool2d)


@_sym("pad", F.pad, torch._C._nn.pad)
def pad(a, pad, mode="constant", value=None):
    if mode != "constant":
        return NotImplemented
    config = [(0, 0, 0)] * a.ndim
    for i in range(len(pad) // 2):
        config[a.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1], 0)
    return prims.pad(a, 0 if value is None else value, tuple(config))


opaque_symbol("one_hot", F.one_hot, torch._C._nn.one_hot)
opaque_symbol("sort", torch.sort, methods=("sort",))
opaque_symbol("argsort", torch.argsort, methods=("argsort",))
