"""How a torch-level op is declared: ``@torchsymbol`` on its decomposition, its rules beside it.

::

    @torchsymbol(F.silu, torch._C._nn.silu, tags=...)      # the torch callables it stands for
    def silu(a, inplace=False):                            # the decomposition, in ops and prims
        return mul(a, sigmoid(a))

    @derivative(silu)                                      # its derivative (thunderlab.ops.rules)
    def _(b, g):
        return [(b.params.a, silu_backward(g, b.params.a))]

Every torch-level symbol is filed in ``LTORCH`` by name: that is what ``ltorch.<name>`` in a
printed program resolves to. ``TORCH_SYMBOLS`` adds, for those a captured program can call,
the torch callables and Tensor methods ``mapping`` sends to them.
"""
from __future__ import annotations

from collections.abc import Callable

from thunderlab.core.listeners import Listeners
from thunderlab.core.symbols import Symbol

from .prims import torch_meta

__all__ = ["TORCH_SYMBOLS", "LTORCH", "DuplicateOp", "torchsymbol", "opaque_symbol", "backward_symbol", "on_declare"]

# name -> (symbol, torch callables it stands for, Tensor method names)
TORCH_SYMBOLS: dict[str, tuple[Symbol, tuple, tuple]] = {}
# name -> symbol, for every torch-level symbol (backward kernels and forward variants included)
LTORCH: dict[str, Symbol] = {}
# torch functions called as they are (``mapping.opaque_symbol``), by the function (or its key): one symbol each
OPAQUE: dict[object, Symbol] = {}
# in a process that made symbols again from another's recipes (``mapping.rebuild``, in the compile worker): the name
# the sending process gave each (its programs name it so, as ``eager_vjp``'s first argument among others) -> the
# symbol; looked up before this process's own names
KNOWN_AS: dict[str, Symbol] = {}


class DuplicateOp(ValueError):
    """A second declaration of a torch-level op under a name already taken, without ``override=True``."""


# called with (symbol, torch callables, Tensor methods, override=...) for each op declared: ``mapping`` keeps its
# tables this way
DECLARED = Listeners("an op declared")


def on_declare(fn: Callable) -> Callable:
    """Call ``fn(symbol, fns, methods, override=...)`` for every op declared so far and from now on."""
    DECLARED.add(fn)
    for sym, fns, methods in TORCH_SYMBOLS.values():
        fn(sym, fns, methods, override=False)
    return fn


def _file(sym: Symbol, override: bool) -> Symbol:
    if sym.name in LTORCH and not override:
        raise DuplicateOp(f"ltorch.{sym.name} is already declared; one declaration per op: choose another name, "
                          f"or pass override=True to replace it")
    LTORCH[sym.name] = sym
    return sym


def torchsymbol(*fns, name: str | None = None, methods=(), impl: Callable | None = None, decompose: bool = True,
                override: bool = False, **flags) -> Callable[[Callable], Symbol]:
    """Declare a torch-level symbol whose decomposition is the decorated function.

    ``fns`` are the torch callables it stands for (the first runs it unless ``impl`` is given),
    ``methods`` the Tensor methods; ``flags`` go to ``Symbol`` (``tags=``, ``signature=``). A
    decomposition may return ``NotImplemented`` for arguments it does not cover; the call is
    then kept whole, with metadata from the meta device. Declaring a name twice is an error
    unless ``override=True``.
    """

    def deco(fn):
        n = name or fn.__name__.strip("_")
        run = impl or fns[0]
        sym = _file(Symbol(name=n, module="ltorch", impl=run, decomposition=fn if decompose else None,
                           meta=torch_meta(run, f"ltorch.{n}"), **flags), override)
        TORCH_SYMBOLS[n] = (sym, tuple(fns), tuple(methods))
        DECLARED(sym, tuple(fns), tuple(methods), override=override)
        return sym

    return deco


def opaque_symbol(name: str, *fns, methods=(), impl: Callable | None = None, **flags) -> Symbol:
    """A torch-level symbol with no decomposition: executors take it whole."""
    return torchsymbol(*fns, name=name, methods=methods, impl=impl, decompose=False, **flags)(lambda *a, **k: None)


def backward_symbol(name: str, impl: Callable, meta: Callable | None = None, *, override: bool = False,
                    **flags) -> Symbol:
    """A torch-level kernel that derivative rules call (``ltorch.gelu_backward``); no torch entry point maps to it.

    Its meta runs ``impl`` on meta tensors unless ``meta`` is given.
    """
    return _file(Symbol(name=name, module="ltorch", impl=impl, meta=meta or torch_meta(impl, f"ltorch.{name}"),
                        **flags), override)
