"""channels-last: run a program's 2-D convolutions on CPU in the channels-last memory layout.

oneDNN's CPU convolutions, forward and backward, are faster on channels-last (NHWC) tensors than on
PyTorch's default NCHW. TorchInductor converts the inside of one compiled graph; a thunderlab program is
several regions and, in training, a forward and a backward, so the layout is chosen here, in the program,
before autodiff: every executor (torch included) then runs the same layout, and the activations the
forward saves for the backward are channels-last already, with no conversion between the two.

Whether NHWC pays depends on the network: oneDNN's kernels for its shapes, the layouts its batch norms and
paddings return, the kernels Inductor writes for them. On the model zoo's CNNs it makes ResNet's, RegNet's and
ConvNeXt's training steps faster and EfficientNet's slower (``benchmarks/results/zoo_cnn_channels_last.json``;
torch.compile, which always converts on CPU, is 1.3x eager's time on EfficientNet's). So with ``when=faster``,
the default, the pass times the program both ways before it decides: one warm-up and up to five timed runs of
each (fewer where a step is slow, so that the timed runs take about a second), with the torch executor, forward
and (where an input needs grad) thunderlab's backward, on random inputs of the traced shapes, and it keeps
channels-last when its fastest run is not slower. The notes keep both times. The two times are kept too, by the
program's printed text, which inputs need grad, the thread count and ``code_identity`` (torch, thunderlab, the CPU),
in this process and beside TorchInductor's cache (``thunderlab_layout``): a later compile of the same program, here
or in a later process, decides from them without running anything (a few hundred milliseconds for a network the
size of MobileNet v2; the notes say the times were recalled).
``when=always`` converts without timing. A program with a collective is not run (it would talk to the other
processes outside their program) and keeps NCHW.

The pass converts each convolution's input that is not channels-last yet with
``ltorch.contiguous(x, memory_format=torch.channels_last)`` (eager keeps the layout through pointwise
ops, batch norm, pooling and further convolutions, so one conversion at the network's input is the usual
result), turns ``view`` calls on tensors computed from converted ones into ``reshape`` (a view of an NHWC
tensor as NCHW-ordered sizes may be impossible; reshape copies where it must), and returns every 4-D tensor
computed from converted ones in the layout of the tensor the caller passed (``ltorch.layout_like``): contiguous
for a contiguous input, channels-last for a channels-last one, as eager returns them.
"""
from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass

import torch

from thunderlab.core.files import code_identity, keep, kept
from thunderlab.core.notes import Notes
from thunderlab.core.program import Program
from thunderlab.core.proxies import ScalarInput, TensorProxy
from thunderlab.core.symbols import BoundSymbol, tree_flatten, tree_map
from thunderlab.core.trace import Trace
from thunderlab.ops import conversion, prims, views

from .base import Pass, PipelineError, register_pass


def _convolved(b: BoundSymbol) -> TensorProxy | None:
    """The input of a top-level call that a 2-D CPU convolution (not transposed) reads directly, else None."""
    inputs = {p.name for p in b.inputs}
    stack = [b]
    while stack:
        s = stack.pop()
        if s.sym is prims.convolution:
            a, transposed = s.args[0], s.params.transposed
            if (isinstance(a, TensorProxy) and a.name in inputs and a.ndim == 4 and not transposed
                    and torch.device(a.device).type == "cpu" and a.dtype.is_floating_point):
                return next(p for p in b.inputs if p.name == a.name)
            return None
        stack.extend(s.subsymbols)
    return None


def channels_last_trace(trace: Trace) -> Trace:
    if not any(_convolved(b) is not None for b in trace.bound_symbols):
        return trace
    work = trace.derive(bound_symbols=[])
    nhwc: set[str] = set()  # values computed from channels-last ones (eager keeps most of them channels-last)
    converted: dict[str, TensorProxy] = {}
    sources: list = []  # what each conversion converts, in order
    out: list[BoundSymbol] = []
    for b in trace.bound_symbols:
        if b.sym is conversion.contiguous and b.params.memory_format == torch.channels_last:
            nhwc.update(p.name for p in b.outputs)  # converted already (a second run of the pass)
            sources.append(b.args[0])
        a = _convolved(b)
        if a is not None and a.name not in nhwc:
            if a.name not in converted:
                with work.active(), work.source(b.source):
                    converted[a.name] = conversion.contiguous(a, memory_format=torch.channels_last)
                sources.append(a)
                out.append(work.bound_symbols.pop())
                nhwc.add(converted[a.name].name)
            b = b.swap({a.name: converted[a.name]})
        if b.sym is views.view and any(p.name in nhwc for p in b.inputs):
            b = b.replace(sym=views.reshape)
        if any(p.name in nhwc for p in b.inputs) and b.sym is not conversion.layout_like:
            nhwc.update(p.name for p in b.outputs)
        out.append(b)
    back: dict[str, TensorProxy] = {}
    inputs = {p.name: p for p in trace.tensor_inputs()}
    # the layout of the caller's tensor the network converts first is the layout eager returns
    given = next((inputs[a.name] for a in sources if isinstance(a, TensorProxy) and a.name in inputs), None)
    for p in trace.output_proxies():
        if p.name in nhwc and p.ndim == 4 and p.name not in back:
            with work.active():
                back[p.name] = conversion.layout_like(p, given) if given is not None else conversion.contiguous(p)
            out.append(work.bound_symbols.pop())
    if not converted and not back and all(x is y for x, y in zip(out, trace.bound_symbols)):
        return trace  # nothing to convert (every convolution reads channels-last values already)
    output = tree_map(lambda v: back.get(v.name, v) if isinstance(v, TensorProxy) else v, trace.output)
    return work.derive(bound_symbols=out, output=output)  # work knows the names made here


WHEN = ("faster", "always")
_RECALLED = "; times an earlier compile of this program measured"
ROUNDS = 5  # timed runs of each layout (after one warm-up run), "faster" compares their fastest
BUDGET_S = 1.0  # fewer runs where a step is slow: the timed runs of both layouts take about this long
_LAST = threading.local()  # this thread's last decision, for describe (a pass is a frozen value)


def _random_inputs(trace: Trace) -> list:
    """Inputs of the traced shapes: floats uniform in [0, 1) (no NaN from a variance), integers zero (a valid index)."""
    out = []
    for p in trace.inputs:
        if isinstance(p, TensorProxy):
            if p.dtype.is_floating_point or p.dtype.is_complex:
                out.append(torch.rand(p.shape, dtype=p.dtype, device=p.device).requires_grad_(p.requires_grad))
            else:
                out.append(torch.zeros(p.shape, dtype=p.dtype, device=p.device))
        else:
            out.append(p.value if isinstance(p, ScalarInput) else p)
    return out


def _seconds(trace: Trace, inputs: list) -> float:
    """The fastest of up to ``ROUNDS`` timed calls of ``trace`` run by torch (after one warm-up call): forward and,
    where an input needs grad, thunderlab's backward of it (autodiff's, before remat and fusion)."""
    from thunderlab.core import amp
    from thunderlab.executors.base import bind

    from .autodiff import split

    training = split(trace)
    forward = bind(trace if training is None else training.forward)  # as the runtime binds a program's traces
    if training is None:
        def run(args):
            with torch.no_grad(), amp.off():
                forward(*args)
    else:
        backward = bind(training.backward, packed=True)
        proxies = {p.name: p for p in tree_flatten(training.forward.output[0]) if isinstance(p, TensorProxy)}
        grads = [torch.ones(proxies[n].shape, dtype=proxies[n].dtype, device=proxies[n].device)
                 for n in training.training.grad_of]

        def run(args):  # the forward, then the backward on what it saved and gradients of ones
            with torch.no_grad(), amp.off():
                _, saved = forward(*args)
                backward([*saved, *grads])

    def once() -> float:
        args = [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
                for a in inputs]
        t0 = time.perf_counter()
        run(args)
        return time.perf_counter() - t0

    first = once()  # warms oneDNN's kernel caches and is not counted
    # a big network's step takes seconds on a CPU: fewer runs, so the decision costs about BUDGET_S at most
    rounds = max(1, min(ROUNDS, int(BUDGET_S / (2 * first))))
    times = [once() for _ in range(rounds)]
    return min(times)  # the least disturbed run: noise on a shared machine only adds time


_TIMES: dict[str, dict] = {}  # by ``_key``: the two times a compile in this process measured or read
_TIMES_LOCK = threading.Lock()
_FOLDER = "thunderlab_layout"  # beside Inductor's cache (``core.files.cache_folder``)


def _key(trace: Trace) -> str:
    """What the two times depend on: the program (its printed text, with every value's shape and dtype), which
    inputs need grad (whether the backward runs), the thread count, and ``code_identity``."""
    grads = "".join("1" if isinstance(p, TensorProxy) and p.requires_grad else "0" for p in trace.inputs)
    text = "\0".join((trace.python(source=False), grads, str(torch.get_num_threads()), code_identity()))
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def _recalled(key: str) -> dict | None:
    """The times kept for ``key``, in this process or beside Inductor's cache, or None."""
    with _TIMES_LOCK:
        known = _TIMES.get(key)
    if known is not None:
        return known
    known = kept(_FOLDER, key)
    if not (isinstance(known, dict) and all(isinstance(known.get(k), (int, float)) for k in ("nchw_ms", "nhwc_ms"))):
        return None  # none kept, or a file that cannot be read: time again
    with _TIMES_LOCK:
        _TIMES[key] = known
    return known


def _keep(key: str, times: dict) -> None:
    with _TIMES_LOCK:
        _TIMES[key] = times
    keep(_FOLDER, key, times)  # where the folder cannot be written, this process still remembers


def untimed(pipeline: str) -> str:
    """``pipeline`` with each channels-last pass set to ``when=always``: the same program in every process of a
    distributed job (each would time its own runs, and two could decide apart)."""
    from .base import Pipeline

    specs = Pipeline.parse(pipeline).specs
    return ",".join("-" * (not s.enabled) + "channels-last{when=always}" if s.name == ChannelsLast.name else str(s)
                    for s in specs)


@register_pass
@dataclass(frozen=True)
class ChannelsLast(Pass):
    """Run 2-D CPU convolutions in the channels-last memory layout, forward and backward.

    Before autodiff, each convolution input not channels-last yet is converted once; values computed from
    it stay channels-last in eager, so the saved activations and the backward's convolutions are too.
    ``when=faster`` (default) keeps the change only where a timed run of each version (torch, forward and
    backward) says channels-last is not slower; ``when=always`` converts without timing.
    Returned 4-D tensors come back in the layout of the caller's input, as eager returns them. For example::

        def forward(x, w1, w2):                    def forward(x, w1, w2):
            t0 = ltorch.conv2d(x, w1)       ->         t3 = ltorch.contiguous(x, memory_format=torch.channels_last)
            t1 = ltorch.relu(t0)                       t0 = ltorch.conv2d(t3, w1)
            t2 = ltorch.conv2d(t1, w2)                 t1 = ltorch.relu(t0)
            return t2                                  t2 = ltorch.conv2d(t1, w2)
                                                       t4 = ltorch.layout_like(t2, x)
                                                       return t4
    """

    name = "channels-last"
    when: str = "faster"

    def __post_init__(self):
        if self.when not in WHEN:
            raise PipelineError(f"channels-last: when={self.when!r} is not one of {', '.join(WHEN)}")

    def __call__(self, program: Program) -> Program:
        if program.backward is not None:
            raise PipelineError("channels-last changes the forward before autodiff splits it; put 'channels-last' "
                                "before 'autodiff' in the pipeline")
        _LAST.measured = measured = {}
        converted = channels_last_trace(program.forward)
        if converted is program.forward or self.when == "always":
            return program.with_traces({"forward": converted})
        talks = next((b.sym.qualname for b in program.forward.bound_symbols if b.sym.communicates), None)
        if talks is not None:  # a run here would exchange data with the other processes, outside their program
            measured["error"] = f"{talks} is a collective: the program is not run to be timed"
            return program
        key = _key(program.forward)
        known = _recalled(key)
        if known is not None:  # timed by an earlier compile of this program, here or in an earlier process
            measured.update(nchw_ms=known["nchw_ms"], nhwc_ms=known["nhwc_ms"], recalled=True)
            return program.with_traces({"forward": converted}) if known["nhwc_ms"] <= known["nchw_ms"] else program
        try:  # the generators are restored afterwards: the timing runs draw no number the caller would see
            with torch.random.fork_rng(devices=[]):
                inputs = _random_inputs(program.forward)
                nchw, nhwc = _seconds(program.forward, inputs), _seconds(converted, inputs)
        except Exception as e:  # noqa: BLE001 - a program that cannot run on made-up inputs keeps eager's layout
            measured["error"] = f"{type(e).__name__}: {str(e)[:200]}"
            return program
        measured.update(nchw_ms=round(nchw * 1e3, 3), nhwc_ms=round(nhwc * 1e3, 3))
        _keep(key, {"nchw_ms": measured["nchw_ms"], "nhwc_ms": measured["nhwc_ms"]})
        return program.with_traces({"forward": converted}) if nhwc <= nchw else program

    def describe(self, before: Program, after: Program) -> Notes:
        old = {id(b) for b in before.forward.bound_symbols}
        made = [b for b in after.forward.bound_symbols  # the calls this run added (conversions, view -> reshape)
                if id(b) not in old and b.sym in (conversion.contiguous, conversion.layout_like, views.reshape)]
        to_nhwc = sum(1 for b in made if b.sym is conversion.contiguous and b.kwargs.get("memory_format") is not None)
        back = sum(1 for b in made if b.sym in (conversion.contiguous, conversion.layout_like)) - to_nhwc
        reshapes = sum(1 for b in made if b.sym is views.reshape)
        convs = sum(1 for b in after.forward.bound_symbols if _convolved(b) is not None)
        if not convs:
            return Notes("no 2-D CPU convolution: nothing changed", {"convolutions": 0, "converted": 0})
        measured = dict(getattr(_LAST, "measured", {}))
        facts = {"convolutions": convs, "when": self.when, **measured}
        if "error" in measured:
            return Notes(f"kept NCHW: not timed ({measured['error'][:100]})",
                         {**facts, "converted": 0})
        if not made and not measured:
            return Notes("nothing to convert: every convolution reads channels-last values already",
                         {**facts, "converted": 0})
        recalled = _RECALLED if measured.get("recalled") else ""
        if not made:
            return Notes(f"kept NCHW: a step took {measured['nhwc_ms']:.3g} ms in channels-last, "
                         f"{measured['nchw_ms']:.3g} ms in NCHW{recalled}",
                         {**facts, "converted": 0})
        parts = [f"{to_nhwc} input{'s' if to_nhwc != 1 else ''} converted"]
        if back:
            parts.append(f"{back} 4-D output{'s' if back != 1 else ''} returned in the caller's layout")
        if reshapes:
            parts.append(f"{reshapes} view{'s' if reshapes != 1 else ''} turned into reshape")
        timing = (f" ({measured['nhwc_ms']:.3g} ms a step, NCHW {measured['nchw_ms']:.3g} ms{recalled})"
                  if measured else "")
        return Notes(f"{convs} convolution{'s' if convs != 1 else ''} run channels-last: {', '.join(parts)}{timing}",
                     {**facts, "converted": to_nhwc, "outputs_in_callers_layout": back, "views_to_reshape": reshapes})
