"""Average pooling whose one window covers the whole map (adaptive pooling to 1 x 1 too) is that map's mean,
and thunderlab computes it so.

PyTorch documents ``AvgPool2d``'s output size as ``floor((H + 2p - k) / s) + 1`` (ceil with ``ceil_mode``, and a
last window must start inside the input or left padding), and each output as the average over the window's part
inside the padded input (``count_include_pad``). With no padding, a window at least the map's size and one
output, that average is the mean over the map, whatever the window's size: EfficientNet's
``AvgPool2d(1280, ceil_mode=True)`` over a 7x7 map. The cases below come from that formula; every one is checked
against eager, forward and gradient, on the torch executor and in an Inductor region.
"""
import pytest
import torch
import torch.nn.functional as F

import thunderlab

TRAIN = {"torch": "dce,cse,autodiff,claim{executors=torch},fuse,del",
         "inductor": "dce,cse,autodiff,remat,claim{executors=inductor+torch},fuse,del"}

WHOLE_MAP = [  # (input shape, avg_pool2d keywords): one window over every position
    ((2, 3, 7, 7), dict(kernel_size=1280, ceil_mode=True)),  # EfficientNet's head
    ((2, 3, 7, 7), dict(kernel_size=7)),  # the window is the map
    ((2, 3, 5, 6), dict(kernel_size=(5, 6), stride=1)),  # not square, stride 1
    ((3, 4, 4), dict(kernel_size=(9, 5), ceil_mode=True, count_include_pad=False)),  # unbatched
    ((1, 2, 3, 3), dict(kernel_size=4, stride=(8, 2), ceil_mode=True)),
]
NOT_WHOLE_MAP = [  # more than one window, padding, or a divisor given: pooled as eager pools
    ((2, 3, 7, 7), dict(kernel_size=3)),
    ((2, 3, 7, 7), dict(kernel_size=7, padding=1)),  # padding: more than the map in the window
    ((2, 3, 7, 7), dict(kernel_size=7, divisor_override=3)),
    ((2, 3, 8, 8), dict(kernel_size=7, ceil_mode=True)),  # two windows per dimension, the second overhangs
    ((2, 3, 7, 7), dict(kernel_size=(7, 3))),
]


def _check(shape, kw, executors):
    def f(x):
        return F.avg_pool2d(x.sin(), **kw) * 2

    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0), requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    j = thunderlab.jit(f, pipeline=TRAIN[executors], tiered=False)
    got, want = j(x), f(x_ref)
    torch.testing.assert_close(got, want)
    got.square().sum().backward()
    want.square().sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad)
    program = thunderlab.last_record(j).program

    def called(trace):
        return {s.sym.name for b in program.traces[trace].bound_symbols for s in (b.subsymbols or [b])}

    return called("forward"), called("backward")


@pytest.mark.parametrize("executors", ["torch", "inductor"])
@pytest.mark.parametrize("shape,kw", WHOLE_MAP)
def test_one_window_over_the_whole_map_is_its_mean(shape, kw, executors):
    forward, backward = _check(shape, kw, executors)
    assert "avg_pool2d" not in forward and ({"mean", "sum"} & forward), forward
    assert "avg_pool2d_backward" not in backward, backward


@pytest.mark.parametrize("shape,kw", NOT_WHOLE_MAP)
def test_other_pooling_stays_one_call_with_eager_s_backward_kernel(shape, kw):
    forward, backward = _check(shape, kw, "torch")
    assert "avg_pool2d" in forward and "avg_pool2d_backward" in backward


def test_a_window_eager_refuses_is_refused_as_eager_refuses_it():
    x = torch.randn(1, 2, 3, 3)
    with pytest.raises(RuntimeError) as eager:
        F.avg_pool2d(x, 4)  # no ceil_mode: the output would be empty
    with pytest.raises(Exception) as jitted:
        thunderlab.jit(lambda x: F.avg_pool2d(x, 4))(x)
    assert "small" in str(jitted.value).lower() or str(eager.value)[:40] in str(jitted.value)


# ``AdaptiveAvgPool2d``: PyTorch documents ``output_size`` as H x W, an int for H x H, ``None`` for the input's own
# size. An output of 1 x 1 is the map's mean (most convolution networks' head); any other stays one call.
ADAPTIVE_ONE = [((2, 3, 7, 7), 1), ((2, 3, 7, 7), (1, 1)), ((2, 3, 1, 6), (None, 1)), ((2, 3, 5, 1), (1, None)),
                ((3, 4, 4), 1)]
ADAPTIVE_OTHER = [((2, 3, 7, 7), (2, 1)), ((2, 3, 7, 7), (None, 1)), ((2, 3, 7, 7), 3), ((2, 3, 7, 7), (1, 7))]


def _check_adaptive(shape, output_size, executors):
    def f(x):
        return F.adaptive_avg_pool2d(x.sin(), output_size) * 2

    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0), requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    j = thunderlab.jit(f, pipeline=TRAIN[executors], tiered=False)
    got, want = j(x), f(x_ref)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want)
    got.square().sum().backward()
    want.square().sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad)
    program = thunderlab.last_record(j).program
    return {s.sym.name for t in ("forward", "backward") for b in program.traces[t].bound_symbols
            for s in (b.subsymbols or [b])}


@pytest.mark.parametrize("executors", ["torch", "inductor"])
@pytest.mark.parametrize("shape,output_size", ADAPTIVE_ONE)
def test_adaptive_pooling_to_one_by_one_is_the_mean(shape, output_size, executors):
    called = _check_adaptive(shape, output_size, executors)
    assert not {"adaptive_avg_pool2d", "adaptive_avg_pool2d_backward"} & called and {"mean", "sum"} & called, called


@pytest.mark.parametrize("shape,output_size", ADAPTIVE_OTHER)
def test_other_adaptive_pooling_stays_one_call_with_eager_s_backward_kernel(shape, output_size):
    called = _check_adaptive(shape, output_size, "torch")
    assert {"adaptive_avg_pool2d", "adaptive_avg_pool2d_backward"} <= called, called
