"""Saved records opened from JupyterLab's file browser, in a real JupyterLab and Chromium, with no kernel.

A GPT-2 training record and a small MLP record are written to a folder the way a training job leaves
them; double-clicking one in the file browser opens a tab with its passes, programs and diffs, the
folder is browsed record by record, a broken file says what is wrong, and the server never starts a
kernel (its REST API lists none).
"""
import json
import os
import urllib.request
from pathlib import Path

import pytest
import torch

import thunderlab
from tests.ui.conftest import jupyterlab_server, lab_home

REPO = Path(__file__).parents[2]
LABEXT = REPO / "thunderlab" / "jupyter" / "labextension"
ARTIFACTS = Path(os.environ.get("THUNDERLAB_UI_ARTIFACTS", REPO / "build" / "ui-artifacts"))


def _gpt2_training_record():
    pytest.importorskip("transformers")
    from thunderlab.examples import gpt2_from_config

    model = gpt2_from_config(n_layer=1, n_embd=32, n_head=2, vocab_size=64).train()
    jm = thunderlab.jit(model)
    ids = torch.randint(0, 64, (2, 8))
    before = len(thunderlab.records())
    jm(input_ids=ids, labels=ids).loss.backward()
    # TorchDynamo hands over the model and its loss as separate graphs: the model's is the largest record
    return max(thunderlab.records()[before:], key=lambda r: len(r.steps[0].python()))


def _mlp_record():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    jm = thunderlab.jit(model, pipeline="dce,cse,claim,fuse,del")
    jm(torch.randn(2, 8))
    return thunderlab.last_record(jm)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("documents")
    env, _ = lab_home(root, LABEXT)
    work = root / "work"
    records = work / "records"
    records.mkdir(parents=True)
    gpt2 = _gpt2_training_record()
    thunderlab.save(gpt2, records / "0001-gpt2.thunderlab.json")
    thunderlab.save(_mlp_record(), records / "0002-mlp.thunderlab.json")
    (work / "broken.thunderlab.json").write_text('{"schema": "thunderlab.record/v1", "name": "cut')
    with jupyterlab_server(work, env, "--LabApp.expose_app_in_browser=True") as (url, token):
        yield url, token, gpt2


@pytest.fixture(scope="module")
def lab_page(lab, browser):
    url, token, _ = lab
    ctx = browser.new_context(record_video_dir=None, viewport={"width": 1400, "height": 900})
    page = ctx.new_page()
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.set_default_timeout(60_000)
    page.goto(f"{url}/lab/tree/records?token={token}")
    page.wait_for_function("window.jupyterapp && window.jupyterapp.started")
    yield page
    ctx.close()


def _kernels(url, token) -> list:
    with urllib.request.urlopen(f"{url}/api/kernels?token={token}", timeout=5) as r:
        return json.loads(r.read())


def _open_from_file_browser(page, name):
    item = page.locator(f".jp-DirListing-item[title*='{name}']").first
    item.wait_for()
    item.dblclick()
    doc = page.locator(".jp-MainAreaWidget.tl-doc-widget:not(.lm-mod-hidden) .tl-doc")
    doc.wait_for()
    return doc


def test_a_saved_training_record_opens_from_the_file_browser_without_a_kernel(lab, lab_page):
    url, token, gpt2 = lab
    page = lab_page
    doc = _open_from_file_browser(page, "0001-gpt2.thunderlab.json")
    page.wait_for_function("document.querySelector('.tl-doc').dataset.state === 'ready'")
    # its passes, one row each, as the record has them
    steps = doc.locator(".tl-step")
    assert steps.count() == len(gpt2.steps)
    table = doc.locator(".tl-steps, table").first.inner_text()
    for name in ("autodiff", "fuse", "del"):
        assert name in table
    # a program: the last step's, as runnable Python
    assert "def forward" in doc.locator("pre.tl-program").first.inner_text()
    # a diff: cse's or claim's step against the one before
    k = next(i for i, s in enumerate(gpt2.steps) if s.spec.startswith("claim"))
    steps.nth(k).click()
    doc.locator("button[data-tab=Diff]").first.click()
    assert doc.locator(".tl-cd-summary, .tl-diff").first.inner_text().strip()
    assert "record 1 of 2 in records" in doc.locator(".tl-doc-where").inner_text()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "record-document.png"))
    assert _kernels(url, token) == []  # nothing started a kernel
    assert page.errors == []


def test_the_folder_is_browsed_record_by_record(lab, lab_page):
    url, token, _ = lab
    page = lab_page
    doc = page.locator(".jp-MainAreaWidget.tl-doc-widget:not(.lm-mod-hidden) .tl-doc")
    doc.wait_for()
    doc.locator(".tl-doc-nav", has_text="next").click()
    page.wait_for_function("[...document.querySelectorAll('.tl-doc-where')]"
                           ".some(e => e.textContent.includes('record 2 of 2') && e.offsetParent !== null)")
    shown = page.locator(".jp-MainAreaWidget.tl-doc-widget:not(.lm-mod-hidden) .tl-doc")
    assert shown.locator(".tl-step").count() == 6  # capture, then dce, cse, claim, fuse, del
    assert shown.locator(".tl-doc-nav", has_text="next").is_disabled()
    assert _kernels(url, token) == []
    assert page.errors == []


def test_a_broken_record_says_what_is_wrong(lab, lab_page):
    url, token, _ = lab
    page = lab_page
    page.evaluate("window.jupyterapp.commands.execute('docmanager:open', {path: 'broken.thunderlab.json'})")
    problem = page.locator(".jp-MainAreaWidget.tl-doc-widget:not(.lm-mod-hidden) .tl-problems")
    problem.wait_for()
    title = problem.locator(".tl-problems-title").inner_text()
    assert title.startswith("thunderlab cannot show broken.thunderlab.json"), title
    [line] = problem.locator("li").all_inner_texts()
    assert line.startswith("the record: expected a thunderlab record as JSON text, got text that is not JSON"), line
    assert _kernels(url, token) == []
    assert page.errors == []
