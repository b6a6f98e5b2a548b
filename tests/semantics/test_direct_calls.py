"""Direct calls: a call means what Python means by it, whatever the function's defaults are now.

Python evaluates a function's defaults from ``__defaults__`` and ``__kwdefaults__`` at each call,
and both may be reassigned (or the keyword dict changed) after the function is defined.
"""
import pytest
import torch

import thunderlab


def _compare(fn, change, *calls):
    """Call ``fn`` jitted (direct and not) and eagerly, on each of ``calls``; change its defaults between."""
    jitted = {"direct": thunderlab.jit(fn), "direct-off": thunderlab.jit(fn, direct=False)}
    x = torch.randn(4)
    for name, jf in jitted.items():
        torch._dynamo.reset()
        saved = (fn.__defaults__, dict(fn.__kwdefaults__) if fn.__kwdefaults__ else fn.__kwdefaults__)
        try:
            for step, (args, kwargs) in enumerate(calls):
                if step:
                    change(fn)
                got, want = jf(x, *args, **kwargs), fn(x, *args, **kwargs)
                torch.testing.assert_close(got, want,
                                           msg=lambda m, name=name, step=step: f"{name}, call {step + 1}: {m}")
        finally:
            fn.__defaults__, fn.__kwdefaults__ = saved


def _scale(x, s=2.0):
    return x * s


def _kw_scale(x, *, s=2.0):
    return x * s


def _two(x, a=1.0, b=2.0):
    return x * a + b


def _tensor_default(x, b=torch.ones(4)):  # noqa: B008 - a tensor default is the case under test
    return x + b


def _set_defaults(values):
    def change(fn):
        fn.__defaults__ = values
    return change


CASES = {
    "positional default replaced": (_scale, _set_defaults((3.0,)), ((), {}), ((), {})),
    "one default replaced, the other given by keyword": (_two, _set_defaults((4.0, 2.0)), ((), {}), ((), {"b": 1.0})),
    "one of two defaults replaced": (_two, _set_defaults((1.0, 5.0)), ((), {}), ((7.0,), {})),
    "tensor default replaced": (_tensor_default, _set_defaults((torch.full((4,), 3.0),)), ((), {}), ((), {})),
    "keyword-only default replaced": (_kw_scale, lambda f: setattr(f, "__kwdefaults__", {"s": 3.0}),
                                      ((), {}), ((), {})),
    "keyword-only default changed in place": (_kw_scale, lambda f: f.__kwdefaults__.__setitem__("s", 4.0),
                                              ((), {}), ((), {})),
}


@pytest.mark.parametrize("name", list(CASES))
def test_defaults_changed(name):
    fn, change, *calls = CASES[name]
    _compare(fn, change, *calls)


class _Scaled(torch.nn.Module):
    def forward(self, x, s=2.0):
        return x * s


def test_module_forward_default_changed():
    m = _Scaled()
    jm = thunderlab.jit(m)
    x = torch.randn(4)
    torch.testing.assert_close(jm(x), m(x))
    saved = _Scaled.forward.__defaults__
    try:
        _Scaled.forward.__defaults__ = (5.0,)
        torch.testing.assert_close(jm(x), x * 5.0)
    finally:
        _Scaled.forward.__defaults__ = saved
