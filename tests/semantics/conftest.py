"""Counts of the semantics suite by class, written where THUNDERLAB_SEMANTICS_REPORT says (benchmarks/semantics.py)."""
import json
import os
from collections import defaultdict

import pytest

from . import harness

CLASSES = {
    "test_aliasing": "1 in-place writes through views and aliases",
    "test_random": "2 random numbers",
    "test_grad_modes": "3 grad mode and autocast",
    "test_detach": "4 detach and views in backward",
    "test_constants": "5 constants",
    "test_direct_calls": "6 direct calls",
    "test_unsupported": "7 constructs that crashed or were unclear",
    "test_attention_modules": "8 attention modules trained (nn.MultiheadAttention, nn.Transformer)",
    "test_module_state": "9 modules trained: running statistics, checkpoint, embedding options",
    "test_integers": "10 integer arithmetic over int64's range",
    "test_hooks": "11 gradient hooks inside the function",
    "test_functorch": "12 torch.vmap and torch.func transforms inside the function",
    "test_conversions": "13 conversions that may return their input (to, cpu, contiguous, type_as, reshape, expand_as)",
    "test_call_forms": "14 arguments and sizes by the names and forms PyTorch documents (keywords, numbers, sequence)",
    "test_harness": "the harness itself",
}
_COUNTS: dict = defaultdict(lambda: defaultdict(int))


@pytest.fixture(autouse=True)
def _tally(request):
    before = len(harness.OUTCOMES)
    yield
    cls = CLASSES.get(request.module.__name__.rsplit(".", 1)[-1], request.module.__name__)
    for _entry, outcome in harness.OUTCOMES[before:]:
        _COUNTS[cls][f"entry checks {outcome}"] += 1


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        stem = report.nodeid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
        counts = _COUNTS[CLASSES.get(stem, stem)]
        counts[f"tests {report.outcome}"] += 1
        if report.failed:  # a value that differs from eager is wrong; any other exception is a raw error
            crash = getattr(report.longrepr, "reprcrash", None)
            message = crash.message if crash is not None else str(report.longrepr)
            counts["wrong" if message.startswith(("tests.semantics.harness.Mismatch", "Mismatch", "AssertionError",
                                                  "assert "))
                   else "raw errors"] += 1


def pytest_sessionfinish(session):
    out = os.environ.get("THUNDERLAB_SEMANTICS_REPORT")
    if out and _COUNTS:
        with open(out, "w") as f:
            json.dump({k: dict(v) for k, v in sorted(_COUNTS.items())}, f, indent=1)
