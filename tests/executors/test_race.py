"""The executor race per region: once a region's kernels are compiled, its next calls take turns between torch
and each fusion executor's kernel, and the version with the fastest call is kept (torch included).

Which version wins is forced here by the clock the race reads: each version is wrapped so that a call of it
advances a test clock by a cost the test chooses, and the race reads that clock. Every call's result is
checked against eager PyTorch, whichever version ran it.
"""
import copy
import json
import time

import pytest
import torch

import thunderlab
from thunderlab.executors.base import EXECUTORS, RunOptions, register_executor
from thunderlab.executors.fusion import FusionExecutor
from thunderlab.executors.inductor import InductorExecutor
from thunderlab.executors.region import CLOSE_ROUNDS, RACE_CALLS, RACE_CALLS_MOST, Race, RegionRunner
from thunderlab.inspect.serialize import RecordPayload, validate
from thunderlab.jupyter.comm import _timings


class RaceFake(FusionExecutor):
    """A second fusion executor for tests: takes what Inductor takes; its 'kernel' is the region's torch program."""

    name = "racefake"

    def __init__(self):
        self.compiled: list[str] = []
        self.fail = False

    def can_execute(self, bsym):
        return InductorExecutor().can_execute(bsym)

    def implementation(self, sym):
        return sym.impl

    def compile(self, region, args):
        if self.fail:
            raise RuntimeError("racefake cannot compile this region")
        self.compiled.append(region.name)
        return region.callable(), [f"# racefake kernel for {region.name}"]


@pytest.fixture
def fake():
    ex = RaceFake()
    register_executor(ex)
    try:
        yield ex
    finally:
        EXECUTORS.pop("racefake", None)


class Clock:
    """The race's clock in tests: it moves only when a wrapped version runs, by that version's cost."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def costing(self, fn, seconds: float):
        def run(*args):
            self.now += seconds
            return fn(*args)

        return run


def f(x, w):
    return torch.tanh(torch.sin(x) * 2 + 1) @ w + torch.exp(-x).sum()


RACED = "dce,cse,claim{executors=inductor+racefake+torch},fuse,del"


def _inputs(i: int):
    g = torch.Generator().manual_seed(i)
    return torch.randn(8, 8, generator=g), torch.randn(8, 8, generator=g)


def _compiled(pipeline=RACED, **options):
    j = thunderlab.jit(f, pipeline=pipeline, **options)
    x, w = _inputs(0)
    torch.testing.assert_close(j(x, w), f(x, w))
    rec = thunderlab.last_record(j)
    live = thunderlab.session(rec)
    assert live.wait(300), {n: r.error for n, r in live.regions.items()}
    return j, rec, live


def _calls(j, n: int, first: int = 1):
    """``n`` calls on fresh inputs each (a region's inputs differ per call), each checked against eager."""
    for i in range(first, first + n):
        x, w = _inputs(i)
        torch.testing.assert_close(j(x, w), f(x, w))


@pytest.mark.parametrize("winner", ["torch", "inductor", "racefake"])
def test_the_fastest_version_is_kept_and_every_call_equals_eager(fake, winner):
    j, rec, live = _compiled()
    assert live.regions and fake.compiled, "racefake takes what inductor takes: it is every region's rival"
    clock = Clock()
    for r in live.regions.values():
        assert r.version == "inductor" and set(r.versions) == {"torch", "inductor", "racefake"}
        r.clock = clock
        r.versions = {v: clock.costing(fn, 0.001 if v == winner else 0.005) for v, fn in r.versions.items()}
    _calls(j, 3 * (RACE_CALLS + 1))  # one warm-up and RACE_CALLS timed calls per version
    for _name, r in live.regions.items():
        race = r.race.summary()
        assert race["state"] == "done" and race["winner"] == winner and r.version == winner, race
        assert race["versions"] == ["inductor", "torch", "racefake"]
        assert all(t["count"] == RACE_CALLS for t in race["times"].values())
        assert race["why"].startswith(f"{winner} 1 ms vs ") and race["why"].endswith(
            "back to torch" if winner == "torch" else f"kept {winner}")
        assert set(r.versions) == {"torch", winner}  # the losing kernels are let go
        # the code shown is the kernel that runs (the owner's when torch won)
        assert r.source == r.sources["racefake" if winner == "racefake" else "inductor"]
        assert r.history[-1][1] == winner
    _calls(j, 4, first=100)  # the winner runs from now on


def test_a_kernel_that_loses_goes_back_to_torch():
    j, rec, live = _compiled("dce,cse,claim{executors=inductor+torch},fuse,del")
    for r in live.regions.values():  # the kernel made slow for real: the race times calls with perf_counter
        slow = r.versions["inductor"]
        r.versions["inductor"] = lambda *a, slow=slow: (time.sleep(0.05), slow(*a))[1]
    _calls(j, 2 * (RACE_CALLS + 1))
    for r in live.regions.values():  # many times slower than torch: more likely held up, so it races again
        assert r.race.winner is None and r.version == "inductor" and len(r.race.earlier) == 1, r.race.summary()
        assert "(again: torch " in r.race.summary()["why"]
    _calls(j, 2 * 2 * (RACE_CALLS + 1), first=20)  # twice more, as slow each time: back to torch
    for r in live.regions.values():
        assert r.race.winner == "torch" and r.version == "torch", r.race.summary()
        assert [v for _, v in r.history] == ["torch", "inductor", "torch"]
        assert "back to torch (raced 3 times" in r.race.why
    _calls(j, 3, first=50)


def test_a_kernel_held_up_in_one_round_keeps_its_region_once_it_runs_at_its_speed():
    """Its threads spinning while another process has the core, a kernel can time many times torch's for a whole
    round; the race runs again before sending the region back to torch, and keeps the kernel if it wins then."""
    race = Race(["inductor", "torch"])
    for _ in range(RACE_CALLS):
        race.add("inductor", 90.8e-3)
        race.add("torch", 1.4e-3)
    assert race.decide() == "torch" and race.suspect()
    race.again()
    assert not race.done and race.next() == ("inductor", False)  # from a warm-up round
    for _ in range(RACE_CALLS):
        race.add("inductor", 0.29e-3)
        race.add("torch", 1.4e-3)
    assert race.decide() == "inductor" and not race.suspect()
    assert race.why.startswith("inductor 0.29 ms vs torch 1.4 ms")
    assert "before: torch 1.4 ms vs inductor 90.8 ms" in race.why
    close = Race(["inductor", "torch"])  # slower, but within a few times torch: a verdict at once
    for _ in range(RACE_CALLS):
        close.add("inductor", 2e-3)
        close.add("torch", 1e-3)
    assert close.decide() == "torch" and not close.suspect()


def test_race_false_keeps_the_kernel_and_compiles_no_rival(fake):
    j, rec, live = _compiled(race=False)
    assert not fake.compiled
    for r in live.regions.values():
        assert set(r.versions) == {"torch", "inductor"} and r.race is None
        r.versions["inductor"] = lambda *a, slow=r.versions["inductor"]: (time.sleep(0.01), slow(*a))[1]
    _calls(j, 12)
    rec = thunderlab.last_record(j)
    for name, r in live.regions.items():
        assert r.version == "inductor" and [v for _, v in r.history] == ["torch", "inductor"]
        assert "race" not in rec.regions[name] and rec.timings()[name]["race"] is None


def test_calls_take_turns_and_none_runs_twice():
    ran = []

    def version(name):
        def run(x):
            ran.append((name, float(x)))
            return x + 1

        return run

    clock = Clock()
    r = RegionRunner("r", "fused", version("torch"), lambda args: (version("fused"), ["code"]), tiered=False,
                     race=True, clock=clock)
    rounds = RACE_CALLS_MOST  # a warm-up round; the two tie, so the race is timed longer
    outs = [r(torch.tensor(float(i))) for i in range(2 * rounds + 3)]
    assert [float(o) for o in outs] == [i + 1 for i in range(len(outs))]  # each call its own result
    assert [x for _, x in ran] == [float(i) for i in range(len(outs))]  # every input ran once, in order
    during = [v for v, _ in ran[:2 * rounds]]
    assert during == ["fused", "torch"] * rounds
    assert r.race.summary()["state"] == "done"


def test_a_rival_that_fails_to_compile_is_left_out_with_its_reason(fake):
    fake.fail = True
    j, rec, live = _compiled()
    _calls(j, 2 * (RACE_CALLS + 1))
    for r in live.regions.values():
        race = r.race.summary()
        assert race["versions"] == ["inductor", "torch"] and race["state"] == "done"
        assert "racefake cannot compile" in race["left_out"]["racefake"] and "not raced: racefake" in race["why"]


def test_a_region_given_a_reason_not_to_race_is_not_raced():
    r = RegionRunner("r", "fused", lambda x: x + 1, lambda args: (lambda x: x + 1, []), tiered=False, race=True,
                     race_off="not raced: dropout draws random numbers, which each version draws its own way")
    for i in range(12):
        assert float(r(torch.tensor(float(i)))) == i + 1
    assert r.race is None and r.version == "fused"
    s = r.summary()["race"]
    assert s["state"] == "off" and "dropout draws random numbers" in s["why"]


def test_the_record_payload_and_saved_file_carry_the_race(fake, tmp_path):
    j, rec, live = _compiled()
    clock = Clock()
    for r in live.regions.values():
        r.clock = clock
        r.versions = {v: clock.costing(fn, {"torch": 0.003, "inductor": 0.002, "racefake": 0.004}[v])
                      for v, fn in r.versions.items()}
    _calls(j, 3 * (RACE_CALLS + 1))
    rec = thunderlab.last_record(j)
    for name, region in rec.regions.items():
        race = region["race"]
        assert race["winner"] == "inductor" and race["state"] == "done"
        assert race["why"] == "inductor 2 ms vs torch 3 ms vs racefake 4 ms, fastest of 4 calls each: kept inductor"
        assert rec.timings()[name]["race"] == race
    payload = RecordPayload(rec).to_dict()
    validate(payload)
    assert all(r["race"]["winner"] == "inductor" for r in payload["regions"].values())
    json.dumps(payload, allow_nan=False)
    # the sidebar's timings event carries it too
    event = _timings(rec.uid, rec)
    assert all(r["race"]["winner"] == "inductor" for r in event["regions"].values())
    path = thunderlab.save(rec, tmp_path / "raced.thunderlab.json")
    loaded = thunderlab.load(path)
    assert {n: r["race"] for n, r in loaded.regions.items()} == {n: r["race"] for n, r in rec.regions.items()}


def test_a_payload_without_race_fields_stays_valid(fake):
    j, rec, live = _compiled(race=False)
    payload = RecordPayload(rec).to_dict()
    assert payload["regions"] and not any("race" in r for r in payload["regions"].values())
    validate(payload)


def test_the_race_while_waiting_and_before_compiling_says_so():
    r = RegionRunner("r", "fused", lambda x: x, lambda args: (lambda x: x, []), tiered=True, race=True)
    race = r.summary()["race"]
    assert race["state"] == "waiting" and "first call" in race["why"], race  # not called yet: nothing compiles
    r.release()


def test_a_race_not_called_for_a_while_is_paused_and_goes_on_at_the_next_call():
    race = Race(["inductor", "torch"], RACE_CALLS)
    for _ in range(4):  # the warm-up round, then one timed call each
        version, counts = race.next()
        if counts:
            race.add(version, 1e-3)
    assert race.summary()["state"] == "racing"
    race.last -= 60  # a minute without a call (calls came a moment apart)
    summary = race.summary()
    assert summary["state"] == "paused", summary
    assert summary["why"].startswith("paused: no call for 60 s, 1 of 4 timed calls each made"), summary["why"]
    race.next()
    assert race.summary()["state"] == "racing"
    # a region called once a minute is not paused after a minute: its usual gap between calls is that long
    slow = Race(["inductor", "torch"], RACE_CALLS)
    slow.started -= 240
    for _ in range(4):
        slow.next()
    slow.last = slow.started + 240 - 60
    assert slow.summary()["state"] == "racing"


def test_a_record_whose_graph_dynamo_compiled_again_shows_its_race_paused(fake, monkeypatch):
    """A function TorchDynamo captures again (a global it reads changed) leaves its first record's race unfinished:
    the record says the race is paused, not that it is racing now."""
    from thunderlab.executors import region
    monkeypatch.setattr(region, "PAUSED_AFTER_S", 0.2)
    j = thunderlab.jit(_scaled, pipeline="dce,cse,claim{executors=racefake+torch},fuse,del")
    x = torch.randn(16, 16)
    _SCALE[0] = 2.0
    torch.testing.assert_close(j(x), _scaled(x))
    first = thunderlab.last_record(j)
    assert thunderlab.session(first).wait(300)
    torch.testing.assert_close(j(x), _scaled(x))  # the race's warm-up call
    _SCALE[0] = 3.0  # the next call's guard fails: a new capture, a new record
    torch.testing.assert_close(j(x), _scaled(x))
    second = thunderlab.last_record(j)
    assert second is not first and thunderlab.session(second).wait(300)
    for _ in range(RACE_CALLS_MOST):
        torch.testing.assert_close(j(x), _scaled(x))
    time.sleep(0.5)
    [old] = [r["race"] for r in _records_regions(j, first)]
    assert old["state"] == "paused" and old["why"].startswith("paused: no call for"), old
    assert all(r["race"]["state"] == "done" for r in _records_regions(j, second))


_SCALE = [2.0]


def _scaled(x):
    return torch.tanh(x * _SCALE[0]) + 1


def _records_regions(j, record):
    assert any(r is record for r in j.records)  # brings its regions' snapshot up to date
    assert record.regions, record
    return list(record.regions.values())


def _step_matches_eager(j, model, eager, x):
    """One training step of the jitted ``model`` and of ``eager`` (its copy): outputs and gradients equal."""
    out, ref = j(x), eager(x)
    torch.testing.assert_close(out, ref)
    out.square().sum().backward()
    ref.square().sum().backward()
    for p, q in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
        p.grad = q.grad = None


def test_training_through_a_race_matches_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                                torch.nn.Linear(32, 4))
    eager = copy.deepcopy(model)
    j = thunderlab.jit(model, pipeline="dce,cse,autodiff,remat,claim{executors=inductor+torch},fuse,del")
    for step in range(2 * RACE_CALLS_MOST + 4):  # real timings: a close race is timed longer
        _step_matches_eager(j, model, eager, torch.randn(8, 16, generator=torch.Generator().manual_seed(step)))
        if step == 0:
            assert thunderlab.session(thunderlab.last_record(j)).wait(300)
    rec = thunderlab.last_record(j)
    assert rec.regions and all(r["race"]["state"] == "done" for r in rec.regions.values()), \
        {n: r.get("race") for n, r in rec.regions.items()}


@pytest.mark.parametrize("winner", ["torch", "inductor"])
def test_batch_norm_in_training_races_and_updates_its_statistics_once_a_call(winner):
    # batch norm in training writes its running statistics: each call runs one version, which writes once, so
    # after every call (race calls included) the statistics are eager's, whichever version is made to win
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.Conv2d(8, 4, 1))
    eager = copy.deepcopy(model)
    j = thunderlab.jit(model, pipeline="dce,cse,autodiff,remat,claim{executors=inductor+torch},fuse,del")
    clock = Clock()
    for step in range(2 * (RACE_CALLS + 1) + 3):
        _step_matches_eager(j, model, eager, torch.randn(2, 3, 10, 10, generator=torch.Generator().manual_seed(step)))
        for name, b in model.named_buffers():
            torch.testing.assert_close(b, dict(eager.named_buffers())[name], msg=f"{name} after call {step}")
        if step == 0:
            live = thunderlab.session(thunderlab.last_record(j))
            assert live.wait(300)
            for r in live.regions.values():
                r.clock = clock
                r.versions = {v: clock.costing(fn, 0.001 if v == winner else 0.005) for v, fn in r.versions.items()}
    assert any("batch_norm" in str(r.source) for r in live.regions.values()), "a region holds the batch norm"
    for r in live.regions.values():
        race = r.race.summary()
        assert race["state"] == "done" and race["winner"] == winner, race


def test_batch_norm_in_eval_writes_nothing_so_its_region_races():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU()).eval()
    j = thunderlab.jit(model, pipeline="dce,cse,claim{executors=inductor+torch},fuse,del")
    x = torch.randn(2, 3, 10, 10)
    with torch.no_grad():
        torch.testing.assert_close(j(x), model(x))
        live = thunderlab.session(thunderlab.last_record(j))
        assert live.wait(300)
        for _ in range(2 * RACE_CALLS_MOST):  # real timings: a close race is timed longer
            torch.testing.assert_close(j(x), model(x))
    (r,) = live.regions.values()
    assert r.race is not None and r.race.summary()["state"] == "done", r.summary()["race"]


def test_race_must_be_a_bool():
    with pytest.raises(TypeError, match="race must be True .* or False"):
        thunderlab.jit(f, race="fast")


def test_run_options_default_to_racing():
    assert RunOptions().race is True and RunOptions().racers == ()
    race = Race(["k", "torch"], calls=2)
    assert [race.next()[0] for _ in range(6)] == ["k", "torch"] * 3


class _Event:
    """A CUDA event's two calls the race makes, for CPU tests: whether it completed, and the time since another."""

    def __init__(self, at_ms: float, done: bool = True):
        self.at_ms, self.done = at_ms, done

    def query(self) -> bool:
        return self.done

    def elapsed_time(self, end) -> float:
        return end.at_ms - self.at_ms


def test_device_times_are_read_once_their_events_complete():
    # on a GPU a race call records two events and returns; their time is read at a later call, once complete
    r = RegionRunner("r", "fused", lambda x: x, lambda args: (lambda x: x, []), tiered=False, race=True)
    r(torch.zeros(1))
    pending = _Event(0.0), _Event(7.0, done=False)
    r._pending_events = [("fused", _Event(0.0), _Event(2.0)), ("torch", *pending)]
    r._collect_events()
    assert r.race.samples == {"fused": [0.002], "torch": []}
    assert r._pending_events == [("torch", *pending)]  # not complete yet: kept, nobody waits for it
    pending[1].done = True
    r._collect_events()
    assert r.race.samples["torch"] == [0.007] and r._pending_events == []


class TakesAll(RaceFake):
    """A fusion executor for tests that takes every call, random ones included."""

    name = "racefake_all"

    def can_execute(self, bsym):
        return True, ""


def test_a_region_that_draws_random_numbers_is_not_raced():
    ex = register_executor(TakesAll())
    try:
        def g(x):
            return torch.nn.functional.dropout(torch.sin(x), p=0.5, training=True) * 2

        j = thunderlab.jit(g, pipeline="dce,cse,claim{executors=racefake_all+torch},fuse,del", tiered=False)
        x = torch.randn(64)
        torch.manual_seed(1)
        out = j(x)
        torch.manual_seed(1)
        torch.testing.assert_close(out, g(x))
        live = thunderlab.session(thunderlab.last_record(j))
        (r,) = live.regions.values()
        for _ in range(12):
            j(x)
        assert r.race is None and r.version == "racefake_all" and ex.compiled
        race = r.summary()["race"]
        assert race["state"] == "off" and "draws random numbers" in race["why"], race
    finally:
        EXECUTORS.pop("racefake_all", None)


@pytest.mark.cuda
@pytest.mark.nvfuser
@pytest.mark.parametrize("winner", ["torch", "inductor", "nvfuser"])
def test_on_a_gpu_each_real_executor_can_win_and_every_call_equals_eager(winner):
    """nvFuser, Inductor and torch raced on CUDA tensors: whichever is made fastest is kept, and every call of every
    version (nvFuser's and Inductor's generated kernels included) equals eager's result."""
    pytest.importorskip("nvfuser_direct")

    def cuda_inputs(i: int):
        x, w = _inputs(i)
        return x.cuda(), w.cuda()

    j = thunderlab.jit(f, pipeline="dce,cse,claim{executors=nvfuser+inductor+torch},fuse,del")
    x, w = cuda_inputs(0)
    torch.testing.assert_close(j(x, w), f(x, w), rtol=1e-4, atol=1e-4)
    live = thunderlab.session(thunderlab.last_record(j))
    assert live.wait(300), {n: r.error for n, r in live.regions.items()}
    owners = {r.version for r in live.regions.values()}
    assert "nvfuser" in owners, f"nvFuser claims f's elementwise ops on CUDA; the regions run {owners}"
    clock = Clock()
    raced = [r for r in live.regions.values() if winner in r.versions and len(r.versions) > 1]
    assert raced, {n: sorted(r.versions) for n, r in live.regions.items()}
    for r in raced:
        r.clock = clock
        r.versions = {v: clock.costing(fn, 0.001 if v == winner else 0.005) for v, fn in r.versions.items()}
    for i in range(1, 3 * (RACE_CALLS + 1) + 5):
        x, w = cuda_inputs(i)
        torch.testing.assert_close(j(x, w), f(x, w), rtol=1e-4, atol=1e-4)
    for r in raced:
        race = r.race.summary()
        assert race["state"] == "done" and race["winner"] == winner and r.version == winner, race


def test_a_close_verdict_is_timed_longer_before_it_is_made():
    """Versions whose fastest calls are within CLOSE of each other are timed RACE_CALLS more calls each (the calls so
    far kept), up to CLOSE_ROUNDS times: a kernel that a slow start put behind torch wins once it runs at its speed."""
    race = Race(["inductor", "torch"])

    def calls(seconds):  # as a region drives it: each call asks whose turn it is and whether it is timed
        while not race.done:
            version, timed = race.next()
            if timed:
                race.add(version, seconds[version])

    calls({"inductor": 5.5e-3, "torch": 5.25e-3})
    assert race.decide() == "torch" and not race.suspect()
    assert race.close()
    race.longer()
    assert not race.done and race.winner is None  # timed longer, from where it was
    assert race.next() == ("inductor", True)  # no second warm-up
    race.add("inductor", 4.75e-3)
    calls({"inductor": 4.75e-3, "torch": 5.3e-3})
    assert race.decide() == "inductor" and not race.close()  # 4.75 against 5.25: not close
    assert race.why == ("inductor 4.75 ms vs torch 5.25 ms, fastest of 8 calls each: kept inductor "
                        "(within 10% after 4 calls: timed longer)")
    tied = Race(["inductor", "torch"])  # a tie stays a tie: decided after CLOSE_ROUNDS more rounds, by the order
    for extra in range(CLOSE_ROUNDS + 1):
        for _ in range(RACE_CALLS):
            tied.add("inductor", 1e-3)
            tied.add("torch", 1e-3)
        assert tied.decide() == "inductor"
        assert tied.close() is (extra < CLOSE_ROUNDS)
        if extra < CLOSE_ROUNDS:
            tied.longer()
    apart = Race(["inductor", "torch"])  # more than CLOSE apart: a verdict at once
    for _ in range(RACE_CALLS):
        apart.add("inductor", 1e-3)
        apart.add("torch", 1.2e-3)
    assert apart.decide() == "inductor" and not apart.close()


def test_a_version_is_judged_by_its_fastest_call_so_delays_on_some_calls_do_not_decide():
    """Calls that something else delayed (a thread holding the GIL, another process) take longer, never shorter:
    a kernel whose every other call was held up still wins against a slower torch version."""
    race = Race(["inductor", "torch"])
    for inductor, torch_s in ((4.6e-3, 0.8e-3), (0.29e-3, 0.76e-3), (4.6e-3, 0.9e-3), (0.29e-3, 0.78e-3)):
        race.add("inductor", inductor)
        race.add("torch", torch_s)
    assert race.done and race.decide() == "inductor"
    assert race.why == "inductor 0.29 ms vs torch 0.76 ms, fastest of 4 calls each: kept inductor"
    slow = Race(["inductor", "torch"])  # a kernel slower on every call still goes back to torch
    for _ in range(4):
        slow.add("inductor", 2e-3)
        slow.add("torch", 1e-3)
    assert slow.decide() == "torch" and slow.why.endswith("back to torch")


def test_calls_that_ran_torch_while_the_kernel_compiles_for_their_strides_are_not_timed(fake):
    """A worker-compiled kernel called with strides it was not compiled for runs torch while the worker compiles it
    for them (``fallbacks``, ``compiling()``): those calls timed no kernel, so the race leaves them out."""
    j, rec, live = _compiled()
    clock = Clock()
    left = {"n": 3}  # the kernel's first three race calls run torch while it compiles

    def kernel(inner):
        def run(*args):
            if left["n"]:
                left["n"] -= 1
                run.fallbacks += 1
                clock.now += 0.009
            else:
                clock.now += 0.001
            return inner(*args)

        run.fallbacks = 0
        run.compiling = lambda: left["n"] > 0
        return run

    (r,) = [r for r in live.regions.values()][:1]
    r.clock = clock
    r.versions = {v: kernel(fn) if v == "inductor" else clock.costing(fn, 0.002) for v, fn in r.versions.items()}
    _calls(j, 3 * (RACE_CALLS + 1) + 3 * 3)
    race = r.race.summary()
    assert race["state"] == "done" and race["winner"] == "inductor", race
    assert race["times"]["inductor"]["samples_s"] == pytest.approx([0.001] * RACE_CALLS), race["times"]["inductor"]
