"""Torch-level symbols (``ltorch``): the operations a captured PyTorch program calls.

Each symbol runs eagerly with the torch function it stands for, and most carry a
decomposition into prims (broadcasting, type promotion and reductions spelled out), which
the ``claim`` pass uses when no executor takes the op whole. Symbols without a
decomposition compute their metadata on the meta device.

The ops are declared by family, each with its derivative rules beside it (see ``declare``):

=================  ===========================================================
``elementwise``    unary math, arithmetic, comparisons, ``where``, ``clamp``
``activations``    relu, gelu, silu, ..., softmax, with their backward kernels
``creation``       zeros, ones, full, arange, the ``*_like`` and ``new_*`` forms
``conversion``     ``to``, ``float()``, ``clone``, ``detach``, ``contiguous``
``views``          reshape, transpose, expand, split, getitem, ... (``Tag.VIEW``)
``shape``          cat, stack, flip, roll, repeat, gathers, tril/triu
``reductions``     sum, mean, max, var, logsumexp, topk, sort
``linalg``         matmul, linear, einsum
``normalization``  layer, RMS, batch and group norm
``randomness``     rand, randn, dropout
``attention``      scaled dot-product attention
``losses``         nll, cross entropy, mse
``embedding``      embedding, one_hot
``convolution``    conv1d/2d/3d, pad, pooling
``functions``      ``torch.autograd.Function`` subclasses, with the backward they define
=================  ===========================================================

``ltorch.<name>`` (this module's attributes, and what printed programs call) finds any of them.
"""
from __future__ import annotations

from thunderlab.core.symbols import Symbol

# imported for their declarations, in dependency order
# isort: off
from . import elementwise, creation, conversion, shape, views, reductions, activations  # noqa: F401
from . import linalg, normalization, randomness, attention, losses, embedding, convolution  # noqa: F401
from . import vjp  # noqa: F401  (the prims' derivative rules and ltorch.eager_vjp)
from . import collectives  # noqa: F401  (all_reduce, all_gather, reduce_scatter, broadcast, wait)
from . import functions  # noqa: F401  (torch.autograd.Function subclasses, with their own backward)
# isort: on
from .declare import LTORCH, TORCH_SYMBOLS, opaque_symbol, torchsymbol

__all__ = ["TORCH_SYMBOLS", "LTORCH", "torchsymbol", "opaque_symbol"]


def __getattr__(name: str) -> Symbol:
    try:
        return LTORCH[name]
    except KeyError:
        raise AttributeError(f"thunderlab.ops.ltorch has no symbol {name!r}") from None
