"""fuse on hand-built traces: regions follow dataflow, never make a cycle, respect max_size."""
import torch

from thunderlab.ops import ltorch, prims
from thunderlab.passes.claim import Claim
from thunderlab.passes.fuse import Fuse

from .handbuilt import names, program, tensors


def _claimed(fn, *inputs):
    return Claim(executors=("inductor", "torch"))(program(fn, *inputs))


def f(x, w):
    a = ltorch.add(ltorch.mul(ltorch.sin(x), 2.0), 1.0)  # elementwise: a region
    m = ltorch.matmul(a, w)  # inductor takes it too, but it depends on the region's output...
    b = ltorch.sub(ltorch.cos(a), x)  # ...and this, which depends on a only, may join a's region
    return ltorch.mul(ltorch.tanh(m), b)


def test_claimed_calls_become_regions_that_run_as_before():
    before = _claimed(f, ("x", (4, 4)), ("w", (4, 4)))
    after = Fuse()(before)
    regions = [b for b in after.forward.bound_symbols if b.sym.is_region]
    assert regions and all(r.executor == "inductor" for r in regions)
    members = sorted(len(r.subsymbols) for r in regions)
    assert sum(members) == len(before.forward.bound_symbols)  # every call, once
    args = tensors(before.forward)
    # a region runs its members with torch until compiled: the program computes what it did
    torch.testing.assert_close(after.forward.callable()(*args), before.forward.callable()(*args))
    assert "# fusion region inductor0" in after.forward.python()


def test_max_size_splits_regions():
    def chain(x):
        for _ in range(6):
            x = ltorch.sin(x)
        return x

    before = _claimed(chain, ("x", (8,)))
    sizes = [len(b.subsymbols) for b in Fuse(max_size=4)(before).forward.bound_symbols if b.sym.is_region]
    assert sizes == [4, 2]
    assert names(Fuse(max_size=4)(before).forward) == ["inductor0", "inductor1"]


def test_unclaimed_calls_stay_outside_with_their_reason():
    before = Claim(executors=("torch",))(program(lambda x: ltorch.sin(ltorch.cos(x)), ("x", (3,))))
    after = Fuse()(before)
    assert names(after.forward) == ["cos", "sin"]
    notes = Fuse().describe(before, after)
    assert notes["regions"] == {}


def test_a_call_does_not_join_a_region_that_depends_on_it_through_another_region():
    # a region runs as one unit: once cos(y) joins region 2, whatever reads it depends on regions 0 and 1
    # too, so f (which reads it through a call torch keeps) must not join region 1: that would be a cycle
    def g(x, y):
        a = ltorch.sin(x)  # region 0
        b = ltorch.mul(a, prims.bernoulli(a, 0.5))  # region 1 (bernoulli stays with torch)
        c = ltorch.mul(b, prims.bernoulli(b, 0.5))  # region 2
        d = ltorch.cos(y)  # independent: joins the open region 2
        f = ltorch.mul(prims.bernoulli(d, 0.5), 2.0)  # depends on region 2, so on regions 1 and 0
        return c, ltorch.add(f, 1.0)

    before = _claimed(g, ("x", (4,)), ("y", (4,)))
    after = Fuse()(before)
    order = {}
    for i, b in enumerate(after.forward.bound_symbols):
        for p in b.outputs:
            order[p.name] = i
    for i, b in enumerate(after.forward.bound_symbols):
        assert all(order.get(p.name, -1) < i for p in b.inputs), f"{b.sym.name} reads a value made after it"
    args = tensors(before.forward)
    torch.manual_seed(0)
    want = before.forward.callable()(*args)
    torch.manual_seed(0)
    torch.testing.assert_close(after.forward.callable()(*args), want)


def test_every_region_is_made_in_one_place_and_runs_its_members_with_torch():
    """fuse asks executors.fusion.make_region for each region; the region's symbol runs the members one by one
    with torch until an executor compiles it, and fuse sets nothing on the symbol afterwards."""
    import dataclasses

    import pytest
    import torch

    import thunderlab
    from thunderlab.executors import fusion

    made = []
    real = fusion.make_region

    def spy(*args):
        made.append(real(*args))
        return made[-1]

    import thunderlab.passes.fuse as fuse_module

    fuse_module.make_region = spy
    try:
        j = thunderlab.jit(lambda x, w: (x.sin() * 2 + 1).tanh() @ w, pipeline="claim{executors=inductor+torch},fuse")
        x, w = torch.randn(3, 3), torch.randn(3, 3)
        j(x, w)
    finally:
        fuse_module.make_region = real
    forward = thunderlab.last_record(j).steps[-1].program.forward
    regions = [b for b in forward.bound_symbols if b.sym.is_region]
    assert regions and [r.id for r in regions] == [r.id for r in made]
    (region,) = regions
    value = dict(zip([p.name for p in forward.inputs], (x, w)))
    assert sorted(p.name for p in region.args) == sorted(value), "its inputs: what its members read and do not make"
    (got,) = region.sym.impl(*[value[p.name] for p in region.args])
    torch.testing.assert_close(got, (x.sin() * 2 + 1).tanh() @ w)
    with pytest.raises(dataclasses.FrozenInstanceError):
        region.sym.impl = None


# -- dropout inside a region: torch draws (eager's random stream), the region is not cut --------------------------
def _dropout_after_linear(x, w, b):
    y = ltorch.linear(x, w, b)  # eager lays it out row-major
    return ltorch.add(ltorch.gelu(ltorch.dropout(y, 0.25)), x)


def _dropout_after_transpose(x, w, b):
    y = ltorch.transpose(ltorch.add(ltorch.linear(x, w, b), 1.0), 0, 1)  # a transposed view: not row-major
    return ltorch.mul(ltorch.dropout(y, 0.25), 2.0)


def _eager(fn, args, seed=0):
    torch.manual_seed(seed)
    return fn(*args)


def test_a_dropout_of_a_region_value_draws_before_the_region_which_stays_whole():
    before = _claimed(_dropout_after_linear, ("x", (6, 8)), ("w", (8, 8)), ("b", (8,)))
    after = Fuse()(before)
    calls = after.forward.bound_symbols
    regions = [b for b in calls if b.sym.is_region]
    assert len(regions) == 1, after.forward.python()
    outside = [b.sym.name for b in calls if not b.sym.is_region]
    assert outside == ["full", "bernoulli"]  # the draw, into a fresh tensor of the value's shape, first
    x, w, b = tensors(before.forward)
    want = _eager(lambda x, w, b: torch.nn.functional.gelu(torch.nn.functional.dropout(x @ w.T + b, 0.25)) + x,
                  (x, w, b))
    got = _eager(after.forward.callable(), (x, w, b))
    assert torch.equal(got, want)  # the same mask: eager's generator, eager's memory order
    notes = Fuse().describe(before, after)
    assert notes["regions_per_trace"] == {"forward": 1} and notes["boundaries"] == []
    assert any("drawn by torch before the region" in d.reason for d in notes.declines)


def test_a_dropout_whose_layout_is_unknown_still_cuts_the_region_and_the_notes_say_why():
    before = _claimed(_dropout_after_transpose, ("x", (6, 8)), ("w", (8, 8)), ("b", (8,)))
    after = Fuse()(before)
    assert sum(b.sym.is_region for b in after.forward.bound_symbols) == 2
    notes = Fuse().describe(before, after)
    (cut,) = notes["boundaries"]
    assert cut["symbol"] == "prims.bernoulli" and cut["declined_by"] == "inductor"
    assert "memory order" in cut["reason"] and "ltorch.transpose" in cut["reason"]
    x, w, b = tensors(before.forward)
    want = _eager(lambda x, w, b: torch.nn.functional.dropout((x @ w.T + b + 1.0).t(), 0.25) * 2.0, (x, w, b))
    assert torch.equal(_eager(after.forward.callable(), (x, w, b)), want)


def test_claim_splits_a_dropout_only_for_a_fusion_executor_that_declined_its_draw():
    alone = Claim(executors=("torch",))(program(lambda x: ltorch.dropout(x, 0.25), ("x", (4,))))
    assert names(alone.forward) == ["dropout"]  # torch runs it whole, as eager does
    split = _claimed(lambda x: ltorch.dropout(x, 0.25), ("x", (4,)))
    by_name = {b.sym.name: b.executor for b in split.forward.bound_symbols}
    assert by_name == {"bernoulli": "torch", "div": "inductor", "mul": "inductor"}


def test_a_dropout_after_softmax_of_a_transposed_value_stays_in_the_region():
    # softmax writes a contiguous result whatever its input's layout, so its dropout draws in row-major order
    def attn(x, w, b):
        s = ltorch.softmax(ltorch.transpose(ltorch.linear(x, w, b), 0, 1), -1)
        return ltorch.mul(ltorch.dropout(s, 0.25), 3.0)

    before = _claimed(attn, ("x", (6, 8)), ("w", (8, 8)), ("b", (8,)))
    after = Fuse()(before)
    assert sum(b.sym.is_region for b in after.forward.bound_symbols) == 1
    x, w, b = tensors(before.forward)
    want = _eager(lambda x, w, b: torch.nn.functional.dropout(torch.softmax((x @ w.T + b).t(), -1), 0.25) * 3.0,
                  (x, w, b))
    assert torch.equal(_eager(after.forward.callable(), (x, w, b)), want)


# -- batch_norm writes its running statistics only in training ---------------------------------------------------
def _bn(training):
    def f(x, rm, rv, w, b):
        y = ltorch.batch_norm(ltorch.relu(x), rm, rv, w, b, training, 0.1, 1e-5)
        return ltorch.mul(ltorch.sigmoid(y), 2.0)
    return f


_BN_INPUTS = (("x", (4, 3, 5)), ("rm", (3,)), ("rv", (3,)), ("w", (3,)), ("b", (3,)))


def test_batch_norm_outside_training_writes_nothing_so_it_joins_the_region():
    before = _claimed(_bn(False), *_BN_INPUTS)
    after = Fuse()(before)
    assert [b.sym.name for b in after.forward.bound_symbols] == ["inductor0"]
    x, rm, rv, w, b = tensors(before.forward)
    rv = rv.abs() + 0.5
    want = torch.sigmoid(torch.nn.functional.batch_norm(x.relu(), rm, rv, w, b, False, 0.1, 1e-5)) * 2.0
    torch.testing.assert_close(after.forward.callable()(x, rm, rv, w, b), want)


def test_batch_norm_in_training_still_stays_in_place_with_its_reason():
    before = _claimed(_bn(True), *_BN_INPUTS)
    after = Fuse()(before)
    bn = next(b for b in after.forward.bound_symbols if b.sym.name == "batch_norm")
    assert bn.executor == "torch" and ("inductor", "ltorch.batch_norm writes to an argument") in bn.declined


def _written(reads_after: bool):
    def f(x, buf):
        y = ltorch.mul(ltorch.sin(x), 2.0)  # the region's value...
        new = ltorch.add(ltorch.mul(buf, 0.9), ltorch.mul(y, 0.1))  # ...and buf's new value, made from both
        out = ltorch.cos(y)
        if reads_after:
            out = ltorch.add(out, prims.bernoulli(buf, 0.5))  # torch reads buf's old value (a draw stays outside)
        prims.copy_(new, buf)
        return out

    return f


def test_a_write_of_a_region_value_into_an_input_only_the_region_reads_ends_the_region():
    before = _claimed(_written(False), ("x", (6,)), ("buf", (6,)))
    after = Fuse()(before)
    assert names(after.forward) == ["inductor0"]
    (region,) = after.forward.bound_symbols
    assert region.subsymbols[-1].sym.qualname == "prims.copy_"  # at the region's end: after every read of buf
    notes = Fuse().describe(before, after)
    assert notes["regions"]["inductor0"]["writes_in_place"] == ["buf"]
    x, buf = tensors(before.forward)
    want_buf = buf * 0.9 + torch.sin(x) * 2.0 * 0.1
    got = after.forward.callable()(x, buf)  # the region runs its members with torch until compiled
    torch.testing.assert_close(got, torch.cos(torch.sin(x) * 2.0))
    torch.testing.assert_close(buf, want_buf)


def test_a_write_into_an_input_another_call_reads_stays_in_place():
    before = _claimed(_written(True), ("x", (6,)), ("buf", (6,)))
    after = Fuse()(before)
    copy = next(b for b in after.forward.bound_symbols if b.sym.qualname == "prims.copy_")
    assert copy.executor == "torch"  # bernoulli (torch) reads buf's old value: the write keeps its place
    assert not any(s.sym.qualname == "prims.copy_" for b in after.forward.bound_symbols if b.sym.is_region
                   for s in b.subsymbols)
