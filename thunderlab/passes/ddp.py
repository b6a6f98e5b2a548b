"""ddp: data-parallel training: every parameter's gradient averaged over the processes, in buckets."""
from __future__ import annotations

from dataclasses import dataclass

from thunderlab.core.notes import Notes
from thunderlab.core.program import Program
from thunderlab.core.proxies import TensorProxy
from thunderlab.ops import collectives
from thunderlab.ops import torch_ops as ltorch

from . import costs
from .base import Pass, PipelineError, register_pass


def world_size(world: int, who: str) -> int:
    """``world`` if given, else the size of torch.distributed's default group; a clear error when there is none."""
    if world:
        return world
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    raise PipelineError(f"{who}: torch.distributed is not initialised, so the number of processes is unknown: start "
                        f"the job with torchrun (or call torch.distributed.init_process_group first), or give "
                        f"{who}{{world=N}} to see the program it makes for N processes")


def _nbytes(p: TensorProxy) -> int:
    return p.numel() * p.dtype.itemsize


def _packed(calls, k: int) -> int:
    """How many gradients the all-reduce at ``calls[k]`` carries (the reshapes its cat packs, or one)."""
    src = calls[k].args[0]
    producer = {o.name: c for c in calls[:k] for o in c.outputs if isinstance(o, TensorProxy)}
    while src.name in producer and producer[src.name].sym.name in ("div", "cat", "reshape"):
        c = producer[src.name]
        if c.sym.name == "cat":
            return len(c.args[0])
        src = c.args[0]
    return 1


@register_pass
@dataclass(frozen=True)
class DDP(Pass):
    """Data parallel: average each parameter's gradient over the processes, in buckets that overlap backward.

    Gradients are packed into buckets of about ``bucket_mb`` megabytes in the order backward
    makes them (the first bucket closes at ``first_bucket_mb``, so communication starts early, as
    DistributedDataParallel's first bucket does); each bucket's all-reduce starts right after its
    last gradient is computed. Like PyTorch's DistributedDataParallel, each gradient is divided
    by the number of processes. The pass waits right after each all-reduce; the next step,
    ``sink-waits``, moves each wait down to where the gradients are returned, so communication
    runs while the rest of backward computes, and its diff shows that change alone. For example,
    with one bucket::

        t8 = ltorch.linear_backward(...)           t8 = ltorch.linear_backward(...)
        ...                                        t20 = ltorch.cat([t8, t9])
        return (t8, t9)                   ->       t21 = ltorch.div(t20, 2)
                                                   t22 = ltorch.all_reduce(t21, 'sum', 2)
                                                   t23 = ltorch.wait(t22)
                                                   ...
    """

    name = "ddp"
    requires = ("autodiff",)
    bucket_mb: float = 25.0
    first_bucket_mb: float = 1.0
    world: int = 0  # the number of processes; 0: torch.distributed's, when the pass runs

    def __call__(self, program: Program) -> Program:
        if program.backward is None:
            return program  # no gradients: nothing to synchronise
        if self.bucket_mb <= 0 or self.first_bucket_mb <= 0:
            raise PipelineError(f"ddp: bucket_mb and first_bucket_mb must be positive, got {self.bucket_mb} and "
                                f"{self.first_bucket_mb}")
        bw = program.backward
        if any(b.sym.communicates for b in bw.bound_symbols):
            return program  # its gradients are averaged already: a second ddp has nothing to do
        world = world_size(self.world, "ddp")
        if world == 1:
            return program  # one process: every gradient is its own average
        inputs = program.forward.tensor_inputs()
        outs = list(bw.output)
        params = {i for i, p in enumerate(inputs) if p.parameter and i < len(outs) and outs[i] is not None}
        wanted = {outs[i].name for i in params}
        cap = self.bucket_mb * 2**20
        first_cap = min(cap, self.first_bucket_mb * 2**20)
        new = bw.derive(bound_symbols=[])
        open_: dict[tuple, list[TensorProxy]] = {}
        flights: list[tuple[list[TensorProxy], TensorProxy]] = []
        seen: set[str] = set()

        def issue(key):
            grads = open_.pop(key)
            flat = ltorch.cat([ltorch.reshape(g, (-1,)) for g in grads]) if len(grads) > 1 else \
                ltorch.reshape(grads[0], (-1,))
            reduced = collectives.all_reduce(ltorch.div(flat, world), "sum", world)
            flights.append((grads, collectives.wait(reduced)))  # sink-waits moves the wait to the first use

        def ready(g: TensorProxy):
            if g.name not in wanted or g.name in seen:
                return
            seen.add(g.name)
            key = (g.dtype, g.device)
            open_.setdefault(key, []).append(g)
            if sum(_nbytes(p) for p in open_[key]) >= (cap if flights else first_cap):
                issue(key)

        with new.active():
            for p in bw.tensor_inputs():
                ready(p)
            for b in bw.bound_symbols:
                new.bound_symbols.append(b)
                for o in b.outputs:
                    if isinstance(o, TensorProxy):
                        ready(o)
            for key in list(open_):
                issue(key)
            averaged: dict[str, TensorProxy] = {}
            for grads, done in flights:  # unpacked where the gradients are returned
                parts = ltorch.split(done, [g.numel() for g in grads]) if len(grads) > 1 else (done,)
                for g, part in zip(grads, parts):
                    averaged[g.name] = ltorch.reshape(part, g.shape)
        new.output = tuple(averaged[o.name] if i in params else o for i, o in enumerate(outs))
        return program.with_traces({**program.traces, "backward": new}, program.training)

    def describe(self, before: Program, after: Program) -> Notes:
        bw = after.backward
        if bw is None or before.backward is bw:
            return Notes("no backward: nothing to all-reduce", {"buckets": []})
        calls = [b for b in bw.bound_symbols if not b.sym.bookkeeping]
        original = {b.id for b in before.backward.bound_symbols}  # backward's own calls, not the packing
        buckets = []
        for k, b in enumerate(calls):
            if b.sym.name != "all_reduce":
                continue
            after_call = next((c for c in reversed(calls[:k]) if c.id in original), None)
            buckets.append({"bytes": _nbytes(b.outputs[0]), "gradients": _packed(calls, k),
                            "issued_after": after_call.sym.name if after_call else "the start of backward"})
        world = next((b.args[2] for b in calls if b.sym.name == "all_reduce"), None)
        n = len(calls)
        # when each all-reduce starts, as the fraction of backward's calls done by then
        issue_at = [k / n for k, b in enumerate(calls) if b.sym.name == "all_reduce"]
        inputs = after.forward.tensor_inputs()
        param_bytes = sum(_nbytes(p) for p in inputs if p.parameter)
        predicted = costs.predict_ddp([x["bytes"] for x in buckets], issue_at, param_bytes)
        return Notes(
            f"{len(buckets)} bucket(s), {sum(x['bytes'] for x in buckets) / 2**20:.2f} MiB all-reduced over {world} "
            f"processes, each waited at once (sink-waits moves the waits)",
            {"buckets": buckets, "world": world, "bucket_mb": self.bucket_mb, "parameter_bytes": param_bytes,
             "predicted": {str(p): {k: round(v, 4) for k, v in row.items()} for p, row in predicted.items()},
             "cluster": f"{costs.DGX_H100.per_node} GPUs a node on {costs.DGX_H100.intra.name}, nodes on "
                        f"{costs.DGX_H100.inter.name} (thunderlab.distributed.costs)"})
