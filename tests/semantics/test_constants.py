"""Constants: two calls that differ only in a constant's exact value or type are two computations.

In IEEE arithmetic ``0.0 == -0.0`` yet ``1 / -0.0`` is ``-inf``; ``1``, ``1.0`` and ``True`` compare
equal in Python yet give tensors of different dtypes (type promotion); NaN is unequal to itself.
"""
import math

import pytest
import torch
import torch.nn.functional as F

from .harness import check


def _x():
    return (torch.tensor([0.5, -2.0, 0.0, 3.0, -0.0]),)


def _i():
    return (torch.tensor([1, -2, 0, 3]),)


CASES = {
    "mul by 0.0 and -0.0": (lambda x: (1 / (x * 0.0), 1 / (x * -0.0)), _x),
    "add 0.0 and -0.0 to zeros": (lambda x: (1 / (x * 0 + 0.0), 1 / (x * 0 + -0.0)), _x),
    "full_like 0.0 and -0.0": (lambda x: (1 / torch.full_like(x, 0.0), 1 / torch.full_like(x, -0.0)), _x),
    "where 0.0 and -0.0": (lambda x: (1 / torch.where(x > 0, x, 0.0), 1 / torch.where(x > 0, x, -0.0)), _x),
    "pad value 0.0 and -0.0": (lambda x: (1 / F.pad(x, (1, 1), value=0.0), 1 / F.pad(x, (1, 1), value=-0.0)), _x),
    "copysign 0.0 and -0.0": (lambda x: (torch.copysign(x.abs() + 1, x * 0 + 0.0),
                                         torch.copysign(x.abs() + 1, x * 0 + -0.0)), _x),
    "int add 1, 1.0, True": (lambda i: (i + 1, i + 1.0, i + True), _i),
    "full 1, 1.0, True": (lambda i: (torch.full((3,), 1), torch.full((3,), 1.0), torch.full((3,), True), i), _i),
    "mul by nan twice": (lambda x: (x * math.nan, x * math.nan), _x),
    "nan and inf": (lambda x: (x + math.nan, x + math.inf, x - math.inf), _x),
    "tuple of constants": (lambda x: (x.view(5, 1).expand(5, 2) * torch.tensor([0.0, -0.0]),
                                      x.view(5, 1).expand(5, 2) * torch.tensor([-0.0, 0.0])), _x),
}


@pytest.mark.parametrize("name", list(CASES))
def test_constants(name):
    fn, make = CASES[name]
    check(fn, make, grad=False)


def test_signed_zero_through_inductor():
    check(lambda x: (1 / (x * 0.0 + 0.0), 1 / (x * 0.0 + -0.0), 1 / (x * -0.0)), _x, entries=["inductor"], calls=1,
          grad=False)
