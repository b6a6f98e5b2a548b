"""A cache entry's TorchDynamo guards as one Python expression, fixed to the values of a call they passed.

Dynamo's guard manager is a tree: each node reaches a value (a frame local, a global, an attribute,
a dict item) and checks it with leaf guards (its type, its id, a tensor's metadata). Checking the tree
from Python costs more than a one-op program runs: the frame's locals must first be packed into a
dict, and the C++ check walks every node. For small trees the check can be printed as Python instead.

The printed check is made right after Dynamo's own check passed on a call, from that call's values,
and it is as strict or stricter than the tree: every leaf becomes "the value is what it was then"
(the same object, type, length or number; a tensor's dtype, device, sizes, strides, dispatch keys
and requires_grad, through Dynamo's own ``TensorGuards``), the process-wide guards become Dynamo's
own ``GlobalStateGuard`` snapshot (grad mode, autocast, default dtype, deterministic algorithms,
thread count, torch-function state) and the cheap checks that the tree's ambient guards fixed
(no torch-function mode, no default-device context, no saved-tensor hooks). So whenever the printed
check passes, Dynamo's would have passed too; when it fails, the caller checks the tree as before.
A tree holding a guard kind not in ``LEAVES`` or a way of reaching a value not in ``STEPS`` (shape
guards of dynamic sizes, dict version tags, closures' contents reached through code objects...) is
not printed: ``compile_guards`` returns None and the tree is checked as it is.
"""
from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any

import torch

try:
    from torch._C._dynamo.guards import GlobalStateGuard, TensorGuards
except ImportError:  # pragma: no cover - another torch: every tree is checked by Dynamo
    GlobalStateGuard = TensorGuards = None

_NIL = object()  # what a missing attribute or key reads as: no guarded value is this object
_IMMUTABLE = (int, float, bool, str, bytes, type(None), torch.dtype, torch.device)
_SAVED_HOOKS = "torch._functorch.aot_autograd.utils.top_saved_tensors_hooks ids == None"
_DICT_CONTAINS = re.compile(r"^(not )?___dict_contains\(('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"), ")
_MAX_NODES = 12  # larger trees are checked faster by Dynamo's C++ walk than by printed Python


class _Printer:
    """Collects the names a printed check refers to, and its conditions in order."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.env: dict[str, Any] = {"_NIL": _NIL}
        self.conds: list[str] = []
        self.tensors: list[tuple[str, torch.Tensor]] = []  # (variable, value at the call) for one TensorGuards
        self.distinct: list[str] = []  # tensors Dynamo guards against being the same object (NO_TENSOR_ALIASING)
        self.plain: list[str] = []  # values with no attributes of their own (checked once their type is)
        self.nodes = 0
        self._n = 0

    def const(self, value) -> str:
        self._n += 1
        name = f"{self.prefix}c{self._n}"
        self.env[name] = value
        return name

    def var(self) -> str:
        self._n += 1
        return f"{self.prefix}v{self._n}"


class _Unprintable(Exception):
    """The tree holds something ``compile_guards`` does not print (the tree is checked by Dynamo)."""


def _immutable(v) -> bool:
    if isinstance(v, tuple):
        return all(_immutable(e) for e in v)
    return type(v) in _IMMUTABLE


# Leaf guards, by kind: each prints the condition(s) that hold for ``value`` (the call's) under variable ``v``.
def _type_match(p, v, value, guard):
    p.conds.append(f"type({v}) is {p.const(type(value))}")


def _id_match(p, v, value, guard):
    p.conds.append(f"{v} is {p.const(value)}")


def _equals_match(p, v, value, guard):
    if not _immutable(value) or value != value:  # a list may change in place; NaN equals nothing
        raise _Unprintable("EQUALS_MATCH on a mutable value")
    p.conds.append(f"type({v}) is {p.const(type(value))} and {v} == {p.const(value)}")


def _none_match(p, v, value, guard):
    p.conds.append(f"{v} is None")


def _not_none(p, v, value, guard):
    p.conds.append(f"{v} is not None")


def _length(p, v, value, guard):
    p.conds.append(f"len({v}) == {len(value)}")


def _tensor_match(p, v, value, guard):
    if not isinstance(value, torch.Tensor):
        raise _Unprintable("TENSOR_MATCH on a non-tensor")
    p.tensors.append((v, value))  # TensorGuards checks the Python type too


def _no_dynamic_marks(p, v, value, guard):
    # hasattr(x, '_dynamo_..._indices') is False: marks live in the tensor's own __dict__, which is empty now
    if getattr(value, "__dict__", None):
        raise _Unprintable("a tensor with attributes of its own")
    if v not in p.plain:
        p.plain.append(v)


def _no_aliasing(p, v, value, guard):
    if v not in p.distinct:
        p.distinct.append(v)


def _dict_contains(p, v, value, guard):
    m = _DICT_CONTAINS.match(guard.verbose_code_parts()[0])
    if m is None or not isinstance(value, dict):
        raise _Unprintable("DICT_CONTAINS not understood")
    key = ast.literal_eval(m.group(2))
    p.conds.append(f"({p.const(key)} in {v}) is {key in value}")


def _global_state(p, v, value, guard):
    p.conds.append(f"{p.const(GlobalStateGuard())}.check()")  # taken now, when Dynamo's check passed


def _torch_function_modes(p, v, value, guard):
    if torch._C._len_torch_function_stack():
        raise _Unprintable("torch-function modes are active")
    p.conds.append(f"{p.const(torch._C._len_torch_function_stack)}() == 0")


def _default_device(p, v, value, guard):
    import torch.utils._device as device_context

    if device_context.CURRENT_DEVICE is not None:
        raise _Unprintable("a default-device context is active")
    p.conds.append(f"{p.const(device_context)}.CURRENT_DEVICE is None")


def _lambda(p, v, value, guard):
    parts = guard.verbose_code_parts()
    if len(parts) != 1 or not parts[0].startswith(_SAVED_HOOKS):
        raise _Unprintable("a lambda guard")
    hooks = torch._C._autograd._top_saved_tensors_default_hooks
    if hooks(True) is not None:
        raise _Unprintable("saved-tensor hooks are set")
    p.conds.append(f"{p.const(hooks)}(True) is None")


LEAVES: dict[str, Callable] = {
    "TYPE_MATCH": _type_match, "ID_MATCH": _id_match, "EQUALS_MATCH": _equals_match, "NONE_MATCH": _none_match,
    "NOT_NONE": _not_none, "LENGTH_CHECK": _length, "DICT_LENGTH": _length, "TENSOR_MATCH": _tensor_match,
    "DIMENSION_DYNAMIC_MARKING_GUARD": _no_dynamic_marks, "NO_TENSOR_ALIASING": _no_aliasing,
    "DICT_CONTAINS": _dict_contains, "GLOBAL_STATE": _global_state,
    "TORCH_FUNCTION_MODE_STACK": _torch_function_modes, "DEFAULT_DEVICE": _default_device, "LAMBDA_GUARD": _lambda,
}

_ATTR = re.compile(r"^\.([A-Za-z_]\w*)$")
_ITEM = re.compile(r"^\[(.+)\]$")


def _attr(p, v, value, suffix):
    m = _ATTR.match(suffix)
    if m is None:
        raise _Unprintable(f"attribute {suffix!r}")
    name = m.group(1)
    return f"getattr({v}, {name!r}, _NIL)", getattr(value, name)


def _dict_item(p, v, value, suffix):
    m = _ITEM.match(suffix)
    if m is None or type(value) is not dict:
        raise _Unprintable(f"item {suffix!r}")
    key = ast.literal_eval(m.group(1))
    return f"({v}.get({p.const(key)}, _NIL) if type({v}) is dict else _NIL)", value[key]


def _tuple_item(p, v, value, suffix):
    m = _ITEM.match(suffix)
    if m is None or type(value) is not tuple:
        raise _Unprintable(f"item {suffix!r}")
    index = ast.literal_eval(m.group(1))
    if not isinstance(index, int) or not 0 <= index < len(value):
        raise _Unprintable(f"item {suffix!r}")
    return f"({v}[{index}] if type({v}) is tuple and len({v}) > {index} else _NIL)", value[index]


def _generic_dict(p, v, value, suffix):
    if suffix != ".__dict__":
        raise _Unprintable(f"generic dict {suffix!r}")
    return f"{v}.__dict__", value.__dict__


# How a child node reaches its value from its parent's, by Dynamo's accessor: (expression, value at the call)
STEPS: dict[str, Callable] = {
    "GetAttrGuardAccessor": _attr, "DictGetItemGuardAccessor": _dict_item,
    "TupleGetItemGuardAccessor": _tuple_item, "GetGenericDictGuardAccessor": _generic_dict,
}


def _node(p: _Printer, manager, v: str, value) -> None:
    p.nodes += 1
    if p.nodes > _MAX_NODES:
        raise _Unprintable("a large tree")
    for guard in manager.get_leaf_guards():
        rule = LEAVES.get(type(guard).__name__)
        if rule is None:
            raise _Unprintable(type(guard).__name__)
        rule(p, v, value, guard)
    source = manager.get_source()
    for accessor, child in zip(manager.get_accessors(), manager.get_child_managers()):
        step = STEPS.get(type(accessor).__name__)
        child_source = child.get_source()
        if step is None or not child_source.startswith(source):
            raise _Unprintable(type(accessor).__name__)
        expr, child_value = step(p, v, value, child_source[len(source):])
        w = p.var()
        p.conds.append(f"({w} := {expr}) is not _NIL")
        _node(p, child, w, child_value)


def compile_guards(root, locals_: dict[str, str], values: dict[str, Any], globals_: dict,
                   prefix: str = "_g") -> tuple[str, dict] | None:
    """The expression checking ``root`` (a RootGuardManager whose check just passed on ``values``), or None.

    ``locals_`` names the variable each frame local is in where the expression is evaluated, ``values``
    their values at the call; the returned dict holds the names the expression uses besides those (each
    starting with ``prefix``, or ``_NIL``), to be evaluated where ``type``, ``len``, ``id`` and ``getattr`` are
    the builtins.
    """
    if GlobalStateGuard is None or root.get_epilogue_lambda_guards():
        return None
    p = _Printer(prefix)
    try:
        for guard in root.get_leaf_guards():
            rule = LEAVES.get(type(guard).__name__)
            if rule is None:
                return None
            rule(p, "", None, guard)
        for accessor, child in zip(root.get_accessors(), root.get_child_managers()):
            kind = type(accessor).__name__
            source = child.get_source()
            if kind == "FrameLocalsGuardAccessor":
                m = re.match(r"^L\[(.+)\]$", source)
                name = ast.literal_eval(m.group(1)) if m else None
                if name not in locals_:
                    return None
                _node(p, child, locals_[name], values[name])
            elif kind == "GlobalsGuardAccessor" and source == "G":
                _node(p, child, p.const(globals_), globals_)
            else:
                return None
    except (_Unprintable, KeyError, AttributeError, IndexError, ValueError, SyntaxError):
        return None
    if p.tensors:
        ts = [t for _, t in p.tensors]
        guards = TensorGuards(*ts, dynamic_dims_sizes=[list(t.shape) for t in ts],
                              dynamic_dims_strides=[list(t.stride()) for t in ts])
        if not guards.check(*ts):  # pragma: no cover - the snapshot must hold for the values it was made from
            return None
        p.conds.append(f"{p.const(guards.check)}({', '.join(v for v, _ in p.tensors)})")
    if any(v not in {t for t, _ in p.tensors} for v in p.plain):
        return None
    p.conds.extend(f"not {v}.__dict__" for v in p.plain)
    if len(p.distinct) > 1:
        if len({id(t) for v, t in p.tensors if v in p.distinct}) != len(p.distinct):
            return None  # Dynamo's check passed, so they are distinct; but a tensor reached twice is not printed
        p.conds.append(f"len({{id(x) for x in ({', '.join(p.distinct)},)}}) == {len(p.distinct)}"
                       if len(p.distinct) > 2 else f"{p.distinct[0]} is not {p.distinct[1]}")
    return " and ".join(p.conds) or "True", p.env

