"""Run a small program eagerly and compiled, and compare everything PyTorch's documentation promises.

A case is a function and a factory of fresh inputs (so a program that mutates its inputs is
compared on copies that start equal). ``check`` runs it through each entry point and compares
with eager PyTorch:

- every output: value (exact for integers and booleans), dtype, shape, ``requires_grad``;
- aliasing: which outputs share storage with which inputs and with each other (a returned
  view must still be a view of the same base);
- every input after the call (a mutated input must be mutated the same way);
- gradients of every input that requires grad, through a fixed random cotangent;
- random streams: both runs start from the same seed, and a draw made after the call must
  also match (a compiled program must consume the generator as eager does).

A case may instead be refused: ``check`` accepts an error whose message names the construct
(``refusal=`` a regular expression); anything else that differs from eager fails.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import torch

import thunderlab

ENTRIES: dict[str, Callable] = {
    "jit": lambda fn: thunderlab.jit(fn),
    "compile": lambda fn: torch.compile(fn, backend="thunderlab", fullgraph=False),
    # every torch-level call replaced by its prims: the decompositions must keep the meaning too
    "decomposed": lambda fn: thunderlab.jit(fn, pipeline="dce,cse,autodiff,remat,claim{decompose=all},del"),
    "direct-off": lambda fn: thunderlab.jit(fn, direct=False),
    # fusion regions compiled by TorchInductor (its first compile takes seconds: use in few cases)
    "inductor": lambda fn: thunderlab.jit(
        fn, pipeline="dce,cse,claim{executors=inductor+torch},fuse,del", tiered=False
    ),
}
DEFAULT_ENTRIES = ("jit", "compile", "decomposed")
OUTCOMES: list[tuple[str, str]] = []  # (entry, "ok" | "refused") of every check made, for the suite's counts


def _leaves(x) -> list:
    if isinstance(x, (tuple, list)):
        return [v for e in x for v in _leaves(e)]
    if isinstance(x, dict):
        return [v for e in x.values() for v in _leaves(e)]
    return [x]


def _storage(t: torch.Tensor):
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return None


def _aliases(tensors: list[torch.Tensor], inputs: list[torch.Tensor]) -> set:
    """Pairs (output i, input j or output j) that share storage: the aliasing structure of a call."""
    pairs = set()
    for i, t in enumerate(tensors):
        s = _storage(t)
        if s is None or t.numel() == 0:
            continue
        for j, a in enumerate(inputs):
            if _storage(a) == s:
                pairs.add((f"out{i}", f"in{j}"))
        for j, u in enumerate(tensors[:i]):
            if _storage(u) == s:
                pairs.add((f"out{i}", f"out{j}"))
    return pairs


def _clone_inputs(args):
    """Independent copies of ``args`` that keep which inputs alias which (views stay views)."""
    memo: dict[int, torch.Tensor] = {}

    def copy(v):
        if not isinstance(v, torch.Tensor):
            return v
        base = v._base if v._base is not None else v
        if id(base) not in memo:
            c = base.detach().clone()
            c.requires_grad_(base.requires_grad)
            memo[id(base)] = c
        nb = memo[id(base)]
        if v._base is None:
            return nb
        return nb.as_strided(v.size(), v.stride(), v.storage_offset())

    return _map(copy, args)


def _map(fn, x):
    if isinstance(x, tuple):
        return tuple(_map(fn, e) for e in x)
    if isinstance(x, list):
        return [_map(fn, e) for e in x]
    if isinstance(x, dict):
        return {k: _map(fn, v) for k, v in x.items()}
    return fn(x)


class Mismatch(AssertionError):
    """A compiled run differs from eager; the message names the entry, the output and what differs."""


def _same_value(where: str, got, want):
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            raise Mismatch(f"{where}: eager gives a tensor, compiled gives {type(got).__name__}")
        if got.dtype != want.dtype:
            raise Mismatch(f"{where}: dtype {got.dtype}, eager {want.dtype}")
        if got.shape != want.shape:
            raise Mismatch(f"{where}: shape {list(got.shape)}, eager {list(want.shape)}")
        if got.requires_grad != want.requires_grad:
            raise Mismatch(f"{where}: requires_grad {got.requires_grad}, eager {want.requires_grad}")
        g, w = got.detach(), want.detach()
        if w.is_floating_point() or w.is_complex():
            try:
                torch.testing.assert_close(g, w, rtol=1.3e-6, atol=1e-5, equal_nan=True)
            except AssertionError as e:
                raise Mismatch(f"{where}: values differ from eager\n{e}") from None
            # the sign of zero and infinities are part of the value (1 / -0.0 is -inf)
            if w.is_floating_point() and not torch.equal(torch.signbit(g[w == 0]), torch.signbit(w[w == 0])):
                raise Mismatch(f"{where}: the sign of a zero differs from eager")
        elif not torch.equal(g, w):
            bad = (g != w).nonzero()[:3].tolist()
            raise Mismatch(f"{where}: values differ from eager at {bad}")
    elif isinstance(want, float) and want != want:
        if not (isinstance(got, float) and got != got):
            raise Mismatch(f"{where}: {got!r}, eager {want!r}")
    elif got != want or type(got) is not type(want):
        raise Mismatch(f"{where}: {got!r}, eager {want!r}")


def _run(fn, args, seed, grad):
    torch.manual_seed(seed)
    out = fn(*args)
    after = torch.rand(4)  # the generator's state after the call
    leaves = _leaves(out)
    tensors = [v for v in leaves if isinstance(v, torch.Tensor)]
    ins = [v for v in _leaves(args) if isinstance(v, torch.Tensor)]
    grads = None
    if grad:
        diff = [t for t in tensors if t.requires_grad and (t.is_floating_point() or t.is_complex())]
        leaves_in = [a for a in ins if a.requires_grad and a.is_leaf]
        if diff and leaves_in:
            g = torch.Generator().manual_seed(1234)
            cot = [torch.randn(t.shape, generator=g, dtype=t.dtype) if t.is_floating_point() else torch.ones_like(t)
                   for t in diff]
            grads = torch.autograd.grad(diff, leaves_in, cot, allow_unused=True)
    return leaves, tensors, ins, after, grads


def check(fn: Callable, make_args: Callable[[], tuple], *, entries: Iterable[str] = DEFAULT_ENTRIES,
          seed: int = 0, grad: bool = True, random_stream: bool = True, refusal: str | None = None,
          calls: int = 2) -> dict[str, str]:
    """Compare ``fn`` compiled through each entry with eager on fresh inputs; raise Mismatch on any difference.

    ``refusal``: a pattern; an entry whose compile raises an error matching it counts as refused
    (correct behaviour for a construct thunderlab cannot express). Returns {entry: "ok" | "refused"}.
    ``calls``: how many times each compiled function is called (the second call runs the cached
    program, which must also be right).
    """
    result = {}
    for entry in entries:
        torch._dynamo.reset()
        cfn = ENTRIES[entry](fn)
        for call in range(calls):
            args = make_args()
            ref_args, got_args = _clone_inputs(args), _clone_inputs(args)
            want = _run(fn, ref_args, seed + call, grad)
            try:
                got = _run(cfn, got_args, seed + call, grad)
            except Exception as e:  # noqa: BLE001 - a refusal must name the construct
                if refusal is not None and re.search(refusal, str(e)):
                    result[entry] = "refused"
                    break
                raise
            where = f"[{entry}, call {call + 1}]"
            w_leaves, w_t, w_in, w_after, w_grads = want
            g_leaves, g_t, g_in, g_after, g_grads = got
            if len(g_leaves) != len(w_leaves):
                raise Mismatch(f"{where}: {len(g_leaves)} outputs, eager {len(w_leaves)}")
            for i, (g, w) in enumerate(zip(g_leaves, w_leaves)):
                _same_value(f"{where} output {i}", g, w)
            for i, (g, w) in enumerate(zip(g_in, w_in)):
                _same_value(f"{where} input {i} after the call", g, w)
            ga, wa = _aliases(g_t, g_in), _aliases(w_t, w_in)
            if ga != wa:
                raise Mismatch(f"{where}: aliasing differs: compiled shares storage {sorted(ga)}, eager {sorted(wa)}")
            if random_stream and not torch.equal(g_after, w_after):
                raise Mismatch(f"{where}: the random generator is left in a different state than eager leaves it")
            if (g_grads is None) != (w_grads is None):
                raise Mismatch(
                    f"{where}: gradients {'missing' if g_grads is None else 'present'} where eager's are not"
                )
            for i, (g, w) in enumerate(zip(g_grads or (), w_grads or ())):
                if (g is None) != (w is None):
                    raise Mismatch(f"{where}: gradient of input {i} is {g!r:.40}, eager {w!r:.40}")
                if g is not None:
                    _same_value(f"{where} gradient of input {i}", g, w)
        else:
            result[entry] = "ok"
        OUTCOMES.append((entry, result[entry]))
    return result


def train_like_eager(make: Callable[[], torch.nn.Module], inputs: Callable[[int], tuple], entry: str,
                     steps: int = 3) -> None:
    """Train a module and its compiled copy side by side with SGD, and compare them step by step.

    Each step compares the output, every parameter's gradient and every buffer (running statistics
    and counters); a wrong gradient or update shows up in every later step too. The parameters are
    first moved off their initial values, so that layers cloned from one another differ.
    """
    import copy

    torch.manual_seed(0)
    eager = make()
    with torch.no_grad():
        for p in eager.parameters():
            p.add_(0.1 * torch.randn_like(p))
    mine = copy.deepcopy(eager)
    compiled = thunderlab.jit(mine) if entry == "jit" else torch.compile(mine, backend="thunderlab")
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (eager, mine)]
    for step in range(steps):
        args = inputs(step)
        torch.manual_seed(step)
        want = eager(*args)
        torch.manual_seed(step)
        got = compiled(*args)
        torch.testing.assert_close(got, want, msg=lambda m, step=step: f"step {step} output: {m}")
        want.pow(2).mean().backward()
        got.pow(2).mean().backward()
        for (n, pe), pm in zip(eager.named_parameters(), mine.parameters()):
            torch.testing.assert_close(pm.grad, pe.grad, atol=1e-5, rtol=1e-4,
                                       msg=lambda m, n=n, step=step: f"step {step} gradient of {n}: {m}")
        for (n, be), bm in zip(eager.named_buffers(), mine.buffers()):
            torch.testing.assert_close(bm, be, msg=lambda m, n=n, step=step: f"step {step} buffer {n}: {m}")
        for o in opts:
            o.step()
            o.zero_grad()
