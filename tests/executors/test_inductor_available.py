"""Inductor on CPU needs a C++ compiler: the executor says so, and follows PATH and CXX as they change."""
import os

from thunderlab.executors.inductor import InductorExecutor


def test_no_compiler_on_path_is_named_and_a_later_path_is_seen(monkeypatch, tmp_path):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    ex = InductorExecutor()
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CXX", "no-such-compiler")
    ok, why = ex.available()
    assert not ok and "C++ compiler" in why
    fake = tmp_path / "no-such-compiler"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}")  # another setting: looked up again
    assert ex.available() == (True, "")
