"""Structural verification of traces: what check_trace rejects, and which calls it re-derives."""
import pytest
import torch

import thunderlab.core.verify as verify_mod
from thunderlab.core.trace import Trace
from thunderlab.core.verify import VerificationError, check_trace
from thunderlab.ops import prims


def _trace():
    """out = (x + y) * x, traced: both calls' outputs come from their metas."""
    tr = Trace("forward")
    with tr.active():
        x = tr.proxy((2, 3), torch.float32, "cpu", name="x")
        y = tr.proxy((2, 3), torch.float32, "cpu", name="y")
        tr.inputs += [x, y]
        s = prims.add(x, y)
        tr.output = prims.mul(s, x)
    return tr


def test_a_traced_program_passes_without_rederiving(monkeypatch):
    calls = []
    monkeypatch.setattr(verify_mod, "_check_meta", lambda where, b: calls.append(b))
    tr = _trace()
    assert all(b.meta_ok for b in tr.bound_symbols)
    check_trace(tr)
    assert calls == []


def test_use_before_definition_is_named():
    tr = _trace()
    tr.bound_symbols.reverse()
    with pytest.raises(VerificationError, match=r"statement 0 \(prims.mul.*uses t0 before it is defined"):
        check_trace(tr)


def test_second_definition_is_not_ssa():
    tr = _trace()
    tr.bound_symbols.append(tr.bound_symbols[0])
    with pytest.raises(VerificationError, match="defines t0 a second time"):
        check_trace(tr)


def test_hand_edited_output_is_rederived_and_caught():
    tr = _trace()
    b = tr.bound_symbols[0]
    from dataclasses import replace
    wrong = replace(b.output, shape=(3, 2))
    edited = b.replace(output=wrong)
    assert not edited.meta_ok  # a new output object is not what the meta produced
    tr.bound_symbols[0] = edited
    tr.bound_symbols.pop()  # keep the uses consistent; the lie is in the recorded shape
    tr.output = wrong
    with pytest.raises(
        VerificationError, match=r"t0 is recorded as cpu f32\[3, 2\] but its inputs give cpu f32\[2, 3\]"
    ):
        check_trace(tr)


def test_relabelled_copy_keeps_meta_ok_and_rename_to_unlike_value_drops_it():
    tr = _trace()
    b = tr.bound_symbols[1]
    assert b.replace(executor="torch").meta_ok
    x, y = tr.inputs
    assert b.swap({"t0": y}).meta_ok  # y is shaped like t0: the meta's answer still holds
    from dataclasses import replace
    z = replace(y, name="z", shape=(4, 3))
    assert not b.swap({"t0": z}).meta_ok


def test_rename_to_unlike_value_is_caught():
    from dataclasses import replace
    tr = _trace()
    z = replace(tr.inputs[1], name="z", shape=(2, 1))
    tr.inputs.append(z)
    tr.bound_symbols[1] = tr.bound_symbols[1].swap({"x": z})  # prims.mul does not broadcast
    with pytest.raises(VerificationError, match=r"statement 1 \(prims.mul.*meta function rejects its inputs"):
        check_trace(tr)
