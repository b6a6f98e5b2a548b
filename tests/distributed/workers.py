"""What each process of the distributed tests runs (spawned: this module is imported in every process).

Every case trains a model for a few optimizer steps twice on every rank, from the same start and
with the same dropout draws: once as PyTorch's reference (DistributedDataParallel on the eager
model) and once the thunderlab way; each rank writes the largest difference per case to a file.
"""
from __future__ import annotations

import copy
import datetime
import json
import os
import time
import traceback

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 3


def init(rank: int, world: int, port: int, timeout_s: float = 60) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))


def finish() -> None:
    """Leave the job once the results are written. The reference models (torch's DDP) hold the process group in
    reference cycles: collected first, the group and its TCP store (whose server thread runs in rank 0) go while
    the interpreter is whole. The process then ends without the interpreter's teardown, where a store still alive
    would be destroyed with its thread running (a SIGABRT, "terminate called without an active exception", seen
    once in rank 0 after every result was written): what these tests check is in the results."""
    import gc
    import sys

    gc.collect()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def make(name: str, rank: int):
    """A model (different on every rank: the broadcast must make them equal), its batch maker and loss."""
    torch.manual_seed(100 + rank)
    g = torch.Generator().manual_seed(1000 + rank)  # each rank's own data
    if name == "mlp":
        model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))
        return model, lambda: (torch.randn(4, 16, generator=g),), lambda out: out.pow(2).mean()
    if name == "mlp7":  # every parameter but the first weight has an odd number of elements: shards are padded
        model = nn.Sequential(nn.Linear(16, 31), nn.GELU(), nn.Linear(31, 7))
        return model, lambda: (torch.randn(4, 16, generator=g),), lambda out: out.pow(2).mean()
    if name in ("nanogpt", "nanogpt0"):  # nanogpt0: no dropout, to compare with one process on the whole batch
        from thunderlab.examples import NanoGPTBlock

        model = NanoGPTBlock(n_embd=32, n_head=2, block_size=8, dropout=0.1 if name == "nanogpt" else 0.0).train()
        return model, lambda: (torch.randn(2, 8, 32, generator=g),), lambda out: out.pow(2).mean()
    if name == "gpt2":
        from thunderlab.examples import gpt2_from_config

        model = gpt2_from_config(n_layer=1, n_embd=32, n_head=2, vocab_size=64).train()

        def batch():
            ids = torch.randint(0, 64, (2, 8), generator=g)
            return {"input_ids": ids, "labels": ids}

        return model, batch, lambda out: out.loss
    raise ValueError(name)


def _call(fn, batch):
    return fn(**batch) if isinstance(batch, dict) else fn(*batch)


def train(model, run, batches, loss_of, rank: int, *, no_sync=None):
    """SGD steps; with ``no_sync`` (a context factory) the first of each step's two micro-batches skips sync."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    torch.manual_seed(7 + rank)  # the same dropout draws for the reference and thunderlab
    for micro in batches:
        for k, b in enumerate(micro):
            ctx = no_sync() if (no_sync is not None and k < len(micro) - 1) else _null()
            with ctx:
                loss_of(_call(run, b)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return model


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _differences(ref: nn.Module, got: nn.Module) -> dict:
    worst = max(((p - q).abs().max().item(), n) for (n, p), q in zip(ref.named_parameters(), got.parameters()))
    scale = max(p.abs().max().item() for p in ref.parameters())
    return {"max_abs": worst[0], "where": worst[1], "scale": scale}


def _concat(batches: list):
    """The processes' batches as one (tensors joined along the first dimension)."""
    if isinstance(batches[0], dict):
        return {k: torch.cat([b[k] for b in batches]) for k in batches[0]}
    return tuple(torch.cat(parts) for parts in zip(*batches))


def run_fsdp_case(name: str, level: int, rank: int, world: int, bucket_mb: float) -> dict:
    """thunderlab's fsdp on each process's batch against one process training on all of them joined."""
    import thunderlab.distributed

    made = [make(name, r) for r in range(world)]  # every rank's data is drawn here, so the joined batch is known
    model, _, loss_of = made[rank]
    ref = copy.deepcopy(made[0][0])  # fsdp starts every process from rank 0's parameters
    batches = [[made[r][1]() for r in range(world)] for _ in range(STEPS)]
    train(ref, ref, [[_concat(b)] for b in batches], loss_of, rank)
    tl = thunderlab.distributed.fsdp(model, level=level, bucket_mb=bucket_mb)
    train(tl, tl, [[b[rank]] for b in batches], loss_of, rank)
    whole = tl.gathered_parameters()
    worst = max(((p - whole[n]).abs().max().item(), n) for n, p in ref.named_parameters())
    rec = tl.record()  # the training program's (a no_grad call below compiles another)
    steps = {s.spec.split("{")[0]: s for s in rec.steps}
    bw = rec.program.backward
    evaluated = None
    if not isinstance(batches[0][rank], dict):  # a call without autograd: a forward-only program, sharded too
        with torch.no_grad():
            evaluated = (tl(*batches[0][rank]) - ref(*batches[0][rank])).abs().max().item()
    return {"max_abs": worst[0], "where": worst[1], "scale": max(p.abs().max().item() for p in ref.parameters()),
            "shard_numel": sum(p.numel() for p in tl.parameters()),
            "numel": sum(p.numel() for p in ref.parameters()),
            "notes": {k: v for k, v in steps["fsdp"].notes.facts.items() if k != "predicted"},
            "sink": steps["sink-waits"].notes.summary,
            "backward_collectives": [b.sym.name for b in bw.bound_symbols if b.sym.communicates],
            "unsharded_storage": sum(p.untyped_storage().nbytes() for p in model.parameters()),
            "no_grad_max_abs": evaluated}


def run_case(case: str, rank: int, world: int) -> dict:
    import thunderlab
    import thunderlab.distributed

    name, how = case.split(":")
    if how.startswith("fsdp"):  # fsdp2, fsdp3 (one bucket), fsdp3small (small buckets)
        small = how.endswith("small")
        return run_fsdp_case(name, int(how[4]), rank, world, 0.002 if small else 25.0)
    model, batch, loss_of = make(name, rank)
    micro = 2 if how == "no_sync" else 1
    batches = [[batch() for _ in range(micro)] for _ in range(STEPS)]
    ref = copy.deepcopy(model)
    eager = DDP(ref)  # broadcasts rank 0's parameters
    train(ref, eager, batches, loss_of, rank, no_sync=eager.no_sync if how == "no_sync" else None)
    if how in ("ddp", "no_sync"):
        tl = thunderlab.distributed.ddp(model, bucket_mb=0.01)  # small buckets: several all-reduces overlap backward
        train(model, tl, batches, loss_of, rank, no_sync=tl.no_sync if how == "no_sync" else None)
        note = tl.record().steps[[s.spec.split("{")[0] for s in tl.record().steps].index("ddp")]
        extra = {"buckets": len(note.notes.get("buckets", []))}
    elif how == "torch_ddp_around_compiled":
        wrapped = DDP(torch.compile(model, backend="thunderlab"))
        train(model, wrapped, batches, loss_of, rank)
        extra = {"records": len(thunderlab.records())}
    elif how == "compiled_torch_ddp":
        wrapped = torch.compile(DDP(model), backend="thunderlab")
        train(model, wrapped, batches, loss_of, rank)
        extra = {"records": len(thunderlab.records())}
    else:
        raise ValueError(how)
    return {**_differences(ref, model), **extra}


def worker(rank: int, world: int, port: int, out_dir: str, cases: list[str]) -> None:
    """One process: every case in order, the results to ``out_dir/rank{rank}.json``."""
    init(rank, world, port)
    results = {}
    for case in cases:
        try:
            results[case] = run_case(case, rank, world)
        except Exception:  # the parent reports which case failed on which rank, with its traceback
            results[case] = {"error": traceback.format_exc()}
            break  # the other rank may now wait in a collective this one will never make
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(results, f)
    finish()


def failing_worker(rank: int, world: int, port: int, mode: str) -> None:
    """Rank 1 raises ("raise"), or never joins rank 0's collective ("timeout").

    With "raise", rank 0 waits outside any collective, to be ended by the launcher: in a collective it would fail
    too as soon as rank 1's connection closes, and on a loaded machine its failure could be the one reported first.
    """
    init(rank, world, port, timeout_s=5)
    if rank == 1:
        if mode == "raise":
            raise RuntimeError("rank 1 fails on purpose")
        return
    if mode == "raise":
        time.sleep(60)
        return
    dist.all_reduce(torch.ones(4))  # rank 1 never joins: gloo's timeout ends the wait


def timed_worker(rank: int, world: int, port: int, out_dir: str, how: str = "ddp") -> None:
    """thunderlab's ddp (or fsdp at level 3) with ``timing=True`` for a few steps; the record's payload and its
    program's collectives."""
    import thunderlab.distributed
    from thunderlab.inspect.serialize import to_json, validate

    init(rank, world, port)
    try:
        model, batch, loss_of = make("mlp", rank)
        if how == "ddp":  # small buckets: several all-reduces
            tl = thunderlab.distributed.ddp(model, bucket_mb=0.0005, timing=True)
        else:  # small buckets: several all-gathers and reduce-scatters
            tl = thunderlab.distributed.fsdp(model, level=3, bucket_mb=0.002, timing=True)
        train(model, tl, [[batch()] for _ in range(STEPS)], loss_of, rank)
        rec = tl.record()
        payload = json.loads(to_json(rec))
        validate(payload)
        programs = rec.program.traces.values()
        issued = [b.sym.name for t in programs for b in t.bound_symbols if b.sym.communicates and b.sym.name != "wait"]
        result = {"communication": payload.get("communication"), "issued_per_step": issued, "steps": STEPS,
                  "regions": {n: r["timings"] for n, r in payload["regions"].items()}}
    except Exception:
        result = {"error": traceback.format_exc()}
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    finish()
