"""One dictionary-version guard in place of the guards on attributes read through Python code.

TorchDynamo guards each attribute a captured function read, and its guard tree reads that attribute again
before every call. For most objects that read is a C lookup; for an object whose class defines
``__getattribute__`` in Python (Hugging Face's model configs) every read runs that method, and so does every
``hasattr`` guard. A BERT forward reads about twenty config attributes, and their guards are half of its guard
check (24 us of 47 on this machine, ``benchmarks/guard_cost.py``), paid before every step by TorchDynamo's frame
hook and by thunderlab's direct calls alike.

``collapse()``, called by thunderlab's backend while TorchDynamo compiles a frame, replaces those guards, where
it can prove the replacement at least as strict, by one guard per such object: its instance dictionary's
version (``DICT_VERSION``, a C check of a counter CPython changes on every write to the dictionary). A guard is
replaced when it reads one attribute held in the object's instance dictionary and its value is an immutable
scalar (a number, string, bytes, None, or a tuple of them), or when it is a ``hasattr`` on the object. Such a
value is computed by the class's ``__getattribute__`` from the instance dictionary and the class; the class, its
method and the class attributes that method read stay guarded as TorchDynamo guarded them, and the instance
dictionary cannot change without changing its version. Guards on values found on the class, and on what lies below
a mutable attribute (a list's length, a nested config's fields), are kept. What goes unseen that TorchDynamo's
guards would see is a change to the config's class after the compile that changes what ``hasattr`` answers or
puts a property over an instance attribute: adding or deleting an attribute of the class itself (a write to the
instance is always seen).

The replacement is stricter where the object is written with an equal value (another object; writing the very
object it holds leaves the version as it was): the version changes and the frame is compiled again. So objects
the captured code itself writes keep their guards, and once a frame is compiled again after an object was
written, that frame's later compiles keep every guard of that object (a loop that sets a config field on every
step recompiles once, not on every step).
"""
from __future__ import annotations

import types
import weakref
from collections import defaultdict

_SCALARS = (int, float, complex, bool, str, bytes, type(None))

# per object whose guards were replaced (by id, while it lives): {compiled code: its dictionary's version when that
# code was compiled, or None once that code was compiled again after the object was written: then it keeps every
# guard of that object}
_state: dict[int, tuple[weakref.ref, weakref.WeakKeyDictionary]] = {}


def _codes(obj) -> weakref.WeakKeyDictionary | None:
    """The versions recorded for ``obj`` per code object (None where ``obj`` takes no weak reference)."""
    known = _state.get(id(obj))
    if known is not None and known[0]() is obj:
        return known[1]
    key = id(obj)
    try:
        ref = weakref.ref(obj, lambda _, key=key: _state.pop(key, None))
    except TypeError:
        return None
    _state[key] = (ref, weakref.WeakKeyDictionary())
    return _state[key][1]


def _immutable(value) -> bool:
    if type(value) in _SCALARS:
        return True
    return type(value) is tuple and all(map(_immutable, value))


def _python_getattribute(value) -> bool:
    """Whether reading an attribute of ``value`` runs Python code (its class's ``__getattribute__``), and the
    value keeps its attributes in an instance dictionary."""
    if not isinstance(getattr(type(value), "__getattribute__", None), types.FunctionType):
        return False
    try:
        return type(object.__getattribute__(value, "__dict__")) is dict
    except AttributeError:
        return False


def _allowed(obj, code, dict_version) -> bool:
    """Whether ``obj``'s guards may be replaced in a compile of ``code``; records its version if so."""
    codes = _codes(obj)
    if codes is None:
        return False
    version = dict_version(object.__getattribute__(obj, "__dict__"))
    previous = codes.get(code, version)
    # compiled again after the object was written (its version guard failed, or another guard did after a write):
    # from now on this code keeps every guard of this object
    codes[code] = version if previous == version else None
    return codes[code] is not None


def collapse() -> int:
    """In the frame TorchDynamo is compiling now, replace the guards described in the module's docstring; the
    number of guards dropped (0 where nothing is compiling, nothing qualifies, or this torch lacks a part)."""
    try:
        from torch._C._dynamo.guards import dict_version
        from torch._dynamo.guards import GuardBuilder  # noqa: F401 - replace() needs these: none or all
        from torch._dynamo.source import AttrSource, GenericAttrSource  # noqa: F401
        from torch._dynamo.symbolic_convert import InstructionTranslator
        from torch._dynamo.variables.base import AttributeMutationNew
        from torch._guards import TracingContext
        from torch.utils._ordered_set import OrderedSet
    except ImportError:  # pragma: no cover - another torch: every guard stays
        return 0
    context = TracingContext.try_get()
    try:
        tx = InstructionTranslator.current_tx() if context is not None else None
    except AttributeError:  # a backend call outside TorchDynamo's tracing (AOT, export)
        tx = None
    guards = getattr(getattr(context, "guards_context", None), "dynamo_guards", None)
    if tx is None or guards is None or not hasattr(guards, "inner") or not hasattr(guards, "source_to_guards"):
        return 0
    root = tx.output.root_tx
    code = root.f_code
    scope, cache = {"G": root.f_globals, "L": root.f_locals}, {}

    def value(source):
        try:
            return True, source.get_value(scope, {}, cache)
        except Exception:
            return False, None

    side_effects = tx.output.side_effects
    written = set()  # ids of objects the captured code writes attributes of (objects it made itself aside)
    for variable, stores in getattr(side_effects, "store_attr_mutations", {}).items():
        if stores and not isinstance(getattr(variable, "mutation_type", None), AttributeMutationNew):
            ok, obj = value(variable.source) if getattr(variable, "source", None) is not None else (False, None)
            if ok:
                written.add(id(obj))
            else:  # a write we cannot place: touch nothing in this frame
                return 0

    allowed: dict = {}  # object id -> whether its guards may be replaced in this compile

    def eligible(base):
        ok, obj = value(base)
        if not ok or not _python_getattribute(obj) or id(obj) in written:
            return None
        if id(obj) not in allowed:
            allowed[id(obj)] = _allowed(obj, code, dict_version)
        return obj if allowed[id(obj)] else None

    replaced = replace(list(guards.inner), eligible, value)
    if replaced is None:
        return 0
    kept, added = replaced
    n = len(guards.inner) - len(kept)
    guards.inner = OrderedSet(kept)
    guards.source_to_guards = defaultdict(list)
    for g in kept:
        guards.track_guard_by_source(g)
    for guard in added:
        guards.add(guard)
    return n


def replace(guards: list, eligible, value) -> tuple[list, list] | None:
    """The guards with those this module replaces left out (``kept``), and the guards that replace them
    (``added``: a ``DICT_VERSION`` and a ``TYPE_MATCH`` per object); None where nothing is replaced.

    ``eligible(source)`` is the object a base source reads where its attribute guards may be replaced, else None;
    ``value(source)`` reads a source: ``(True, value)``, or ``(False, None)`` where it cannot be read."""
    from torch._dynamo.guards import GuardBuilder
    from torch._dynamo.source import AttrSource, GenericAttrSource

    bases: dict = {}  # base source -> the object, where eligible
    drop = []
    for guard in guards:
        source = guard.originating_source
        if guard.create_fn_name() == "HASATTR":
            base, member = source, getattr(getattr(guard, "create_fn", None), "keywords", {}).get("attr")
        elif type(source) is AttrSource:
            base, member = source.base, source.member
        else:
            continue
        if base not in bases:
            bases[base] = eligible(base)
        if bases[base] is None:
            continue
        if source is not base and member not in object.__getattribute__(bases[base], "__dict__"):
            continue  # a value found on the class: a change to the class would not show in the instance's version
        if source is not base:
            ok, attr = value(source)
            if not ok or not _immutable(attr):
                continue
        drop.append((guard, base))
    if not drop:
        return None
    # what's below a dropped attribute (its type, say) goes with it; the base's own guards stay
    sources = {g.originating_source for g, base in drop if g.originating_source is not base}
    dropped = {g for g, _ in drop}

    def below(source) -> bool:
        while source is not None:
            if source in sources:
                return True
            source = getattr(source, "base", None)
        return False

    kept = [g for g in guards if g not in dropped and not below(g.originating_source)]
    # the replacement guards are made before anything is dropped: a failure leaves the frame's guards whole
    added = [guard for base in {base for _, base in drop}
             for guard in (GenericAttrSource(base, "__dict__").make_guard(GuardBuilder.DICT_VERSION),
                           base.make_guard(GuardBuilder.TYPE_MATCH))]
    return kept, added
