"""Files other processes may read while they are written, and what thunderlab keeps beside TorchInductor's cache."""
from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path


def write_atomically(path, text: str | bytes) -> Path:
    """Write ``text`` to ``path`` beside it and rename it there: a reader (another process, another thread, or one
    after a crash) sees the old file, the new one, or none, never half of one. Raises OSError where it cannot write
    (the folder must exist)."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        if isinstance(text, bytes):
            tmp.write_bytes(text)
        else:
            tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, p)
    finally:
        if tmp.exists():
            tmp.unlink()
    return p


def cache_folder(name: str) -> Path:
    """The folder ``name`` beside TorchInductor's on-disk cache (``TORCHINDUCTOR_CACHE_DIR`` or its default), where
    thunderlab keeps what a later process may reuse (not created here): kept, cleared and shared as that cache is."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir  # Inductor's runtime part, not its compiler

    return Path(cache_dir()) / name


def kept(name: str, key: str):
    """The JSON value ``keep`` kept as ``key`` in the cache folder ``name``, or None where none was kept or the file
    cannot be read (the caller then works it out again)."""
    try:
        return json.loads((cache_folder(name) / f"{key}.json").read_text())
    except (OSError, ValueError, ImportError):
        return None


def keep(name: str, key: str, value) -> bool:
    """Keep ``value`` (JSON) as ``key`` in the cache folder ``name``, whole or not at all for another process reading
    it; False where the folder cannot be written (what is kept only saves work: nothing depends on it)."""
    try:
        folder = cache_folder(name)
        folder.mkdir(parents=True, exist_ok=True)
        write_atomically(folder / f"{key}.json", json.dumps(value))
        return True
    except (OSError, ImportError):
        return False


_identity: str | None = None


def code_identity() -> str:
    """What, beside a program, decides what a compile makes of it, as one digest: this torch and Python, thunderlab's
    own code (every module of the package), the environment Inductor, TorchDynamo and thunderlab read, and the CPU's
    instruction set. Whatever is kept in a ``cache_folder`` is keyed by it, with the program."""
    global _identity
    if _identity is None:
        import hashlib
        import platform

        import torch

        h = hashlib.sha256()
        h.update(f"{torch.__version__} {sys.version} {platform.machine()}".encode())
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        for folder, dirs, files in sorted(os.walk(package)):
            dirs.sort()
            for name in sorted(f for f in files if f.endswith(".py")):
                with open(os.path.join(folder, name), "rb") as f:
                    h.update(name.encode() + f.read())
        for k, v in sorted(os.environ.items()):  # the cache's own folder aside: what is kept is kept in it
            if k.startswith(("TORCHINDUCTOR_", "TORCHDYNAMO_", "TORCH_COMPILE", "THUNDERLAB_")) and \
                    k != "TORCHINDUCTOR_CACHE_DIR":
                h.update(f"{k}={v}".encode())
        try:
            with open("/proc/cpuinfo") as f:
                h.update(next((line for line in f if line.startswith("flags")), "").encode())
        except OSError:
            pass
        _identity = h.hexdigest()
    return _identity
