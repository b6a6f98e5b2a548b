"""The torch-level backward kernels' metas agree with the kernels: same shapes and dtypes."""
import pytest
import torch

from thunderlab.core.proxies import TensorProxy
from thunderlab.core.symbols import tree_flatten
from thunderlab.core.trace import Trace
from thunderlab.ops import ltorch as vt

F32, F64 = torch.float32, torch.float64


def _cases():
    g, a = torch.randn(4, 6), torch.randn(4, 6)
    soft = torch.softmax(a, -1)
    w, b = torch.randn(6), torch.randn(6)
    return [
        ("gelu_backward", (g, a), {"approximate": "tanh"}),
        ("silu_backward", (g, a), {}),
        ("threshold_backward", (g, torch.relu(a), 0), {}),
        ("softmax_backward", (g, soft, 1, F32), {}),
        ("softmax_backward", (g.double(), soft.double(), 1, F64), {}),
        ("log_softmax_backward", (g, torch.log_softmax(a, -1), 1, F32), {}),
        ("layer_norm_backward", (g, a, (6,), w, b, 1e-5), {}),
        ("layer_norm_backward", (g, a, (6,), None, None, 1e-5), {}),
        *_group_norm_cases(),
    ]


def _group_norm_cases():
    a, w, b = torch.randn(2, 6, 3, 4), torch.randn(6), torch.randn(6)
    _, mean, rstd = torch.ops.aten.native_group_norm(a, None, None, 2, 6, 12, 3, 1e-5)
    return [
        ("native_group_norm", (a, w, b, 3, 1e-5), {}),
        ("native_group_norm", (a[:, :, 0], None, None, 2, 1e-5), {}),
        ("group_norm_backward_saved", (a, a, mean, rstd, w, True, 3), {}),
        ("group_norm_backward_saved", (a, a, mean, rstd, None, False, 3), {}),
        ("group_norm_backward", (a, a, w, False, 3, 1e-5), {}),
        ("group_norm_backward", (a.transpose(2, 3), a.transpose(2, 3), w, True, 3, 1e-5), {}),
        ("group_norm_backward", (a.double(), a.double(), w.double(), True, 2, 1e-5), {}),
    ]


@pytest.mark.parametrize("name,args,kwargs", _cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_meta_matches_kernel(name, args, kwargs):
    sym = getattr(vt, name)
    real = tree_flatten(sym.impl(*args, **kwargs))
    tr = Trace("probe")
    with tr.active():
        pargs = tuple(tr.proxy(v.shape, v.dtype, v.device) if isinstance(v, torch.Tensor) else v for v in args)
        out = tree_flatten(sym.meta(*pargs, **kwargs))
    assert len(out) == len(real)
    for p, r in zip(out, real):
        if r is None:
            assert p is None
            continue
        assert isinstance(p, TensorProxy)
        assert (tuple(p.shape), p.dtype) == (tuple(r.shape), r.dtype), name


def test_mismatched_gradient_is_rejected():
    tr = Trace("probe")
    with tr.active():
        g, a = tr.proxy((4, 6), F32, "cpu"), tr.proxy((4, 5), F32, "cpu")
        with pytest.raises(Exception, match=r"ltorch.gelu_backward: gradient \(4, 6\) does not match \(4, 5\)"):
            vt.gelu_backward.meta(g, a)
