"""Screenshot of the sidebar's Timings panel for the README: docs/timings.png.

A 4-layer GPT-2 (Hugging Face architecture, random weights) is compiled with Inductor fusion and timing
on, called a few times, and re-run without `fuse`. The panel then profiles one call of the fused record
(its kernels per region) and compares it with the unfused re-run (programs side by side, step times,
call time). Runs JupyterLab with temporary dirs and this checkout's built extension (`make lab`) in
Debian's headless Chromium; the panel is about 420 px wide.
  .venv/bin/python docs/timings_screenshot.py docs/timings.png
  .venv/bin/python docs/timings_screenshot.py --dark /tmp/timings-dark.png
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
ap.add_argument("out", nargs="?", default=str(REPO / "docs" / "timings.png"))
ap.add_argument("--dark", action="store_true")
ap.add_argument("--max-height", type=int, default=1560, help="cut the panel's picture at this many pixels")
a = ap.parse_args()

from playwright.sync_api import sync_playwright  # noqa: E402

from tests.ui.conftest import jupyterlab_server, lab_home  # noqa: E402

CELL = (
    f"import sys; sys.path.insert(0, {str(REPO)!r})\n"
    "import torch, thunderlab\n"
    "from transformers import GPT2Config, GPT2LMHeadModel\n"
    "torch.manual_seed(0)\n"
    "model = GPT2LMHeadModel(GPT2Config(n_layer=4, n_head=4, n_embd=128, vocab_size=1000, n_positions=128)).eval()\n"
    "ids = torch.randint(0, 1000, (4, 64))\n"
    "gpt = thunderlab.jit(model, pipeline='dce,cse,claim{executors=inductor+torch},fuse,del', timing=True)\n"
    "with torch.no_grad():\n"
    "    gpt(ids)\n"
    "    rec = thunderlab.last_record(gpt)\n"
    "    thunderlab.session(rec).wait()  # the fused kernel compiles in the background\n"
    "    for _ in range(20):\n"
    "        gpt(ids)\n"
    "unfused = thunderlab.rerun(rec, 'dce,cse,claim{executors=inductor+torch},del')"
)
root = Path(tempfile.mkdtemp(prefix="tl-timings-shot-"))
env, settings = lab_home(root, REPO / "thunderlab" / "jupyter" / "labextension")
env.pop("THUNDERLAB_EXECUTORS", None)
if a.dark:
    (settings / "@jupyterlab" / "apputils-extension" / "themes.jupyterlab-settings").write_text(
        '{"theme": "JupyterLab Dark"}')
work = root / "work"
work.mkdir()
(work / "gpt2.ipynb").write_text(json.dumps({
    "cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": CELL}],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5}))
chromium = os.environ.get("THUNDERLAB_CHROMIUM", "/usr/bin/chromium")
with jupyterlab_server(work, env, "--LabApp.expose_app_in_browser=True") as (url, token), sync_playwright() as p:
    b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu", "--headless"])
    page = b.new_page(viewport={"width": 1300, "height": 2300})
    page.set_default_timeout(900_000)
    page.goto(f"{url}/lab/tree/gpt2.ipynb?token={token}")
    page.wait_for_function("window.jupyterapp && window.jupyterapp.started")
    page.wait_for_selector(".jp-Notebook .jp-Cell")
    page.get_by_text("| Idle").first.wait_for()
    page.evaluate("(() => { const s = window.jupyterapp.shell; s.activateById('thunderlab-sidebar'); s.collapseLeft();"
                  " s._hsplitPanel.setRelativeSizes([0, 0.66, 0.34]); })()")
    page.evaluate("void window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function("document.querySelectorAll('.tl-record').length >= 2")
    page.wait_for_function("document.querySelector('.tl-link-status')?.dataset.busy === 'false'")
    title = lambda t: page.locator(".tl-sidebar .jp-AccordionPanel-title", has_text=t).first  # noqa: E731
    for t in ("Pipeline", "Step"):  # only the records and the timings open
        if title(t).get_attribute("aria-expanded") == "true":
            title(t).click()
    page.locator('.tl-record[data-record="0"]').click()
    page.locator(".tl-calls").wait_for()
    title("Records").click()
    page.locator(".tl-profile").click()
    page.locator(".tl-kernels-row .tl-kernel").first.wait_for()
    page.locator(".tl-compare-with").select_option("1")
    page.locator(".tl-comparison .tl-cd-table").wait_for()
    time.sleep(1)
    box = page.locator("#thunderlab-timings").bounding_box()
    page.screenshot(path=a.out, clip={"x": box["x"], "y": box["y"], "width": box["width"],
                                      "height": min(box["height"], a.max_height)})
    print("wrote", a.out)
    b.close()
