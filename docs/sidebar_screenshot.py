"""Screenshots of the sidebar for the README: docs/sidebar.png and docs/sidebar-dark.png.

Runs JupyterLab with temporary config/data/runtime dirs and this checkout's built extension (`make lab`),
runs every cell in Debian's headless Chromium, selects a pass and saves the sidebar at about 500 px wide.
The notebook is notebooks/sidebar.ipynb (a nanoGPT block), or with --gpt2 a GPT-2 (4 layers, or --layers) (Hugging Face
architecture, random weights) compiled for training and trained for a few steps.
  .venv/bin/python docs/sidebar_screenshot.py --gpt2 --step 7 --view Diff docs/sidebar.png
  .venv/bin/python docs/sidebar_screenshot.py --gpt2 --dark --step 5 --view "What it did" docs/sidebar-dark.png
  .venv/bin/python docs/sidebar_screenshot.py --gpt2 --layers 12 --step 4 --view Graph /tmp/gpt2-12-graph.png
With --ddp the notebook kernel is rank 0 of a two-process gloo job (a second Python process is rank 1) training the
nanoGPT block with thunderlab.distributed.ddp and timing on; the shot shows the backward's graph, collectives coloured,
and the timings with communication beside compute:
  .venv/bin/python docs/sidebar_screenshot.py --ddp --view Graph docs/ddp-sidebar.png
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).parents[1]
ap = argparse.ArgumentParser()
ap.add_argument("out", nargs="?", default=str(REPO / "docs" / "sidebar.png"))
ap.add_argument("--dark", action="store_true")
ap.add_argument("--step", type=int, default=5)
ap.add_argument("--view", default="Program")
ap.add_argument("--gpt2", action="store_true", help="a GPT-2 compiled for training, not the nanoGPT block")
ap.add_argument("--layers", type=int, default=4, help="GPT-2's number of layers (with --gpt2)")
ap.add_argument("--ddp", action="store_true", help="the nanoGPT block trained data-parallel by two gloo processes")
ap.add_argument("--trace", default=None, help="the trace to show (forward, backward); --ddp shows backward")
a = ap.parse_args()

from playwright.sync_api import sync_playwright  # noqa: E402

tmp = Path(tempfile.mkdtemp(prefix="tl-shot-"))
# this checkout's extension first, not one installed in the venv
env = dict(os.environ, JUPYTER_PREFER_ENV_PATH="0")
for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
    (tmp / var).mkdir()
    env[var] = str(tmp / var)
(tmp / "JUPYTER_DATA_DIR" / "labextensions").mkdir()
(tmp / "JUPYTER_DATA_DIR" / "labextensions" / "thunderlab").symlink_to(REPO / "thunderlab" / "jupyter" / "labextension")
settings = tmp / "JUPYTER_CONFIG_DIR" / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
settings.mkdir(parents=True)
(settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
if a.dark:
    (settings / "themes.jupyterlab-settings").write_text('{"theme": "JupyterLab Dark"}')
(tmp / "nb").mkdir()
GPT2_CELLS = [
    "import torch\nimport thunderlab\nfrom thunderlab.examples import gpt2_from_config\n\n"
    f"model = gpt2_from_config(n_layer={a.layers}).train()  # random weights, nothing downloaded\n"
    "train_step = thunderlab.jit(model, timing=True)\n"
    "opt = torch.optim.SGD(model.parameters(), lr=1e-3)\n"
    "tokens = torch.randint(0, 128, (2, 16))",
    "for _ in range(80):  # the sidebar's timings grow as this runs\n"
    "    loss = train_step(tokens).logits.float().logsumexp(-1).mean()\n"
    "    loss.backward()\n    opt.step()\n    opt.zero_grad()",
]
DDP_STEPS = '''"""Both ranks of a two-process gloo job: the nanoGPT block trained with ddp, timing on."""
import datetime

import torch
import torch.distributed as dist

import thunderlab.distributed
from thunderlab.examples import NanoGPTBlock


def train(rank, port, steps=30):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=300))
    torch.manual_seed(rank)
    block = NanoGPTBlock(n_embd=64, n_head=4, block_size=16, dropout=0.0).train()
    model = thunderlab.distributed.ddp(block, bucket_mb=0.02, timing=True)  # small buckets: several all-reduces
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    for _ in range(steps):
        model(torch.randn(4, 16, 64)).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
    return model
'''
DDP_CELLS = [
    "import socket, subprocess, sys\nfrom ddp_steps import train\n\n"
    "with socket.socket() as s:\n    s.bind((\"127.0.0.1\", 0))\n    port = s.getsockname()[1]\n"
    "# this kernel is rank 0 of a two-process gloo job; a second Python process is rank 1\n"
    "rank1 = subprocess.Popen([sys.executable, \"-c\", f\"from ddp_steps import train; train(1, {port})\"])\n"
    "model = train(0, port)\nrank1.wait(300)",
]
if a.gpt2 or a.ddp:
    import json

    cell = lambda src: {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": src}  # noqa: E731
    if a.ddp:
        (tmp / "nb" / "ddp_steps.py").write_text(DDP_STEPS)
    cells = DDP_CELLS if a.ddp else GPT2_CELLS
    (tmp / "nb" / "sidebar.ipynb").write_text(json.dumps({"cells": [cell(c) for c in cells], "metadata": {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4, "nbformat_minor": 5}))
else:
    shutil.copy(REPO / "notebooks" / "sidebar.ipynb", tmp / "nb")
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
lab = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}",
                        "--ip=127.0.0.1", "--IdentityProvider.token=", "--ServerApp.password=",
                        "--LabApp.expose_app_in_browser=True", f"--ServerApp.root_dir={tmp / 'nb'}"],
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(120):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.5)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium"),
                              args=["--no-sandbox", "--disable-gpu", "--headless"])
        page = b.new_page(viewport={"width": 1400, "height": 1680 if a.ddp else 1400})
        page.set_default_timeout(600_000)
        page.goto(f"http://127.0.0.1:{port}/lab/tree/sidebar.ipynb")
        page.wait_for_function("window.jupyterapp && window.jupyterapp.started")
        page.wait_for_selector(".jp-Notebook .jp-Cell")
        page.get_by_text("| Idle").first.wait_for()
        page.evaluate(
            "(() => { const s = window.jupyterapp.shell; s.activateById('thunderlab-sidebar'); s.collapseLeft();"
            " s._hsplitPanel.setRelativeSizes([0, 0.63, 0.37]); })()"
        )
        page.evaluate("void window.jupyterapp.commands.execute('notebook:run-all-cells')")
        page.wait_for_selector(".tl-pass[data-step]")
        page.wait_for_function(
            "document.querySelector('.tl-calls') && +document.querySelector('.tl-calls').dataset.calls > 100"
        )
        page.wait_for_function("!document.querySelector('.jp-Notebook-ExecutionIndicator[data-status=\"busy\"]')")
        step = page.locator(".tl-pass[data-step]").last if a.ddp else page.locator(f'.tl-pass[data-step="{a.step}"]')
        step.click()
        trace = a.trace or ("backward" if a.ddp else None)
        if trace:
            page.locator(f'button[data-trace="{trace}"]').click()
        page.locator(f'.tl-tabs button[data-view="{a.view}"]').click()
        if a.ddp:  # room for the graph and the timings: the records and pipeline panels fold, the graph fits its box
            for title in ("Records", "Pipeline"):
                page.locator("#thunderlab-sidebar .lm-AccordionPanel-title", has_text=title).first.click()
            time.sleep(1)
            page.locator("#thunderlab-sidebar button", has_text="fit").first.click()
        time.sleep(1.5)
        page.locator("#thunderlab-sidebar").screenshot(path=a.out)
        print("wrote", a.out)
        b.close()
finally:
    lab.terminate()
    lab.wait(15)
    shutil.rmtree(tmp, ignore_errors=True)
