import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    """Samples are tiny: torch's intra-op threads only cost time, badly so on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
