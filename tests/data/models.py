"""Small models for target tests, as `file.py:factory` specs: each returns (model, example_inputs)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


class AllOps(nn.Module):
    """Every kernel edgec emits, in one small network: general conv (strided, padded, dilated),
    1x1 conv, depthwise conv with a channel multiplier, a standalone activation (its producer has
    two users), add, max and average pooling, a view, fully connected and softmax."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.stem_bn = nn.BatchNorm2d(8)
        self.dilated = nn.Conv2d(8, 8, 3, padding=2, dilation=2)
        self.depthwise = nn.Conv2d(8, 16, 3, padding=1, groups=8)
        self.pointwise = nn.Conv2d(16, 24, 1)
        self.padded = nn.Conv2d(24, 24, 3)
        self.fc = nn.Linear(24 * 2 * 2, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.stem_bn(self.stem(x)))
        y = self.dilated(x)
        x = F.relu(y) + y
        x = F.relu6(self.depthwise(x))
        x = F.max_pool2d(self.pointwise(x), 2)
        x = F.relu(self.padded(F.pad(x, (1, 1, 1, 1))))
        x = F.avg_pool2d(x, 2).flatten(1)
        return F.softmax(self.fc(x), dim=1)


def all_ops_samples(count: int, seed: int) -> np.ndarray:
    """Inputs for all_ops that differ in more than noise (noise averages out by the last layers):
    per sample and channel, a plane wave of random direction, phase and amplitude, plus noise."""
    rng = np.random.default_rng(seed)
    rows, cols = np.mgrid[0:16, 0:16] / 16.0
    direction = rng.uniform(-6, 6, (count, 3, 2, 1, 1))
    phase = rng.uniform(0, 2 * np.pi, (count, 3, 1, 1))
    amplitude = rng.uniform(0.1, 0.5, (count, 3, 1, 1))
    waves = amplitude * np.sin(direction[:, :, 0] * rows + direction[:, :, 1] * cols + phase)
    return (0.5 + waves + 0.05 * rng.standard_normal(waves.shape)).astype(np.float32)


def all_ops() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = AllOps()
        for layer in model.modules():  # He-normal keeps activations from fading layer by layer
            if isinstance(layer, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
        bn = model.stem_bn
        nn.init.uniform_(bn.weight, 0.5, 1.5)
        nn.init.uniform_(bn.bias, -0.25, 0.25)
        bn.running_mean.uniform_(-0.1, 0.1)
        bn.running_var.uniform_(0.5, 1.5)
    return model.eval(), (torch.from_numpy(all_ops_samples(1, 0)),)
