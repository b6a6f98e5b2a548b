"""Checks for the tutorials' exercises: each compares a student's answer with a reference and
says what differs (which statement, which pass, which element), never just "assertion failed".

Every check takes the exercise's id first ("03.2") and raises :class:`ExerciseError` with a
message that starts ``exercise 03.2:``. Code a student has not written yet raises
``NotImplementedError`` or is left as ``...``; the checks report that as "not done yet".
"""
from __future__ import annotations

import torch

from thunderlab.core.codegen import Printer, statement
from thunderlab.core.program import Program
from thunderlab.core.symbols import tree_flatten
from thunderlab.core.trace import Trace
from thunderlab.core.verify import VerificationError, check_trace

__all__ = ["ExerciseError", "attempt", "require", "check_close", "check_calls", "check_program",
           "check_pass", "calls", "line", "lines", "decomposition", "trace_of", "done"]


class ExerciseError(AssertionError):
    """An exercise's answer is missing or wrong; the message says where and how."""


def _fail(ex: str, msg: str):
    raise ExerciseError(f"exercise {ex}: {msg}")


def require(ex: str, value, what: str):
    """``value`` unless it is still the blank ``...``."""
    if value is Ellipsis:
        _fail(ex, f"not done yet: {what} is still `...`")
    return value


def attempt(ex: str, fn, *args, what: str | None = None, **kwargs):
    """Call the student's ``fn``; a blank (``NotImplementedError``) becomes "not done yet"."""
    name = what or getattr(fn, "__name__", "your function")
    require(ex, fn, name)
    try:
        return fn(*args, **kwargs)
    except NotImplementedError as e:
        _fail(ex, f"not done yet: {name} raised NotImplementedError({str(e)!r})")
    except ExerciseError:
        raise
    except Exception as e:
        raise ExerciseError(f"exercise {ex}: {name} raised {type(e).__name__}: {e}") from e


def _index(flat: int, shape) -> tuple:
    idx = []
    for s in reversed(shape):
        idx.append(flat % s if s else 0)
        flat = flat // s if s else 0
    return tuple(reversed(idx))


def check_close(ex: str, got, expected, *, what: str = "the output", rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """``got`` equals ``expected`` (tensors, or tuples of them) to rounding; else name the first wrong element."""
    g, e = tree_flatten(got), tree_flatten(expected)
    if len(g) != len(e):
        _fail(ex, f"{what} has {len(g)} values, the reference has {len(e)}")
    for k, (a, b) in enumerate(zip(g, e)):
        where = what if len(e) == 1 else f"{what} {k}"
        if not isinstance(b, torch.Tensor):
            if a != b:
                _fail(ex, f"{where} is {a!r}, expected {b!r}")
            continue
        if not isinstance(a, torch.Tensor):
            _fail(ex, f"{where} is a {type(a).__name__}, expected a tensor of shape {tuple(b.shape)}")
        if a.shape != b.shape:
            _fail(ex, f"{where} has shape {tuple(a.shape)}, expected {tuple(b.shape)}")
        if a.dtype != b.dtype:
            _fail(ex, f"{where} has dtype {a.dtype}, expected {b.dtype}")
        a, b = a.detach(), b.detach()
        close = torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
        if not bool(close.all()):
            flat = int((~close).flatten().nonzero()[0])
            idx = _index(flat, b.shape)
            bad = int((~close).sum())
            _fail(ex, f"{where} differs at element {list(idx)}: got {a.flatten()[flat].item():.6g}, expected "
                      f"{b.flatten()[flat].item():.6g} ({bad} of {b.numel()} elements differ, "
                      f"max |err| {float((a.double() - b.double()).abs().nan_to_num(0).max()):.3g})")


def calls(trace: Trace) -> list[str]:
    """The symbols a trace calls, in order (``ltorch.mul``, ...), without ``del`` bookkeeping."""
    return [b.sym.qualname for b in trace.bound_symbols if not b.sym.bookkeeping]


def line(call) -> str:
    """One call as its printed statement (``t1 = ltorch.mul(t0, 2)``)."""
    return statement(Printer(), call)


def lines(trace: Trace) -> list[str]:
    """The trace's statements as printed, one per call, without comments or ``del``."""
    p = Printer()
    return [statement(p, b) for b in trace.bound_symbols if not b.sym.bookkeeping]


def _as_trace(ex: str, t, what: str) -> Trace:
    if isinstance(t, Program):
        return t.forward
    if not isinstance(t, Trace):
        _fail(ex, f"{what} should be a Trace, got {type(t).__name__}")
    return t


def check_calls(ex: str, trace, expected: list[str], *, what: str = "your trace") -> None:
    """The trace calls exactly the ``expected`` symbols in order; else name the first statement that differs."""
    trace = _as_trace(ex, trace, what)
    got = calls(trace)
    stmts = lines(trace)
    for k, (g, e) in enumerate(zip(got, expected)):
        if g != e:
            _fail(ex, f"statement {k} of {what} is `{stmts[k]}`, expected a call of {e}")
    if len(got) > len(expected):
        _fail(ex, f"{what} has {len(got) - len(expected)} statement(s) too many, from statement {len(expected)}: "
                  f"`{stmts[len(expected)]}`")
    if len(got) < len(expected):
        _fail(ex, f"{what} ends after {len(got)} statements; the next should call {expected[len(got)]}")


def check_program(ex: str, got, reference, *, what: str = "your trace", ref: str = "the reference") -> None:
    """Two traces print the same statements and return the same values; else name the first statement that differs."""
    a, b = _as_trace(ex, got, what), _as_trace(ex, reference, ref)
    la, lb = lines(a), lines(b)
    for k, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            _fail(ex, f"statement {k} of {what} is `{x}`; {ref} has `{y}`")
    if len(la) != len(lb):
        k = min(len(la), len(lb))
        extra = f"`{la[k]}` is extra" if len(la) > len(lb) else f"`{lb[k]}` is missing"
        _fail(ex, f"{what} has {len(la)} statements, {ref} has {len(lb)}: from statement {k}, {extra}")
    if Printer().value(a.output) != Printer().value(b.output):
        _fail(ex, f"{what} returns {Printer().value(a.output)}; {ref} returns {Printer().value(b.output)}")


def check_pass(ex: str, pass_fn, trace: Trace, inputs, *, reference=None, name: str | None = None) -> Trace:
    """Run a student's trace-to-trace pass and check it: returns a new, well-formed trace that leaves its input
    alone, computes what ``trace`` computes on ``inputs``, and (given ``reference``, a pass) prints the same
    statements as the reference pass's result. Returns the student's trace."""
    name = name or getattr(pass_fn, "__name__", "your pass")
    before = list(trace.bound_symbols)
    out = attempt(ex, pass_fn, trace, what=name)
    out = _as_trace(ex, out, f"what {name} returned")
    if trace.bound_symbols != before:
        _fail(ex, f"{name} changed the trace it was given (a pass returns a new trace: use trace.derive(...))")
    try:
        check_trace(out)
    except VerificationError as e:
        _fail(ex, f"the trace {name} returned is malformed: {e}")
    expected = trace.callable()(*inputs)
    got = out.callable()(*inputs)
    check_close(ex, got, expected, what=f"{name}'s trace: output")
    if reference is not None:
        check_program(ex, out, reference(trace), what=f"the trace {name} returned",
                      ref=f"{getattr(reference, '__name__', 'the reference pass')}'s")
    return out


def trace_of(fn, *examples, names: tuple[str, ...] | None = None) -> Trace:
    """Trace ``fn`` (which calls ``ltorch``/``prims`` symbols) on proxies shaped like the ``examples`` tensors."""
    t = Trace()
    names = names or tuple(f"a{i}" for i in range(len(examples)))
    t.inputs = [t.proxy(e.shape, e.dtype, e.device, name=n) for e, n in zip(examples, names)]
    with t.active():
        out = fn(*t.inputs)
    t.output = out if isinstance(out, tuple) else (out,)
    return t


def done(ex: str, detail: str = "") -> None:
    """Say that an exercise passed."""
    print(f"exercise {ex}: correct" + (f" ({detail})" if detail else ""))


def decomposition(bsym, depth: int = 1) -> str:
    """A call and what it decomposes into, ``depth`` levels down, one indented statement a line."""
    p = Printer()
    out: list[str] = []

    def walk(b, level):
        mark = "" if b.subsymbols or level == 0 else "   # prim" if b.sym.is_prim else ""
        out.append("    " * level + statement(p, b) + mark)
        if level < depth:
            for s in b.subsymbols:
                walk(s, level + 1)

    walk(bsym, 0)
    return "\n".join(out)
