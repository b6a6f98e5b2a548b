"""Screenshot of records made by graph breaks and recompiles in the sidebar, for the README: docs/graph-breaks.png.

A module whose forward branches on a tensor's value (a graph break) is called with two batch sizes (TorchDynamo
compiles it again): four records, each row tagged with what made its graph, the whole line on hover. Runs
JupyterLab with temporary dirs and this checkout's built extension (`make lab`) in Debian's headless Chromium.
  .venv/bin/python docs/graph_breaks_screenshot.py docs/graph-breaks.png
"""
import argparse
import time
from pathlib import Path

from lab_page import REPO, sidebar_page

ap = argparse.ArgumentParser()
ap.add_argument("out", nargs="?", default=str(REPO / "docs" / "graph-breaks.png"))
ap.add_argument("--dark", action="store_true")
a = ap.parse_args()

CELL = (
    "import torch, thunderlab\n"
    "\n"
    "class Gate(torch.nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.lin = torch.nn.Linear(16, 16)\n"
    "\n"
    "    def forward(self, x):\n"
    "        h = torch.relu(self.lin(x))\n"
    "        if h.mean() > 0.1:  # a branch on a tensor's value: a graph break\n"
    "            h = h * 2\n"
    "        return h.sum(-1)\n"
    "\n"
    "model = thunderlab.jit(Gate())\n"
    "for n in (8, 8, 12):  # a new batch size: TorchDynamo compiles again\n"
    "    model(torch.randn(n, 16))\n"
    "model.cache_info"
)
with sidebar_page(CELL, name="graph_breaks", dark=a.dark, height=900, sidebar_share=0.4, records=4) as (page, title):
    title("Timings").click()  # only the records open
    page.locator(".tl-record").first.hover()
    time.sleep(1)
    box = page.locator("#thunderlab-records").bounding_box()
    rows = page.locator(".tl-record-list").bounding_box()
    page.screenshot(path=a.out, clip={"x": box["x"], "y": box["y"], "width": box["width"],
                                      "height": rows["y"] + rows["height"] + 8 - box["y"]})
    print("wrote", Path(a.out))
