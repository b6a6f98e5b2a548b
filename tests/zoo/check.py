"""Run one zoo model in one mode through thunderlab and compare it with eager PyTorch.

Modes:
  jit      inference through ``thunderlab.jit``;
  compile  inference through ``torch.compile(backend="thunderlab")``;
  train    model.train(): loss, outputs, every parameter's gradient and every buffer equal to eager;
  shapes   inference through ``thunderlab.jit`` on one batch, then on a second batch size and length;
  train-cpp  train, on a third step, with every fusion region pinned to its second kernel (Inductor's module with
           its C++ wrapper, the version ``inductor-cpp``), tiered, with THUNDERLAB_CPP_WRAPPER=1.
A result is "pass", "wrong" (ran, but a value differs from eager) or "error" (raised where eager ran).
"""
from __future__ import annotations

import copy
import os
import time
import traceback
from dataclasses import dataclass
from unittest import mock

import torch

import thunderlab

from .models import Entry, inputs, pair

MODES = ("jit", "compile", "train", "shapes")
ALL_MODES = (*MODES, "train-cpp")  # train-cpp compiles a C++ wrapper per region (a minute, cold): not in MODES
# options every check passes to thunderlab.jit: {"tiered": False} checks the fused kernels themselves, built
# before the first call, where a tiered first call runs the torch executor while they compile
JIT_OPTIONS: dict = {}
RTOL, ATOL = 1e-4, 1e-5  # float32: a different order of summation, not a different result
GRAD_ATOL = 1e-4
# a gradient sums many terms: float32 reassociation moves it by a few ulps of its largest terms, so its absolute
# tolerance grows with the gradient's size (MobileNetV2's stem gradients reach 1e3, where 1e-4 is under one ulp)
GRAD_SCALE = 1e-6
# past those tolerances a gradient must be within this many times eager's float32 distance to float64 (see
# _closer_than_eager)
FP64_MULTIPLIER = 3.0


@dataclass
class Result:
    status: str  # pass | wrong | error
    detail: str = ""
    first_call_s: float | None = None  # the first compiled call (capture, passes and run)


class Mismatch(AssertionError):
    pass


def leaves(out) -> list[torch.Tensor]:
    """The tensors of a model output (a ModelOutput, tuple or tensor), in order."""
    if isinstance(out, torch.Tensor):
        return [out]
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in leaves(o)]
    return []


def close(what: str, got, want, atol: float = ATOL) -> None:
    try:
        torch.testing.assert_close(got, want, rtol=RTOL, atol=atol)
    except AssertionError as e:
        raise Mismatch(f"{what}: {str(e).strip().splitlines()[0]} {_worst(got, want)}") from None


def _worst(got, want) -> str:
    if isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor) and got.shape == want.shape:
        return f"(max |err| {(got.double() - want.double()).abs().max().item():.3g})"
    return ""


def compare_outputs(got, want, prefix: str = "output") -> None:
    g, w = leaves(got), leaves(want)
    if len(g) != len(w):
        raise Mismatch(f"{prefix}: {len(g)} tensors, eager gives {len(w)}")
    for i, (a, b) in enumerate(zip(g, w)):
        close(f"{prefix} {i}", a.detach(), b.detach())


def run(entry: Entry, attn: str | None, mode: str) -> Result:
    """Run ``entry`` in ``mode``; never raises for the model's sake (errors become results)."""
    torch._dynamo.reset()
    first = None
    try:
        model, ref = pair(entry, attn)
        first = _MODES[mode](entry, model, ref)
        return Result("pass", "", first)
    except Mismatch as e:
        return Result("wrong", str(e), first)
    except Exception as e:  # noqa: BLE001 - any failure of the compiled model is the finding
        tb = traceback.extract_tb(e.__traceback__)
        where = next((f"{f.filename.split('site-packages/')[-1]}:{f.lineno}" for f in reversed(tb)
                      if "thunderlab" in f.filename), "")
        return Result("error", f"{type(e).__name__}: {str(e)[:400]} [{where}]", first)


def _timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def _inference(entry, model, ref, compiled):
    x = inputs(entry, model)
    with torch.no_grad():
        want = ref(**x)
        got, first = _timed(compiled, **x)
    compare_outputs(got, want)
    return first


def _jit(entry, model, ref):
    return _inference(entry, model, ref, thunderlab.jit(model, **JIT_OPTIONS))


def _compile(entry, model, ref):
    return _inference(entry, model, ref, torch.compile(model, backend="thunderlab"))


def _train(entry, model, ref):
    model.train(), ref.train()
    x = inputs(entry, model)
    compiled = thunderlab.jit(model, **JIT_OPTIONS)  # kept until its backward ran: that is the one checked
    got, first = _timed(compiled, **x)
    got.loss.backward()
    want = ref(**x)
    want.loss.backward()
    _compare_training(entry, model, ref, x, got, want)
    return first


def _train_cpp(entry, model, ref):
    model.train(), ref.train()
    x = inputs(entry, model)
    # read when the program is claimed and when a region is bound, at their first calls
    with mock.patch.dict(os.environ, THUNDERLAB_CPP_WRAPPER="1", THUNDERLAB_EXECUTORS="inductor+torch"):
        compiled = thunderlab.jit(model)
        first = None
        for _ in range(2):  # a second call may compile again (transformers' loss sets config.problem_type)
            got, t = _timed(compiled, **x)
            got.loss.backward()
            first = first if first is not None else t
            ref(**x).loss.backward()  # as many steps: batch norm's running statistics move each step
    pinned = 0
    for record in compiled.records:
        live = thunderlab.session(record)
        if not live.wait(1800):
            raise TimeoutError("the regions' kernels did not compile in 30 minutes")
        for name, region in live.regions.items():
            if "inductor-cpp" not in region.versions:
                raise Mismatch(f"region {name} has no inductor-cpp kernel ({region.error or region.race_summary()})")
            region.pin("inductor-cpp")
            pinned += 1
    if not pinned:
        raise Mismatch("no fusion region to pin")
    model.zero_grad(set_to_none=True), ref.zero_grad(set_to_none=True)
    got = compiled(**x)
    got.loss.backward()
    want = ref(**x)
    want.loss.backward()
    _compare_training(entry, model, ref, x, got, want)
    return first


def _compare_training(entry, model, ref, x, got, want) -> None:
    """A training step's loss, outputs, gradients and buffers against eager's (``got`` and ``want`` its outputs,
    after their backward)."""
    close("loss", got.loss.detach(), want.loss.detach())
    reference = None
    try:
        compare_outputs(got, want)
    except Mismatch:  # summed in another order (convolutions in channels-last): judged by float64, as gradients
        reference = _float64_reference(entry, ref, x)
        for i, (a, b, exact) in enumerate(zip(leaves(got), leaves(want), reference.outputs)):
            try:
                close(f"output {i}", a.detach(), b.detach())
            except Mismatch:
                _closer_than_eager(f"output {i}", a.detach(), b.detach(), exact, reference.other_outputs[i])
    params = dict(ref.named_parameters())
    for name, p in model.named_parameters():
        q = params[name]
        if (p.grad is None) != (q.grad is None):
            raise Mismatch(f"grad of {name}: {'none' if p.grad is None else 'present'}, eager's is "
                           f"{'none' if q.grad is None else 'present'}")
        if p.grad is not None:
            try:
                close(f"grad of {name}", p.grad, q.grad, atol=max(GRAD_ATOL, GRAD_SCALE * q.grad.abs().max().item()))
            except Mismatch:
                if reference is None:
                    reference = _float64_reference(entry, ref, x)
                _closer_than_eager(f"grad of {name}", p.grad, q.grad, reference.grads[name],
                                   reference.other_grads.get(name))
    buffers = dict(ref.named_buffers())
    for name, b in model.named_buffers():
        close(f"buffer {name}", b, buffers[name])


@dataclass
class Reference:
    """The yardsticks for float32 rounding: eager's outputs and parameters' gradients in float64, and, for a model
    with image inputs, eager float32's in the other memory format (channels-last)."""
    outputs: list[torch.Tensor]
    grads: dict[str, torch.Tensor]
    other_outputs: list[torch.Tensor | None]
    other_grads: dict[str, torch.Tensor]


def _float64_reference(entry, ref, x) -> Reference:
    """Eager's training step in float64 (on a copy of ``ref``) and, where an input is an image batch, eager's
    float32 step in channels-last (``model.to(memory_format=torch.channels_last)``, PyTorch's documented way to
    run a CNN in that layout): its convolutions sum in another order, and their rounding is as right as the
    contiguous one's."""
    def step(dtype, memory_format):
        m = copy.deepcopy(ref).to(dtype=dtype, memory_format=memory_format)
        m.zero_grad(set_to_none=True)
        moved = {k: _moved(v, dtype, memory_format) for k, v in x.items()}
        out = m(**moved)
        out.loss.backward()
        return [t.detach() for t in leaves(out)], {n: p.grad for n, p in m.named_parameters()}

    outputs, grads = step(torch.float64, torch.preserve_format)
    other_outputs, other_grads = [None] * len(outputs), {}
    if any(isinstance(v, torch.Tensor) and v.is_floating_point() and v.dim() == 4 for v in x.values()):
        other_outputs, other_grads = step(torch.float32, torch.channels_last)
    return Reference(outputs, grads, other_outputs, other_grads)


def _moved(v, dtype, memory_format):
    if not (isinstance(v, torch.Tensor) and v.is_floating_point()):
        return v
    v = v.to(dtype)
    return v.contiguous(memory_format=memory_format) if v.dim() == 4 and memory_format != torch.preserve_format else v


def _closer_than_eager(what: str, got, want, exact, other=None, multiplier: float = FP64_MULTIPLIER) -> None:
    """A gradient or training output summed in another order than eager's (a convolution's in channels-last, a
    fused reduction) may differ from eager's float32 by more than a few ulps and still be as right: it passes when
    its distance to the float64 result (root mean square) is within ``multiplier`` times eager's own float32
    distance, the test PyTorch's benchmark suites apply to compiled training. ``other``, where given, is eager's
    float32 result in the other memory format; the yardstick is the larger of eager's two distances (a
    channels-last program is as right as eager channels-last)."""
    err = _rms(got, exact)
    eager_err = _rms(want, exact)
    other_err = _rms(other, exact) if other is not None else 0.0
    if err > multiplier * max(eager_err, other_err) + 1e-7:
        also = f", in channels-last {other_err:.3g}" if other is not None else ""
        raise Mismatch(f"{what}: {err:.3g} from the float64 result (root mean square), eager float32 is "
                       f"{eager_err:.3g}{also} {_worst(got, want)}")


def _rms(t, exact) -> float:
    return (t.double() - exact).square().mean().sqrt().item()


def _shapes(entry, model, ref):
    compiled = thunderlab.jit(model, **JIT_OPTIONS)
    first = None
    for batch, length in ((2, 8), (3, 12)):
        x = inputs(entry, model, batch=batch, length=length)
        with torch.no_grad():
            want = ref(**x)
            got, t = _timed(compiled, **x)
        first = t if first is None else first
        compare_outputs(got, want, prefix=f"batch {batch} length {length}: output")
    return first


_MODES = {"jit": _jit, "compile": _compile, "train": _train, "shapes": _shapes, "train-cpp": _train_cpp}
