"""Modules that update their own state while training, compiled and compared with eager step by step.

Written from the documentation of the normalization layers: with ``track_running_stats=True``
``InstanceNorm`` keeps running estimates updated at every training call with ``momentum``;
``BatchNorm`` with ``momentum=None`` keeps a cumulative moving average and counts the batches
seen in ``num_batches_tracked``. The running statistics must be updated once per forward call,
as eager does, whatever the backward does.
"""
import pytest
import torch
import torch.nn as nn

from tests.semantics.harness import train_like_eager


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
}


@pytest.mark.parametrize("entry", ["jit", "compile"])
@pytest.mark.parametrize("name", list(MODELS))
def test_running_statistics_update_once_per_call(name, entry):
    make, shape = MODELS[name]
    train_like_eager(make, lambda step: (torch.randn(*shape, generator=torch.Generator().manual_seed(step)),), entry)
