"""Ops that make tensors from sizes and values: zeros, ones, full, the ``*_like`` and ``new_*`` forms, arange."""
from __future__ import annotations

import builtins
import math

import torch

from . import prims
from .common import shape_arg
from .declare import torchsymbol


def _filled(name: str, fn, value):
    # torch.zeros(2, 3), torch.zeros((2, 3)) and torch.zeros(size=(2, 3)) (as BEiT calls it) are one call
    def decomposition(*sizes, size=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False,
                      out=None):
        return prims.full(shape_arg(sizes if size is None else (size,)), value,
                          dtype=dtype or torch.get_default_dtype(), device=torch.device(device or "cpu"),
                          requires_grad=requires_grad)

    return torchsymbol(fn, name=name)(decomposition)


zeros = _filled("zeros", torch.zeros, 0)
ones = _filled("ones", torch.ones, 1)
empty = _filled("empty", torch.empty, 0)


@torchsymbol(torch.full)
def full(size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
    if dtype is None:
        dtype = (torch.bool if isinstance(fill_value, bool) else torch.int64 if isinstance(fill_value, int)
                 else torch.get_default_dtype())
    return prims.full(tuple(size), fill_value, dtype=dtype, device=torch.device(device or "cpu"),
                      requires_grad=requires_grad)


def _filled_like(name: str, fn, value):
    def decomposition(a, *, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False,
                      memory_format=None):
        return prims.full(a.shape, value, dtype=dtype or a.dtype, device=torch.device(device or a.device),
                          requires_grad=requires_grad)

    return torchsymbol(fn, name=name)(decomposition)


zeros_like = _filled_like("zeros_like", torch.zeros_like, 0)
ones_like = _filled_like("ones_like", torch.ones_like, 1)
empty_like = _filled_like("empty_like", torch.empty_like, 0)


@torchsymbol(torch.full_like)
def full_like(a, fill_value, *, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False,
              memory_format=None):
    return prims.full(a.shape, fill_value, dtype=dtype or a.dtype, device=torch.device(device or a.device))


def _filled_new(name: str, value):
    def decomposition(a, *size, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
        return prims.full(shape_arg(size), value, dtype=dtype or a.dtype, device=torch.device(device or a.device))

    def impl(a, *size, **kw):
        return getattr(a, name)(*size, **kw)

    return torchsymbol(getattr(torch.Tensor, name), name=name, methods=(name,), impl=impl)(decomposition)


new_zeros = _filled_new("new_zeros", 0)
new_ones = _filled_new("new_ones", 1)
new_empty = _filled_new("new_empty", 0)


@torchsymbol(torch.arange)
def arange(start, end=None, step=1, *, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False,
           out=None):
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = (
            torch.int64 if builtins.all(isinstance(v, int) for v in (start, end, step)) else torch.get_default_dtype()
        )
    if not (dtype.is_floating_point or dtype.is_complex):  # torch truncates the bounds to integers first
        start, end, step = int(start), int(end), int(step)
    length = builtins.max(0, math.ceil((end - start) / step))
    return prims.iota(length, start=start, step=step, dtype=dtype, device=torch.device(device or "cpu"))
