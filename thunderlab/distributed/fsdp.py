"""Fully sharded data parallel training with thunderlab: each process keeps a shard of every parameter.

``fsdp(model)`` is thunderlab's counterpart of PyTorch's ``torch.distributed.fsdp.fully_shard``
(FSDP2): every parameter is flattened, padded to a multiple of the number of processes and cut
into one shard per process; ``model.parameters()`` are this process's shards, so an optimizer
built on them (after wrapping, as with FSDP2) holds and updates 1/world of the parameters, and its
state is sharded too. The module keeps its parameters' shapes (TorchDynamo captures the model as
written) but not their memory. Each training call runs a program that takes the shards, all-gathers
them before use and reduce-scatters the gradients into the shards' ``.grad`` (the ``fsdp`` pass,
then ``sink-waits``, whose steps in the record show each collective)::

    torch.distributed.init_process_group("gloo")     # torchrun sets the rank and world size
    model = thunderlab.distributed.fsdp(MyModel(), level=3)
    opt = torch.optim.AdamW(model.parameters())       # built after wrapping: the shards
    model(x).sum().backward(); opt.step()             # each process updates its own shards
    full = model.gathered_parameters()                # name -> the whole parameter (a collective)

``level=2`` keeps the gathered parameters from forward to backward (ZeRO-2; FSDP2's
``reshard_after_forward=False``); ``level=3`` frees each after its last use in forward and
gathers it again in backward (ZeRO-3).
"""
from __future__ import annotations

import torch

from thunderlab.frontend.dynamo import ISOLATED, Backend, BackendLink
from thunderlab.passes import DEFAULT_PIPELINE, Pipeline, PipelineError
from thunderlab.passes.fsdp import LEVELS, shard_numel
from thunderlab.passes.layout import untimed
from thunderlab.runtime.compiled import CompiledGraph, Options, describe_input
from thunderlab.runtime.session import refresh

__all__ = ["FullyShardedDataParallel", "fsdp"]


def with_passes(pipeline: str, added: list[str], who: str) -> str:
    """``pipeline`` with ``added`` after autodiff and remat (where the gradients are final)."""
    specs = Pipeline.parse(pipeline).specs
    names = [s.name for s in specs]
    if who in names:
        return pipeline
    if "autodiff" not in names:
        raise PipelineError(f"{who} needs autodiff in the pipeline to have gradients to share out; got {pipeline!r}")
    at = max(k for k, n in enumerate(names) if n in ("autodiff", "remat")) + 1
    parts = [str(s) for s in specs]
    parts[at:at] = added
    return ",".join(parts)


def _meta(a):
    if isinstance(a, torch.Tensor):
        return (tuple(a.shape), a.dtype, a.device, a.requires_grad)
    return (type(a), a)


class _ShardedGraph:
    """One captured graph, compiled for the module's parameters and run on their shards."""

    __slots__ = ("graph", "shards", "entries", "__weakref__")

    def __init__(self, graph: CompiledGraph, shards: dict[int, torch.nn.Parameter]):
        self.graph, self.shards = graph, shards
        self.entries: dict[tuple, object] = {}

    def __call__(self, *args):
        key = (torch.is_grad_enabled(), *map(_meta, args))
        entry = self.entries.get(key)
        if entry is None:  # compiled for the whole parameters Dynamo passes; the program takes their shards
            entry = self.entries[key] = self.graph.compile(args, key)
            self._check(entry, args)
        return entry.fn(*[self.shards.get(id(a), a) for a in args], *entry.lifted)

    def _check(self, entry, args) -> None:
        expected = entry.record.program.forward.inputs
        for i, (p, a) in enumerate(zip(expected, args)):
            a = self.shards.get(id(a), a)
            if isinstance(a, torch.Tensor) and tuple(getattr(p, "shape", a.shape)) != tuple(a.shape):
                raise RuntimeError(f"fsdp: the program's input {i} ({p.name}) is {p.type_string()}, but the call "
                                   f"passes {describe_input(a)}: a parameter that fsdp(model) did not shard reached "
                                   f"the compiled graph (was it added to the model after wrapping?)")


class _ShardingBackend(Backend):
    def __init__(self, options: Options, name: str, shards: dict[int, torch.nn.Parameter]):
        super().__init__(options, name=name)
        self.shards = shards

    def __call__(self, gm, example_inputs):
        graph = super().__call__(gm, example_inputs)
        return _ShardedGraph(graph, self.shards) if isinstance(graph, CompiledGraph) else graph


class FullyShardedDataParallel:
    """A module trained fully sharded: call it like the module; ``parameters()`` are this process's shards."""

    def __init__(self, module: torch.nn.Module, *, level: int = 3, bucket_mb: float = 25.0, prefetch: int = 1,
                 broadcast_from: int = 0, pipeline: str = DEFAULT_PIPELINE, **options):
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("thunderlab.distributed.fsdp needs torch.distributed initialised: start the job with "
                               "torchrun (or call torch.distributed.init_process_group first)")
        if level not in LEVELS:
            raise ValueError(f"fsdp: level={level!r}: 2 shards gradients and optimizer state, 3 parameters too")
        world, rank = dist.get_world_size(), dist.get_rank()
        if not 0 <= broadcast_from < world:
            raise ValueError(f"broadcast_from={broadcast_from} is not a rank of this job (0 to {world - 1})")
        self.module, self.world, self.rank, self.level = module, world, rank, level
        self._names: list[tuple[str, torch.nn.Parameter, torch.nn.Parameter]] = []  # (name, whole, shard)
        shards: dict[int, torch.nn.Parameter] = {}
        with torch.no_grad():  # every process starts from the same state, as FSDP2's users make it
            for t in [*module.parameters(), *module.buffers()]:
                dist.broadcast(t.data, src=broadcast_from)
            for name, p in module.named_parameters():
                if world == 1:  # one process: the program is not sharded (fsdp leaves it as it is)
                    self._names.append((name, p, p))
                    continue
                size = shard_numel(p.numel(), world)
                flat = torch.nn.functional.pad(p.detach().reshape(-1), (0, size * world - p.numel()))
                shard = torch.nn.Parameter(flat[rank * size:(rank + 1) * size].clone(), requires_grad=p.requires_grad)
                shards[id(p)] = shard
                self._names.append((name, p, shard))
                # the whole parameter keeps its shape, which TorchDynamo captures, but no memory
                p.data.untyped_storage().resize_(0)
        if not isinstance(prefetch, int) or prefetch < 0:
            raise ValueError(f"fsdp: prefetch={prefetch!r}: the number of buckets gathered ahead, 0 for none")
        # as many collectives in flight as buckets gathered ahead: a wait is placed before one more is issued
        added = [f"fsdp{{level={level},bucket_mb={bucket_mb:g},prefetch={prefetch}}}",
                 f"sink-waits{{in_flight={max(1, prefetch)}}}"]
        self.options = Options(pipeline=with_passes(untimed(pipeline), added, "fsdp"), **options)
        self.backend = _ShardingBackend(self.options, type(module).__name__, shards)
        self._compiled = torch.compile(module, backend=BackendLink(self.backend), **ISOLATED)

    def __call__(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    def parameters(self, recurse: bool = True):
        """This process's shards (what an optimizer should update), in the module's parameter order."""
        return iter([shard for _, _, shard in self._names])

    def named_parameters(self):
        return iter([(name, shard) for name, _, shard in self._names])

    def gathered_parameters(self) -> dict[str, torch.Tensor]:
        """Every parameter whole, gathered from the processes' shards (a collective: call it on every process)."""
        import torch.distributed as dist

        out = {}
        for name, p, shard in self._names:
            whole = shard.new_empty(shard.numel() * self.world)
            dist.all_gather_into_tensor(whole, shard.detach().reshape(-1).contiguous())
            out[name] = whole[:p.numel()].reshape(p.shape)
        return out

    @property
    def records(self):
        """The compile records of the model's graphs, oldest first, their regions' and collectives' timings now."""
        records = sorted((r for g in self.backend.graphs for r in g.records), key=lambda r: r.created)
        refresh(records)  # as thunderlab.records() hands records out: their snapshots up to date
        return records

    def record(self):
        """The newest compile record of a graph that takes parameters (its ``fsdp`` and ``sink-waits`` steps show
        the collectives); with graph breaks, other graphs may take none."""
        records = self.records
        if not records:
            raise ValueError("the model has not been called yet: call it once first")
        sharded = [r for r in records if any(s.spec.startswith("fsdp") and "forward_all_gathers" in (s.notes or {})
                                             for s in r.steps)]
        return (sharded or records)[-1]


def fsdp(module: torch.nn.Module, *, level: int = 3, bucket_mb: float = 25.0, prefetch: int = 1,
         broadcast_from: int = 0, pipeline: str = DEFAULT_PIPELINE, **options) -> FullyShardedDataParallel:
    """``module`` trained fully sharded over torch.distributed's processes (ZeRO-2 or ZeRO-3, see ``level``).

    ``bucket_mb`` sizes the buckets of parameters all-gathered and of gradients reduce-scattered
    together; ``prefetch`` how many buckets are gathered ahead of the one in use (0: none, the least
    memory: one bucket gathered at a time; 1: the next bucket's exchange overlaps this one's compute);
    ``broadcast_from`` is the process whose parameters and buffers every process starts
    from; ``pipeline`` gets ``fsdp`` and ``sink-waits`` after ``autodiff`` and ``remat`` (and its ``channels-last``
    ``when=always``, the same program in every process); other
    options (``verify``, ``tiered``, ``timing``, ``keep_inputs``) are ``thunderlab.jit``'s.
    """
    return FullyShardedDataParallel(module, level=level, bucket_mb=bucket_mb, prefetch=prefetch,
                                    broadcast_from=broadcast_from,
                                    pipeline=pipeline, **options)
