"""Graphs and diffs of steps, aligned by stable ids; no browser needed."""
import networkx as nx
import torch

import thunderlab
from thunderlab.inspect import call_diff, graph_diff, text_diff, trace_graph


def f_dup(x):
    a = torch.exp(x) + 1
    b = torch.exp(x) + 1
    return a * b


def _record(pipeline):
    j = thunderlab.jit(f_dup, pipeline=pipeline)
    j(torch.randn(4))
    return thunderlab.last_record(j)


def test_cse_graph_diff_marks_exactly_the_removed_duplicates():
    rec = _record("cse")
    before, after = rec.steps[0].program.forward, rec.steps[1].program.forward
    dup_ids = {f"b{b.id}" for b in before.bound_symbols[2:4]}  # the second exp and its add
    d = graph_diff(trace_graph(before), trace_graph(after))
    assert set(d.removed) == dup_ids
    assert d.added == []
    # the multiply now reads the first add twice: a change of its inputs, by id
    mul = f"b{before.bound_symbols[4].id}"
    assert d.changed == [mul]
    assert d.marks()[mul] == "changed"


def test_renamed_values_are_not_changes():
    rec = _record("dce,claim")
    before, after = rec.steps[1].program.forward, rec.steps[2].program.forward
    renamed = after.derive(bound_symbols=list(after.bound_symbols))
    d = call_diff(before, renamed)
    # claim only sets executors: every call is "changed" in executor, none added or removed
    assert d.added == [] and d.removed == []
    assert set(d.changed) == {f"b{b.id}" for b in before.bound_symbols}


def test_text_diff_is_a_unified_diff():
    rec = _record("cse")
    text = text_diff(
        rec.steps[0].program.forward, rec.steps[1].program.forward, before_name="capture", after_name="cse"
    )
    assert text.startswith("--- capture\n+++ cse\n")
    assert "-    t2 = ltorch.exp(x)" in text


def test_graph_exports():
    rec = _record("claim")
    g = trace_graph(rec.steps[-1].program.forward)
    nxg = g.to_networkx()
    assert nx.is_directed_acyclic_graph(nxg)
    assert nxg.number_of_nodes() == 5 + 1 + 1  # five calls, one input, the return
    dot = g.to_dot()
    assert dot.startswith("digraph trace {") and '"in:x"' in dot and "ltorch.exp" in dot


def test_regions_are_groups_that_expand():
    from tests.executors.test_fusion import EagerFuser  # registers the "testfuse" executor

    assert EagerFuser.name == "testfuse"
    j = thunderlab.jit(lambda x: (torch.sin(x) * 2).exp() @ x, pipeline="claim{executors=testfuse+torch},fuse")
    j(torch.randn(3, 3))
    trace = thunderlab.last_record(j).steps[-1].program.forward
    collapsed, expanded = trace_graph(trace), trace_graph(trace, expand_regions=True)
    regions = [n for n in collapsed.nodes.values() if n.kind == "region"]
    assert len(regions) == 1
    members = [n for n in expanded.nodes.values() if n.group == regions[0].label]
    assert len(members) == 3
    assert "subgraph" in expanded.to_dot()


def test_record_diff_and_step_graph():
    rec = _record("dce,cse")
    text = rec.diff(1, 2)
    assert text.startswith("--- 1 dce\n+++ 2 cse\n") and "-    t2 = ltorch.exp(x)" in text
    assert rec.steps[2].graph().nodes["out"].kind == "output"
    import pytest

    with pytest.raises(ValueError, match="no 'backward' trace"):
        rec.diff(0, 2, trace="backward")


def test_payload_marks_the_cse_steps_changes_and_any_two_steps_compare():
    from thunderlab.inspect.serialize import RecordPayload

    rec = _record("dce,cse,claim")
    before = rec.steps[1].program.forward
    dups = {f"b{b.id}" for b in before.bound_symbols[2:4]}
    payload = RecordPayload(rec)
    assert payload.step(0)["traces"]["forward"]["changes"] is None  # capture has nothing before it
    changes = payload.step(2)["traces"]["forward"]["changes"]
    assert set(changes["removed"]) == dups and changes["added"] == []
    assert changes["changed"] == [f"b{before.bound_symbols[4].id}"]
    # any two steps: capture to claim removes the duplicates and re-labels every kept call
    d = rec.graph_diff(0, 3)
    assert set(d.removed) == dups
    assert set(d.changed) == {f"b{b.id}" for b in rec.steps[3].program.forward.bound_symbols}
