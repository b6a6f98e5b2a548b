"""A real headless Chromium (Debian's), driven by Playwright; no browser is downloaded."""
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("THUNDERLAB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install -y chromium (make test does), "
                    f"or set THUNDERLAB_CHROMIUM")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(record_video_dir=None)
    pg = ctx.new_page()
    errors = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.errors = errors
    yield pg
    ctx.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lab_home(root: Path, labext: Path) -> tuple[dict, Path]:
    """An isolated Jupyter home under ``root`` that loads the extension built at ``labext``.

    Returns (environment for the server, the user-settings folder). JUPYTER_PREFER_ENV_PATH=0: the
    data dir made here comes before the venv's, whose thunderlab may be another build; JupyterLab's
    news is off.
    """
    if not (labext / "package.json").exists():
        pytest.fail(f"the JupyterLab extension is not built ({labext}): run `make lab`")
    env = dict(os.environ, THUNDERLAB_EXECUTORS="torch", JUPYTER_PREFER_ENV_PATH="0")
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        (root / var.lower()).mkdir()
        env[var] = str(root / var.lower())
    (root / "jupyter_data_dir" / "labextensions").mkdir()
    (root / "jupyter_data_dir" / "labextensions" / "thunderlab").symlink_to(labext)
    settings = root / "jupyter_config_dir" / "lab" / "user-settings"
    news = settings / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    return env, settings


@contextlib.contextmanager
def jupyterlab_server(work, env, *extra_args):
    """A real JupyterLab server on a free localhost port, serving ``work``; yields (url, token)."""
    port, token = _free_port(), "thunderlab-test"
    proc = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}",
                             "--ip=127.0.0.1", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={work}",
                             "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                             *extra_args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=work)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("JupyterLab did not start: " + proc.stdout.read().decode(errors="replace")[-2000:])
            time.sleep(0.5)
    try:
        yield url, token
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def mount_widget(page, payload=None):
    """The notebook widget's ES module (the views' bundle and its default export) imported in a bare page, as
    anywidget imports it; ``window.__tlWidget`` is its default export. With ``payload``, it renders into
    ``#el`` with a model that holds the payload and can change it (``window.__tlSet(name, value)``)."""
    from thunderlab.jupyter.widget import widget_module

    page.set_content("<!DOCTYPE html><html><body style='margin:0'><div id=el></div></body></html>")
    page.evaluate("""async (code) => {
        const url = URL.createObjectURL(new Blob([code], { type: "text/javascript" }));
        window.__tlWidget = (await import(url)).default;
    }""", widget_module())
    if payload is not None:
        page.evaluate("""(payload) => {
            const state = { payload, current: 1, status: "", error: "" }, on = {};
            window.__tlSet = (k, v) => { state[k] = v; (on["change:" + k] || []).forEach((f) => f()); };
            const model = { get: (k) => state[k], on: (ev, f) => (on[ev] = on[ev] || []).push(f), send() {} };
            window.__tlWidget.render({ model, el: document.getElementById("el") });
        }""", payload)
