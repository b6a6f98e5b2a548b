"""fsdp: fully sharded data parallel: each process keeps a shard of every parameter; gathered for use, gradients
reduce-scattered."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from thunderlab.core.notes import Notes
from thunderlab.core.program import Program, Training
from thunderlab.core.proxies import TensorProxy
from thunderlab.core.symbols import BoundSymbol, tree_map
from thunderlab.core.trace import Trace
from thunderlab.ops import collectives
from thunderlab.ops import torch_ops as ltorch

from . import costs
from .base import Pass, PipelineError, register_pass
from .ddp import world_size

LEVELS = (2, 3)


def shard_numel(numel: int, world: int) -> int:
    """The length of each process's shard of a parameter of ``numel`` elements: padded up to a multiple of ``world``."""
    return -(-numel // world)


def _nbytes(p: TensorProxy) -> int:
    return p.numel() * p.dtype.itemsize


def _size(nbytes: float) -> str:
    return f"{nbytes / 2**20:.2f} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:.1f} KiB"


def _free_name(base: str, traces: list[Trace]) -> str:
    """A name none of ``traces`` uses yet (the shard is an input of forward and, saved, of backward)."""
    name, n = base, 0
    while any(name in t._names for t in traces):
        n += 1
        name = f"{base}_{n}"
    for t in traces:
        t.add_name(name)
    return name


def _renamed(b: BoundSymbol, name: str, proxy: TensorProxy) -> BoundSymbol:
    """``b`` with the value called ``name`` (an output, and its uses inside the decomposition) replaced by ``proxy``."""
    def sub(v):
        return proxy if isinstance(v, TensorProxy) and v.name == name else v

    return dataclasses.replace(b, args=tree_map(sub, b.args), kwargs=tree_map(sub, b.kwargs),
                               output=tree_map(sub, b.output),
                               subsymbols=tuple(_renamed(s, name, proxy) for s in b.subsymbols))


def _buckets(params: list[TensorProxy], cap: float) -> list[list[TensorProxy]]:
    """Consecutive parameters of one dtype and device, about ``cap`` bytes (unsharded) a bucket."""
    out: list[list[TensorProxy]] = []
    for p in params:
        last = out[-1] if out else None
        if last and (last[0].dtype, last[0].device) == (p.dtype, p.device) and sum(map(_nbytes, last)) < cap:
            last.append(p)
        else:
            out.append([p])
    return out


def _grad_columns(grad: TensorProxy, p: TensorProxy, world: int) -> TensorProxy:
    """``grad`` as a (world, shard) matrix: row r is what process r's shard gets (padded as the shard is)."""
    size = shard_numel(p.numel(), world)
    flat = ltorch.reshape(grad, (-1,))
    if size * world != p.numel():  # the padding's gradient is zero
        flat = ltorch.pad(flat, (0, size * world - p.numel()))
    return ltorch.reshape(flat, (world, size))


def _packed(columns: list[TensorProxy]) -> TensorProxy:
    """Gradients' (world, shard) matrices side by side, flat: reduce-scattering it gives each process its shards."""
    return ltorch.reshape(ltorch.cat(columns, 1) if len(columns) > 1 else columns[0], (-1,))


def _regather_buckets(bw: Trace, buckets, regather: set[str], cap: float) -> list[list[TensorProxy]]:
    """The parameters backward reads again (ZeRO-3), in buckets of its own: in the order backward first reads them,
    a bucket holding only parameters whose last read is the same call, at most about ``cap`` bytes.

    The unpacked parameters are views of their bucket's gathered tensor, which lives until the last of them is
    read: forward's buckets would keep, say, an attention weight gathered from the layer norm recomputed at
    backward's start to the attention's gradient at its end. Parameters that die together are freed together."""
    params = {p.name: p for bucket in buckets for p in bucket if p.name in regather}
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, b in enumerate(bw.bound_symbols):
        for x in b.inputs:
            if x.name in params:
                first.setdefault(x.name, i)
                last[x.name] = i
    order = sorted(params.values(), key=lambda p: first.get(p.name, len(bw.bound_symbols)))
    out: list[list[TensorProxy]] = []
    for p in order:
        open_ = out[-1] if out else None
        if (open_ and last.get(open_[0].name) == last.get(p.name) and sum(map(_nbytes, open_)) + _nbytes(p) <= cap
                and (open_[0].dtype, open_[0].device) == (p.dtype, p.device)):
            open_.append(p)
        else:
            out.append([p])
    return out


class _Gatherer:
    """Writes the calls that gather a bucket of shards into the parameters they are shards of, into ``trace``."""

    def __init__(self, trace: Trace, buckets, shard_of: dict[str, TensorProxy], world: int):
        self.trace, self.buckets, self.shard_of, self.world = trace, buckets, shard_of, world
        self.gathered: dict[int, TensorProxy] = {}  # bucket -> its all-gathered flat tensor (waited)
        self.unpacked: set[int] = set()

    def issue(self, k: int) -> None:
        if k in self.gathered or k >= len(self.buckets):
            return
        shards = [self.shard_of[p.name] for p in self.buckets[k]]
        flat = ltorch.cat(shards) if len(shards) > 1 else shards[0]
        # waited at once: the sink-waits pass moves each wait down to the value's first use
        self.gathered[k] = collectives.wait(collectives.all_gather(flat, self.world))

    def unpack(self, k: int, wanted: set[str] | None = None) -> None:
        """Bucket ``k``'s parameters, each defined under its own name (so no call that reads it changes)."""
        if k in self.unpacked:
            return
        self.issue(k)
        self.unpacked.add(k)
        params, world, whole = self.buckets[k], self.world, self.gathered[k]
        sizes = [shard_numel(p.numel(), world) for p in params]
        if len(params) == 1:
            columns = [whole]
        else:  # rank-major: each rank's shards side by side; a parameter is one column of the (world, S) matrix
            parts = ltorch.split(ltorch.reshape(whole, (world, sum(sizes))), sizes, 1)
            columns = [None if wanted is not None and p.name not in wanted else ltorch.reshape(c, (-1,))
                       for p, c in zip(params, parts)]
        for p, c, size in zip(params, columns, sizes):
            if c is None:
                continue
            v = ltorch.narrow(c, 0, 0, p.numel()) if size * world != p.numel() else c
            v = ltorch.reshape(v, p.shape) if tuple(v.shape) != tuple(p.shape) else v
            self._define(v, p)

    def _define(self, v: TensorProxy, p: TensorProxy) -> None:
        calls = self.trace.bound_symbols
        k = next(i for i in range(len(calls) - 1, -1, -1) if any(o is v for o in calls[i].outputs))
        calls[k] = _renamed(calls[k], v.name, p)


@register_pass
@dataclass(frozen=True)
class FSDP(Pass):
    """Fully sharded data parallel: parameters sharded over processes, all-gathered for use, gradients reduce-scattered.

    Each parameter input becomes this process's shard of it (flattened, padded to a multiple of
    the number of processes, 1/world of it); the program takes shards, and the caller
    (``thunderlab.distributed.fsdp``) passes them. The forward all-gathers the shards in
    buckets of about ``bucket_mb`` megabytes, in the order the forward first uses them, the next
    ``prefetch`` buckets started while one is in use (0: each gathered where it is first used, so
    only one bucket is ever gathered at once, at the price of waiting for it). Backward
    reduce-scatters each bucket of gradients as soon as its last gradient exists and divides the
    result by the number of processes, so each process gets the averaged gradient of its own
    shards; a gradient that would overfill its bucket starts the next one, so a large gradient is
    reduce-scattered alone, with no copy to pack it. ``level=2`` keeps the gathered parameters
    from forward to backward (ZeRO-2, FSDP2's ``reshard_after_forward=False``); ``level=3`` frees
    each after its last use in forward and all-gathers it again in backward (ZeRO-3), in buckets
    of the parameters that backward reads last in the same call, so each is freed as early as it
    can be. Waits are placed right after their collective; ``sink-waits`` moves them to where the
    values are used.
    """

    name = "fsdp"
    requires = ("autodiff",)
    changes_inputs = True  # the program takes shards
    level: int = 3
    bucket_mb: float = 25.0
    prefetch: int = 1  # buckets gathered ahead of the one in use (0: each gathered where it is first used)
    world: int = 0  # the number of processes; 0: torch.distributed's, when the pass runs

    def __post_init__(self):  # checked when the pipeline is parsed, not when it first runs
        if self.level not in LEVELS:
            raise PipelineError(f"fsdp: level must be 2 (gradients and optimizer state sharded) or 3 (parameters "
                                f"too), got {self.level!r}")
        if self.bucket_mb <= 0:
            raise PipelineError(f"fsdp: bucket_mb must be positive, got {self.bucket_mb}")
        if not isinstance(self.prefetch, int) or self.prefetch < 0:
            raise PipelineError(f"fsdp: prefetch must be a whole number of buckets gathered ahead (0: none), got "
                                f"{self.prefetch!r}")

    def __call__(self, program: Program) -> Program:
        fw, bw = program.forward, program.backward
        if any(b.sym.communicates for b in fw.bound_symbols):
            return program  # sharded already: a second fsdp has nothing to do
        params = [p for p in fw.tensor_inputs() if p.parameter]
        if not params:
            return program
        world = world_size(self.world, "fsdp")
        if world == 1:
            return program  # one process holds every parameter whole: nothing to shard
        traces = [fw] + ([bw] if bw is not None else [])
        shard_of = {p.name: TensorProxy(_free_name(f"{p.name}_shard", traces), (shard_numel(p.numel(), world),),
                                        p.dtype, p.device, p.requires_grad, parameter=True) for p in params}
        # buckets in the order the forward first uses their parameters: each is gathered just ahead of its use
        first_use: dict[str, int] = {}
        for i, b in enumerate(fw.bound_symbols):
            for x in b.inputs:
                first_use.setdefault(x.name, i)
        order = sorted(params, key=lambda p: first_use.get(p.name, len(fw.bound_symbols)))
        buckets = _buckets(order, self.bucket_mb * 2**20)
        new_fw = self._forward(fw, buckets, shard_of, world, self.prefetch)
        if bw is None:
            return Program({**program.traces, "forward": new_fw}, program.training)
        out, saved = new_fw.output
        n_saved = len(program.training.saved)
        bw_inputs, regather = list(bw.inputs), set()
        if self.level == 3:  # saved parameters are not kept: their shards are saved, and gathered again in backward
            regather = {s.name for s in saved if s.name in shard_of}
            shards = [shard_of[p.name] for bucket in buckets if any(p.name in regather for p in bucket) for p in bucket]
            new_fw.output = (out, (*[s for s in saved if s.name not in regather], *shards))
            bw_inputs = [x for x in bw.inputs[:n_saved] if x.name not in regather] + shards + bw.inputs[n_saved:]
        new_bw = self._backward(bw.derive(bound_symbols=[], inputs=bw_inputs), bw, fw, buckets, shard_of, regather,
                                world)
        training = Training(tuple(x.name for x in new_fw.output[1]), program.training.grad_of)
        return Program({**program.traces, "forward": new_fw, "backward": new_bw}, training)

    @staticmethod
    def _forward(fw: Trace, buckets, shard_of, world: int, prefetch: int) -> Trace:
        """The forward taking shards: each bucket gathered (the next one started) before its first use."""
        bucket_of = {p.name: k for k, bucket in enumerate(buckets) for p in bucket}
        new = fw.derive(bound_symbols=[], inputs=[shard_of.get(p.name, p) if isinstance(p, TensorProxy) else p
                                                  for p in fw.inputs])
        g = _Gatherer(new, buckets, shard_of, world)
        with new.active():
            if prefetch:
                g.issue(0)
            for b in fw.bound_symbols:
                for k in sorted({bucket_of[x.name] for x in b.inputs if x.name in bucket_of}):
                    g.unpack(k)
                    for ahead in range(k + 1, k + 1 + prefetch):  # their exchanges run while this one is used
                        g.issue(ahead)
                new.bound_symbols.append(b)
            for k in sorted({bucket_of[x.name] for x in new.output_proxies() if x.name in bucket_of}):
                g.unpack(k)  # a parameter returned (or saved for backward) without being used
        return new

    def _backward(self, new: Trace, bw: Trace, fw: Trace, buckets, shard_of, regather: set[str], world: int) -> Trace:
        """The backward returning each shard's averaged gradient: gradients reduce-scattered in buckets as they
        are made; at level 3, the parameters it reads gathered again (the next bucket started) before first use."""
        outs = list(bw.output)
        inputs = fw.tensor_inputs()
        param_of = {outs[i].name: p for i, p in enumerate(inputs) if p.name in shard_of and outs[i] is not None}
        cap = self.bucket_mb * 2**20
        flights: list[tuple[list[TensorProxy], TensorProxy]] = []  # (parameters, their gradients' shards)
        open_: list[tuple[TensorProxy, TensorProxy]] = []  # (gradient, its parameter), not yet sent
        seen: set[str] = set()
        regathers = _regather_buckets(bw, buckets, regather, cap)
        bucket_of = {p.name: k for k, bucket in enumerate(regathers) for p in bucket}
        use_order = list(range(len(regathers)))
        after = {k: use_order[k + 1:k + 1 + self.prefetch] for k in use_order}
        g = _Gatherer(new, regathers, shard_of, world)

        def send():
            pairs = list(open_)
            open_.clear()
            whole = _packed([_grad_columns(grad, p, world) for grad, p in pairs])
            scattered = collectives.reduce_scatter(whole, "sum", world)  # averaged after: a shard, not the bucket
            flights.append(([p for _, p in pairs], collectives.wait(scattered)))  # sink-waits moves the wait

        def ready(x: TensorProxy):
            if x.name in param_of and x.name not in seen:
                seen.add(x.name)
                if open_ and sum(_nbytes(q) for q, _ in open_) + _nbytes(x) > cap:
                    send()  # a gradient that would overfill the bucket goes in the next: alone, it needs no copy
                open_.append((x, param_of[x.name]))
                if sum(_nbytes(q) for q, _ in open_) >= cap:
                    send()

        with new.active():
            for x in bw.tensor_inputs():
                ready(x)
            if use_order and self.prefetch:
                g.issue(use_order[0])
            for b in bw.bound_symbols:
                for k in [bucket_of[x.name] for x in b.inputs if x.name in bucket_of]:
                    if k not in g.unpacked:
                        g.unpack(k)
                        for ahead in after[k]:
                            g.issue(ahead)
                new.bound_symbols.append(b)
                for o in b.outputs:
                    ready(o)
            if open_:
                send()
            sharded: dict[str, TensorProxy] = {}
            for params, done in flights:  # the returned gradients: this process's shard of each
                sizes = [shard_numel(p.numel(), world) for p in params]
                done = ltorch.div(done, world)
                parts = ltorch.split(done, sizes) if len(params) > 1 else (done,)
                sharded.update({p.name: part for p, part in zip(params, parts)})
        new.output = tuple(sharded.get(p.name) if p.name in shard_of else outs[i] for i, p in enumerate(inputs))
        return new

    def describe(self, before: Program, after: Program) -> Notes:
        fw = after.forward
        if fw is before.forward:
            return Notes("nothing sharded: the program takes no parameters (or is sharded already)")

        def collected(trace, name):
            calls = [b for b in trace.bound_symbols if b.sym.name == name] if trace is not None else []
            return [{"bytes": _nbytes(b.args[0]) if name == "reduce_scatter" else _nbytes(b.outputs[0])} for b in calls]

        gathers = collected(fw, "all_gather")
        regathers = collected(after.backward, "all_gather")
        scatters = collected(after.backward, "reduce_scatter")
        params = [p for p in before.forward.tensor_inputs() if p.parameter]
        shards = [p for p in fw.tensor_inputs() if p.parameter]
        world = next((b.args[1] for b in fw.bound_symbols if b.sym.name == "all_gather"), None)
        param_bytes = sum(_nbytes(p) for p in params)
        shard_bytes = sum(_nbytes(p) for p in shards)
        padded = [p.name for p, s in zip(params, shards) if s.numel() * world != p.numel()]
        biggest = max((x["bytes"] for x in gathers), default=0)
        sent = sum(x["bytes"] for x in gathers + regathers + scatters)
        predicted = costs.predict_fsdp([x["bytes"] for x in gathers], [x["bytes"] for x in scatters],
                                       self.level, param_bytes)
        summary = (f"{len(gathers)} bucket(s) all-gathered in forward"
                   + (f", {len(regathers)} again in backward" if regathers else "")
                   + f", {len(scatters)} reduce-scattered; each process keeps {_size(shard_bytes)} of "
                   f"{_size(param_bytes)} of parameters (ZeRO-{self.level}, {world} processes)")
        return Notes(summary, {
            "level": self.level, "world": world, "bucket_mb": self.bucket_mb, "prefetch": self.prefetch,
            "forward_all_gathers": gathers, "backward_all_gathers": regathers, "reduce_scatters": scatters,
            "parameter_bytes": param_bytes, "shard_bytes": shard_bytes, "padded": padded,
            # the most gathered parameter bytes alive at once: a bucket in use and the next one in flight
            "gathered_peak_bytes": biggest if len(gathers) < 2 else
            max(a["bytes"] + b["bytes"] for a, b in zip(gathers, gathers[1:])),
            "bytes_collected": sent,
            "predicted": {str(p): {k: round(v, 4) for k, v in row.items()} for p, row in predicted.items()},
        })
