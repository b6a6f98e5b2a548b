"""Many jitted models in one process, sharing code as a model library's classes do: each compiles its own
graphs, whatever the others compiled before or dropped since (TorchDynamo's recompile limit counts
the compiles of one code object across every ``torch.compile`` call)."""
import functools
import gc

import pytest
import torch

import thunderlab
from thunderlab.frontend.dynamo import ISOLATED


def _loss(logits, labels):
    return torch.nn.functional.cross_entropy(logits, labels)


def _shared(forward):
    """A decorator every model class's forward has (transformers' output-collecting wrappers are such)."""

    @functools.wraps(forward)
    def wrapper(self, *args, **kwargs):
        return forward(self, *args, **kwargs)

    return wrapper


def _model(i: int) -> torch.nn.Module:
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 5)

        @_shared
        def forward(self, x, labels):
            logits = self.lin(x) * (i + 1)
            torch._dynamo.graph_break()  # the loss runs in a frame of its own, shared by every model
            return _loss(logits, labels)

    return Model()


@pytest.mark.skipif(not ISOLATED, reason="torch.compile has no isolate_recompiles before torch 2.13")
@torch._dynamo.config.patch(recompile_limit=8)  # Dynamo's default (the test suite raises it)
def test_each_of_a_dozen_models_sharing_code_is_compiled():
    x, labels = torch.randn(4, 8), torch.tensor([0, 1, 2, 3])
    live = []
    for i in range(12):
        model = _model(i)
        j = thunderlab.jit(model)
        torch.testing.assert_close(j(x, labels), model(x, labels))
        torch.testing.assert_close(j(x, labels), model(x, labels))
        names = [r.name for r in j.records]
        assert names == ["Model", "Model[1]"], f"model {i} compiled {names}"
        assert j.cache_info["misses"] == 2
        if i % 2:
            live.append(j)  # half are kept, half dropped: neither kind may leak into the next model's calls
        del j
        gc.collect()
