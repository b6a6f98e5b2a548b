"""Fully sharded training in real torch.distributed processes (gloo on localhost, bounded in time).

ZeRO-2 and ZeRO-3 (``thunderlab.distributed.fsdp(model, level=...)``), each process training on its own
batch, must end with the parameters one process gets by training on all the processes' batches
joined (data parallelism averages gradients: the mean loss over the joined batch), within float32
tolerance, after three SGD steps with momentum: an MLP whose shards need padding, the nanoGPT block
and a Hugging Face GPT-2. The program for N processes can be read in one process.
"""
from __future__ import annotations

import pytest
import torch

from .test_ddp import WORLD, _run

CASES = ["mlp7:fsdp2", "mlp7:fsdp3small", "nanogpt0:fsdp2small", "nanogpt0:fsdp3small", "gpt2:fsdp2", "gpt2:fsdp3"]


def test_fsdp_trains_like_one_process_on_the_joined_batch(tmp_path):
    pytest.importorskip("transformers")
    ranks = _run(tmp_path, CASES, deadline_s=480)
    for r, res in enumerate(ranks):
        for case in CASES:
            got = res[case]
            tol = 1e-5 + 1e-4 * got["scale"]
            assert got["max_abs"] <= tol, f"rank {r}, {case}: {got['where']} differs by {got['max_abs']:.3g}"
            # each process holds half of every parameter (rounded up), and the module's whole parameters no memory
            assert got["numel"] <= WORLD * got["shard_numel"] < got["numel"] + WORLD * 8
            assert got["unsharded_storage"] == 0
            if got["no_grad_max_abs"] is not None:  # called under no_grad: a forward-only program, gathering too
                assert got["no_grad_max_abs"] <= tol, f"rank {r}, {case} under no_grad"
            level = int(case.split(":")[1][4])
            notes = got["notes"]
            assert notes["level"] == level and notes["world"] == WORLD
            assert notes["forward_all_gathers"] and notes["reduce_scatters"]
            assert bool(notes["backward_all_gathers"]) == (level == 3)  # ZeRO-3 gathers again in backward
            assert ("all_gather" in got["backward_collectives"]) == (level == 3)
    mlp = ranks[0]["mlp7:fsdp2"]["notes"]
    # 31 and 7 elements do not split in two: those shards are padded, and the padding never reaches a parameter
    assert mlp["padded"] == ["fn_0_bias", "fn_2_weight", "fn_2_bias"]
    small = ranks[0]["nanogpt0:fsdp3small"]["notes"]
    assert len(small["forward_all_gathers"]) > 2 and len(small["reduce_scatters"]) > 2


def _record(pipeline: str, model=None):
    import thunderlab

    model = model or torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 3))
    j = thunderlab.jit(model, pipeline="dce,cse,autodiff,remat,claim{executors=torch},del")
    j(torch.randn(2, 8)).sum().backward()  # compiled and run without fsdp, which needs the processes
    return thunderlab.rerun(thunderlab.last_record(j), pipeline)


def _calls(trace) -> list[str]:
    return [b.sym.name for b in trace.bound_symbols if not b.sym.bookkeeping]


@pytest.mark.parametrize("level", [2, 3])
def test_fsdp_program_for_n_processes_reads_in_one_process(level):
    rec = _record(f"dce,cse,autodiff,remat,fsdp{{world=4,level={level},bucket_mb=0.0001}},sink-waits,"
                  f"claim{{executors=torch}},del")
    assert rec.error is None, rec.error
    steps = {s.spec.split("{")[0]: s for s in rec.steps}
    fsdp = steps["fsdp"]
    fw, bw = fsdp.program.forward, fsdp.program.backward
    # the program takes each parameter's shard: a quarter of it, padded (16 * 8 = 128 splits evenly, 3 does not)
    shards = {p.name: p.shape for p in fw.tensor_inputs() if p.parameter}
    assert shards == {"fn_0_weight_shard": (32,), "fn_0_bias_shard": (4,), "fn_2_weight_shard": (12,),
                      "fn_2_bias_shard": (1,)}
    assert fsdp.notes["padded"] == ["fn_2_bias"] and fsdp.notes["world"] == 4
    assert "ltorch.all_gather(" in fw.python() and "ltorch.reduce_scatter(" in bw.python()
    assert ("all_gather" in _calls(bw)) == (level == 3)  # ZeRO-3 gathers the parameters again in backward
    # the backward returns each shard's gradient, shaped as its shard
    grads = [g for g in bw.output if g is not None]
    assert sorted(g.shape for g in grads) == sorted(shards.values())
    # fsdp waits at once; sink-waits moves every wait down to the first use of what it waited for
    names = _calls(fw)
    assert all(names[i + 1] == "wait" for i, n in enumerate(names) if n == "all_gather")
    sunk = _calls(steps["sink-waits"].program.forward)
    assert sunk.count("wait") == names.count("wait")
    assert any(sunk[i + 1] != "wait" for i, n in enumerate(sunk) if n == "all_gather")  # the bucket after: prefetched
    moved = steps["sink-waits"].notes["waits"]
    assert sum(w["calls_overlapped"] for ws in moved.values() for w in ws) > 0
    assert {w["waits_for"] for w in moved["backward"]} >= {"reduce_scatter"}
    # the views draw the collectives as communication, at every step after fsdp
    import json

    from thunderlab.inspect.serialize import to_json, validate

    payload = json.loads(to_json(rec))
    validate(payload)
    at = [s["spec"].split("{")[0] for s in payload["steps"]].index("fsdp")
    for step in payload["steps"][at:]:
        kinds = {n["label"]: n["kind"] for n in step["traces"]["forward"]["graph"]["nodes"]}
        assert kinds["ltorch.all_gather"] == kinds["ltorch.wait"] == "communication"


def test_fsdp_options_are_refused_by_name():
    import thunderlab
    import thunderlab.distributed
    from thunderlab.passes import PipelineError

    with pytest.raises(PipelineError, match=r"fsdp: level must be 2 .* or 3 .*got 1"):
        thunderlab.jit(torch.nn.Linear(2, 2), pipeline="dce,autodiff,fsdp{world=2,level=1},del")
    with pytest.raises(PipelineError, match=r"sink-waits: kinds='all_to_all'"):
        thunderlab.jit(torch.nn.Linear(2, 2), pipeline="dce,autodiff,sink-waits{kinds=all_to_all},del")
    j = thunderlab.jit(torch.nn.Linear(4, 2), pipeline="dce,autodiff,fsdp,del")
    with pytest.raises(Exception, match=r"fsdp\{world=N\}"):  # one process, no torch.distributed: say how to look
        j(torch.randn(3, 4))
    with pytest.raises(RuntimeError, match="torch.distributed initialised"):
        thunderlab.distributed.fsdp(torch.nn.Linear(4, 2))


def test_sink_waits_keeps_the_program_and_only_moves_waits():
    rec = _record("dce,cse,autodiff,remat,fsdp{world=2,bucket_mb=0.0003},sink-waits,claim{executors=torch},del")
    steps = {s.spec.split("{")[0]: s for s in rec.steps}
    for trace in ("forward", "backward"):
        before = steps["fsdp"].program.traces[trace].bound_symbols
        after = steps["sink-waits"].program.traces[trace].bound_symbols
        assert sorted(b.id for b in before) == sorted(b.id for b in after)
        # every collective and every other call keeps its order; only the waits move
        assert [b.id for b in before if b.sym.name != "wait"] == [b.id for b in after if b.sym.name != "wait"]
        defined = {p.name for p in steps["sink-waits"].program.traces[trace].inputs if hasattr(p, "name")}
        for b in after:  # each wait still follows its collective and precedes every use of its result
            assert all(x.name in defined for x in b.inputs), b
            defined.update(o.name for o in b.outputs)


@pytest.mark.parametrize("prefetch", [0, 1])
def test_fsdp_prefetch_gathers_the_next_bucket_before_this_one_is_used_or_not(prefetch):
    rec = _record(f"dce,cse,autodiff,remat,fsdp{{world=2,level=3,bucket_mb=0.0001,prefetch={prefetch}}},"
                  f"claim{{executors=torch}},del")
    assert rec.error is None, rec.error
    steps = {s.spec.split("{")[0]: s for s in rec.steps}
    assert steps["fsdp"].notes["prefetch"] == prefetch
    names = _calls(steps["fsdp"].program.forward)
    # buckets [fn_0 weight], [fn_0 bias, fn_2 weight], [fn_2 bias]: the first linear layer needs two; with prefetch,
    # the third is asked for too before anything is computed, without, only once the first layer is done
    first = next(i for i, n in enumerate(names) if n not in ("all_gather", "wait", "cat", "split", "reshape",
                                                                "narrow"))
    assert names[:first].count("all_gather") == 2 + prefetch, names
    assert names.count("all_gather") == 3


def test_fsdp_prefetch_is_refused_when_not_a_count():
    import thunderlab
    from thunderlab.passes import PipelineError

    with pytest.raises(PipelineError, match=r"fsdp: prefetch must be a whole number .* got -1"):
        thunderlab.jit(torch.nn.Linear(2, 2), pipeline="dce,autodiff,fsdp{world=2,prefetch=-1},del")


def test_fsdp_large_gradient_is_reduce_scattered_alone_and_zero3_regathers_by_backward_use():
    # Linear(8, 16) has a 512-byte weight and a 64-byte bias; with 0.0005 MiB (524 bytes) buckets the two would
    # overfill one bucket, whichever gradient comes first: the weight's goes alone, with no cat to pack it
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 3))
    rec = _record("dce,cse,autodiff,remat,fsdp{world=2,level=3,bucket_mb=0.0005},claim{executors=torch},del", model)
    assert rec.error is None, rec.error
    fsdp = next(s for s in rec.steps if s.spec.startswith("fsdp"))
    scattered = [x["bytes"] for x in fsdp.notes["reduce_scatters"]]
    assert 512 in scattered  # fn_0's weight gradient on its own
    bw = fsdp.program.backward
    producer = {o.name: b for b in bw.bound_symbols for o in b.outputs}
    for b in bw.bound_symbols:
        if b.sym.name == "reduce_scatter" and b.args[0].numel() * 4 == 512:
            chain = producer[b.args[0].name]
            while chain.sym.name == "reshape":
                chain = producer.get(chain.args[0].name, chain)
                if chain.sym.name != "reshape":
                    break
            assert chain.sym.name != "cat", "a gradient alone in its bucket is sent without a packing copy"
    # backward gathers again only what it reads, never more than about a bucket at once
    assert all(x["bytes"] <= 0.0005 * 2**20 + 512 for x in fsdp.notes["backward_all_gathers"])
