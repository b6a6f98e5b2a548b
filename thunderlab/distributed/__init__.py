"""Data-parallel training with thunderlab over ``torch.distributed`` (processes started by torchrun).

``ddp(model)`` is thunderlab's counterpart of ``torch.nn.parallel.DistributedDataParallel``: the
model's parameters and buffers are broadcast from one process when it is made, and each training
call runs a program whose backward averages the gradients over the processes (the ``ddp`` pass,
whose step in the record shows the buckets and where each all-reduce starts, then ``sink-waits``,
whose step shows where each wait moved)::

    torch.distributed.init_process_group("gloo")        # torchrun sets the rank and world size
    model = thunderlab.distributed.ddp(MyModel())
    loss = model(x).sum(); loss.backward()               # gradients averaged over the processes
    with model.no_sync():                                # accumulate locally, as DDP's no_sync
        model(x2).sum().backward()
"""
from __future__ import annotations

import contextlib

import torch

from thunderlab.api import JitFunction, jit, last_record
from thunderlab.passes import DEFAULT_PIPELINE, Pipeline, PipelineError
from thunderlab.passes.layout import untimed

__all__ = ["DataParallel", "FullyShardedDataParallel", "ddp", "fsdp"]


def _with_ddp(pipeline: str, bucket_mb: float) -> str:
    """``pipeline`` with ``ddp{bucket_mb=...},sink-waits`` after autodiff and remat (where the gradients are final)."""
    specs = Pipeline.parse(pipeline).specs
    names = [s.name for s in specs]
    if "ddp" in names:
        return pipeline
    if "autodiff" not in names:
        raise PipelineError(f"ddp needs autodiff in the pipeline to have gradients to average; got {pipeline!r}")
    at = max(k for k, n in enumerate(names) if n in ("autodiff", "remat")) + 1
    parts = [str(s) for s in specs]
    parts[at:at] = [f"ddp{{bucket_mb={bucket_mb:g}}}", "sink-waits"]
    return ",".join(parts)


class DataParallel:
    """A module trained data-parallel: call it like the module; gradients reach ``.grad`` averaged over processes."""

    def __init__(self, module: torch.nn.Module, *, bucket_mb: float = 25.0, broadcast_from: int = 0,
                 pipeline: str = DEFAULT_PIPELINE, **options):
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("thunderlab.distributed.ddp needs torch.distributed initialised: start the job with "
                               "torchrun (or call torch.distributed.init_process_group first)")
        world = dist.get_world_size()
        if not 0 <= broadcast_from < world:
            raise ValueError(f"broadcast_from={broadcast_from} is not a rank of this job (0 to {world - 1})")
        self.module = module
        self.world = world
        with torch.no_grad():  # every process starts from the same state, as DistributedDataParallel makes it
            for t in [*module.parameters(), *module.buffers()]:
                dist.broadcast(t.data, src=broadcast_from)
        pipeline = untimed(pipeline)  # every process compiles the same program
        self._synced: JitFunction = jit(module, pipeline=_with_ddp(pipeline, bucket_mb), **options)
        self._local: JitFunction = jit(module, pipeline=pipeline, **options)
        self._sync = True
        self._accumulated = False  # gradients accumulated under no_sync, not yet averaged

    def __call__(self, *args, **kwargs):
        if not self._sync:
            self._accumulated = True
            return self._local(*args, **kwargs)
        if self._accumulated:  # what no_sync accumulated is averaged once, as DistributedDataParallel does
            self._average_accumulated()
        return self._synced(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Calls inside accumulate gradients on this process only; the next call outside averages them all."""
        before, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = before

    def _average_accumulated(self) -> None:
        import torch.distributed as dist

        with torch.no_grad():
            for p in self.module.parameters():
                if p.grad is not None:
                    dist.all_reduce(p.grad)
                    p.grad.div_(self.world)
        self._accumulated = False

    def parameters(self, recurse: bool = True):
        return self.module.parameters(recurse)

    def record(self):
        """The newest compile record of the synchronised program (its ``ddp`` step shows the buckets)."""
        return last_record(self._synced)


def ddp(module: torch.nn.Module, *, bucket_mb: float = 25.0, broadcast_from: int = 0, pipeline: str = DEFAULT_PIPELINE,
        **options) -> DataParallel:
    """``module`` trained data-parallel over torch.distributed's processes: gradients averaged in buckets.

    ``bucket_mb`` sizes the buckets; ``broadcast_from`` is the process whose parameters and buffers
    every process starts from; ``pipeline`` gets ``ddp`` and ``sink-waits`` after ``autodiff`` and ``remat``, and
    its ``channels-last`` decides without timing (``when=always``: every process compiles the same program);
    other options go to ``thunderlab.jit``.
    """
    return DataParallel(module, bucket_mb=bucket_mb, broadcast_from=broadcast_from, pipeline=pipeline, **options)


from thunderlab.passes import costs  # noqa: E402, F401  (the communication cost model, as thunderlab.distributed.costs)

from .fsdp import FullyShardedDataParallel, fsdp  # noqa: E402
