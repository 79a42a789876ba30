"""Small models for int16 activations (tests/test_int16.py), as `file.py:factory` specs."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class EveryInt16Kernel(nn.Module):
    """conv, 1x1 conv, depthwise, max and average pooling, sigmoid, tanh and GELU tables, a
    broadcast mul (squeeze-excite), a same-shape add, a global mean, linear, softmax."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pointwise = nn.Conv2d(8, 8, 1)
        self.squeeze = nn.Linear(8, 8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.stem(x)), 2)
        y = torch.tanh(self.pointwise(self.depthwise(x)))
        gate = torch.sigmoid(self.squeeze(F.avg_pool2d(x, 4).flatten(1)))
        x = F.gelu(x * gate[:, :, None, None] + y)
        return torch.softmax(self.fc(x.mean(dim=(2, 3))), dim=1)


def every_int16_kernel():
    torch.manual_seed(0)
    return EveryInt16Kernel().eval(), (torch.randn(1, 3, 8, 8),)


class Subtracts(nn.Module):
    """A subtraction of a constant: no int16 kernel (binary sub)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return self.conv(x) - 0.5


def subtracts():
    torch.manual_seed(0)
    return Subtracts().eval(), (torch.randn(1, 3, 6, 6),)


class Upsamples(nn.Module):
    """A transposed convolution: no int16 kernel (refused before calibration)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.up = nn.ConvTranspose2d(4, 4, 2, stride=2)

    def forward(self, x):
        return self.up(self.conv(x))


def upsamples():
    torch.manual_seed(0)
    return Upsamples().eval(), (torch.randn(1, 3, 6, 6),)


class TinyOutputRange(nn.Module):
    """A linear layer whose output a clamp keeps within +-0.001: s_in * s_w / s_out is far above
    2^7, beyond the int16 kernels' requantization (TFLite's limit)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)
        with torch.no_grad():
            self.fc.weight.fill_(1000.0)

    def forward(self, x):
        return F.hardtanh(self.fc(x), -0.001, 0.001)


def tiny_output_range():
    return TinyOutputRange().eval(), (torch.rand(1, 8) * 2 - 1,)


class MovesData(nn.Module):
    """Data movement between int16 layers: a channel split, a permute, a concatenation."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 6 * 6, 4)

    def forward(self, x):
        a, b = self.conv(x).chunk(2, dim=1)
        y = torch.cat([F.relu(b), a.permute(0, 1, 3, 2)], dim=1)
        return self.fc(y.flatten(1))


def moves_data():
    torch.manual_seed(0)
    return MovesData().eval(), (torch.randn(1, 3, 6, 6),)


class ReadsInputTwice(nn.Module):
    """The model input read by two convolutions (one of them int16 under --int16-layers)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3)
        self.b = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return self.a(x) + self.b(x)


def reads_input_twice():
    torch.manual_seed(0)
    return ReadsInputTwice().eval(), (torch.randn(1, 3, 6, 6),)


class FoldsBatchNorm(nn.Module):
    """conv -> BatchNorm (folded into the conv) -> ReLU -> mean -> linear."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.fc = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.Linear(8, 2)

    def forward(self, x):
        return self.fc(F.relu(self.bn(self.conv(x))).mean((2, 3)))


def folds_batch_norm():
    torch.manual_seed(0)
    return FoldsBatchNorm().eval(), (torch.randn(1, 3, 6, 6),)


class ScalesByConstant(nn.Module):
    """A mul by a constant tensor: no int16 kernel (refused by name, like a scalar operand)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.register_buffer("gain", torch.linspace(0.5, 1.5, 4).reshape(1, 4, 1, 1))

    def forward(self, x):
        return self.conv(x) * self.gain


def scales_by_constant():
    torch.manual_seed(0)
    return ScalesByConstant().eval(), (torch.randn(1, 3, 6, 6),)
