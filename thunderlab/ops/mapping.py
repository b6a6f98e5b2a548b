"""Which thunderlab symbol stands for a torch function, operator or Tensor method.

Targets that appear in Dynamo's FX graphs map to torch-level symbols; an adapter
reorders arguments where a torch entry point's signature differs from the symbol's.
Anything with no entry becomes an opaque torch call (see ``opaque``).
"""
from __future__ import annotations

import operator
import re
from collections.abc import Callable

import torch
import torch.nn.functional as F

from thunderlab.core.symbols import Symbol, Tag

from . import torch_ops  # noqa: F401  (every op declared before the tables below are built)
from .declare import OPAQUE, TORCH_SYMBOLS, on_declare
from .prims import torch_meta

FUNCTIONS: dict[Callable, Symbol] = {}
METHODS: dict[str, Symbol] = {}


@on_declare
def _map(sym: Symbol, fns: tuple, methods: tuple, override: bool = False) -> None:
    """File a declared op under the torch callables and Tensor methods it stands for (the first declared wins)."""
    for f in fns:
        FUNCTIONS[f] = sym if override else FUNCTIONS.get(f, sym)
    for m in methods:
        METHODS[m] = sym if override else METHODS.get(m, sym)



def _drop_stacklevel(a, dim=None, _stacklevel=3, dtype=None):
    return (a, dim), {"dtype": dtype} if dtype is not None else {}


def _torch_batch_norm(a, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled=True):
    return (a, running_mean, running_var, weight, bias, training, momentum, eps), {}


def _torch_layer_norm(a, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    return (a, normalized_shape, weight, bias, eps), {}


def _torch_group_norm(a, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    return (a, num_groups, weight, bias, eps), {}


def _torch_embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return (indices, weight), {}


# entry point -> function(args..., kwargs...) -> (args, kwargs) in the symbol's signature
ADAPTERS: dict[Callable, Callable] = {
    F.softmax: _drop_stacklevel,
    F.log_softmax: _drop_stacklevel,
    torch.batch_norm: _torch_batch_norm,
    torch.layer_norm: _torch_layer_norm,
    torch.group_norm: _torch_group_norm,
    torch.embedding: _torch_embedding,
}
for _f in (F.softmax, F.log_softmax):
    FUNCTIONS[_f] = TORCH_SYMBOLS[_f.__name__][0]
# Python's unary operators on tensors (-x, abs(x), ~x) reach the graph as operator.*
FUNCTIONS.update({operator.neg: TORCH_SYMBOLS["neg"][0], operator.abs: TORCH_SYMBOLS["abs"][0],
                  operator.invert: TORCH_SYMBOLS["bitwise_not"][0]})
for _m, _n in (("__neg__", "neg"), ("__abs__", "abs"), ("__invert__", "bitwise_not")):
    METHODS.setdefault(_m, TORCH_SYMBOLS[_n][0])

# in-place Python operators and their functional twins
INPLACE_OPERATORS = {
    operator.iadd: "add", operator.isub: "sub", operator.imul: "mul", operator.itruediv: "div",
    operator.ifloordiv: "floor_divide", operator.imod: "remainder", operator.ipow: "pow",
    operator.iand: "bitwise_and", operator.ior: "bitwise_or", operator.ixor: "bitwise_xor",
}


def lookup(target) -> Symbol | None:
    """The symbol for a call_function target, or None."""
    try:
        return FUNCTIONS.get(target)
    except TypeError:  # unhashable target
        return None


def lookup_method(name: str) -> Symbol | None:
    return METHODS.get(name)


def inplace_base(target) -> str | None:
    """For an in-place entry point (``add_``, ``torch.relu_``, ``operator.iadd``), its functional name."""
    if target in INPLACE_OPERATORS:
        return INPLACE_OPERATORS[target]
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    if name.endswith("_") and not name.endswith("__") and len(name) > 1:
        return name[:-1]
    return None


def functional_for(name: str) -> Symbol | None:
    if name in TORCH_SYMBOLS:
        return TORCH_SYMBOLS[name][0]
    return METHODS.get(name)




def _qualname(fn) -> str | None:
    """A dotted name that resolves back to ``fn`` from ``torch``, if there is one."""
    mod = getattr(fn, "__module__", None) or ""
    qual = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if qual and qual.startswith("_VariableFunctionsClass."):
        qual = qual.split(".", 1)[1]
    candidates = []
    if isinstance(fn, torch._ops.OpOverload):  # an operator, a custom one included: torch.ops.<ns>.<op>.<overload>
        candidates.append(f"torch.ops.{fn.namespace}.{fn._opname}.{fn._overloadname}")
    if qual:
        if mod.startswith("torch"):
            candidates.append(f"{mod}.{qual}")
        candidates += [f"torch.{qual}", f"torch.nn.functional.{qual}", f"torch.Tensor.{qual}", f"torch._C._nn.{qual}"]
    for c in candidates:
        if c.split(".")[0] == "torch" and torch_attribute(c.partition(".")[2]) is fn:
            return c
    return None


def torch_attribute(path: str):
    """``torch.<path>`` (``path`` such as ``Tensor.masked_fill``), or None where there is none."""
    obj = torch
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _identifier(name: str) -> str:
    """``name`` made a Python identifier (a lambda's ``<lambda>``, an operator's ``op.default``)."""
    return re.sub(r"\W", "_", name)


# a derived or custom-operator symbol's qualname -> how another process makes the same symbol (``rebuild``)
REBUILD: dict[str, dict] = {}


def opaque(fn, *, method: str | None = None, side_effect: bool = False) -> Symbol:
    """A symbol that calls ``fn`` (or Tensor method ``method``) as is: shown in the trace, never decomposed.

    A call of it seen to draw random numbers, or to write into an argument (``torch.instance_norm``'s
    running statistics), while its metadata is computed has RANDOM or SIDE_EFFECT in its own
    ``BoundSymbol.effects``, so that no pass merges, drops, moves or recomputes that call; the
    symbol, shared by every call and every record, stays as declared.
    """
    key = (("method", method) if method else fn, side_effect)
    sym = OPAQUE.get(key)
    if sym is None:
        if method:
            impl = getattr(torch.Tensor, method, None) or (lambda self, *a, **k: getattr(self, method)(*a, **k))
            qual = f"torch.Tensor.{method}" if hasattr(torch.Tensor, method) else None
            name = method
        else:
            impl, qual, name = fn, _qualname(fn), getattr(fn, "__name__", "call")
            # an operator whose schema writes to an argument (a custom op declared with mutates_args)
            side_effect = side_effect or (isinstance(fn, torch._ops.OpOverload) and fn._schema.is_mutable)
        tags = {Tag.SIDE_EFFECT} if side_effect else set()
        if method is not None or of_torch(fn):
            tags.add(Tag.TORCH_TRACEABLE)
        sym = Symbol(name=name, module="torch", impl=impl,
                     meta=torch_meta(impl, qual or name, watch=frozenset({Tag.RANDOM, Tag.SIDE_EFFECT})),
                     tags=tags,
                     qualname=qual or f"_opaque_{len(OPAQUE)}_{_identifier(name)}")
        OPAQUE[key] = sym
        recipe = _custom_op_recipe(fn) if method is None else None
        if recipe is not None:  # printed as torch.ops.<ns>.<op> or, for a packet, _opaque_<n>_<op>
            REBUILD.setdefault(sym.qualname, dict(recipe, side_effect=side_effect))
    return sym


def _custom_op_recipe(fn) -> dict | None:
    """For an operator made with ``torch.library.custom_op``: its name under ``torch.ops`` and the module whose import
    registers it (another process has the operator once it imports that module)."""
    if not isinstance(fn, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return None
    from torch._library.custom_ops import OPDEFS

    packet = fn.overloadpacket if isinstance(fn, torch._ops.OpOverload) else fn
    opdef = OPDEFS.get(packet._qualified_op_name)
    module = getattr(getattr(opdef, "_init_fn", None), "__module__", None)
    if module is None or module == "__main__":
        return None
    return {"op": op_path(fn), "module": module}


def op_path(fn) -> str | None:
    """``torch.ops.<ns>.<op>`` for an operator's packet, ``torch.ops.<ns>.<op>.<overload>`` for an overload, else
    None."""
    if isinstance(fn, torch._ops.OpOverload):
        return f"{op_path(fn.overloadpacket)}.{fn._overloadname}"
    if isinstance(fn, torch._ops.OpOverloadPacket):
        return "torch.ops." + fn._qualified_op_name.replace("::", ".")
    return None


def of_torch(fn) -> bool:
    """Whether ``fn`` is a PyTorch operator (an ``OpOverload``, a custom op) or a function of torch's own modules:
    what TorchDynamo traces into a graph (it put the call in the one thunderlab lowered, with fixed output sizes:
    a graph with sizes only known at run time is refused, see frontend/dynamo.py)."""
    if isinstance(fn, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return True
    if getattr(fn, "__objclass__", None) in (torch._C.TensorBase, torch.Tensor):  # a Tensor method
        return True
    module = getattr(fn, "__module__", None) or ""
    return (module == "torch" or module.startswith("torch.")) and not module.startswith("torch.autograd")


def functional_symbol(fn, name: str) -> Symbol:
    """The functional twin of an in-place call: the same call on a copy of its target.

    Made when a program is lowered, so not importable by another process: ``REBUILD`` keeps how to make it again
    (``rebuild``), for the compile worker (executors/compile_process.py), where ``fn`` has a name to find it by (so
    it does for an opaque call of a custom operator, which another process has once it imports the operator's
    module).
    """
    if fn is operator.setitem:
        def functional(target, index, value):
            out = target.clone()
            out[index] = value  # the statement, not operator.setitem: TorchDynamo traces only the statement
            return out
    else:
        def functional(target, *args, **kwargs):
            out = target.clone()
            fn(out, *args, **kwargs)
            return out

    sym = derived(("functional", fn), f"{name.strip('_')}_functional", functional,
                  random=name in _RANDOM_INPLACE, traceable=of_torch(fn) or fn is operator.setitem)
    where = _findable_name(fn)
    if where is not None:
        REBUILD.setdefault(sym.qualname, {"functional": where, "name": name})
    return sym


def scatter_symbol(fn, index: int | None, name: str) -> Symbol:
    """A view's inverse: ``prev`` with the part that ``fn(prev, *args, **kwargs)`` views (its ``index``-th result
    when it returns several) made ``new``, on a copy. ``REBUILD`` keeps how to make it again, as for
    ``functional_symbol``."""
    def scatter(prev, new, *args, **kwargs):
        out = prev.clone(memory_format=torch.contiguous_format)
        view = fn(out, *args, **kwargs)
        (view[index] if index is not None else view).copy_(new)
        return out

    sym = derived(("scatter", fn, index), f"{name.strip('_')}_scatter", scatter,
                  traceable=of_torch(fn) or fn is operator.getitem)
    where = _findable_name(fn)
    if where is not None:
        REBUILD.setdefault(sym.qualname, {"scatter": where, "index": index, "name": name})
    return sym


_RANDOM_INPLACE = {"uniform_", "normal_", "bernoulli_", "exponential_", "geometric_", "cauchy_", "log_normal_",
                   "random_"}


def _findable_name(fn) -> str | None:
    """``operator.setitem``, ``torch.Tensor.add_``, ``torch.add``...: a name ``_find`` gives ``fn`` back for."""
    for where, known in _PYTHON_CALLS.items():
        if fn is known:
            return where
    name = getattr(fn, "__name__", None)
    for where in ([f"torch.Tensor.{name}", f"torch.{name}"] if name else []) + [_qualname(fn)]:
        if where is not None and _find(where) is fn:
            return where
    return None


# Python's own calls that programs write into tensors or view them with (``x[i] = v``, ``x[i]``, ``x.T``)
_PYTHON_CALLS = {"operator.setitem": operator.setitem, "operator.getitem": operator.getitem, "getattr": getattr}


def _find(where: str):
    if where in _PYTHON_CALLS:
        return _PYTHON_CALLS[where]
    head, _, path = where.partition(".")
    return torch_attribute(path) if head == "torch" else None


def rebuild(recipe: dict) -> Symbol:
    """The symbol a ``REBUILD`` entry describes, made in this process (under a qualname of this process's)."""
    if "op" in recipe:  # a custom operator: registered by importing its module
        import importlib

        importlib.import_module(recipe["module"])
        op = _find(recipe["op"])
        if op is None:
            raise LookupError(f"importing {recipe['module']} did not register {recipe['op']}")
        return opaque(op, side_effect=recipe.get("side_effect", False))
    where = recipe.get("functional") or recipe["scatter"]
    fn = _find(where)
    if fn is None:
        raise LookupError(f"{where} is not a function of this torch")
    if "scatter" in recipe:
        return scatter_symbol(fn, recipe["index"], recipe["name"])
    return functional_symbol(fn, recipe["name"])


def derived(key, name: str, impl: Callable, *, random: bool = False, meta: Callable | None = None,
            traceable: bool = False) -> Symbol:
    """An opaque symbol for a function built from a torch call (an in-place op's functional twin, a view's inverse).

    It prints as ``name`` (made unique) and differentiates through PyTorch like any opaque call. ``traceable``:
    ``impl`` makes only PyTorch calls, each with fixed output sizes (``Tag.TORCH_TRACEABLE``).
    """
    sym = OPAQUE.get(key)
    if sym is None:
        taken = {s.qualname for s in OPAQUE.values()}
        qual = f"_{name}" if f"_{name}" not in taken else f"_{name}_{len(OPAQUE)}"
        sym = Symbol(name=name, module="torch", impl=impl,
                     meta=meta or torch_meta(impl, name, watch=frozenset({Tag.RANDOM})),
                     tags=({Tag.RANDOM} if random else set()) | ({Tag.TORCH_TRACEABLE} if traceable else set()),
                     qualname=qual)
        OPAQUE[key] = sym
    return sym
