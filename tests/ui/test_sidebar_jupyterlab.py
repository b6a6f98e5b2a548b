"""The JupyterLab sidebar in a real JupyterLab server and Debian's headless Chromium.

A notebook compiles a small program; the sidebar lists the record as it appears, steps through
passes, refuses a dragged pass order with the parser's own words, re-runs an edited pipeline,
streams timings while a cell keeps calling, shows a name with markup as text, and reconnects
after a kernel restart. Screenshots land in build/ui-artifacts (THUNDERLAB_UI_ARTIFACTS).
"""
import json
import os
import time
from pathlib import Path

import pytest

from tests.ui.conftest import jupyterlab_server, lab_home

REPO = Path(__file__).parents[2]
LABEXT = REPO / "thunderlab" / "jupyter" / "labextension"
ARTIFACTS = Path(os.environ.get("THUNDERLAB_UI_ARTIFACTS", REPO / "build" / "ui-artifacts"))
EVIL = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'

CELLS = [
    # 0: compile; the fusing test executor runs its regions with torch, so no compiler is needed
    f"import sys; sys.path.insert(0, {str(REPO)!r})\n"
    "import torch, thunderlab\n"
    "from tests.executors.test_fusion import PIPE\n"
    "def block(x, w):\n"
    "    a = torch.sin(x) * 2 + 1\n"
    "    m = a @ w\n"
    "    return torch.tanh(m) * torch.cos(a).sum()\n"
    "jf = thunderlab.jit(block, pipeline=PIPE, timing=True)\n"
    "x, w = torch.randn(8, 8), torch.randn(8, 8)\n"
    "jf(x, w).shape",
    # 1: a function whose name is markup
    "def evil(x):\n    return x * 3 + 1\n"
    f"evil.__name__ = {EVIL!r}\n"
    "thunderlab.jit(evil, pipeline=PIPE)(x).shape",
    # 2: keep calling the program for a few seconds
    "import time\nfor _ in range(250):\n    jf(x, w)\n    time.sleep(0.02)",
    # 3: a record whose inputs are gone: it was called on a tensor nobody keeps
    "import gc\n"
    "def gone(t):\n    return t * 2 + 1\n"
    "jgone = thunderlab.jit(gone, pipeline=PIPE)\n"
    "jgone(torch.randn(3))\n"
    "thunderlab.session(thunderlab.records()[-1]).wait(30); gc.collect()",
    # 4: the kernel answers malformed data for two records: a summary with a step cut short, traces that are a number
    "from thunderlab.jupyter import comm\n"
    "def _summary(self, record, _real=comm.Handler._record_summary):\n"
    "    d = _real(self, record)\n"
    "    if d['payload']['name'] == 'cut_short':\n"
    "        d['payload']['steps'][1] = {'index': 1, 'spec': 'dce'}\n"
    "    return d\n"
    "def _traces(self, record, step, _real=comm.Handler._step_traces):\n"
    "    d = _real(self, record, step)\n"
    "    if self._payload(record).record.name == 'bad_traces':\n"
    "        d['traces'] = 5\n"
    "    return d\n"
    "comm.Handler._record_summary, comm.Handler._step_traces = _summary, _traces\n"
    "def cut_short(x):\n    return x * 3 + 1\n"
    "def bad_traces(x):\n    return x * 4 + 1\n"
    "thunderlab.jit(cut_short, pipeline=PIPE)(x).shape, thunderlab.jit(bad_traces, pipeline=PIPE)(x).shape",
    # 5: a branch on a tensor's value breaks TorchDynamo's graph; another input size compiles the function again
    "def gated(x):\n    h = torch.relu(x)\n    if h.mean() > 0.1:\n        h = h * 2\n    return h.sum()\n"
    "jg = thunderlab.jit(gated, pipeline=PIPE)\n"
    "jg(torch.randn(8)), jg(torch.randn(9))\n"
    "[r.name for r in jg.records]",
    # 6: sizes that change on every call, as a generation's growing cache: past the limit, calls run as captured
    "def decode(cache):\n    return torch.tanh(cache).sum(0)\n"
    "jd = thunderlab.jit(decode, pipeline=PIPE)\n"
    "with torch.no_grad():\n    for n in range(2, 42):\n        jd(torch.randn(n, 4))\n"
    "jd.cache_info['ran_as_captured']",
]


def _notebook() -> dict:
    cell = lambda src: {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": src}  # noqa: E731
    return {
        "cells": [cell(c) for c in CELLS],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("sidebar")
    env, _ = lab_home(root, LABEXT)
    work = root / "work"
    work.mkdir()
    (work / "sidebar.ipynb").write_text(json.dumps(_notebook()))
    with jupyterlab_server(work, env, "--LabApp.expose_app_in_browser=True") as server:
        yield server


@pytest.fixture(scope="module")
def lab_page(lab, browser):
    url, token = lab
    ctx = browser.new_context(record_video_dir=None, viewport={"width": 1500, "height": 1000})
    page = ctx.new_page()
    page.errors = []
    page.console = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("console", lambda m: page.console.append(f"{m.type}: {m.text}"))
    page.set_default_timeout(60_000)
    page.goto(f"{url}/lab/tree/sidebar.ipynb?token={token}")
    page.wait_for_function("window.jupyterapp && window.jupyterapp.started")
    page.wait_for_selector(".jp-Notebook .jp-Cell")
    page.get_by_text("| Idle").first.wait_for()
    page.evaluate("window.jupyterapp.shell.activateById('thunderlab-sidebar')")
    # a sidebar about 500 px wide, as a user would drag it
    page.evaluate("(() => { const s = window.jupyterapp.shell; s.collapseLeft(); "
                  "s._hsplitPanel.setRelativeSizes([0, 0.64, 0.36]); })()")
    yield page
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "lab-last.png"))  # the whole window as the tests left it
    (ARTIFACTS / "console.txt").write_text("\n".join(page.console + page.errors))
    ctx.close()


def _shot(page, name):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator("#thunderlab-sidebar").screenshot(path=str(ARTIFACTS / f"sidebar-{name}.png"))


def _run_cell(page, i):
    page.evaluate("""(i) => {
        const nb = window.jupyterapp.shell.currentWidget.content;
        nb.activeCellIndex = i;
        void window.jupyterapp.commands.execute('notebook:run-cell');  // not awaited: the cell may run long
    }""", i)


def _wait_value(page, selector, ok, timeout=20):
    deadline = time.time() + timeout
    while True:
        value = page.locator(selector).input_value()
        if ok(value):
            return value
        if time.time() > deadline:
            pytest.fail(f"{selector} is {value!r}")
        time.sleep(0.2)


def _state(page):
    return page.locator(".tl-link-status").get_attribute("data-state")


def _wait_state(page, state, timeout=60):
    page.wait_for_function(
        f"document.querySelector('.tl-link-status')?.dataset.state === '{state}'", timeout=timeout * 1000
    )


def test_the_sidebar_says_when_thunderlab_is_not_imported(lab_page):
    _wait_state(lab_page, "not-imported")
    assert "has not imported thunderlab" in lab_page.locator(".tl-link-status").text_content()


def test_a_compile_appears_and_passes_step(lab_page):
    page = lab_page
    _run_cell(page, 0)
    try:
        page.locator(".tl-record", has_text="block").first.wait_for(timeout=30_000)
    except Exception:
        pytest.fail(f"no record listed; console: {page.console[-30:]}; errors: {page.errors}")
    _wait_state(page, "ready")
    page.locator(".tl-pass[data-step]").first.wait_for()
    # opens at the last step; click a pass, then move with the keyboard
    page.locator('.tl-pass[data-step="2"]').click()
    page.wait_for_function("document.querySelector('.tl-step-head')?.textContent.startsWith('step 2 of')")
    page.locator(".tl-pipeline-editor").press("ArrowDown")
    page.wait_for_function("document.querySelector('.tl-step-head')?.textContent.startsWith('step 3 of')")
    page.locator(".tl-pipeline-editor").press("k")
    page.wait_for_function("document.querySelector('.tl-step-head')?.textContent.startsWith('step 2 of')")
    assert page.locator('.tl-pass[data-step="2"]').get_attribute("class").count("tl-selected") == 1
    # the program is in JupyterLab's editor, highlighted as Python
    page.locator(".tl-editor .cm-content").wait_for()
    text = page.locator(".tl-editor .cm-content").inner_text()
    assert "def forward" in text
    assert page.locator(".tl-editor .cm-content span").count() > 5, "no syntax highlighting"
    _shot(page, "program")
    # a program line is linked to the line of the notebook that made it; the link opens that cell
    page.locator(".tl-editor .cm-line", has_text="ltorch.sin(").first.click()
    link = page.locator(".tl-source-bar .tl-source-link")
    link.wait_for()
    assert link.inner_text().startswith("cell [1]"), link.inner_text()
    assert "torch.sin(x)" in page.locator(".tl-source-bar .tl-source-code").inner_text()
    page.evaluate("window.jupyterapp.shell.currentWidget.content.activeCellIndex = 2")
    link.click()
    page.wait_for_function("window.jupyterapp.shell.currentWidget.content.activeCellIndex === 0")
    page.locator('.tl-tabs button[data-view="Diff"]').click()
    page.locator(".tl-cd-table").wait_for()
    # at claim the diff shows the executors it handed the calls to; at fuse, what it fused
    page.locator('.tl-pass[data-step="3"]').click()
    page.wait_for_function("document.querySelector('.tl-cd-summary')?.textContent.includes('executor assignment')")
    page.locator('.tl-pass[data-step="4"]').click()
    page.wait_for_function("document.querySelector('.tl-cd-summary')?.textContent.includes('fused ')")
    assert "fused 5 calls into 2 regions: testfuse0 (3 calls, testfuse)" in page.locator(".tl-cd-summary").inner_text()
    _shot(page, "diff-fuse")
    page.locator('.tl-tabs button[data-view="Graph"]').click()
    page.locator("svg.tl-graph").wait_for()
    page.locator(".tl-pass[data-step]").last.click()  # after claim: its declines are known
    page.locator('.tl-tabs button[data-view="What it did"]').click()
    page.locator(".tl-whynot").wait_for()
    assert "not elementwise" in page.locator(".tl-whynot").inner_text()
    page.locator('.tl-tabs button[data-view="Timings"]').click()
    page.locator(".tl-pass-times .tl-current").wait_for()
    page.locator('.tl-tabs button[data-view="Program"]').click()


def test_a_dragged_pass_is_refused_with_the_parsers_words_then_undone(lab_page):
    page = lab_page
    # dce, cse, claim, fuse, del: drag fuse (3) onto claim (2)
    fuse, claim = page.locator('.tl-pass[data-pass="3"]'), page.locator('.tl-pass[data-pass="2"]')
    assert fuse.locator(".tl-pass-name").inner_text().strip().endswith("fuse")
    assert "claim{" in claim.locator(".tl-pass-name").inner_text()
    # the browser's drag-and-drop events, carrying one DataTransfer from the dragged row to the drop row
    data = page.evaluate_handle("new DataTransfer()")
    fuse.dispatch_event("dragstart", {"dataTransfer": data})
    claim.dispatch_event("dragover", {"dataTransfer": data})
    claim.dispatch_event("drop", {"dataTransfer": data})
    fuse.dispatch_event("dragend", {"dataTransfer": data})
    _wait_value(page, ".tl-pipeline-text", lambda v: v.startswith("dce,cse,fuse,claim"))
    page.locator(".tl-check-invalid").wait_for()
    assert "pass 'fuse' requires 'claim' to run before it" in page.locator(".tl-check").inner_text()
    assert (
        page.locator(".tl-rerun").get_attribute("aria-disabled") == "true"
        or page.locator(".tl-rerun button, button.tl-rerun").first.is_disabled()
    )
    _shot(page, "invalid-order")
    page.locator(".tl-undo").first.click()
    page.locator(".tl-check-ok").wait_for()


def test_rerun_without_fuse_changes_the_program(lab_page):
    page = lab_page
    before = page.locator(".tl-record").count()
    last = page.locator(".tl-pass[data-step]").last
    last.click()
    page.locator(".tl-editor .cm-content").wait_for()
    assert "# fusion region testfuse0" in page.locator(".tl-editor .cm-content").inner_text()
    page.locator('.tl-pass[data-pass="3"] .tl-pass-toggle').click()  # fuse off
    page.locator(".tl-check-ok").wait_for()
    page.locator(".tl-rerun").first.click()
    page.wait_for_function(f"document.querySelectorAll('.tl-record').length === {before + 1}")
    page.wait_for_function("document.querySelector('.tl-record.tl-selected')?.dataset.record === '1'")
    page.wait_for_function("(document.querySelector('.tl-pipeline-text')?.value || '').includes('-fuse')")
    page.wait_for_function("document.querySelector('.tl-editor .cm-content')?.textContent.includes('def forward')")
    assert "# fusion region" not in page.locator(".tl-editor .cm-content").inner_text()
    _shot(page, "rerun")


def test_timings_grow_while_a_cell_keeps_calling(lab_page):
    page = lab_page
    page.locator('.tl-record[data-record="0"]').click()
    page.locator(".tl-calls").wait_for()
    start = int(page.locator(".tl-calls").get_attribute("data-calls"))
    _run_cell(page, 2)
    seen = [start]
    deadline = time.time() + 30
    while len(set(seen)) < 3 and time.time() < deadline:
        time.sleep(0.5)
        seen.append(int(page.locator(".tl-calls").get_attribute("data-calls")))
    assert len(set(seen)) >= 3 and seen == sorted(seen), seen
    assert page.locator(".tl-link-status").get_attribute("data-busy") == "true"
    _shot(page, "timings")
    page.wait_for_function("document.querySelector('.tl-link-status')?.dataset.busy === 'false'", timeout=60_000)


def test_profile_one_call_shows_each_regions_kernels(lab_page):
    page = lab_page
    page.locator('.tl-record[data-record="0"]').click()
    page.locator(".tl-profile").click()
    # the costliest region opens by itself once the profile is back
    page.locator(".tl-kernels-row .tl-kernel").first.wait_for(timeout=60_000)
    kernels = page.locator(".tl-kernels-row .tl-kernel[data-kernel]").evaluate_all(
        "els => els.map(e => e.dataset.kernel)")
    assert any(k.startswith("aten::") for k in kernels), kernels
    regions = page.locator(".tl-region-group").evaluate_all("els => els.map(e => e.dataset.region)")
    assert {"testfuse0", "testfuse1"} <= set(regions) and regions[-1] == "(outside regions)", regions
    # a closed region opens to its own kernels
    closed = page.locator('.tl-kernels-toggle[aria-expanded="false"]').first
    name = closed.locator("xpath=ancestor::tbody").get_attribute("data-region")
    closed.click()
    page.locator(f'.tl-region-group[data-region="{name}"] .tl-kernels-row .tl-kernel').first.wait_for()
    _shot(page, "timings-kernels")


def test_two_records_compare_side_by_side(lab_page):
    page = lab_page
    page.locator('.tl-record[data-record="1"]').click()  # the re-run without fuse
    page.locator(".tl-compare-with").select_option("0")
    page.locator(".tl-comparison .tl-cd-table").wait_for(timeout=60_000)
    # the programs by stable call id: the calls fuse put into regions show as changed on one row each
    assert page.locator(".tl-comparison .tl-cd-table thead").inner_text().split() == ["a", "#0", "b", "#1"]
    assert "taken out of testfuse0" in page.locator(".tl-comparison .tl-cd-table").inner_text()
    # step times paired per pass: fuse is only in a
    specs = page.locator(".tl-step-pair").evaluate_all("els => els.map(e => e.dataset.spec)")
    assert specs[0] == "capture" and "fuse" in specs, specs
    fuse = page.locator('.tl-step-pair[data-spec="fuse"]')
    assert "only in a #0" in fuse.inner_text() and fuse.locator(".tl-pbar.tl-a .tl-pbar-fill").count() == 1
    words = page.locator(".tl-call-time").inner_text()
    assert "#1 is" in words and "as fast as #0" in words or "#1 takes" in words and "as long as #0" in words, words
    _shot(page, "compare")


def test_profiling_a_record_whose_inputs_are_gone_says_so(lab_page):
    page = lab_page
    before = page.locator(".tl-record").count()
    _run_cell(page, 3)
    page.wait_for_function(f"document.querySelectorAll('.tl-record').length === {before + 1}")
    page.locator(".tl-record", has_text="gone").first.click()
    page.wait_for_function("document.querySelector('.tl-link-status')?.dataset.busy === 'false'", timeout=60_000)
    page.locator(".tl-profile").click()
    err = page.locator(".tl-profile-error")
    err.wait_for(timeout=30_000)
    assert "inputs this record was compiled for are gone" in err.inner_text() and "keep_inputs=True" in err.inner_text()


def test_a_name_with_markup_is_shown_as_text(lab_page):
    page = lab_page
    _run_cell(page, 1)
    row = page.locator(".tl-record", has_text="<script>")
    row.wait_for()
    assert EVIL in row.locator(".tl-record-name").inner_text()
    assert page.locator("#thunderlab-sidebar img, #thunderlab-sidebar script").count() == 0
    assert page.evaluate("window.__pwned") is None


def test_a_malformed_record_or_step_shows_what_is_wrong(lab_page):
    page = lab_page
    _run_cell(page, 4)
    page.locator(".tl-record", has_text="bad_traces").wait_for()
    page.locator(".tl-record", has_text="cut_short").first.click()
    problems = page.locator("#thunderlab-step .tl-problems")
    problems.wait_for()
    assert problems.locator(".tl-problems-title").inner_text().startswith("thunderlab cannot show record")
    lines = problems.locator("li").all_inner_texts()
    assert "steps[1].seconds: expected a number ≥ 0, got nothing (the field is missing)" in lines, lines
    _shot(page, "malformed-summary")
    page.locator(".tl-record", has_text="bad_traces").first.click()
    page.wait_for_function(
        "document.querySelector('#thunderlab-step .tl-problems-title')?.textContent.includes('program')")
    [line] = problems.locator("li").all_inner_texts()
    assert line.endswith(".traces: expected null or an object (name → a trace), got the number 5"), line
    assert page.locator(".tl-step-head").inner_text().startswith("step ")  # the step itself is still named
    assert not page.errors, page.errors


def test_records_made_by_graph_breaks_and_recompiles_say_so_in_their_rows(lab_page):
    page = lab_page
    _run_cell(page, 5)
    page.wait_for_function("[...document.querySelectorAll('.tl-record-name')].filter(e => "
                           "e.textContent.startsWith('gated')).length >= 4")
    tags = page.locator(".tl-record", has_text="gated").locator(".tl-record-origin")
    words = tags.all_inner_texts()
    assert "up to a graph break" in words and "after a graph break" in words, words
    assert "compiled again, up to a graph break" in words, words
    assert all(t.startswith("TorchDynamo frame ") for t in tags.evaluate_all("els => els.map(e => e.title)"))
    _shot(page, "graph-break-rows")
    assert not page.errors, page.errors


def test_a_graph_whose_sizes_kept_changing_says_how_many_calls_ran_as_captured(lab_page):
    page = lab_page
    _run_cell(page, 6)
    tag = page.locator(".tl-record", has_text="decode").locator(".tl-record-captured")
    try:  # pushed while the cell runs: the last count once the calls stop
        page.wait_for_function("document.querySelector('.tl-record-captured')?.textContent === "
                               "'35 calls as captured'", timeout=30_000)
    except Exception:
        pytest.fail(f"tags: {tag.all_inner_texts()}; console: {page.console[-20:]}; errors: {page.errors}")
    assert tag.count() == 1  # on the graph's newest record only
    row = page.locator(".tl-record", has=page.locator(".tl-record-captured"))
    assert row.locator(".tl-record-name").inner_text() == "decode[1]"
    assert "sizes kept changing" in tag.get_attribute("title")
    _shot(page, "as-captured-row")
    assert not page.errors, page.errors


def test_the_sidebar_recovers_after_a_kernel_restart(lab_page):
    page = lab_page
    page.evaluate("window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()")
    _wait_state(page, "not-imported", timeout=90)
    assert "has not imported thunderlab" in page.locator(".tl-link-status").text_content()
    _run_cell(page, 0)
    _wait_state(page, "ready", timeout=90)
    page.wait_for_function("document.querySelectorAll('.tl-record').length === 1")
    assert "block" in page.locator(".tl-record").first.inner_text()
    _shot(page, "after-restart")
    assert not page.errors, page.errors
