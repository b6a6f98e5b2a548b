"""Screenshot of the sidebar on notebooks/sidebar.ipynb (NanoGPTBlock), for the README: docs/sidebar.png.

Runs JupyterLab with temporary config/data/runtime dirs and this checkout's built extension (`make lab`),
runs every cell in Debian's headless Chromium, selects a pass and saves the sidebar at about 500 px wide.
  .venv/bin/python docs/sidebar_screenshot.py [--dark] [--step N] [--view Program|Diff|Graph] [OUT.png]
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
a = ap.parse_args()

from playwright.sync_api import sync_playwright  # noqa: E402

tmp = Path(tempfile.mkdtemp(prefix="tl-shot-"))
env = dict(os.environ)
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
shutil.copy(REPO / "notebooks" / "sidebar.ipynb", tmp / "nb")
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
lab = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}", "--ip=127.0.0.1",
                        "--IdentityProvider.token=", "--ServerApp.password=", "--LabApp.expose_app_in_browser=True",
                        f"--ServerApp.root_dir={tmp / 'nb'}"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(120):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.5)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox", "--disable-gpu", "--headless"])
        page = b.new_page(viewport={"width": 1400, "height": 1100})
        page.set_default_timeout(600_000)
        page.goto(f"http://127.0.0.1:{port}/lab/tree/sidebar.ipynb")
        page.wait_for_function("window.jupyterapp && window.jupyterapp.started")
        page.wait_for_selector(".jp-Notebook .jp-Cell")
        page.get_by_text("| Idle").first.wait_for()
        page.evaluate("(() => { const s = window.jupyterapp.shell; s.activateById('thunderlab-sidebar'); s.collapseLeft();"
                      " s._hsplitPanel.setRelativeSizes([0, 0.63, 0.37]); })()")
        page.evaluate("void window.jupyterapp.commands.execute('notebook:run-all-cells')")
        page.wait_for_selector(".tl-pass[data-step]")
        page.wait_for_function("document.querySelector('.tl-calls') && +document.querySelector('.tl-calls').dataset.calls > 100")
        page.locator(f'.tl-pass[data-step="{a.step}"]').click()
        page.locator(f'.tl-tabs button[data-view="{a.view}"]').click()
        time.sleep(1.5)
        page.locator("#thunderlab-sidebar").screenshot(path=a.out)
        print("wrote", a.out)
        b.close()
finally:
    lab.terminate()
    lab.wait(15)
    shutil.rmtree(tmp, ignore_errors=True)
