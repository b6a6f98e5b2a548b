"""Lowering an FX graph (as TorchDynamo captures it) to an initial thunderlab trace.

The graph is lowered for concrete inputs: every tensor becomes a proxy with its real shape,
dtype, device and requires_grad, and symbolic sizes become the integers they are on this
call. Parameters arrive as inputs (Dynamo lifts them); ``get_attr`` constants are lifted
here. In-place ops and writes through views are made functional as PyTorch's own
functionalization makes them (see ``functionalize``): written inputs get one ``copy_`` at
the end, and outputs that are views of inputs are re-made as views at run time.
"""
from __future__ import annotations

import functools
import inspect
import keyword
import operator
import re

import torch
import torch.fx

from thunderlab.core import amp
from thunderlab.core.program import Boundary, Program
from thunderlab.core.proxies import TensorProxy
from thunderlab.core.symbols import SourceInfo, proxies_in, tree_flatten
from thunderlab.core.trace import ScalarInput, Trace, TraceError
from thunderlab.ops import mapping, prims
from thunderlab.ops import torch_ops as ltorch
from thunderlab.ops.views import TRANSPOSING_ATTRIBUTES as TRANSPOSING

from . import autocast
from .functionalize import Functionalizer, overlapping, writes
from .regions import ENTER as AUTOCAST_ENTER
from .regions import TRANSFORM_ENTER, GraphRegion

_QUERY_METHODS = {"size", "dim", "numel", "ndimension", "is_contiguous", "is_floating_point", "element_size",
                  "nelement"}
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)')


def input_name(target: str) -> str:
    """A readable parameter name from Dynamo's placeholder name (L_self_modules_fc_parameters_weight_ -> fc_weight)."""
    name = re.sub(r"^[LG]_", "", str(target))
    name = re.sub(r"^self_", "", name)
    name = re.sub(r"(^|_)(modules|parameters|buffers)_", r"\1", name)
    name = name.strip("_").lower() or "arg"
    name = re.sub(r"\W", "_", name)
    if name[0].isdigit() or keyword.iskeyword(name) or name in ("torch", "prims", "ltorch"):
        name = f"a_{name}"
    return name


def source_of(node: torch.fx.Node) -> SourceInfo | None:
    stack = node.meta.get("stack_trace")
    if not stack:
        return None
    frames = _FRAME.findall(stack)
    if not frames:
        return None
    file, line, _fn, code = frames[-1]
    scope = ""
    mstack = node.meta.get("nn_module_stack")
    if mstack:
        path = list(mstack.values())[-1][0]
        scope = re.sub(r"^L\['self'\]\.?", "", str(path))
    return SourceInfo(file, int(line), code.strip(), scope)


class Lowering:
    """One pass over the FX graph, recording torch-level symbols into a trace."""

    def __init__(self, gm: torch.fx.GraphModule, name: str = "forward"):
        self.gm = gm
        self.trace = Trace(name)
        self.env: dict[torch.fx.Node, object] = {}
        self.lifted: list[torch.Tensor] = []
        self.fz = Functionalizer()
        self.ambient: dict[str, torch.dtype] = {}  # the caller's autocast, by device type (see frontend/autocast)

    def run(self, args) -> Program:
        tr = self.trace
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(args):
            raise TraceError(f"the graph takes {len(placeholders)} inputs, got {len(args)}")
        self.inputs_by_name: dict[str, TensorProxy] = {}
        self.concrete: dict[str, torch.Tensor] = {}  # input name -> this call's tensor, for .item()
        tr.grad_enabled = torch.is_grad_enabled()  # the caller's grad mode, changed by the function's own regions
        self.ambient = amp.ambient()
        with tr.active():
            for node, a in zip(placeholders, args):
                self.env[node] = self.placeholder(node, a)
            self.fz.overlaps = overlapping(self.concrete)
            self.fz.any_writes = any(writes(n) for n in self.gm.graph.nodes)
            tr.output = self.interpret(list(self.gm.graph.nodes))
            views, recorded = self.fz.finish(tr.output)
            if recorded:
                if not isinstance(tr.output, tuple):
                    raise TraceError("a function that writes to an input requiring grad must return a tuple here")
                tr.output = (*tr.output, *(v for _, v in recorded))
        tr.grad_enabled = True  # passes that record into this trace later (autodiff) start from grad on
        position = {p.name: i for i, p in enumerate(tr.inputs)}
        boundary = Boundary(
            input_views=[(k, position[name], steps) for k, name, steps in views],
            written_inputs=[position[name] for name in self.fz.written_inputs()],
            # from the extra outputs at the end (see Functionalizer.finish)
            recorded_writes=[position[name] for name, _ in recorded],
            autocast=self.ambient,
        )
        return Program({tr.name: tr}, boundary=boundary)

    # -- inputs ---------------------------------------------------------------------------
    def placeholder(self, node, a):
        name = self.trace.add_name(input_name(node.target))
        if isinstance(a, torch.Tensor):
            # an input requires grad as the caller's tensor does; under no_grad the values made from it do not
            p = TensorProxy(name, tuple(a.shape), a.dtype, a.device, a.requires_grad,
                            parameter=isinstance(a, torch.nn.Parameter))
            self.trace.inputs.append(p)
            self.inputs_by_name[name] = p
            self.concrete[name] = a
            self.fz.add_input(p, a)
            return p
        concrete = a.node.hint if isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)) else a
        self.trace.inputs.append(ScalarInput(name, concrete))
        return concrete

    def lift(self, node):
        obj = self.gm
        for part in node.target.split("."):
            obj = getattr(obj, part)
        if not isinstance(obj, torch.Tensor):
            return obj
        name = self.trace.add_name(input_name(node.target))
        p = TensorProxy(name, tuple(obj.shape), obj.dtype, obj.device, obj.requires_grad)
        self.trace.inputs.append(p)
        self.inputs_by_name[name] = p
        self.lifted.append(obj)
        self.fz.add_input(p, obj)
        return p

    def load(self, x):
        return torch.fx.node.map_arg(x, self._current)

    def _current(self, n: torch.fx.Node):
        """``n``'s value now: a view whose base was written since is regenerated from the base."""
        v = self.env[n]
        if isinstance(v, TensorProxy):
            cur = self.fz.current(v)
            if cur is not v:
                self.env[n] = v = cur
        return v

    def interpret(self, nodes: list[torch.fx.Node]):
        """Record the calls of a graph's nodes (its placeholders already bound); the value of its output."""
        out, i = None, 0
        while i < len(nodes):
            node, i = nodes[i], i + 1
            if node.op == "placeholder":
                continue
            if node.op == "output":
                out = self.load(node.args[0])
                continue
            with self.trace.source(source_of(node)):
                try:
                    if node.op == "call_function" and node.target is AUTOCAST_ENTER:
                        i = self.autocast(nodes, i - 1)
                    elif node.op == "call_function" and node.target in TRANSFORM_ENTER:
                        i = self.transform(nodes, i - 1)
                    else:
                        self.env[node] = self.node(node)
                except TraceError as e:
                    raise TraceError(f"{_describe(node)}: {e}") from None
        return out

    def inline(self, body: torch.fx.GraphModule, args):
        """The calls of ``body`` (a subgraph TorchDynamo captured) recorded here, on ``args``; its output."""
        nodes = list(body.graph.nodes)
        placeholders = [n for n in nodes if n.op == "placeholder"]
        if len(placeholders) != len(args):
            raise TraceError(f"a captured subgraph takes {len(placeholders)} inputs, got {len(args)}")
        for n, a in zip(placeholders, args):
            self.env[n] = a
        self.fz.any_writes = self.fz.any_writes or any(writes(n) for n in nodes)
        outer, self.gm = self.gm, body  # the body's own attributes
        try:
            return self.interpret(nodes)
        finally:
            self.gm = outer

    # -- calls ----------------------------------------------------------------------------
    def node(self, node):
        if node.op == "get_attr":
            return self.lift(node)
        args, kwargs = self.load(node.args), self.load(node.kwargs)
        if self.ambient and node.op in ("call_function", "call_method"):
            return self.autocast_call(node, args, kwargs)
        if node.op == "call_function":
            return self.call_function(node.target, args, kwargs)
        if node.op == "call_method":
            return self.call_method(node.target, args, kwargs)
        raise TraceError(
            f"{node.op} nodes are not supported (module {node.target!r}); Dynamo inlines nn modules by default"
        )

    def autocast_call(self, node, args, kwargs):
        """A call made under the caller's ``torch.autocast``: the inputs it casts converted first, explicitly."""
        casts = autocast.cast_for(node, args, kwargs, self.ambient)
        if casts:
            args, kwargs = autocast.cast_inputs(args, kwargs, casts)
        if node.op == "call_function":
            value = self.call_function(node.target, args, kwargs)
        else:
            value = self.call_method(node.target, args, kwargs)
        autocast.check(node, value)
        return value

    def call_function(self, target, args, kwargs):
        if target is operator.getitem and not isinstance(args[0], TensorProxy):
            return args[0][args[1]]
        if target is _CHECKPOINT:
            # torch.utils.checkpoint: what the body computes, recorded here (what to keep for backward and
            # what to compute again is remat's decision; the eager op would not replay the body's draws)
            return self.inline(args[0], args[1:])
        if target is torch._C._set_grad_enabled:  # a no_grad / enable_grad / set_grad_enabled region
            return prims.set_grad_enabled(*args)
        if target is getattr and isinstance(args[0], TensorProxy) and args[1:2] in [(n,) for n in TRANSPOSING]:
            return self.track(ltorch.tensor_attribute, args, kwargs, getattr)  # x.T, x.mT: a transpose
        if target is operator.setitem and isinstance(args[0], TensorProxy):
            self.inplace(args[0], mapping.functional_symbol(operator.setitem, "setitem"), "setitem", args, kwargs)
            return None
        # sizes arrive as Python numbers (symbolic sizes are lowered to this call's values), so arithmetic
        # on them stays Python arithmetic even where the operator also has a symbol for tensors
        if not proxies_in((args, kwargs)) and (mapping.lookup(target) is None or _python_operator(target)):
            with torch.random.fork_rng(devices=[]):  # run to see what it makes: a draw here is not the program's
                out = target(*args, **kwargs)
            if not any(isinstance(v, torch.Tensor) for v in tree_flatten(out)):
                return out  # Python arithmetic on sizes and the like
            return mapping.opaque(target)(*args, **kwargs)
        if isinstance(kwargs.get("out"), TensorProxy):  # torch.add(a, b, out=c) writes into c and returns it
            value = self.call_function(target, args, {k: v for k, v in kwargs.items() if k != "out"})
            return self.fz.write(kwargs["out"], value, f"{_entry_name(target)}(..., out=...)")
        base = mapping.inplace_base(target)
        if base and args and isinstance(args[0], TensorProxy) and mapping.lookup(target) is None:
            fsym = mapping.functional_for(base) or mapping.functional_symbol(target, _entry_name(target))
            return self.inplace(args[0], fsym, _entry_name(target), args, kwargs, target)
        if kwargs.get("inplace") is True and args and isinstance(args[0], TensorProxy):
            sym = mapping.lookup(target)
            if sym is not None:
                kw = {k: v for k, v in kwargs.items() if k != "inplace"}
                return self.inplace(args[0], sym, _entry_name(target), args, kw)
        sym = mapping.lookup(target)
        if sym is None:
            return self.track(mapping.opaque(target), args, kwargs, target)
        adapter = mapping.ADAPTERS.get(target)
        if adapter is not None:
            args, kwargs = adapter(*args, **kwargs)
        return self.track(sym, args, kwargs, target)

    def call_method(self, name, args, kwargs):
        self_, rest = args[0], args[1:]
        if not isinstance(self_, TensorProxy):
            return getattr(self_, name)(*rest, **kwargs)
        if name in _QUERY_METHODS:
            return _query(self_, name, *rest)
        if name == "item" and self_.name in self.concrete:
            # a Python number Dynamo passes as a 0-d tensor: specialized to this call's value, which
            # the runtime keys the compiled program on (see value_inputs)
            return self.concrete[self_.name].item()
        real = getattr(torch.Tensor, name, None)
        sym = mapping.lookup_method(name)
        if sym is not None:
            return self.track(sym, args, kwargs, real)
        base = mapping.inplace_base(name)
        if base:
            if base in ("copy", "fill", "zero"):
                return self.inplace(self_, _SPECIAL_INPLACE[base], name, args, kwargs, real)
            if real is None:
                raise TraceError(f"Tensor.{name} is not a method thunderlab knows how to run")
            fsym = mapping.functional_for(base) or mapping.functional_symbol(real, name)
            return self.inplace(self_, fsym, name, args, kwargs, real)
        return self.track(mapping.opaque(None, method=name), args, kwargs, real)

    def autocast(self, nodes, start: int) -> int:
        """A ``torch.autocast`` region: one call that runs it under the same autocast; the index after its end."""
        region = GraphRegion.autocast(nodes, start)
        outs = region.symbol(self.gm)(*self.load(tuple(region.inputs)))
        for n, v in zip(region.outputs, outs):
            self.env[n] = v
        return region.end + 1

    def transform(self, nodes, start: int) -> int:
        """A functorch transform's call (``torch.vmap``, ``torch.func.grad``): one call that runs its captured nodes;
        the index after its end."""
        region = GraphRegion.transform(nodes, start)
        outs = region.transform_symbol(self.gm)(*self.load(tuple(region.inputs)))
        for n, v in zip(region.outputs, outs):
            self.env[n] = v
        return region.end + 1

    def track(self, sym, args, kwargs, real=None):
        """Record ``sym``; ``real`` is the torch call it stands for, asked whether it returns a view."""
        if kwargs:
            args, kwargs = torch_keywords(sym, real, args, kwargs)
        out = sym(*args, **kwargs)
        self.fz.after_call(sym, real, args, kwargs, out)
        return out

    def inplace(self, target: TensorProxy, fsym, entry: str, args, kwargs, real=None):
        """An in-place call: its functional twin computes the new value, which ``target`` (and its base) become.
        ``real`` is the torch call, whose parameter names place the call's keywords (``torch_keywords``)."""
        if kwargs:
            args, kwargs = torch_keywords(fsym, real, args, kwargs)
        value = fsym(*args, **kwargs)
        if not isinstance(value, TensorProxy):
            raise TraceError(f"in-place {entry} gives no tensor to write into {target.name}")
        return self.fz.write(target, value, entry)


_CHECKPOINT = torch.ops.higher_order.tag_activation_checkpoint
_LEADING = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def torch_keywords(sym, real, args, kwargs) -> tuple[tuple, dict]:
    """A call's arguments given by PyTorch's keywords, moved to where ``sym`` takes them.

    PyTorch names a call's parameters its own way (``torch.matmul(input=x, other=y)``, ``x.pow(exponent=2)``,
    ``torch.mm(x, mat2=y)``, ``x.split(split_size=1)``), and a symbol names them as it likes (``a``, ``b``). A keyword
    the symbol's parameters do not name is given its place from the torch call ``real`` stands for: its Python
    signature, else the positional arguments of its aten overloads (``self`` read as ``input``). TorchDynamo's
    capture ran the call as PyTorch does, so these keywords are ones PyTorch accepted. The sizes a symbol takes as
    ``*dims`` are placed the same way (``torch.permute(x, dims=(1, 0))``, ``x.view(size=(6,))``: the aten schema's
    ``dims`` and ``size`` come right after the tensor). What no overload places is left as it is, for the symbol's
    own error.
    """
    params = _parameters(sym)
    if params is None:
        return args, kwargs
    unknown = [k for k in kwargs if k not in params or params[k].kind is inspect.Parameter.VAR_POSITIONAL]
    if not unknown:
        return args, kwargs
    try:
        overloads = _torch_positions(real)
    except TypeError:  # an unhashable callable: no cached signature
        overloads = ()
    for positions in overloads:
        if not all(k in positions for k in unknown):
            continue
        lead, rest = list(args), dict(kwargs)
        for k in sorted(unknown, key=positions.index):
            if positions.index(k) != len(lead):  # a gap before it: not this overload
                break
            lead.append(rest.pop(k))
        else:
            return tuple(lead), rest
    return args, kwargs


def _parameters(fn):
    """A symbol's parameters (or a plain function's), by name; None where they are not named."""
    try:
        return (fn.parameters() if hasattr(fn, "parameters") else inspect.signature(fn)).parameters
    except (TypeError, ValueError):
        return None


@functools.cache
def _torch_positions(real) -> tuple[tuple[str, ...], ...]:
    """The positional parameters of the torch call ``real``, by name, one tuple per overload."""
    if real is None:
        return ()
    try:
        sig = inspect.signature(real)
    except (TypeError, ValueError):
        sig = None
    if sig is not None:
        return (tuple(n for n, p in sig.parameters.items() if p.kind in _LEADING),)
    name = getattr(real, "__name__", "")
    try:
        schemas = torch._C._jit_get_schemas_for_operator(f"aten::{name}") if name.isidentifier() else []
    except RuntimeError:
        schemas = []
    return tuple(tuple("input" if a.name == "self" else a.name for a in s.arguments if not a.kwarg_only)
                 for s in schemas)


def _python_operator(target) -> bool:
    return getattr(target, "__module__", None) in ("_operator", "operator")


def _query(p: TensorProxy, name, *args):
    if name == "size":
        return p.shape if not args else p.shape[args[0]]
    if name in ("dim", "ndimension"):
        return p.ndim
    if name in ("numel", "nelement"):
        return p.numel()
    if name == "is_floating_point":
        return p.dtype.is_floating_point
    if name == "element_size":
        return p.dtype.itemsize
    return True  # is_contiguous: thunderlab values are contiguous or copied to be


def _copy_value(dst, src, non_blocking=False):
    return ltorch.clone(ltorch.expand(ltorch.to(src, dst.dtype), dst.shape)) if isinstance(src, TensorProxy) \
        else ltorch.full(dst.shape, src, dtype=dst.dtype, device=dst.device)


def _fill_value(dst, value):
    if isinstance(value, TensorProxy):
        return ltorch.expand(ltorch.to(value, dst.dtype), dst.shape)
    return ltorch.full(dst.shape, value, dtype=dst.dtype, device=dst.device)


def _zero_value(dst):
    return ltorch.zeros_like(dst)


_SPECIAL_INPLACE = {"copy": _copy_value, "fill": _fill_value, "zero": _zero_value}


def _entry_name(target) -> str:
    return getattr(target, "__name__", None) or str(target)


def _describe(node: torch.fx.Node) -> str:
    src = source_of(node)
    where = f" at {src.short()} ({src.code})" if src else ""
    target = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))
    return f"while tracing {node.op} {target!r}{where}"


def value_inputs(gm: torch.fx.GraphModule) -> tuple[int, ...]:
    """Positions of the inputs whose value the lowering reads (``x.item()`` on an input), so the program depends
    on it."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return tuple(i for i, p in enumerate(placeholders)
                 if any(u.op == "call_method" and u.target == "item" and u.args[0] is p for u in p.users))


def slim(gm: torch.fx.GraphModule) -> None:
    """Let go of what TorchDynamo left on ``gm``'s nodes for its own compile once it is done with them: each
    node's fake value (which holds its fake mode and shape environment) and each input's ``GraphArg``.

    A compiled function keeps its graph to lower it again for new input sizes, and lowering reads only the
    floating dtype of each fake value (autocast's decisions, ``autocast.eager_dtype``): that is kept. Without
    this, every live compiled function would hold about 20 KiB of fake tensors in small Python objects.
    """
    for node in gm.graph.nodes:
        meta = node.meta
        if "example_value" in meta:
            meta[autocast.EAGER_DTYPE] = autocast.eager_dtype(node)
            del meta["example_value"]
        meta.pop("grapharg", None)


def lower(gm: torch.fx.GraphModule, args, name: str = "forward") -> tuple[Program, list[torch.Tensor]]:
    """The initial program of ``gm`` for these concrete ``args`` (one trace, named ``name``), and the lifted
    constant tensors."""
    low = Lowering(gm, name)
    return low.run(args), low.lifted
