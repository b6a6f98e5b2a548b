"""Records as files: thunderlab.save and thunderlab.load, what a loaded record can and cannot do, bad files."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import thunderlab
from tests.data.evil_model import Evil, Evil_inputs
from thunderlab.core.notes import Notes
from thunderlab.inspect.serialize import SCHEMA_ID

PIPELINE = "dce,cse,autodiff,remat,claim,fuse,del"


def _training_record():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16))
    j = thunderlab.jit(model, pipeline=PIPELINE)
    j(torch.randn(4, 8)).sum().backward()
    return thunderlab.last_record(j)


def _pairs(rec):
    """Every (a, b, trace) the record's steps can be diffed over."""
    traces = ("forward", "backward")
    return [(a, b, t) for a in range(len(rec.steps)) for b in range(len(rec.steps)) for t in traces]


def _diff_or_error(rec, a, b, t, graph=False):
    try:
        d = rec.graph_diff(a, b, t, expand_regions=True) if graph else rec.diff(a, b, t)
    except ValueError as e:
        return f"ValueError: {e}"
    return d


def test_a_loaded_record_equals_the_saved_one(tmp_path):
    rec = _training_record()
    path = thunderlab.save(rec, tmp_path / "mlp.thunderlab.json")
    loaded = thunderlab.load(path)
    assert loaded.loaded and not rec.loaded and loaded.source_file == path
    assert repr(loaded) == repr(rec)
    assert (loaded.name, loaded.inputs, loaded.pipeline, loaded.created, loaded.error) == (
        rec.name, rec.inputs, rec.pipeline, rec.created, rec.error)
    assert loaded.table() == rec.table()
    assert loaded.payload().to_dict() == json.loads(json.dumps(rec.payload().to_dict()))
    assert loaded.payload().summary() == json.loads(json.dumps(rec.payload().summary()))
    assert loaded.timings() == json.loads(json.dumps(rec.timings()))
    for s, t in zip(rec.steps, loaded.steps):
        assert (t.index, t.spec, t.seconds, t.symbols_before, t.symbols_after, t.error) == (
            s.index, s.spec, s.seconds, s.symbols_before, s.symbols_after, s.error)
        assert t.verification == s.verification
        as_saved = json.loads(json.dumps(thunderlab.inspect.serialize.jsonable(s.notes.to_json())))
        assert t.notes == Notes.from_json(as_saved)
        for trace in s.program.traces:
            assert t.python(trace) == s.python(trace)
            g, h = s.graph(trace, expand_regions=True), t.graph(trace)
            assert list(g.nodes) == list(h.nodes)
            assert [(n.label, n.kind, n.executor, n.group) for n in g.nodes.values()] == [
                (n.label, n.kind, n.executor, n.group) for n in h.nodes.values()]
            assert g.edges == h.edges
    # diffs between any two steps, not only neighbours, print as the live record's do
    for a, b, trace in _pairs(rec):
        assert _diff_or_error(loaded, a, b, trace) == _diff_or_error(rec, a, b, trace), (a, b, trace)
    # graph changes between neighbours are the saved ones
    for i in range(1, len(rec.steps)):
        for trace in rec.steps[i].program.traces:
            if trace in rec.steps[i - 1].program.traces:
                assert loaded.graph_diff(i - 1, i, trace) == rec.graph_diff(i - 1, i, trace, expand_regions=True)


def test_kernel_profiles_and_region_timings_survive(tmp_path):
    j = thunderlab.jit(lambda x: (x * 2).sin() + 1, pipeline="dce,cse,claim,fuse,del", timing=True)
    x = torch.randn(64)
    for _ in range(3):
        j(x)
    thunderlab.profile(j, x)
    rec = thunderlab.last_record(j)
    assert rec.kernels, "profiling filed no kernels under the record"
    loaded = thunderlab.load(thunderlab.save(rec, tmp_path / "p.thunderlab.json"))
    assert loaded.kernels == json.loads(json.dumps(rec.kernels))
    assert loaded.timings() == json.loads(json.dumps(rec.timings()))


FRESH = textwrap.dedent("""
    import json, sys
    import thunderlab
    rec = thunderlab.load(sys.argv[1])
    assert "{module}" not in sys.modules
    out = {{"table": rec.table(), "html": rec.to_html(), "payload": rec.payload().to_dict(),
           "programs": [{{t: s.python(t) for t in (s.saved or {{}})}} for s in rec.steps],
           "diffs": [rec.diff(i - 1, i) for i in range(1, len(rec.steps))]}}
    try:
        thunderlab.bisect(rec)
    except thunderlab.NotLive as e:
        out["bisect"] = str(e)
    print(json.dumps(out))
""")


def test_a_record_opens_in_a_fresh_process_without_the_function(tmp_path, monkeypatch):
    module = "saved_record_model_xyz"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent("""
        import torch

        def step(x, w):
            h = torch.tanh(x @ w)
            return (h * h).sum(-1).relu()
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = __import__(module)
    j = thunderlab.jit(mod.step, pipeline=PIPELINE)
    j(torch.randn(3, 5), torch.randn(5, 4, requires_grad=True)).sum().backward()
    rec = thunderlab.last_record(j)
    (tmp_path / "records").mkdir()
    path = thunderlab.save(rec, tmp_path / "records" / "step.thunderlab.json")
    script = tmp_path / "records" / "open.py"
    script.write_text(FRESH.format(module=module))
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    r = subprocess.run([sys.executable, str(script), path], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path / "records", env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["table"] == rec.table()
    assert out["html"] == rec.to_html()  # the page renders from the same payload and view code
    assert out["payload"] == json.loads(json.dumps(rec.payload().to_dict()))
    assert out["programs"] == [{t: s.python(t) for t in s.program.traces} for s in rec.steps]
    assert out["diffs"] == [rec.diff(i - 1, i) for i in range(1, len(rec.steps))]
    assert "bisect needs" in out["bisect"] and "loaded from" in out["bisect"] and "thunderlab.jit" in out["bisect"]


def test_bisect_on_a_loaded_record_says_what_it_needs(tmp_path):
    loaded = thunderlab.load(thunderlab.save(_training_record(), tmp_path / "r.thunderlab.json"))
    with pytest.raises(thunderlab.NotLive, match=r"bisect needs .* loaded from .*r\.thunderlab\.json"):
        thunderlab.bisect(loaded)


def test_rerun_on_a_loaded_record_rebuilds_the_capture_and_uses_fresh_inputs(tmp_path):
    rec = _training_record()
    loaded = thunderlab.load(thunderlab.save(rec, tmp_path / "r.thunderlab.json"))
    new = thunderlab.rerun(loaded, "dce,cse,autodiff,claim,fuse,del")
    assert new.error is None and not new.loaded
    assert new.steps[0].python() == rec.steps[0].python()  # the rebuilt capture prints as the saved one
    assert "fresh inputs of the recorded shapes and dtypes" in new.steps[0].notes["inputs"]
    assert [s.spec for s in new.steps] == ["capture", "dce", "cse", "autodiff", "claim", "fuse", "del"]
    # every step was checked numerically against the captured program on those inputs
    assert all(s.verification.ok and s.verification.max_error is not None for s in new.steps[1:])
    inputs = thunderlab.session(new).example_inputs
    assert [tuple(t.shape) for t in inputs] == [tuple(p.shape) for p in rec.steps[0].program.forward.inputs]
    assert [t.requires_grad for t in inputs] == [d.endswith("requires_grad") for d in rec.inputs]
    cmp = thunderlab.compare(loaded, new, time=True)
    assert "loaded from" in cmp.note and cmp.seconds is None and "+    return ((t19,)" in str(cmp)


def test_rerun_on_a_loaded_record_refuses_what_the_text_cannot_rebuild(tmp_path):
    def f(x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ w
        return y.float().exp()

    j = thunderlab.jit(f, pipeline="dce,del")
    j(torch.randn(4, 4), torch.randn(4, 4))
    loaded = thunderlab.load(thunderlab.save(thunderlab.last_record(j), tmp_path / "a.thunderlab.json"))
    with pytest.raises(ValueError, match=r"calls _autocast_region\w*.* re-run the live record"):
        thunderlab.rerun(loaded)


def _good_file(tmp_path):
    return thunderlab.save(_training_record(), tmp_path / "good.thunderlab.json")


def test_damaged_and_foreign_files_get_clear_errors(tmp_path):
    good = _good_file(tmp_path)
    text = open(good, encoding="utf-8").read()
    payload = json.loads(text)

    def attempt(name, content):
        p = tmp_path / name
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
        with pytest.raises(thunderlab.RecordFileError) as e:
            thunderlab.load(p)
        assert "\n" not in str(e.value)
        return str(e.value)

    assert "ends early (truncated?)" in attempt("cut.thunderlab.json", text[: len(text) // 2])
    assert "is not valid JSON" in attempt("junk.thunderlab.json", "{{{ not json")
    assert "not UTF-8" in attempt("bin.thunderlab.json", b"\xff\xfe\x00garbage")
    future = attempt("future.thunderlab.json", json.dumps({**payload, "schema": "thunderlab.record/v2"}))
    assert "'thunderlab.record/v2'" in future and "newer" in future and SCHEMA_ID in future
    assert "not a thunderlab record" in attempt("other.thunderlab.json", json.dumps({"format": "something else"}))
    assert "'vega/v5'" in attempt("vega.thunderlab.json", json.dumps({**payload, "schema": "vega/v5"}))
    assert "not a thunderlab record" in attempt("list.thunderlab.json", "[1, 2, 3]")
    broken = {**payload, "steps": [{**payload["steps"][0], "seconds": "fast"}]}
    assert "schema at steps/0/seconds" in attempt("bad.thunderlab.json", json.dumps(broken))
    with pytest.raises(thunderlab.RecordFileError, match=r"record files are named NAME\.thunderlab\.json"):
        thunderlab.load(tmp_path / "good.json")
    with pytest.raises(thunderlab.RecordFileError, match="no file"):
        thunderlab.load(tmp_path / "missing.thunderlab.json")
    with pytest.raises(thunderlab.RecordFileError, match=r"record files are named"):
        thunderlab.save(thunderlab.load(good), tmp_path / "x.json")


def test_markup_in_a_loaded_record_stays_text(tmp_path):
    j = thunderlab.jit(Evil(), pipeline="dce,cse,claim,del")
    j(*Evil_inputs())
    rec = thunderlab.last_record(j)
    rec.name = '<script>alert("name")</script>'
    loaded = thunderlab.load(thunderlab.save(rec, tmp_path / "evil.thunderlab.json"))
    page = loaded.to_html()
    assert loaded.name == rec.name and "</script><script>window.__pwned" in loaded.steps[1].python()
    assert "<script>alert" not in page and "window.__pwned = 1</script>" not in page
    assert page == rec.to_html()


@pytest.mark.parametrize("name", ["cnn", "llama_block"])
def test_loaded_example_models_rerun_from_their_saved_text(tmp_path, name):
    from thunderlab.examples import EXAMPLES

    model, args = EXAMPLES[name]()
    j = thunderlab.jit(model)
    j(*args)
    rec = thunderlab.last_record(j)
    new = thunderlab.rerun(thunderlab.load(thunderlab.save(rec, tmp_path / f"{name}.thunderlab.json")))
    assert new.error is None
    assert new.steps[0].python() == rec.steps[0].python()  # ltorch names that are also ops modules included
    # each call's source comes from the payload's line map, module scope included (the text does not print it)
    scopes = [(b.source.line, b.source.scope) for b in rec.steps[0].program.forward.bound_symbols]
    assert [(b.source.line, b.source.scope) for b in new.steps[0].program.forward.bound_symbols] == scopes
    assert any(scope for _, scope in scopes)
    assert [s.spec for s in new.steps] == [s.spec for s in rec.steps]
    assert all(s.verification.ok for s in new.steps)


def test_a_loaded_embedding_reruns(tmp_path):
    emb = torch.nn.Embedding(10, 4)
    j = thunderlab.jit(lambda idx: emb(idx).sum(0))
    j(torch.tensor([1, 2, 3]))
    rec = thunderlab.last_record(j)
    assert "ltorch.embedding(" in rec.steps[0].python()  # a name thunderlab.ops also has as a module
    new = thunderlab.rerun(thunderlab.load(thunderlab.save(rec, tmp_path / "emb.thunderlab.json")))
    assert new.steps[0].python() == rec.steps[0].python() and new.error is None
    # fresh indices of the recorded dtype, in range (ones)
    assert thunderlab.session(new).example_inputs[1].dtype == torch.int64
