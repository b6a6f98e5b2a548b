"""Inputs and outputs that share memory: which inputs overlap, and outputs re-made as views of inputs."""
from __future__ import annotations

import itertools

import torch

from thunderlab.core.symbols import tree_flatten, tree_map


def _extent(t: torch.Tensor) -> tuple[int, int, int]:
    """(storage, first byte, end byte) of the memory ``t`` can reach."""
    if t.numel() == 0:
        return (0, 0, 0)
    span = 1 + sum((n - 1) * abs(st) for n, st in zip(t.shape, t.stride()))
    start = t.data_ptr()
    return (t.untyped_storage().data_ptr(), start, start + span * t.element_size())


def overlapping(tensors: dict[str, torch.Tensor]) -> dict[str, list[str]]:
    """For each named tensor, the others whose memory ranges meet its own."""
    ext = {n: _extent(t) for n, t in tensors.items() if not t.is_meta}
    out: dict[str, list[str]] = {}
    for n, (s, a, b) in ext.items():
        for m, (s2, a2, b2) in ext.items():
            if m != n and s == s2 and a < b2 and a2 < b and b > a:
                out.setdefault(n, []).append(m)
    return out


def overlap_with(args, positions) -> bool:
    """Whether an input at ``positions`` (one the program writes) shares memory with another tensor input.

    Asked on every call of a program that writes its inputs (a model with batch norm: well over a
    hundred inputs), so only tensors on the storage of a written one are compared, not every pair.
    """
    storages = {}
    for i in positions:
        t = args[i]
        if isinstance(t, torch.Tensor) and not t.is_meta and t.numel():
            storages.setdefault(t.untyped_storage().data_ptr(), set()).add(i)
    if not storages:
        return False
    shared = {}
    for i, t in enumerate(args):
        if isinstance(t, torch.Tensor) and not t.is_meta and t.numel():
            group = storages.get(t.untyped_storage().data_ptr())
            if group is not None:
                shared.setdefault(id(group), (group, []))[1].append(i)
    for group, members in shared.values():
        if len(members) > 1:
            found = overlapping({str(i): args[i] for i in members})
            if any(str(i) in found for i in group):
                return True
    return False


def _shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` are views of one storage (a write through one can show in the other)."""
    if a.numel() == 0 or b.numel() == 0 or a.is_meta or b.is_meta:
        return False
    try:
        return torch._C._is_alias_of(a, b)
    except (RuntimeError, NotImplementedError):  # tensors without a storage (some subclasses): nothing to share
        return False


def alias_relations(outputs, inputs) -> set[tuple[str, int, str, int]]:
    """Which returned tensors share memory with which inputs and with which earlier returned tensors.

    ``outputs``: a call's returned structure (tensor leaves counted in tree order); ``inputs``: the
    tensors it was called with. Facts are ("output", i, "input", j) and ("output", i, "output", j), j < i.
    """
    outs = [(i, t) for i, t in enumerate(tree_flatten(outputs)) if isinstance(t, torch.Tensor)]
    ins = [(j, t) for j, t in enumerate(inputs) if isinstance(t, torch.Tensor)]
    found = set()
    for n, (i, t) in enumerate(outs):
        found.update(("output", i, "input", j) for j, a in ins if _shares(t, a))
        found.update(("output", i, "output", j) for j, u in outs[:n] if _shares(t, u))
    return found


def alias_change(actual: set, expected: set) -> str:
    """The first difference between two ``alias_relations`` results, in words ("" when alike)."""
    def words(fact):
        _, i, what, j = fact
        return f"output {i} shares memory with {what} {j}"

    for fact in sorted(expected - actual):
        return (f"aliasing: {words(fact)} in eager, not in the program "
                "(the program returns a copy where eager returns a view)")
    for fact in sorted(actual - expected):
        return f"aliasing: {words(fact)} in the program, not in eager (a write to one would show in the other)"
    return ""


def remake_input_views(out, inputs, views):
    """``out`` with the outputs listed in ``views`` re-made as views of ``inputs`` (what the runtime returns)."""
    made = {}
    for k, pos, steps in views:
        t = inputs[pos]
        for step in steps:
            t = step.replay(t)
        made[k] = t
    return _replace_tensors(out, made)


def with_recorded_writes(fn, positions):
    """``fn`` whose last outputs are the new values of inputs at ``positions``, written into them under autograd."""
    n = len(positions)

    def run(*args):
        out = fn(*args)
        for pos, value in zip(positions, out[-n:]):
            args[pos].copy_(value)
        return out[:-n]

    return run


def with_input_views(fn, views):
    """``fn`` whose outputs listed in ``views`` are re-made as views of the caller's input tensors.

    ``views``: (output leaf, input position, view steps). Eager returns a view of the input (or
    the input itself); the program computed its value, which the view now shows, since the
    program has written its inputs back before it returns.
    """
    def run(*args):
        return remake_input_views(fn(*args), args, views)

    return run


def _replace_tensors(out, made: dict):
    """``out`` with its k-th tensor (in tree order) replaced by ``made[k]`` where given."""
    count = itertools.count()
    return tree_map(lambda v: made.get(next(count), v) if isinstance(v, torch.Tensor) else v, out)
