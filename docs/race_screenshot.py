"""Screenshot of the executor race in the sidebar's Timings panel for the README: docs/race.png.

The nanoGPT block (thunderlab.examples) is compiled with Inductor fusion and timing on, and called until
each region's race is over: its calls took turns between torch and the Inductor kernel, and the panel
shows each version's calls and medians, the race's bars, the version kept and why. Runs JupyterLab with
temporary dirs and this checkout's built extension (`make lab`) in Debian's headless Chromium.
  .venv/bin/python docs/race_screenshot.py docs/race.png
"""
import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).parents[1]
sys.path.insert(0, str(REPO))
ap = argparse.ArgumentParser()
ap.add_argument("out", nargs="?", default=str(REPO / "docs" / "race.png"))
ap.add_argument("--dark", action="store_true")
a = ap.parse_args()

from playwright.sync_api import sync_playwright  # noqa: E402

from tests.ui.conftest import jupyterlab_server, lab_home  # noqa: E402

CELL = (
    f"import sys; sys.path.insert(0, {str(REPO)!r})\n"
    "import torch, thunderlab\n"
    "from thunderlab.examples import EXAMPLES\n"
    "block, (x,) = EXAMPLES['nanogpt_block']()\n"
    "jb = thunderlab.jit(block, pipeline='dce,cse,claim{executors=inductor+torch},fuse,del', timing=True)\n"
    "with torch.no_grad():\n"
    "    jb(x)\n"
    "    rec = thunderlab.last_record(jb)\n"
    "    thunderlab.session(rec).wait()  # the kernel compiles in the background; then the race takes the next calls\n"
    "    for _ in range(16):\n"
    "        jb(torch.randn_like(x))\n"
    "{n: r['race']['why'] for n, r in thunderlab.last_record(jb).regions.items()}"
)
root = Path(tempfile.mkdtemp(prefix="tl-race-shot-"))
env, settings = lab_home(root, REPO / "thunderlab" / "jupyter" / "labextension")
env.pop("THUNDERLAB_EXECUTORS", None)
if a.dark:
    (settings / "@jupyterlab" / "apputils-extension" / "themes.jupyterlab-settings").write_text(
        '{"theme": "JupyterLab Dark"}')
work = root / "work"
work.mkdir()
(work / "race.ipynb").write_text(json.dumps({
    "cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": CELL}],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5}))
chromium = os.environ.get("THUNDERLAB_CHROMIUM", "/usr/bin/chromium")
with jupyterlab_server(work, env, "--LabApp.expose_app_in_browser=True") as (url, token), sync_playwright() as p:
    b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu", "--headless"])
    page = b.new_page(viewport={"width": 1300, "height": 1400})
    page.set_default_timeout(900_000)
    page.goto(f"{url}/lab/tree/race.ipynb?token={token}")
    page.wait_for_function("window.jupyterapp && window.jupyterapp.started")
    page.wait_for_selector(".jp-Notebook .jp-Cell")
    page.get_by_text("| Idle").first.wait_for()
    page.evaluate("(() => { const s = window.jupyterapp.shell; s.activateById('thunderlab-sidebar');"
                  " s._hsplitPanel.setRelativeSizes([0, 0.6, 0.4]); })()")
    page.evaluate("void window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function("document.querySelectorAll('.tl-record').length >= 1")
    page.get_by_text("kept").or_(page.get_by_text("back to torch")).first.wait_for()  # the cell's output: races done
    page.wait_for_function("document.querySelector('.tl-link-status')?.dataset.busy === 'false'")
    title = lambda t: page.locator(".tl-sidebar .jp-AccordionPanel-title", has_text=t).first  # noqa: E731
    for t in ("Pipeline", "Step"):  # only the records and the timings open
        if title(t).get_attribute("aria-expanded") == "true":
            title(t).click()
    page.locator('.tl-record[data-record="0"]').click()
    page.locator(".tl-race-done").first.wait_for()
    title("Records").click()
    time.sleep(1)
    box = page.locator("#thunderlab-timings").bounding_box()
    race = page.locator("#thunderlab-timings .tl-race").bounding_box()
    bottom = race["y"] + race["height"] + 8
    page.screenshot(path=a.out, clip={"x": box["x"], "y": box["y"], "width": box["width"], "height": bottom - box["y"]})
    print("wrote", a.out)
    b.close()
