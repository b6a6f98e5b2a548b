"""Files other processes may read while they are written."""
from __future__ import annotations

import os
import threading
from pathlib import Path


def write_atomically(path, text: str) -> Path:
    """Write ``text`` to ``path`` beside it and rename it there: a reader (another process, another thread, or one
    after a crash) sees the old file, the new one, or none, never half of one. Raises OSError where it cannot write
    (the folder must exist)."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, p)
    finally:
        if tmp.exists():
            tmp.unlink()
    return p
