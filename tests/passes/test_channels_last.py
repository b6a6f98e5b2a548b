"""channels-last: 2-D CPU convolutions run in the channels-last layout, results and layouts as eager's.

The cases follow PyTorch's memory-format semantics (the "Channels Last Memory Format" tutorial): a
convolution on an NHWC input returns NHWC, pointwise ops and batch norm keep it, ``view`` of an NHWC
tensor to flat sizes fails where ``reshape`` copies, and a model's outputs and gradients keep the
layouts eager gives them.
"""
import json

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import thunderlab

PIPELINE = "dce,cse,channels-last{when=always},autodiff,remat,claim,fuse,del"


class LeNet(nn.Module):
    """Convolutions, then ``x.view(batch, -1)`` as the classic LeNet writes it."""

    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 6, 5), nn.BatchNorm2d(6)
        self.c2 = nn.Conv2d(6, 16, 5)
        self.fc = nn.Linear(16 * 5 * 5, 10)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.b1(self.c1(x))), 2)
        x = torch.max_pool2d(torch.relu(self.c2(x)), 2)
        return self.fc(x.view(x.size(0), -1))


class Dense(nn.Module):
    """Returns a 4-D map (a segmentation head): eager returns it contiguous."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.ReLU())
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)

    def forward(self, x):
        return self.up(self.body(x)), self.body[0](x)


class SamePadded(nn.Module):
    """TensorFlow's "same" padding as an explicit ``F.pad`` before each convolution (transformers' MobileNets)."""

    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 8, 3, stride=2), nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, groups=8)

    def forward(self, x):
        x = torch.relu(self.b1(self.c1(F.pad(x, (0, 1, 0, 1)))))
        return self.c2(F.pad(x, (1, 1, 1, 1)))


def _pair(cls):
    torch.manual_seed(0)
    model, ref = cls(), cls()
    ref.load_state_dict(model.state_dict())
    return model, ref


def _layout(t):
    return "channels_last" if t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous() else \
        "contiguous" if t.is_contiguous() else "other"


def _step(rec, spec):
    return next(s for s in rec.steps if s.spec.split("{")[0] == spec)


@pytest.mark.parametrize("cls,shape", [(LeNet, (4, 3, 32, 32)), (Dense, (2, 3, 16, 16)), (SamePadded, (2, 3, 16, 16))])
def test_training_matches_eager_values_gradients_and_layouts(cls, shape):
    model, ref = _pair(cls)
    x = torch.randn(shape, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    j = thunderlab.jit(model, pipeline=PIPELINE)
    out, out_ref = j(x), ref(x_ref)
    outs, outs_ref = (out, out_ref) if isinstance(out, tuple) else ((out,), (out_ref,))
    sum(o.square().mean() for o in outs).backward()
    sum(o.square().mean() for o in outs_ref).backward()
    for o, r in zip(outs, outs_ref):
        torch.testing.assert_close(o, r, rtol=1e-4, atol=1e-5)
        assert _layout(o) == _layout(r) == "contiguous"
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-4, atol=1e-5)
    assert x.grad.is_contiguous() == x_ref.grad.is_contiguous()  # the autograd engine's layout contract
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=f"gradient of {name}")
        assert p.grad.is_contiguous(), name
    for name in ("running_mean", "running_var"):  # batch norm's statistics, written by the forward
        for (b, v), w in zip(model.named_buffers(), ref.buffers()):
            if b.endswith(name):
                torch.testing.assert_close(v, w)


def test_one_conversion_at_the_input_and_views_become_reshapes():
    model, _ = _pair(LeNet)
    j = thunderlab.jit(model, pipeline=PIPELINE)
    j(torch.randn(2, 3, 32, 32))
    rec = thunderlab.last_record(j)
    notes = _step(rec, "channels-last").notes
    assert notes["convolutions"] == 2 and notes["converted"] == 1 and notes["views_to_reshape"] == 1
    assert notes["outputs_in_callers_layout"] == 0  # the logits are 2-D
    fw = _step(rec, "channels-last").program.forward
    calls = [b.sym.name for b in fw.bound_symbols]
    assert calls.count("contiguous") == 1 and calls.index("contiguous") < calls.index("conv2d")
    assert "view" not in calls and "reshape" in calls
    assert "memory_format=torch.channels_last" in fw.python()


def test_the_activations_saved_for_backward_are_channels_last():
    """The point of choosing the layout before autodiff: the backward's convolutions read NHWC activations."""
    model, _ = _pair(Dense)
    j = thunderlab.jit(model, pipeline=PIPELINE)
    layouts = []

    def pack(t):
        if t.dim() == 4 and t.shape[0] == 2 and t.shape[1] > 1:  # activations (the batch is 2), not weights
            layouts.append(_layout(t))
        return t

    x = torch.randn(2, 3, 16, 16)
    j(x)  # compiled outside the hooks
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out, _ = j(x)
    assert layouts and set(layouts) == {"channels_last"}, layouts
    # without the pass the same program saves NCHW activations
    layouts.clear()
    plain = thunderlab.jit(_pair(Dense)[0], pipeline=PIPELINE.replace("channels-last{when=always},", ""))
    plain(x)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        plain(x)
    assert layouts and "channels_last" not in layouts


def test_padding_between_convolutions_keeps_the_activations_channels_last():
    """``F.pad`` keeps its input's memory format; the padded activation the next convolution reads (and its
    backward is handed) stays NHWC rather than coming back NCHW and taking the backward's layout with it."""
    model, _ = _pair(SamePadded)
    j = thunderlab.jit(model, pipeline=PIPELINE)
    layouts = []

    def pack(t):
        if t.dim() == 4 and t.shape[0] == 2 and t.shape[1] > 1:
            layouts.append(_layout(t))
        return t

    x = torch.randn(2, 3, 16, 16)
    j(x)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        j(x)
    assert layouts and set(layouts) == {"channels_last"}, layouts
    a = torch.randn(2, 3, 5, 6).to(memory_format=torch.channels_last)
    for pads in ((1, 2, 0, 1), (0, 0, 3, 0)):
        got = thunderlab.ops.prims.pad(a, 0.5, [(0, 0, 0), (0, 0, 0), (pads[2], pads[3], 0), (pads[0], pads[1], 0)])
        want = F.pad(a, pads, value=0.5)
        assert torch.equal(got, want) and got.stride() == want.stride()
    # cropping and interior padding, which F.pad does not do, as lax.pad defines them
    v = torch.arange(5.0)
    assert thunderlab.ops.prims.pad(v, -1.0, [(-1, 2, 1)]).tolist() == [-1, 1, -1, 2, -1, 3, -1, 4, -1, -1]


def test_an_input_already_channels_last_stays_correct():
    model, ref = _pair(Dense)
    model, ref = model.to(memory_format=torch.channels_last), ref.to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 16, 16).contiguous(memory_format=torch.channels_last)
    j = thunderlab.jit(model, pipeline=PIPELINE)
    for o, r in zip(j(x), ref(x)):
        torch.testing.assert_close(o, r, rtol=1e-4, atol=1e-5)
        assert _layout(o) == _layout(r) == "channels_last"  # eager keeps the caller's layout


def test_no_2d_cpu_convolution_means_no_change():
    conv1d = nn.Sequential(nn.Conv1d(4, 8, 3), nn.ReLU())
    j = thunderlab.jit(conv1d, pipeline=PIPELINE)
    x = torch.randn(2, 4, 16)
    torch.testing.assert_close(j(x), conv1d(x))
    rec = thunderlab.last_record(j)
    step = _step(rec, "channels-last")
    assert step.notes["convolutions"] == 0 and "nothing changed" in step.notes.summary
    before = rec.steps[rec.steps.index(step) - 1].program.forward
    assert step.program.forward.python() == before.python()


def test_after_autodiff_it_is_refused_with_the_order_to_use_and_earlier_steps_kept():
    model, _ = _pair(LeNet)
    j = thunderlab.jit(model, pipeline="dce,cse,autodiff,channels-last,claim,del")
    with pytest.raises(Exception, match="before 'autodiff'"):
        j(torch.randn(2, 3, 32, 32, requires_grad=True))
    rec = thunderlab.records()[-1]
    failed = _step(rec, "channels-last")
    assert failed.error and "before 'autodiff'" in failed.error
    assert _step(rec, "autodiff").program.backward is not None



def test_by_default_it_times_both_layouts_and_keeps_the_faster_without_touching_the_random_stream():
    model, ref = _pair(Dense)
    x = torch.randn(2, 3, 16, 16, requires_grad=True)
    j = thunderlab.jit(model, pipeline=PIPELINE.replace("{when=always}", ""))
    torch.manual_seed(5)
    out = j(x)
    after_compile = torch.rand(3)
    torch.manual_seed(5)
    ref(x)
    assert torch.equal(after_compile, torch.rand(3))  # the timing runs drew nothing the caller sees
    rec = thunderlab.last_record(j)
    notes = _step(rec, "channels-last").notes
    assert notes["when"] == "faster" and notes["nchw_ms"] > 0 and notes["nhwc_ms"] > 0
    converted = notes["converted"] == 1
    assert converted == (notes["nhwc_ms"] <= notes["nchw_ms"]), notes
    assert ("ms a step, NCHW" in notes.summary) if converted else notes.summary.startswith("kept NCHW")
    calls = [b.sym.name for b in _step(rec, "channels-last").program.forward.bound_symbols]
    assert ("contiguous" in calls) == converted
    for o, r in zip(out, ref(x)):
        torch.testing.assert_close(o, r, rtol=1e-4, atol=1e-5)


def test_a_second_run_converts_nothing_again_and_a_bad_option_names_the_valid_ones():
    model, _ = _pair(Dense)
    j = thunderlab.jit(model, pipeline="channels-last{when=always},channels-last{when=always}")
    j(torch.randn(2, 3, 16, 16))
    rec = thunderlab.last_record(j)
    assert rec.steps[-1].program.forward is rec.steps[-2].program.forward  # the second run changed nothing
    assert rec.steps[-1].notes.summary.startswith("nothing to convert")
    first = rec.steps[-2].notes
    assert first["outputs_in_callers_layout"] == 2 and "2 4-D outputs returned in the caller's layout" in first.summary
    calls = [b.sym.name for b in rec.steps[-1].program.forward.bound_symbols]
    assert calls.count("contiguous") == 1 and calls.count("layout_like") == 2
    with pytest.raises(Exception, match="faster, always"):
        thunderlab.jit(model, pipeline="channels-last{when=sometimes}")(torch.randn(2, 3, 32, 32))


def test_distributed_pipelines_decide_without_timing_so_every_process_compiles_the_same_program():
    from thunderlab.distributed import _with_ddp
    from thunderlab.distributed.fsdp import with_passes
    from thunderlab.passes.layout import untimed

    assert untimed(thunderlab.DEFAULT_PIPELINE) == thunderlab.DEFAULT_PIPELINE.replace(
        "channels-last", "channels-last{when=always}")
    assert untimed("dce,-channels-last{when=faster},autodiff") == "dce,-channels-last{when=always},autodiff"
    assert untimed("dce,autodiff") == "dce,autodiff"
    ddp = _with_ddp(untimed(thunderlab.DEFAULT_PIPELINE), 25.0)
    assert "channels-last{when=always},autodiff" in ddp and "ddp{bucket_mb=25}" in ddp
    fsdp = with_passes(untimed(thunderlab.DEFAULT_PIPELINE), ["fsdp{level=3}"], "fsdp")
    assert "channels-last{when=always}" in fsdp


def test_bf16_autocast_training_is_as_close_to_float64_as_eager():
    """Under CPU autocast (bfloat16) the converted program's gradients are as far from the float64 gradients as
    eager's own bfloat16 ones: the layout changes the order of sums, not the precision."""
    import copy

    torch.manual_seed(0)
    base = LeNet()
    x = torch.randn(4, 3, 32, 32)

    def grads(model, fn, inp):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = fn(inp)
        out.float().square().mean().backward()
        return torch.cat([p.grad.flatten() for p in model.parameters()])

    exact = copy.deepcopy(base).double()
    exact(x.double()).square().mean().backward()
    want = torch.cat([p.grad.flatten() for p in exact.parameters()])
    eager = copy.deepcopy(base)
    compiled = copy.deepcopy(base)
    j = thunderlab.jit(compiled, pipeline=PIPELINE)
    got = grads(compiled, j, x)
    assert "contiguous" in [b.sym.name for b in thunderlab.last_record(j).program.forward.bound_symbols]

    def distance(g):
        return ((g.double() - want).norm() / want.norm()).item()

    assert distance(got) <= 1.5 * distance(grads(eager, eager, x)) + 1e-6


def test_a_program_timed_once_is_decided_from_its_kept_times_here_and_in_a_later_process(monkeypatch, tmp_path):
    from thunderlab.core import files
    from thunderlab.passes import layout

    monkeypatch.setattr(files, "cache_folder", lambda name: tmp_path / name)  # a cache folder of this test's own
    monkeypatch.setattr(layout, "_TIMES", {})
    timed = []
    seconds = layout._seconds
    monkeypatch.setattr(layout, "_seconds", lambda trace, inputs: timed.append(1) or seconds(trace, inputs))
    pipeline = PIPELINE.replace("{when=always}", "")
    x = torch.randn(2, 3, 16, 16, requires_grad=True)

    def compile_once():
        model, ref = _pair(Dense)
        j = thunderlab.jit(model, pipeline=pipeline)
        for o, r in zip(j(x), ref(x)):
            torch.testing.assert_close(o, r, rtol=1e-4, atol=1e-5)
        return _step(thunderlab.last_record(j), "channels-last").notes

    first = compile_once()
    assert len(timed) == 2 and not first.get("recalled")  # both layouts timed, the times kept
    [kept] = (tmp_path / "thunderlab_layout").iterdir()
    assert json.loads(kept.read_text()) == {"nchw_ms": first["nchw_ms"], "nhwc_ms": first["nhwc_ms"]}
    again = compile_once()  # the same program compiled again in this process: nothing runs
    assert len(timed) == 2 and again["recalled"] and again["converted"] == first["converted"]
    assert "times an earlier compile of this program measured" in again.summary
    monkeypatch.setattr(layout, "_TIMES", {})  # a later process: only the file is left
    later = compile_once()
    assert len(timed) == 2 and later["recalled"] and (later["nchw_ms"], later["nhwc_ms"]) == (first["nchw_ms"],
                                                                                             first["nhwc_ms"])
    kept.write_text("{not json")  # a damaged file is timed again, and replaced
    monkeypatch.setattr(layout, "_TIMES", {})
    assert not compile_once().get("recalled") and len(timed) == 4
    assert set(json.loads(kept.read_text())) == {"nchw_ms", "nhwc_ms"}
    threads = torch.get_num_threads()  # another thread count is another measurement
    try:
        torch.set_num_threads(threads + 1)
        assert not compile_once().get("recalled") and len(timed) == 6
    finally:
        torch.set_num_threads(threads)
