"""Operations: prims, torch-level symbols (``ltorch``) and the torch -> symbol mapping."""
from . import prims
from . import torch_ops as ltorch

__all__ = ["prims", "ltorch"]
