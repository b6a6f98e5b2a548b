"""Rule tables: what passes ask about a symbol beyond its metadata and tags, one rule per symbol.

A table maps a symbol's printed name ("ltorch.gelu") to one function. Registering a second
rule for a symbol raises ``RuleConflict`` unless the registration says ``override=True``, so
two modules cannot silently replace each other's rule depending on which was imported last.

``VJP``: the derivative of a call (see ``thunderlab.ops.vjp``); ``RESIDUALS``: the forward
variant that also returns what the derivative reads; ``DRAWS``: whether a call of a RANDOM
symbol really draws for these arguments (dropout with ``p == 0`` does not).
"""
from __future__ import annotations

from collections.abc import Callable

from thunderlab.core.symbols import Symbol


class RuleConflict(ValueError):
    """A second rule was registered for a symbol without ``override=True``."""


def _key(s) -> str:
    if isinstance(s, Symbol):
        return s.qualname
    if isinstance(s, str) and "." in s:
        return s
    raise TypeError(f"a rule is registered for a Symbol or a printed name such as 'ltorch.gelu', got {s!r}")


class RuleTable(dict):
    """A ``{qualname: rule}`` table whose ``register`` refuses a second rule for the same symbol."""

    def __init__(self, what: str):
        super().__init__()
        self.what = what

    def register(self, *symbols, override: bool = False) -> Callable:
        """Decorator: file the function as the rule of each symbol (a Symbol or its printed name)."""
        keys = [_key(s) for s in symbols]

        def deco(fn):
            for k in keys:
                self.add(k, fn, override=override)
            return fn

        return deco

    __call__ = register

    def add(self, key, fn: Callable, *, override: bool = False) -> None:
        key = _key(key)
        old = self.get(key)
        if old is not None and old is not fn and not override:
            where = (
                f"{getattr(old, '__module__', '?')}:{getattr(getattr(old, '__code__', None), 'co_firstlineno', '?')}"
            )
            raise RuleConflict(f"{key} already has {self.what} (from {where}); one rule per symbol: remove one, "
                               f"or register the new one with override=True")
        self[key] = fn


VJP = RuleTable("a derivative rule")
RESIDUALS = RuleTable("a forward variant with residuals")
DRAWS = RuleTable("a rule saying when it draws random numbers")


def draws(b) -> bool:
    """Whether this call really draws random numbers: a RANDOM symbol, unless its DRAWS rule says not here."""
    if not b.random:
        return False
    rule = DRAWS.get(b.sym.qualname)
    return True if rule is None else bool(rule(b.params))


# the decorators an op's module uses beside its declaration: ``@derivative(op)``, ``@residuals(op)``,
# ``@draws_when(op)``
derivative = VJP.register
residuals = RESIDUALS.register
draws_when = DRAWS.register
