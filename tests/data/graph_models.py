"""Small models exercising graph generality, as `file.py:factory` specs."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class InPlaceSpellings(nn.Module):
    """What a user writes without thinking about export: `out += identity`, in-place activations,
    and eval-time no-ops (dropout, clone, contiguous, detach)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(4, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.relu = nn.ReLU(inplace=True)
        self.drop = nn.Dropout(0.3)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        identity = x
        out = self.relu(self.conv1(x))
        out = self.conv2(out)
        out += identity
        out = F.relu_(out.clone().contiguous())
        out = self.drop(out).detach()
        return self.fc(F.dropout(torch.flatten(out, 1), 0.5, training=False))


class TwoInTwoOut(nn.Module):
    """Two inputs (an image and a feature vector) and two outputs (logits and an embedding)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.embed = nn.Linear(8 * 4 * 4, 16)
        self.side = nn.Linear(6, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, image, features):
        x = torch.flatten(F.relu(self.conv(image)), 1)
        embedding = F.relu(self.embed(x)) + self.side(features)
        return torch.softmax(self.head(embedding), dim=1), embedding


def _seeded(cls):
    torch.manual_seed(0)
    return cls().eval()


def in_place_spellings():
    return _seeded(InPlaceSpellings), (torch.randn(1, 4, 6, 6),)


def two_in_two_out():
    return _seeded(TwoInTwoOut), (torch.randn(1, 3, 8, 8), torch.randn(1, 6))
