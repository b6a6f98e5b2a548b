"""The model zoo through thunderlab, equal to eager PyTorch (see models.py for the table, check.py for the modes).

``make test`` runs the fast subset (one model per family, transformers' default sdpa attention);
``THUNDERLAB_ZOO=full`` (``make zoo``) runs every architecture with each attention implementation.
"""
from __future__ import annotations

import os

import pytest

from .check import MODES, run
from .models import ZOO, attn_implementations, cases

FULL = os.environ.get("THUNDERLAB_ZOO") == "full"
CASES = cases(fast_only=not FULL)


def _id(case) -> str:
    entry, attn = case
    return entry.name if attn is None else f"{entry.name}-{attn}"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_model_matches_eager(case, mode):
    entry, attn = case
    result = run(entry, attn, mode)
    assert result.status == "pass", f"{_id(case)} {mode}: {result.status}: {result.detail}"


def test_zoo_covers_the_families():
    families = {e.family for e in ZOO}
    assert {"encoder", "decoder", "encoder-decoder", "vision", "audio"} <= families
    assert len({e.config for e in ZOO}) >= 30, "fewer than 30 architectures"
    both = [e.name for e in ZOO if attn_implementations(e) == ("eager", "sdpa")]
    assert len(both) >= 20, f"only {both} offer both attention implementations"
    assert any("moe" in e.name or "mixtral" in e.name for e in ZOO)
