"""Passes, the pass registry, and pipelines that parse from and print to text.

A pass is a frozen dataclass: its class attribute ``name`` is how pipeline strings spell
it, its fields are its options, and the first line of its docstring is its summary.
``"dce,cse,claim{executors=torch,decompose=all},del"`` is a pipeline.
"""
from __future__ import annotations

import dataclasses
import re
import typing
import warnings
from dataclasses import dataclass
from typing import ClassVar

from thunderlab.core.notes import Decline, Notes  # noqa: F401  (pass authors find both here)
from thunderlab.core.program import Program

REGISTRY: dict[str, type[Pass]] = {}


class PipelineError(ValueError):
    """A pipeline string or pass option is invalid; the message lists what is valid."""


class PipelineWarning(UserWarning):
    """A pipeline is valid but part of it does nothing (e.g. a pass that has no effect the second time)."""


@dataclass(frozen=True)
class Pass:
    """Base of every pass: ``__call__(program) -> program`` and never mutates its input."""

    name: ClassVar[str] = ""
    requires: ClassVar[tuple[str, ...]] = ()  # passes that must run earlier in the pipeline
    last: ClassVar[bool] = False  # must be the final pass (nothing may follow it)
    repeatable: ClassVar[bool] = True  # False: a second run changes nothing, and a pipeline that repeats it is warned
    # True: the program takes other inputs after this pass (fsdp's parameter shards), which its caller passes;
    # the runner takes the new inputs as the program's interface and stops checking numerics on the captured ones
    changes_inputs: ClassVar[bool] = False

    def __call__(self, program: Program) -> Program:
        raise NotImplementedError

    def describe(self, before: Program, after: Program) -> Notes:
        """What this pass did, for the record (derived, never stored by the pass): a one-line summary, named
        facts, and the calls an executor declined (see ``Notes``)."""
        return Notes()

    def in_pipeline(self, following: tuple[PassSpec, ...]) -> Pass:
        """This pass as it runs with ``following`` after it in a pipeline.

        Itself, unless an option set to "auto" is decided by what comes later (remat asks
        whether a fusing executor will run what it recomputes). The runner calls it, records
        the result with the step, and reuses the step in a re-run only if it comes out the same.
        """
        return self

    @classmethod
    def summary(cls) -> str:
        return (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""

    @classmethod
    def options(cls) -> dict[str, tuple[str, object]]:
        """Option name -> (type as written, default)."""
        hints = typing.get_type_hints(cls)
        return {f.name: (_type_name(hints[f.name]), f.default) for f in dataclasses.fields(cls)}


def register_pass(cls: type[Pass]) -> type[Pass]:
    """Make a pass usable by name in pipeline strings (also from a notebook cell)."""
    if not cls.name:
        raise PipelineError(f"{cls.__name__} needs a `name` class attribute (kebab-case)")
    REGISTRY[cls.name] = cls
    return cls


def _type_name(t) -> str:
    if typing.get_origin(t) is tuple:
        return f"{typing.get_args(t)[0].__name__}+..."
    return getattr(t, "__name__", str(t))


def _convert(cls, key: str, raw: str):
    hints = typing.get_type_hints(cls)
    t = hints[key]
    try:
        if t is bool:
            if raw.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return raw.lower() in ("true", "1", "yes")
        if typing.get_origin(t) is tuple:
            inner = typing.get_args(t)[0]
            return tuple(inner(v) for v in raw.split("+") if v)
        return t(raw)
    except ValueError:
        kind = _type_name(t)
        article = "an" if kind[:1] in "aeiou" else "a"
        raise PipelineError(f"option {key!r} of pass {cls.name!r} takes {article} {kind}, got {raw!r}") from None


@dataclass(frozen=True)
class PassSpec:
    """A pass as written in a pipeline: its name and the options given, in order."""

    name: str
    options: tuple[tuple[str, str], ...] = ()
    enabled: bool = True

    def __str__(self) -> str:
        opts = "{" + ",".join(f"{k}={v}" for k, v in self.options) + "}" if self.options else ""
        return f"{'' if self.enabled else '-'}{self.name}{opts}"

    def instantiate(self) -> Pass:
        cls = REGISTRY.get(self.name)
        if cls is None:
            raise PipelineError(f"unknown pass {self.name!r}; registered passes: {', '.join(sorted(REGISTRY))}")
        valid = cls.options() if self.options else {}  # (type hints are read anew each time: only when given)
        kwargs = {}
        for k, v in self.options:
            if k not in valid:
                listed = ", ".join(f"{n} ({t})" for n, (t, _) in valid.items()) or "none"
                raise PipelineError(f"pass {self.name!r} has no option {k!r}; its options: {listed}")
            kwargs[k] = _convert(cls, k, v)
        return cls(**kwargs)


_ITEM = re.compile(r"\s*(-?)([A-Za-z][\w-]*)\s*(\{[^{}]*\})?\s*")


class Pipeline:
    """An ordered list of pass specs; ``Pipeline.parse(text)`` and ``str(pipeline)`` round-trip."""

    def __init__(self, specs):
        self.specs: list[PassSpec] = list(specs)

    @classmethod
    def parse(cls, text: str | Pipeline) -> Pipeline:
        if isinstance(text, Pipeline):
            return text
        if not isinstance(text, str):
            raise PipelineError(f"a pipeline is a string like 'dce,cse,claim,del', got {type(text).__name__}")
        specs, pos, text = [], 0, text.strip()
        while pos < len(text):
            m = _ITEM.match(text, pos)
            if not m or m.end() == pos:
                raise PipelineError(f"cannot parse pipeline at character {pos}: {text[pos:pos + 20]!r}; "
                                    f"expected name or name{{option=value,...}}")
            disabled, name, opts = m.groups()
            options = []
            if opts:
                for part in filter(None, (p.strip() for p in opts[1:-1].split(","))):
                    if "=" not in part:
                        raise PipelineError(f"option {part!r} of pass {name!r} needs the form key=value")
                    k, v = (x.strip() for x in part.split("=", 1))
                    given = dict(options)
                    if k in given:
                        raise PipelineError(
                            f"option {k!r} of pass {name!r} is given twice ({k}={given[k]} and {k}={v}); give it once"
                        )
                    options.append((k, v))
            specs.append(PassSpec(name, tuple(options), enabled=not disabled))
            pos = m.end()
            if pos < len(text):
                if text[pos] != ",":
                    raise PipelineError(f"expected ',' between passes at character {pos} of {text!r}")
                pos += 1
        pipeline = cls(specs)
        pipeline.validate()
        return pipeline

    def enabled(self) -> list[PassSpec]:
        return [s for s in self.specs if s.enabled]

    def validate(self) -> None:
        """Check names, options and ordering constraints; raise PipelineError naming the problem."""
        specs = self.enabled()
        seen: list[str] = []
        for i, spec in enumerate(specs):
            p = spec.instantiate()
            for req in p.requires:
                if req not in seen:
                    raise PipelineError(f"pass {spec.name!r} requires {req!r} to run before it; "
                                        f"add {req!r} earlier in the pipeline")
            if p.last and i != len(specs) - 1:
                after = specs[i + 1:]
                raise PipelineError(
                    f"pass {spec.name!r} must be the last pass, but "
                    f"{', '.join(repr(s.name) for s in after)} follow{'s' if len(after) == 1 else ''} it"
                )
            if not p.repeatable and spec.name in seen:
                warnings.warn(f"pass {spec.name!r} appears more than once in {str(self)!r}; its second run changes "
                              f"nothing", PipelineWarning, stacklevel=3)
            seen.append(spec.name)

    def passes(self) -> list[Pass]:
        return [s.instantiate() for s in self.enabled()]

    def __str__(self) -> str:
        return ",".join(str(s) for s in self.specs)

    def __repr__(self) -> str:
        return f"Pipeline({str(self)!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Pipeline) and self.specs == other.specs

    def __len__(self) -> int:
        return len(self.specs)
