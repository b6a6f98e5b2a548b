"""Modules trained compiled and compared with eager step by step: state they update, gradient options.

Written from the documentation of the normalization layers (with ``track_running_stats=True``
``InstanceNorm`` keeps running estimates updated at every training call with ``momentum``;
``BatchNorm`` with ``momentum=None`` keeps a cumulative moving average and counts the batches
seen in ``num_batches_tracked``: the running statistics must be updated once per forward call,
whatever the backward does), of ``nn.Embedding`` (``scale_grad_by_freq`` divides each row's
gradient by how often its index occurs in the mini-batch) and of ``torch.utils.checkpoint``
(the recomputation in backward sees the random numbers the forward drew).
"""
import pytest
import torch
import torch.nn as nn

from tests.semantics.harness import train_like_eager


class Checkpointed(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.out, self.drop = nn.Linear(4, 8), nn.Linear(8, 4), nn.Dropout(0.3)

    def forward(self, x):
        body = lambda t: self.out(self.drop(torch.relu(self.fc(t))))  # noqa: E731
        return torch.utils.checkpoint.checkpoint(body, x, use_reentrant=False)


class Stacked(nn.Module):
    """Batch norm with a cumulative average, then instance norm over a copied length."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(4, momentum=None)
        self.inorm = nn.InstanceNorm1d(4, track_running_stats=True, affine=True)

    def forward(self, x):
        return self.inorm(self.bn(x).unsqueeze(-1).expand(-1, -1, 3).contiguous())


MODELS = {
    "instance norm 1d, running statistics": (lambda: nn.Sequential(
        nn.Conv1d(3, 4, 3), nn.InstanceNorm1d(4, track_running_stats=True, affine=True)), (2, 3, 8)),
    "instance norm 2d, running statistics, no affine": (lambda: nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.InstanceNorm2d(4, track_running_stats=True)), (2, 3, 6, 6)),
    "batch norm, cumulative average": (lambda: nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4, momentum=None)),
                                       (6, 4)),
    "batch norm then instance norm": (Stacked, (5, 4)),
    "checkpoint around dropout": (Checkpointed, (6, 4)),
    "embedding, gradient scaled by frequency": (lambda: nn.Embedding(10, 4, scale_grad_by_freq=True, padding_idx=0),
                                                "indices"),
}


def _inputs(shape, step):
    g = torch.Generator().manual_seed(step)
    if shape == "indices":
        return (torch.tensor([[1, 1, 2, 0], [3, 1, 2, 2]]).roll(step, 1),)
    return (torch.randn(*shape, generator=g),)


@pytest.mark.parametrize("entry", ["jit", "compile"])
@pytest.mark.parametrize("name", list(MODELS))
def test_training_steps_match_eager(name, entry):
    make, shape = MODELS[name]
    train_like_eager(make, lambda step: _inputs(shape, step), entry)
