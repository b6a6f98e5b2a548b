"""TorchDynamo's captures kept on disk: a later process runs a jitted function without capturing it again.

Most of ``thunderlab.jit``'s first call is TorchDynamo's capture of the function: its bytecode traced op by op on
fake tensors, then its guards built (0.3 s for a small GPT's training step, 1.4 s for a Hugging Face GPT-2's
forward on this machine). A script run a second time captures the same function again, as ``torch.compile`` does.
Here each capture of a jitted function's own frame (one graph, no graph break) is kept beside Inductor's cache
(``cache_folder("thunderlab_captures")``), and a later process whose call passes its guards runs it with no
TorchDynamo at all: the graph is compiled by thunderlab as a captured one is (its record, tiering, the race).

What is kept, per capture:

* the frame's guards, serialized by TorchDynamo as for its own precompiled packages: each check with the value it
  compares with. They are built from every guard TorchDynamo made, those ``attribute_guards.collapse`` replaced in
  this process included (a dictionary's version means nothing to another process);
* the guards TorchDynamo cannot serialize: that a name reads a given module, function or class
  (``torch.nn.functional.gelu``, ``builtins.iter``). Each is kept as a description of the object (the module's name;
  the module, qualified name and a digest of a function's code) that the object the name reads when the capture is
  loaded must match; after that, every call checks that the name still reads that very object, as TorchDynamo's
  identity guards do. An instance that pickles itself as its module's global (the ``kernels`` package's function
  modules, which transformers' LLaMA reads) is described so too, and one of a class defined inside a function is
  kept where it says itself how it is made again as an instance of that class (its type guard is then rebuilt
  from the remade one). A guard on the identity of any other instance keeps the capture from being kept;
* the frame's bytecode as TorchDynamo rewrote it, and the globals it installed for it (modules and named objects);
* the FX graph, node by node, with each node's source line and eager dtype (what thunderlab's lowering reads);
* a digest of each file whose code TorchDynamo traced: an edited model, or another version of a library, and the
  capture is not used. Code made at run time (a dataclass's ``__init__``, named ``<string>``) has no file of its
  own: it is made again from its class, and the class's file is checked where the capture traced code of it.

A loaded capture's guards are built from the scope TorchDynamo kept, where a guarded object is a copy and the
identity guards are missing (checked apart, in Python). On the third call that passes them (``Kept.passed``), they
are built again from that call's values, with the identity guards in the tree and the config guards collapsed
(``_live_manager``): the check then costs what TorchDynamo's own entry's does.

Every file is also keyed by ``code_identity()`` (torch, Python, thunderlab's own code, the compile environment)
and by the jitted function's module, name and code. A call loads the kept captures its tensors could match (their
sizes, for a capture with static sizes), newest first, and runs the first whose guards pass; when none does, the
call goes through TorchDynamo as ever, and that capture is kept for the next process (up to eight a function).

Keeping and loading are a fast path (``thunderlab.core.fastpaths``): ``THUNDERLAB_CAPTURES=0`` in the environment,
or ``set_fast_paths(False)``, turns them off, and every first call is captured by TorchDynamo. Only calls that take
the direct-call path (``dispatch.DirectCalls``) load captures; a call TorchDynamo must see (a module with hooks, a
call made under a profiler's frame hook) is captured anew.
"""
from __future__ import annotations

import builtins
import enum
import functools
import hashlib
import importlib
import inspect
import itertools
import os
import pickle
import re
import sys
import time
import types
import warnings
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch

from thunderlab.core import fastpaths
from thunderlab.core.files import cache_folder, code_identity, write_atomically
from thunderlab.core.notes import Notes

FOLDER = "thunderlab_captures"
_FORMAT = 1  # what a kept file holds; a file of another format is not read
_KEPT_MAX = 8  # captures kept per function, the newest first
# TorchDynamo's guards on the identity of an object: they cannot be serialized, and are kept as descriptions
_IDENTITY = ("ID_MATCH", "CLOSURE_MATCH", "FUNCTION_MATCH", "CLASS_MATCH", "MODULE_MATCH", "BUILTIN_MATCH")
# the call of a loaded capture on which its guards are built again from the live values (Kept.passed)
REBUILD_AT = 3
_serial = itertools.count(1)  # names each loaded capture's graph apart in its function's module globals


def enabled() -> bool:
    """Whether captures are kept and loaded (on unless ``THUNDERLAB_CAPTURES=0`` is in the environment, or every
    fast path is off)."""
    return fastpaths.switched_on("THUNDERLAB_CAPTURES") and fastpaths.enabled()


class NotKept(Exception):
    """Why a capture cannot be kept, or a kept one cannot be used here."""


# ---- descriptions of objects, and of the files traced code came from ----

def describe(value) -> tuple | None:
    """What identifies ``value`` across processes, or None for an object nothing but its identity names."""
    if isinstance(value, types.ModuleType):
        return ("module", value.__name__)
    if isinstance(value, types.CodeType):
        return ("code", value.co_qualname, _code_digest(value))
    if isinstance(value, enum.Enum):
        return ("enum", type(value).__module__, type(value).__qualname__, value.name)
    module, name = getattr(value, "__module__", None), getattr(value, "_name", None)
    if isinstance(module, str) and isinstance(name, str) and module in sys.modules and \
            getattr(sys.modules[module], name, None) is value:  # a module's named singleton (typing.Any)
        return ("named", type(value).__qualname__, module, name)
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type, types.MethodDescriptorType,
                          types.WrapperDescriptorType, types.ClassMethodDescriptorType, torch._ops.OpOverloadPacket,
                          torch._ops.OpOverload)):
        code = getattr(value, "__code__", None)
        digest = _code_digest(code) if isinstance(code, types.CodeType) else None
        return ("object", type(value).__name__, getattr(value, "__module__", None),
                getattr(value, "__qualname__", getattr(value, "__name__", None)), digest)
    if isinstance(module, str) and module in sys.modules:
        name = _own_reduction(value)
        if isinstance(name, str) and getattr(sys.modules[module], name, None) is value:
            # an instance that pickles as its module's global (the `kernels` package's function modules)
            return ("global", type(value).__qualname__, module, name)
    return None


_PLAIN = (int, float, complex, bool, str, bytes, type(None), torch.dtype, torch.device, torch.memory_format,
          torch.layout)


def fingerprint(value) -> tuple | None:
    """What a guard compares of ``value``, where another process may rebuild it from elsewhere: a plain value
    itself, a container's length and keys, another object's type (None: tensors, modules and functions, which
    their own guards keep)."""
    if type(value) in _PLAIN or isinstance(value, enum.Enum):
        return ("value", value)
    if type(value) in (tuple, list):
        parts = tuple(fingerprint(v) for v in value)
        return ("sequence", type(value).__name__, parts)
    if isinstance(value, dict):
        return ("dict", tuple(repr(k) for k in value))
    if isinstance(value, (torch.Tensor, torch.nn.Module, types.ModuleType, type)) or callable(value):
        return None
    return _type_of(value)


# guards that compare only a value's type: a name guarded by nothing else is kept by its type alone (TorchDynamo
# guards ``os.environ._data``, which transformers' sdpa attention reads a flag from, by its type: the environment's
# other variables, and their order, are not what the capture depends on)
_TYPE_ONLY = frozenset({"TYPE_MATCH"})


def _type_of(value) -> tuple:
    return ("type", type(value).__module__, type(value).__qualname__)


def _printed_as(value, kept: tuple) -> tuple | None:
    """``value`` printed as ``kept`` was: by its type alone where ``kept`` is a type, else as ``fingerprint``."""
    return _type_of(value) if kept[0] == "type" else fingerprint(value)


def _shown(printed: tuple | None) -> str:
    return "another object" if printed is None else repr(printed[-1])


def _code_digest(code: types.CodeType) -> str:
    h = hashlib.sha256()

    def walk(c: types.CodeType) -> None:
        h.update(c.co_code)
        h.update(repr(c.co_names).encode())
        h.update(repr(c.co_varnames).encode())
        h.update(repr(c.co_freevars).encode())
        for k in c.co_consts:
            if isinstance(k, types.CodeType):
                walk(k)
            else:
                h.update(repr(k).encode())

    walk(code)
    return h.hexdigest()[:32]


_FILE_DIGESTS: dict[tuple[str, int, int], str] = {}


def file_digest(path: str) -> str | None:
    """The digest of a source file's bytes (None where it cannot be read); remembered per path, size and mtime."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (path, st.st_size, st.st_mtime_ns)
    known = _FILE_DIGESTS.get(key)
    if known is None:
        try:
            with open(path, "rb") as f:
                known = hashlib.sha256(f.read()).hexdigest()[:32]
        except OSError:
            return None
        _FILE_DIGESTS[key] = known
    return known


def _resolve(module: str, qualname: str):
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


# ---- the FX graph, node by node ----

class _Ref:
    """A node as another node's argument, by name."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __reduce__(self):
        return (_Ref, (self.name,))


def encode_graph(gm: torch.fx.GraphModule, metas: dict[str, dict]) -> dict:
    """``gm`` as plain data: its nodes (name, op, target, arguments with nodes by name, the kept metadata) and the
    attributes its ``get_attr`` nodes read (tensors, or graphs encoded the same way)."""
    nodes, attrs = [], {}
    for n in gm.graph.nodes:
        args = torch.fx.node.map_arg(n.args, lambda a: _Ref(a.name))
        kwargs = torch.fx.node.map_arg(n.kwargs, lambda a: _Ref(a.name))
        if n.op == "get_attr":
            value = gm
            for part in n.target.split("."):
                value = getattr(value, part)
            if isinstance(value, torch.fx.GraphModule):
                attrs[n.target] = ("graph", encode_graph(value, {m.name: _node_meta(m) for m in value.graph.nodes}))
            elif isinstance(value, torch.Tensor):
                attrs[n.target] = ("tensor", value.detach().clone() if not isinstance(value, torch.nn.Parameter)
                                   else torch.nn.Parameter(value.detach().clone(), value.requires_grad))
            else:
                raise NotKept(f"the graph reads an attribute {n.target!r} of type {type(value).__name__}")
        target = _named_target(n.target) if n.op == "call_function" else n.target
        for leaf in torch.utils._pytree.tree_leaves((args, kwargs)):
            if not isinstance(leaf, (_Ref, *_PLAIN, slice, type(Ellipsis))) and not _comes_back(leaf):
                raise NotKept(f"node {n.name} takes {leaf!r}, which another process cannot make again")
        nodes.append((n.name, n.op, target, args, kwargs, metas.get(n.name, {})))
    return {"nodes": nodes, "attrs": attrs}


def _named_target(target):
    """What names a call's target in another process: an operator by its namespace and name, anything else by
    pickle, where unpickling gives the very object back."""
    if isinstance(target, torch._ops.OpOverload):
        named = ("op", target.namespace, target._opname, target._overloadname)
    elif isinstance(target, torch._ops.OpOverloadPacket):
        named = ("packet", *target._qualified_op_name.split("::"))
    elif isinstance(target, torch._ops.HigherOrderOperator):
        named = ("higher_order", target.name())
    elif _comes_back(target):
        return target
    else:  # a function made inside another and kept under a name in its module (torch.nn.functional.max_pool2d)
        module = sys.modules.get(getattr(target, "__module__", None) or "")
        name = next((k for k, v in vars(module).items() if v is target), None) if module is not None else None
        if name is None:
            raise NotKept(f"the graph calls {target!r}, which another process cannot name")
        named = ("attr", module.__name__, name)
    if _target(named) is not target:
        raise NotKept(f"the graph calls {target!r}, which another process cannot name")
    return _Target(named)


class _Target:
    """A call's target by name (see ``_named_target``)."""

    __slots__ = ("named",)

    def __init__(self, named: tuple):
        self.named = named

    def __reduce__(self):
        return (_Target, (self.named,))


def _target(named: tuple):
    kind, *parts = named
    if kind == "op":
        ns, name, overload = parts
        return getattr(getattr(getattr(torch.ops, ns), name), overload)
    if kind == "packet":
        return getattr(getattr(torch.ops, parts[0]), parts[1])
    if kind == "attr":
        return getattr(importlib.import_module(parts[0]), parts[1])
    return getattr(torch.ops.higher_order, parts[0])


def _comes_back(obj) -> bool:
    """Whether pickling ``obj`` and unpickling it gives the very object (a function or class named by its module)."""
    try:
        return pickle.loads(pickle.dumps(obj)) is obj  # noqa: S301 - our own bytes, made just now
    except Exception:  # noqa: BLE001 - anything pickle refuses
        return False


def decode_graph(data: dict) -> torch.fx.GraphModule:
    root = torch.nn.Module()
    for target, (kind, value) in data["attrs"].items():
        owner = root
        *path, last = target.split(".")
        for part in path:
            if not hasattr(owner, part):
                owner.add_module(part, torch.nn.Module())
            owner = getattr(owner, part)
        if kind == "graph":
            owner.add_module(last, decode_graph(value))
        elif isinstance(value, torch.nn.Parameter):
            owner.register_parameter(last, value)
        else:
            owner.register_buffer(last, value)
    graph = torch.fx.Graph()
    made: dict[str, torch.fx.Node] = {}

    def back(a):
        if isinstance(a, _Ref):
            return made[a.name]
        if isinstance(a, (list, tuple)):
            out = [back(v) for v in a]
            return type(a)(out) if not hasattr(a, "_fields") else type(a)(*out)
        if isinstance(a, dict):
            return {k: back(v) for k, v in a.items()}
        if isinstance(a, slice):
            return slice(back(a.start), back(a.stop), back(a.step))
        return a

    for name, op, target, args, kwargs, meta in data["nodes"]:
        if isinstance(target, _Target):
            target = _target(target.named)
        node = graph.create_node(op, target, back(args), back(kwargs), name=name)
        if node.name != name:
            raise NotKept(f"node {name!r} came back as {node.name!r}")
        node.meta.update(meta)
        made[name] = node
    return torch.fx.GraphModule(root, graph)


def _node_meta(node: torch.fx.Node) -> dict:
    """What thunderlab's lowering reads of a node's metadata: its source line and module path, and its eager dtype."""
    from .autocast import EAGER_DTYPE, eager_dtype

    meta: dict[str, Any] = {EAGER_DTYPE: eager_dtype(node)}
    if node.meta.get("stack_trace"):
        meta["stack_trace"] = node.meta["stack_trace"]
    stack = node.meta.get("nn_module_stack")
    if stack:
        meta["nn_module_stack"] = {k: (str(v[0]), None) for k, v in stack.items()}
    return meta


# ---- the call's tensors, to choose which kept captures to load ----

def signature(frame_locals: dict) -> tuple:
    """Each tensor among the frame's locals (and one level into tuples, lists and dicts): where, its sizes, dtype
    and whether it requires grad."""
    found = []
    for name, v in frame_locals.items():
        items = ((name, v),)
        if isinstance(v, (tuple, list)):
            items = tuple((f"{name}[{i}]", x) for i, x in enumerate(v))
        elif isinstance(v, dict):
            items = tuple((f"{name}[{k!r}]", x) for k, x in v.items())
        for where, x in items:
            if isinstance(x, torch.Tensor):
                found.append((where, tuple(x.shape), str(x.dtype), x.requires_grad))
    return tuple(found)


def _may_match(kept: tuple, static: bool, now: tuple) -> bool:
    if len(kept) != len(now):
        return False
    for (w1, s1, d1, r1), (w2, s2, d2, r2) in zip(kept, now):
        if w1 != w2 or d1 != d2 or r1 != r2 or len(s1) != len(s2) or (static and s1 != s2):
            return False
    return True


# ---- a loaded capture, standing in for one of TorchDynamo's cache entries ----

class Kept:
    """A capture loaded from disk, as ``DirectCalls`` uses one of TorchDynamo's cache entries: its rewritten
    ``code``, its ``guard_manager`` and the ``backend`` that made its graph, with ``identity``, the check that the
    names its identity guards read still read the objects they read when it was loaded (given the frame's locals),
    or None where the guard manager checks them itself.

    Its guards as loaded check every call; on the ``REBUILD_AT``-th call that passes them they are built again from
    that call's values (``_live_manager``), ``rebuild`` until then: a rebuild costs about what loading did (0.05-0.1 s
    on a BERT) and saves tens of microseconds a call, which pays only over many calls, and a loaded first call no
    longer waits for it."""

    __slots__ = ("code", "guard_manager", "backend", "identity", "graph", "saved", "held", "rebuild", "calls",
                 "__weakref__")

    def __init__(self, code, guard_manager, backend, identity, graph, saved: float, held: list, rebuild=None):
        self.code, self.guard_manager, self.backend = code, guard_manager, backend
        self.identity, self.graph, self.saved = identity, graph, saved
        self.held = held  # the objects its identity guards name, kept alive: their ids cannot be reused
        self.rebuild: Callable[[dict], Any] | None = rebuild
        self.calls = 0

    def passed(self, frame_locals: dict) -> bool:
        """Count a call that passed the loaded guards (``rebuild`` is set); on the ``REBUILD_AT``-th, build them
        again from its values. True where the guard manager was replaced (and ``identity`` is then None)."""
        self.calls += 1
        if self.calls < REBUILD_AT:
            return False
        rebuild, self.rebuild = self.rebuild, None
        live = rebuild(frame_locals)
        if live is None:  # the loaded guards stay
            return False
        self.guard_manager, self.identity = live, None  # the identity guards are in its tree
        return True


def _identity_check(names: list[str], objects: list, globals_: dict) -> Callable[[dict], bool]:
    """A function of the frame's locals that answers whether every name reads its object (``is``)."""
    if not names:
        return _always
    env = {"G": globals_, **{f"_o{i}": o for i, o in enumerate(objects)}}
    body = " and ".join(f"({name}) is _o{i}" for i, name in enumerate(names))
    src = f"def check(L):\n    try:\n        return {body}\n    except Exception:\n        return False\n"
    exec(compile(src, "<thunderlab kept capture identity>", "exec"), env)
    return env["check"]


def _always(L) -> bool:
    return True


def _evaluate(name: str, globals_: dict, frame_locals: dict):
    return eval(name, {"G": globals_, "L": frame_locals, "__builtins__": builtins})  # noqa: S307 - TorchDynamo's own source names


_ABSENT = ("absent",)


def _telling(entries: list[dict]) -> list[str]:
    """The guarded names whose kept values differ between ``entries`` (none for fewer than two)."""
    if len(entries) < 2:
        return []
    first, rest = entries[0]["guard_values"], [e["guard_values"] for e in entries[1:]]
    names = {n for e in entries for n in e["guard_values"]}
    return sorted(n for n in names if any(not _same(v.get(n, _ABSENT), first.get(n, _ABSENT)) for v in rest))


def _differs(entry: dict, names: list[str], globals_: dict, frame_locals: dict) -> tuple | None:
    """The first of ``names`` that ``entry`` kept a value for and that reads another one in this call, as (name,
    kept, now); None where none does, or none can be read here (loading then decides, by the guards)."""
    for name in names:
        kept = entry["guard_values"].get(name, _ABSENT)
        if kept is _ABSENT:
            continue
        try:
            live = _printed_as(_evaluate(name, globals_, frame_locals), kept)
        except Exception:  # noqa: BLE001 - a name this call cannot read: its guard will say
            continue
        if live is not None and not _same(live, kept):
            return name, kept, live
    return None


def _same(a, b) -> bool:
    """Kept values alike: equal, or printed alike (a NaN is not equal to itself)."""
    return a == b or repr(a) == repr(b)


# ---- one jitted function's kept captures ----

class Store:
    """The captures kept for one jitted function (``func``, the plain function TorchDynamo's frame runs), made by
    ``backend`` and reached through ``link``. ``kept`` and ``loaded`` count captures written and read by this
    process; ``why_not`` says why the last capture was not kept, or the last kept one not used."""

    def __init__(self, func: types.FunctionType, backend, link):
        self.func = func
        self.backend = weakref.ref(backend)
        self.link = link
        key = hashlib.sha256("\0".join((code_identity(), func.__module__ or "", func.__qualname__,
                                        _code_digest(func.__code__))).encode()).hexdigest()[:40]
        self.path = cache_folder(FOLDER) / f"{key}.pkl"
        self.pending: dict | None = None  # a capture seen by the backend, until its guards are built
        self.ready: dict | None = None  # a capture whose guards are built, until its bytecode is known
        self._file: list[dict] | None = None  # what the file holds, read at the first need
        self._tried: set[str] = set()  # ids of kept captures loaded or refused here
        self._untried = True  # whether the file may hold captures not in _tried (not read yet: it may)
        self._refused: str | None = None  # why a capture of this function could not be kept, as the file says
        self.kept = 0
        self.loaded = 0
        self.load_s = 0.0
        self.why_not = ""
        self._installed: list[str] = []  # names this store put in the function's module globals
        weakref.finalize(self, _forget, func.__globals__, self._installed)

    # -- keeping: the backend's call, TorchDynamo's guard export, then the call's return --

    def captured(self, gm: torch.fx.GraphModule, graph, guards_before: list, origin: Notes) -> None:
        """The backend is compiling ``gm`` as ``graph`` in a frame TorchDynamo is capturing; ``guards_before`` are the
        frame's guards before ``attribute_guards.collapse`` replaced some."""
        self.pending = None
        if not enabled():
            return
        try:
            from torch._dynamo.symbolic_convert import tls

            tx = tls.current_tx
            output, code = tx.output, tx.output.root_tx.f_code
        except AttributeError:
            return
        if code is not self.func.__code__:
            return  # a resumed frame after a graph break, or a function the jitted one calls
        self._read()
        if self._refused:  # serializing the guards again would cost what it cost then, for nothing
            self.why_not = f"not kept: an earlier process could not keep this function's capture ({self._refused})"
            return
        self.pending = {"output": output, "graph": graph, "gm": gm, "before": guards_before,
                        "after": list(output.guards.inner), "origin": origin,
                        "metas": {n.name: _node_meta(n) for n in gm.graph.nodes},
                        "static": graph.static, "values": graph.value_inputs,
                        "grad": torch.is_grad_enabled()}  # the frame's grad mode, which TorchDynamo guards

    def guards_built(self, guards) -> None:
        """TorchDynamo built the frame's guards (its ``guard_export_fn``): serialize them, while the frame's
        capture is still at hand."""
        pending, self.pending = self.pending, None
        if pending is None:
            return
        try:
            self.ready = self._serialize_guards(pending)
        except NotKept as e:
            self._refuse(str(e))
        except Exception as e:  # noqa: BLE001 - keeping is an optimization: the call goes on as captured
            self._refuse(f"serializing the guards failed ({type(e).__name__}: {e})")

    def _refuse(self, why: str) -> None:
        """This capture cannot be kept: say why, and note it in the file, so that later processes spend nothing on
        trying again (the file's key changes with the function's code and thunderlab's)."""
        self.why_not = f"not kept: {why}"
        self._refused = why
        try:
            self._store()
        except Exception:  # noqa: BLE001 - a note that only saves work
            pass

    def _serialize_guards(self, pending: dict) -> dict:
        from torch._dynamo import guards as dynamo_guards
        from torch._dynamo.guards import CheckFunctionManager
        from torch.utils._ordered_set import OrderedSet

        output = pending["output"]
        guard_set = output.guards
        added = set(pending["after"]) - set(pending["before"])
        dropped = [g for g in pending["before"] if g not in set(pending["after"])]
        # every guard TorchDynamo made: those the collapse replaced by a dictionary version, not the replacements
        whole = OrderedSet([g for g in guard_set.inner if g not in added] + dropped)
        scope = {"G": output.global_scope, "L": output.local_scope}
        identity: dict[str, tuple] = {}  # (TorchDynamo may filter the guards twice: once per name)
        identity_guards: dict[int, Any] = {}  # the identity guards themselves, to build again where loaded
        refused: list[str] = []

        values: dict[str, tuple] = {}

        guard_globals: set[str] = set()  # the module globals the guards read

        def keep(entries):
            verdicts = []
            for e in entries:
                guard_globals.update(_GLOBAL.findall(e.orig_guard.name))
                kinds = (e.guard_type, *e.derived_guard_types)
                if not any(k in CheckFunctionManager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES for k in kinds):
                    verdicts.append(True)
                    printed = fingerprint(e.value) if e.has_value else None
                    if printed is not None:
                        name = e.orig_guard.name
                        if set(kinds) <= _TYPE_ONLY:
                            printed = _type_of(e.value)
                        if printed[0] != "type" or values.get(name, printed)[0] == "type":
                            values[name] = printed  # a value checked as a whole by any guard is kept whole
                    continue
                verdicts.append(False)
                name = e.orig_guard.name
                if not any(k in _IDENTITY for k in kinds):
                    refused.append(f"a {e.guard_type} guard on {name}")
                    continue
                try:
                    value = _evaluate(name, scope["G"], scope["L"])
                except Exception:  # noqa: BLE001
                    refused.append(f"a guard on {name}, which cannot be read back")
                    continue
                described = describe(value) if (not e.has_value or value is e.value) else None
                if described is None:
                    refused.append(f"a guard on the identity of {name} ({type(value).__name__})")
                else:
                    identity[name] = described
                    identity_guards.setdefault(id(e.orig_guard), e.orig_guard)
            return verdicts

        made = dynamo_guards.GuardsStatePickler.reducer_override

        def reducer_override(pickler, obj):
            # a function its module does not name (a decorator's wrapped original): kept by its code and closure,
            # as TorchDynamo keeps functions defined inside others, so that guards on its closure can be rebuilt
            if id(obj) in pickler.guard_tree_values and _local(type(obj)):
                # an instance of a local class that says itself how it is made again (the `kernels` package's
                # function modules, which transformers' LLaMA reads): made so (TorchDynamo would make a module of
                # it a plain nn.Module, or refuse)
                own = _own_reduction(obj)
                if own is not None:
                    return own
            try:
                reduced = made(pickler, obj)
            except (TypeError, torch._dynamo.exc.PackageError):
                if id(obj) in pickler.guard_tree_values:
                    raise
                # an instance of a class defined inside a function (transformers' LLaMA keeps one) that no guard
                # reads: kept as missing, as TorchDynamo keeps values its guards do not read
                return dynamo_guards._Missing, ("an instance of a local class",)
            if inspect.isfunction(obj) and isinstance(reduced, tuple) and reduced[0] is dynamo_guards._Missing:
                return _function, (obj.__code__, obj.__module__, obj.__name__, obj.__qualname__, obj.__defaults__,
                                   obj.__kwdefaults__, obj.__closure__, dict(obj.__dict__))
            return reduced

        inner, by_source = guard_set.inner, guard_set.source_to_guards
        guard_set.inner = whole
        dynamo_guards.GuardsStatePickler.reducer_override = reducer_override
        try:
            with warnings.catch_warnings():  # what pickling the frame's values says (a non-leaf tensor's .grad read)
                warnings.simplefilter("ignore")
                manager = _saving_manager()(self.func.__code__, output, guard_filter_fn=keep, save_guards=True)
        finally:
            dynamo_guards.GuardsStatePickler.reducer_override = made
            guard_set.inner, guard_set.source_to_guards = inner, by_source
        if refused:
            raise NotKept("its guards include " + "; ".join(sorted(set(refused))[:3]))
        # globals TorchDynamo installed for the guards (a module under a name made of its address): made again
        installed = {}
        for name in sorted(guard_globals):
            if not _INSTALLED.match(name) or name not in self.func.__globals__:
                continue
            how = _remade(self.func.__globals__[name])
            if how is None:
                raise NotKept(f"its guards read the global {name}, which another process cannot make again")
            installed[name] = how
        if manager.guards_state is None:
            raise NotKept("TorchDynamo made no serialized guards")
        sources = {}
        for code in output.tracing_context.traced_code:
            path = code.co_filename
            if path.startswith("<") and path.endswith(">"):
                # the standard library's frozen modules (fixed by the Python version, in code_identity), and code
                # made at run time from a class (a dataclass's __init__): made again from its class's own file
                continue
            if path not in sources:
                digest = file_digest(path)
                if digest is None:
                    raise NotKept(f"the traced file {path} cannot be read")
                sources[path] = digest
        return {**{k: pending[k] for k in ("graph", "gm", "metas", "static", "values", "origin", "grad")},
                "guards": manager.guards_state, "identity": list(identity.items()), "guard_values": values,
                "live": _live_parts(list(identity_guards.values()), added),
                "sources": sources, "guard_globals": installed,
                "signature": signature(output.local_scope)}

    def flush(self, entries: list) -> None:
        """After the call: keep the capture whose guards were built, with the bytecode TorchDynamo made for it
        (``entries``: TorchDynamo's cache entries of the function's code)."""
        ready, self.ready, self.pending = self.ready, None, None
        if ready is None:
            return
        try:
            self._write(self._entry(ready, entries))
            self.kept += 1
        except NotKept as e:
            self._refuse(str(e))
        except Exception as e:  # noqa: BLE001 - keeping is an optimization
            self._refuse(f"{type(e).__name__}: {e}")

    def _entry(self, ready: dict, entries: list) -> dict:
        from torch._dynamo.package import SerializedCode

        globals_ = self.func.__globals__
        graph = ready["graph"]
        code = graph_name = None
        for entry in entries:
            for name in entry.code.co_names:
                if name.startswith("__compiled_fn") and \
                        getattr(globals_.get(name), "_torchdynamo_orig_callable", None) is graph:
                    code, graph_name = entry.code, name
        if code is None:
            raise NotKept("TorchDynamo's bytecode for the graph was not found")
        if any(n.startswith("__resume_at") for n in _names(code)):
            raise NotKept("the function has a graph break")
        installed = {}
        for name in sorted(_names(code)):
            if not name.startswith("__") or name == graph_name or name not in globals_ or name in _MODULE_OWN:
                continue
            how = _remade(globals_[name])
            if how is None:
                raise NotKept(f"its bytecode reads {name}, which another process cannot make again")
            installed[name] = how
        builtins_dicts = [n for n, v in globals_.items()
                          if n.startswith("__builtins_dict___") and v is builtins.__dict__]
        origin = ready["origin"]
        return {"id": hashlib.sha256(pickle.dumps((time.time(), os.getpid(), graph_name))).hexdigest()[:16],
                "saved": time.time(), "guards": ready["guards"], "identity": ready["identity"], "live": ready["live"],
                "sources": ready["sources"], "signature": ready["signature"], "static": ready["static"],
                "grad": ready["grad"],
                "value_inputs": ready["values"], "guard_values": ready["guard_values"],
                "code": SerializedCode.from_code_object(code), "graph_name": graph_name, "installed": installed,
                "guard_globals": ready["guard_globals"],
                "builtins_dicts": builtins_dicts,
                "graph": encode_graph(ready["gm"], ready["metas"]),
                "origin": (origin.summary, dict(origin.facts))}

    def _write(self, entry: dict) -> None:
        kept = [entry, *(e for e in self._read() if e.get("id") != entry["id"])][:_KEPT_MAX]
        blob = self._blob(kept)  # anything that does not pickle fails here, before this store changes
        self._file = kept
        self._tried.add(entry["id"])  # this process has TorchDynamo's own entry for it
        self._recount()
        self._store(blob)

    def _blob(self, entries: list[dict]) -> bytes:
        return pickle.dumps({"format": _FORMAT, "entries": entries, "refused": self._refused})

    def _store(self, blob: bytes | None = None) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, blob if blob is not None else self._blob(self._read()))

    def _recount(self) -> None:
        self._untried = self._file is None or any(e["id"] not in self._tried for e in self._file)

    def _read(self) -> list[dict]:
        if self._file is None:
            self._file = []
            try:
                with open(self.path, "rb") as f:
                    data = pickle.load(f)  # noqa: S301 - written by thunderlab beside Inductor's (pickled) cache
                if isinstance(data, dict) and data.get("format") == _FORMAT:
                    self._file = list(data["entries"])
                    self._refused = data.get("refused")
            except FileNotFoundError:
                pass
            except Exception as e:  # noqa: BLE001 - a file another version wrote, or a damaged one: captured anew
                self.why_not = f"the kept captures could not be read ({type(e).__name__}: {e})"
            self._recount()
        return self._file

    # -- loading --

    def untried(self) -> bool:
        """Whether the file may hold captures not yet loaded or refused here (asked on every direct call that
        binds its arguments: kept as a flag)."""
        return self._untried

    def load_for(self, frame_locals: dict) -> Iterator[Kept]:
        """Load the kept captures this call's tensors could match, made in its grad mode and not tried before, newest
        first, one at a time: the caller stops at the first whose guards pass, and the others stay untried (loading
        one builds its guards, twice where the call passes them; one made in another grad mode would fail them).
        Where several could match, one whose guarded values tell it apart from the others and read otherwise now is
        not loaded (and stays untried: a later call may match it), as a Hugging Face classifier's two captures, made
        before and after its first call set ``config.problem_type``, are told apart."""
        now, grad = signature(frame_locals), torch.is_grad_enabled()
        candidates = [e for e in self._read() if e["id"] not in self._tried and e.get("grad", grad) == grad
                      and _may_match(e["signature"], e["static"], now)]
        telling = _telling(candidates)
        for entry in candidates:
            if entry["id"] in self._tried:
                continue
            differs = _differs(entry, telling, self.func.__globals__, frame_locals)
            if differs is not None:
                name, kept, live = differs
                self.why_not = (f"a kept capture was not loaded: {name} was {_shown(kept)} when captured, and reads "
                                f"{_shown(live)} now")
                continue
            self._tried.add(entry["id"])
            self._recount()
            start = time.perf_counter()
            kept = None
            try:
                with fastpaths.collector_paused():
                    kept = self._load(entry, frame_locals)
                self.loaded += 1
            except NotKept as e:
                self.why_not = f"a kept capture was not used: {e}"
            except Exception as e:  # noqa: BLE001 - the call is captured by TorchDynamo instead
                self.why_not = f"a kept capture was not used ({type(e).__name__}: {e})"
            self.load_s += time.perf_counter() - start
            if kept is not None:
                yield kept

    def _load(self, entry: dict, frame_locals: dict) -> Kept:
        from torch._dynamo.guards import _Missing
        from torch._dynamo.package import SerializedCode, load_guard_manager, load_guards_state

        backend = self.backend()
        if backend is None:
            raise NotKept("the jitted function was freed")
        for path, digest in entry["sources"].items():
            if file_digest(path) != digest:
                raise NotKept(f"{path} changed since it was captured")
        globals_ = self.func.__globals__
        serial = next(_serial)
        renames = {}  # the bytecode's globals, under names of this load's own (TorchDynamo's may come back)
        for name, how in entry["installed"].items():
            value = importlib.import_module(how[1]) if how[0] == "module" else _resolve(how[1], how[2])
            if name.startswith("__import_"):  # TorchDynamo's module aliases: one name per module, shared
                if globals_.setdefault(name, value) is not value:
                    raise NotKept(f"the global {name} reads another object")
            else:
                renames[name] = f"__thunderlab_kept{serial}{name}"
        for name, how in entry["guard_globals"].items():  # named after an address in the process that kept it
            value = importlib.import_module(how[1]) if how[0] == "module" else _resolve(how[1], how[2])
            if globals_.setdefault(name, value) is not value:
                raise NotKept(f"the global {name} reads another object")
        for name in entry["builtins_dicts"]:  # named by TorchDynamo's counter, which must now count past them
            if globals_.setdefault(name, builtins.__dict__) is not builtins.__dict__:
                raise NotKept(f"the global {name} reads another object")
            _count_past(int(name.rsplit("_", 1)[1]))
        names, objects = [], []
        for name, described in entry["identity"]:
            try:
                value = _evaluate(name, globals_, frame_locals)
            except Exception as e:  # noqa: BLE001
                raise NotKept(f"{name} cannot be read ({type(e).__name__})") from None
            if describe(value) != described:
                raise NotKept(f"{name} is not the object it was when captured")
            names.append(name)
            objects.append(value)
        identity = _identity_check(names, objects, globals_)
        _settle_trace_log(self.path)
        state = load_guards_state(entry["guards"])
        # TorchDynamo rebuilds each guard's expected value from the scope it kept, where a class or module is
        # kept by name: what it reads through one (a class attribute, a module's flag) is read from the class or
        # module as it is now. Each must still be what the capture saw, or the guard would compare with today's.
        scope = {"L": state.output_graph.local_scope, "G": state.output_graph.global_scope or globals_}
        for name, expected in entry["guard_values"].items():
            try:
                value = _evaluate(name, scope["G"], scope["L"])
            except Exception:  # noqa: BLE001
                value = ("unreadable",)
            if isinstance(value, _Missing):  # not kept (a module's hook dictionary): no guard is rebuilt from it
                continue
            now = _printed_as(value, expected)
            if now != expected:
                raise NotKept(f"{name} was {_shown(expected)} when captured, and reads {_shown(now)} now")
        manager = load_guard_manager(state, self.func.__code__, globals_)
        parts = entry.get("live")
        rebuild = None if parts is None else functools.partial(_live_manager, parts, state, manager, identity,
                                                               self.func)
        gm = decode_graph(entry["graph"])
        summary, facts = entry["origin"]
        saved = entry["saved"]
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(saved))
        facts = {**facts, "kept_capture": {"file": str(self.path), "saved": when}}
        notes = Notes(f"{summary}; loaded from the capture kept on {when} (TorchDynamo did not run)" if summary
                      else f"loaded from the capture kept on {when} (TorchDynamo did not run)", facts)
        graph = backend.adopt(gm, notes, static=entry["static"], value_inputs=tuple(entry["value_inputs"]))
        renames[entry["graph_name"]] = f"__thunderlab_direct__compiled_fn_kept{serial}"
        for name, new in renames.items():
            how = entry["installed"].get(name)
            globals_[new] = graph if how is None else _resolve(how[1], how[2]) if how[0] == "object" \
                else importlib.import_module(how[1])
            self._installed.append(new)
        code = _renamed(SerializedCode.to_code_object(entry["code"]), renames)
        return Kept(code, manager, self.link, identity, graph, saved, objects, rebuild)


def _settle_trace_log(path) -> None:
    """Log that a kept capture loads to TorchDynamo's structured trace (``TORCH_TRACE``, read by tlparse).

    Until a first event is logged, that trace's handler has not decided whether it writes anywhere, so every event
    is made in full: building guards makes two (the guard tree printed whole, with a stack captured), 0.05-0.1 s of
    a loaded first call. In a process where TorchDynamo never ran, this small event is the first: without a trace
    folder the handler then removes itself, and the guards' events cost nothing."""
    torch._logging.trace_structured(
        "artifact", metadata_fn=lambda: {"name": "thunderlab_kept_capture", "encoding": "string"},
        payload_fn=lambda: str(path), expect_trace_id=False)


def _plain(guard):
    """A guard as TorchDynamo serializes one: no weak references, its builder's arguments dereferenced."""
    import dataclasses
    import functools

    fn = guard.create_fn
    if isinstance(fn, functools.partial):
        def deref(a):
            return a() if isinstance(a, weakref.ref) else a

        fn = functools.partial(fn.func, *map(deref, fn.args), **{k: deref(v) for k, v in fn.keywords.items()})
    return dataclasses.replace(guard, obj_weakref=None, guarded_class_weakref=None, create_fn=fn)


def _live_parts(identity_guards: list, added) -> bytes | None:
    """What building a loaded capture's guards again on a live call needs beyond TorchDynamo's serialized guards:
    its identity guards and the objects ``attribute_guards.collapse`` gave a dictionary-version guard (their
    sources); None where they do not pickle (the capture is then checked as loaded)."""
    bases = [g.originating_source.base for g in added if g.create_fn_name() == "DICT_VERSION"]
    try:
        return pickle.dumps(([_plain(g) for g in identity_guards], bases))
    except Exception:  # noqa: BLE001
        return None


def _live_manager(parts: bytes | None, state, loaded, identity, func: types.FunctionType, frame_locals: dict):
    """A loaded capture's guards built again from the live call's values, where that call passes them as loaded.

    TorchDynamo builds a serialized guard from the scope it kept, in which a guarded object is a copy (a model's
    config) and the objects only identity names are left out: those identity guards are checked apart, in Python,
    name by name (about 80 us a call on a BERT), and a config's attribute guards cannot give way to its dictionary's
    version (``attribute_guards``), which only the live object has. Once this call passes every loaded guard and
    identity check, the live values are what those guards compare with, so guards built from them, with the
    identity guards in the tree and the attribute guards collapsed as in the capturing process, check the same
    thing at TorchDynamo's own cost. None where the call does not pass (the loaded manager stays) or building
    fails."""
    if parts is None:
        return None
    try:
        import dataclasses

        from torch._dynamo.output_graph import OutputGraphCommon
        from torch._guards import GuardsSet
        from torch.utils._ordered_set import OrderedSet

        from thunderlab.frontend import attribute_guards

        root = getattr(loaded, "root", loaded)
        if not (root.check(frame_locals) and identity(frame_locals)):
            return None
        identity_guards, bases = pickle.loads(parts)
        globals_ = func.__globals__
        # (building the loaded manager set each guard's export information, from the kept scope's values)
        guards = [_plain(g) for g in (*state.output_graph._guards.inner, *identity_guards)]
        scope, cache = {"G": globals_, "L": frame_locals}, {}

        def value(source):
            try:
                return True, source.get_value(scope, {}, cache)
            except Exception:  # noqa: BLE001
                return False, None

        def eligible(base):
            ok, obj = value(base) if base in bases else (False, None)
            return obj if ok and attribute_guards._python_getattribute(obj) else None

        replaced = attribute_guards.replace(guards, eligible, value) if bases else None
        if replaced is not None:
            guards = [*replaced[0], *replaced[1]]
        output = dataclasses.replace(state.output_graph, local_scope=frame_locals, global_scope=globals_,
                                     _guards=GuardsSet(OrderedSet(guards)))
        manager = _saving_manager()(func.__code__, OutputGraphCommon(output), shape_code_parts=state.shape_code_parts,
                                    runtime_global_scope=globals_).guard_manager
        live_root = getattr(manager, "root", manager)
        return manager if live_root.check(frame_locals) else None
    except Exception:  # noqa: BLE001 - an optimization of the guards' cost: the loaded ones stay
        return None


def _local(cls: type) -> bool:
    return cls.__qualname__ != cls.__name__


def _own_reduction(obj):
    """How ``obj`` says itself it is pickled, where its own class (not ``object`` or ``nn.Module``) defines
    ``__reduce__`` or ``__reduce_ex__`` and what that makes is of the same class; None otherwise."""
    for cls in type(obj).__mro__:
        if cls in (object, torch.nn.Module):
            return None
        if "__reduce_ex__" in cls.__dict__ or "__reduce__" in cls.__dict__:
            break
    else:
        return None
    try:
        reduced = obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
        if not isinstance(reduced, (tuple, str)) or type(pickle.loads(pickle.dumps(obj))) is not type(obj):
            return None
    except Exception:  # noqa: BLE001 - then it is not kept, as before
        return None
    return reduced


def _function(code, module, name, qualname, defaults, kwdefaults, closure, attributes) -> types.FunctionType:
    """A function made again from its parts (for the values its guards compare with, not to be called)."""
    f = types.FunctionType(code, importlib.import_module(module).__dict__, name, defaults, closure)
    f.__qualname__, f.__kwdefaults__ = qualname, kwdefaults
    f.__dict__.update(attributes)
    return f


_GLOBAL = re.compile(r"G\['([^']+)'\]")
_INSTALLED = re.compile(r"^_+\w*?_?\d+_c\d+$")  # install_global_by_id's names: prefix, address, compile id


def _remade(value) -> tuple | None:
    """How another process makes ``value`` again: a module by its name, a function or class by its module and
    qualified name (where those lead back to it); None for anything else."""
    if isinstance(value, types.ModuleType):
        return ("module", value.__name__)
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    try:
        same = isinstance(module, str) and isinstance(qualname, str) and _resolve(module, qualname) is value
    except Exception:  # noqa: BLE001
        same = False
    return ("object", module, qualname) if same else None


def _count_past(n: int) -> None:
    """Make TorchDynamo's name counter (``unique_id``, one for every name it installs) count past ``n``."""
    from torch._dynamo.bytecode_transformation import unique_id

    while int(unique_id("__thunderlab_count").rsplit("_", 1)[1]) < n:
        pass


# a module's own globals, which every process that imports it has: not installed by TorchDynamo
_MODULE_OWN = frozenset({"__name__", "__file__", "__doc__", "__package__", "__spec__", "__loader__", "__builtins__",
                         "__cached__", "__path__"})

_SAVING = None


def _saving_manager() -> type:
    """TorchDynamo's guard manager, built only to serialize a frame's guards: it registers no finalizer on the objects
    it guards by identity. TorchDynamo's own registers one per object, to drop a cache entry when that object goes;
    it holds the manager, and a manager whose build failed part-way still holds the frame's whole capture, for as
    long as such an object lives (a function of torch's: for good)."""
    global _SAVING
    if _SAVING is None:
        from torch._dynamo.guards import CheckFunctionManager

        class SavingManager(CheckFunctionManager):
            def serialize_guards(self, builder, sorted_guards, output_graph):
                # a type guard on an instance of a local class: kept where the instance says itself how it is made
                # again as an instance of the same class (the type guard is then rebuilt from the remade one's)
                cleared = [g for g in sorted_guards if g._unserializable
                           and g.create_fn_name() in ("TYPE_MATCH", "BUILTIN_MATCH")
                           and _own_reduction(builder.get(g)) is not None]
                for g in cleared:
                    g._unserializable = False
                try:
                    return super().serialize_guards(builder, sorted_guards, output_graph)
                finally:
                    for g in cleared:
                        g._unserializable = True

            def id_ref(self, obj: object, obj_str: str) -> int:
                try:
                    self._weakrefs.setdefault(id(obj), weakref.ref(obj))
                except TypeError:  # an object without weak references (a bool)
                    pass
                return id(obj)

        _SAVING = SavingManager
    return _SAVING


def _names(code: types.CodeType):
    yield from code.co_names
    for k in code.co_consts:
        if isinstance(k, types.CodeType):
            yield from _names(k)


def _renamed(code: types.CodeType, renames: dict[str, str]) -> types.CodeType:
    consts = tuple(_renamed(k, renames) if isinstance(k, types.CodeType) else k for k in code.co_consts)
    return code.replace(co_names=tuple(renames.get(n, n) for n in code.co_names), co_consts=consts)


def _forget(globals_: dict, names: list[str]) -> None:
    for name in names:
        globals_.pop(name, None)


class GuardHook:
    """TorchDynamo's ``guard_export_fn`` for a jitted function: tells its Store, weakly held, that a frame's guards
    were built. TorchDynamo keeps its hooks for as long as the compiled function's cache lives."""

    __slots__ = ("store",)

    def __init__(self):
        self.store: weakref.ref | None = None

    def __call__(self, guards) -> None:
        store = self.store() if self.store is not None else None
        if store is not None and store.pending is not None:
            store.guards_built(guards)
