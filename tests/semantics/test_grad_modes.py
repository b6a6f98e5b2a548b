"""Grad mode and autocast regions inside a compiled function, compared with eager PyTorch.

Written from PyTorch's documentation of ``torch.no_grad``, ``torch.enable_grad``,
``torch.set_grad_enabled`` ("Locally disabling gradient computation") and of
``torch.autocast`` (CPU autocast to bfloat16: listed ops run in the lower precision, others
keep their dtype, and the region's outputs keep the dtypes it gave them).
"""
import pytest
import torch

from tests.semantics.harness import check


def _x(*shape):
    return lambda: (torch.randn(*shape, requires_grad=True),)


def _xw(*shape):
    return lambda: (torch.randn(*shape, requires_grad=True), torch.randn(*shape, requires_grad=True))


def no_grad_factor(x):
    with torch.no_grad():
        y = x * 2
    return x * y


def no_grad_output(x):
    with torch.no_grad():
        y = x.exp()
    return y, x.exp()


def set_grad_enabled_block(x):
    with torch.set_grad_enabled(False):
        m = x.mean()
    return (x - m) * 2


def set_grad_enabled_calls(x):
    torch.set_grad_enabled(False)
    y = x.sin()
    torch.set_grad_enabled(True)
    return x * y


def enable_grad_inside_no_grad(x):
    with torch.no_grad():
        with torch.enable_grad():
            y = x * 3
        z = x * 4
    return y, z


def no_grad_decorated_helper(x):
    @torch.no_grad()
    def scale(t):
        return t * t

    return x * scale(x)


def no_grad_inplace_on_leaf(w, x):
    with torch.no_grad():
        w.mul_(0.5)
    return w * x


def no_grad_then_inplace_on_result(x):
    with torch.no_grad():
        y = x + 1
    y.mul_(x)
    return y


def is_grad_enabled_branch(x):
    with torch.no_grad():
        a = x * 2 if torch.is_grad_enabled() else x * 3
    return a + x


GRAD_CASES = {
    "no_grad-factor": (no_grad_factor, _x(4)),
    "no_grad-output": (no_grad_output, _x(4)),
    "set_grad_enabled-block": (set_grad_enabled_block, _x(3, 2)),
    "set_grad_enabled-calls": (set_grad_enabled_calls, _x(4)),
    "enable_grad-in-no_grad": (enable_grad_inside_no_grad, _x(4)),
    "no_grad-decorator": (no_grad_decorated_helper, _x(4)),
    "no_grad-inplace-leaf": (no_grad_inplace_on_leaf, _xw(4)),
    "no_grad-then-inplace": (no_grad_then_inplace_on_result, _x(4)),
    "is_grad_enabled": (is_grad_enabled_branch, _x(4)),
}


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_grad_mode(name):
    fn, make = GRAD_CASES[name]
    check(fn, make)


def _ab(grad=False):
    return lambda: (torch.randn(4, 8, requires_grad=grad), torch.randn(8, 3, requires_grad=grad))


def autocast_matmul(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return a @ b


def autocast_then_fp32(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.mm(a, b)
    return y.float() + 1


def autocast_mixed_add(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = a @ b
        z = y + a.sum(1, keepdim=True)  # bfloat16 + float32 promotes as usual
    return z


def autocast_unlisted_op(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        e = a.exp()  # not on the lower-precision list: stays float32
        y = e @ b
    return e, y


def autocast_disabled_inside(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = a @ b
        with torch.autocast("cpu", enabled=False):
            z = a @ b
    return y, z


def autocast_linear(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.nn.functional.linear(a, b.t())
    return y.sum(0)


def amp_autocast_default(a, b):
    with torch.amp.autocast("cpu"):
        return torch.relu(a @ b)


AUTOCAST_CASES = {
    "matmul": (autocast_matmul, _ab()),
    "matmul-grad": (autocast_matmul, _ab(grad=True)),
    "then-fp32": (autocast_then_fp32, _ab(grad=True)),
    "mixed-add": (autocast_mixed_add, _ab()),
    "unlisted-op": (autocast_unlisted_op, _ab(grad=True)),
    "disabled-inside": (autocast_disabled_inside, _ab()),
    "linear-grad": (autocast_linear, _ab(grad=True)),
    "amp-default": (amp_autocast_default, _ab()),
}


@pytest.mark.parametrize("name", list(AUTOCAST_CASES))
def test_autocast(name):
    fn, make = AUTOCAST_CASES[name]
    check(fn, make)
