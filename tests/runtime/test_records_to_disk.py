"""THUNDERLAB_RECORDS / thunderlab.record_to: every compile leaves a record file, off the hot path, within limits."""
import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

import thunderlab
from thunderlab.runtime import recorder
from thunderlab.runtime.compiled import RECORD_LISTENERS


@pytest.fixture
def writing(tmp_path):
    started = []

    def start(**limits):
        w = thunderlab.record_to(tmp_path / "records", **limits)
        started.append(w)
        return w

    yield start
    thunderlab.record_to(None)
    assert not any(isinstance(x, recorder.RecordWriter) for x in RECORD_LISTENERS)


def _files(w):
    return sorted(p.name for p in w.directory.glob("*.thunderlab.json"))


def test_every_compile_writes_a_record_that_loads(writing):
    w = writing()
    f = thunderlab.jit(lambda x: x.sin() * 2)
    g = thunderlab.jit(torch.nn.Linear(3, 2))
    f(torch.randn(4))
    f(torch.randn(5, 2))  # a new input signature: a second compile
    g(torch.randn(2, 3)).sum().backward()
    assert w.flush(60)
    names = _files(w)
    assert len(names) == 3 and w.dropped == 0 and not w.errors
    assert all(f"-p{os.getpid()}-" in n for n in names) and any("Linear" in n for n in names)
    loaded = [thunderlab.load(p) for p in sorted(w.directory.glob("*.thunderlab.json"))]
    live = thunderlab.records()
    assert sorted(r.table() for r in loaded) == sorted(r.table() for r in live)
    assert {r.payload().to_dict()["name"] for r in loaded} == {r.name for r in live}


def test_the_limits_bound_what_is_written(writing, capfd):
    w = writing(max_files=1)
    f = thunderlab.jit(lambda x: x.cos())
    for n in (2, 3, 4):
        f(torch.randn(n, n))
    assert w.flush(60)
    assert len(_files(w)) == 1 and w.dropped == 2
    err = capfd.readouterr().err
    assert err.count("later records are not written") == 1 and "THUNDERLAB_RECORDS_MAX_FILES" in err
    for bad in ({"max_files": 0}, {"max_mb": -1}, {"max_files": 1.5}):
        with pytest.raises(ValueError, match="record_to: max_"):
            thunderlab.record_to(w.directory, **bad)


def test_a_size_limit_below_one_record_writes_none(writing):
    w = writing(max_mb=0.001)
    thunderlab.jit(torch.nn.Linear(8, 8))(torch.randn(2, 8))
    assert w.flush(60)
    assert _files(w) == [] and w.dropped == 1 and w.bytes == 0


def test_a_slow_disk_never_holds_up_the_call(writing, monkeypatch):
    gate = threading.Event()
    real_write = recorder.write_payload
    monkeypatch.setattr(recorder, "write_payload", lambda payload, path: (gate.wait(60), real_write(payload, path))[1])
    w = writing()
    j = thunderlab.jit(lambda x: x * 2)
    j(torch.randn(2))
    rec = thunderlab.last_record(j)
    for _ in range(recorder.QUEUE_SIZE + 50):  # the writer is stuck on the first: the queue fills, then drops
        w(rec)
    # checked while the writer is still stuck: a call that waited for room would not have returned by now
    assert w.dropped >= 49, w.dropped
    gate.set()
    assert w.flush(120)


def test_the_rank_is_in_the_name_under_torch_distributed(writing, tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        w = writing()
        thunderlab.jit(lambda x: x + 1)(torch.randn(3))
        assert w.flush(60)
    finally:
        dist.destroy_process_group()
    (name,) = _files(w)
    assert "-rank0-" in name


def test_the_environment_variable_records_a_whole_job(tmp_path):
    script = textwrap.dedent("""
        import torch, thunderlab
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        step = thunderlab.jit(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            step(torch.randn(16, 4)).pow(2).mean().backward()
            opt.step()
    """)
    out = tmp_path / "job"
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "THUNDERLAB_RECORDS": str(out)}
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    files = sorted(out.glob("*.thunderlab.json"))  # written before the process ended, with no flush asked for
    assert len(files) == 1
    rec = thunderlab.load(files[0])
    assert rec.name == "Sequential" and rec.error is None and "backward" in rec.steps[-1].saved


def test_bad_limits_in_the_environment_are_named(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "THUNDERLAB_RECORDS": str(tmp_path / "x"),
           "THUNDERLAB_RECORDS_MAX_FILES": "many"}
    r = subprocess.run([sys.executable, "-c", "import thunderlab"], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode != 0 and "THUNDERLAB_RECORDS_MAX_FILES='many': expected a whole number" in r.stderr
