"""Screenshot of the executor race in the sidebar's Timings panel for the README: docs/race.png.

The nanoGPT block (thunderlab.examples) is compiled with Inductor fusion and timing on, and called until
each region's race is over: its calls took turns between torch and the Inductor kernel, and the panel
shows each version's calls, fastest call and median, the race's bars, the version kept and why, and which library
its linear layers' products run on (the kernel compiles in an empty Inductor cache). Runs JupyterLab with
temporary dirs and this checkout's built extension (`make lab`) in Debian's headless Chromium.
  .venv/bin/python docs/race_screenshot.py docs/race.png
``--train phi3`` trains a model of the zoo instead, on one thread (docs/race-phi3-training.png): the forward's and the
backward's region each race, and a kernel compiled again for other input strides says so under its race.
"""
import argparse
import time
from pathlib import Path

from lab_page import REPO, sidebar_page

ap = argparse.ArgumentParser()
ap.add_argument("out", nargs="?", default=str(REPO / "docs" / "race.png"))
ap.add_argument("--dark", action="store_true")
ap.add_argument("--train", metavar="ZOO_MODEL", help="instead: training steps of this model of the zoo (tests/zoo), "
                "until every kernel is built, those compiled again for other input strides included")
a = ap.parse_args()

TRAIN = (
    "import os; os.environ.setdefault('TORCHINDUCTOR_CACHE_DIR', '/tmp/thunderlab_bench_inductor_cache')\n"
    "import torch, thunderlab\n"
    "torch.set_num_threads(1)  # as the zoo benchmark times it\n"
    "from tests.zoo.models import ZOO, inputs, pair\n"
    f"entry = next(z for z in ZOO if z.name == {a.train!r})\n"
    "model, _ = pair(entry, None)\n"
    "model.train()\n"
    "x = inputs(entry, model, batch=4, length=16)\n"
    "jm = thunderlab.jit(model, timing=True)\n"
    "def step():\n"
    "    jm(**x).loss.backward()\n"
    "    model.zero_grad(set_to_none=True)\n"
    "for _ in range(40):  # each session's wait includes kernels compiling for other input strides\n"
    "    step()\n"
    "    for r in jm.records: thunderlab.session(r).wait()\n"
    "{n: (r['race'] or {}).get('why') for rec in jm.records for n, r in rec.regions.items()}"
)

CELL = TRAIN if a.train else (
    "import os, tempfile\n"
    "# an empty Inductor cache: the kernel is compiled, and its linear layers' library chosen, in this session\n"
    "os.environ['TORCHINDUCTOR_CACHE_DIR'] = tempfile.mkdtemp(prefix='thunderlab-race-')\n"
    "import torch, thunderlab\n"
    "from thunderlab.examples import EXAMPLES\n"
    "block, (x,) = EXAMPLES['nanogpt_block']()\n"
    "jb = thunderlab.jit(block, pipeline='dce,cse,claim{executors=inductor+torch},fuse,del', timing=True)\n"
    "with torch.no_grad():\n"
    "    jb(x)\n"
    "    rec = thunderlab.last_record(jb)\n"
    "    thunderlab.session(rec).wait()  # the kernel compiles in the background; then the race takes the next calls\n"
    "    for _ in range(30):  # the race's calls (a close race is timed longer)\n"
    "        jb(torch.randn_like(x))\n"
    "{n: r['race']['why'] for n, r in thunderlab.last_record(jb).regions.items()}"
)
with sidebar_page(CELL, name="race", dark=a.dark, height=1400, sidebar_share=0.4,
                  ready=lambda page: page.get_by_text("kept").or_(page.get_by_text("back to torch")).first.wait_for()
                  ) as (page, title):  # the cell's output says the races are done
    page.locator('.tl-record[data-record="0"]' if not a.train else ".tl-record").first.click()
    page.locator(".tl-race-done").first.wait_for()
    title("Records").click()
    time.sleep(1)
    box = page.locator("#thunderlab-timings").bounding_box()
    race = page.locator("#thunderlab-timings .tl-race").bounding_box()
    bottom = race["y"] + race["height"] + 8
    page.screenshot(path=a.out, clip={"x": box["x"], "y": box["y"], "width": box["width"], "height": bottom - box["y"]})
    print("wrote", Path(a.out))
