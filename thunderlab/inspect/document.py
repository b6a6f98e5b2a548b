"""Records as files: ``*.thunderlab.json`` holds one record's whole payload ("thunderlab.record/v1").

``save`` writes the payload; ``load`` checks the file (JSON, the schema's name and version, the schema
itself) and gives back a ``CompileRecord`` made from it. A loaded record has everything the payload has
(steps, each step's program text, diff, graph, notes, region timings, kernel profiles) and no running
code: its steps' ``program`` is None and its ``document`` is the payload the views show as it is.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from thunderlab.core.files import write_atomically
from thunderlab.core.notes import Notes

from .record import CompileRecord, Step, Verification
from .serialize import SCHEMA_ID, RecordPayload, schema

SUFFIX = ".thunderlab.json"
_VERSIONED = re.compile(r"thunderlab\.record/v(\d+)\Z")


class RecordFileError(ValueError):
    """A file that is not a record this thunderlab can read; the message names the file and what is wrong."""


def _check_path(path, verb: str) -> Path:
    p = Path(os.fspath(path))
    if not p.name.endswith(SUFFIX) or p.name == SUFFIX:
        raise RecordFileError(f"thunderlab.{verb}: {str(p)!r} is not a record file name; "
                              f"record files are named NAME{SUFFIX}")
    return p


def save(record: CompileRecord, path) -> Path:
    """Write ``record``'s whole payload to ``path`` (``NAME.thunderlab.json``); returns the path."""
    return write_payload(RecordPayload(record).to_dict(), path)


def write_payload(payload: dict, path) -> Path:
    """Write a record's payload (``RecordPayload(record).to_dict()``) to ``path``; returns the path."""
    p = _check_path(path, "save")
    return write_atomically(p, json.dumps(payload, allow_nan=False, ensure_ascii=False))


def read_payload(path) -> dict:
    """The payload in a record file, checked: JSON, this schema version, the schema's shape."""
    p = _check_path(path, "load")
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise RecordFileError(f"thunderlab.load: no file {str(p)!r}") from None
    except OSError as e:
        raise RecordFileError(f"thunderlab.load: cannot read {str(p)!r}: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RecordFileError(f"thunderlab.load: {p.name} is not UTF-8 text (byte {e.start}); "
                              f"it is not a record file, or it is damaged") from None
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except _NotJSON as e:
        raise RecordFileError(f"thunderlab.load: {p.name} is not valid JSON: it holds {e}, which JSON does not "
                              f"allow") from None
    except json.JSONDecodeError as e:
        cut = e.msg.startswith("Unterminated") or e.pos >= len(text.rstrip())
        where = ("the text ends early (truncated?)" if cut else f"line {e.lineno} column {e.colno}")
        raise RecordFileError(f"thunderlab.load: {p.name} ({len(raw)} bytes) is not valid JSON: {e.msg}; "
                              f"{where}") from None
    return check_payload(data, p.name)


class _NotJSON(ValueError):
    pass


def _no_constant(name: str):
    raise _NotJSON(name)  # NaN and Infinity: Python's reader takes them, the views' (and the schema's) do not


def check_payload(data, name: str = "the payload") -> dict:
    """``data`` if it is a "thunderlab.record/v1" payload that follows the schema; else a ``RecordFileError``."""
    if not isinstance(data, dict) or "schema" not in data:
        raise RecordFileError(f"thunderlab.load: {name} is not a thunderlab record "
                              f"(expected a JSON object with \"schema\": \"{SCHEMA_ID}\")")
    found = data["schema"]
    m = _VERSIONED.match(found) if isinstance(found, str) else None
    if m is None:
        raise RecordFileError(f"thunderlab.load: {name} is not a thunderlab record: its schema is {found!r}, "
                              f"this thunderlab reads {SCHEMA_ID!r}")
    if found != SCHEMA_ID:
        newer = int(m.group(1)) > int(SCHEMA_ID.rsplit("v", 1)[1])
        raise RecordFileError(f"thunderlab.load: {name} is a record of version {found!r}, written by "
                              f"{'a newer' if newer else 'an older'} thunderlab; this one reads {SCHEMA_ID!r}"
                              + ("; upgrade thunderlab to open it" if newer else ""))
    import jsonschema

    try:
        jsonschema.validate(data, schema())
    except jsonschema.ValidationError as e:
        at = "/".join(str(k) for k in e.absolute_path) or "(top level)"
        first = e.message if len(e.message) <= 200 else e.message[:197] + "..."
        raise RecordFileError(f"thunderlab.load: {name} does not follow the {SCHEMA_ID} schema at {at}: "
                              f"{first}") from None
    return data


def record_from_payload(data: dict, source_file: str | None = None) -> CompileRecord:
    """A ``CompileRecord`` holding a checked payload (see ``check_payload``): no programs, no running code."""
    steps = []
    for s in data["steps"]:
        v = s["verification"]
        steps.append(Step(s["index"], s["spec"], s["seconds"], None, s["symbols_before"], s["symbols_after"],
                          None if v is None else Verification(v["ok"], v["structural"], v["max_error"], v["detail"]),
                          s["error"], Notes.from_json(s["notes"]), saved=s["traces"]))
    return CompileRecord(data["name"], list(data["inputs"]), data["pipeline"], steps, error=data["error"],
                         created=data["created"], regions=data["regions"], kernels=data.get("kernels"),
                         communication=data.get("communication") or {}, document=data,
                         source_file=source_file)


def load(path) -> CompileRecord:
    """The record saved in ``path`` (a ``*.thunderlab.json`` file), without its running code."""
    return record_from_payload(read_payload(path), str(path))
