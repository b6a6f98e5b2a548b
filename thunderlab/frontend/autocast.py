"""A function called under ``torch.autocast``: the casts autocast makes, written into the program.

When a compiled function is called inside ``with torch.autocast(...)`` (the usual mixed-precision
training step: forward and loss under autocast, backward outside it), TorchDynamo captures its
graph with no trace of autocast: only its fake values, run under the caller's autocast, carry
the dtypes each op produced (``node.meta["example_value"]``). thunderlab makes those decisions
part of the program: before a call whose eager dtype differs from what the call would give on
its inputs as they are, each input autocast converted is converted by an explicit ``ltorch.to``.
Which ops autocast casts, and to what, is not restated from PyTorch's lists (they differ by
device and version): the call is run on fake tensors with and without autocast, and the
conversions of its inputs that only autocast made are the ones written into the program.

The program then means the same with or without autocast around it and runs with autocast
off (``thunderlab.core.amp``), so no executor casts a second time; its backward follows the
casts, so each gradient is computed in the dtype eager's autograd uses and reaches the
parameter in the parameter's dtype. Graphs are captured per autocast state (TorchDynamo guards
on it), and the state is kept with the program (``Program.boundary.autocast``) for verification.
"""
from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

from thunderlab.core import amp
from thunderlab.core.proxies import TensorProxy
from thunderlab.core.symbols import tree_flatten
from thunderlab.core.trace import TraceError
from thunderlab.ops import torch_ops as ltorch


def _casts(p, state: dict[str, torch.dtype], dtype: torch.dtype) -> bool:
    """Whether autocast may have cast ``p`` to ``dtype`` (it casts floating tensors of its devices, never float64)."""
    return (isinstance(p, TensorProxy) and p.device.type in state and p.dtype.is_floating_point
            and p.dtype != torch.float64 and p.dtype != dtype)


# where ``eager_dtype``'s answer is kept once TorchDynamo's fake value is let go (see ``frontend.fx.slim``)
EAGER_DTYPE = "thunderlab_eager_dtype"


def eager_dtype(node: torch.fx.Node) -> torch.dtype | None:
    """The floating dtype the node's (first) tensor value had in eager under the caller's autocast."""
    if EAGER_DTYPE in node.meta:
        return node.meta[EAGER_DTYPE]
    ev = node.meta.get("example_value")
    if isinstance(ev, (tuple, list)):
        ev = next((v for v in ev if isinstance(v, torch.Tensor)), None)
    if isinstance(ev, torch.Tensor) and ev.dtype.is_floating_point:
        return ev.dtype
    return None


def cast_for(node: torch.fx.Node, args, kwargs, state: dict[str, torch.dtype]) -> dict[str, torch.dtype]:
    """The inputs autocast casts for ``node``'s call (proxy name -> dtype); empty when it casts none.

    Only a call whose eager dtype differs from one of its autocast-eligible inputs' can have been
    cast. For such a call, the casts are seen, not assumed: the call runs on fake tensors twice, with
    the caller's autocast and with autocast off, and the conversions of its inputs made only in the
    first run are autocast's.
    """
    dtype = eager_dtype(node)
    if dtype is None or not any(_casts(p, state, dtype) for p in tree_flatten((args, kwargs))):
        return {}
    with_autocast = _conversions(node, args, kwargs, state, enabled=True)
    plain = _conversions(node, args, kwargs, state, enabled=False)
    return {name: d for name, d in with_autocast.items() if plain.get(name) != d}


class _Conversions(TorchDispatchMode):
    """Records which of the given tensors are converted to another dtype, and to which."""

    def __init__(self, names: dict[int, str]):
        super().__init__()
        self.names, self.seen = names, {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _CONVERSIONS and args and id(args[0]) in self.names:
            dtype = kwargs.get("dtype", next((a for a in args[1:] if isinstance(a, torch.dtype)), None))
            if dtype is not None and dtype != args[0].dtype:
                self.seen.setdefault(self.names[id(args[0])], dtype)
        return func(*args, **kwargs)


_aten = torch.ops.aten
_CONVERSIONS = {_aten._to_copy.default, _aten.to.dtype, _aten.to.dtype_layout,
                _aten._autocast_to_reduced_precision.default, _aten._autocast_to_full_precision.default}


def _conversions(node, args, kwargs, state, *, enabled: bool) -> dict[str, torch.dtype]:
    """Run ``node``'s call on fake tensors of its inputs; the dtype each input was converted to (by name)."""
    with FakeTensorMode(), (amp.entered(state) if enabled else amp.off(tuple(state))):
        fakes: dict[str, torch.Tensor] = {}

        def fake(v):
            if isinstance(v, TensorProxy):
                if v.name not in fakes:
                    fakes[v.name] = torch.empty(v.shape, dtype=v.dtype, device=v.device)
                return fakes[v.name]
            if isinstance(v, (tuple, list)):
                return type(v)(fake(e) for e in v)
            if isinstance(v, dict):
                return {k: fake(e) for k, e in v.items()}
            return v

        a, kw = fake(tuple(args)), fake(dict(kwargs))
        mode = _Conversions({id(t): name for name, t in fakes.items()})
        try:
            with mode:
                if node.op == "call_method":
                    getattr(a[0], node.target)(*a[1:], **kw)
                else:
                    node.target(*a, **kw)
        except Exception as e:
            if enabled:  # eager ran this call under autocast: thunderlab cannot see what autocast did with it
                raise TraceError(f"under torch.autocast, thunderlab could not see which inputs of {_name(node)} "
                                 f"autocast casts ({type(e).__name__}: {str(e).splitlines()[0][:200]})") from None
            # with autocast off the call may not run at all (a float32 weight and a bfloat16 activation)
    return mode.seen


def cast_inputs(args, kwargs, casts: dict[str, torch.dtype]):
    """``args`` and ``kwargs`` with each input named in ``casts`` converted to its dtype (an explicit ``ltorch.to``)."""
    done: dict[str, TensorProxy] = {}

    def cast(v):
        if isinstance(v, TensorProxy) and v.name in casts:
            if v.name not in done:
                done[v.name] = ltorch.to(v, casts[v.name])
            return done[v.name]
        if isinstance(v, (tuple, list)):
            return type(v)(cast(e) for e in v)
        if isinstance(v, dict):
            return {k: cast(e) for k, e in v.items()}
        return v

    return cast(tuple(args)), cast(dict(kwargs))


def check(node: torch.fx.Node, value) -> None:
    """Refuse by name a call whose lowered dtype differs from eager's under autocast (never approximate it)."""
    want = eager_dtype(node)
    got = next((v for v in tree_flatten(value) if isinstance(v, TensorProxy)), None)
    if want is None or got is None or got.dtype == want:
        return
    raise TraceError(f"under torch.autocast, {_name(node)} gives {str(want).removeprefix('torch.')} in eager but "
                     f"{str(got.dtype).removeprefix('torch.')} here; call it outside the autocast block, or "
                     f"inside the compiled function under its own `with torch.autocast(...)`")


def _name(node: torch.fx.Node) -> str:
    return node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))
