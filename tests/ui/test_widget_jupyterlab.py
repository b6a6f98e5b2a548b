"""The PassDebugger widget in a real JupyterLab server and a real browser: it renders, and its clicks reach the
kernel."""

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.ui.conftest import jupyterlab_server

NOTEBOOK = Path(__file__).parents[2] / "notebooks" / "pass_debugger.ipynb"
# a debugger whose payload is then broken from Python: one step's traces a number
BAD = ("import torch, thunderlab\n"
       "from thunderlab.widgets import PassDebugger\n"
       "def f(x):\n    return (x * 2).sin()\n"
       "jf = thunderlab.jit(f, pipeline='dce,cse,del')\n"
       "jf(torch.randn(3))\n"
       "dbg = PassDebugger(jf)\n"
       "bad = {**dbg.payload, 'steps': [dict(s) for s in dbg.payload['steps']]}\n"
       "bad['steps'][1]['traces'] = 5\n"
       "dbg.payload = bad\n"
       "dbg")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab")
    env = dict(os.environ)
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        d = root / var.lower()
        d.mkdir()
        env[var] = str(d)
    env["THUNDERLAB_EXECUTORS"] = "torch"
    work = root / "work"
    work.mkdir()
    shutil.copy(NOTEBOOK, work / NOTEBOOK.name)
    (work / "bad.ipynb").write_text(json.dumps({
        "cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": BAD}],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4, "nbformat_minor": 5}))
    with jupyterlab_server(work, env) as server:
        yield server


def test_widget_renders_and_talks_to_the_kernel(lab, page):
    url, token = lab
    page.set_default_timeout(60_000)
    page.goto(f"{url}/lab/tree/{NOTEBOOK.name}?token={token}")
    page.wait_for_selector(".jp-Notebook")
    page.wait_for_selector(".jp-Notebook .jp-Cell")
    page.get_by_text("| Idle").first.wait_for()  # the kernel is up
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    try:
        page.locator(".thunderlab[data-step]").first.wait_for(state="attached")
    except Exception:
        outs = page.locator(".jp-OutputArea-output").all_text_contents()
        pytest.fail(f"the widget did not render; outputs: {[o[:300] for o in outs]}; page errors: {page.errors}")
    page.wait_for_function("document.querySelector('.thunderlab[data-step]') && "
                           "document.querySelector('.thunderlab[data-step]').getAttribute('data-step') === '1'")
    # the notebook's last cells moved it to step 1 and set an error; now the browser drives it
    page.locator(".thunderlab").first.scroll_into_view_if_needed()
    steps = page.locator(".thunderlab .tl-step")
    assert steps.count() == 4  # capture, dce, claim, del after the re-run
    steps.nth(2).click()
    page.wait_for_function("document.querySelector('.thunderlab[data-step]').getAttribute('data-step') === '2'")
    assert "ltorch" in page.locator(".thunderlab pre.tl-program").first.text_content()
    page.locator(".thunderlab .tl-prev").first.click()
    page.wait_for_function("document.querySelector('.thunderlab[data-step]').getAttribute('data-step') === '1'")
    box = page.locator(".thunderlab input.tl-pipeline").first
    box.fill("dce,cse,claim,del")
    page.locator(".thunderlab .tl-rerun").first.click()
    page.wait_for_function("document.querySelectorAll('.thunderlab .tl-step').length === 5")
    assert "unknown pass" not in (page.locator(".thunderlab .tl-error").first.text_content() or "")


def test_a_malformed_payload_shows_what_is_wrong_in_the_cell(lab, page):
    url, token = lab
    page.set_default_timeout(60_000)
    page.goto(f"{url}/lab/tree/bad.ipynb?reset&token={token}")  # reset: the other test's notebook stays closed
    page.locator(".lm-TabBar-tab.lm-mod-current", has_text="bad.ipynb").first.wait_for()
    page.wait_for_selector(".jp-Notebook .jp-Cell")
    page.get_by_text("| Idle").first.wait_for()
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    panel = page.locator(".jp-OutputArea-output .tl-problems")
    try:
        panel.wait_for()
    except Exception:
        outs = page.locator(".jp-OutputArea-output").all_text_contents()
        pytest.fail(f"no problems panel; outputs: {[o[:300] for o in outs]}; page errors: {page.errors}")
    assert panel.locator(".tl-problems-title").inner_text().startswith("thunderlab cannot show this record")
    assert panel.locator("li").all_inner_texts() == [
        "steps[1].traces: expected null or an object (name → a trace), got the number 5"]
    assert page.errors == []
