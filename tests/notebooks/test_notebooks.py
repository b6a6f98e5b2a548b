"""The notebooks run top to bottom in a real kernel (nbclient); their own cells assert what they show."""
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("*.ipynb"))


@pytest.fixture
def jupyter_env(tmp_path, monkeypatch):
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        d = tmp_path / var.lower()
        d.mkdir()
        monkeypatch.setenv(var, str(d))
    monkeypatch.setenv("THUNDERLAB_EXECUTORS", os.environ.get("THUNDERLAB_EXECUTORS", "torch"))
    return tmp_path


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, jupyter_env):
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(jupyter_env)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    if path.name == "pass_debugger.ipynb":
        views = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
        assert len(views) == 1  # the debugger displayed as a live widget
        text = "".join(o.get("text", "") for o in outputs)
        assert "at step 2 cse" in text and "reused passes: 1" in text


def test_there_are_notebooks():
    names = {p.name for p in NOTEBOOKS}
    assert {"pass_debugger.ipynb", "gpt2_from_config.ipynb", "llama_block.ipynb", "cnn.ipynb",
            "training_loop.ipynb"} <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_without_outputs(path):
    """What a reader sees is never stale: outputs come from running the notebook, not from the repository."""
    code = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code)
    if path.name != "pass_debugger.ipynb":  # the model demos end with their report
        assert "to_html(" in code[-1].source
