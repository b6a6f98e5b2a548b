"""Where a warning points: the line of the user's own code that led to it.

A call into a jitted function passes through frames of thunderlab, of TorchDynamo and often of the library a model
comes from (a Hugging Face model's forward is wrapped by transformers' decorators), so no fixed ``stacklevel``
reaches the user's line. ``warn`` walks out to the first frame that is none of those: not thunderlab's or torch's
code, not code generated at run time by them (FX's ``<eval_with_key>``, the ``<frozen ...>`` import machinery), and
not an installed package's (``site-packages``); where every frame is one of those (thunderlab called from a
library), the first frame outside thunderlab and torch.
"""
from __future__ import annotations

import os
import sys
import warnings

import torch

_INTERNAL = tuple(os.path.dirname(os.path.abspath(p)) + os.sep
                  for p in (os.path.dirname(__file__), torch.__file__))  # thunderlab/ and torch/
_GENERATED = ("<eval_with_key>", "<frozen ")
_INSTALLED = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")


def _internal(path: str) -> bool:
    return path.startswith(_INTERNAL) or path.startswith(_GENERATED)


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` pointing at the user's line (see the module)."""
    warnings.warn(message, category, stacklevel=_user_level())


def _user_level() -> int:
    """The ``stacklevel`` for ``warn``'s call of ``warnings.warn``: 1 is ``warn`` itself, 2 its caller, and so on."""
    frame = sys._getframe(2)  # warn's caller: this function's frame is 0, warn's 1
    level, outside = 2, None
    while frame is not None:
        path = frame.f_code.co_filename
        if not _internal(path):
            if outside is None:
                outside = level
            if not any(part in path for part in _INSTALLED):
                return level
        frame, level = frame.f_back, level + 1
    return outside or 2
