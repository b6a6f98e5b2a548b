"""A record is data; its session is the live part, kept by the record's uid for as long as its function lives.

The verbs that need running code say so by name when a record has no session (loaded from a file, or its
function dropped), and say what would make them work; numerical checks and bisection hang off the runner's
observer hook.
"""
import copy
import dataclasses
import gc
import json
from dataclasses import dataclass

import pytest
import torch

import thunderlab
from thunderlab.core.program import Program
from thunderlab.ops import ltorch
from thunderlab.passes import Pass, register_pass, run_pipeline
from thunderlab.passes.runner import observers
from thunderlab.passes.verification import NumericCheck, current_reference
from thunderlab.runtime.session import Session, session_of, sessions

PIPELINE = "dce,cse,claim{executors=inductor+torch},fuse,del"


def f(x, w):
    return torch.tanh(x @ w).relu() * 2


def _plain(v) -> bool:
    if v is None or isinstance(v, (bool, int, float, str)):
        return True
    if isinstance(v, dict):
        return all(isinstance(k, str) and _plain(e) for k, e in v.items())
    if isinstance(v, (list, tuple)):
        return all(_plain(e) for e in v)
    return False


@pytest.fixture
def compiled():
    j = thunderlab.jit(f, pipeline=PIPELINE, verify=True)
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    j(x, w)
    rec = thunderlab.last_record(j)
    assert thunderlab.session(rec).wait(120)
    j(x, w)
    return j, rec, (x, w)


def test_a_records_fields_are_plain_data(compiled):
    _, rec, _ = compiled
    rec = thunderlab.records()[-1]  # handed out again: its regions' snapshot is fresh
    data = {f.name: getattr(rec, f.name) for f in dataclasses.fields(rec) if f.name != "steps"}
    assert all(_plain(v) for v in data.values()), {k: type(v) for k, v in data.items() if not _plain(v)}
    assert json.loads(json.dumps(data)) == data  # JSON holds every one of them as it is
    (name,) = rec.regions
    assert rec.regions[name]["version"] == "inductor" and rec.regions[name]["code"]
    for s in rec.steps:  # a step: its program (core IR) and the facts about it
        fields = {f.name: getattr(s, f.name) for f in dataclasses.fields(s)
                  if f.name not in ("program", "verification", "pass_type", "notes")}
        assert all(_plain(v) for v in fields.values()), s.spec
        assert _plain(s.notes.to_json()), s.spec  # typed notes, plain data underneath
    # nothing in a record is a tensor or a running thing: a deep copy copies programs and facts only
    twin = copy.deepcopy(rec)
    assert twin.table() == rec.table() and twin.steps[-1].python() == rec.steps[-1].python()
    assert not any(isinstance(v, torch.Tensor) or callable(v) for v in data.values())


def test_the_session_is_found_by_uid_and_holds_the_live_parts(compiled):
    j, rec, (x, w) = compiled
    live = thunderlab.session(rec)
    assert isinstance(live, Session) and live.uid == rec.uid and session_of(rec) is live
    assert live.example_inputs[0] is x and live.example_inputs[1] is w  # verify=True holds them
    assert live.runner is not None and live.eager is not None and live.reference is not None
    (runner,) = live.regions.values()
    assert runner.version == "inductor"
    assert set(live.timings()) == set(rec.regions) and rec.timings()[runner.name]["running"] == "inductor"
    new = thunderlab.rerun(rec, "dce,cse,claim{executors=torch},del")
    again = thunderlab.session(new)
    assert again is not live and again.uid == new.uid and again.example_inputs[0] is x
    assert all(s.verification.max_error is not None for s in new.steps[new.reused + 1:])  # re-runs verify too


def test_a_session_goes_with_its_record():
    j = thunderlab.jit(f, pipeline="dce,claim,del")
    j(torch.randn(2, 8), torch.randn(8, 8))
    rec = thunderlab.last_record(j)
    uid = rec.uid
    assert any(s.uid == uid for s in sessions())
    del rec, j
    thunderlab.clear_records()
    gc.collect()
    assert not any(s.uid == uid for s in sessions())


def test_the_verbs_on_a_dropped_functions_record_say_what_they_need():
    j = thunderlab.jit(f, pipeline="dce,cse,claim{executors=inductor+torch},fuse,del", verify=True)
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    j(x, w)
    rec = thunderlab.last_record(j)
    table = rec.table()
    del j
    gc.collect()
    assert session_of(rec) is None and rec.table() == table
    with pytest.raises(thunderlab.NotLive, match=r"^bisect needs the inputs .*was dropped.*"
                                                 r"pass the inputs to check on: thunderlab\.bisect\(record, inputs\)"):
        thunderlab.bisect(rec)
    assert thunderlab.bisect(rec, (x, w)) is None  # given inputs, it needs nothing live
    with pytest.raises(thunderlab.NotLive, match=r"^profile needs the inputs it was compiled for .*thunderlab\.jit"):
        from thunderlab.runtime.profile import profile_record

        profile_record(rec)
    new = thunderlab.rerun(rec, "dce,claim,del")  # the passes need only the captured program
    assert new.error is None and new.steps[-1].program is not None
    c = thunderlab.compare(rec, new)
    assert c.seconds is None and "no live session" in c.note
    assert "call time not timed" in str(c)


def test_the_verbs_on_a_loaded_record_say_what_they_need(compiled, tmp_path):
    _, rec, _ = compiled
    loaded = thunderlab.load(thunderlab.save(rec, tmp_path / "f.thunderlab.json"))
    assert loaded.timings() == json.loads(json.dumps(rec.timings()))
    for call, verb in ((lambda: thunderlab.session(loaded), "thunderlab.session"),
                       (lambda: thunderlab.bisect(loaded), "bisect")):
        with pytest.raises(thunderlab.NotLive, match=rf"^{verb} needs .* loaded from .*f\.thunderlab\.json"):
            call()
    c = thunderlab.compare(rec, loaded)
    assert c.seconds is None and "loaded from" in c.note


def test_numerics_hang_off_the_observer_hook():
    j = thunderlab.jit(f, pipeline="dce", keep_inputs=True)
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    j(x, w)
    rec = thunderlab.last_record(j)
    captured, inputs = rec.captured, thunderlab.session(rec).example_inputs
    # the runner alone checks structure: every step ok, no numbers compared
    steps, _, error = run_pipeline(captured, "dce,cse,claim,del")
    assert error is None and all(s.verification.ok and s.verification.max_error is None for s in steps)
    # a NumericCheck hung on the hook compares each step with eager; an observer after it sees each verdict
    check = NumericCheck(inputs, current_reference(captured, inputs))
    seen = []
    steps, _, _ = run_pipeline(captured, "dce,cse,claim,del",
                               observer=observers(check, lambda s: seen.append((s.index, s.verification.max_error))))
    assert [i for i, _ in seen] == [1, 2, 3, 4] and all(e is not None for _, e in seen)
    assert check.failed is None and set(check.verdicts) == {1, 2, 3, 4}
    assert isinstance(captured, Program)


@register_pass
@dataclass(frozen=True)
class MulToSub(Pass):
    """Turns every multiplication into a subtraction: wrong numbers, valid program (for tests)."""

    name = "test-session-mul-to-sub"

    def __call__(self, program):
        return program.map(lambda t: t.derive(bound_symbols=[
            b.replace(sym=ltorch.sub) if b.sym is ltorch.mul else b for b in t.bound_symbols]))


def test_bisection_replays_the_steps_through_the_same_hook():
    def g(x, y):
        return x * y + 1

    j = thunderlab.jit(g, pipeline="dce,cse,claim,test-session-mul-to-sub,claim,del")
    x, y = torch.randn(5), torch.randn(5)
    j(x, y)
    rec = thunderlab.last_record(j)
    seen = []
    found = thunderlab.bisect(rec, observer=lambda s: seen.append(s.index))
    assert found.step == 4 and found.spec == "test-session-mul-to-sub"
    assert seen == [0, 1, 2, 3, 4]  # every step in order, up to the first that fails
    assert all(s.verification.max_error is None for s in rec.steps)  # bisection reads the record, never writes it
