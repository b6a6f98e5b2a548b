"""``torch.vmap`` and ``torch.func`` transforms inside a compiled function, compared with eager.

Written from the documentation of ``torch.vmap`` (the function is mapped over a dimension of its
inputs, ``in_dims`` with ``None`` for an input not mapped, outputs stacked along ``out_dims``,
vmap nests, gradients flow through it) and of ``torch.func.grad`` / ``jacrev`` (the gradient or
Jacobian of a function, computed where it is called; composable with vmap).
"""
import pytest
import torch

from tests.semantics.harness import check


def _x(grad=False):
    return lambda: (torch.randn(3, 4, requires_grad=grad),)


CASES = {
    "row-wise": (lambda x: torch.vmap(lambda r: r.sum() * r)(x), _x()),
    "in_dims and an unmapped input": (lambda x: torch.vmap(lambda c, w: c * w, in_dims=(1, None))(x, x[:, 0]), _x()),
    "out_dims": (lambda x: torch.vmap(lambda r: r.softmax(0), out_dims=1)(x), _x()),
    "nested": (lambda x: torch.vmap(torch.vmap(lambda v: v * v + 1))(x), _x()),
    "between other ops, with gradients": (lambda x: torch.vmap(lambda r: torch.dot(r, r))(x.tanh() * 2).exp(),
                                          _x(grad=True)),
    "func.grad": (lambda x: torch.func.grad(lambda v: (v.sin() ** 2).sum())(x) * 2, _x()),
    "func.jacrev": (lambda x: torch.func.jacrev(lambda v: v.sin() * v)(x[0]), _x()),
    "per-sample gradients (vmap of grad)": (lambda x: torch.vmap(torch.func.grad(lambda v: (v.exp() * v).sum()))(x),
                                            _x()),
}


@pytest.mark.parametrize("name", list(CASES))
def test_transform(name):
    fn, make = CASES[name]
    check(fn, make)
