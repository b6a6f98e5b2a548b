"""Re-running a record loaded from a file: its captured program rebuilt from the saved text, on fresh inputs.

A loaded record has no captured program object and no inputs, only the program's printed text and each
input's shape, dtype and device. The text is read as data, never executed: each statement must be a call of
a registered ``prims`` or ``ltorch`` symbol on values of the program or on literals, and is recorded into a
new trace as tracing the function did. Anything else (an opaque ``torch`` call, a region defined beside the
program, a named constant) is refused by name, since only the function itself can say what it was.
"""
from __future__ import annotations

import ast
import math
import re

import torch

from thunderlab.core.notes import Notes
from thunderlab.core.program import Program
from thunderlab.core.proxies import ScalarInput, TensorProxy, dtype_short
from thunderlab.core.symbols import SourceInfo, Symbol
from thunderlab.core.trace import Trace
from thunderlab.inspect.record import CompileRecord, Step
from thunderlab.ops.prims import PRIMS
from thunderlab.ops.torch_ops import LTORCH
from thunderlab.passes.runner import structure
from thunderlab.passes.verification import current_reference

from .session import HeldInputs, open_session

# what ``prims.<name>`` and ``ltorch.<name>`` in a printed program stand for (the symbols filed by name)
_NAMESPACES = {"prims": PRIMS, "ltorch": LTORCH}
_DTYPES = {dtype_short(d): d for d in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                                        torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
                                        torch.complex64, torch.complex128)}
_TENSOR_TYPE = re.compile(r"(\w+) (\w+)\[([\d, ]*)\]\Z")
_SCALAR_TYPE = re.compile(r"(int|float|bool) = (.+)\Z")

FRESH_INPUTS = ("fresh inputs of the recorded shapes and dtypes (floating point: standard normal, seeded; "
                "integers: ones; bool: True), since a record loaded from a file has no inputs")


class NotRebuildable(ValueError):
    """A loaded record's captured program uses something its text alone cannot rebuild."""


def _why(record: CompileRecord) -> str:
    where = f" (loaded from {record.source_file})" if record.source_file else " (loaded from a file)"
    return f"record {record.name!r}{where}"


def captured_program(record: CompileRecord) -> Program:
    """The captured program of a loaded record, rebuilt from its saved text (see the module's docstring)."""
    step0 = record.steps[0]
    if step0.saved is None or "forward" not in step0.saved:
        raise NotRebuildable(f"{_why(record)} has no captured program (capture failed: {step0.error})")
    text = step0.saved["forward"]["program"]
    types = {i["name"]: i["type"] for i in record.document.get("input_names", [])}
    try:
        module = ast.parse(text)
    except SyntaxError as e:
        raise NotRebuildable(f"{_why(record)}: its captured program is not Python (line {e.lineno}): {e.msg}") from None
    defs = [n for n in module.body if isinstance(n, ast.FunctionDef)]
    extra = [n.name for n in defs if n.name != "forward"]
    if extra:
        raise NotRebuildable(f"{_why(record)}: its captured program calls {', '.join(extra)}, defined beside it "
                             f"(a region of the function), which a file does not rebuild; re-run the live record "
                             f"(compile the function again in this process)")
    if len(defs) != 1:
        raise NotRebuildable(f"{_why(record)}: its captured program has no 'forward' function")
    sources = _sources(step0.saved["forward"])
    trace = Trace("forward")
    env: dict[str, object] = {}
    with trace.active():
        for a in defs[0].args.args:
            env[a.arg] = _input(trace, a.arg, types.get(a.arg), record)
        for stmt in defs[0].body:
            with trace.source(sources.get(stmt.lineno)):
                _statement(stmt, env, trace, record)
    if trace.output is None:
        raise NotRebuildable(f"{_why(record)}: its captured program does not return")
    return Program({"forward": trace})  # a file keeps no boundary: the rebuilt program writes and aliases nothing


def _sources(saved: dict) -> dict[int, SourceInfo]:
    """Statement line -> the user's source line, from the payload's line map (its calls, each with line and source)."""
    out = {}
    for c in saved.get("calls") or ():
        s = c["source"]
        if c["line"] is not None and s is not None:
            out[c["line"]] = SourceInfo(s["path"] or s["file"], s["line"], s["code"], s["scope"] or "")
    return out


def _input(trace: Trace, name: str, type_: str | None, record: CompileRecord):
    if type_ is None:
        raise NotRebuildable(f"{_why(record)}: its payload does not give input {name!r}'s type")
    m = _TENSOR_TYPE.match(type_)
    if m:
        device, dtype, dims = m.groups()
        if dtype not in _DTYPES:
            raise NotRebuildable(f"{_why(record)}: input {name!r} has dtype {dtype!r}; inputs can be made for "
                                 f"{', '.join(_DTYPES)}")
        position = [i["name"] for i in record.document["input_names"]].index(name)
        grad = position < len(record.inputs) and record.inputs[position].endswith("requires_grad")
        shape = tuple(int(d) for d in dims.split(",") if d.strip())
        p = TensorProxy(trace.add_name(name), shape, _DTYPES[dtype], torch.device(device), grad)
        trace.inputs.append(p)
        return p
    m = _SCALAR_TYPE.match(type_)
    if m:
        value = _literal(ast.parse(m.group(2), mode="eval").body, {}, record)
        s = ScalarInput(trace.add_name(name), value)
        trace.inputs.append(s)
        return s
    raise NotRebuildable(f"{_why(record)}: input {name!r} is {type_!r}, not a tensor or a number")


def _statement(stmt: ast.stmt, env: dict, trace: Trace, record: CompileRecord) -> None:
    if isinstance(stmt, ast.Return):
        trace.output = _literal(stmt.value, env, record)
    elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call):
        _bind(stmt.targets[0], _call(stmt.value, env, record), env, record)
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        _call(stmt.value, env, record)
    elif isinstance(stmt, ast.Delete):  # ``del``: the del pass puts these back where they belong
        pass
    else:
        raise NotRebuildable(f"{_why(record)}: its captured program has a statement a file does not rebuild "
                             f"(line {stmt.lineno}: {ast.unparse(stmt)[:80]!r})")


def _call(node: ast.Call, env: dict, record: CompileRecord):
    f = node.func
    qual = ast.unparse(f)
    sym = None
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in _NAMESPACES:
        sym = _NAMESPACES[f.value.id].get(f.attr)
    if not isinstance(sym, Symbol):
        kind = "an opaque call (a torch function thunderlab runs as it is)" if qual.startswith("torch.") else \
            "not a registered prims or ltorch symbol"
        raise NotRebuildable(f"{_why(record)}: its captured program calls {qual} (line {node.lineno}), {kind}, "
                             f"which a file does not rebuild; re-run the live record (compile the function again "
                             f"in this process)")
    args = [_literal(a, env, record) for a in node.args]
    kwargs = {k.arg: _literal(k.value, env, record) for k in node.keywords}
    return sym(*args, **kwargs)


def _bind(target: ast.expr, value, env: dict, record: CompileRecord) -> None:
    if isinstance(target, ast.Name):
        if target.id != "_":
            env[target.id] = value
    elif isinstance(target, (ast.Tuple, ast.List)):
        if not isinstance(value, (tuple, list)) or len(value) != len(target.elts):
            raise NotRebuildable(f"{_why(record)}: line {target.lineno} unpacks {len(target.elts)} values, "
                                 f"the call gives {len(value) if isinstance(value, (tuple, list)) else 1}")
        for t, v in zip(target.elts, value):
            _bind(t, v, env, record)
    else:
        raise NotRebuildable(f"{_why(record)}: line {target.lineno} assigns to {ast.unparse(target)!r}")


def _literal(node: ast.expr, env: dict, record: CompileRecord):
    """A value as ``codegen.Printer`` prints it: names of values, literals, dtypes, devices, slices."""
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise NotRebuildable(f"{_why(record)}: its captured program uses {node.id!r} (line {node.lineno}), "
                             f"a constant the file does not hold")
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_literal(e, env, record) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant) for k in node.keys):
        return {k.value: _literal(v, env, record) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _literal(node.operand, env, record)
        if isinstance(v, (int, float, complex)) and not isinstance(v, bool):
            return -v
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):  # complex literals: 1+2j
        a, b = _literal(node.left, env, record), _literal(node.right, env, record)
        if all(isinstance(v, (int, float, complex)) for v in (a, b)):
            return a + b if isinstance(node.op, ast.Add) else a - b
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        v = getattr(torch, node.attr, None)
        if isinstance(v, (torch.dtype, torch.memory_format, torch.layout)):
            return v
    if isinstance(node, ast.Call) and not node.keywords:
        name = ast.unparse(node.func)
        args = [_literal(a, env, record) for a in node.args]
        if name == "float" and len(args) == 1 and args[0] in ("inf", "nan"):
            return math.inf if args[0] == "inf" else math.nan
        if name == "slice" and len(args) == 3:
            return slice(*args)
        if name == "torch.device" and len(args) == 1 and isinstance(args[0], str):
            return torch.device(args[0])
    raise NotRebuildable(f"{_why(record)}: its captured program has a value a file does not rebuild "
                         f"(line {node.lineno}: {ast.unparse(node)[:80]!r})")


def fresh_inputs(program: Program) -> tuple:
    """Inputs for ``program`` made from its inputs' metadata alone (see ``FRESH_INPUTS``)."""
    gen = torch.Generator().manual_seed(0)
    out = []
    for p in program.forward.inputs:
        if isinstance(p, ScalarInput):
            out.append(p.value)
        elif p.dtype.is_floating_point or p.dtype.is_complex:
            t = torch.randn(p.shape, dtype=p.dtype, generator=gen).to(p.device)
            out.append(t.requires_grad_(p.requires_grad))
        elif p.dtype == torch.bool:
            out.append(torch.ones(p.shape, dtype=torch.bool, device=p.device))
        else:
            out.append(torch.ones(p.shape, dtype=p.dtype, device=p.device))
    return tuple(out)


def live_record(record: CompileRecord) -> CompileRecord:
    """A record to re-run in place of a loaded one: its captured program rebuilt, and a session holding fresh
    inputs and, as the reference of verification, that program run with torch on them (there is no eager
    function to compare with)."""
    program = captured_program(record)
    for p in program.forward.inputs:
        if isinstance(p, TensorProxy) and p.device.type != "cpu" and not _device_available(p.device):
            raise NotRebuildable(f"{_why(record)}: input {p.name} is on {p.device}, which this process does not have")
    inputs = fresh_inputs(program)
    s0 = record.steps[0]
    step = Step(0, "capture", s0.seconds, program, 0, program.count(), structure(program),
                notes=Notes(facts={"inputs": FRESH_INPUTS, "loaded_from": record.source_file}))
    live = CompileRecord(record.name, record.inputs, record.pipeline, [step])
    # the rebuilt program run by torch: what every step must equal
    open_session(live, held=HeldInputs(inputs, strong=True), reference=current_reference(program, inputs))
    return live


def _device_available(device: torch.device) -> bool:
    if device.type == "cuda":
        return torch.cuda.is_available()
    return device.type == "meta"


def _final(record: CompileRecord) -> Step:
    for s in reversed(record.steps):
        if s.program is not None or s.saved is not None:
            return s
    raise ValueError(f"record {record.name!r} has no step with a program to compare")


def _counts(record: CompileRecord) -> tuple[int, int]:
    """(symbols, fusion regions) of the final program."""
    s = _final(record)
    if s.program is not None:
        return s.program.count(), sum(1 for t in s.program for b in t.bound_symbols if b.sym.is_region)
    return (sum(t["stats"]["symbols"] for t in s.saved.values()), sum(t["stats"]["regions"] for t in s.saved.values()))


def compare_saved(a: CompileRecord, b: CompileRecord, *, time: bool = True):
    """``thunderlab.compare`` where either record was loaded from a file: by the final programs' text, untimed."""
    import difflib

    from thunderlab.inspect.saved import code_lines

    from .compare import RecordComparison

    fa, fb = _final(a), _final(b)
    diff = "".join(difflib.unified_diff(code_lines(fa.python("forward")), code_lines(fb.python("forward")),
                                        f"a: {a.pipeline}", f"b: {b.pipeline}"))
    rows = []
    for i in range(max(len(a.steps), len(b.steps))):
        sa = a.steps[i] if i < len(a.steps) else None
        sb = b.steps[i] if i < len(b.steps) else None
        rows.append((i, sa and sa.spec, sa and sa.ms, sb and sb.spec, sb and sb.ms))
    (na, ra), (nb, rb) = _counts(a), _counts(b)
    loaded = a if a.loaded else b
    note = (f"record {loaded.name!r} was loaded from {loaded.source_file or 'a file'} and has no program to run; "
            f"compare live records (compile the function again) to time them") if time else ""
    return RecordComparison(a, b, diff, (na, nb), (ra, rb), None, rows, note)
