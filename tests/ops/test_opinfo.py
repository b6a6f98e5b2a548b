"""Every torch-level op thunderlab maps, checked against eager PyTorch on PyTorch's OpInfo samples.

Which OpInfos are covered (the rule, applied in order; the first hit wins):

1. ``mapping.lookup(op.op)``: the OpInfo's function variant is a callable thunderlab maps
   (``torch.add``, ``F.layer_norm``), called through ``mapping.ADAPTERS`` where it has one,
   exactly as the FX frontend lowers a ``call_function`` node;
2. ``mapping.lookup(op.method_variant)``: its unbound Tensor method is mapped (``torch.Tensor.view``);
3. ``mapping.lookup_method(op.name)``: its name is a mapped Tensor method (``__radd__``,
   ``__getitem__``), called with the tensor first, as a ``call_method`` node is;
4. ``WRAPPED``: OpInfos whose ``op`` is a test-suite lambda around a mapped callable (seeding a
   random op, or reordering arguments); each entry names the symbol and how to call it.

An OpInfo is checked in float32 on CPU (int64, then bool, for the few that take no float32:
the bitwise ops, one_hot), and in addition in int64 and bool where it takes them, since those
are where type promotion in a decomposition goes wrong; OpInfos taking none of the three are
listed as not covered. Every sample of ``op.sample_inputs("cpu", dtype)`` is traced with a
proxy for each tensor in input, args and kwargs (nested lists included), run through
``dce,cse,claim,del`` (ops kept whole) and ``dce,cse,claim{decompose=all},del`` (everything
decomposed to prims), executed on the real tensors and compared with ``op.op`` run eagerly.
The traced outputs' shapes and dtypes (the meta functions) are compared with eager's before
anything runs, so a wrong meta fails with its own message. Random and uninitialized outputs
(dropout, randn, empty) are compared by shape and dtype only. Inputs an op writes to
(batch_norm's running statistics) are compared after the call too.

``python tests/ops/test_opinfo.py`` (or ``tests/ops/list_covered.py``) writes the covered op
names and sample count to ``tests/ops/COVERED_OPS.txt``.
"""
from __future__ import annotations

import functools
import os
import types

import pytest
import torch

from thunderlab.core.program import Program
from thunderlab.core.proxies import TensorProxy, dtype_short
from thunderlab.core.symbols import tree_flatten, tree_map
from thunderlab.core.trace import Trace
from thunderlab.executors.base import bind
from thunderlab.ops import ltorch, mapping
from thunderlab.passes import run_pipeline
from thunderlab.passes.base import Pipeline

# eager torch warns on some samples by design (var with too few elements, padding="same")
pytestmark = [pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0:UserWarning"),
              pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")]

PIPELINES = {  # parsed once: run_pipeline takes a Pipeline as well as its text
    "whole": Pipeline.parse("dce,cse,claim,del"),
    "decomposed": Pipeline.parse("dce,cse,claim{decompose=all},del"),
}
RTOL, ATOL = 1e-4, 1e-5
# op id -> (rtol, atol) where a decomposition reorders float arithmetic more than the default allows
TOLERANCES: dict[str, tuple[float, float]] = {}

# The floor for len(COVERED): raise it when coverage grows, never lower it silently.
MIN_COVERED = 207

# OpInfo name -> (thunderlab symbol name, function(input, *args, **kwargs) -> (args, kwargs) of the symbol)
WRAPPED = {
    "nn.functional.dropout": ("dropout", lambda a, *args, **kw: ((a, *args), kw)),
    "nn.functional.embedding": ("embedding", lambda weight, idx, **kw: ((idx, weight), kw)),
    "nn.functional.scaled_dot_product_attention": ("scaled_dot_product_attention", lambda *args, **kw: (args, kw)),
    "einsum": ("einsum", lambda tensors, equation: ((equation, *tensors), {})),
    "randn": ("randn", lambda *args, **kw: (args, kw)),
    "randn_like": ("randn_like", lambda a, *args, **kw: ((a, *args), kw)),
    "rand_like": ("rand_like", lambda a, *args, **kw: ((a, *args), kw)),
}

# symbols whose values are not determined by their inputs: compared by shape and dtype only
SHAPE_ONLY = {"empty", "empty_like", "new_empty"}

# (op id, dtype, sample index) -> why that sample is not supported. The test runs skipped
# samples too and fails if one passes, so an entry cannot outlive its reason.
_DATA_DEPENDENT = "the output shape depends on tensor values, which a trace of shapes cannot know"
_MASK = f"indexing with a boolean mask: {_DATA_DEPENDENT}"
_ONE_HOT = f"num_classes=-1 counts the classes in the data: {_DATA_DEPENDENT}"
SKIP: dict[tuple[str, str, int], str] = {
    ("__getitem__", "float32", 14): _MASK,
    ("__getitem__", "int64", 14): _MASK,
    ("__getitem__", "bool", 14): _MASK,
    ("nn.functional.one_hot", "int64", 0): _ONE_HOT,
    ("nn.functional.one_hot", "int64", 2): _ONE_HOT,
    ("nn.functional.one_hot", "int64", 4): _ONE_HOT,
}


# -- selection ---------------------------------------------------------------------------------
def op_id(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def dtypes(op) -> list[torch.dtype]:
    """The dtypes an OpInfo is checked in: its main one (float32 where it takes it), then int64 and bool."""
    supported = op.supported_dtypes("cpu")
    main = [dt for dt in (torch.float32, torch.int64, torch.bool) if dt in supported][:1]
    return main + [dt for dt in (torch.int64, torch.bool) if dt in supported and dt not in main]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def select(op):
    """(symbol, calling convention) for an OpInfo by the rule in the module docstring, or None."""
    sym = mapping.lookup(op.op)
    if sym is not None:
        adapter = mapping.ADAPTERS.get(op.op)
        if adapter is None:
            return sym, lambda *args, **kw: (args, kw)
        return sym, adapter
    if op.method_variant is not None:
        sym = mapping.lookup(op.method_variant)
        if sym is not None:
            return sym, lambda *args, **kw: (args, kw)
    sym = mapping.lookup_method(op.name)
    if sym is not None:
        return sym, lambda *args, **kw: (args, kw)
    if op.name in WRAPPED:
        name, call = WRAPPED[op.name]
        return ltorch.TORCH_SYMBOLS[name][0], call
    return None


@functools.cache
def _op_db():
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db


@functools.cache
def covered_opinfos() -> dict[str, object]:
    """op id -> OpInfo for every OpInfo the rule selects, in op_db order."""
    return {op_id(op): op for op in _op_db() if select(op) is not None and dtypes(op)}


@functools.cache
def uncovered_opinfos() -> dict[str, str]:
    """op id -> reason, for OpInfos the rule selects that cannot be checked here."""
    return {op_id(op): f"no float32, int64 or bool on CPU (takes {sorted(map(dtype_name, op.supported_dtypes('cpu')))})"
            for op in _op_db() if select(op) is not None and not dtypes(op)}


COVERED: list[str] = list(covered_opinfos())  # the op ids, one test each


# -- one sample ----------------------------------------------------------------------------------
def _clone(x):
    return tree_map(lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v, x)


def _describe(v) -> str:
    if isinstance(v, torch.Tensor):
        return f"Tensor{list(v.shape)}:{dtype_name(v.dtype)}"
    if isinstance(v, (tuple, list)):
        inner = ", ".join(_describe(e) for e in v)
        return f"({inner})" if isinstance(v, tuple) else f"[{inner}]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}={_describe(e)}" for k, e in v.items()) + "}"
    return repr(v)


def describe_sample(sample) -> str:
    parts = [_describe(sample.input)] + [_describe(a) for a in sample.args]
    parts += [f"{k}={_describe(v)}" for k, v in sample.kwargs.items()]
    return ", ".join(parts)


def _to_structure(x):
    """Named tuples (torch.return_types) and torch.Size as plain tuples, for comparison."""
    if isinstance(x, tuple):
        return tuple(_to_structure(e) for e in x)
    if isinstance(x, list):
        return [_to_structure(e) for e in x]
    return x


def trace_sample(sym, call, sample, requires_grad=lambda v: False):
    """The forward trace of one call of ``sym`` on ``sample``, and the real tensors its inputs stand for.

    ``requires_grad(tensor)`` says which input proxies require grad (none by default).
    """
    tr = Trace("forward")
    real: list[torch.Tensor] = []
    with tr.active():
        def to_proxy(v):
            if isinstance(v, torch.Tensor):
                p = tr.proxy(v.shape, v.dtype, v.device, requires_grad=requires_grad(v), name=f"x{len(real)}")
                tr.inputs.append(p)
                real.append(v)
                return p
            return v

        inp, args, kwargs = tree_map(to_proxy, (_to_structure(sample.input), _to_structure(tuple(sample.args)),
                                                dict(sample.kwargs)))
        cargs, ckwargs = call(inp, *args, **kwargs)
        tr.output = sym(*cargs, **ckwargs)
    return tr, real


def _check_metadata(traced, expected) -> None:
    t_leaves, e_leaves = tree_flatten(traced), tree_flatten(_to_structure(expected))
    if len(t_leaves) != len(e_leaves):
        raise AssertionError(f"the trace returns {len(t_leaves)} values, eager returns {len(e_leaves)}")
    for i, (t, e) in enumerate(zip(t_leaves, e_leaves)):
        if isinstance(e, torch.Tensor):
            if not isinstance(t, TensorProxy):
                raise AssertionError(f"output {i}: the trace returns {t!r}, eager a tensor")
            if tuple(t.shape) != tuple(e.shape) or t.dtype != e.dtype:
                eager = f"{e.device.type} {dtype_short(e.dtype)}[{', '.join(map(str, e.shape))}]"
                raise AssertionError(f"output {i}: meta gives {t.type_string()}, eager gives {eager}")
        elif isinstance(t, TensorProxy):
            raise AssertionError(f"output {i}: the trace returns a tensor, eager {e!r}")


def _compare(actual, expected, rtol, atol, values=True) -> None:
    a_leaves, e_leaves = tree_flatten(actual), tree_flatten(_to_structure(expected))
    if len(a_leaves) != len(e_leaves):
        raise AssertionError(f"{len(a_leaves)} outputs, eager gives {len(e_leaves)}")
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        if isinstance(e, torch.Tensor):
            assert isinstance(a, torch.Tensor), f"output {i}: got {type(a).__name__}, eager a tensor"
            assert a.shape == e.shape and a.dtype == e.dtype, \
                f"output {i}: got {a.dtype}{list(a.shape)}, eager {e.dtype}{list(e.shape)}"
            if values:
                torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True,
                                           msg=lambda m, i=i: f"output {i}: {m}")
        elif values:
            assert a == e or (a != a and e != e), f"output {i}: got {a!r}, eager {e!r}"


def check_sample(op, sample) -> bool:
    """Raise AssertionError (naming the step that went wrong) unless thunderlab matches eager on ``sample``.

    Returns whether the sample was checked (False for the few that do not call the op at all).
    """
    oid = op_id(op)
    sym, call = select(op)
    values = not (sym.random or sym.name in SHAPE_ONLY)
    rtol, atol = TOLERANCES.get(oid, (RTOL, ATOL))

    eager_in = _clone((sample.input, tuple(sample.args), dict(sample.kwargs)))
    expected = op.op(eager_in[0], *eager_in[1], **eager_in[2])
    if expected is NotImplemented:  # a reflected dunder on a number (5.0).__rsub__(t): not a call of the op
        return False

    try:
        tr, real = trace_sample(sym, call, _clone_sample(sample))
    except Exception as e:
        raise AssertionError(f"tracing ltorch.{sym.name} raised {type(e).__name__}: {e}") from e
    _check_metadata(tr.output, expected)
    eager_real = [v for v in tree_flatten(eager_in) if isinstance(v, torch.Tensor)]

    for label, pipeline in PIPELINES.items():
        _, final, err = run_pipeline(Program({"forward": tr}), pipeline)
        if err is not None:
            raise AssertionError(f"[{label}] {err}")
        fn = bind(final.forward)
        ins = _clone(real)
        try:
            got = fn(*ins)
        except Exception as e:
            raise AssertionError(f"[{label}] running the program raised {type(e).__name__}: {e}\n"
                                 f"{final.forward.python()}") from e
        try:
            _compare(got, expected, rtol, atol, values)
            if values and sym.side_effect:  # inputs the op writes to
                _compare(ins, eager_real, rtol, atol)
        except AssertionError as e:
            raise AssertionError(f"[{label}] {e}\n{final.forward.python()}") from None
    return True


def _clone_sample(sample):
    return types.SimpleNamespace(input=_clone(sample.input), args=_clone(tuple(sample.args)),
                                 kwargs=_clone(dict(sample.kwargs)))


def samples(op, dtype):
    torch.manual_seed(0)  # sample values, and so SKIP's indices, are the same on every run
    return list(op.sample_inputs("cpu", dtype, requires_grad=False))


# -- tests ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", COVERED)
def test_opinfo(name):
    op = covered_opinfos()[name]
    failures, stale = [], []
    for dtype in dtypes(op):
        for i, sample in enumerate(samples(op, dtype)):
            where = f"{name} {dtype_name(dtype)} sample {i}"
            reason = SKIP.get((name, dtype_name(dtype), i))
            try:
                check_sample(op, sample)
            except AssertionError as e:
                if reason is None:
                    failures.append(f"{where} ({describe_sample(sample)}): {e}")
                continue
            if reason is not None:
                stale.append(f"{where} now passes; remove its SKIP entry ({reason!r})")
    assert not failures, f"{len(failures)} failing sample(s):\n\n" + "\n\n".join(failures)
    assert not stale, "\n".join(stale)


def test_coverage_floor():
    assert len(COVERED) >= MIN_COVERED, f"only {len(COVERED)} OpInfos are covered, the floor is {MIN_COVERED}"


def test_skips_name_covered_ops():
    for name, dtype, _ in SKIP:
        assert name in covered_opinfos(), f"SKIP names {name!r}, which is not a covered OpInfo"
        assert dtype in map(dtype_name, dtypes(covered_opinfos()[name])), (
            f"SKIP names {name!r} in {dtype}, never checked"
        )


# -- the coverage list ---------------------------------------------------------------------------
COVERED_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "COVERED_OPS.txt")


def write_covered(path: str = COVERED_FILE) -> str:
    """Write the covered OpInfos (symbol, dtypes, samples checked) to ``path``; return the text."""
    ops = covered_opinfos()
    rows, total, checked = [], 0, 0
    for name, op in ops.items():
        counts = []
        for dtype in dtypes(op):
            ss = samples(op, dtype)
            n = len(ss)
            total += n
            checked += sum(1 for i in range(n) if (name, dtype_name(dtype), i) not in SKIP)
            counts.append(f"{dtype_name(dtype)}:{n}")
        rows.append(f"{name}  ltorch.{select(op)[0].name}  {' '.join(counts)}")
    symbols = {select(op)[0].name for op in ops.values()}
    lines = [
        "# OpInfo ops checked against eager PyTorch by tests/ops/test_opinfo.py",
        "# (generated by `python tests/ops/list_covered.py`; do not edit)",
        f"# {len(ops)} OpInfos covered ({len(symbols)} thunderlab symbols); {total} samples, "
        f"{checked} checked, {total - checked} in SKIP",
        "# opinfo  symbol  dtype:samples ...",
        *rows,
    ]
    missing = uncovered_opinfos()
    if missing:
        lines += ["", "# selected by the rule but not checked:"] + [f"# {n}: {why}" for n, why in missing.items()]
    text = "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)
    return text


if __name__ == "__main__":
    import warnings

    warnings.simplefilter("ignore")
    print(write_covered().splitlines()[2].lstrip("# "))
    print(f"written to {COVERED_FILE}")
