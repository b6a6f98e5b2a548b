"""Constructs eager PyTorch runs that a compiler must run too (or refuse by name), never crash on or change.

Custom operators (``torch.library.custom_op``), functions Dynamo is told to put in the graph as
they are (``torch._dynamo.allow_in_graph``), ``out=`` arguments, ``.item()`` captured as a scalar
(``capture_scalar_outputs``) and ``Tensor.cpu()``, which returns the tensor itself when it is
already on the CPU.
"""
import pytest
import torch

from .harness import check


@torch.library.custom_op("semantics_test::scaled_sin", mutates_args=())
def scaled_sin(x: torch.Tensor, s: float) -> torch.Tensor:
    return torch.sin(x) * s


@scaled_sin.register_fake
def _(x, s):
    return torch.empty_like(x)


@torch.library.custom_op("semantics_test::add_into", mutates_args=("out",))
def add_into(x: torch.Tensor, out: torch.Tensor) -> None:
    out.add_(x)


@add_into.register_fake
def _(x, out):
    return None


_in_graph = torch._dynamo.allow_in_graph(lambda x: torch.cos(x) + 1)


def _x():
    return (torch.randn(3, 4),)


def _xy():
    return (torch.randn(3, 4), torch.randn(3, 4))


def _out_arg(x, y):
    torch.add(x, y, out=y)
    return y * 2


def _out_fresh(x):
    buf = torch.empty(3, 4)
    torch.sin(x, out=buf)
    return buf + 1


def _out_mul(x, y):
    out = torch.empty_like(x)
    torch.mul(x, y, out=out)
    return out


def _out_two_buffers(x):
    a, b = torch.zeros(3, 4), torch.zeros(3, 4)  # two buffers, equal until written
    torch.sin(x, out=a)
    torch.cos(x, out=b)
    return a - b


def _mutating_custom(x, y):
    add_into(x, y)
    return y + 1


CASES = {
    "custom_op": (lambda x: scaled_sin(x, 2.0) + 1, _x, {}),
    "custom_op twice": (lambda x: scaled_sin(x, 2.0) + scaled_sin(x, 3.0), _x, {}),
    "custom_op that mutates": (_mutating_custom, _xy, {}),
    "allow_in_graph lambda": (lambda x: _in_graph(x) * 2, _x, {}),
    "out= an input": (_out_arg, _xy, {}),
    "out= a fresh buffer": (_out_fresh, _x, {}),
    "out= empty_like": (_out_mul, _xy, {}),
    "out= two fresh buffers": (_out_two_buffers, _x, {}),
    "cpu on a cpu tensor": (lambda x: x.cpu(), _x, {}),
    "cpu then compute": (lambda x: x.cpu() * 2, _x, {}),
    "to('cpu') on a cpu tensor": (lambda x: x.to("cpu"), _x, {}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_construct(name):
    fn, make, kw = CASES[name]
    check(fn, make, grad=False, **kw)


def _item(x):
    s = x.sum().item()
    return x * s, s


def _item_branchless(x):
    n = x.max().item()
    return torch.full((2,), n) + x[0, :2]


@pytest.mark.parametrize("fn", [_item, _item_branchless], ids=["item", "item into full"])
def test_item_captured_as_scalar(fn):
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        check(fn, _x, grad=False)
