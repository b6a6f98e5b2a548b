"""A pass's notes are one typed value (summary, named facts, per-call declines), whichever pass wrote them,
kept with the step, carried in the payload in one shape and read back from files in that shape or the older one."""
import json
from dataclasses import dataclass

import pytest
import torch

import thunderlab
from thunderlab import Pass, register_pass
from thunderlab.core.notes import Decline, Notes
from thunderlab.inspect.document import check_payload, record_from_payload
from thunderlab.runtime.compiled import CompileError

PIPELINE = "dce,cse,autodiff,remat,claim,fuse,del"


@dataclass(frozen=True)
class DictNotes(Pass):
    """Describes itself with a plain dict, as passes did before notes were typed (for tests)."""

    name = "test-dict-notes"

    def __call__(self, program):
        return program.map(lambda t: t.derive())

    def describe(self, before, after):
        return {"summary": "looked, changed nothing", "looked_at": after.count()}


@dataclass(frozen=True)
class BadNotes(DictNotes):
    """Describes itself with a string (for tests)."""

    name = "test-bad-notes"

    def describe(self, before, after):
        return "done"


register_pass(DictNotes)
register_pass(BadNotes)


def _record(pipeline=PIPELINE):
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16))
    j = thunderlab.jit(model, pipeline=pipeline)
    j(torch.randn(4, 8, requires_grad=True)).sum().backward()
    return thunderlab.last_record(j)


def test_every_pass_says_what_it_did_in_one_shape():
    rec = _record()
    by = {s.spec: s.notes for s in rec.steps}
    assert all(isinstance(n, Notes) for n in by.values())
    assert by["claim"].summary == f"{by['claim']['decomposed']} decomposed, {by['claim']['kept_whole']} kept whole"
    assert by["autodiff"].summary.startswith(f"saved {len(by['autodiff']['saved'])} values for backward")
    assert by["remat"]["recompute"] in by["remat"].summary
    assert by["fuse"].summary.endswith("no region") or "region" in by["fuse"].summary
    assert by["dce"] == Notes() and not by["dce"]
    # the table shows each summary beside the step
    table = rec.table().splitlines()
    assert any("claim" in row and f"({by['claim'].summary})" in row for row in table)


def test_declines_are_per_call_records_not_a_pass_specific_dict():
    @torch.compiler.allow_in_graph
    def cummax(x):  # the user's Python, called as is: an opaque call inductor is not handed, left to torch
        return torch.cummax(x, 0).values

    def f(x):
        return cummax(x.sin()).cos()

    j = thunderlab.jit(f, pipeline="claim{executors=inductor+torch},fuse")
    j(torch.randn(3, 3))
    rec = thunderlab.last_record(j)
    claim, fuse = rec.steps[1].notes, rec.steps[2].notes
    call = next(b for b in rec.steps[-1].program.forward.bound_symbols if b.sym.name == "cummax")
    assert ("inductor", call.declined[0][1]) in claim.declined()[call.id]
    assert all(isinstance(d, Decline) and d.executor == "fuse" for d in fuse.declines)
    assert fuse.declined()[call.id] == [("fuse", call.declined[-1][1])]


def test_a_pass_describing_itself_with_a_dict_still_records_notes():
    j = thunderlab.jit(lambda x: x.sin() * 2, pipeline="test-dict-notes")
    j(torch.randn(3))
    step = thunderlab.last_record(j).steps[-1]
    assert step.notes == Notes("looked, changed nothing", {"looked_at": 2})


def test_a_pass_describing_itself_with_anything_else_is_named():
    j = thunderlab.jit(lambda x: x.sin() * 2, pipeline="test-bad-notes")
    with pytest.raises(CompileError, match=r"test-bad-notes.*describe returned str; return thunderlab.passes.Notes"):
        j(torch.randn(3))


def test_a_summary_is_one_line():
    with pytest.raises(ValueError, match="one line"):
        Notes("first\nsecond")


def test_the_payload_carries_notes_in_one_shape_and_older_files_still_load(tmp_path):
    rec = _record()
    payload = json.loads(json.dumps(rec.payload().to_dict()))
    for s in payload["steps"]:
        assert set(s["notes"]) == {"summary", "facts", "declines"}
    claim = next(s for s in payload["steps"] if s["spec"] == "claim")
    # a file written before notes were typed: each pass's facts as one object, claim's declines by call id
    old = json.loads(json.dumps(payload))
    for s in old["steps"]:
        n = s["notes"]
        s["notes"] = {**n["facts"], **({"summary": n["summary"]} if s["spec"] == "ddp" else {})}
    old_claim = next(s for s in old["steps"] if s["spec"] == "claim")
    old_claim["notes"]["declines"] = {"7": [["nvfuser", "nvFuser is not installed"]]}
    loaded = record_from_payload(check_payload(old))
    notes = next(s.notes for s in loaded.steps if s.spec == "claim")
    assert notes.declines == (Decline(7, "nvfuser", "nvFuser is not installed"),)
    assert notes["kept_whole"] == claim["notes"]["facts"]["kept_whole"]
    new = record_from_payload(check_payload(payload))
    assert [s.notes for s in new.steps] == [Notes.from_json(s["notes"]) for s in payload["steps"]]
