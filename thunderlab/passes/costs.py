"""A communication cost model: how long collectives take, and what a rank holds, past this machine.

The ddp (and fsdp) notes use it; users reach it as ``thunderlab.distributed.costs``.

The alpha-beta model: a collective is a number of steps, each paying the link's latency (alpha),
plus the bytes each rank sends over the link's bandwidth (beta). Per rank and direction:

- ring all-reduce of n bytes over p ranks: 2(p-1) steps, 2(p-1)/p * n bytes sent;
- tree all-reduce (a pipelined binary tree, as NCCL's): 2 log2(p) steps, about 2n bytes;
- ring reduce-scatter or all-gather: (p-1) steps, (p-1)/p * n bytes.

These are the factors by which NCCL's tests turn a measured time into "bus bandwidth"
(2(p-1)/p for all-reduce, (p-1)/p for reduce-scatter and all-gather; nccl-tests,
doc/PERFORMANCE.md), so a link's bandwidth here is what those tests report as bus bandwidth.
Past one node, an all-reduce is hierarchical: reduce-scatter inside each node, all-reduce of the
node's share across nodes, all-gather inside the node.

Link figures (per GPU, one direction):
- NVLink 4 on H100 SXM: 900 GB/s of total bidirectional NVLink bandwidth per GPU (NVIDIA H100
  Tensor Core GPU datasheet), so 450 GB/s each way.
- InfiniBand NDR: 400 Gb/s per port (NVIDIA Quantum-2 / ConnectX-7), one port per GPU in a
  DGX H100, so 50 GB/s each way.
The latencies (3 us per NVLink step, 6 us per InfiniBand step) are assumptions of the order of
NCCL's small-message times, not published figures; give your own with ``Link``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

SCALES = (8, 64, 1024, 4096)  # the rank counts the ddp and fsdp notes predict for


@dataclass(frozen=True)
class Link:
    """A link between ranks: bandwidth in bytes/s per rank and direction, latency in seconds per step."""

    name: str
    bandwidth: float
    latency: float


NVLINK_H100 = Link("NVLink 4 (H100 SXM)", 450e9, 3e-6)
INFINIBAND_NDR = Link("InfiniBand NDR (400 Gb/s per GPU)", 50e9, 6e-6)


@dataclass(frozen=True)
class Cluster:
    """Ranks in nodes: ``per_node`` ranks share ``intra`` (NVLink), nodes talk over ``inter`` (InfiniBand)."""

    per_node: int = 8
    intra: Link = field(default=NVLINK_H100)
    inter: Link = field(default=INFINIBAND_NDR)


DGX_H100 = Cluster()


def ring_all_reduce(nbytes: float, p: int, link: Link) -> float:
    if p <= 1:
        return 0.0
    return 2 * (p - 1) * link.latency + 2 * (p - 1) / p * nbytes / link.bandwidth


def tree_all_reduce(nbytes: float, p: int, link: Link) -> float:
    if p <= 1:
        return 0.0
    return 2 * math.ceil(math.log2(p)) * link.latency + 2 * nbytes / link.bandwidth


def reduce_scatter(nbytes: float, p: int, link: Link) -> float:
    """Time to reduce-scatter ``nbytes`` (the whole tensor) over ``p`` ranks on a ring; all-gather costs the same."""
    if p <= 1:
        return 0.0
    return (p - 1) * link.latency + (p - 1) / p * nbytes / link.bandwidth


all_gather = reduce_scatter

_ALL_REDUCE = {"ring": ring_all_reduce, "tree": tree_all_reduce}


def all_reduce(nbytes: float, p: int, cluster: Cluster | Link = DGX_H100, algorithm: str = "ring") -> float:
    """Seconds to all-reduce ``nbytes`` over ``p`` ranks (hierarchical past one node of a Cluster)."""
    if algorithm not in _ALL_REDUCE:
        raise ValueError(f"algorithm {algorithm!r}: choose one of {', '.join(_ALL_REDUCE)}")
    flat = _ALL_REDUCE[algorithm]
    if isinstance(cluster, Link):
        return flat(nbytes, p, cluster)
    k = min(p, cluster.per_node)
    if p <= k:
        return flat(nbytes, p, cluster.intra)
    nodes = math.ceil(p / k)
    return (reduce_scatter(nbytes, k, cluster.intra) + flat(nbytes / k, nodes, cluster.inter)
            + all_gather(nbytes, k, cluster.intra))


def exposed(buckets: list[tuple[float, float]], backward_s: float, p: int, cluster: Cluster | Link = DGX_H100,
            algorithm: str = "ring") -> float:
    """Seconds of communication left after backward's compute ends.

    ``buckets`` are (bytes, when it is issued as a fraction of backward's compute); all-reduces run
    one after another on one channel, each starting when issued or when the one before it ends.
    """
    t = 0.0
    for nbytes, at in buckets:
        t = max(t, at * backward_s) + all_reduce(nbytes, p, cluster, algorithm)
    return max(0.0, t - backward_s)


def memory_per_rank(param_bytes: float, p: int, level: str = "ddp", optimizer_states: float = 2.0) -> float:
    """Bytes of parameters, gradients and optimizer state one rank holds.

    ``optimizer_states``: the optimizer's state per parameter, in parameters (Adam: 2). ``level``:
    "ddp" (everything replicated), "zero2" (gradients and optimizer state sharded), "zero3"
    (parameters sharded too; the parameters gathered for one layer at a time are not counted).
    """
    grads, opt = param_bytes, optimizer_states * param_bytes
    if level == "ddp":
        return param_bytes + grads + opt
    if level == "zero2":
        return param_bytes + (grads + opt) / p
    if level == "zero3":
        return (param_bytes + grads + opt) / p
    raise ValueError(f"level {level!r}: choose one of ddp, zero2, zero3")


def predict_ddp(bucket_bytes: list[float], issue_at: list[float], param_bytes: float, *,
                backward_s: float | None = None, cluster: Cluster = DGX_H100, scales=SCALES) -> dict:
    """For each rank count: the step's all-reduce time (ring, tree), what stays exposed, memory per rank."""
    out = {}
    total = sum(bucket_bytes)
    for p in scales:
        row = {"all_reduce_ms_ring": 1e3 * sum(all_reduce(b, p, cluster, "ring") for b in bucket_bytes),
               "all_reduce_ms_tree": 1e3 * sum(all_reduce(b, p, cluster, "tree") for b in bucket_bytes),
               "bytes_per_step": total, "memory_per_rank_mb": memory_per_rank(param_bytes, p, "ddp") / 2**20}
        if backward_s is not None:
            row["exposed_ms"] = 1e3 * exposed(list(zip(bucket_bytes, issue_at)), backward_s, p, cluster)
        out[p] = row
    return out


def _ring(fn, nbytes: float, p: int, cluster: Cluster) -> float:
    """A flat ring over ``p`` ranks: on the node's links inside one node, else at the speed of the slower links."""
    return fn(nbytes, p, cluster.intra if p <= cluster.per_node else cluster.inter)


def predict_fsdp(gather_bytes: list[float], scatter_bytes: list[float], level: int, param_bytes: float, *,
                 cluster: Cluster = DGX_H100, scales=SCALES) -> dict:
    """For each rank count: the step's all-gather and reduce-scatter times (ring), bytes, memory per rank.

    ``gather_bytes`` are the forward's all-gathers (the whole gathered tensors); at ``level`` 3 backward
    gathers them again. ``scatter_bytes`` are backward's reduce-scatters (the whole tensors reduced).
    """
    gathers = list(gather_bytes) * (2 if level == 3 else 1)
    out = {}
    for p in scales:
        out[p] = {"all_gather_ms_ring": 1e3 * sum(_ring(all_gather, b, p, cluster) for b in gathers),
                  "reduce_scatter_ms_ring": 1e3 * sum(_ring(reduce_scatter, b, p, cluster) for b in scatter_bytes),
                  "bytes_per_step": sum(gathers) + sum(scatter_bytes),
                  "memory_per_rank_mb": memory_per_rank(param_bytes, p, f"zero{level}") / 2**20}
    return out
