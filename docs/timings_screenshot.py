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
import time
from pathlib import Path

from lab_page import REPO, sidebar_page

ap = argparse.ArgumentParser()
ap.add_argument("out", nargs="?", default=str(REPO / "docs" / "timings.png"))
ap.add_argument("--dark", action="store_true")
ap.add_argument("--max-height", type=int, default=1560, help="cut the panel's picture at this many pixels")
a = ap.parse_args()

CELL = (
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
with sidebar_page(CELL, name="gpt2", dark=a.dark, height=2300, sidebar_share=0.34, collapse_left=True,
                  records=2) as (page, title):
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
    print("wrote", Path(a.out))
