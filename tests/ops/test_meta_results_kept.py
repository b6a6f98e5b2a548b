"""A meta function run on meta-device tensors (``prims.torch_meta``) keeps what it gave, by each tensor's shape and
dtype and every other argument's type and value. The cases follow PyTorch's documented type promotion: a Python
scalar's kind (bool, int, float) and the default dtype decide a result's dtype, so they must decide the key too."""
from __future__ import annotations

import torch

from thunderlab.core.symbols import Symbol, Tag
from thunderlab.core.trace import Trace
from thunderlab.ops.prims import torch_meta


def counted(fn, watch=frozenset()):
    """A symbol whose meta is ``torch_meta(fn)``, and the list each run of ``fn`` appends to."""
    runs = []

    def run(*args, **kwargs):
        runs.append(args)
        return fn(*args, **kwargs)

    return Symbol(name="test_kept_meta", module="ltorch", impl=fn, meta=torch_meta(run, "test_kept_meta", watch)), runs


def trace_of(body, *inputs) -> Trace:
    tr = Trace("t")
    with tr.active():
        xs = [tr.proxy(shape, dtype, torch.device("cpu"), requires_grad=rg) for shape, dtype, rg in inputs]
        tr.inputs.extend(xs)
        tr.output = body(*xs)
    return tr


def test_a_repeated_call_runs_the_meta_once_and_gets_new_values():
    sym, runs = counted(torch.mul)
    plain, grad = ((4, 3), torch.float32, False), ((4, 3), torch.float32, True)
    tr = trace_of(lambda x, y: (sym(x, 2.0), sym(y, 2.0)), plain, grad)
    a, b = tr.output
    assert len(runs) == 1
    assert a is not b and a.name != b.name and a.shape == b.shape == (4, 3)
    assert not a.requires_grad and b.requires_grad  # from each call's own inputs, not the kept result
    [c] = trace_of(lambda x: (sym(x, 2.0),), ((5, 3), torch.float32, False)).output
    assert c.shape == (5, 3) and len(runs) == 2  # another shape runs it


def test_the_scalars_kind_decides_the_dtype_as_type_promotion_says():
    sym, runs = counted(torch.mul)
    spec = ((3,), torch.int64, False)
    tr = trace_of(lambda x: (sym(x, 2), sym(x, 2.0), sym(x, True), sym(x, 2), sym(x, 2.0 + 0j)), spec)
    assert [p.dtype for p in tr.output] == [torch.int64, torch.float32, torch.int64, torch.int64, torch.complex64]
    assert len(runs) == 4  # 2 and 2.0 (and True) are equal as Python values, not as keys
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        [d] = trace_of(lambda x: (sym(x, 2.0),), spec).output
    finally:
        torch.set_default_dtype(previous)
    assert d.dtype == torch.float64  # an int tensor times a float: the default dtype


def test_a_tensors_dtype_and_nested_arguments_are_part_of_the_key():
    sym, runs = counted(lambda tensors, dim: torch.cat(tensors, dim))
    f32, f16 = ((2, 3), torch.float32, False), ((2, 3), torch.float16, False)
    tr = trace_of(lambda x, y: (sym([x, x], 0), sym([x, x], 1), sym([x, y], 0), sym([x, x], 0)), f32, f16)
    assert [p.shape for p in tr.output] == [(4, 3), (2, 6), (4, 3), (4, 3)]
    assert [p.dtype for p in tr.output] == [torch.float32, torch.float32, torch.float32, torch.float32]
    assert len(runs) == 3


def test_an_effect_seen_once_is_noted_on_every_call_that_reuses_the_result():
    sym, runs = counted(lambda a, p: torch.nn.functional.dropout(a, p, True), watch=frozenset({Tag.RANDOM}))
    tr = trace_of(lambda x: (sym(x, 0.5), sym(x, 0.5)), ((8,), torch.float32, False))
    assert len(runs) == 1
    assert all(Tag.RANDOM in b.effects for b in tr.bound_symbols), [b.effects for b in tr.bound_symbols]


def test_an_argument_of_another_kind_runs_the_meta_every_time():
    sym, runs = counted(lambda a, index: a[index])
    tr = trace_of(lambda x: (sym(x, slice(0, 2)), sym(x, slice(0, 2))), ((4, 3), torch.float32, False))
    assert [p.shape for p in tr.output] == [(2, 3), (2, 3)] and len(runs) == 2


def test_a_meta_that_refuses_its_inputs_refuses_them_every_time():
    import pytest

    from thunderlab.core.trace import TraceError

    sym, runs = counted(torch.matmul)
    for _ in range(2):
        with pytest.raises(TraceError, match="test_kept_meta"):
            trace_of(lambda x, y: sym(x, y), ((2, 3), torch.float32, False), ((4, 5), torch.float32, False))
    assert len(runs) == 2


def test_with_fast_paths_off_the_meta_runs_for_every_call():
    from thunderlab.core.fastpaths import fast_paths

    sym, runs = counted(torch.mul)
    with fast_paths(False):
        tr = trace_of(lambda x: (sym(x, 2.0), sym(x, 2.0)), ((4, 3), torch.float32, False))
    assert [p.shape for p in tr.output] == [(4, 3), (4, 3)] and len(runs) == 2
