"""Small models whose lowered programs tests/test_verify_mutations.py plants lowering bugs into:
one per layer family the layer check must guard (each factory returns (model, example inputs))."""

import torch
from torch import nn


def _seeded(module: nn.Module, *example: torch.Tensor):
    return module.eval(), example


def conv():
    torch.manual_seed(0)
    return _seeded(
        nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3)), torch.randn(1, 3, 8, 8)
    )


def conv1x1_128():
    """One zeroed channel among 128 is < 1 % of the layer's values."""
    torch.manual_seed(0)
    return _seeded(nn.Sequential(nn.Conv2d(8, 128, 1)), torch.randn(1, 8, 4, 4))


def depthwise():
    torch.manual_seed(0)
    return _seeded(
        nn.Sequential(nn.Conv2d(4, 16, 1), nn.Conv2d(16, 16, 3, padding=1, groups=16)), torch.randn(1, 4, 6, 6)
    )


def fully_connected():
    torch.manual_seed(0)
    return _seeded(nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 12)), torch.randn(1, 20))


def transposed_conv():
    torch.manual_seed(0)
    return _seeded(nn.Sequential(nn.Conv2d(3, 8, 3), nn.ConvTranspose2d(8, 8, 2, stride=2)), torch.randn(1, 3, 6, 6))


class Broadcast(nn.Module):
    """A product and a sum broadcasting a [1, C, 1, 1] and a [1, 1, H, W] operand."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 1)
        self.gate = nn.Parameter(torch.randn(1, 6, 1, 1))

    def forward(self, x):
        y = self.conv(x)
        return y * self.gate + y.mean(dim=1, keepdim=True)


def binary_broadcast():
    torch.manual_seed(0)
    return _seeded(Broadcast(), torch.randn(1, 3, 5, 7))


class Recurrent(nn.Module):
    def __init__(self, cell: type[nn.Module]):
        super().__init__()
        self.rnn = cell(6, 16, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.rnn(x)[0][:, -1])


def lstm():
    torch.manual_seed(0)
    return _seeded(Recurrent(nn.LSTM), torch.randn(1, 5, 6))


def gru():
    torch.manual_seed(0)
    return _seeded(Recurrent(nn.GRU), torch.randn(1, 5, 6))


class Norm(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 16)
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        return self.norm(self.fc(x))


def layer_norm():
    torch.manual_seed(0)
    return _seeded(Norm(), torch.randn(1, 6, 12))


class Attention(nn.Module):
    """q k^T then a softmax and the product with v: matmul, softmax, matmul."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        scores = torch.softmax(self.q(x) @ self.k(x).transpose(1, 2), dim=-1)
        return scores @ self.v(x)


def matmul():
    torch.manual_seed(0)
    return _seeded(Attention(), torch.randn(1, 6, 8))


def tables():
    torch.manual_seed(0)
    return _seeded(nn.Sequential(nn.Linear(10, 16), nn.Sigmoid(), nn.Linear(16, 16), nn.Tanh()), torch.randn(1, 10))


class ConvFlattenLinear(nn.Module):
    """A flatten of channels-last data read by a linear layer: its weight columns are permuted."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4 * 4 * 4, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.conv(x), 1))


def conv_flatten_linear():
    torch.manual_seed(0)
    return _seeded(ConvFlattenLinear(), torch.randn(1, 3, 6, 6))
