"""Making in-place writes and views functional, the way PyTorch's functionalization does.

Every tensor in the lowering belongs to a *storage*: a base value (an input, or the result of
a computation) and the views taken from it, each remembered as the chain of view calls that
made it. A write through any of them becomes a new value of the base: the written view's new
value is put back through each view's inverse (``reshape`` for reshapes, otherwise the view
call applied to a copy of the base and written into, which is exactly what the view means).
Other views of that base are regenerated from the new base when they are next read. At the end,
inputs that were written get one ``copy_`` of their final value, and outputs that are views of
an input (or the input itself) are re-made at run time as views of the caller's tensor, so
they share its storage as in eager.

Whether a call makes a view is PyTorch's answer, not a list: candidate calls are run on
meta tensors with eager's strides, and a result that shares the source's storage is a view
(``reshape`` and ``contiguous`` are views only when eager's strides allow it; ``detach`` is one).
The conversions that return their input itself when there is nothing to convert (``to``, ``cpu``,
``cuda``, ``type``, ``type_as``, ``float`` on a float tensor, ...) are asked the same way, a move to
the tensor's own device asked as one to the meta device: their result is the input, and a write
through it is a write to the input, as in eager.
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from thunderlab.core.aliases import overlapping  # noqa: F401 - the lowering asks it about its inputs
from thunderlab.core.proxies import TensorProxy
from thunderlab.core.symbols import Symbol, Tag, proxies_in, tree_map
from thunderlab.core.trace import TraceError, current_trace
from thunderlab.ops import mapping, prims
from thunderlab.ops import torch_ops as ltorch
from thunderlab.ops.conversion import same_device, type_target

# Calls that may return a view: every symbol declared with Tag.VIEW, and these torch calls that
# are not (PyTorch's "Tensor Views" with no thunderlab view symbol, and the calls that return a
# view or their input itself depending on strides and dtypes); getattr covers .T, .mT, .real, .imag
MAY_ALIAS = {
    "movedim", "moveaxis", "adjoint", "diagonal", "unfold", "tensor_split", "hsplit", "vsplit", "dsplit",
    "getattr", "detach", "alias", "view_as_real", "view_as_complex", "real", "imag", "contiguous", "to", "float",
    "double", "half", "bfloat16", "type", "type_as", "as_strided", "cpu", "cuda",
}
# the calls that, when they alias, return their source itself: a write through the result is one to the source
_SELF = {"to", "cpu", "cuda", "float", "double", "half", "bfloat16", "type", "type_as", "contiguous", "alias"}


def may_alias(sym: Symbol, fn) -> bool:
    """Whether calling ``fn`` (which ``sym`` stands for) can return a view of its first argument."""
    return Tag.VIEW in sym.tags or getattr(fn, "__name__", "") in MAY_ALIAS
_RESHAPES = {"view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze"}
_VIEW_ATTRS = {"T", "mT", "H", "mH", "real", "imag"}


def writes(node) -> bool:
    """Whether an FX node writes in place (``add_``, ``x[i] = v``, ``inplace=True``)."""
    if node.op not in ("call_function", "call_method"):
        return False
    if node.target is operator.setitem or node.kwargs.get("inplace") is True:
        return True
    return (
        mapping.inplace_base(node.target) is not None
        and getattr(node.target, "__module__", "") != "torch.amp.autocast_mode"
    )


def _name(fn, args) -> str:
    if fn is getattr:
        return str(args[0]) if args else "getattr"
    return getattr(fn, "__name__", "")


@dataclass(frozen=True, eq=False)
class Step:
    """One view call: ``fn(source, *args, **kwargs)`` (its ``index``-th result when it returns several)."""

    sym: Symbol  # what the trace records
    fn: Callable  # what PyTorch calls on a real tensor
    args: tuple
    kwargs: dict
    index: int | None = None

    @property
    def name(self) -> str:
        return _name(self.fn, self.args)

    def record(self, src: TensorProxy) -> TensorProxy:
        out = self.sym(src, *self.args, **self.kwargs)
        return out[self.index] if self.index is not None else out

    def replay(self, t: torch.Tensor) -> torch.Tensor:
        out = self.fn(t, *self.args, **self.kwargs)
        return out[self.index] if self.index is not None else out

    def without_tensors(self) -> Step | None:
        """The same view with its tensor arguments replaced by their shape or dtype (``expand_as(o)`` is
        ``expand(o.shape)``), for the runtime to re-make it on the caller's tensor; None if there is none."""
        if not any(isinstance(v, TensorProxy) for v in (*self.args, *self.kwargs.values())):
            return self
        other = self.args[0] if len(self.args) == 1 and not self.kwargs else None
        if not isinstance(other, TensorProxy) or self.name not in _LIKE:
            return None
        fn, arg = _LIKE[self.name]
        return Step(self.sym, fn, (arg(other),), {}, self.index)

    def inverse(self, prev: TensorProxy, new: TensorProxy) -> TensorProxy:
        """The value of the source after its view has become ``new``."""
        if self.name in _RESHAPES:
            return ltorch.reshape(new, prev.shape)
        if self.name in _SELF:
            return new  # the call returned its source itself
        return mapping.scatter_symbol(self.fn, self.index, self.name)(prev, new, *self.args, **self.kwargs)


# a view taking a tensor only for its metadata: the call that takes that metadata instead
_LIKE = {
    "expand_as": (torch.Tensor.expand, lambda o: tuple(o.shape)),
    "view_as": (torch.Tensor.view, lambda o: tuple(o.shape)),
    "reshape_as": (torch.Tensor.reshape, lambda o: tuple(o.shape)),
    "type_as": (torch.Tensor.to, lambda o: o.dtype),
}


def _probe(fn, src: TensorProxy, args: tuple, kwargs: dict):
    """The call that asks, on the meta source, whether ``fn(src, *args, **kwargs)`` returns a view of it.

    A conversion to the source's own device is asked as one to the meta device (where the probe
    runs); a move to another device is always a copy (None).
    """
    name = getattr(fn, "__name__", "")
    if name in ("cpu", "cuda"):  # Tensor.cpu(memory_format=...), Tensor.cuda(device=None, non_blocking, ...)
        device = "cpu" if name == "cpu" else kwargs.get("device", args[0] if args else "cuda")
        fmt = kwargs.get("memory_format", torch.preserve_format)
        return (torch.Tensor.to, ("meta",), {"memory_format": fmt}) if same_device(device or "cuda", src.device) \
            else None
    if name == "type":
        dtype, device = type_target(kwargs.get("dtype", args[0] if args else None))
        if dtype is None or (device is not None and device != src.device.type):
            return None
        return torch.Tensor.to, (dtype,), {}
    if name not in ("to", "type_as"):
        return fn, args, kwargs

    def meta_device(v):
        if isinstance(v, TensorProxy):
            return v if same_device(v.device, src.device) else None
        if isinstance(v, (torch.device, str)) or (isinstance(v, int) and not isinstance(v, bool)):
            return "meta" if same_device(v, src.device) else None
        return v

    args = tuple(meta_device(v) for v in args)
    kwargs = {k: meta_device(v) if k in ("device", "other") else v for k, v in kwargs.items()}
    if any(v is None for v in (*args, *kwargs.values())):
        return None
    return fn, args, kwargs


class _KeepGrad(torch.autograd.Function):
    """``value``'s numbers with ``like``'s place in the graph: gradients pass to ``like`` unchanged."""

    @staticmethod
    def forward(ctx, value, like):
        return value.clone()

    @staticmethod
    def backward(ctx, g):
        return None, g


def _keep_grad_of(value: TensorProxy, like: TensorProxy) -> TensorProxy:
    """A write under no_grad to a tensor that requires grad: eager changes its values and keeps its
    autograd history (a leaf stays that leaf), so gradients flow to the tensor as it was."""
    sym = mapping.derived(("keep_grad",), "keep_grad_of", _KeepGrad.apply)
    tr = current_trace()
    mode, tr.grad_enabled = tr.grad_enabled, True
    try:
        return sym(value, like)
    finally:
        tr.grad_enabled = mode


@dataclass(eq=False)
class Storage:
    """A base value and its history: the latest functional value, bumped on every write."""

    value: TensorProxy
    meta: torch.Tensor  # a meta tensor with eager's strides: the root views are probed on
    input: str | None = None  # the input whose storage this is
    version: int = 0
    written: bool = False
    recorded: bool = False  # written with grad on while it requires grad: autograd must see the write


@dataclass(eq=False)
class Alias:
    storage: Storage
    steps: tuple[Step, ...]
    meta: torch.Tensor
    version: int


@dataclass
class Functionalizer:
    """The storages of a lowering's tensors; the lowering asks it on every view, write and read."""

    aliases: dict[str, Alias] = field(default_factory=dict)  # proxy name -> what it is a view of
    inputs: dict[str, TensorProxy] = field(default_factory=dict)
    overlaps: dict[str, list[str]] = field(default_factory=dict)  # input -> the inputs sharing memory with it
    # without writes in the graph only views of inputs matter (a returned one is re-made as a view)
    any_writes: bool = True

    def add_input(self, p: TensorProxy, t: torch.Tensor) -> None:
        meta = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
        s = Storage(p, meta, input=p.name)
        self.aliases[p.name] = Alias(s, (), meta, 0)
        self.inputs[p.name] = p

    def _alias(self, p: TensorProxy) -> Alias:
        a = self.aliases.get(p.name)
        if a is None:
            meta = torch.empty(p.shape, dtype=p.dtype, device="meta")
            a = self.aliases[p.name] = Alias(Storage(p, meta), (), meta, 0)
        return a

    # -- views ---------------------------------------------------------------------------
    def after_call(self, sym: Symbol, fn, args, kwargs, out) -> None:
        """Note ``out`` as a view of ``args[0]`` when PyTorch's ``fn`` makes it one."""
        if fn is None or not args or not isinstance(args[0], TensorProxy):
            return
        if not self.any_writes and args[0].name not in self.aliases:
            return
        if (fn is getattr and args[1:2] not in [(n,) for n in _VIEW_ATTRS]) or not may_alias(sym, fn):
            return
        src = self._alias(args[0])
        probe = _probe(fn, args[0], tuple(args[1:]), dict(kwargs))
        if probe is None:
            return
        try:
            got = probe[0](src.meta, *tree_map(_meta, probe[1]), **tree_map(_meta, probe[2]))
        except Exception:  # noqa: BLE001 - not expressible on meta tensors: not a view we can follow
            return
        outs = proxies_in(out)
        metas = [got] if isinstance(got, torch.Tensor) else [m for m in got if isinstance(m, torch.Tensor)]
        if len(outs) != len(metas):
            return
        many = not isinstance(out, TensorProxy)
        for i, (o, m) in enumerate(zip(outs, metas)):
            if torch._C._is_alias_of(m, src.meta):  # shares the source's storage, as eager would
                step = Step(sym, fn, tuple(args[1:]), dict(kwargs), i if many else None)
                self.aliases[o.name] = Alias(src.storage, src.steps + (step,), m, src.storage.version)

    # -- reads -----------------------------------------------------------------------------
    def current(self, p: TensorProxy) -> TensorProxy:
        """``p``'s value now: regenerated from its base when the base was written since it was made."""
        a = self.aliases.get(p.name)
        if a is None or a.version == a.storage.version:
            return p
        if any("as_strided" == s.name for s in a.steps):
            raise TraceError("reading an as_strided view after a write to its base is not supported; "
                             "take the view after the write, or use view/narrow/select")
        v = a.storage.value
        for step in a.steps:
            v = step.record(v)
        self.aliases[v.name] = Alias(a.storage, a.steps, a.meta, a.storage.version)
        return v

    # -- writes ----------------------------------------------------------------------------
    def write(self, target: TensorProxy, value: TensorProxy, what: str) -> TensorProxy:
        """``target`` becomes ``value`` in place; returns the proxy that now stands for ``target``."""
        if value.shape != target.shape:
            raise TraceError(f"{what}: the result of shape {list(value.shape)} does not fit the written tensor "
                             f"{target.name} of shape {list(target.shape)}")
        if value.dtype != target.dtype:
            value = prims.convert_element_type(value, target.dtype)
        a = self._alias(target)
        names = [s.name for s in a.steps]
        if "as_strided" in names or "view_as_complex" in names or "view_as_real" in names:
            raise TraceError(f"{what}: writing through {next(n for n in names if n.startswith(('as_', 'view_as_')))} "
                             "is not supported; write to the base tensor instead")
        s = a.storage
        if s.input in self.overlaps:
            raise TraceError(f"{what} writes to input {s.input}, which shares memory with input "
                             f"{', '.join(self.overlaps[s.input])}; pass tensors that do not overlap (clone one)")
        prevs = [s.value]
        for step in a.steps[:-1]:
            prevs.append(step.record(prevs[-1]))
        new = value
        for step, prev in zip(reversed(a.steps), reversed(prevs)):
            new = step.inverse(prev, new)
        if s.value.requires_grad and not current_trace().grad_enabled:
            new = _keep_grad_of(new, s.value)
        if s.input is not None and self.inputs[s.input].requires_grad and current_trace().grad_enabled:
            s.recorded = True
        s.value, s.version, s.written = new, s.version + 1, True
        if not a.steps:
            self.aliases[new.name] = Alias(s, (), a.meta, s.version)
            return new
        self.aliases[value.name] = Alias(s, a.steps, a.meta, s.version)
        return value

    # -- the end ---------------------------------------------------------------------------
    def finish(self, output) -> tuple[list, list]:
        """Write back written inputs; list the outputs that are views of an input, to re-make at run time.

        An input written with grad on (a non-leaf that requires grad: eager allows nothing else) is
        not written here but listed with its final value: the runtime writes it with ``copy_`` under
        autograd, after the program, so that its gradient history records the write as eager's does.
        """
        recorded = []
        for name, p in self.inputs.items():
            s = self.aliases[name].storage
            if s.written and s.recorded:
                recorded.append((name, self.current(s.value)))
            elif s.written:
                prims.copy_(self.current(s.value), p)
        views = []
        for k, o in enumerate(proxies_in(output)):
            a = self.aliases.get(o.name)
            if a is None or a.storage.input is None:
                continue
            steps = tuple(st.without_tensors() for st in a.steps)
            if None in steps:
                continue  # a view whose arguments are tensors and not only their metadata keeps its functional value
            views.append((k, a.storage.input, steps))
        return views, recorded

    def written_inputs(self) -> list[str]:
        return [n for n in self.inputs if self.aliases[n].storage.written]


def _meta(v):
    if isinstance(v, TensorProxy):
        return torch.empty(v.shape, dtype=v.dtype, device="meta")
    return v
