"""Integer arithmetic, compiled and compared with eager exactly, over int64's whole range.

Written from the documentation of ``torch.div`` (``rounding_mode`` "trunc" rounds toward zero,
"floor" toward negative infinity), ``torch.floor_divide``, ``torch.remainder`` (the sign of the
divisor) and ``torch.fmod`` (the sign of the dividend), and of type promotion (a sum of a small
integer type accumulates in int64; uint8 arithmetic wraps). Integers above 2**53 are not
representable in float64, so a quotient computed through floats is wrong there.
"""
import pytest
import torch

from tests.semantics.harness import check


def _big():
    return (torch.tensor([2**62 + 1, -(2**62) - 1, 7, -7, 2**53 + 1, 0]),)


def _divisors():
    return torch.tensor([3, 3, -2, 2, -5, 4]), 3


CASES = {
    "floor division by a tensor": (lambda x: torch.floor_divide(x, _divisors()[0]), _big),
    "floor division by a negative number": (lambda x: x // -3, _big),
    "div rounding toward zero": (lambda x: torch.div(x, _divisors()[0], rounding_mode="trunc"), _big),
    "div rounding down": (lambda x: torch.div(x, -7, rounding_mode="floor"), _big),
    "remainder and fmod signs": (lambda x: (torch.remainder(x, -3), torch.fmod(x, -3), x % 5), _big),
    "small types promote in sums, uint8 wraps": (
        lambda x: ((x % 200).to(torch.uint8) + 100, (x % 100).to(torch.int8).sum(), x.to(torch.int32) * 3), _big),
}


@pytest.mark.parametrize("name", list(CASES))
def test_integers(name):
    fn, make = CASES[name]
    check(fn, make, grad=False)
