"""The command line, run as a user runs it."""
import subprocess
import sys


def _run(*args):
    return subprocess.run([sys.executable, "-m", "thunderlab", *args], capture_output=True, text=True, timeout=300)


def test_demo_prints_pass_table_and_program():
    r = _run("demo", "--example", "mlp", "--out", "")
    assert r.returncode == 0, r.stderr
    for word in ["capture", "dce", "cse", "claim", "del", "def forward(", "ltorch.linear("]:
        assert word in r.stdout
    # the MLP's exact GELU runs on ATen's own kernel, eager's on oneDNN: equal to float32 rounding
    err = float(r.stdout.split("max |thunderlab - eager| = ")[1].split()[0])
    assert err < 1e-6


def test_passes_lists_registry_with_summaries():
    r = _run("passes")
    assert r.returncode == 0
    assert "claim" in r.stdout and "options: executors" in r.stdout and "Dead-code elimination" in r.stdout
    # one column for the summaries and options, however long the longest name (channels-last, sink-waits)
    lines = r.stdout.splitlines()
    starts = {len(line) - len(line.split(maxsplit=1)[1]) for line in lines if not line.startswith(" ")}
    assert len(starts) == 1, starts
    assert all(line.index("options:") in starts for line in lines if line.startswith(" "))


def test_bad_pipeline_on_the_command_line():
    r = _run("demo", "--pipeline", "dce,frobnicate")
    assert r.returncode != 0 and "unknown pass 'frobnicate'" in r.stderr


def test_demo_writes_the_html_report(tmp_path):
    out = tmp_path / "demo.html"
    r = _run("demo", "--example", "mlp", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert f"HTML report of every step: {out}" in r.stdout
    assert 'id="thunderlab-payload"' in out.read_text()


def test_report_command_follows_the_file_convention(tmp_path):
    from pathlib import Path

    model = Path(__file__).parent / "data" / "evil_model.py"
    out, js = tmp_path / "r.html", tmp_path / "r.json"
    r = _run("report", f"{model}:Evil", "--out", str(out), "--json", str(js), "--pipeline", "dce,cse,claim,del")
    assert r.returncode == 0, r.stderr
    assert f"HTML report: {out}" in r.stdout and "cse" in r.stdout
    import json

    payload = json.loads(js.read_text())
    assert payload["name"] == "Evil"
    assert [s["spec"] for s in payload["steps"]] == ["capture", "dce", "cse", "claim", "del"]
    r = _run("report", f"{model}:plain", "--out", str(out))  # a function with example_inputs()
    assert r.returncode == 0, r.stderr


def test_report_command_bad_targets(tmp_path):
    from pathlib import Path

    model = Path(__file__).parent / "data" / "evil_model.py"
    r = _run("report", f"{model}:nothing")
    assert r.returncode != 0 and "has no 'nothing'" in r.stderr and "plain" in r.stderr
    r = _run("report", "missing.py:f")
    assert r.returncode != 0 and "no file 'missing.py'" in r.stderr
    r = _run("report", "model_without_colon")
    assert r.returncode != 0 and "expected FILE.py:FUNCTION" in r.stderr


def test_passes_json():
    import json

    r = _run("passes", "--json")
    assert r.returncode == 0
    entries = {e["name"]: e for e in json.loads(r.stdout)}
    assert ("executors" in entries["claim"]["options"] and entries["del"]["last"]
            and entries["remat"]["requires"] == ["autodiff"])


def _one_line_error(r, *needles):
    assert r.returncode != 0
    assert "Traceback" not in r.stderr, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip() and "Warning" not in line]
    assert len(lines) == 1, r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_cli_mistakes_get_one_line_errors(tmp_path):
    """Every mistake a user can make on the command line gets one line that says what to do."""
    import os

    broken = tmp_path / "broken.py"
    broken.write_text("import torch\n\ndef f(x):\n    return x +\n")
    raises = tmp_path / "raises.py"
    raises.write_text("import torch\n\nraise RuntimeError('no data here')\n")
    bad_inputs = tmp_path / "bad_inputs.py"
    bad_inputs.write_text(
        "import torch\n\ndef f(x):\n    return x * 2\n\ndef f_inputs():\n    return torch.load('nope.pt')\n"
    )
    wrong_shape = tmp_path / "wrong_shape.py"
    wrong_shape.write_text("import torch\n\ndef f(x, y):\n    return x @ y\n\n"
                           "def f_inputs():\n    return torch.randn(2, 3), torch.randn(2, 3)\n")
    ok = tmp_path / "ok.py"
    ok.write_text("import torch\n\ndef f(x):\n    return x * 2\n\ndef f_inputs():\n    return torch.randn(3)\n")
    _one_line_error(_run("report", f"{broken}:f"), "broken.py raised SyntaxError while loading (broken.py:4)")
    _one_line_error(_run("report", f"{raises}:f"), "raises.py raised RuntimeError while loading (raises.py:3): no data")
    _one_line_error(_run("report", f"{bad_inputs}:f"), "f_inputs() in", "raised FileNotFoundError (bad_inputs.py:7)")
    _one_line_error(_run("report", f"{wrong_shape}:f"), "raised RuntimeError on its example inputs", "wrong_shape.py:4")
    _one_line_error(_run("report", f"{ok}:f", "--pipeline", "dce,claim{decompose=gleu},del"), "did you mean", "gelu")
    _one_line_error(_run("report", f"{ok}:f", "--out", str(tmp_path / "no" / "dir" / "r.html")), "No such file")
    _one_line_error(_run("report", "nofile.py:f"), "no file 'nofile.py'")
    _one_line_error(_run("report", "notpython:f"), "expected FILE.py:FUNCTION")
    env = dict(os.environ, THUNDERLAB_EXECUTORS="cuda")
    r = subprocess.run([sys.executable, "-m", "thunderlab", "report", f"{ok}:f"], capture_output=True, text=True,
                       timeout=300, env=env)
    _one_line_error(r, "THUNDERLAB_EXECUTORS='cuda' names unknown executor 'cuda'")


def test_report_over_a_folder_of_records(tmp_path):
    import json

    import torch

    import thunderlab

    folder = tmp_path / "records"
    folder.mkdir()
    j = thunderlab.jit(lambda x: (x * 3).relu())
    j(torch.randn(4))
    rec = thunderlab.last_record(j)
    thunderlab.save(rec, folder / "a.thunderlab.json")
    rec.name = "<script>alert('x')</script>"
    thunderlab.save(rec, folder / "b.thunderlab.json")
    good = (folder / "a.thunderlab.json").read_text()
    (folder / "cut.thunderlab.json").write_text(good[:100])
    payload = json.loads(good)
    (folder / "future.thunderlab.json").write_text(json.dumps({**payload, "schema": "thunderlab.record/v9"}))
    (folder / "<img src=x onerror=alert(1)>.thunderlab.json").write_text("{}")
    (folder / "nan.thunderlab.json").write_text(good.replace('"created": ', '"created": NaN, "x": ', 1))
    (folder / "far.thunderlab.json").write_text(json.dumps({**payload, "created": 1e300}))
    r = _run("report", str(folder))
    assert r.returncode == 1, r.stderr  # the site is written; the unreadable files are named
    index = (folder / "report" / "index.html").read_text()
    assert "3 records" in index and "4 files that are not readable records" in index
    assert "holds NaN, which JSON does not allow" in index and "1e+300" in index
    assert "ends early (truncated?)" in index and "thunderlab.record/v9" in index and "newer" in index
    assert "<script>alert" not in index and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in index
    assert "<img src=x" not in index and "&lt;img src=x onerror=alert(1)&gt;.thunderlab.json" in index
    pages = sorted((folder / "report").glob("record-*.html"))
    assert len(pages) == 3 and (folder / "report" / "views.js").exists()
    for page in pages:
        text = page.read_text()
        assert '<script src="views.js"></script>' in text and "<script>alert" not in text
        assert f'href="{page.name}"' in index
    assert "skipped cut.thunderlab.json" in r.stderr
    out = tmp_path / "site"
    r = _run("report", str(folder), "--out", str(out))
    assert (out / "index.html").exists()
    r = _run("report", str(tmp_path / "empty_dir_that_is_not_there.thunderlab.json"))
    assert r.returncode != 0 and "no file" in r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    r = _run("report", str(empty))
    assert r.returncode == 0
    assert "no <code>*.thunderlab.json</code> files" in (empty / "report" / "index.html").read_text()


def test_report_of_one_saved_record(tmp_path):
    import torch

    import thunderlab

    j = thunderlab.jit(lambda x: x.exp() - 1)
    j(torch.randn(3))
    path = thunderlab.save(thunderlab.last_record(j), tmp_path / "one.thunderlab.json")
    r = _run("report", path, "--out", str(tmp_path / "one.html"))
    assert r.returncode == 0, r.stderr
    assert " step  pass" in r.stdout and 'id="thunderlab-payload"' in (tmp_path / "one.html").read_text()


NOTHING = """import torch

def const(x):
    return 3

def same(x):
    return x

def nothing(x):
    x.shape

number = 5

class Needs(torch.nn.Module):
    def __init__(self, width):
        super().__init__()

class NotAModule:
    pass

def example_inputs():
    return torch.randn(3)
"""


def test_a_function_with_nothing_to_compile_is_one_line(tmp_path):
    model = tmp_path / "nothing.py"
    model.write_text(NOTHING)
    expected = "expected a function or nn.Module that computes with tensors"
    _one_line_error(_run("report", f"{model}:const"), "nothing.py:const gave TorchDynamo no tensor operation",
                    "it returned an int, 3", expected)
    _one_line_error(_run("report", f"{model}:same"), "it returned its input unchanged", expected)
    _one_line_error(_run("report", f"{model}:nothing"), "it returned None", expected)


def test_a_target_that_cannot_be_called_is_one_line(tmp_path):
    model = tmp_path / "nothing.py"
    model.write_text(NOTHING)
    _one_line_error(_run("report", f"{model}:number"), "nothing.py:number is an int, not something to compile",
                    "expected a function, an nn.Module")
    _one_line_error(_run("report", f"{model}:NotAModule"), "is a class that is not an nn.Module")
    _one_line_error(_run("report", f"{model}:Needs"), "nn.Module class that cannot be built with no arguments",
                    "missing 1 required positional argument: 'width'", "Needs(...)")
    (tmp_path / "dir.py").mkdir()
    _one_line_error(_run("report", f"{tmp_path}/dir.py:f"), "no file", "(it is a directory)")


def test_bad_arguments_are_one_line(tmp_path):
    ok = tmp_path / "ok.py"
    ok.write_text("import torch\n\ndef f(x):\n    return x * 2\n\ndef f_inputs():\n    return torch.randn(3)\n")
    _one_line_error(_run(), "the following arguments are required: command", "see 'thunderlab --help'")
    _one_line_error(_run("report"), "the following arguments are required: target")
    _one_line_error(_run("demo", "--example", "bogus"), "invalid choice: 'bogus'", "mlp")
    _one_line_error(_run("demo", "--wait", "-1"), "expected 0 or more seconds, got '-1'")
    _one_line_error(_run("demo", "--wait", "soon"), "expected a number of seconds, got 'soon'")
    _one_line_error(_run("frobnicate"), "invalid choice: 'frobnicate'")
    _one_line_error(_run("report", f"{ok}:f", "--json", str(tmp_path / "no" / "r.json"), "--out",
                         str(tmp_path / "r.html")), "No such file", "r.json")
    _one_line_error(_run("report", f"{ok}:f", "--pipeline", "dce,del,cse"), "pass 'del' must be the last pass")


REFUSES = """import torch
from dataclasses import dataclass
import thunderlab

def f(x):
    return x.cumsum(0)

def f_inputs():
    return torch.randn(3)

@thunderlab.register_pass
@dataclass(frozen=True)
class Refuses(thunderlab.Pass):
    "Refuses every program (for tests)."
    name = "refuses"

    def __call__(self, program):
        raise ValueError("not this program")
"""


def test_a_pipeline_a_pass_refuses_is_one_line_after_the_table(tmp_path):
    ok = tmp_path / "ok.py"
    ok.write_text(REFUSES)
    r = _run("report", f"{ok}:f", "--pipeline", "dce,refuses,del", "--out", str(tmp_path / "r.html"))
    _one_line_error(r, "compilation failed: pass 'refuses' (step 2) raised ValueError", "not this program")
    assert "dce" in r.stdout and (tmp_path / "r.html").exists()  # the report keeps every step before it


def test_debug_shows_the_traceback_behind_the_line(tmp_path):
    bad_inputs = tmp_path / "bad_inputs.py"
    bad_inputs.write_text(
        "import torch\n\ndef f(x):\n    return x * 2\n\ndef f_inputs():\n    return torch.load('nope.pt')\n"
    )
    r = _run("report", f"{bad_inputs}:f", "--debug")
    assert r.returncode == 2 and "Traceback (most recent call last)" in r.stderr, r.stderr
    assert "bad_inputs.py\", line 7, in f_inputs" in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("thunderlab report: f_inputs() in")


def test_an_internal_error_is_one_line_that_points_at_debug(monkeypatch, capsys):
    from thunderlab import cli

    def broken(args):
        raise KeyError("a bug of ours")

    monkeypatch.setattr(cli, "passes", broken)
    assert cli.main(["passes"]) == 1
    err = capsys.readouterr().err
    assert err.strip() == ("thunderlab passes: internal error, KeyError: 'a bug of ours'; "
                           "rerun with --debug for the traceback")
    assert cli.main(["passes", "--debug"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "in broken" in err


def test_demo_with_a_pipeline_a_pass_refuses_prints_the_table_then_one_line():
    from thunderlab.executors.nvfuser import available

    if available()[0]:
        import pytest

        pytest.skip("nvFuser runs here, so claim{executors=nvfuser} refuses nothing")
    r = _run("demo", "--example", "mlp", "--out", "", "--pipeline", "claim{executors=nvfuser},del")
    _one_line_error(r, "thunderlab demo: compilation failed: pass 'claim' (step 1) raised ClaimError",
                    "add 'torch' to the executors")
    assert "capture" in r.stdout and "ERROR" in r.stdout
