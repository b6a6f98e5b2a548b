"""A Program: the named traces that flow through the pipeline together."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

from .trace import Trace


@dataclass(frozen=True, slots=True)
class Training:
    """How a training program's forward and backward traces fit together.

    The forward returns ``(outputs, saved)``: the user's outputs, then the values the backward
    needs. The backward takes those saved values first (its inputs named ``saved``, in order),
    then one gradient for each forward output named in ``grad_of`` (in order), and returns one
    gradient (or None) per tensor input of the forward. ``check_program`` verifies all of this
    after every pass.
    """

    saved: tuple[str, ...]  # the backward's first inputs: the values the forward saves for it
    grad_of: tuple[str, ...]  # the forward outputs whose gradients the backward takes next

    def __post_init__(self):
        object.__setattr__(self, "saved", tuple(self.saved))
        object.__setattr__(self, "grad_of", tuple(self.grad_of))


@dataclass(frozen=True)
class Boundary:
    """What the runtime does around a program so that calling it does to the caller's tensors what eager does.

    The frontend makes a program functional (writes become values, views are re-made from their base); this
    is its contract with the runtime for what that left out: which inputs the call writes and which outputs
    are views of an input. Input positions count the forward trace's inputs.
    """

    # outputs that are views of an input, re-made from it at run time: (output leaf, input position, view calls)
    input_views: tuple[tuple[int, int, tuple], ...] = ()
    # inputs the program writes: the runtime's cache notices their versions move on
    written_inputs: tuple[int, ...] = ()
    # inputs the runtime writes under autograd after the call, from the forward's last outputs (one per input)
    recorded_writes: tuple[int, ...] = ()
    # the caller's autocast, (device type, dtype) pairs: the program holds its casts, and runs with autocast off
    # on those devices (``dict(boundary.autocast)`` is what ``torch.autocast`` was entered with)
    autocast: tuple[tuple[str, torch.dtype], ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "input_views", tuple((int(k), int(i), tuple(steps))
                                                      for k, i, steps in self.input_views))
        object.__setattr__(self, "written_inputs", tuple(self.written_inputs))
        object.__setattr__(self, "recorded_writes", tuple(self.recorded_writes))
        pairs = self.autocast.items() if isinstance(self.autocast, dict) else self.autocast
        object.__setattr__(self, "autocast", tuple(sorted((str(d), t) for d, t in pairs)))


@dataclass(eq=False, slots=True, weakref_slot=True)  # slots: a record keeps one per step
class Program:
    """Named traces ("forward", and "backward" once autodiff has run), in order.

    ``training`` is set exactly when there is a backward trace: it says which values the forward
    saves for the backward and which outputs get gradients (see ``Training``). ``boundary`` is the
    frontend's contract with the runtime for writes to inputs and outputs that alias them (see
    ``Boundary``); passes keep it as they found it.
    """

    traces: dict[str, Trace] = field(default_factory=dict)
    training: Training | None = None
    boundary: Boundary = field(default_factory=Boundary)

    @property
    def forward(self) -> Trace:
        return self.traces["forward"]

    @property
    def backward(self) -> Trace | None:
        return self.traces.get("backward")

    @property
    def outputs(self):
        """What the user's function returns (a training forward returns ``(outputs, saved)``)."""
        out = self.forward.output
        return out[0] if self.training is not None else out

    @property
    def saved(self) -> tuple:
        """The values the forward saves for the backward (none without a backward)."""
        return tuple(self.forward.output[1]) if self.training is not None else ()

    def map(self, fn: Callable[[Trace], Trace]) -> Program:
        """A new program with ``fn`` applied to every trace (the training contract and the boundary kept)."""
        return Program({name: fn(t) for name, t in self.traces.items()}, self.training, self.boundary)

    def with_traces(self, traces: dict[str, Trace], training: Training | None = None) -> Program:
        """A new program of ``traces`` (and ``training``), with this one's boundary."""
        return Program(traces, training, self.boundary)

    def count(self) -> int:
        return sum(t.count() for t in self.traces.values())

    def __iter__(self) -> Iterator[Trace]:
        return iter(self.traces.values())

    def python(self, **options) -> str:
        return "\n\n".join(t.python(**options) for t in self.traces.values())

    def __str__(self) -> str:
        return self.python()
