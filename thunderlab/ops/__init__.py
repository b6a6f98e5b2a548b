"""Operations: prims, torch-level symbols (``ltorch``) and the torch -> symbol mapping."""
from . import prims
from . import torch_ops as ltorch

from thunderlab.core.codegen import NAMESPACE as _NAMESPACE  # noqa: E402

_NAMESPACE.update(prims=prims, ltorch=ltorch)

__all__ = ["prims", "ltorch"]
