"""Gradients of every OpInfo op test_opinfo.py covers, checked against eager PyTorch autograd.

Which ops: those ``tests/ops/test_opinfo.py`` covers (its selection rule, reused here) whose
OpInfo ``supports_autograd`` and takes float32 on CPU. Every float32 sample of
``op.sample_inputs("cpu", float32, requires_grad=True)`` is traced with a proxy per tensor
(requiring grad where the sample's tensor does), run through the default training pipeline
``dce,cse,autodiff,remat,claim,del`` and called through ``training_callable``, so its
gradients come from thunderlab's backward trace under a ``torch.autograd.Function``. A seeded
random cotangent is drawn for each floating output; ``torch.autograd.grad`` of the outputs
against every floating input that requires grad is compared with the same call on eager
``op.op``. The forward values are compared too (a wrong forward makes every gradient wrong).

Random samples (dropout with 0 < p < 1 in training, attention with dropout_p > 0) are compared
by the shapes and dtypes of outputs and gradients only: their masks differ from eager's.

Nondifferentiable points need no sample filtering at present: where a sample hits one, the
rules make PyTorch's choice (abs and sign-like ops give 0 at 0, maximum/minimum split a tie's
gradient in half, amax/amin share it evenly among equal maxima, prod's gradient at a zero is the
product of the other elements). A sample landing on a point where the two legitimately differ
goes in SKIP with the reason.

Where each op's gradient comes from is recorded in ``tests/ops/COVERED_GRAD_OPS.txt`` and the
test asserts it, so the file cannot go stale: ``rule`` (the torch-level call kept whole has a
derivative rule, beside its declaration in ``thunderlab/ops/<family>.py``), ``decomposition``
(differentiated through the rules of the calls its decomposition is made of), ``eager(<qualname>)`` (at least
part of it runs ``ltorch.eager_vjp``, PyTorch autograd at run time, for the named call). An op whose samples
differ lists each source seen.
``python tests/ops/test_opinfo_grad.py`` regenerates the file.
"""
from __future__ import annotations

import functools
import os
import sys
import types

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_opinfo import (  # noqa: E402  (the OpInfo selection and sample helpers are shared)
    _to_structure,
    covered_opinfos,
    describe_sample,
    dtype_name,
    op_id,
    select,
    trace_sample,
)

from thunderlab.core.program import Program  # noqa: E402
from thunderlab.core.symbols import tree_flatten, tree_map  # noqa: E402
from thunderlab.core.trace import Trace  # noqa: E402
from thunderlab.ops.vjp import VJP  # noqa: E402
from thunderlab.passes import run_pipeline  # noqa: E402
from thunderlab.passes.base import Pipeline  # noqa: E402
from thunderlab.runtime.autograd import training_callable  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0:UserWarning"),
              pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")]

PIPELINE = Pipeline.parse("dce,cse,autodiff,remat,claim,del")
RTOL, ATOL = 1e-4, 1e-5
# op id -> (rtol, atol), each with the reason float32 needs more than the default
GRAD_TOLERANCES: dict[str, tuple[float, float]] = {}

# The floor for len(GRAD_COVERED): raise it when coverage grows, never lower it silently.
MIN_GRAD_COVERED = 163

# (op id, sample index) -> why that sample's gradient is not compared. The test runs skipped
# samples too and fails if one passes, so an entry cannot outlive its reason.
SKIP: dict[tuple[str, int], str] = {
    ("__getitem__", 14): "indexing with a boolean mask: the output shape depends on tensor values, which a trace "
                         "of shapes cannot know (as in test_opinfo.py)",
}


# -- selection ---------------------------------------------------------------------------------
@functools.cache
def grad_opinfos() -> dict[str, object]:
    """op id -> OpInfo for the covered OpInfos that support autograd in float32 on CPU."""
    return {name: op for name, op in covered_opinfos().items()
            if op.supports_autograd and torch.float32 in op.supported_dtypes("cpu")}


GRAD_COVERED: list[str] = list(grad_opinfos())


def grad_samples(op):
    torch.manual_seed(0)  # sample values, and so SKIP's indices, are the same on every run
    return list(op.sample_inputs("cpu", torch.float32, requires_grad=True))


def _is_random(sym, sample) -> bool:
    """Whether this call draws random numbers (so its values cannot match eager's)."""
    if not sym.random:
        return False
    if sym.name == "dropout":
        p = sample.kwargs.get("p", sample.args[0] if sample.args else 0.5)
        training = sample.kwargs.get("training", sample.args[1] if len(sample.args) > 1 else True)
        return bool(training) and 0.0 < p < 1.0
    if sym.name == "scaled_dot_product_attention":
        p = sample.kwargs.get("dropout_p", sample.args[3] if len(sample.args) > 3 else 0.0)
        return p > 0.0
    return True


# -- one sample --------------------------------------------------------------------------------
def _grad_clone(x):
    """Fresh leaves: detached copies that require grad exactly where the originals do."""
    return tree_map(lambda v: v.detach().clone().requires_grad_(v.requires_grad)
                    if isinstance(v, torch.Tensor) else v, x)


def _wants_grad(v) -> bool:
    return isinstance(v, torch.Tensor) and v.requires_grad and (v.dtype.is_floating_point or v.dtype.is_complex)


def trace_grad_sample(sym, call, sample):
    """The forward trace of one call of ``sym``, its inputs proxies requiring grad as the sample's do."""
    return trace_sample(sym, call, sample, requires_grad=_wants_grad)


def gradient_source(steps) -> str | None:
    """Where the backward trace's calls come from: 'rule', 'decomposition' or 'eager(<qualname>)'.

    A backward call links (``derived_from``) to the forward call it differentiates: a top-level
    call of the traced program when that call's own rule ran, one of its subsymbols when autodiff
    went through the decomposition. ``ltorch.eager_vjp`` (or its variants on copies and replaying a draw) is
    the fallback to PyTorch autograd.
    """
    i = next((k for k, s in enumerate(steps) if s.spec == "autodiff"), None)
    if i is None or "backward" not in steps[i].program.traces:
        return None
    before = steps[i - 1].program.forward if i else None
    top = {b.id: b for b in before.bound_symbols} if before is not None else {}
    bw = steps[i].program.traces["backward"].bound_symbols
    fallbacks = ("ltorch.eager_vjp", "ltorch.eager_vjp_on_copies", "ltorch.eager_vjp_replaying")
    eager = sorted({b.args[0] for b in bw if b.sym.qualname in fallbacks})
    if eager:
        return f"eager({','.join(eager)})"
    if any(b.derived_from not in top for b in bw):
        return "decomposition"
    if not bw:  # nothing to compute (a gradient passed through unchanged): who would have answered
        return "rule" if any(b.sym.qualname in VJP for b in top.values()) else "decomposition"
    return "rule"


def _leaves(x) -> list:
    """The output's leaves (tensors and others), named tuples flattened like tuples."""
    return tree_flatten(_to_structure(x))


def _cotangents(outputs, seed: int) -> list:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(o.shape, generator=gen, dtype=o.dtype) if isinstance(o, torch.Tensor) and o.requires_grad
            else None for o in outputs]


def _grads(outputs, inputs, cotangents) -> list:
    pairs = [(o, c) for o, c in zip(outputs, cotangents) if c is not None]
    if not inputs or not pairs:
        return [None] * len(inputs)
    return list(torch.autograd.grad([o for o, _ in pairs], inputs, [c for _, c in pairs], allow_unused=True))


def _assert_close(what, a, e, rtol, atol, values):
    assert isinstance(a, torch.Tensor), f"{what}: got {type(a).__name__}, eager a tensor"
    assert a.shape == e.shape and a.dtype == e.dtype, \
        f"{what}: got {a.dtype}{list(a.shape)}, eager {e.dtype}{list(e.shape)}"
    if values:
        torch.testing.assert_close(a.detach(), e.detach(), rtol=rtol, atol=atol, equal_nan=True,
                                   msg=lambda m: f"{what}: {m}")


def check_grad_sample(op, sample, index: int) -> str | None:
    """Raise AssertionError unless thunderlab's gradients match eager's on ``sample``.

    Returns where the gradient came from (see ``gradient_source``), or None when the sample
    has nothing to differentiate (no floating input requires grad, or no output depends on one).
    """
    oid = op_id(op)
    sym, call = select(op)
    values = not _is_random(sym, sample)
    rtol, atol = GRAD_TOLERANCES.get(oid, (RTOL, ATOL))

    eager_in = _grad_clone((_to_structure(sample.input), _to_structure(tuple(sample.args)), dict(sample.kwargs)))
    eager_leaves = [v for v in tree_flatten(eager_in) if isinstance(v, torch.Tensor)]
    expected = op.op(eager_in[0], *eager_in[1], **eager_in[2])
    if expected is NotImplemented:
        return None
    e_out = _leaves(expected)
    if not any(isinstance(o, torch.Tensor) and o.requires_grad for o in e_out):
        return None  # eager has no gradient to give

    try:
        tr, real = trace_grad_sample(sym, call, types.SimpleNamespace(
            input=_grad_clone(sample.input), args=_grad_clone(tuple(sample.args)),
            kwargs=_grad_clone(dict(sample.kwargs))))
    except Exception as e:
        raise AssertionError(f"tracing ltorch.{sym.name} raised {type(e).__name__}: {e}") from e

    steps, final, err = run_pipeline(Program({"forward": tr}), PIPELINE)
    if err is not None:
        raise AssertionError(err)
    if "backward" not in final.traces:
        raise AssertionError("autodiff built no backward trace, yet eager's output requires grad")
    source = gradient_source(steps)
    try:
        got = training_callable(final)(*real)
    except Exception as e:
        raise AssertionError(f"running the forward raised {type(e).__name__}: {e}\n{final.python()}") from e
    g_out = _leaves(got)
    assert len(g_out) == len(e_out), f"{len(g_out)} outputs, eager gives {len(e_out)}"
    cot = _cotangents(e_out, seed=1000 + index)
    for k, (a, e, c) in enumerate(zip(g_out, e_out, cot)):
        if isinstance(e, torch.Tensor):
            _assert_close(f"output {k}", a, e, RTOL, ATOL, values)
            if c is not None and not a.requires_grad:
                raise AssertionError(f"output {k} does not require grad; eager's does")

    wanted = [k for k, v in enumerate(eager_leaves) if _wants_grad(v)]
    try:
        g_grads = _grads(g_out, [real[k] for k in wanted], cot)
    except Exception as e:
        raise AssertionError(f"running the backward raised {type(e).__name__}: {e}\n{final.python()}") from e
    e_grads = _grads(e_out, [eager_leaves[k] for k in wanted], cot)
    for k, a, e in zip(wanted, g_grads, e_grads):
        x = eager_leaves[k]
        a = torch.zeros_like(x) if a is None else a
        e = torch.zeros_like(x) if e is None else e
        try:
            _assert_close(f"gradient of input x{k} ({dtype_name(x.dtype)}{list(x.shape)})", a, e, rtol, atol, values)
        except AssertionError as err:
            raise AssertionError(f"[{source}] {err}\n{final.python()}") from None
    return source


# -- tests ---------------------------------------------------------------------------------------
def run_op(name) -> tuple[list[str], list[str], list[str], int]:
    """(failures, stale SKIP entries, gradient sources in order of first use, samples checked)."""
    op = grad_opinfos()[name]
    failures, stale, sources, checked = [], [], [], 0
    for i, sample in enumerate(grad_samples(op)):
        where = f"{name} sample {i}"
        reason = SKIP.get((name, i))
        try:
            source = check_grad_sample(op, sample, i)
        except AssertionError as e:
            if reason is None:
                failures.append(f"{where} ({describe_sample(sample)}): {e}")
            continue
        if reason is not None:
            stale.append(f"{where} now passes; remove its SKIP entry ({reason!r})")
            continue
        if source is not None:
            checked += 1
            if source not in sources:
                sources.append(source)
    return failures, stale, sources, checked


@pytest.mark.parametrize("name", GRAD_COVERED)
def test_opinfo_grad(name):
    failures, stale, sources, checked = run_op(name)
    assert not failures, f"{len(failures)} failing sample(s):\n\n" + "\n\n".join(failures)
    assert not stale, "\n".join(stale)
    assert checked, f"{name}: no sample has a gradient to compare"
    recorded = recorded_sources().get(name)
    got = " ".join(sources)
    assert recorded == got, (f"{name}: its gradient comes from {got!r}, COVERED_GRAD_OPS.txt says {recorded!r}; "
                             f"regenerate it with `python tests/ops/test_opinfo_grad.py`")


def test_remat_with_nothing_saved():
    tr = Trace("forward")
    with tr.active():
        x = tr.proxy((3,), torch.float32, "cpu", requires_grad=True, name="x")
        tr.inputs.append(x)
        tr.output = select(grad_opinfos()["neg"])[0](x)
    _, _, err = run_pipeline(Program({"forward": tr}), PIPELINE)
    assert err is None, err


def test_grad_coverage_floor():
    assert len(GRAD_COVERED) >= MIN_GRAD_COVERED, \
        f"only {len(GRAD_COVERED)} OpInfos are grad-covered, the floor is {MIN_GRAD_COVERED}"


def test_grad_skips_name_covered_ops():
    for name, _ in SKIP:
        assert name in grad_opinfos(), f"SKIP names {name!r}, which is not a grad-covered OpInfo"
    for name in GRAD_TOLERANCES:
        assert name in grad_opinfos(), f"GRAD_TOLERANCES names {name!r}, which is not a grad-covered OpInfo"


def test_covered_grad_file_lists_the_covered_ops():
    assert list(recorded_sources()) == GRAD_COVERED, \
        "COVERED_GRAD_OPS.txt is stale; regenerate it with `python tests/ops/test_opinfo_grad.py`"


# -- the coverage list ---------------------------------------------------------------------------
COVERED_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "COVERED_GRAD_OPS.txt")


@functools.cache
def recorded_sources() -> dict[str, str]:
    """op id -> the gradient source(s) COVERED_GRAD_OPS.txt records."""
    out = {}
    if not os.path.exists(COVERED_FILE):
        return out
    with open(COVERED_FILE) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, _sym, source, _count = line.rstrip("\n").split("  ")
            out[name] = source
    return out


def write_covered(path: str = COVERED_FILE) -> str:
    """Run every grad-covered op and write its gradient source and sample counts to ``path``."""
    rows, total, checked_all, counts = [], 0, 0, {"rule": 0, "decomposition": 0, "eager": 0, "mixed": 0}
    failing = []
    for name, op in grad_opinfos().items():
        failures, _stale, sources, checked = run_op(name)
        if failures:
            failing.append(name)
        n = len(grad_samples(op))
        total += n
        checked_all += checked
        kinds = {s.split("(")[0] for s in sources}
        counts["mixed" if len(kinds) > 1 else next(iter(kinds), "mixed")] += 1
        rows.append(f"{name}  ltorch.{select(op)[0].name}  {' '.join(sources)}  {checked}/{n}")
    lines = [
        "# OpInfo ops whose gradients tests/ops/test_opinfo_grad.py checks against eager autograd",
        "# (generated by `python tests/ops/test_opinfo_grad.py`; do not edit)",
        f"# {len(rows)} OpInfos; {total} float32 samples, {checked_all} gradients compared "
        f"(the rest: in SKIP, or nothing to differentiate)",
        f"# gradient from: rule {counts['rule']}, decomposition {counts['decomposition']}, "
        f"eager fallback {counts['eager']}, more than one {counts['mixed']}",
        "# source: rule = a derivative rule for the call kept whole (beside its declaration in thunderlab/ops/);",
        "#   decomposition = through the rules of its decomposition's calls;",
        "#   eager(q) = ltorch.eager_vjp (PyTorch autograd at run time) for the call q",
        "#   several = different samples take different paths (a rule declining some arguments)",
        "# opinfo  symbol  source  checked/samples",
        *rows,
    ]
    text = "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)
    if failing:
        print(f"warning: failing ops (their sources may be incomplete): {', '.join(failing)}")
    return text


if __name__ == "__main__":
    import warnings

    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    text = write_covered()
    print("\n".join(line.lstrip("# ") for line in text.splitlines()[2:4]))
    print(f"written to {COVERED_FILE}")
