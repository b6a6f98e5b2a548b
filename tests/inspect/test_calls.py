"""Per-call payload facts: print lines, stable ids across steps, executors, regions, sources, saved-for-backward."""
import torch

import thunderlab
from thunderlab.inspect.calls import saved_for_backward, trace_calls
from thunderlab.inspect.serialize import RecordPayload, validate


def f(x, w):
    y = x @ w
    return (y.sin() + 1).relu()


def _record(pipeline, *args):
    j = thunderlab.jit(f, pipeline=pipeline)
    j(*args)
    return thunderlab.last_record(j)


def test_every_call_points_at_its_printed_line_and_source():
    rec = _record("dce,cse,claim,fuse,del", torch.randn(4, 8), torch.randn(8, 8))
    p = RecordPayload(rec).to_dict()
    validate(p)
    for st in p["steps"]:
        t = st["traces"]["forward"]
        lines = t["program"].split("\n")
        assert t["calls"], st["spec"]
        for c in t["calls"]:
            assert c["line"] is not None
            text = lines[c["line"] - 1]
            assert c["op"] in text, (st["spec"], c, text)
            if c["region"] is None and c["op"].startswith("ltorch."):
                assert c["source"]["file"] == "test_calls.py" and c["source"]["code"]
                assert c["source"]["path"] is None or c["source"]["path"].endswith("test_calls.py")


def test_ids_are_stable_and_fuse_moves_calls_into_a_region():
    rec = _record("claim{executors=inductor+torch},fuse", torch.randn(4, 8), torch.randn(8, 8))
    p = RecordPayload(rec)
    before = {c["id"]: c for c in p.step(1)["traces"]["forward"]["calls"]}
    after = {c["id"]: c for c in p.step(2)["traces"]["forward"]["calls"]}
    members = [c for c in after.values() if c["region"]]
    assert members, "fuse made no region"
    # a fused call keeps its id: the views can say it moved into the region
    assert all(m["id"] in before and before[m["id"]]["region"] is None for m in members)
    capture = {c["id"]: c for c in p.step(0)["traces"]["forward"]["calls"]}
    assert all(c["executor"] is None for c in capture.values())
    assert all(c["executor"] for c in before.values()), "claim gave every call an executor"


def test_names_of_inputs_and_the_saved_for_backward_set():
    x = torch.randn(4, 8, requires_grad=True)
    w = torch.randn(8, 8, requires_grad=True)
    rec = _record("autodiff,claim,del", x, w)
    p = RecordPayload(rec).to_dict()
    validate(p)
    assert [i["name"] for i in p["input_names"]] == [i.name for i in rec.steps[0].program.forward.inputs]
    assert all("f32[" in i["type"] for i in p["input_names"])
    assert "saved" not in p["steps"][0]["traces"]["forward"]
    saved = p["steps"][1]["traces"]["forward"]["saved"]
    assert saved == saved_for_backward(rec.steps[1].program)
    assert saved["values"] and saved["bytes"] == sum(v["bytes"] for v in saved["values"])
    assert all(v["bytes"] == 4 * 4 * 8 or v["bytes"] == 8 * 8 * 4 or v["bytes"] > 0 for v in saved["values"])


def test_lines_come_from_the_printer_not_from_reading_the_text():
    rec = _record("claim{executors=inductor+torch},fuse,del", torch.randn(4, 8), torch.randn(8, 8))
    t = rec.steps[-1].program.forward
    code = t.python_code(header="a header\nof two lines")
    calls = trace_calls(code)
    lines = code.text.split("\n")
    assert calls and all(c["line"] is not None for c in calls)
    assert [c["id"] for c in calls] == [f"b{c.bsym.id}" for c in code.calls if not c.bsym.sym.bookkeeping]
    assert not any(lines[c["line"] - 1].lstrip().startswith("del ") for c in calls)  # a del is not a call
    assert {c["region"] for c in calls} - {None}, "fuse made no region"
