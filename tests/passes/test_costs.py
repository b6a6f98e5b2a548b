"""The communication cost model against the relations its sources document.

nccl-tests (doc/PERFORMANCE.md) turn a measured collective time into bus bandwidth by the
factor 2(p-1)/p for all-reduce and (p-1)/p for reduce-scatter and all-gather, so a ring that
runs at the link's bandwidth (no latency) shows bus bandwidth equal to the link's.
"""
import pytest

from thunderlab.distributed import costs
from thunderlab.passes.costs import Cluster, Link

LINK = Link("test", bandwidth=100e9, latency=0.0)
S = 256 * 2**20


@pytest.mark.parametrize("p", [2, 4, 8, 64])
def test_bus_bandwidth_of_a_latency_free_ring_is_the_links(p):
    algbw = S / costs.ring_all_reduce(S, p, LINK)
    assert algbw * 2 * (p - 1) / p == pytest.approx(LINK.bandwidth)
    algbw = S / costs.reduce_scatter(S, p, LINK)
    assert algbw * (p - 1) / p == pytest.approx(LINK.bandwidth)
    assert costs.all_gather(S, p, LINK) == costs.reduce_scatter(S, p, LINK)


def test_latency_counts_once_per_step():
    link = Link("slow", bandwidth=1e30, latency=1e-6)
    assert costs.ring_all_reduce(8, 8, link) == pytest.approx(2 * 7 * 1e-6)
    assert costs.tree_all_reduce(8, 8, link) == pytest.approx(2 * 3 * 1e-6)  # log2(8) levels, up and down
    assert costs.reduce_scatter(8, 8, link) == pytest.approx(7 * 1e-6)


def test_one_rank_communicates_nothing():
    assert costs.all_reduce(S, 1) == costs.reduce_scatter(S, 1, LINK) == 0.0


def test_within_a_node_the_cluster_is_its_intra_link_and_past_it_hierarchical():
    c = Cluster(per_node=8, intra=Link("fast", 400e9, 0.0), inter=Link("slow", 50e9, 0.0))
    assert costs.all_reduce(S, 8, c) == pytest.approx(costs.ring_all_reduce(S, 8, c.intra))
    # 16 ranks: reduce-scatter and all-gather inside the node, a 2-node all-reduce of an eighth
    want = 2 * costs.reduce_scatter(S, 8, c.intra) + costs.ring_all_reduce(S / 8, 2, c.inter)
    assert costs.all_reduce(S, 16, c) == pytest.approx(want)
    with pytest.raises(ValueError, match="ring, tree"):
        costs.all_reduce(S, 16, c, algorithm="butterfly")


def test_exposed_communication_is_what_runs_past_backward():
    link = Link("l", bandwidth=1e9, latency=0.0)
    one = costs.all_reduce(1e6, 2, link)  # 1 ms
    assert costs.exposed([(1e6, 0.0)], backward_s=10 * one, p=2, cluster=link) == 0.0  # hidden by compute
    # issued when backward ends: all of it is exposed
    assert costs.exposed([(1e6, 1.0)], backward_s=10 * one, p=2, cluster=link) == pytest.approx(one)
    # two buckets issued together run one after the other
    assert costs.exposed([(1e6, 0.9), (1e6, 0.9)], backward_s=10 * one, p=2, cluster=link) == pytest.approx(one)


def test_zero3_holds_a_p_th_of_what_ddp_holds():
    ddp = costs.memory_per_rank(1e9, 2, "ddp")
    assert ddp == 4e9  # parameters, gradients, Adam's two states
    assert costs.memory_per_rank(1e9, 2, "zero3") == ddp / 2
    assert costs.memory_per_rank(1e9, 2, "zero2") == 1e9 + 3e9 / 2
    with pytest.raises(ValueError, match="ddp, zero2, zero3"):
        costs.memory_per_rank(1e9, 2, "zero4")


def test_ddp_notes_predict_for_thousands_of_ranks():
    import torch

    import thunderlab

    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64))
    j = thunderlab.jit(model, pipeline="dce,autodiff,ddp{world=8},del")
    j(torch.randn(2, 64))
    notes = next(s for s in thunderlab.last_record(j).steps if s.spec.startswith("ddp")).notes
    assert set(notes["predicted"]) == {"8", "64", "1024", "4096"}
    assert notes["parameter_bytes"] == sum(p.numel() * 4 for p in model.parameters())
    ring = [notes["predicted"][k]["all_reduce_ms_ring"] for k in ("8", "64", "1024", "4096")]
    assert ring == sorted(ring) and ring[0] > 0  # more ranks, more ring steps
