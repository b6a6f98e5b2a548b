"""autodiff: split a forward trace into forward (returning saved values) and backward traces."""
from __future__ import annotations

from dataclasses import dataclass

from thunderlab.core.notes import Notes, byte_text
from thunderlab.core.program import Program, Training
from thunderlab.core.proxies import TensorProxy
from thunderlab.core.symbols import BoundSymbol, Tag, proxies_in, tree_flatten
from thunderlab.core.trace import Trace, TraceError
from thunderlab.ops import prims
from thunderlab.ops.rules import RESIDUALS, VJP, draws
from thunderlab.ops.views import basic_index
from thunderlab.ops.vjp import eager_rule, keeping_state_variant, needs_state_to_differentiate

from .base import Pass, register_pass
from .dce import dce_trace


def _differentiable(p) -> bool:
    return isinstance(p, TensorProxy) and (p.dtype.is_floating_point or p.dtype.is_complex)


def _needs_grad(p) -> bool:
    """Whether a value made from one that needs a gradient needs one too: not when it was made with
    grad off (a no_grad region, ``detach``), which its ``requires_grad`` records as eager's does."""
    return _differentiable(p) and p.requires_grad


def _output_grads(b: BoundSymbol, gs: list):
    """The gradient argument of ``b``'s rule: one proxy, or a tuple (None where an output has none)."""
    return gs[0] if isinstance(b.output, TensorProxy) else tuple(gs)


def _alike(p: TensorProxy) -> tuple:
    return ("tensor", p.shape, p.dtype, p.device, p.requires_grad)


def _declines(b: BoundSymbol, memo: dict | None = None) -> bool:
    """Whether ``b`` has no rule, or a rule that returns NotImplemented for these arguments.

    A rule declines by its arguments (a dtype, dropout, a tensor exponent); asking it in a
    scratch trace tells before the forward is fixed whether the decomposition's intermediates
    will be needed, so the forward computes them (backward cannot recompute a random one).
    A rule's answer depends only on its arguments' metadata and values, so ``memo`` keeps it
    per kind of call (a model's repeated layers ask once).
    """
    rule = VJP.get(b.sym.qualname)
    if rule is None or (b.subsymbols and Tag.DECOMPOSE in b.sym.tags):  # its decomposition is what is differentiated
        return True
    key = b.call_key(_alike)
    if memo is not None and key in memo:
        return memo[key]
    scratch = Trace("probe")
    with scratch.active():
        gs = [scratch.proxy(p.shape, p.dtype, p.device) if _differentiable(p) else None for p in b.outputs]
        declined = rule(b, _output_grads(b, gs)) is NotImplemented
    if memo is not None:
        memo[key] = declined
    return declined


def _propagate(bsyms, needs: set[str]) -> set[str]:
    """``needs`` plus the differentiable outputs of ``bsyms`` that depend on it."""
    needs = set(needs)
    for b in bsyms:
        if any(p.name in needs for p in b.inputs):
            needs.update(p.name for p in b.outputs if _needs_grad(p))
    return needs


def _expand(bsyms, needs: set[str], memo: dict | None = None) -> list[BoundSymbol]:
    """Replace calls that need a gradient but have no rule (or a declining one) by their decompositions."""
    memo = {} if memo is None else memo
    out = []
    for b in bsyms:
        wants = any(p.name in needs for p in b.inputs)
        if wants and b.subsymbols and _declines(b, memo):
            out.extend(_expand(b.subsymbols, needs, memo))
            continue
        if wants:
            needs.update(p.name for p in b.outputs if _needs_grad(p))
        out.append(b)
    return out


def _with_grads(bw: Trace, b: BoundSymbol, grads: dict) -> list:
    g = _output_grads(b, [grads.get(p.name) for p in b.outputs])
    rule = VJP.get(b.sym.qualname)
    with bw.deriving(b):
        pairs = rule(b, g) if rule is not None else NotImplemented
        if pairs is NotImplemented:
            if b.subsymbols:
                return NotImplemented
            pairs = eager_rule(b, g)
    return pairs


def _one_dim_slice(key, shape) -> tuple[int, int, int] | None:
    """``(dim, start, stop)`` when indexing a tensor of ``shape`` with ``key`` takes a contiguous part of one
    dimension and the whole of every other (``x[..., 2:5]``, ``x[:, :8]``); None for any other key."""
    key = key if isinstance(key, tuple) else (key,)
    if not all(isinstance(k, slice) or k is Ellipsis for k in key):
        return None
    try:
        _, starts, ends, steps = basic_index(key, shape)
    except (TraceError, TypeError):  # a key the forward's getitem took otherwise (symbolic bounds)
        return None
    cut = [(d, b, e) for d, (b, e) in enumerate(zip(starts, ends)) if (b, e) != (0, shape[d])]
    return cut[0] if len(cut) == 1 and all(st == 1 for st in steps) else None


class _Grads(dict):
    """Gradients by value name, summed when first read. The gradients that slices of one value contribute
    (``x[..., :8]``, ``x[..., 8:]``: a fused projection's outputs split apart) are put together with one ``cat``
    along their dimension, zeros filling what no slice took, instead of a zero tensor the size of ``x`` per slice
    and a sum of them; the values are the same, since the slices do not overlap."""

    def __init__(self, bw: Trace):
        super().__init__()
        self.bw = bw
        self.parts: dict[str, list] = {}  # name -> [(gradient, (dim, start, stop, part's gradient) or None, b)]

    def add(self, name: str, gp, piece, b: BoundSymbol) -> None:
        if name not in self.parts and dict.get(self, name) is not None:  # an output's own gradient comes first
            self.parts[name] = [(dict.pop(self, name), None, None)]
        self.parts.setdefault(name, []).append((gp, piece, b))

    def get(self, name, default=None):
        parts = self.parts.pop(name, None)
        if parts is not None:
            self[name] = self._sum(parts)
        return dict.get(self, name, default)

    def _sum(self, parts: list):
        pieces = [(pc, b) for _, pc, b in parts if pc is not None]
        spans = sorted((pc[1], pc[2]) for pc, _ in pieces)
        total = None
        if (len(pieces) >= 2 and len({pc[0] for pc, _ in pieces}) == 1
                and all(a[1] <= c[0] for a, c in zip(spans, spans[1:]))):
            dim, like = pieces[0][0][0], next(gp for gp, pc, _ in parts if pc is not None)
            with self.bw.deriving(pieces[-1][1]):
                chunks, at = [], 0
                for (_, start, stop, g), _ in sorted(pieces, key=lambda x: x[0][1]):
                    if start > at:
                        chunks.append(_zeros(like, dim, start - at))
                    chunks.append(g)
                    at = stop
                if at < like.shape[dim]:
                    chunks.append(_zeros(like, dim, like.shape[dim] - at))
                total = prims.cat(tuple(chunks), dim)
            parts = [pt for pt in parts if pt[1] is None]
        for gp, _, b in parts:
            if total is None:
                total = gp
                continue
            with self.bw.deriving(b):
                total = prims.add(total, gp)
        return total


def _zeros(like, dim: int, size: int):
    shape = tuple(size if d == dim else n for d, n in enumerate(like.shape))
    return prims.full(shape, 0.0, dtype=like.dtype, device=like.device)


def _slice_piece(b: BoundSymbol, p: TensorProxy, gp, grads: _Grads):
    """``(dim, start, stop, g)`` when ``b`` takes a one-dimension slice of ``p`` (see ``_one_dim_slice``) and
    ``gp``, its gradient for ``p``, is ``g`` (the slice's gradient) in zeros; None otherwise."""
    if (b.sym.qualname != "ltorch.getitem" or getattr(b.params.a, "name", None) != p.name
            or not isinstance(b.output, TensorProxy)):
        return None
    cut = _one_dim_slice(b.params.key, p.shape)
    g = dict.get(grads, b.output.name)
    if cut is None or g is None or g.dtype != gp.dtype or tuple(g.shape) != tuple(b.output.shape):
        return None
    return (*cut, g)


def _backprop(bw: Trace, bsyms, needs, grads) -> None:
    for b in reversed(bsyms):
        if not any(grads.get(p.name) is not None for p in b.outputs):
            continue
        if not any(p.name in needs for p in b.inputs):
            continue
        if b.side_effect and not b.outputs:
            continue
        pairs = _with_grads(bw, b, grads)
        if pairs is NotImplemented:  # the rule declined these arguments: go through the decomposition
            _backprop(bw, b.subsymbols, _propagate(b.subsymbols, needs), grads)
            continue
        for p, gp in pairs:
            if not isinstance(p, TensorProxy) or gp is None or p.name not in needs:
                continue
            if gp.shape != p.shape:
                raise ValueError(f"the derivative rule of {b.sym.qualname} gave a gradient of shape {list(gp.shape)} "
                                 f"for {p.name} of shape {list(p.shape)}")
            with bw.deriving(b):
                if gp.dtype != p.dtype:
                    gp = prims.convert_element_type(gp, p.dtype)
            grads.add(p.name, gp, _slice_piece(b, p, gp, grads), b)


def _with_residuals(work: Trace, bsyms, needs: set[str]) -> list[BoundSymbol]:
    """Swap calls that need a gradient for their variants that also return what backward needs.

    The variant keeps the call's id, source and output (its extra outputs are new values), so
    the forward reads as before with the statistics added; see ``thunderlab.ops.rules.RESIDUALS``.
    A random call that only PyTorch's autograd can differentiate becomes ``ltorch.call_keeping_state``,
    which also returns the generator's state before the call, for backward to replay it from.
    """
    needs = set(needs)
    out, writes = [], []
    for b in bsyms:
        wants = any(p.name in needs for p in b.inputs)
        make = RESIDUALS.get(b.sym.qualname) if wants and isinstance(b.output, TensorProxy) else None
        if make is None and wants and needs_state_to_differentiate(b) and draws(b):
            make = keeping_state_variant  # backward replays it from the generator's state
        if wants:
            needs.update(p.name for p in b.outputs if _needs_grad(p))
        if make is not None:
            start = len(work.bound_symbols)
            with work.active(), work.source(b.source):
                made = make(b)
            recorded = work.bound_symbols[start:]
            del work.bound_symbols[start:]
            if made is not NotImplemented and recorded and all(r.sym is prims.copy_ for r in recorded[1:]):
                v = recorded[0]
                out.append(v.replace(output=(b.output, *v.output[1:]), id=b.id))
                writes.extend((len(out), w) for w in recorded[1:])
                continue
        out.append(b)
    return _place_writes(out, writes)


def _place_writes(bsyms: list[BoundSymbol], writes: list[tuple[int, BoundSymbol]]) -> list[BoundSymbol]:
    """Put each write a residual variant made (``prims.copy_(new, buffer)``: batch norm's running statistics)
    at the end of the forward when no later call reads its target, so that it cuts no fusion region; where a
    later call reads it (one module called twice), right after the variant, as eager orders it."""
    if not writes:
        return bsyms
    at_end, inline = [], {}
    for pos, w in writes:
        target = w.inputs[1].name
        if any(target in (p.name for p in later.inputs) for later in bsyms[pos:]):
            inline.setdefault(pos, []).append(w)
        else:
            at_end.append(w)
    out = []
    for i, b in enumerate(bsyms, 1):
        out.append(b)
        out.extend(inline.get(i, ()))
    return out + at_end


def split(trace: Trace) -> Program | None:
    """The training program for ``trace`` (forward, backward and how they fit), or None when nothing needs grad."""
    needs = {p.name for p in trace.tensor_inputs() if p.requires_grad and _differentiable(p)}
    if not needs:
        return None
    # the residual variants record into a copy (never the input); its names carry on to fw and bw
    work = trace.derive(bound_symbols=[])
    fwd_bsyms = _with_residuals(work, _expand(trace.bound_symbols, set(needs)), needs)
    trace = work
    needs_all = _propagate(fwd_bsyms, needs)
    bw = trace.derive(name="backward", inputs=[], bound_symbols=[], output=None)
    grads = _Grads(bw)
    grad_inputs, grad_of = [], []
    seen = set()
    for p in trace.output_proxies():
        if p.name in needs_all and p.name not in seen:
            seen.add(p.name)
            gp = bw.proxy(p.shape, p.dtype, p.device, name=f"grad_{p.name}")
            grads[p.name] = gp
            grad_inputs.append(gp)
            grad_of.append(p.name)
    if not grad_of:  # no output depends on an input through values that need grad: nothing to differentiate
        return None
    with bw.active():
        _backprop(bw, fwd_bsyms, needs_all, grads)
        bw.output = tuple(grads.get(p.name) if p.name in needs else None for p in trace.tensor_inputs())
    # a rule computes the gradients of all its differentiable arguments; those of values that
    # need none (a buffer, a constant table) are dropped here, and with them what they would save
    bw.bound_symbols = dce_trace(bw).bound_symbols
    defined = {p.name for b in bw.bound_symbols for p in b.outputs} | {g.name for g in grad_inputs}
    saved, names = [], set()
    for v in [p for b in bw.bound_symbols for p in b.inputs] + [
        p for p in tree_flatten(bw.output) if isinstance(p, TensorProxy)
    ]:
        if v.name not in defined and v.name not in names:
            names.add(v.name)
            saved.append(v)
    bw.inputs = saved + grad_inputs
    fw = trace.derive(bound_symbols=fwd_bsyms, output=(trace.output, tuple(saved)))
    # one new set for both (a namespace may be shared with the trace it was derived from), shared as derive
    # shares one: the first of the two to add a name copies it
    fw._names = bw._names = fw._names | bw._names
    fw._names_shared = bw._names_shared = True
    return Program({"forward": fw, "backward": bw}, Training(saved=[p.name for p in saved], grad_of=grad_of))


@register_pass
@dataclass(frozen=True)
class Autodiff(Pass):
    """Differentiate: a forward trace that also returns what backward needs, and a backward trace.

    The result is a training program: ``Program.training`` names the values saved for the
    backward and the outputs whose gradients it takes. For ``x`` that requires grad::

        def forward(x):                     def forward(x):
            t0 = ltorch.sin(x)                  t0 = prims.sin(x)
            t1 = ltorch.mul(t0, x)    ->        t1 = ltorch.mul(t0, x)
            return t1                           return (t1, (x, t0))

                                            def backward(x, t0, grad_t1):
                                                t2 = ltorch.mul(grad_t1, x)
                                                t3 = ltorch.mul(grad_t1, t0)
                                                t4 = prims.cos(x)
                                                t5 = prims.mul(t2, t4)
                                                t6 = prims.add(t3, t5)
                                                return (t6,)

    (training: saved ``x, t0``; gradients of ``t1``.)
    """

    name = "autodiff"
    repeatable = False  # a program that has a backward trace is left as it is

    def __call__(self, program: Program) -> Program:
        if "backward" in program.traces:
            return program
        training = split(program.forward)
        return program if training is None else program.with_traces(training.traces, training.training)

    def describe(self, before: Program, after: Program) -> Notes:
        if "backward" not in after.traces:
            return Notes("nothing requires grad: no backward trace", {"differentiated": False})
        saved = after.saved
        links = {b.id: b.derived_from for b in after.traces["backward"].bound_symbols}
        return Notes(f"saved {len(saved)} values for backward ({byte_text(saved_bytes(saved))})",
                     {"differentiated": True, "saved": [p.name for p in saved], "saved_bytes": saved_bytes(saved),
                      "backward_to_forward": links})


def saved_bytes(saved) -> int:
    return sum(p.numel() * p.dtype.itemsize for p in proxies_in(saved))
