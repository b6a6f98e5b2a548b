"""cse and dce respect what calls do besides computing: random draws, writes, and constants' exact values."""
import torch
import torch.nn.functional as F

import thunderlab
from thunderlab.core.symbols import Tag
from thunderlab.core.trace import Trace
from thunderlab.ops import ltorch, prims
from thunderlab.passes.cse import cse_trace
from thunderlab.passes.dce import dce_trace


def _traced(body, *shapes) -> Trace:
    tr = Trace("t")
    with tr.active():
        xs = [tr.proxy(s, torch.float32, torch.device("cpu")) for s in shapes]
        tr.inputs.extend(xs)
        tr.output = body(*xs)
    return tr


def _names(tr: Trace) -> list[str]:
    return [b.sym.qualname for b in tr.bound_symbols]


def test_cse_never_merges_two_draws_and_dce_never_drops_one():
    tr = _traced(lambda x: (prims.bernoulli(x, 0.5), prims.bernoulli(x, 0.5), ltorch.mul(x, 2))[::2], (4,))
    assert _names(cse_trace(tr)).count("prims.bernoulli") == 2
    tr = _traced(lambda x: (ltorch.rand_like(x), ltorch.mul(x, 2))[1], (4,))
    assert "ltorch.rand_like" in _names(dce_trace(tr))


def test_cse_keys_constants_by_exact_value_and_type():
    def body(x):
        return ltorch.add(ltorch.mul(x, 0.0), ltorch.mul(x, -0.0)), ltorch.add(ltorch.mul(x, 1), ltorch.mul(x, 1.0))

    assert _names(cse_trace(_traced(body, (4,)))).count("ltorch.mul") == 4
    same = _traced(lambda x: ltorch.add(ltorch.mul(x, -0.0), ltorch.mul(x, -0.0)), (4,))
    assert _names(cse_trace(same)).count("ltorch.mul") == 1


def test_cse_keeps_two_returned_results_two_tensors():
    tr = _traced(lambda x: (ltorch.sin(x), ltorch.sin(x), ltorch.cos(ltorch.sin(x))), (4,))
    out = cse_trace(tr)
    a, b, _ = out.output
    assert a.name != b.name  # eager returns two tensors; a caller may write to one
    assert _names(out).count("ltorch.sin") == 2


def test_cse_keeps_a_buffer_that_is_written_apart():
    def fn(x):
        a, b = torch.zeros(4), torch.zeros(4)
        torch.sin(x, out=a)
        torch.cos(x, out=b)
        return a - b

    j = thunderlab.jit(fn, pipeline="cse")
    x = torch.randn(4)
    torch.testing.assert_close(j(x), fn(x))
    # each write becomes the value written (functionalization): the two results stay apart
    names = _names(thunderlab.last_record(j).program.forward)
    assert "ltorch.sin" in names and "ltorch.cos" in names


def _opaque_calls(j) -> list:
    return [b for b in thunderlab.last_record(j).program.forward.bound_symbols if b.sym.module == "torch"]


def test_opaque_calls_that_draw_are_tagged_random():
    j = thunderlab.jit(lambda x: F.rrelu(x, training=True) + F.dropout2d(x, 0.5) + torch.poisson(x.abs()),
                       pipeline="dce")
    j(torch.randn(2, 3, 4))
    opaque = _opaque_calls(j)
    assert len(opaque) == 3 and all(Tag.RANDOM in b.tags and b.random for b in opaque)
    j = thunderlab.jit(lambda x: torch.cummax(x, 0).values, pipeline="dce")
    j(torch.randn(3))
    (cummax,) = _opaque_calls(j)
    assert Tag.RANDOM not in cummax.tags


def test_opaque_calls_that_write_an_argument_are_tagged_side_effect():
    # torch.instance_norm with running statistics writes them (their in-place update runs inside the call)
    rm, rv = torch.zeros(3), torch.ones(3)
    j = thunderlab.jit(lambda x: torch.instance_norm(x, None, None, rm, rv, True, 0.1, 1e-5, False) * 2,
                       pipeline="dce")
    j(torch.randn(2, 3, 4))
    (norm,) = _opaque_calls(j)
    assert Tag.SIDE_EFFECT in norm.tags and norm.side_effect
    assert not torch.equal(rm, torch.zeros(3)), "the running mean was updated, as eager updates it"
    j = thunderlab.jit(lambda x: torch.cummax(x, 0).values, pipeline="dce")
    j(torch.randn(3))
    (cummax,) = _opaque_calls(j)
    assert Tag.SIDE_EFFECT not in cummax.tags


def test_what_one_call_does_is_not_learned_by_every_call_of_its_symbol():
    # dropout2d zeroes whole channels only while training (its documented behaviour): one opaque symbol,
    # two kinds of call
    j = thunderlab.jit(lambda x, training: F.dropout2d(x, 0.5, training=training) * 2, pipeline="dce")
    j(torch.randn(2, 3, 4, 4), True)
    (drawing,) = _opaque_calls(j)
    j(torch.randn(2, 3, 4, 4), False)
    (plain,) = _opaque_calls(j)
    assert drawing.sym is plain.sym, "the same symbol in both records"
    assert drawing.random and not plain.random
    assert Tag.RANDOM not in plain.sym.tags, "the draw is the call's, not the symbol's"
    # and a later record of a call that does not draw is not taken for one that does
    k = thunderlab.jit(lambda x: F.dropout2d(x, 0.5, training=False) * 2, pipeline="dce")
    k(torch.randn(2, 3, 4, 4))
    assert not any(b.random for b in _opaque_calls(k))


def test_a_symbol_is_frozen():
    import dataclasses

    import pytest

    for sym in (ltorch.add, prims.add):
        with pytest.raises(dataclasses.FrozenInstanceError):
            sym.tags = sym.tags | {Tag.RANDOM}
        with pytest.raises(dataclasses.FrozenInstanceError):
            sym.impl = None
    assert Tag.RANDOM not in ltorch.add.tags and ltorch.add.impl is not None


def test_tracing_draws_nothing_from_the_generator():
    j = thunderlab.jit(lambda x: torch.randperm(8) + torch.randint(0, 5, (8,)) + x, pipeline="dce")
    torch.manual_seed(0)
    got = j(torch.zeros(8, dtype=torch.int64))
    torch.manual_seed(0)
    torch.testing.assert_close(got, torch.randperm(8) + torch.randint(0, 5, (8,)))


def test_fusion_executors_decline_draws_and_say_why():
    from thunderlab.executors.base import get_executor

    tr = _traced(lambda x: ltorch.mul(x, prims.bernoulli(x, 0.5)), (4,))
    draw = next(b for b in tr.bound_symbols if b.sym.name == "bernoulli")
    ok, why = get_executor("inductor").can_execute(draw)
    assert not ok and "random" in why
