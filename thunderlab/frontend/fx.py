"""Lowering an FX graph (as TorchDynamo captures it) to an initial thunderlab trace.

The graph is lowered for concrete inputs: every tensor becomes a proxy with its real shape,
dtype, device and requires_grad, and symbolic sizes become the integers they are on this
call. Parameters arrive as inputs (Dynamo lifts them); ``get_attr`` constants are lifted
here. In-place ops are made functional where that is safe, with a ``copy_`` write-back
for mutated inputs; an in-place op on a view (or on a tensor that has views) is kept as a
real in-place call, which later passes treat as a barrier.
"""
from __future__ import annotations

import keyword
import operator
import re

import torch
import torch.fx

from thunderlab.core.proxies import TensorProxy
from thunderlab.core.symbols import SourceInfo, proxies_in, tree_flatten
from thunderlab.core.trace import ScalarInput, Trace, TraceError
from thunderlab.ops import mapping, prims
from thunderlab.ops import torch_ops as ltorch

_VIEW_OPS = {"view", "reshape", "transpose", "permute", "t", "unsqueeze", "squeeze", "flatten", "expand",
             "expand_as", "getitem", "split", "split_with_sizes", "chunk", "unbind", "narrow", "select",
             "view_as", "detach", "contiguous", "to", "broadcast_to", "unflatten", "type_as", "float"}
_QUERY_METHODS = {"size", "dim", "numel", "ndimension", "is_contiguous", "is_floating_point", "element_size", "nelement"}
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
        self.bases: dict[str, TensorProxy] = {}  # view name -> the proxy it aliases
        self.has_views: set[str] = set()
        self.writeback: dict[str, TensorProxy] = {}  # input name -> its latest value

    def run(self, args) -> Trace:
        tr = self.trace
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(args):
            raise TraceError(f"the graph takes {len(placeholders)} inputs, got {len(args)}")
        self.inputs_by_name: dict[str, TensorProxy] = {}
        self.concrete: dict[str, torch.Tensor] = {}  # input name -> this call's tensor, for .item()
        with tr.active():
            for node, a in zip(placeholders, args):
                self.env[node] = self.placeholder(node, a)
            for node in self.gm.graph.nodes:
                if node.op == "placeholder":
                    continue
                if node.op == "output":
                    tr.output = self.load(node.args[0])
                    continue
                with tr.source(source_of(node)):
                    try:
                        self.env[node] = self.node(node)
                    except TraceError as e:
                        raise TraceError(f"{_describe(node)}: {e}") from None
            for name, value in self.writeback.items():
                prims.copy_(value, self.inputs_by_name[name])
        return tr

    # -- inputs ---------------------------------------------------------------------------
    def placeholder(self, node, a):
        name = self.trace.add_name(input_name(node.target))
        if isinstance(a, torch.Tensor):
            # under no_grad nothing needs a gradient, whatever the tensors say
            p = TensorProxy(name, tuple(a.shape), a.dtype, a.device, a.requires_grad and torch.is_grad_enabled())
            self.trace.inputs.append(p)
            self.inputs_by_name[name] = p
            self.concrete[name] = a
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
        return p

    def load(self, x):
        return torch.fx.node.map_arg(x, lambda n: self.env[n])

    # -- calls ----------------------------------------------------------------------------
    def node(self, node):
        if node.op == "get_attr":
            return self.lift(node)
        args, kwargs = self.load(node.args), self.load(node.kwargs)
        if node.op == "call_function":
            return self.call_function(node.target, args, kwargs)
        if node.op == "call_method":
            return self.call_method(node.target, args, kwargs)
        raise TraceError(f"{node.op} nodes are not supported (module {node.target!r}); Dynamo inlines nn modules by default")

    def call_function(self, target, args, kwargs):
        if target is operator.getitem and not isinstance(args[0], TensorProxy):
            return args[0][args[1]]
        if target is operator.setitem and isinstance(args[0], TensorProxy):
            return self.real_inplace(args[0], mapping.opaque(operator.setitem, side_effect=True), args, kwargs)
        # sizes arrive as Python numbers (symbolic sizes are lowered to this call's values), so arithmetic
        # on them stays Python arithmetic even where the operator also has a symbol for tensors
        if not proxies_in((args, kwargs)) and (mapping.lookup(target) is None or _python_operator(target)):
            out = target(*args, **kwargs)
            if not any(isinstance(v, torch.Tensor) for v in tree_flatten(out)):
                return out  # Python arithmetic on sizes and the like
            return mapping.opaque(target)(*args, **kwargs)
        base = mapping.inplace_base(target)
        if base and args and isinstance(args[0], TensorProxy) and mapping.lookup(target) is None:
            fsym = mapping.functional_for(base)
            if fsym is not None:
                return self.inplace(args[0], fsym, target, args, kwargs)
            return self.real_inplace(args[0], mapping.opaque(target, side_effect=True), args, kwargs)
        if kwargs.get("inplace") is True and args and isinstance(args[0], TensorProxy):
            sym = mapping.lookup(target)
            if sym is not None:
                kw = {k: v for k, v in kwargs.items() if k != "inplace"}
                return self.inplace(args[0], sym, target, args, kw)
        sym = mapping.lookup(target)
        if sym is None:
            return self.track(mapping.opaque(target), args, kwargs)
        adapter = mapping.ADAPTERS.get(target)
        if adapter is not None:
            args, kwargs = adapter(*args, **kwargs)
        return self.track(sym, args, kwargs)

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
        sym = mapping.lookup_method(name)
        if sym is not None:
            return self.track(sym, args, kwargs)
        base = mapping.inplace_base(name)
        if base:
            if base in ("copy", "fill", "zero"):
                return self.inplace(self_, _SPECIAL_INPLACE[base], name, args, kwargs)
            fsym = mapping.functional_for(base)
            if fsym is not None:
                return self.inplace(self_, fsym, name, args, kwargs)
            return self.real_inplace(self_, mapping.opaque(None, method=name, side_effect=True), args, kwargs)
        return self.track(mapping.opaque(None, method=name), args, kwargs)

    def track(self, sym, args, kwargs):
        out = sym(*args, **kwargs)
        if sym.name in _VIEW_OPS or sym.name == "getitem":
            srcs = [a for a in args[:1] if isinstance(a, TensorProxy)]
            for s in srcs:
                root = self.bases.get(s.name, s)
                for o in proxies_in(out):
                    self.bases[o.name] = root
                self.has_views.add(root.name)
        return out

    # -- in-place -------------------------------------------------------------------------
    def inplace(self, target: TensorProxy, fsym, entry, args, kwargs):
        aliased = target.name in self.bases or target.name in self.has_views
        if aliased:
            if isinstance(entry, str):
                return self.real_inplace(target, mapping.opaque(None, method=entry, side_effect=True), args, kwargs)
            return self.real_inplace(target, mapping.opaque(entry, side_effect=True), args, kwargs)
        value = fsym(*args, **kwargs)
        if value.shape != target.shape:
            raise TraceError(f"in-place result of shape {list(value.shape)} does not fit {target.name} of shape {list(target.shape)}")
        if value.dtype != target.dtype:
            value = prims.convert_element_type(value, target.dtype)
        for n, v in list(self.env.items()):
            if v is target:
                self.env[n] = value
        root = next((k for k, p in self.inputs_by_name.items() if p is target), None)
        if root is None:
            root = next((k for k, v in self.writeback.items() if v is target), None)
        if root is not None:
            self.writeback[root] = value
        return value

    def real_inplace(self, target, sym, args, kwargs):
        sym(*args, **kwargs)
        return target


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


def _describe(node: torch.fx.Node) -> str:
    src = source_of(node)
    where = f" at {src.short()} ({src.code})" if src else ""
    target = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))
    return f"while tracing {node.op} {target!r}{where}"


def value_inputs(gm: torch.fx.GraphModule) -> tuple[int, ...]:
    """Positions of the inputs whose value the lowering reads (``x.item()`` on an input), so the program depends on it."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return tuple(i for i, p in enumerate(placeholders)
                 if any(u.op == "call_method" and u.target == "item" and u.args[0] is p for u in p.users))


def lower(gm: torch.fx.GraphModule, args, name: str = "forward") -> tuple[Trace, list[torch.Tensor]]:
    """The initial trace of ``gm`` for these concrete ``args``, and the lifted constant tensors."""
    low = Lowering(gm, name)
    return low.run(args), low.lifted
