"""Declaring ops: one place says what an op is (its tags, its decomposition, its derivative), and passes,
the frontend and executors read it from there; one rule per op; rules read arguments by name."""
import importlib
import sys

import pytest
import torch
import torch.nn.functional as F

import thunderlab
from thunderlab.core.symbols import Tag
from thunderlab.core.trace import Trace
from thunderlab.executors.base import get_executor
from thunderlab.frontend.functionalize import may_alias
from thunderlab.ops import ltorch, mapping, prims
from thunderlab.ops.declare import LTORCH, TORCH_SYMBOLS, DuplicateOp, torchsymbol
from thunderlab.ops.rules import DRAWS, RESIDUALS, VJP, RuleConflict, derivative, draws_when
from thunderlab.passes.remat import recomputable


def _forget(*syms):
    """Take declared symbols back out of every table, so other tests see thunderlab's own ops only."""
    for sym in syms:
        LTORCH.pop(sym.name, None)
        TORCH_SYMBOLS.pop(sym.name, None)
        for table in (mapping.FUNCTIONS, mapping.METHODS):
            for k in [k for k, v in table.items() if v is sym]:
                del table[k]
        for table in (VJP, RESIDUALS, DRAWS):
            table.pop(sym.qualname, None)


def _traced(body, *shapes) -> Trace:
    tr = Trace("t")
    with tr.active():
        xs = [tr.proxy(s, torch.float32, torch.device("cpu"), requires_grad=True) for s in shapes]
        tr.inputs.extend(xs)
        tr.output = body(*xs)
    return tr


@pytest.fixture
def movedim():
    """``torch.movedim`` (an opaque call in thunderlab) declared as a view op, in this one place."""
    assert "movedim" not in TORCH_SYMBOLS

    @torchsymbol(torch.movedim, methods=("movedim",), tags={Tag.VIEW})
    def movedim(a, source, destination):
        src, dst = source % a.ndim, destination % a.ndim
        perm = [d for d in range(a.ndim) if d != src]
        perm.insert(dst, src)
        return prims.transpose(a, tuple(perm))

    yield movedim
    _forget(movedim)


def test_a_view_op_is_declared_in_one_place(movedim):
    # mapped: a captured torch.movedim is this symbol
    assert mapping.lookup(torch.movedim) is movedim and mapping.lookup_method("movedim") is movedim
    tr = _traced(lambda x: ltorch.exp(movedim(x, 0, 2)), (2, 3, 4))
    view, exp = tr.bound_symbols
    # remat: recomputed even where only views are
    assert recomputable(view, "views") and not recomputable(exp, "views")
    # the frontend: followed as a possible alias of its input when written through
    assert may_alias(view.sym, torch.movedim) and not may_alias(exp.sym, torch.exp)


def test_a_declared_view_op_runs_and_writes_through_it_reach_the_base(movedim):
    def f(x):
        y = x.clone()
        v = torch.movedim(y, 0, 2)
        v.mul_(2)  # a write through the view changes y
        return y + 1, v.sum()

    x = torch.randn(2, 3, 4)
    j = thunderlab.jit(f)
    for got, want in zip(j(x), f(x)):
        torch.testing.assert_close(got, want)
    program = thunderlab.last_record(j).steps[0].python()
    assert "ltorch.movedim" in program


def test_an_op_that_draws_says_when_and_inductor_asks_it():
    @torchsymbol(F.alpha_dropout, tags={Tag.RANDOM})
    def alpha_dropout(a, p=0.5, training=False, inplace=False):
        return NotImplemented

    @draws_when(alpha_dropout)
    def _(p):
        return bool(p.training) and p.p > 0

    try:
        inductor = get_executor("inductor")
        draws, idle = _traced(lambda x: (alpha_dropout(x, 0.2, True), alpha_dropout(x, 0.2, False)), (4,)).bound_symbols
        assert draws.params.training is True and idle.params.p == 0.2
        ok, why = inductor.can_execute(draws)
        assert not ok and "random" in why
        assert inductor.can_execute(idle) == (True, "")
    finally:
        _forget(alpha_dropout)


def test_tags_are_declared_with_the_ops():
    assert Tag.VIEW in ltorch.reshape.tags and Tag.VIEW in ltorch.getitem.tags and Tag.VIEW in prims.slice.tags
    assert Tag.DONT_RECOMPUTE in ltorch.matmul.tags and Tag.DONT_RECOMPUTE in prims.convolution.tags
    assert Tag.RANDOM in ltorch.dropout.tags and Tag.RANDOM in prims.bernoulli.tags
    assert not ltorch.add.tags


# -- one rule per op -------------------------------------------------------------------------
def test_a_second_rule_for_a_symbol_is_an_error_unless_it_overrides():
    original = VJP["ltorch.gelu"]
    with pytest.raises(RuleConflict, match="ltorch.gelu already has a derivative rule.*override=True"):
        derivative(ltorch.gelu)(lambda b, g: [])
    assert VJP["ltorch.gelu"] is original

    def replacement(b, g):
        return original(b, g)

    try:
        derivative(ltorch.gelu, override=True)(replacement)
        assert VJP["ltorch.gelu"] is replacement
    finally:
        VJP["ltorch.gelu"] = original


def test_a_second_declaration_of_an_op_is_an_error_unless_it_overrides():
    with pytest.raises(DuplicateOp, match="ltorch.gelu is already declared"):
        torchsymbol(F.gelu, name="gelu")(lambda a, approximate="none": None)
    assert ltorch.gelu is LTORCH["gelu"] and mapping.lookup(F.gelu) is ltorch.gelu


def test_rules_are_registered_for_symbols_or_printed_names():
    with pytest.raises(TypeError, match="printed name"):
        derivative("gelu")


# -- named parameters ------------------------------------------------------------------------
def test_a_call_names_its_arguments_with_defaults_filled_in():
    tr = _traced(lambda x, w: ltorch.layer_norm(x, (4,), w), (2, 4), (4,))
    (ln,) = tr.bound_symbols
    p = ln.params
    assert p.a is tr.inputs[0] and p.weight is tr.inputs[1] and p.normalized_shape == (4,)
    assert p.bias is None and p.eps == 1e-5  # the defaults of the declaration
    tr = _traced(lambda x: ltorch.sum(x, 1, keepdim=True), (2, 4))
    assert (tr.bound_symbols[0].params.dim, tr.bound_symbols[0].params.keepdim) == (1, True)


def test_an_op_kept_whole_names_its_arguments_by_its_declared_signature():
    tr = _traced(lambda x: ltorch.sort(x, 0, True), (5,))
    p = tr.bound_symbols[0].params
    assert (p.dim, p.descending, p.stable) == (0, True, False)


def test_call_keys_compare_constants_exactly_and_tensors_by_name_or_metadata():
    tr = _traced(lambda x, y: (ltorch.mul(x, 0.0), ltorch.mul(x, -0.0), ltorch.mul(x, 0.0), ltorch.mul(y, 0.0)),
                 (3,), (3,))
    a, b, c, d = tr.bound_symbols
    assert a.call_key() == c.call_key() != b.call_key()
    assert a.call_key() != d.call_key()  # another tensor

    def alike(p):
        return (p.shape, p.dtype)

    assert a.call_key(alike) == d.call_key(alike)


# -- a new op with its decomposition and derivative, in one file ------------------------------
@pytest.fixture
def softsign():
    assert "softsign" not in TORCH_SYMBOLS
    module = importlib.import_module("tests.data.softsign_op")
    yield module.softsign
    _forget(module.softsign)
    sys.modules.pop("tests.data.softsign_op", None)


def _softsign_model(x, w):
    return F.softsign(x @ w).sum(0)


def test_a_new_op_in_one_file_runs_differentiates_and_fuses(softsign):
    x = torch.randn(5, 3, dtype=torch.float64)
    w = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    rule, calls = VJP["ltorch.softsign"], []  # a spy on the rule, to see that the gradient comes from it
    derivative(softsign, override=True)(lambda b, g: calls.append(b) or rule(b, g))
    j = thunderlab.jit(_softsign_model)
    out = j(x, w)
    torch.testing.assert_close(out, _softsign_model(x, w))
    record = thunderlab.last_record(j)
    assert "ltorch.softsign" in record.steps[0].python()  # captured as the new symbol, not an opaque call
    # gradients: equal to eager's, and from the rule (no call back into PyTorch's autograd)
    g = torch.randn(4, dtype=torch.float64)
    (got,) = torch.autograd.grad(out, w, g)
    (want,) = torch.autograd.grad(_softsign_model(x, w), w, g)
    torch.testing.assert_close(got, want)
    assert calls, "the rule beside the declaration made the gradient"
    backward = record.program.traces["backward"].python()
    assert "eager_vjp" not in backward and "ltorch.softsign" in record.program.traces["forward"].python()
    assert torch.autograd.gradcheck(lambda w: j(x, w), (w,))
    # fused: a fusion executor takes it into a region, with the ops around it
    fused = thunderlab.rerun(record, "dce,claim{executors=inductor+torch},fuse,del")
    regions = [b for t in fused.program for b in t.bound_symbols if b.subsymbols and b.sym.module == "fusion"]
    assert any("ltorch.softsign" in {s.sym.qualname for s in r.subsymbols} for r in regions), fused.program.python()
