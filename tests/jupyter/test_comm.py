"""The sidebar protocol without a browser: declared messages answered, everything else refused by name."""
import gc
import time
from collections import deque

import pytest
import torch

import thunderlab
from tests.executors.test_fusion import PIPE  # registers "testfuse", a fusing executor that runs with torch
from thunderlab.core.listeners import Listeners
from thunderlab.jupyter import protocol
from thunderlab.jupyter.comm import Handler
from thunderlab.passes import Pass, register_pass
from thunderlab.runtime import compiled


@pytest.fixture
def handler(monkeypatch):
    monkeypatch.setattr(compiled, "_RECORDS", deque(maxlen=100))
    sent = []
    h = Handler(sent.append)
    h.sent = sent
    monkeypatch.setattr(compiled, "RECORD_LISTENERS", Listeners("a record made"))
    compiled.RECORD_LISTENERS.add(h.on_record)
    return h


def _ids():
    return [r.uid for r in compiled.all_records()]


def _ask(h, kind, **fields):
    return h.handle({"v": 1, "id": 7, "type": kind, **fields})


def _compile(name="f", timing=False, x=None):
    def f(x):
        return torch.relu(x) * 2 + 1

    f.__name__ = name
    jf = thunderlab.jit(f, pipeline=PIPE, timing=timing)
    jf(torch.randn(4) if x is None else x)  # the record holds its inputs weakly: pass x to keep them
    return jf


def test_hello_and_new_records_are_pushed(handler):
    assert _ask(handler, "hello")["protocol"] == 1
    _compile("first")
    pushed = [m for m in handler.sent if m["type"] == "record.new"]
    # six steps: capture and five passes
    assert [m["name"] for m in pushed] == ["first"] and pushed[0]["record"] == _ids()[0] and pushed[0]["steps"] == 6


def test_records_list_newest_first_filtered_and_paged(handler):
    for name in ("alpha", "beta", "alphabet"):
        _compile(name)
    rows = _ask(handler, "records.list")["records"]
    assert [r["name"] for r in rows] == ["alphabet", "beta", "alpha"]
    page = _ask(handler, "records.list", filter="ALPHA", offset=1, limit=1)
    assert page["total"] == 2 and [r["name"] for r in page["records"]] == ["alpha"]


def test_a_graph_whose_sizes_kept_changing_says_on_its_newest_row_how_many_calls_ran_as_captured(handler):
    def growing(x):
        return x.cumsum(0) * 2

    jf = thunderlab.jit(growing, pipeline=PIPE)
    with pytest.warns(UserWarning, match="calls in a row"), torch.no_grad():
        for n in range(2, 12):  # 2 static, 3 to 6 compiled, the other five run as captured
            jf(torch.randn(n))
    rows = _ask(handler, "records.list")["records"]
    assert [r["as_captured"] for r in rows] == [5, 0, 0, 0, 0]  # newest first: the graph's newest record says it
    other = _compile("other")
    assert [r["as_captured"] for r in _ask(handler, "records.list")["records"]] == [0, 5, 0, 0, 0, 0]
    assert handler.sent[-2]["type"] == "record.new" and handler.sent[-2]["as_captured"] == 0
    del jf, other


def test_calls_run_as_captured_push_their_row_again_the_last_count_last(handler, monkeypatch):
    monkeypatch.setattr(compiled, "CAPTURED_LISTENERS", Listeners("a call run as captured"))
    compiled.CAPTURED_LISTENERS.add(handler.on_captured)

    def growing(x):
        return x.cumsum(0) * 2

    jf = thunderlab.jit(growing, pipeline=PIPE)
    t0 = time.monotonic()
    with pytest.warns(UserWarning, match="calls in a row"), torch.no_grad():
        for n in range(2, 40):  # 2 static, 3 to 6 compiled, 33 run as captured
            jf(torch.randn(n))
    took = time.monotonic() - t0
    updates = [m for m in handler.sent if m["type"] == "record.update"]
    assert [m["as_captured"] for m in updates][:1] == [1]  # the first at once
    deadline = time.monotonic() + 5
    while handler.sent[-1].get("as_captured") != 33 and time.monotonic() < deadline:
        time.sleep(0.05)
    last = handler.sent[-1]
    assert last["type"] == "record.update" and last["as_captured"] == 33  # the last, once the quarter second ended
    assert last["record"] == jf.records[-1].uid and last["name"] == "growing[1]"  # the symbolic graph's
    updates = [m["as_captured"] for m in handler.sent if m["type"] == "record.update"]
    assert updates == sorted(updates) and len(updates) <= 2 + took / 0.25  # at most four a second


def test_in_grad_mode_the_count_moves_to_the_graphs_newest_record_and_two_graphs_each_get_theirs(handler,
                                                                                                  monkeypatch):
    monkeypatch.setattr(compiled, "CAPTURED_LISTENERS", Listeners("a call run as captured"))
    compiled.CAPTURED_LISTENERS.add(handler.on_captured)
    monkeypatch.setattr(compiled.CompiledGraph, "price", lambda self: 0.0)  # a size compiles on its second call

    def growing(x):
        return x.cumsum(0) * 2

    def shrinking(x):
        return x.flip(0) - 1

    ja, jb = thunderlab.jit(growing, pipeline=PIPE), thunderlab.jit(shrinking, pipeline=PIPE)
    with pytest.warns(UserWarning, match="calls in a row"):
        for n in range(2, 9):  # each: 2 static, 3 to 6 compiled, 7 and 8 as captured, the two graphs in turn
            ja(torch.randn(n))
            jb(torch.randn(n))
    time.sleep(0.4)  # the trailing push
    last = {}
    for m in handler.sent:
        if m["type"] in ("record.update", "record.new"):
            last[m["record"]] = m["as_captured"]
    newest_a, newest_b = ja.records[-1].uid, jb.records[-1].uid
    assert last[newest_a] == 2 and last[newest_b] == 2  # neither graph's count was lost to the other's
    ja(torch.randn(7))  # came again: compiles, and the count moves to its record
    time.sleep(0.4)
    last = {}
    for m in handler.sent:
        if m["type"] in ("record.update", "record.new"):
            last[m["record"]] = m["as_captured"]
    assert last[ja.records[-1].uid] == 2 and last[newest_a] == 0  # the row that had it says none any more
    rows = {r["record"]: r["as_captured"] for r in _ask(handler, "records.list")["records"]}
    assert rows == {k: last.get(k, 0) for k in rows} and sum(rows.values()) == 4


def test_summary_traces_rerun_and_compare(handler):
    x = torch.randn(4)
    jf = _compile(x=x)  # kept: timing runs the programs, which live in the function's sessions
    [rid] = _ids()
    s = _ask(handler, "record.summary", record=rid)["payload"]
    assert s["schema"] == "thunderlab.record/v1" and s["steps"][1]["spec"] == "dce"
    t = _ask(handler, "step.traces", record=rid, step=2)["traces"]
    assert "forward" in t and "def forward" in t["forward"]["program"]
    new = _ask(handler, "record.rerun", record=rid, pipeline="dce,claim{executors=torch},del")
    assert new["type"] == "record.rerun.reply" and new["record"] == _ids()[-1] != rid
    assert handler.sent[-2]["type"] == "record.new" and handler.sent[-2]["pipeline"] == "dce,claim{executors=torch},del"
    c = _ask(handler, "records.compare", a=rid, b=new["record"], time=True)
    assert c["type"] == "records.compare.reply" and c["regions"][0] == 1 and c["regions"][1] == 0, c
    assert "fusion" in c["program_diff"]
    # each side's steps (b's dce was taken over from a) and final program with its calls, for the side-by-side diff
    assert [s["spec"] for s in c["a_steps"]] == ["capture", "dce", "cse", "claim{executors=testfuse+torch}", "fuse",
                                                 "del"]
    assert [(s["spec"], s["shared"]) for s in c["b_steps"]] == [("capture", True), ("dce", True),
                                                                 ("claim{executors=torch}", False), ("del", False)]
    fa, fb = c["programs"]["a"]["forward"], c["programs"]["b"]["forward"]
    assert "# fusion region testfuse0" in fa["program"] and "fusion region" not in fb["program"]
    regions = lambda p: {x["region"] for x in p["calls"]}  # noqa: E731
    assert "testfuse0" in regions(fa) and regions(fb) == {None}
    assert {x["id"] for x in fa["calls"]} >= {x["id"] for x in fb["calls"]}  # the same calls, by stable id
    assert c["seconds"][0] > 0 and c["seconds"][1] > 0 and c["note"] == ""
    del x
    gc.collect()  # TorchDynamo's compile leaves cyclic garbage that refers to the input it was called with
    gone = _ask(handler, "records.compare", a=rid, b=new["record"], time=True)
    assert gone["seconds"] is None and gone["note"].startswith("the inputs the records were compiled for are gone")
    del jf  # dropped last: its records' sessions held the programs timed above


def test_profile_one_call_lists_each_regions_kernels_and_keeps_them(handler):
    x = torch.randn(4)
    jf = thunderlab.jit(lambda x: torch.relu(x) * 2 + 1, pipeline=PIPE)
    jf(x)
    [rid] = _ids()
    assert _ask(handler, "record.summary", record=rid)["payload"]["kernels"] is None
    reply = _ask(handler, "record.profile", record=rid)
    assert reply["type"] == "record.profile.reply" and reply["record"] == rid, reply
    names = {k["name"] for k in reply["kernels"]["testfuse0"]}
    assert {"aten::relu", "aten::mul", "aten::add"} <= names
    assert all(k["count"] >= 1 and k["self_cpu_us"] >= 0 for k in reply["kernels"]["testfuse0"])
    assert reply["versions"] == {"testfuse0": "testfuse"}  # the fused version was built before the profile
    # the record keeps the profile, and its payload carries it (a fresh payload, as the sidebar asks again)
    payload = _ask(handler, "record.summary", record=rid)["payload"]
    assert payload["kernels"] == reply["kernels"]
    from thunderlab.inspect.serialize import validate

    validate(payload)


def test_profile_says_when_the_records_inputs_are_gone(handler):
    import gc

    jf = _compile()  # called on a tensor nobody keeps: the record holds it weakly
    [rec] = compiled.all_records()
    thunderlab.session(rec).wait(60)  # a region keeps its first call's inputs only until its fused version is built
    gc.collect()
    reply = _ask(handler, "record.profile", record=rec.uid)
    assert reply["type"] == "error" and reply["reply_to"] == 7
    assert "inputs this record was compiled for are gone" in reply["error"] and "keep_inputs=True" in reply["error"]
    del jf


def test_validate_gives_the_parsers_own_message(handler):
    ok = _ask(handler, "pipeline.validate", pipeline="dce , cse")
    assert ok["ok"] and ok["pipeline"] == "dce,cse"
    bad = _ask(handler, "pipeline.validate", pipeline="fuse,claim,del")
    assert (
        not bad["ok"]
        and bad["error"] == "pass 'fuse' requires 'claim' to run before it; add 'claim' earlier in the pipeline"
    )
    unknown = _ask(handler, "pipeline.validate", pipeline="dce,nope")
    assert "unknown pass 'nope'" in unknown["error"]


def test_pass_registry_lists_passes_registered_in_a_notebook(handler, monkeypatch):
    from dataclasses import dataclass

    from thunderlab.passes import base

    monkeypatch.setattr(base, "REGISTRY", dict(base.REGISTRY))

    @register_pass
    @dataclass(frozen=True)
    class Nothing(Pass):
        """Leaves the program as it is."""
        name = "nothing"
        times: int = 1

        def __call__(self, program):
            return program

    import thunderlab.passes as passes
    monkeypatch.setattr(passes, "REGISTRY", base.REGISTRY)
    listed = {p["name"]: p for p in _ask(handler, "passes.list")["passes"]}
    assert listed["nothing"]["summary"] == "Leaves the program as it is."
    assert listed["nothing"]["options"] == {"times": {"type": "int", "default": 1}}
    assert listed["fuse"]["requires"] == ["claim"] and listed["del"]["last"]


def test_timings_stream_while_the_program_runs(handler, monkeypatch):
    from thunderlab.executors import region

    monkeypatch.setattr(region, "TIMING_LISTENERS", Listeners("a region call timed"))
    region.TIMING_LISTENERS.add(handler.on_timed)
    monkeypatch.setattr("thunderlab.jupyter.comm.PUSH_EVERY_S", 0.0)
    jf = _compile(timing=True)
    [rid] = _ids()
    first = _ask(handler, "timings.subscribe", record=rid)
    assert first["record"] == rid
    assert first["communication"] == {}  # no collective in this program: none timed (ddp's are, see tests/distributed)
    for _ in range(3):
        jf(torch.randn(4))
    pushed = [m for m in handler.sent if m["type"] == "timings"]
    assert len(pushed) >= 3
    counts = [sum(t["count"] for r in m["regions"].values() for t in r["timings"].values()) for m in pushed]
    assert counts == sorted(counts) and counts[-1] > counts[0]


@pytest.mark.parametrize("msg, says", [
    ("hello", "a JSON object"),
    ({"v": 2, "id": 1, "type": "hello"}, "version 2 is not supported"),
    ({"v": 1, "id": "1", "type": "hello"}, "'id' must be an integer"),
    ({"v": 1, "id": 1, "type": "exec"}, "unknown message type 'exec'"),
    ({"v": 1, "id": 1, "type": "record.summary"}, "needs field 'record'"),
    ({"v": 1, "id": 1, "type": "record.summary", "record": "0"}, "'record' of 'record.summary' must be an integer"),
    ({"v": 1, "id": 1, "type": "record.summary", "record": True}, "must be an integer"),
    ({"v": 1, "id": 1, "type": "record.summary", "record": 0, "path": "/etc"}, "no field 'path'"),
    ({"v": 1, "id": 1, "type": "records.list", "limit": 100000}, "outside 1..500"),
    ({"v": 1, "id": 1, "type": "pipeline.validate", "pipeline": "x" * 5000}, "length 5000"),
    ({"v": 1, "id": 1, "type": "record.summary", "record": 3}, "nothing has been compiled"),
    ({"v": 1, "id": 1, "type": "record.profile"}, "'record.profile' needs field 'record'"),
    ({"v": 1, "id": 1, "type": "record.profile", "record": "x.py"}, "'record' of 'record.profile' must be an integer"),
    ({"v": 1, "id": 1, "type": "record.profile", "record": 0, "code": "1"}, "no field 'code'; its fields: record"),
    ({"v": 1, "id": 1, "type": "record.profile", "record": 0}, "no record 0 in this kernel"),
])
def test_malformed_requests_get_an_error_naming_the_problem(handler, msg, says):
    reply = handler.handle(msg)
    assert reply["type"] == "error" and says in reply["error"], reply
    assert handler.sent[-1] is reply


def test_a_failing_rerun_is_an_error_reply(handler):
    _compile()
    reply = _ask(handler, "record.rerun", record=_ids()[0], pipeline="fuse,del")
    assert reply["type"] == "error" and "requires 'claim'" in reply["error"]


def test_every_declared_message_has_a_handler():
    for kind in protocol.MESSAGES:
        assert hasattr(Handler, "_" + kind.replace(".", "_")), kind


def test_start_does_nothing_outside_a_kernel():
    from thunderlab.jupyter.comm import start

    assert start() is False


def test_record_ids_stay_fixed_while_the_oldest_records_are_let_go(handler, monkeypatch):
    monkeypatch.setattr(compiled, "_RECORDS", deque(maxlen=2))
    for name in ("one", "two", "three"):
        _compile(name)
    rows = _ask(handler, "records.list")["records"]
    assert [r["name"] for r in rows] == ["three", "two"]
    first = [m["record"] for m in handler.sent if m["type"] == "record.new"][0]  # "one", let go
    reply = _ask(handler, "record.summary", record=first)
    assert reply["type"] == "error" and "the oldest are let go" in reply["error"]
    assert _ask(handler, "record.summary", record=rows[1]["record"])["payload"]["name"] == "two"


class _FakeComm:
    """What Link uses of an ipykernel comm: it sends, takes a message handler and a close handler."""

    def __init__(self):
        self.sent, self.closing = [], None

    def send(self, data):
        self.sent.append(data)

    def on_msg(self, fn):
        pass

    def on_close(self, fn):
        self.closing = fn


def test_a_link_hears_of_new_records_until_its_comm_closes(monkeypatch):
    from thunderlab.jupyter.comm import Link

    monkeypatch.setattr(compiled, "_RECORDS", deque(maxlen=100))
    monkeypatch.setattr(compiled, "RECORD_LISTENERS", Listeners("a record made"))
    comm = _FakeComm()
    Link(comm)
    _compile("heard")
    assert [m["name"] for m in comm.sent if m["type"] == "record.new"] == ["heard"]
    comm.closing({})
    assert len(compiled.RECORD_LISTENERS) == 0
    _compile("not_heard")
    assert [m["name"] for m in comm.sent if m["type"] == "record.new"] == ["heard"]
