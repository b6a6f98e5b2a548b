"""The sidebar's settings (JupyterLab's settings registry) and its per-notebook memory (the state database).

A real JupyterLab server and Debian's headless Chromium: the user's setting for graph grouping reaches the
graph view, and the record, step and view a notebook showed come back after the page is reloaded.
"""
import json

import pytest

from tests.ui.conftest import jupyterlab_server, lab_home
from tests.ui.test_sidebar_jupyterlab import ARTIFACTS, LABEXT, _notebook, _run_cell, _wait_state


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("sidebar-state")
    env, settings = lab_home(root, LABEXT)
    # the user's thunderlab settings, as the Settings Editor writes them: no grouping in graphs
    (settings / "thunderlab").mkdir()
    (settings / "thunderlab" / "sidebar.jupyterlab-settings").write_text('{"grouping": "none", "collapseAbove": 300}')
    work = root / "work"
    work.mkdir()
    nb = _notebook()
    nb["cells"] = nb["cells"][:1]
    (work / "state.ipynb").write_text(json.dumps(nb))
    with jupyterlab_server(work, env, "--LabApp.expose_app_in_browser=True") as server:
        yield server


def _open(page, url, token):
    page.goto(f"{url}/lab/tree/state.ipynb?token={token}")
    page.wait_for_function("window.jupyterapp && window.jupyterapp.started")
    page.wait_for_selector(".jp-Notebook .jp-Cell")
    page.evaluate("window.jupyterapp.shell.activateById('thunderlab-sidebar')")


def test_settings_and_per_notebook_memory(lab, browser):
    url, token = lab
    ctx = browser.new_context(viewport={"width": 1500, "height": 1000})
    page = ctx.new_page()
    page.set_default_timeout(60_000)
    try:
        _open(page, url, token)
        page.get_by_text("| Idle").first.wait_for()
        _run_cell(page, 0)
        # a fresh kernel imports torch and compiles the cell's model first: over a minute on a loaded machine
        page.locator(".tl-record").first.wait_for(timeout=180_000)
        _wait_state(page, "ready")
        # the setting reaches the graph: this fused program would group by fusion region by default
        page.locator('.tl-pass[data-step="4"]').wait_for(timeout=180_000)  # the steps load after the record
        page.locator('.tl-pass[data-step="4"]').click()
        page.wait_for_function("document.querySelector('.tl-step-head')?.textContent.startsWith('step 4 of')")
        page.locator('.tl-tabs button[data-view="Graph"]').click()
        page.locator("select.tl-group-by").wait_for()
        assert page.locator("select.tl-group-by").input_value() == "none"
        assert page.locator("svg.tl-graph g.tl-group").count() == 0
        # leave the notebook at step 2, in the Diff view; a reload brings that back from the state database
        page.locator('.tl-pass[data-step="2"]').click()
        page.locator('.tl-tabs button[data-view="Diff"]').click()
        page.locator(".tl-cd-table").wait_for()
        page.wait_for_timeout(800)  # the memory writes in batches
        page.reload()
        page.wait_for_function("window.jupyterapp && window.jupyterapp.started")
        page.evaluate("window.jupyterapp.shell.activateById('thunderlab-sidebar')")
        _wait_state(page, "ready")
        page.wait_for_function("document.querySelector('.tl-step-head')?.textContent.startsWith('step 2 of')")
        assert "tl-active" in page.locator('.tl-tabs button[data-view="Diff"]').get_attribute("class")
        page.locator(".tl-cd-table").wait_for()
    finally:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "lab-state.png"))
        ctx.close()
