"""Each record's capture step says where TorchDynamo's graph came from: its frame id (as ``TORCH_LOGS`` and tlparse
name it), the function or the part of one after a graph break, the graph break it ends at and why, and why the
function was compiled again. The cases follow TorchDynamo's documented behaviour: a call it cannot trace (``print``)
and a branch on a tensor's value break the graph, the code after a break runs in a frame of its own, and a call
whose guards fail (another input size) compiles again.
"""
import inspect
import re
import time

import pytest
import torch

import thunderlab


def breaks(x, n):
    y = x.sin()
    print("between two graphs")
    if n.sum() > 0:
        y = y * 2
    return y.cos()


def _line(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _notes(record):
    return record.steps[0].notes


def test_graph_breaks_are_named_where_they_are_and_the_code_after_them_says_where_it_resumes(capsys):
    j = thunderlab.jit(breaks)
    x, n = torch.randn(4), torch.ones(2)
    torch.testing.assert_close(j(x, n), breaks(x, n))
    first, second, third = j.records
    printed, branch = _line(breaks, "print("), _line(breaks, "if n.sum()")
    a = _notes(first)
    assert re.fullmatch(r"\d+/0", a["compile_id"]), a.facts
    assert (a["function"], a["file"], a["line"]) == ("breaks", "test_capture_origin.py", _line(breaks, "def breaks"))
    assert a["graph_break"]["line"] == printed and a["graph_break"]["code"] == 'print("between two graphs")'
    assert "print" in a["graph_break"]["detail"]
    assert a.summary.startswith(f"TorchDynamo frame {a['compile_id']}: breaks (test_capture_origin.py:")
    assert f"ends at a graph break at test_capture_origin.py:{printed} `print(" in a.summary
    b = _notes(second)
    assert b["function"] == "breaks" and b["resumes_after_line"] == printed
    assert b["graph_break"]["line"] == branch and "n.sum()" in b["graph_break"]["code"]
    assert f"breaks from line {printed} on, after a graph break" in b.summary
    c = _notes(third)
    assert c["resumes_after_line"] == branch and "graph_break" not in c  # it runs to the return
    assert "recompiled_because" not in a and "recompiled_because" not in c
    info = j.cache_info
    assert (info["graphs"], info["graph_breaks"], info["recompiles"]) == (3, 2, 0), info


def test_a_function_compiled_again_says_which_guard_failed():
    def f(x):
        return torch.tanh(x) * 3

    j = thunderlab.jit(f)
    j(torch.randn(4, 8))
    j(torch.randn(4, 9))  # the first capture's guard on the size fails
    first, again = j.records
    frame = _notes(first)["compile_id"].split("/")[0]
    notes = _notes(again)
    assert notes["compile_id"] == f"{frame}/1"
    assert notes["recompiled_because"].startswith(f"{frame}/0: ") and "size mismatch at index 1" in \
        notes["recompiled_because"], notes.facts
    assert f"compiled again: frame {frame}/0's guard failed (" in notes.summary
    assert "graph_break" not in notes and "graph break" not in notes.summary
    assert (j.cache_info["graphs"], j.cache_info["graph_breaks"], j.cache_info["recompiles"]) == (2, 0, 1)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.nn.functional.gelu(self.lin(x))


def test_torch_compile_with_the_thunderlab_backend_says_it_too():
    model = Block()
    compiled = torch.compile(model, backend="thunderlab")
    x = torch.randn(2, 8)
    torch.testing.assert_close(compiled(x), model(x))
    record = thunderlab.records()[-1]
    notes = _notes(record)
    line = _line(Block.forward, "def forward")
    assert (notes["module"], notes["function"], notes["line"]) == ("Block", "forward", line), notes.facts
    assert record.name.split("[")[0] == "Block"  # the registered backend names a graph after its module
    assert notes.summary == f"TorchDynamo frame {notes['compile_id']}: Block.forward (test_capture_origin.py:{line})"


def test_a_module_whose_forward_is_torchs_own_is_named_by_its_frame_alone():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU())
    j = thunderlab.jit(model)
    x = torch.randn(2, 8)
    torch.testing.assert_close(j(x), model(x))
    notes = _notes(j.records[0])
    assert set(notes.facts) == {"compile_id"} and notes.summary == f"TorchDynamo frame {notes['compile_id']}"


def test_a_saved_record_keeps_where_its_graph_came_from(tmp_path):
    j = thunderlab.jit(breaks)
    j(torch.randn(4), torch.ones(2))
    record = j.records[1]
    loaded = thunderlab.load(thunderlab.save(record, tmp_path / "resumed.thunderlab.json"))
    assert _notes(loaded).summary == _notes(record).summary
    assert _notes(loaded)["resumes_after_line"] == _notes(record)["resumes_after_line"]


def test_a_hugging_face_models_loss_stays_in_its_graph_under_the_registered_backend():
    # GPT-2's loss_function warns once (transformers' Logger.warning_once) about its loss_type: TorchDynamo cannot
    # trace a logging call and breaks the graph there, unless the capture leaves the once-only warning out, as every
    # thunderlab capture does (thunderlab.jit's and the registered backend's alike)
    pytest.importorskip("transformers")
    from thunderlab.examples import gpt2_from_config

    model = gpt2_from_config(n_layer=1, n_embd=32, n_head=2, vocab_size=64).train()
    ids = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(0))
    start = time.time()
    out = torch.compile(model, backend="thunderlab")(input_ids=ids, labels=ids)
    torch.testing.assert_close(out.loss, model(input_ids=ids, labels=ids).loss)
    [record] = [r for r in thunderlab.records() if r.created >= start]
    notes = _notes(record)
    assert "graph_break" not in notes and notes["module"] == "GPT2LMHeadModel", notes.summary
    assert record.name.split("[")[0] == "GPT2LMHeadModel"  # [n] after the process's earlier GPT-2 graphs
    # other backends' captures are TorchDynamo's as they were: the warning still breaks the graph there
    graphs = []
    torch.compile(model, backend=lambda gm, ex: graphs.append(gm) or gm.forward)(input_ids=ids, labels=ids)
    assert len(graphs) == 2
