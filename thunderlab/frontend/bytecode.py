"""Reading what TorchDynamo's rewritten bytecode does, when all it does is call one graph.

For most captured functions, the bytecode Dynamo makes reads the graph's inputs (frame locals, their
items and attributes), calls the graph once, and returns some of its outputs, building only lists
and tuples of its own on the way. ``plain_call`` follows such bytecode on a stack of symbolic values
and says so: which global it calls, each input as a Python expression over the frame's locals, and the
result as an expression over the graph's output ``_o``. A direct call can then read the inputs and
build the result itself, without the bytecode's frame and its profiler-marker calls. Any instruction
outside the few it knows (a store to an attribute, a global, an item; a second call; a jump) means
the bytecode does more, and ``plain_call`` answers None: the bytecode is run as it is.
"""
from __future__ import annotations

import dis
import types
from typing import NamedTuple


class PlainCall(NamedTuple):
    graph: str  # the global the bytecode calls the graph by
    inputs: tuple[str, ...]  # each of the graph's inputs, as an expression over the frame's locals
    result: str  # what the function returns, as an expression over ``_o`` (the graph's outputs)


class _Value(NamedTuple):
    kind: str  # "expr" (a value read from the frame), "graph", "utils", "marker", "entered", "out", "null",
    # "list", "tuple", "const"
    text: str = ""  # for "expr": its Python text; for "graph": the global's name
    items: tuple = ()  # for "list" and "tuple": their items; for "const": (the value,)


class _Unknown(Exception):
    pass


_NULL = _Value("null")
_MARKERS = ("record_pregraph_bytecode_enter", "record_pregraph_bytecode_exit")
_SKIP = {"RESUME", "COPY_FREE_VARS", "PRECALL", "NOP", "CACHE", "MAKE_CELL"}


def _literal(v) -> bool:
    return v is None or type(v) in (int, str, bool)


def _expr(v: _Value) -> str:
    """``v`` as the text of a Python expression over the frame's locals and ``_o``."""
    if v.kind in ("expr", "out"):
        return v.text
    if v.kind == "const" and _literal(v.items[0]):
        return repr(v.items[0])
    if v.kind == "tuple":
        return "(" + "".join(f"{_expr(e)}, " for e in v.items) + ")"
    if v.kind == "list":
        return "[" + ", ".join(_expr(e) for e in v.items) + "]"
    raise _Unknown(v.kind)


def plain_call(code: types.CodeType, graph_prefix: str, utils: str, frame_names: dict[str, str]) -> PlainCall | None:
    """What ``code`` does, if it calls one graph (a global whose name starts with ``graph_prefix``) and nothing else.

    ``utils`` is the global by which the code reaches Dynamo's utils module (only its profiler markers may be
    called), ``frame_names`` the expression each frame local (and free variable) is read by.
    """
    try:
        return _follow(code, graph_prefix, utils, frame_names)
    except (_Unknown, IndexError, KeyError, TypeError):
        return None


def _follow(code, graph_prefix, utils, frame_names) -> PlainCall | None:
    stack: list[_Value] = []
    temps: dict[str, _Value] = {}
    params = set(frame_names)
    called: PlainCall | None = None
    graph_name, inputs = "", ()
    for ins in dis.get_instructions(code):
        op, arg = ins.opname, ins.arg
        if op in _SKIP:
            continue
        if op == "LOAD_GLOBAL":
            if arg & 1:
                stack.append(_NULL)
            name = ins.argval
            if name.startswith(graph_prefix):
                stack.append(_Value("graph", name))
            elif name == utils:
                stack.append(_Value("utils"))
            else:
                raise _Unknown(name)
        elif op == "LOAD_ATTR":
            base = stack.pop()
            if base.kind == "utils" and ins.argval in _MARKERS:
                stack.append(_Value("marker", ins.argval))
            elif base.kind == "expr" and ins.argval.isidentifier() and not ins.argval.startswith("__"):
                stack.append(_Value("expr", f"{base.text}.{ins.argval}"))
            else:
                raise _Unknown(op)
        elif op in ("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE"):
            name = ins.argval
            if name in temps:
                stack.append(temps[name])
            elif name in params and op != "LOAD_CLOSURE":
                stack.append(_Value("expr", frame_names[name]))
            else:
                raise _Unknown(name)
        elif op == "STORE_FAST":
            if ins.argval in params:
                raise _Unknown("a parameter rebound")
            temps[ins.argval] = stack.pop()
        elif op == "DELETE_FAST":
            temps.pop(ins.argval)
        elif op == "LOAD_CONST":
            stack.append(_Value("const", items=(ins.argval,)))
        elif op == "COPY":
            stack.append(stack[-arg])
        elif op == "SWAP":
            stack[-1], stack[-arg] = stack[-arg], stack[-1]
        elif op == "POP_TOP":
            stack.pop()
        elif op == "BINARY_SUBSCR":
            key, base = stack.pop(), stack.pop()
            if key.kind != "const" or not _literal(key.items[0]):
                raise _Unknown("subscript")
            if base.kind in ("expr", "out"):
                stack.append(_Value(base.kind, f"{base.text}[{key.items[0]!r}]"))
            elif base.kind in ("list", "tuple") and type(key.items[0]) is int:
                stack.append(base.items[key.items[0]])
            else:
                raise _Unknown("subscript")
        elif op in ("BUILD_LIST", "BUILD_TUPLE"):
            items = tuple(stack[len(stack) - arg:]) if arg else ()
            del stack[len(stack) - arg:]
            stack.append(_Value("list" if op == "BUILD_LIST" else "tuple", items=items))
        elif op == "LIST_EXTEND":
            seq = stack.pop()
            at = len(stack) - arg
            target = stack[at]
            if target.kind != "list" or seq.kind not in ("list", "tuple"):
                raise _Unknown(op)
            held = [v for i, v in enumerate(stack) if i != at] + list(temps.values())
            if any(v is target for v in held):  # a list is a value here: one extended in place must be held once
                raise _Unknown("a list extended while held elsewhere")
            stack[at] = _Value("list", items=target.items + seq.items)
        elif op == "CALL":
            args = stack[len(stack) - arg:] if arg else []
            del stack[len(stack) - arg:]
            fn, null = stack.pop(), stack.pop()
            if null.kind != "null":
                raise _Unknown("a method call")
            if fn.kind == "marker" and fn.text == _MARKERS[0] and not args:
                stack.append(_Value("entered"))
            elif fn.kind == "marker" and fn.text == _MARKERS[1] and len(args) == 1 and args[0].kind == "entered":
                stack.append(_Value("const", items=(None,)))
            elif fn.kind == "graph" and not graph_name and all(a.kind == "expr" for a in args):
                graph_name, inputs = fn.text, tuple(a.text for a in args)
                stack.append(_Value("out", "_o"))
            else:
                raise _Unknown("a call")
        elif op == "RETURN_VALUE":
            if not graph_name or called is not None:
                raise _Unknown(op)
            called = PlainCall(graph_name, inputs, _expr(stack.pop()))
        else:
            raise _Unknown(op)
    return called
