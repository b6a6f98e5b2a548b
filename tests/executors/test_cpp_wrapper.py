"""A tiered CPU region's second kernel: Inductor's module with its C++ wrapper, raced against the first (README,
"Fusion, timings and the tiered start").

Inductor writes each region's module with Python lines that call its kernels and library functions one by one;
with ``cpp_wrapper`` the same calls are one compiled C++ function. A second worker process, at the lowest CPU
priority, compiles that second module after the region's first kernel, and it joins the region's race as the
version ``inductor-cpp``. Whichever version
wins, every call gives eager PyTorch's values.
"""
from __future__ import annotations

import copy
import json
import os
import threading
import time

import pytest
import torch

import thunderlab
from thunderlab.executors import compile_process, inductor
from thunderlab.executors.base import get_executor
from thunderlab.executors.region import RACE_CALLS

from .test_race import Clock, _inputs, f
from .test_worker_answers import in_new_processes

pytestmark = pytest.mark.skipif(not get_executor("inductor").available()[0], reason="no C++ compiler for Inductor")
PIPELINE = "dce,cse,claim{executors=inductor+torch},fuse,del"
VERSIONS = {"torch", "inductor", "inductor-cpp"}


@pytest.fixture
def cpp_wrapper(monkeypatch):
    monkeypatch.setenv("THUNDERLAB_CPP_WRAPPER", "1")


def _live(j):
    live = thunderlab.session(thunderlab.last_record(j))
    assert live.wait(600), {n: r.error for n, r in live.regions.items()}
    return live


def _force(live, winner: str):
    """Every region's versions made to cost 1 ms (``winner``) or 5 ms on the race's clock."""
    clock = Clock()
    for r in live.regions.values():
        assert set(r.versions) == VERSIONS, (r.versions, r.race and r.race.summary())
        r.clock = clock
        r.versions = {v: clock.costing(fn, 0.001 if v == winner else 0.005) for v, fn in r.versions.items()}


@pytest.mark.parametrize("winner", ["inductor-cpp", "inductor", "torch"])
def test_each_version_can_win_the_race_and_every_call_equals_eager(cpp_wrapper, winner):
    j = thunderlab.jit(f, pipeline=PIPELINE)
    x, w = _inputs(0)
    torch.testing.assert_close(j(x, w), f(x, w))
    live = _live(j)
    assert live.regions
    for r in live.regions.values():
        assert r.sources["inductor-cpp"] and "CppWrapperCodeCache" in "".join(r.sources["inductor-cpp"])
    _force(live, winner)
    for i in range(1, 1 + 3 * (RACE_CALLS + 1) + 4):
        x, w = _inputs(i)
        torch.testing.assert_close(j(x, w), f(x, w))
    for r in live.regions.values():
        race = r.race.summary()
        assert race["state"] == "done" and race["winner"] == winner and r.version == winner, race
        assert race["versions"] == ["inductor", "torch", "inductor-cpp"]
    rec = thunderlab.last_record(j)
    assert all(reg["race"]["winner"] == winner for reg in rec.regions.values())


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 16)
        self.ln = torch.nn.LayerNorm(16)
        self.fc = torch.nn.Linear(16, 50)

    def forward(self, idx, targets):
        h = torch.nn.functional.gelu(self.ln(self.emb(idx)))
        return torch.nn.functional.cross_entropy(self.fc(h).flatten(0, 1), targets.flatten())


def test_training_with_the_cpp_wrapper_kernels_matches_eager(cpp_wrapper):
    torch.manual_seed(0)
    model = Tiny()
    ref = copy.deepcopy(model)
    opt, ref_opt = (torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (model, ref))
    g = torch.Generator().manual_seed(3)
    batches = [(torch.randint(0, 50, (4, 8), generator=g), torch.randint(0, 50, (4, 8), generator=g))
               for _ in range(3 * (RACE_CALLS + 1) + 6)]
    j = thunderlab.jit(model, pipeline="dce,cse,autodiff,claim{executors=inductor+torch},fuse,del")

    def step(fn, m, o, batch):
        o.zero_grad()
        loss = fn(*batch)
        loss.backward()
        o.step()
        return loss

    for i, batch in enumerate(batches):
        torch.testing.assert_close(step(j, model, opt, batch), step(ref, ref, ref_opt, batch))
        if i == 0:
            live = _live(j)  # the forward's region; the backward's is bound at its first call
        if i == 1:
            for rec in j.records:
                _force(_live_of(rec), "inductor-cpp")
    for rec in j.records:
        for name, r in _live_of(rec).regions.items():
            assert r.version == "inductor-cpp", (name, r.race.summary())
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q)
    assert live.regions


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x, y):
        h = torch.relu(self.bn(self.conv(x))).mean((2, 3))
        return torch.nn.functional.cross_entropy(self.fc(h), y)


def test_a_cnn_trained_on_its_pinned_cpp_wrapper_kernels_matches_eager_running_statistics_included(cpp_wrapper):
    """Batch norm in training writes its running statistics from inside the kernel, an input written in place:
    the C++ wrapper's module writes them as the Python one does, once a call."""
    torch.manual_seed(0)
    model = SmallCNN()
    ref = copy.deepcopy(model)
    opt, ref_opt = (torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, ref))
    g = torch.Generator().manual_seed(5)
    batches = [(torch.randn(4, 3, 8, 8, generator=g), torch.randint(0, 4, (4,), generator=g)) for _ in range(6)]
    j = thunderlab.jit(model, pipeline="dce,cse,autodiff,claim{executors=inductor+torch},fuse,del")
    for i, (x, y) in enumerate(batches):
        if i == 2:  # both regions bound (the backward's at the first step's backward): pin their C++ wrappers
            for rec in j.records:
                for r in _live_of(rec).regions.values():
                    r.pin("inductor-cpp")
        for fn, o in ((j, opt), (ref, ref_opt)):
            o.zero_grad()
            fn(x, y).backward()
            o.step()
    assert {r.version for rec in j.records for r in _live_of(rec).regions.values()} == {"inductor-cpp"}
    for (name, p), q in zip(model.state_dict().items(), ref.state_dict().values()):
        torch.testing.assert_close(p, q, msg=name)


def test_pinning_a_version_the_region_does_not_hold_names_the_versions_it_has():
    j = thunderlab.jit(f, pipeline=PIPELINE)
    j(*_inputs(0))
    (r, *_) = _live(j).regions.values()
    with pytest.raises(ValueError, match=r"no version 'inductor-cpp'; it has \['inductor', 'torch'\]"):
        r.pin("inductor-cpp")
    r.pin("torch")
    assert r.version == "torch" and not r._racing


def _live_of(rec):
    live = thunderlab.session(rec)
    assert live.wait(600), {n: r.error for n, r in live.regions.items()}
    return live


def test_without_the_switch_or_the_fast_paths_or_tiering_there_is_no_cpp_wrapper_kernel(monkeypatch):
    monkeypatch.setenv("THUNDERLAB_CPP_WRAPPER", "0")
    j = thunderlab.jit(f, pipeline=PIPELINE)
    x, w = _inputs(0)
    j(x, w)
    assert all(set(r.versions) == {"torch", "inductor"} for r in _live(j).regions.values())
    monkeypatch.setenv("THUNDERLAB_CPP_WRAPPER", "1")
    j = thunderlab.jit(f, pipeline=PIPELINE, tiered=False)  # compiled before the first call: one kernel only
    j(x, w)
    assert all(set(r.versions) == {"torch", "inductor"} for r in _live(j).regions.values())


class _FakeWorker:
    """A worker process's pipes: each request answered at once, or when ``release`` is set (``held``)."""

    def __init__(self, held: bool, release: threading.Event, asked: list):
        self.held, self.release, self.asked, self.line = held, release, asked, ""
        self.stdin, self.stdout = self, self

    def write(self, line):
        self.line = line

    def flush(self):
        self.asked.append(json.loads(self.line)["name"])

    def readline(self):
        if self.held:
            self.release.wait(10)
        return json.dumps({"ok": True, "imported_at": time.time(), "imported_cpu_s": 0.1, "compile_s": 0.0}) + "\n"


def test_a_cpp_wrapper_is_sent_once_no_first_kernel_is_waiting_and_later_ones_are_answered_while_it_compiles(
        monkeypatch):
    """A region's second kernel must not hold up another region's first: C++-wrapper requests go to a worker of
    their own, sent once the first worker has no request waiting or in hand (its compiles have the cores while it is
    busy), and a first kernel asked for while one compiles is answered meanwhile."""
    release, first_release, asked = threading.Event(), threading.Event(), []

    def start(low_priority=False):
        return _FakeWorker(True, release if low_priority else first_release, asked)

    monkeypatch.setattr(compile_process, "_first", compile_process._Worker())
    monkeypatch.setattr(compile_process, "_second", compile_process._Worker(low_priority=True))
    monkeypatch.setattr(compile_process, "_requests", [])
    monkeypatch.setattr(compile_process, "_start", start)
    busy = threading.Thread(target=compile_process._send, args=({"name": "busy"},))
    busy.start()
    while asked != ["busy"]:
        time.sleep(0.001)
    slow = threading.Thread(target=compile_process._send, args=({"name": "second", "cpp_wrapper": True},))
    slow.start()
    time.sleep(0.2)
    assert asked == ["busy"]  # not sent while the first worker compiles
    first_release.set()
    busy.join(10)
    try:
        while asked != ["busy", "second"]:
            time.sleep(0.001)
        assert compile_process._send({"name": "first"})["ok"]  # answered while the C++ wrapper still compiles
        assert slow.is_alive()
        during = compile_process.timeline()
    finally:
        release.set()
        slow.join(10)
    assert [(q["region"], q["cpp_wrapper"], q["ok"]) for q in during["requests"]] == [
        ("busy", False, True), ("second", True, False), ("first", False, True)]  # "second" unanswered yet
    tl = compile_process.timeline()
    assert tl["cpp_worker"] is not None and tl["cpp_worker"]["spawned_at"] <= tl["requests"][1]["sent_at"]
    assert all(q["asked_at"] <= q["sent_at"] for q in tl["requests"])
    assert tl["requests"][1]["sent_at"] >= tl["requests"][0]["answered_at"]
    assert tl["requests"][1]["ok"]  # and answered once released


def test_a_call_in_strides_the_module_was_not_compiled_for_runs_another_version_and_any_other_error_is_raised():
    """The C++ wrapper checks its inputs' sizes and strides as the Python one does, with a RuntimeError that says
    what it expected: such a call runs torch, or the region's first module where it is given (and the worker
    compiles the region for those strides); any other error is the module's own and is raised."""
    from thunderlab.core.trace import Trace

    def wrong_strides(*args):
        raise RuntimeError("expected size 4==4, stride 1==8 at dim=0\nError in op: input")

    def broken(*args):
        raise RuntimeError("something else")

    region = Trace("inductor0")
    run = inductor._loaded(region, wrong_strides, cpp_wrapper=True)
    run.layouts[inductor._layout(())] = None  # nothing is compiled for these strides: torch runs the call
    assert run() is None and run.fallbacks == 1  # the empty region, run by torch, returns nothing
    # given the region's first module, such a call runs that instead of torch (and is still not timed by a race)
    run = inductor._loaded(region, wrong_strides, cpp_wrapper=True, fallback=lambda *args: "first module")
    run.layouts[inductor._layout(())] = None
    assert run() == "first module" and run.fallbacks == 1
    with pytest.raises(RuntimeError, match="something else"):
        inductor._loaded(region, broken, cpp_wrapper=True)()
    assert inductor._missed(AssertionError(), cpp_wrapper=False)
    assert not inductor._missed(RuntimeError("expected size 4==4"), cpp_wrapper=False)


PROGRAM = """
import json, sys, torch, thunderlab
from thunderlab.executors import compile_process
from tests.executors.test_race import f, _inputs

jfn = thunderlab.jit(f, pipeline="dce,cse,claim{executors=inductor+torch},fuse,del")
x, w = _inputs(0)
got = [jfn(x, w)]
live = thunderlab.session(thunderlab.last_record(jfn))
assert live.wait(600)
light = [{v: getattr(fn, "light", None) for v, fn in r.versions.items() if v != "torch"} for r in live.regions.values()]
got += [jfn(*_inputs(i)) for i in range(1, 20)]
for i, g in enumerate(got):
    torch.testing.assert_close(g, f(*_inputs(i)))
tl = compile_process.timeline()
print(json.dumps({"raced": [sorted(r.race.summary()["versions"]) for r in live.regions.values()],
                  "requests": [[q["region"], q["cpp_wrapper"], q["asked_at"], q["answered_at"]]
                               for q in tl["requests"] if q["ok"]],
                  "recalled": [[q["region"], q["cpp_wrapper"]] for q in tl["recalled"]],
                  "light": light, "compiler_imported": "torch._inductor.select_algorithm" in sys.modules}))
"""


def test_a_later_process_loads_the_cpp_wrapper_module_without_inductors_compiler(tmp_path):
    first, second = in_new_processes(PROGRAM, 2, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
                                     THUNDERLAB_WORKER_ANSWERS="1", THUNDERLAB_CPP_WRAPPER="1")
    assert first["raced"] and all(v == sorted(VERSIONS) for v in first["raced"]), first
    # every region's first kernel, then (asked once that was answered) its C++ wrapper
    answered = {n: at for n, cpp, _, at in first["requests"] if not cpp}
    asked = {n: at for n, cpp, at, _ in first["requests"] if cpp}
    assert set(asked) == set(answered) and all(asked[n] >= answered[n] for n in asked), first
    # the second process asks no worker: both modules of every region are recalled and loaded light
    assert second["requests"] == [], second
    assert sorted(second["recalled"]) == sorted([n, cpp] for n, cpp, _, _ in first["requests"]), second
    assert all(v == sorted(VERSIONS) for v in second["raced"]), second
    assert all(v == {"inductor": True, "inductor-cpp": True} for v in second["light"]), second
    assert not second["compiler_imported"], second


@pytest.mark.skipif(not hasattr(os, "nice"), reason="no process priorities here")
def test_the_cpp_wrappers_worker_runs_at_the_lowest_priority():
    """A C++ wrapper's long compile must not take a core from the caller's kernels or the first worker's compiles:
    its worker process runs at nice 19, which the compiler processes it starts inherit."""
    worker = compile_process._Worker(low_priority=True)
    worker.start()
    try:
        deadline = time.monotonic() + 60
        while os.getpriority(os.PRIO_PROCESS, worker.proc.pid) != 19 and time.monotonic() < deadline:
            assert worker.proc.poll() is None, "the worker exited"
            time.sleep(0.05)
        assert os.getpriority(os.PRIO_PROCESS, worker.proc.pid) == 19
        assert os.getpriority(os.PRIO_PROCESS, 0) != 19  # this process keeps its own
    finally:
        compile_process._stop(worker.proc)
