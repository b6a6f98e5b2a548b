"""Operations: prims, torch-level symbols (``ltorch``) and the torch -> symbol mapping."""
from thunderlab.core.codegen import NAMESPACE as _NAMESPACE

from . import prims
from . import torch_ops as ltorch

_NAMESPACE.update(prims=prims, ltorch=ltorch)

__all__ = ["prims", "ltorch"]
