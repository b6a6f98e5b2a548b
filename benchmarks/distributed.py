"""Data-parallel training on 2 CPU processes (gloo on localhost), and the cost model against measurement.

    python benchmarks/distributed.py            # writes benchmarks/results/distributed.json
    python benchmarks/distributed.py --quick    # fewer rounds, no torch.compile (Inductor) case

1. Collectives measured: all-reduce of 4 KiB to 16 MiB on 2 and 4 processes; the alpha-beta
   model (thunderlab.distributed.costs) fitted to them (latency and bandwidth of "gloo on
   localhost"), and each measurement against the fitted model's prediction.
2. A nanoGPT block's training step (forward, backward, SGD step) per process, in interleaved
   rounds: thunderlab's ddp, PyTorch's DistributedDataParallel on the eager model, and DDP around
   torch.compile (Inductor); median step times and their ratios, bytes all-reduced per step, and
   parameter+gradient+optimizer bytes per rank.
3. The same step fully sharded (SGD with momentum): thunderlab's fsdp at levels 2 and 3 against
   PyTorch's FSDP2 (``torch.distributed.fsdp.fully_shard`` on the attention, the MLP and the block,
   ``reshard_after_forward`` False and True), in interleaved rounds, as paired ratios (the median of
   per-round ratios with a 95% bootstrap interval, benchmarks/paired.py); bytes communicated per
   step; and peak tensor memory per rank during a step on a small batch, so that parameters,
   gradients and optimizer state dominate (see ``MemoryPeak``), against DistributedDataParallel's
   (which keeps its gradient buckets besides the gradients) and one process training the whole model.
Each process runs with one thread (2 processes on 2 cores).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))
SIZES = [4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _init(rank, world, port):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)


def collectives(rank, world, port, out, repeats):
    _init(rank, world, port)
    times = {}
    for n in SIZES:
        t = torch.ones(n // 4)
        for _ in range(3):
            dist.all_reduce(t)
        samples = []
        for _ in range(repeats):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(t)
            samples.append(time.perf_counter() - t0)
        times[n] = statistics.median(samples)
    if rank == 0:
        Path(out).write_text(json.dumps(times))
    dist.destroy_process_group()


def training(rank, world, port, out, rounds, with_inductor):
    _init(rank, world, port)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(tempfile.gettempdir(), "thunderlab-bench-inductor"))
    import copy

    from torch.nn.parallel import DistributedDataParallel as DDP

    import thunderlab
    import thunderlab.distributed
    from thunderlab.examples import NanoGPTBlock

    torch.manual_seed(0)
    base = NanoGPTBlock(n_embd=256, n_head=4, block_size=64, dropout=0.0)
    x = torch.randn(4, 64, 256)
    runs = {}
    tl_model = copy.deepcopy(base)
    runs["thunderlab ddp"] = (tl_model, thunderlab.distributed.ddp(tl_model, tiered=False))
    eager_model = copy.deepcopy(base)
    runs["torch DDP, eager"] = (eager_model, DDP(eager_model))
    if with_inductor:
        ind_model = copy.deepcopy(base)
        runs["torch DDP, torch.compile"] = (ind_model, DDP(torch.compile(ind_model)))
    opts = {k: torch.optim.SGD(m.parameters(), lr=1e-3) for k, (m, _) in runs.items()}

    def step(name):
        model, fn = runs[name]
        fn(x).pow(2).mean().backward()
        opts[name].step()
        opts[name].zero_grad(set_to_none=True)

    first = {}
    for name in runs:  # first calls (compiles) on their own
        dist.barrier()
        t0 = time.perf_counter()
        step(name)
        first[name] = time.perf_counter() - t0
    for name in runs:
        for _ in range(3):
            step(name)
    samples = {name: [] for name in runs}
    for _ in range(rounds):  # interleaved: every round times each in turn
        for name in runs:
            dist.barrier()
            t0 = time.perf_counter()
            step(name)
            samples[name].append(time.perf_counter() - t0)
    rec = runs["thunderlab ddp"][1].record()
    notes = next(s for s in rec.steps if s.spec.startswith("ddp")).notes
    param_bytes = sum(p.numel() * p.element_size() for p in base.parameters())
    if rank == 0:
        Path(out).write_text(json.dumps({
            "median_step_ms": {k: 1e3 * statistics.median(v) for k, v in samples.items()},
            "min_step_ms": {k: 1e3 * min(v) for k, v in samples.items()},
            "first_step_s": first,
            "bytes_all_reduced_per_step": {"thunderlab ddp": sum(b["bytes"] for b in notes["buckets"]),
                                           "torch DDP": param_bytes},
            "buckets": len(notes["buckets"]),
            "param_grad_optimizer_bytes_per_rank": {"ddp": 2 * param_bytes + param_bytes},  # SGD with momentum
            "rounds": rounds,
        }))
    dist.destroy_process_group()


class MemoryPeak:
    """The most bytes of CPU tensor memory alive at once while it is active, counting from ``held``'s.

    PyTorch's profiler (``profile_memory=True``) records every allocation and free of tensor
    memory in the process's threads that it follows: thunderlab's calls, Inductor's buffers,
    FSDP2's and the collectives' buffers; their running sum, from the bytes ``held`` holds
    beforehand (parameters or shards, optimizer state), peaks at ``peak``. What gloo allocates
    inside a collective is not a tensor and not counted. Python's garbage is collected first, so that
    no collection of what earlier steps and compiling left behind runs during the step measured.
    """

    def __init__(self, held):
        self.held = sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in held}.values())
        self.peak = self.held

    def __enter__(self):
        gc.collect()
        self.prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True)
        self.prof.__enter__()
        return self

    def __exit__(self, *exc):
        self.prof.__exit__(*exc)
        changes = sorted((e.start_ns(), e.nbytes()) for e in self.prof.profiler.kineto_results.events()
                         if e.name() == "[memory]")
        live = 0
        for _, delta in changes:
            live += delta
            self.peak = max(self.peak, self.held + live)
        return False


def _state_tensors(params, opt) -> list:
    """The tensors that persist between steps: parameters (FSDP2's local shards) and optimizer state."""
    out = []
    for p in params:
        local = p.to_local() if hasattr(p, "to_local") else p
        if local.untyped_storage().nbytes():
            out.append(local)
    for state in opt.state.values():
        out.extend(v.to_local() if hasattr(v, "to_local") else v for v in state.values()
                   if isinstance(v, torch.Tensor) and v.numel() > 1)
    return out


def fsdp_training(rank, world, port, out, rounds, memory_batch):
    _init(rank, world, port)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(tempfile.gettempdir(), "thunderlab-bench-inductor"))
    import copy

    from paired import paired_ratio
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    import thunderlab.distributed
    from thunderlab.examples import NanoGPTBlock

    torch.manual_seed(0)
    base = NanoGPTBlock(n_embd=256, n_head=4, block_size=64, dropout=0.0)
    mesh = init_device_mesh("cpu", (world,))

    def torch_fsdp2(reshard: bool):
        m = copy.deepcopy(base)
        for part in (m.attn, m.mlp):  # a unit per sub-layer, as FSDP2's users wrap transformer layers
            fully_shard(part, mesh=mesh, reshard_after_forward=reshard)
        fully_shard(m, mesh=mesh, reshard_after_forward=reshard)
        return m

    runs = {
        "thunderlab fsdp level 2": thunderlab.distributed.fsdp(copy.deepcopy(base), level=2, bucket_mb=1, tiered=False),
        "thunderlab fsdp level 3": thunderlab.distributed.fsdp(copy.deepcopy(base), level=3, bucket_mb=1, tiered=False),
        "torch FSDP2 reshard_after_forward=False": torch_fsdp2(False),
        "torch FSDP2 reshard_after_forward=True": torch_fsdp2(True),
    }
    single = copy.deepcopy(base)  # the whole model in one process: what DDP holds on every rank
    opts = {k: torch.optim.SGD(m.parameters(), lr=1e-3, momentum=0.9) for k, m in runs.items()}
    single_opt = torch.optim.SGD(single.parameters(), lr=1e-3, momentum=0.9)

    def step(name, x):
        runs[name](x).pow(2).mean().backward()
        opts[name].step()
        opts[name].zero_grad(set_to_none=True)

    x = torch.randn(4, 64, 256)
    first = {}
    for name in runs:
        dist.barrier()
        t0 = time.perf_counter()
        step(name, x)
        first[name] = time.perf_counter() - t0
        for _ in range(3):
            step(name, x)
    samples = {name: [] for name in runs}
    for _ in range(rounds):  # interleaved: every round times each in turn
        for name in runs:
            dist.barrier()
            t0 = time.perf_counter()
            step(name, x)
            samples[name].append(time.perf_counter() - t0)
    # memory on a small batch, so that parameters, gradients and optimizer state dominate what is alive
    small = torch.randn(*memory_batch)
    peaks = {}
    for name, m in runs.items():
        step(name, small)  # compiled for this shape first
        dist.barrier()
        with MemoryPeak(_state_tensors(m.parameters(), opts[name])) as mem:
            step(name, small)
        peaks[name] = mem.peak
    # the least memory thunderlab's ZeRO-3 offers: no bucket gathered ahead (prefetch=0), so gathering is not overlapped
    lean = thunderlab.distributed.fsdp(copy.deepcopy(base), level=3, bucket_mb=1, prefetch=0, tiered=False)
    lean_opt = torch.optim.SGD(lean.parameters(), lr=1e-3, momentum=0.9)

    def lean_step(batch):
        lean(batch).pow(2).mean().backward()
        lean_opt.step()
        lean_opt.zero_grad(set_to_none=True)

    for batch in (x, x, x, x, small):  # compiled for both shapes and run first, as the others were: the first
        lean_step(batch)                # few steps after a compile leave more alive
    dist.barrier()
    with MemoryPeak(_state_tensors(lean.parameters(), lean_opt)) as mem:
        lean_step(small)
    peaks["thunderlab fsdp level 3 prefetch=0"] = mem.peak
    single(small).pow(2).mean().backward()
    single_opt.step()
    single_opt.zero_grad(set_to_none=True)
    with MemoryPeak(_state_tensors(single.parameters(), single_opt)) as mem:
        single(small).pow(2).mean().backward()
        single_opt.step()
        single_opt.zero_grad(set_to_none=True)
    peaks["one process, whole model (as DDP on each rank)"] = mem.peak
    # DistributedDataParallel: its gradient buckets and the optimizer state are made on the first steps,
    # so these are measured from its construction on
    from torch.nn.parallel import DistributedDataParallel as DDP

    ddp_model = copy.deepcopy(base)
    with MemoryPeak(list(ddp_model.parameters())) as mem:
        ddp = DDP(ddp_model)
        ddp_opt = torch.optim.SGD(ddp.parameters(), lr=1e-3, momentum=0.9)
        for _ in range(2):
            ddp(small).pow(2).mean().backward()
            ddp_opt.step()
            ddp_opt.zero_grad(set_to_none=True)
    peaks["torch DDP, eager"] = mem.peak
    notes = {}
    for level in (2, 3):
        rec = runs[f"thunderlab fsdp level {level}"].record()
        notes[level] = next(s for s in rec.steps if s.spec.startswith("fsdp")).notes
    param_bytes = sum(p.numel() * p.element_size() for p in base.parameters())
    # FSDP2 all-gathers every unit's parameters in forward (and again in backward when it reshards after
    # forward), and reduce-scatters every gradient: the bytes of the whole tensors gathered or reduced
    fsdp2_bytes = {False: 2 * param_bytes, True: 3 * param_bytes}
    if rank == 0:
        med = {k: 1e3 * statistics.median(v) for k, v in samples.items()}
        ratio = {
            "thunderlab fsdp level 2 / torch FSDP2 reshard_after_forward=False":
                paired_ratio(samples["thunderlab fsdp level 2"], samples["torch FSDP2 reshard_after_forward=False"]),
            "thunderlab fsdp level 3 / torch FSDP2 reshard_after_forward=True":
                paired_ratio(samples["thunderlab fsdp level 3"], samples["torch FSDP2 reshard_after_forward=True"]),
        }
        ddp_peak = peaks["torch DDP, eager"]
        Path(out).write_text(json.dumps({
            "median_step_ms": med, "min_step_ms": {k: 1e3 * min(v) for k, v in samples.items()},
            "first_step_s": first, "paired_ratios": ratio, "rounds": rounds,
            "bytes_communicated_per_step": {
                "thunderlab fsdp level 2": notes[2]["bytes_collected"],
                "thunderlab fsdp level 3": notes[3]["bytes_collected"],
                "torch FSDP2 reshard_after_forward=False": fsdp2_bytes[False],
                "torch FSDP2 reshard_after_forward=True": fsdp2_bytes[True],
                "DDP (all-reduce)": param_bytes},
            "buckets": {lvl: len(n["forward_all_gathers"]) for lvl, n in notes.items()},
            "parameter_bytes": param_bytes,
            "peak_tensor_bytes_per_rank": {"batch": list(memory_batch), **peaks},
            "peak_over_torch_ddp": {k: v / ddp_peak for k, v in peaks.items()},
        }))
    dist.destroy_process_group()


def _spawn(fn, world, *args):
    mp.start_processes(fn, args=(world, _port(), *args), nprocs=world, join=True, start_method="spawn")


def fit(measured: dict) -> dict:
    """Least-squares latency and bandwidth of a ring all-reduce: t = 2(p-1) a + 2(p-1)/p n / b."""
    rows, ys = [], []
    for p, times in measured.items():
        for n, t in times.items():
            rows.append((2 * (p - 1), 2 * (p - 1) / p * n))
            ys.append(t)
    a = torch.tensor(rows, dtype=torch.float64)
    y = torch.tensor(ys, dtype=torch.float64)
    alpha, inv_beta = torch.linalg.lstsq(a, y.unsqueeze(1)).solution.squeeze(1).tolist()
    return {"latency_s": alpha, "bandwidth_Bps": 1 / inv_beta}


def ddp_part(d: str, args, result: dict) -> None:
    """Collectives against the cost model, and the ddp training step (sections 1 and 2)."""
    from thunderlab.distributed import costs

    measured = {}
    for p in (2, 4):
        f = Path(d, f"coll{p}.json")
        _spawn(collectives, p, str(f), 10 if args.quick else 30)
        measured[p] = {int(k): v for k, v in json.loads(f.read_text()).items()}
    fits = {}
    for ranks in ((2,), (4,), (2, 4)):  # fitted on some process counts, checked on all
        link = fit({p: measured[p] for p in ranks})
        model = costs.Link("gloo on localhost (fitted)", link["bandwidth_Bps"], link["latency_s"])
        points = [{"ranks": p, "bytes": n, "measured_ms": 1e3 * t,
                   "model_ms": 1e3 * costs.ring_all_reduce(n, p, model),
                   "model_over_measured": costs.ring_all_reduce(n, p, model) / t}
                  for p, times in measured.items() for n, t in times.items()]
        fits["+".join(map(str, ranks))] = {"fitted": link, "points": points}
    result["collectives"] = {
        "fits": fits,
        "note": "4 processes on 2 cores are oversubscribed: every step of the ring waits for a process the OS "
                "has descheduled, a floor of milliseconds that a single latency per step does not describe, so "
                "a fit on 2 processes predicts 4 poorly and one fit on both misses small messages on 2",
    }
    f = Path(d, "train.json")
    _spawn(training, 2, str(f), 5 if args.quick else 20, not args.quick)
    train = json.loads(f.read_text())
    eager = train["median_step_ms"]["torch DDP, eager"]
    train["ratios_to_torch_ddp_eager"] = {k: v / eager for k, v in train["median_step_ms"].items()}
    result["nanogpt_block_training_step_2_processes"] = train


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=("fsdp",), help="run only the fsdp comparison (written to --out)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "distributed.json"))
    args = ap.parse_args()
    result = {"machine": f"{os.cpu_count()} cores; gloo on localhost; one thread per process",
              "load_average_at_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as d:
        if args.only != "fsdp":
            ddp_part(d, args, result)
        elif Path(args.out).exists():  # the other sections' figures stay as they were recorded
            result = {**json.loads(Path(args.out).read_text()), "load_average_at_fsdp_start": os.getloadavg()[0]}
            result.pop("fsdp", None)  # the placeholder of a run made before thunderlab had fsdp
        f = Path(d, "fsdp.json")
        _spawn(fsdp_training, 2, str(f), 5 if args.quick else 20, (1, 8, 256))
        result["nanogpt_block_fsdp_2_processes"] = json.loads(f.read_text())
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
