"""The command line, run as a user runs it."""
import subprocess
import sys


def _run(*args):
    return subprocess.run([sys.executable, "-m", "thunderlab", *args], capture_output=True, text=True, timeout=300)


def test_demo_prints_pass_table_and_program():
    r = _run("demo", "--example", "mlp")
    assert r.returncode == 0, r.stderr
    for word in ["capture", "dce", "cse", "claim", "del", "def forward(", "ltorch.linear("]:
        assert word in r.stdout
    assert "max |thunderlab - eager| = 0" in r.stdout


def test_passes_lists_registry_with_summaries():
    r = _run("passes")
    assert r.returncode == 0
    assert "claim" in r.stdout and "options: executors" in r.stdout and "Dead-code elimination" in r.stdout


def test_bad_pipeline_on_the_command_line():
    r = _run("demo", "--pipeline", "dce,frobnicate")
    assert r.returncode != 0 and "unknown pass 'frobnicate'" in r.stderr
