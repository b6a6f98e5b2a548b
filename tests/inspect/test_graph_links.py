"""The graph payload links backward calls to the forward calls they come from, and its changes name
executor assignments and fusion regroupings, so the graph view and the diff agree at claim and fuse."""
import pytest

import thunderlab
from thunderlab.examples import EXAMPLES
from thunderlab.inspect.serialize import RecordPayload, validate


@pytest.fixture(scope="module")
def training():
    model, inputs = EXAMPLES["nanogpt_block"]()
    j = thunderlab.jit(model, pipeline="dce,cse,autodiff,remat,claim{executors=inductor+torch},fuse,del")
    j(*inputs)
    rec = thunderlab.last_record(j)
    return rec, RecordPayload(rec).to_dict()


def _step(payload, name):
    return next(s for s in payload["steps"] if s["spec"].split("{")[0] == name and s["traces"])


def test_backward_nodes_name_the_forward_call_they_come_from(training):
    rec, payload = training
    validate(payload)
    last = payload["steps"][-1]["traces"]
    fw = {n["id"]: n for n in last["forward"]["graph"]["nodes"]}
    bw = last["backward"]["graph"]["nodes"]
    linked = [n for n in bw if n["derived_from"]]
    calls = [n for n in bw if n["kind"] == "call" and n["label"] != "ltorch.python_return"]
    assert len(linked) >= len(calls) // 2, (len(linked), len(calls))
    assert all(n["derived_from"] in fw for n in linked), [
        n["derived_from"] for n in linked if n["derived_from"] not in fw
    ][:5]
    # the record agrees: autodiff's notes map each backward call's id to its forward call's id
    notes = next(s.notes for s in rec.steps if s.notes.get("differentiated"))
    links = notes["backward_to_forward"]
    some = [n for n in linked if int(n["id"][1:]) in links][:20]
    assert some and all(n["derived_from"] == f"b{links[int(n['id'][1:])]}" for n in some)
    assert all(n["derived_from"] is None for n in fw.values())


def test_nodes_carry_their_outputs_shapes_and_dtypes(training):
    _, payload = training
    nodes = payload["steps"][-1]["traces"]["forward"]["graph"]["nodes"]
    calls = [n for n in nodes if n["kind"] == "call"]
    assert calls and all(n["outputs"] for n in calls if n["label"] != "ltorch.python_return")
    name, typ = calls[0]["outputs"][0]
    assert name and "[" in typ and ("f32" in typ or "i64" in typ)


def test_claim_changes_name_executor_assignments(training):
    _, payload = training
    ch = _step(payload, "claim")["traces"]["forward"]["changes"]
    assert ch["executor"], "claim assigns executors: the graph's changes must say so"
    assert set(ch["executor"]) <= set(ch["changed"])


def test_fuse_changes_name_the_regrouped_calls(training):
    _, payload = training
    st = _step(payload, "fuse")
    ch = st["traces"]["forward"]["changes"]
    grouped = {n["id"] for n in st["traces"]["forward"]["graph"]["nodes"] if n["group"]}
    assert ch["regrouped"] and set(ch["regrouped"]) <= grouped
