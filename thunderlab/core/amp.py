"""The caller's ``torch.autocast`` as data: captured with a program, re-entered or turned off around it.

A program captured under autocast holds autocast's casts as calls of its own (see
``thunderlab.frontend.autocast``), so it runs with autocast off; the eager function it stands
for runs under the autocast it was captured in, so that verification compares like with like.
"""
from __future__ import annotations

import contextlib

import torch

DEVICES = ("cpu", "cuda")


def ambient() -> dict[str, torch.dtype]:
    """The autocast in force now: device type -> its lower-precision dtype, for each device it is on for."""
    return {d: torch.get_autocast_dtype(d) for d in DEVICES if torch.is_autocast_enabled(d)}


def entered(state: dict[str, torch.dtype]) -> contextlib.ExitStack:
    """A context with exactly ``state``'s autocast: on with its dtype for its devices, off for the others."""
    stack = contextlib.ExitStack()
    for device in DEVICES:
        if device in state:
            stack.enter_context(torch.autocast(device, dtype=state[device]))
        elif torch.is_autocast_enabled(device):
            stack.enter_context(torch.autocast(device, enabled=False))
    return stack


def off(devices=DEVICES) -> contextlib.ExitStack:
    """A context with autocast off on ``devices`` (those where it is on now)."""
    stack = contextlib.ExitStack()
    for device in devices:
        if torch.is_autocast_enabled(device):
            stack.enter_context(torch.autocast(device, enabled=False))
    return stack


def without_autocast(fn, devices):
    """``fn`` run with autocast off on ``devices``: a program that holds its casts must not be cast again."""
    devices = tuple(devices)

    def run(*args):
        with off(devices):
            return fn(*args)

    return run
