import pytest

from thunderlab.core.fastpaths import fast_paths


@pytest.fixture(autouse=True, params=[True, False], ids=["fast-paths", "plain-paths"])
def paths(request):
    """Every model test runs with the fast paths (see thunderlab.core.fastpaths) and without them."""
    with fast_paths(request.param):
        yield request.param
