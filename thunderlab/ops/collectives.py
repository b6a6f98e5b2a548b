"""Collectives: calls that exchange tensors between the processes of a ``torch.distributed`` job.

Each collective is split in two calls, as PyTorch's asynchronous collectives are: the collective
itself starts the exchange and gives back the tensor it will fill (in flight), and ``wait`` gives
that tensor once the exchange is over. Between the two, a program computes on, so communication
overlaps computation; ``ddp`` and ``fsdp`` place each half. Both halves carry
``Tag.COMMUNICATION``: every process must make the same collectives in the same order, so passes
never merge, drop, recompute, fuse or reorder them. The torch executor runs them through
``torch.distributed``'s work handles (gloo on CPU, NCCL on GPUs); a collective never writes into its
argument (it works on a copy), so programs stay functional.

``world`` (the number of processes) is an argument of every call: the shapes that all_gather and
reduce_scatter produce depend on it, and a printed program says what it was compiled for.
The group is always the default one (``torch.distributed.init_process_group``'s).
"""
from __future__ import annotations

import threading
import weakref

import torch

from thunderlab.core.symbols import Tag
from thunderlab.core.trace import TraceError

from .declare import backward_symbol
from .prims import new_proxy

COMM = frozenset({Tag.COMMUNICATION})
OPS = ("sum", "max", "min")

# tensors in flight: id -> (the tensor, its work handle); ``wait`` takes the entry out
_in_flight: dict[int, tuple[weakref.ref, object]] = {}
_lock = threading.Lock()


def _dist():
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("a collective ran without torch.distributed initialised: call "
                           "torch.distributed.init_process_group (torchrun does it) before the program runs")
    return dist


def _reduce_op(op: str):
    return {"sum": _dist().ReduceOp.SUM, "max": _dist().ReduceOp.MAX, "min": _dist().ReduceOp.MIN}[op]


def _started(out: torch.Tensor, work) -> torch.Tensor:
    with _lock:
        _in_flight[id(out)] = (weakref.ref(out), work)
    return out


def _all_reduce(a: torch.Tensor, op: str = "sum", world: int = 1) -> torch.Tensor:
    out = a.detach().clone(memory_format=torch.contiguous_format)
    return _started(out, _dist().all_reduce(out, op=_reduce_op(op), async_op=True))


def _broadcast(a: torch.Tensor, src: int = 0, world: int = 1) -> torch.Tensor:
    out = a.detach().clone(memory_format=torch.contiguous_format)
    return _started(out, _dist().broadcast(out, src=src, async_op=True))


def _all_gather(a: torch.Tensor, world: int = 1) -> torch.Tensor:
    out = a.new_empty((a.shape[0] * world, *a.shape[1:]))
    return _started(out, _dist().all_gather_into_tensor(out, a.detach().contiguous(), async_op=True))


def _reduce_scatter(a: torch.Tensor, op: str = "sum", world: int = 1) -> torch.Tensor:
    dist = _dist()
    out = a.new_empty((a.shape[0] // world, *a.shape[1:]))
    try:
        work = dist.reduce_scatter_tensor(out, a.detach().contiguous(), op=_reduce_op(op), async_op=True)
    except (RuntimeError, NotImplementedError):  # gloo has no reduce_scatter: reduce everything, keep this rank's part
        whole = a.detach().clone(memory_format=torch.contiguous_format)
        dist.all_reduce(whole, op=_reduce_op(op))
        out.copy_(whole.chunk(world)[dist.get_rank()])
        return out
    return _started(out, work)


def _wait(a: torch.Tensor) -> torch.Tensor:
    with _lock:
        entry = _in_flight.pop(id(a), None)
    if entry is not None and entry[0]() is a:
        entry[1].wait()
    return a


def _check(name: str, op: str | None = None, world: int = 1):
    if op is not None and op not in OPS:
        raise TraceError(f"{name}: reduction {op!r} is not one of {', '.join(OPS)}")
    if not isinstance(world, int) or world < 1:
        raise TraceError(f"{name}: world must be the number of processes (an int >= 1), got {world!r}")


def _same_meta(name):
    def meta(a, op="sum", world=1):
        _check(name, op, world)
        return new_proxy(a.shape, a.dtype, a.device)
    return meta


def _broadcast_meta(a, src=0, world=1):
    _check("broadcast", None, world)
    if not 0 <= src < world:
        raise TraceError(f"broadcast: src {src} is not a rank of a world of {world} processes (0 to {world - 1})")
    return new_proxy(a.shape, a.dtype, a.device)


def _all_gather_meta(a, world=1):
    _check("all_gather", None, world)
    if not a.shape:
        raise TraceError("all_gather: gathers along the first dimension, and this tensor has none (a scalar)")
    return new_proxy((a.shape[0] * world, *a.shape[1:]), a.dtype, a.device)


def _reduce_scatter_meta(a, op="sum", world=1):
    _check("reduce_scatter", op, world)
    if not a.shape or a.shape[0] % world:
        raise TraceError(f"reduce_scatter: the first dimension ({a.shape[0] if a.shape else 'none'}) must divide "
                         f"evenly among {world} processes; pad it to a multiple of {world}")
    return new_proxy((a.shape[0] // world, *a.shape[1:]), a.dtype, a.device)


all_reduce = backward_symbol("all_reduce", _all_reduce, _same_meta("all_reduce"), tags=COMM)
broadcast = backward_symbol("broadcast", _broadcast, _broadcast_meta, tags=COMM)
all_gather = backward_symbol("all_gather", _all_gather, _all_gather_meta, tags=COMM)
reduce_scatter = backward_symbol("reduce_scatter", _reduce_scatter, _reduce_scatter_meta, tags=COMM)
wait = backward_symbol("wait", _wait, lambda a: new_proxy(a.shape, a.dtype, a.device), tags=COMM)
