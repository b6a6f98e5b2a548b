"""The nvFuser executor: rule-table translation printed on CPU; execution where nvFuser and a GPU are."""
import sys
import types

import pytest
import torch

from thunderlab.core.trace import Trace
from thunderlab.executors import nvfuser as nv
from thunderlab.executors.base import EXECUTORS, RunOptions, bind
from thunderlab.ops import prims

pytestmark = pytest.mark.nvfuser

F, I, B = torch.float32, torch.int64, torch.bool  # noqa: E741 - one-letter dtype names keep the op tables short
UNARY_F = ("abs neg exp exp2 expm1 log log1p log2 log10 sin cos tan asin acos atan sinh cosh tanh asinh acosh "
           "atanh sqrt rsqrt reciprocal erf erfc erfinv floor ceil round trunc sign lgamma sigmoid "
           "isnan isinf isfinite signbit").split()
BINARY_F = "add sub mul div remainder fmod pow maximum minimum atan2 eq ne lt le gt ge".split()


def _sample(name):
    """(input specs, build(*inputs) -> outputs) for a tiny region using prim ``name``."""
    p = getattr(prims, name)
    if name in UNARY_F:
        return [((3, 4), F)], lambda a: p(a)
    if name in BINARY_F:
        return [((3, 4), F), ((3, 4), F)], lambda a, b: p(a, b)
    table = {
        "bitwise_not": ([((3, 4), I)], lambda a: p(a)),
        "logical_not": ([((3, 4), B)], lambda a: p(a)),
        **{n: ([((3, 4), I), ((3, 4), I)], lambda a, b, n=n: getattr(prims, n)(a, b))
           for n in ("bitwise_and", "bitwise_or", "bitwise_xor")},
        **{n: ([((3, 4), B), ((3, 4), B)], lambda a, b, n=n: getattr(prims, n)(a, b))
           for n in ("logical_and", "logical_or", "logical_xor")},
        "where": ([((3, 4), B), ((3, 4), F)], lambda c, a: p(c, a, 0.0)),
        "convert_element_type": ([((3, 4), F)], lambda a: p(a, torch.float16)),
        "broadcast_in_dim": ([((4,), F)], lambda a: p(a, (3, 4), (1,))),
        "reshape": ([((3, 4), F)], lambda a: p(a, (2, 6))),
        "transpose": ([((3, 4), F)], lambda a: p(a, (1, 0))),
        "slice": ([((3, 4), F)], lambda a: p(a, (0, 1), (2, 4), (1, 1))),
        "squeeze": ([((3, 1), F)], lambda a: p(a, (1,))),
        "cat": ([((3, 4), F), ((2, 4), F)], lambda a, b: p([a, b], 0)),
        "pad": ([((3, 4), F)], lambda a: p(a, 0.0, ((1, 0, 0), (0, 2, 0)))),
        "sum": ([((3, 4), F)], lambda a: p(a, (1,))),
        "prod": ([((3, 4), F)], lambda a: p(a, (0,))),
        "amax": ([((3, 4), F)], lambda a: p(a, (1,))),
        "amin": ([((3, 4), F)], lambda a: p(a, (1,))),
        "var": ([((3, 4), F)], lambda a: p(a, (1,), correction=1)),
        "var_mean": ([((3, 4), F)], lambda a: p(a, (1,), correction=0)),
        "full": ([((3, 4), F)], lambda a: prims.add(a, p((3, 4), 2.0, dtype=F, device=a.device))),
        "iota": ([((5,), I)], lambda a: prims.add(a, p(5, start=0, step=1, dtype=I, device=a.device))),
        "uniform": ([((3, 4), F)], lambda a: prims.mul(a, p((3, 4), 0.0, 1.0, dtype=F, device=a.device))),
        "matmul": ([((3, 4), F), ((4, 5), F)], lambda a, b: p(a, b)),
        "linear": ([((3, 4), F), ((5, 4), F), ((5,), F)], lambda a, w, bias: p(a, w, bias)),
        "take": ([((5, 4), F), ((3,), I)], lambda a, i: p(a, i, 0)),
        "gather": ([((3, 4), F), ((3, 2), I)], lambda a, i: p(a, 1, i)),
        "cumsum": ([((3, 4), F)], lambda a: p(a, 1)),
        "topk": ([((3, 4), F)], lambda a: p(a, 2, 1, True, True)),
    }
    return table[name]


def region(specs, build, device="cpu", name="nvfuser0"):
    tr = Trace(name=name)
    with tr.active():
        tr.inputs = [tr.proxy(s, d, device, name=f"a{i}") for i, (s, d) in enumerate(specs)]
        out = build(*tr.inputs)
    tr.output = tuple(out) if isinstance(out, tuple) else (out,)
    return tr


# the keyword names each fd.ops / fd call accepts (read from nvfuser_direct's bindings)
KWARGS = {
    "define_tensor": {"shape", "contiguity", "dtype", "is_cpu", "stride_order"}, "define_scalar": {"dtype"},
    "cast": {"dtype"}, "broadcast_in_dim": {"shape", "broadcast_dims"}, "reshape": {"new_shape"},
    "permute": {"dims"}, "slice": {"start_indices", "end_indices", "strides"}, "squeeze": {"dims"},
    "cat": {"dim"}, "pad": {"pad_widths", "value"}, "sum": {"dims", "keepdim", "dtype"},
    "prod": {"dims", "keepdim", "dtype"}, "max": {"dims", "keepdim"}, "min": {"dims", "keepdim"},
    "var": {"dims", "correction", "keepdim"}, "var_mean": {"dims", "correction", "keepdim"},
    "full": {"shape", "fill_value", "dtype"}, "iota": {"dtype"}, "uniform": {"dtype"},
    "index_select": {"dim"}, "gather": {"dim"}, "cumsum": {"dim"}, "topk": {"dim", "largest", "sorted"},
}


def _stub_nvfuser_direct(calls):
    """A fake ``nvfuser_direct`` whose fd checks keyword names, so the printed text is run, not only parsed."""

    class Ops:
        def __getattr__(self, op):
            def call(*args, **kwargs):
                assert set(kwargs) <= KWARGS.get(op, set()), (op, kwargs)
                calls.append(op)
                return (object(), object()) if op in ("var_mean", "topk") else object()
            return call

    class FD:
        ops = Ops()

        def define_tensor(self, **kw):
            return self.ops.define_tensor(**kw)

        def define_scalar(self, value, **kw):
            return self.ops.define_scalar(**kw)

        def add_output(self, t):
            calls.append("add_output")

    m = types.ModuleType("nvfuser_direct")
    m.FusionDefinition, m.DataType = (
        FD,
        types.SimpleNamespace(**{n: n for n in list(nv.DTYPES.values()) + ["Null", "Double"]}),
    )
    return m


TRANSLATED = sorted(k.removeprefix("prims.") for k in nv.TRANSLATIONS)


@pytest.mark.parametrize("name", TRANSLATED)
def test_translation(name, monkeypatch):
    specs, build = _sample(name)
    tr = region(specs, build)
    assert all(nv.translatable(b) == (True, "") for b in tr.bound_symbols)
    text = nv.definition_text(tr)
    assert f"fd.ops.{nv.TRANSLATIONS['prims.' + name].op}(" in text
    assert text.count("= fd.define_tensor(shape=[") == len(specs)
    assert text.count("fd.add_output(") == len(tr.output_proxies())
    code = compile(text, f"<nvfuser {name}>", "exec")
    calls: list = []
    monkeypatch.setitem(sys.modules, "nvfuser_direct", _stub_nvfuser_direct(calls))
    ns: dict = {}
    exec(code, ns)
    ns["nvfuser_fusion"](ns["FusionDefinition"]())
    assert nv.TRANSLATIONS[f"prims.{name}"].op in calls and calls.count("add_output") == len(tr.output_proxies())


def test_every_prim_is_translated_or_says_why():
    assert set(nv.TRANSLATIONS) | set(nv.NOT_TRANSLATED) == {p.qualname for p in prims.PRIMS.values()}
    assert not set(nv.TRANSLATIONS) & set(nv.NOT_TRANSLATED)


def test_one_translation_per_prim():
    from thunderlab.ops.rules import RuleConflict

    rule = nv.TRANSLATIONS["prims.abs"]
    with pytest.raises(RuleConflict, match=r"prims\.abs already has an nvFuser translation"):
        nv.TRANSLATIONS.add("prims.abs", nv.Rule("abs", rule.translate))
    nv.TRANSLATIONS.add("prims.abs", rule, override=True)  # said on purpose: allowed
    assert nv.TRANSLATIONS["prims.abs"] is rule


def _layer_norm(x, w):
    var, mean = prims.var_mean(x, (1,), correction=0)
    r = prims.rsqrt(prims.add(prims.broadcast_in_dim(var, (4, 1), (0,)), 1e-5))
    xc = prims.sub(x, prims.broadcast_in_dim(mean, (4, 8), (0,)))
    y = prims.mul(xc, prims.broadcast_in_dim(r, (4, 8), (0, 1)))
    return prims.mul(y, prims.broadcast_in_dim(w, (4, 8), (1,))), mean


LAYER_NORM = """\
# nvFuser definition of region nvfuser0
from nvfuser_direct import FusionDefinition, DataType


def nvfuser_fusion(fd: FusionDefinition) -> None:
    T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)  # a0
    T1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float, is_cpu=False)  # a1
    T2, T3 = fd.ops.var_mean(T0, dims=[1], correction=0, keepdim=False)  # t0, t1 = prims.var_mean
    T4 = fd.ops.broadcast_in_dim(T2, shape=[4, 1], broadcast_dims=[0])  # t2 = prims.broadcast_in_dim
    S0 = fd.define_scalar(1e-05, dtype=DataType.Double)
    T5 = fd.ops.add(T4, S0)  # t3 = prims.add
    T6 = fd.ops.rsqrt(T5)  # t4 = prims.rsqrt
    T7 = fd.ops.broadcast_in_dim(T3, shape=[4, 8], broadcast_dims=[0])  # t5 = prims.broadcast_in_dim
    T8 = fd.ops.sub(T0, T7)  # t6 = prims.sub
    T9 = fd.ops.broadcast_in_dim(T6, shape=[4, 8], broadcast_dims=[0, 1])  # t7 = prims.broadcast_in_dim
    T10 = fd.ops.mul(T8, T9)  # t8 = prims.mul
    T11 = fd.ops.broadcast_in_dim(T1, shape=[4, 8], broadcast_dims=[1])  # t9 = prims.broadcast_in_dim
    T12 = fd.ops.mul(T10, T11)  # t10 = prims.mul
    fd.add_output(T12)  # t10
    fd.add_output(T3)  # t1


# with FusionDefinition() as fd:
#     nvfuser_fusion(fd)
# outputs = fd.execute([a0, a1])  # CUDA tensors
"""


def test_layer_norm_definition_is_complete_and_deterministic():
    specs = [((4, 8), F), ((8,), F)]
    text = nv.definition_text(region(specs, _layer_norm))
    assert text == LAYER_NORM
    assert nv.definition_text(region(specs, _layer_norm)) == text


def test_layout_from_real_strides():
    assert nv.layout((3, 4), (4, 1)) == ((True, True), ())
    assert nv.layout((3, 4), (1, 3)) == ((True, True), (0, 1))  # a transposed view
    assert nv.layout((3, 1, 4), (8, 4, 1)) == ((False, None, True), ())
    assert nv.layout((3, 4), (0, 1)) == ((None, True), ())  # expanded
    t = torch.randn(4, 3).t()
    text = nv.definition_text(region([((3, 4), F)], lambda a: prims.neg(a)), [t])
    assert "contiguity=[True, True], dtype=DataType.Float, is_cpu=False, stride_order=[0, 1])" in text


def test_unavailable_here_says_what_to_install():
    if "nvfuser_direct" in sys.modules or torch.cuda.is_available():
        pytest.skip("nvFuser or a GPU is present")
    ok, why = nv.available()
    assert not ok and ("pip install 'thunderlab[nvfuser]'" in why or why == nv.NO_GPU)
    ex = EXECUTORS["nvfuser"]
    assert ex.fusion and ex.available() == (ok, why)
    tr = region([((3, 4), F)], lambda a: prims.exp(a))
    assert ex.can_execute(tr.bound_symbols[0]) == (False, why)
    with pytest.raises(RuntimeError, match="nvFuser cannot run region nvfuser0"):
        nv.compile(tr)


def test_translatable_reasons():
    ok = region([((3, 4), F)], lambda a: prims.exp(a)).bound_symbols[0]
    assert nv.translatable(ok) == (True, "")
    cases = [
        ([((3, 4), F)], lambda a: prims.flip(a, (0,)), "prims.flip has no nvFuser translation"),
        ([((3, 4), F)], lambda a: prims.argmax(a, 1), "prims.argmax has no nvFuser translation"),
        ([((3, 4), torch.complex64)], lambda a: prims.exp(a), "dtype complex64 not supported"),
        ([((3, 4), torch.uint8)], lambda a: prims.neg(a), "dtype uint8 not supported"),
        ([((3, 4), F)], lambda a: prims.slice(a, (0, 0), (3, 4), (2, 1)), "stride 1 only"),
        ([((3, 4), F)], lambda a: prims.pad(a, 0.0, ((0, 0, 1), (0, 0, 0))), "interior"),
        ([((3, 4), I), ((3, 4), I)], lambda a, b: prims.div(a, b), "truncates"),
        ([((3, 4), F)], lambda a: prims.sum(a, ()), "over no dimensions"),
    ]
    for specs, build, reason in cases:
        b = region(specs, build).bound_symbols[-1]
        ok, why = nv.translatable(b)
        assert not ok and reason in why, (b, why)


def test_take_with_a_2d_index_flattens_it():
    text = nv.definition_text(region([((5, 4), F), ((2, 3), I)], lambda a, i: prims.take(a, i, 0)))
    assert "fd.ops.reshape(T1, new_shape=[6])" in text and "fd.ops.index_select(T0, T2, dim=0)" in text
    assert "fd.ops.reshape(T3, new_shape=[2, 3, 4])  # t0 = prims.take" in text


def test_can_execute_wants_cuda_tensors(monkeypatch):
    monkeypatch.setattr(nv, "_availability", (True, ""))
    ex = EXECUTORS["nvfuser"]
    cpu = region([((3, 4), F)], lambda a: prims.exp(a)).bound_symbols[0]
    assert ex.can_execute(cpu) == (False, "prims.exp has tensors on cpu; nvFuser runs on CUDA only")
    cuda = region([((3, 4), F)], lambda a: prims.exp(a), device="cuda").bound_symbols[0]
    assert ex.can_execute(cuda) == (True, "")
    flip = region([((3, 4), F)], lambda a: prims.flip(a, (0,)), device="cuda").bound_symbols[0]
    assert ex.can_execute(flip) == (False, "prims.flip has no nvFuser translation (nvFuser has no flip)")


def test_a_bound_region_falls_back_to_torch_and_says_why():
    if nv.available()[0]:
        pytest.skip("nvFuser is available")
    from thunderlab.executors.fusion import make_region

    tr = region([((3, 4), F), ((3, 4), F)], lambda a, b: prims.mul(prims.add(a, b), 2.0))
    bsym = make_region("nvfuser0", "nvfuser", tr.bound_symbols, tr.output)
    assert bsym.args == tuple(tr.inputs)  # its inputs: what the members read and do not make
    runner = EXECUTORS["nvfuser"].bind_region(bsym, RunOptions(tiered=False))
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    (out,) = runner(a, b)
    torch.testing.assert_close(out, (a + b) * 2)
    assert runner.version == "torch" and nv.available()[1] in runner.error


class _TorchBackedFD:
    """A fake live FusionDefinition that runs its recorded calls with torch (a few ops), to test compile()."""

    built = 0
    OPS = {"add": torch.add, "mul": torch.mul, "exp": torch.exp, "permute": lambda t, dims: t.permute(dims)}

    def __init__(self):
        self.steps, self.n_inputs, self.outputs = [], 0, []
        # the outer lambda binds each name (ruff's B023 does not see that)
        self.ops = types.SimpleNamespace(**{n: (lambda n: lambda *a, **kw: self._op(n, a, kw))(n)  # noqa: B023
                                            for n in self.OPS})

    def __enter__(self):
        type(self).built += 1
        return self

    def __exit__(self, *exc):
        return None

    def _op(self, name, args, kwargs):
        self.steps.append((name, args, kwargs))
        return ("v", len(self.steps) - 1 + self.n_inputs)

    def define_tensor(self, **kw):
        assert self.steps == [] and set(kw) <= KWARGS["define_tensor"]
        self.n_inputs += 1
        self.layouts = getattr(self, "layouts", []) + [(kw["contiguity"], kw.get("stride_order"))]
        return ("v", self.n_inputs - 1)

    def define_scalar(self, value, dtype=None):
        return value

    def add_output(self, v):
        self.outputs.append(v)

    def execute(self, inputs):
        vals = list(inputs)

        def get(a):
            return vals[a[1]] if isinstance(a, tuple) and a[:1] == ("v",) else a

        for name, args, kwargs in self.steps:
            vals.append(self.OPS[name](*map(get, args), **kwargs))
        return [get(o) for o in self.outputs]


def test_compile_builds_through_the_table_and_caches_by_layout(monkeypatch):
    fake = types.SimpleNamespace(
        FusionDefinition=_TorchBackedFD, DataType=types.SimpleNamespace(Float="Float", Double="Double")
    )
    monkeypatch.setattr(nv, "_availability", (True, ""))
    monkeypatch.setattr(nv, "_module", fake)
    monkeypatch.setattr(_TorchBackedFD, "built", 0)
    monkeypatch.setattr(nv, "_definitions", {})
    tr = region([((3, 4), F), ((3, 4), F)], lambda a, b: (prims.exp(prims.mul(prims.add(a, b), 2.0)), prims.add(a, b)))
    fn = nv.compile(tr)
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    for _ in range(2):
        out, s = fn(a, b)
        torch.testing.assert_close(out, torch.exp((a + b) * 2))
        torch.testing.assert_close(s, a + b)
    assert _TorchBackedFD.built == 1
    fn(torch.randn(4, 3).t(), b)  # another layout: another definition
    assert _TorchBackedFD.built == 2
    nv.compile(region([((3, 4), F), ((3, 4), F)], lambda x, y: (prims.exp(prims.mul(prims.add(x, y), 2.0)),
                                                                prims.add(x, y)), name="other"))(a, b)
    assert _TorchBackedFD.built == 2  # the same calls under other names share the definition
    with pytest.raises(ValueError, match="prims.flip has no nvFuser translation"):
        nv.compile(region([((3, 4), F)], lambda x: prims.flip(x, (0,))))


def test_importing_does_not_import_nvfuser():
    import subprocess

    code = ("import sys, thunderlab.executors.nvfuser; "
            "assert 'nvfuser_direct' not in sys.modules and 'nvfuser' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


# -- on a GPU with nvFuser ------------------------------------------------------------------
def _real(spec, name):
    shape, dtype = spec
    if dtype == B:
        return torch.rand(shape, device="cuda") > 0.5
    if dtype == I:
        return (
            torch.zeros(shape, dtype=I, device="cuda")
            if name in ("take", "gather")
            else torch.randint(0, 5, shape, device="cuda")
        )
    return torch.randn(shape, dtype=dtype, device="cuda")


@pytest.mark.cuda
@pytest.mark.parametrize("name", TRANSLATED)
def test_nvfuser_matches_eager(name):
    pytest.importorskip("nvfuser_direct")
    specs, build = _sample(name)
    tr = region(specs, build, device="cuda")
    args = [_real(s, name) for s in specs]
    got = nv.compile(tr)(*args)
    want = bind(tr)(*args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        if name == "uniform":
            assert ((g >= torch.minimum(args[0], 0 * args[0])) & (g <= torch.maximum(args[0], 0 * args[0]))).all()
        elif name != "topk" or g.dtype != I:  # tied values may give other indices
            torch.testing.assert_close(g, w, equal_nan=True, rtol=1e-4, atol=1e-4)


@pytest.mark.cuda
def test_nvfuser_layer_norm_and_layouts():
    pytest.importorskip("nvfuser_direct")
    tr = region([((4, 8), F), ((8,), F)], _layer_norm, device="cuda")
    fn = nv.compile(tr)
    x, w = torch.randn(4, 8, device="cuda"), torch.randn(8, device="cuda")
    for xs in (x, torch.randn(8, 4, device="cuda").t()):  # a second layout builds a second definition
        for g, e in zip(fn(xs, w), bind(tr)(xs, w)):
            torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)
