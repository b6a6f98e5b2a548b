"""Data-parallel training in real torch.distributed processes (gloo on localhost, bounded in time).

thunderlab's ``ddp`` (and PyTorch's DistributedDataParallel around a model compiled with
thunderlab) must give the parameters PyTorch's DistributedDataParallel gives on the eager model,
within float32 tolerance, after three optimizer steps with each rank's own data, dropout on:
the MLP, the nanoGPT block and a Hugging Face GPT-2. A rank that raises or a collective that times
out ends the job with an error naming the rank, never a hang.
"""
from __future__ import annotations

import json
import socket
import time

import pytest
import torch
import torch.multiprocessing as mp

from . import workers

WORLD = 2
DEADLINE_S = 240


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn(fn, args, deadline_s: float = DEADLINE_S):
    """Start WORLD processes running ``fn(rank, *args)``; join them, killing all past the deadline."""
    ctx = mp.start_processes(fn, args=args, nprocs=WORLD, join=False, start_method="spawn")
    end = time.monotonic() + deadline_s
    while not ctx.join(timeout=2):
        if time.monotonic() > end:
            for p in ctx.processes:
                p.kill()
            pytest.fail(f"the distributed job did not finish in {deadline_s} s")


def _run(tmp_path, cases, deadline_s: float = DEADLINE_S):
    _spawn(workers.worker, (WORLD, _port(), str(tmp_path), cases), deadline_s)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(WORLD)]
    for r, res in enumerate(ranks):
        for case in cases:
            assert case in res, f"rank {r} did not reach {case}: {res}"
            assert "error" not in res[case], f"rank {r}, {case}:\n{res[case]['error']}"
    return ranks


def _close(res: dict, case: str, rank: int):
    tol = 1e-5 + 1e-4 * res["scale"]  # float32: a few ulps of the largest parameter, through three steps
    assert res["max_abs"] <= tol, f"rank {rank}, {case}: {res['where']} differs from DDP by {res['max_abs']:.3g}"


CASES = ["mlp:ddp", "nanogpt:ddp", "gpt2:ddp", "mlp:no_sync", "nanogpt:torch_ddp_around_compiled",
         "mlp:compiled_torch_ddp"]


def test_ddp_trains_like_pytorchs_distributed_data_parallel(tmp_path):
    pytest.importorskip("transformers")
    ranks = _run(tmp_path, CASES)
    for r, res in enumerate(ranks):
        for case in CASES:
            _close(res[case], case, r)
    assert ranks[0]["nanogpt:ddp"]["buckets"] > 1  # small buckets: several all-reduces in the backward


@pytest.mark.parametrize("mode,words", [("raise", "rank 1 fails on purpose"), ("timeout", "")])
def test_a_failing_rank_ends_the_job_with_its_rank_named(mode, words):
    with pytest.raises(mp.ProcessRaisedException) as e:
        _spawn(workers.failing_worker, (WORLD, _port(), mode), deadline_s=120)
    text = str(e.value)
    assert words in text
    # PyTorch's launcher names the process that raised; the others are ended, not left waiting
    assert f"process {1 if mode == 'raise' else 0} terminated" in text.lower()
    if mode == "timeout":
        assert "timed out" in text.lower() or "timeout" in text.lower() or "connection closed" in text.lower()


def test_ddp_pass_in_one_process_shows_the_program_for_n_processes():
    import thunderlab

    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    j = thunderlab.jit(model, pipeline="dce,cse,autodiff,remat,ddp{world=4,bucket_mb=0.0002},sink-waits,claim,del")
    x = torch.randn(2, 8)
    out = j(x)  # the forward has no collective: it runs in one process
    torch.testing.assert_close(out, model(x))
    rec = thunderlab.last_record(j)
    bw = rec.program.backward
    names = [b.sym.name for b in bw.bound_symbols if not b.sym.bookkeeping]
    assert names.count("all_reduce") == names.count("wait") >= 2
    # ddp waits right after each all-reduce; sink-waits, a step of its own, moves the waits to the end, so
    # every all-reduce is issued before the first wait (they overlap the rest of backward)
    steps = {s.spec.split("{")[0]: s for s in rec.steps}
    placed = [b.sym.name for b in steps["ddp"].program.backward.bound_symbols]
    assert all(placed[i + 1] == "wait" for i, n in enumerate(placed) if n == "all_reduce")
    assert max(i for i, n in enumerate(names) if n == "all_reduce") < min(i for i, n in enumerate(names) if n == "wait")
    waits = steps["sink-waits"].notes["waits"]["backward"]
    assert [w["waits_for"] for w in waits] == ["all_reduce"] * names.count("wait")
    assert waits[0]["calls_overlapped"] > 0
    text = bw.python()
    assert "ltorch.all_reduce(" in text and "'sum', 4)" in text and "ltorch.wait(" in text
    step = next(s for s in rec.steps if s.spec.startswith("ddp"))
    assert step.notes["world"] == 4 and len(step.notes["buckets"]) >= 2
    # the gradient of the input x is not a parameter's: it is not averaged
    params = [p.name for p in rec.program.forward.tensor_inputs() if p.parameter]
    assert len(params) == 4
    # the views draw collectives as their own kind of node; the payload says so and follows its schema
    import json

    from thunderlab.inspect.serialize import to_json, validate

    payload = json.loads(to_json(rec))
    validate(payload)
    kinds = {n["label"]: n["kind"] for n in payload["steps"][-1]["traces"]["backward"]["graph"]["nodes"]}
    assert kinds["ltorch.all_reduce"] == kinds["ltorch.wait"] == "communication"
    with pytest.raises(RuntimeError, match="torch.distributed initialised"):
        out.sum().backward()  # running a collective needs the processes


def test_ddp_without_a_process_group_or_world_is_refused_by_name():
    import thunderlab

    model = torch.nn.Linear(4, 2)
    j = thunderlab.jit(model, pipeline="dce,autodiff,ddp,del")
    with pytest.raises(Exception, match=r"ddp\{world=N\}"):
        j(torch.randn(3, 4))
