"""Operations: prims, torch-level symbols (``ltorch``) and the torch -> symbol mapping."""
from . import prims
from . import torch_ops as ltorch
from . import vjp, vjp_cnn, vjp_torch  # noqa: F401  (derivative rules register themselves)

from thunderlab.core.codegen import NAMESPACE as _NAMESPACE  # noqa: E402
from thunderlab.core.symbols import Tag  # noqa: E402

_NAMESPACE.update(prims=prims, ltorch=ltorch)

# Facts passes read through ``sym.tags`` (randomness and writes are declared with each symbol).
_TAGS = {
    # they only re-describe memory (shape, strides, a slice of it): recomputing them moves no data
    Tag.VIEW: ("reshape", "view", "view_as", "flatten", "unflatten", "squeeze", "unsqueeze", "transpose", "permute",
               "t", "expand", "expand_as", "broadcast_to", "broadcast_in_dim", "slice", "getitem", "split", "chunk",
               "split_with_sizes", "narrow", "select", "unbind"),
    # recomputing these costs real work: they are computed once, in forward
    Tag.DONT_RECOMPUTE: ("matmul", "linear", "mm", "bmm", "addmm", "baddbmm", "convolution", "conv1d", "conv2d",
                         "conv3d", "scaled_dot_product_attention", "einsum"),
}
for _tag, _names in _TAGS.items():
    for _n in _names:
        for _sym in (prims.PRIMS.get(_n), ltorch.TORCH_SYMBOLS.get(_n, (None,))[0]):
            if _sym is not None:
                _sym.tags = _sym.tags | {_tag}

__all__ = ["prims", "ltorch"]
