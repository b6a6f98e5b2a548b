"""A Program: the named traces that flow through the pipeline together."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

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


@dataclass(eq=False, slots=True, weakref_slot=True)  # slots: a record keeps one per step
class Program:
    """Named traces ("forward", and "backward" once autodiff has run), in order.

    ``training`` is set exactly when there is a backward trace: it says which values the forward
    saves for the backward and which outputs get gradients (see ``Training``).
    """

    traces: dict[str, Trace] = field(default_factory=dict)
    training: Training | None = None

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
        """A new program with ``fn`` applied to every trace (the training contract kept)."""
        return Program({name: fn(t) for name, t in self.traces.items()}, self.training)

    def count(self) -> int:
        return sum(t.count() for t in self.traces.values())

    def __iter__(self) -> Iterator[Trace]:
        return iter(self.traces.values())

    def python(self, **options) -> str:
        return "\n\n".join(t.python(**options) for t in self.traces.values())

    def __str__(self) -> str:
        return self.python()
