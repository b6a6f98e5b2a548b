"""Binder fills a frame's parameters as Python does (the language reference's "Calls") and leaves every call
that raises to ``inspect``; checked against ``inspect.Signature.bind`` + ``apply_defaults`` on each kind of
parameter."""
import inspect

import pytest
import torch

import thunderlab
from thunderlab.frontend.dispatch import Binder


def plain(a, b, c=3):
    pass


def positional_only(a, b=2, /, c=3, *, d=4):
    pass


def star_args(a, *rest, key=None):
    pass


def star_kwargs(self, input_ids=None, attention_mask=None, labels=None, **kwargs):
    pass


def everything(a, /, b, c=3, *args, d, e=5, **kwargs):
    pass


def no_parameters():
    pass


CALLS = [
    (plain, (1, 2), {}), (plain, (1,), {"b": 2}), (plain, (), {"a": 1, "b": 2, "c": 4}), (plain, (1, 2, 3), {}),
    (plain, (1,), {}),  # b missing
    (plain, (1, 2, 3, 4), {}),  # one too many
    (plain, (1, 2), {"z": 0}),  # no such keyword
    (plain, (1, 2), {"a": 0}),  # a given twice
    (positional_only, (1,), {}), (positional_only, (1, 5, 6), {"d": 7}), (positional_only, (1,), {"c": 9}),
    (positional_only, (), {"a": 1}),  # a is positional-only
    (positional_only, (1,), {"b": 2}),  # so is b
    (star_args, (1,), {}), (star_args, (1, 2, 3), {"key": 4}), (star_args, (), {"key": 4}),
    (star_kwargs, ("m",), {"input_ids": 1, "labels": 2}), (star_kwargs, ("m", 1), {"extra": 9, "more": 10}),
    (star_kwargs, ("m",), {"kwargs": 5}),  # a keyword named like the ** parameter lands in it
    (star_kwargs, ("m",), {"self": 1}),  # self given twice
    (everything, (1,), {"b": 2, "d": 4}), (everything, (1, 2, 3, 4, 5), {"d": 6, "f": 7}),
    (everything, (1, 2), {"a": 0, "d": 1}),  # a positional-only name among the keywords: into **kwargs
    (everything, (1, 2), {}),  # the keyword-only d missing
    (no_parameters, (), {}), (no_parameters, (1,), {}),
]


@pytest.mark.parametrize("fn,args,kwargs", CALLS, ids=[f"{f.__name__}-{i}" for i, (f, _, _) in enumerate(CALLS)])
def test_binder_agrees_with_inspect(fn, args, kwargs):
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        expected = None
    else:
        bound.apply_defaults()
        expected = (bound.arguments, bound.args, bound.kwargs)
    got = Binder(fn.__code__, fn.__defaults__, fn.__kwdefaults__).bind(args, kwargs)
    if expected is None:  # an error: left to inspect, which reports it as Python would
        assert got is None, got
        return
    assert got is not None, "a call Python accepts was left to inspect"
    frame, call_args, call_kwargs = got
    assert list(frame.items()) == list(expected[0].items())  # the same names in the same order
    assert call_args == expected[1] and call_kwargs == expected[2]
    fn(*call_args, **call_kwargs)  # and the arguments call the function


def test_binder_uses_the_defaults_it_was_made_with():
    def f(x, a=1, *, b=2):
        pass

    frame, _, _ = Binder(f.__code__, (10,), {"b": 20}).bind((0,), {})
    assert frame == {"x": 0, "a": 10, "b": 20}


class Keywords(torch.nn.Module):
    """A model called as Hugging Face's are, with keywords, several left to their defaults."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(6, 4)

    def forward(self, input_ids=None, attention_mask=None, labels=None, scale=1.0, **kwargs):
        out = self.lin(input_ids) * scale
        if attention_mask is not None:
            out = out * attention_mask
        return out if labels is None else (out - labels).square().mean()


def test_keyword_calls_run_directly_without_inspect(monkeypatch):
    m = Keywords()
    j = thunderlab.jit(m)
    x, mask, y = torch.randn(3, 6), torch.ones(3, 4), torch.randn(3, 4)
    binds = []
    bind = inspect.Signature.bind
    monkeypatch.setattr(inspect.Signature, "bind", lambda self, *a, **k: binds.append(1) or bind(self, *a, **k))
    with torch.no_grad():
        for _ in range(2):  # the first compiles (through Dynamo)
            torch.testing.assert_close(j(input_ids=x, attention_mask=mask), m(input_ids=x, attention_mask=mask))
            torch.testing.assert_close(j(input_ids=x, labels=y, scale=2.0), m(input_ids=x, labels=y, scale=2.0))
        binds.clear()
        hits = j.cache_info["direct_calls"]
        for _ in range(3):
            torch.testing.assert_close(j(input_ids=x, attention_mask=mask), m(input_ids=x, attention_mask=mask))
            torch.testing.assert_close(j(input_ids=x, labels=y, scale=2.0), m(input_ids=x, labels=y, scale=2.0))
    assert j.cache_info["direct_calls"] >= hits + 6, j.direct.why_not
    assert binds == []
    with pytest.raises(TypeError):  # a keyword given twice: inspect's error, as Python's
        j(x, input_ids=x)


def test_a_jitted_functions_binder_follows_its_defaults():
    """``direct.binder()`` binds with the defaults the function has at the call, as Python fills the frame."""
    def f(x, scale=2.0):
        return x * scale

    jf = thunderlab.jit(f)
    x = torch.ones(3)
    torch.testing.assert_close(jf(x), x * 2)
    frame, _, _ = jf.direct.binder().bind((x,), {})
    assert frame["scale"] == 2.0
    f.__defaults__ = (5.0,)
    torch.testing.assert_close(jf(x), x * 5)
    frame, _, _ = jf.direct.binder().bind((x,), {})
    assert frame["scale"] == 5.0
