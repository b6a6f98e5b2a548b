"""The record payload: schema, laziness, bisection of numeric failures, prefix-reusing re-runs, comparison."""
import json
from dataclasses import dataclass

import jsonschema
import pytest
import torch

import thunderlab
from thunderlab.examples import EXAMPLES
from thunderlab.inspect import serialize
from thunderlab.inspect.serialize import RecordPayload, validate
from thunderlab.ops import torch_ops as lt
from thunderlab.passes import Pass, register_pass
from thunderlab.runtime.compiled import CompileError


def f(x, y):
    a = x * y + 1
    b = x * y + 1  # a duplicate for cse
    return (a.sin() + b).relu()


_LIVE = []  # the functions of the records below: a record's session (its inputs, its eager graph) lives with them


def _record(fn, pipeline, *args, verify=False):
    j = thunderlab.jit(fn, pipeline=pipeline, verify=verify)
    j(*args)
    _LIVE.append(j)
    return thunderlab.last_record(j)


@pytest.fixture(scope="module")
def training_record():
    model, inputs = EXAMPLES["nanogpt_block"]()
    j = thunderlab.jit(model, verify=True)
    j(*inputs)
    return thunderlab.last_record(j)


def test_training_payload_validates_and_round_trips(training_record):
    payload = RecordPayload(training_record).to_dict()
    validate(payload)
    assert payload["schema"] == "thunderlab.record/v1"
    assert [s["spec"] for s in payload["steps"]] == ["capture"] + training_record.pipeline.split(",")
    after = next(s for s in payload["steps"] if s["spec"] == "autodiff")
    assert after["spec"] == "autodiff" and set(after["traces"]) == {"forward", "backward"}
    before = payload["steps"][payload["steps"].index(after) - 1]
    assert after["traces"]["backward"]["diff"].startswith(f"--- {before['index']} {before['spec']}")  # new here
    assert all(s["verification"]["ok"] for s in payload["steps"])
    assert json.loads(training_record.to_json()) == json.loads(json.dumps(payload))


def test_payload_of_every_step_matches_the_record(training_record):
    p = RecordPayload(training_record)
    for i, step in enumerate(training_record.steps):
        d = p.step(i)
        fw = d["traces"]["forward"]
        assert fw["program"] == step.python("forward")
        assert fw["stats"]["symbols"] == sum(
            1 for b in step.program.forward.bound_symbols if b.sym.name != "python_del"
        )
        ids = {n["id"] for n in fw["graph"]["nodes"]}
        assert all(e["src"] in ids and e["dst"] in ids for e in fw["graph"]["edges"])
        assert (fw["diff"] is None) == (i == 0)


def test_schema_rejects_what_is_not_a_record(training_record):
    payload = RecordPayload(training_record).summary()
    validate(payload)
    for broken in ({**payload, "schema": "thunderlab.record/v0"},
                   {**payload, "steps": [{**payload["steps"][0], "seconds": "fast"}]},
                   {k: v for k, v in payload.items() if k != "pipeline"}):
        with pytest.raises(jsonschema.ValidationError):
            validate(broken)


def test_payload_is_lazy(monkeypatch):
    calls = []
    real = serialize._graph
    monkeypatch.setattr(serialize, "_graph", lambda t: calls.append(t) or real(t))
    rec = _record(f, "dce,cse,claim,del", torch.randn(4), torch.randn(4))
    p = RecordPayload(rec)
    summary = p.summary()
    assert calls == [] and all(s["traces"] is None for s in summary["steps"])
    p.step(2)
    assert len(calls) == 1
    p.step(2)
    assert len(calls) == 1  # cached
    p.to_dict()
    assert len(calls) == len(rec.steps)


def test_failed_record_payload_keeps_earlier_steps():
    @register_pass
    @dataclass(frozen=True)
    class Boom(Pass):
        """Raises (for tests)."""

        name = "test-boom"

        def __call__(self, program):
            raise RuntimeError("boom")

    j = thunderlab.jit(f, pipeline="dce,cse,test-boom,del")
    with pytest.raises(CompileError):
        j(torch.randn(3), torch.randn(3))
    payload = RecordPayload(thunderlab.last_record(j)).to_dict()
    validate(payload)
    assert payload["error"] and "test-boom" in payload["error"]
    assert payload["steps"][3]["traces"] is None and "boom" in payload["steps"][3]["error"]
    assert payload["steps"][2]["traces"]["forward"]["program"]


@register_pass
@dataclass(frozen=True)
class MulToAdd(Pass):
    """Turns every multiplication into an addition: wrong numbers, valid program (for tests)."""

    name = "test-mul-to-add"

    def __call__(self, program):
        return program.map(lambda t: t.derive(bound_symbols=[
            b.replace(sym=lt.add) if b.sym is lt.mul else b for b in t.bound_symbols]))


def test_verification_names_the_pass_that_breaks_numerics():
    j = thunderlab.jit(f, pipeline="dce,cse,test-mul-to-add,claim,del", verify=True)
    with pytest.raises(CompileError, match="'test-mul-to-add' .step 3. produced wrong numbers: output 0"):
        j(torch.randn(5), torch.randn(5))


def test_bisection_finds_the_broken_pass_without_verify():
    x, y = torch.randn(5), torch.randn(5)
    rec = _record(f, "dce,cse,claim,test-mul-to-add,claim,del", x, y)  # compiles: nothing checked numbers
    assert rec.error is None
    found = thunderlab.bisect(rec)
    assert found.step == 4 and found.spec == "test-mul-to-add"
    assert found.detail.startswith("output 0")
    assert len(found.checked) < len(rec.steps)  # a binary search, not a scan
    assert "test-mul-to-add" in str(found)
    assert thunderlab.bisect(_record(f, "dce,cse,claim,del", x, y)) is None


def test_bisection_on_given_inputs_and_bad_input():
    x, y = torch.randn(5), torch.randn(5)
    rec = _record(f, "test-mul-to-add,dce", x, y)
    fresh = tuple(torch.randn(5) if isinstance(v, torch.Tensor) else v for v in thunderlab.session(rec).example_inputs)
    assert thunderlab.bisect(rec, fresh).step == 1
    with pytest.raises(ValueError, match=f"takes {len(rec.inputs)} inputs"):
        thunderlab.bisect(rec, (torch.randn(5),))


def test_records_hold_inputs_weakly_unless_asked():
    import gc
    import weakref

    x, y = torch.randn(5), torch.randn(5)
    rec = _record(f, "test-mul-to-add,dce", x, y)
    alive = weakref.ref(x)
    assert thunderlab.session(rec).example_inputs[0] is x
    del x
    gc.collect()
    assert alive() is None and thunderlab.session(rec).example_inputs is None  # the record did not keep the tensor
    with pytest.raises(ValueError, match="inputs are gone.*keep_inputs=True"):
        thunderlab.bisect(rec)
    j = thunderlab.jit(f, pipeline="test-mul-to-add,dce", keep_inputs=True)
    j(torch.randn(5), torch.randn(5))
    gc.collect()
    kept = thunderlab.last_record(j)
    assert thunderlab.session(kept).example_inputs is not None and thunderlab.bisect(kept).step == 1


@register_pass
@dataclass(frozen=True)
class Counted(Pass):
    """Counts its invocations and changes nothing (for tests)."""

    name = "test-counted"
    tag: str = ""
    calls = []

    def __call__(self, program):
        self.calls.append(self.tag)
        return program.map(lambda t: t.derive())


def test_rerun_reuses_the_unchanged_prefix():
    Counted.calls.clear()
    rec = _record(f, "test-counted{tag=a},dce,test-counted{tag=b},cse,test-counted{tag=c},claim,del",
                  torch.randn(3), torch.randn(3))
    assert Counted.calls == ["a", "b", "c"]
    Counted.calls.clear()
    # cse dropped
    new = thunderlab.rerun(rec, "test-counted{tag=a},dce,test-counted{tag=b},claim,test-counted{tag=c},del")
    assert Counted.calls == ["c"]  # a and b came from the first record
    assert new.reused == 3 and new.steps[1] is rec.steps[1] and new.steps[3] is rec.steps[3]
    assert [s.index for s in new.steps] == list(range(len(new.steps)))
    assert new.steps[4].spec == "claim"
    Counted.calls.clear()
    same = thunderlab.rerun(rec)
    assert Counted.calls == [] and same.reused == len(rec.steps) - 1
    Counted.calls.clear()
    thunderlab.rerun(rec, "-test-counted{tag=a},dce,test-counted{tag=b},cse,test-counted{tag=c},claim,del")
    assert Counted.calls == ["b", "c"]


def test_rerun_with_a_pass_registered_again_reruns_it():
    rec = _record(f, "dce,test-counted,del", torch.randn(3), torch.randn(3))

    @register_pass
    @dataclass(frozen=True)
    class Counted2(Pass):
        """The same name defined again, as when a notebook cell is re-run."""

        name = "test-counted"
        tag: str = ""

        def __call__(self, program):
            return program.map(lambda t: t.derive())

    try:
        new = thunderlab.rerun(rec)
        assert new.reused == 1 and new.steps[2].pass_type is Counted2
    finally:
        register_pass(Counted)


def test_compare_records_shows_program_and_time():
    x, y = torch.randn(64), torch.randn(64)
    rec = _record(f, "dce,claim,del", x, y)
    new = thunderlab.rerun(rec, "dce,cse,claim,del")
    c = thunderlab.compare(rec, new)
    assert c.symbols[0] == c.symbols[1] + 2  # cse removed the duplicate mul and add
    assert sum(1 for line in c.program_diff.splitlines() if line.startswith("-") and "ltorch.mul(x, y)" in line) == 1
    assert c.seconds[0] > 0 and c.seconds[1] > 0 and c.speedup > 0
    text = str(c)
    assert "call time" in text and "cse" in text
    assert "call time" not in str(thunderlab.compare(rec, new, time=False))
    del x, y  # the records hold them weakly: comparing still works, and says why it could not time
    gone = thunderlab.compare(rec, new)
    assert gone.seconds is None and "not timed: the inputs" in str(gone)


def test_payloads_without_scopes_and_changes_still_validate(training_record):
    """Module scopes and graph changes were added to v1 later: older payloads lack them and stay valid."""
    step = RecordPayload(training_record).step(-1)
    payload = {**RecordPayload(training_record).summary(), "steps": [step]}
    validate(payload)
    older = json.loads(json.dumps(payload))
    for t in older["steps"][0]["traces"].values():
        del t["changes"]
        for n in t["graph"]["nodes"]:
            del n["scope"]
    validate(older)
    wrong = json.loads(json.dumps(payload))
    next(iter(wrong["steps"][0]["traces"].values()))["changes"] = {"added": "b1", "removed": [], "changed": []}
    with pytest.raises(jsonschema.ValidationError):
        validate(wrong)


def _mutates(x, y):
    x.add_(1)
    return x * y


def _same_buffer(a, b):
    a.mul_(2)
    return a + b


@pytest.mark.parametrize("fn, make", [
    (_mutates, lambda: (torch.randn(5), torch.randn(5))),
    (_same_buffer, lambda: (lambda t: (t, t))(torch.randn(5))),  # one buffer passed as both inputs
    (lambda x, w: (x * w).sum(), lambda: (torch.randn(5), torch.randn(5, requires_grad=True))),  # training
])
@pytest.mark.parametrize("verify", [False, True])
def test_bisection_replays_on_fresh_copies_and_names_the_real_culprit(fn, make, verify):
    """After the call has written to its inputs, bisection still compares with eager on the inputs it replays."""
    args = make()
    good = thunderlab.jit(fn, pipeline="dce,cse,autodiff,claim,del", verify=verify, keep_inputs=True)
    good(*make())
    assert thunderlab.bisect(thunderlab.last_record(good)) is None  # nothing to blame, capture least of all
    bad = thunderlab.jit(fn, pipeline="dce,cse,autodiff,test-mul-to-add,claim,del", keep_inputs=True)
    bad(*args)
    found = thunderlab.bisect(thunderlab.last_record(bad))
    assert found is not None and found.spec == "test-mul-to-add"  # (mul_ is functionalized to mul: it breaks too)
