"""The semantics harness itself: it must catch each kind of difference it claims to compare."""
import pytest
import torch

from tests.semantics import harness


def _entry(monkeypatch, make):
    monkeypatch.setitem(harness.ENTRIES, "fake", make)


@pytest.mark.parametrize("fake, what", [
    (lambda fn: (lambda x: fn(x) + 1e-3), "values differ"),
    (lambda fn: (lambda x: fn(x).double()), "dtype"),
    (lambda fn: (lambda x: fn(x).detach()), "requires_grad"),
    (lambda fn: (lambda x: (torch.rand(1), fn(x))[1]), "random generator"),
])
def test_harness_catches(monkeypatch, fake, what):
    _entry(monkeypatch, fake)
    with pytest.raises(harness.Mismatch, match=what):
        harness.check(lambda x: x * 3, lambda: (torch.randn(3, requires_grad=True),), entries=["fake"], grad=False)


def test_harness_catches_a_missed_mutation(monkeypatch):
    _entry(monkeypatch, lambda fn: (lambda x: fn(x.clone())))
    with pytest.raises(harness.Mismatch, match="input 0 after the call"):
        harness.check(lambda x: x.mul_(2), lambda: (torch.randn(3),), entries=["fake"], grad=False)


def test_harness_catches_aliasing_and_gradients(monkeypatch):
    _entry(monkeypatch, lambda fn: (lambda x: fn(x).clone()))
    with pytest.raises(harness.Mismatch, match="aliasing"):
        harness.check(lambda x: x.view(-1), lambda: (torch.randn(2, 2),), entries=["fake"], grad=False)
    _entry(monkeypatch, lambda fn: (lambda x: fn(x) * 1 + (x - x.detach())))
    with pytest.raises(harness.Mismatch, match="gradient"):
        harness.check(lambda x: x * 2, lambda: (torch.randn(3, requires_grad=True),), entries=["fake"])


def test_harness_accepts_eager_itself_and_named_refusals(monkeypatch):
    _entry(monkeypatch, lambda fn: fn)
    assert harness.check(lambda x: x.add_(1).view(-1), lambda: (torch.randn(2, 2),), entries=["fake"]) == {"fake": "ok"}

    def refuse(fn):
        def run(x):
            raise RuntimeError("thunderlab cannot express torch.frobnicate")
        return run
    _entry(monkeypatch, refuse)
    assert harness.check(lambda x: x, lambda: (torch.randn(2),), entries=["fake"], refusal="frobnicate") == {
        "fake": "refused"
    }
    with pytest.raises(RuntimeError):
        harness.check(lambda x: x, lambda: (torch.randn(2),), entries=["fake"], refusal="other")
