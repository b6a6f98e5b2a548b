"""The sidebar protocol: the declared, versioned messages the JupyterLab sidebar may send.

Every request is a JSON object ``{"v": 1, "id": <int>, "type": <name>, ...fields}``. Each type
declares its fields with a type, whether it is required and, for numbers and text, its bounds.
``check(msg)`` returns the request's fields or raises ``ProtocolError`` naming what is wrong;
nothing in a message is ever evaluated as code or used as a path.
"""
from __future__ import annotations

from dataclasses import dataclass

VERSION = 1
MAX_TEXT = 4000  # longest pipeline or filter text accepted


class ProtocolError(ValueError):
    """A request that is not one of the declared messages, or has a wrong field."""


@dataclass(frozen=True)
class Field:
    kind: type
    required: bool = True
    lo: int = 0
    hi: int = 1 << 30


def _text(required: bool = True) -> Field:
    return Field(str, required, 0, MAX_TEXT)


def _record(required: bool = True) -> Field:
    return Field(int, required)


# type name -> its fields (besides v, id and type)
MESSAGES: dict[str, dict[str, Field]] = {
    "hello": {},
    "records.list": {"offset": Field(int, False), "limit": Field(int, False, 1, 500), "filter": _text(False)},
    "record.summary": {"record": _record()},
    "step.traces": {"record": _record(), "step": Field(int)},
    "pipeline.validate": {"pipeline": _text()},
    "record.rerun": {"record": _record(), "pipeline": _text()},
    "passes.list": {},
    "records.compare": {"a": _record(), "b": _record(), "time": Field(bool, False)},
    "timings.subscribe": {"record": _record(False)},
    # one call of the record's compiled program under the torch profiler, on the inputs it was compiled for
    "record.profile": {"record": _record()},
}

# pushed by the kernel without a request
EVENTS = ("record.new", "record.update", "timings")


def _type_name(t: type) -> str:
    return {int: "an integer", str: "a string", bool: "true or false"}[t]


def check(msg) -> tuple[str, int, dict]:
    """(type, id, fields) of a valid request; ProtocolError naming the problem otherwise."""
    if not isinstance(msg, dict):
        raise ProtocolError(f"a request is a JSON object, got {type(msg).__name__}")
    if msg.get("v") != VERSION:
        raise ProtocolError(f"protocol version {msg.get('v')!r} is not supported; this kernel speaks v{VERSION}")
    mid = msg.get("id")
    if type(mid) is not int:
        raise ProtocolError(f"field 'id' must be an integer, got {mid!r}")
    kind = msg.get("type")
    if kind not in MESSAGES:
        raise ProtocolError(f"unknown message type {kind!r}; known: {', '.join(MESSAGES)}")
    spec = MESSAGES[kind]
    fields = {}
    for key, value in msg.items():
        if key in ("v", "id", "type"):
            continue
        f = spec.get(key)
        if f is None:
            known = ", ".join(spec) or "none"
            raise ProtocolError(f"message {kind!r} has no field {key!r}; its fields: {known}")
        if value is None and not f.required:
            continue
        # bool is a subclass of int in Python: compare exact types
        if type(value) is not f.kind:
            raise ProtocolError(f"field {key!r} of {kind!r} must be {_type_name(f.kind)}, got {value!r:.60}")
        size = len(value) if isinstance(value, str) else value
        if f.kind is not bool and not f.lo <= size <= f.hi:
            what = "length" if isinstance(value, str) else "value"
            raise ProtocolError(f"field {key!r} of {kind!r}: {what} {size} is outside {f.lo}..{f.hi}")
        fields[key] = value
    for key, f in spec.items():
        if f.required and key not in fields:
            raise ProtocolError(f"message {kind!r} needs field {key!r}")
    return kind, mid, fields
