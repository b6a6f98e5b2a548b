import os
import tempfile

import pytest
import torch

import thunderlab

# one TorchInductor cache per test run, should any test reach Inductor
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(tempfile.gettempdir(), "thunderlab-test-inductor"))
torch._dynamo.config.cache_size_limit = 64
# the test cache outlives a run: tests that watch the compile worker must see it asked, not an earlier run's answer
# (tests/executors/test_worker_answers.py turns recalling on in a cache of its own)
os.environ.setdefault("THUNDERLAB_WORKER_ANSWERS", "0")
# likewise a capture kept by an earlier run (or test) would stand in for TorchDynamo's, where tests watch its
# capture, graph breaks and recompiles: tests/frontend/test_captures.py turns keeping on in folders of its own
os.environ.setdefault("THUNDERLAB_CAPTURES", "0")
# a tiered CPU region's second kernel (Inductor's C++ wrapper) costs a C++ compile of seconds to a minute in the
# worker, and a test that waits for its regions would wait for it: tests/executors/test_cpp_wrapper.py turns it on
os.environ.setdefault("THUNDERLAB_CPP_WRAPPER", "0")
# most tests check the compiler, not fusion: run them on the torch executor (tests/executors and
# tests/passes/test_fuse.py name their executors explicitly, and one test checks the real default)
os.environ.setdefault("THUNDERLAB_EXECUTORS", "torch")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (marker cuda); torch sees none")
    for item in items:
        if item.get_closest_marker("cuda"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    # TorchDynamo keeps per-frame state across tests (torch.nn's modules share one wrapper frame,
    # whose sizes turn dynamic once two tests call it with different shapes): each test starts fresh
    torch._dynamo.reset()
    thunderlab.clear_records()  # each test sees only its own records
    yield
