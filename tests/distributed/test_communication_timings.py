"""With ``timing=True``, a data-parallel program times its collectives, and the record's payload carries them.

Two gloo processes train the MLP under ``thunderlab.distributed.ddp`` and ``fsdp`` (bounded in
time); every collective the program issued is counted once per step, each with a time in flight
and a time blocked in its wait, beside the fusion regions' timings.
"""
from __future__ import annotations

import json
from collections import Counter

import pytest

from . import workers
from .test_ddp import WORLD, _port, _spawn


@pytest.mark.parametrize("how,collectives", [("ddp", {"all_reduce"}), ("fsdp", {"all_gather", "reduce_scatter"})])
def test_timing_records_each_collective_in_the_payload(tmp_path, how, collectives):
    _spawn(workers.timed_worker, (WORLD, _port(), str(tmp_path), how), deadline_s=180)
    for rank in range(WORLD):
        res = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert "error" not in res, f"rank {rank}:\n{res.get('error')}"
        expected = Counter(res["issued_per_step"])
        assert set(expected) == collectives
        assert all(expected[c] >= 2 for c in collectives), f"small buckets: several exchanges per step, {expected}"
        comm = res["communication"]
        assert set(comm) == set(expected)
        for name, n in expected.items():
            t = comm[name]
            assert t["count"] == n * res["steps"], f"rank {rank}: {name} timed {t['count']} times"
            assert t["min_s"] > 0 and t["median_s"] >= t["min_s"] and t["total_s"] >= t["median_s"]
            # blocked in the wait is part of the time from the issue to the wait returning
            assert t["blocked_total_s"] <= t["total_s"]
