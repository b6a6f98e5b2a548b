"""The wheel carries the prebuilt JupyterLab extension: installed into a fresh venv, JupyterLab lists it as enabled."""
import os
import subprocess
import sys
import venv
from pathlib import Path

REPO = Path(__file__).parents[2]


def test_wheel_installs_the_labextension_enabled(tmp_path):
    # the wheel, built as `pip wheel .` builds it (the hook reuses an extension `make lab` already built)
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path / "dist")], check=True, capture_output=True, cwd=REPO)
    wheel = next((tmp_path / "dist").glob("thunderlab-*.whl"))
    # a fresh venv: thunderlab from the wheel only; JupyterLab itself borrowed from this venv via a .pth
    fresh = tmp_path / "fresh"
    venv.create(fresh, with_pip=False)
    py = fresh / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q", str(wheel)],
                   check=True, capture_output=True)
    site = next(fresh.glob("lib/python*/site-packages"))
    borrowed = [p for p in sys.path if p.endswith("site-packages")]
    (site / "zz_borrowed.pth").write_text("\n".join(borrowed) + "\n")
    ext = fresh / "share/jupyter/labextensions/thunderlab"
    assert (ext / "package.json").exists() and (ext / "install.json").exists()
    assert (ext / "schemas/thunderlab/sidebar.json").exists(), "the settings schema (grouping, collapse threshold)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR"):
        (tmp_path / var).mkdir()
        env[var] = str(tmp_path / var)
    out = subprocess.run([str(py), "-m", "jupyterlab.labextensions", "list"], env=env, capture_output=True, text=True,
                         cwd=tmp_path)
    listing = out.stdout + out.stderr
    section = listing.split(str(fresh / "share/jupyter/labextensions"), 1)
    assert len(section) == 2, listing
    line = next((ln for ln in section[1].splitlines() if ln.strip().startswith("thunderlab ")), "")
    assert "enabled" in line and "OK" in line and "(python, thunderlab)" in line, listing
    # and the package in that venv is the wheel's, not this checkout
    where = subprocess.run([str(py), "-c", "import thunderlab.jupyter.comm as c; print(c.__file__)"], env=env,
                           capture_output=True, text=True, cwd=tmp_path).stdout
    assert where.startswith(str(site)), where
