"""A notebook run in JupyterLab beside thunderlab's sidebar, for the docs' screenshot scripts.

``sidebar_page`` writes one notebook cell into a temporary JupyterLab home (temporary dirs, this checkout's
built extension: ``make lab``), opens it in Debian's headless Chromium with the thunderlab sidebar at the
given share of the window, runs the cell, waits until the sidebar lists ``records`` records and has loaded
them, and closes the Pipeline and Step sections, so that only the records and the timings stay open. It
yields the page and a function giving a sidebar section's title by its text.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).parents[1]
sys.path.insert(0, str(REPO))


@contextmanager
def sidebar_page(cell: str, *, name: str, dark: bool, height: int, sidebar_share: float,
                 collapse_left: bool = False, records: int = 1, ready: Callable | None = None) -> Iterator[tuple]:
    """(page, title) with ``cell`` run in ``name``.ipynb; ``ready(page)`` waits for what the cell prints."""
    from playwright.sync_api import sync_playwright

    from tests.ui.conftest import jupyterlab_server, lab_home

    root = Path(tempfile.mkdtemp(prefix=f"tl-{name}-shot-"))
    env, settings = lab_home(root, REPO / "thunderlab" / "jupyter" / "labextension")
    env.pop("THUNDERLAB_EXECUTORS", None)
    if dark:
        (settings / "@jupyterlab" / "apputils-extension" / "themes.jupyterlab-settings").write_text(
            '{"theme": "JupyterLab Dark"}')
    work = root / "work"
    work.mkdir()
    source = f"import sys; sys.path.insert(0, {str(REPO)!r})\n" + cell
    (work / f"{name}.ipynb").write_text(json.dumps({
        "cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4, "nbformat_minor": 5}))
    chromium = os.environ.get("THUNDERLAB_CHROMIUM", "/usr/bin/chromium")
    with jupyterlab_server(work, env, "--LabApp.expose_app_in_browser=True") as (url, token), sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu", "--headless"])
        try:
            page = b.new_page(viewport={"width": 1300, "height": height})
            page.set_default_timeout(int(os.environ.get("THUNDERLAB_SHOT_TIMEOUT_MS", 900_000)))
            page.goto(f"{url}/lab/tree/{name}.ipynb?token={token}")
            page.wait_for_function("window.jupyterapp && window.jupyterapp.started")
            page.wait_for_selector(".jp-Notebook .jp-Cell")
            page.get_by_text("| Idle").first.wait_for()
            collapse = " s.collapseLeft();" if collapse_left else ""
            sizes = f"[0, {1 - sidebar_share}, {sidebar_share}]"
            page.evaluate("(() => { const s = window.jupyterapp.shell; s.activateById('thunderlab-sidebar');"
                          f"{collapse} s._hsplitPanel.setRelativeSizes({sizes}); }})()")
            page.evaluate("void window.jupyterapp.commands.execute('notebook:run-all-cells')")
            page.wait_for_function(f"document.querySelectorAll('.tl-record').length >= {records}")
            if ready is not None:
                ready(page)
            page.wait_for_function("document.querySelector('.tl-link-status')?.dataset.busy === 'false'")

            def title(text):
                return page.locator(".tl-sidebar .jp-AccordionPanel-title", has_text=text).first

            for t in ("Pipeline", "Step"):  # only the records and the timings open
                if title(t).get_attribute("aria-expanded") == "true":
                    title(t).click()
            yield page, title
        finally:
            b.close()
