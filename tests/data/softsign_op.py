"""A torch-level op added in one file: ``F.softsign``, its decomposition and its derivative.

``softsign(a) = a / (1 + |a|)``; ``d softsign / d a = 1 / (1 + |a|)^2``. Importing this module
declares ``ltorch.softsign``: ``F.softsign`` in a captured program becomes that symbol, which
fusion executors can take, and autodiff differentiates with the rule below. (tests/ops/
test_declaring_ops.py imports it and takes it back out afterwards.)
"""
import torch.nn.functional as F

from thunderlab.ops.declare import torchsymbol
from thunderlab.ops.elementwise import abs_, add, div, mul
from thunderlab.ops.rules import derivative


@torchsymbol(F.softsign)
def softsign(a):
    return div(a, add(abs_(a), 1.0))


@derivative(softsign)
def _(b, g):
    a = b.params.a
    d = add(abs_(a), 1.0)
    return [(a, div(g, mul(d, d)))]
