"""Small models that use every operator family of the coverage work, as `file.py:factory` specs."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class Activations(nn.Module):
    """Lookup-table activations, squeeze-excite broadcast mul, constant and scalar operands,
    PReLU, minimum/maximum, softmax over a non-channel axis, log_softmax, two outputs."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.squeeze = nn.Conv2d(16, 4, 1)
        self.excite = nn.Conv2d(4, 16, 1)
        self.prelu = nn.PReLU(16)
        self.fc = nn.Linear(16, 10)
        self.position = nn.Parameter(torch.randn(1, 16, 1, 1) * 0.1)

    def forward(self, x):
        x = F.hardswish(self.stem(x))
        gate = F.hardsigmoid(self.excite(F.relu(self.squeeze(F.adaptive_avg_pool2d(x, 1)))))
        x = x * gate + self.position
        x = self.prelu(x) * 0.5 - 0.25
        x = torch.maximum(x, torch.sigmoid(x))
        x = F.leaky_relu(x, 0.1) / 3
        x = torch.tanh(F.gelu(x)) + F.silu(x) - F.elu(x).clamp(max=1.0)
        x = F.softplus(x) * F.mish(x) + torch.exp(-x.abs().neg().neg() * 0.25) + torch.minimum(x, 0.5 - x)
        return F.log_softmax(self.fc(torch.mean(x, dim=(2, 3))), dim=1), torch.softmax(x, dim=2)


class Resampling(nn.Module):
    """Transposed convolutions (plain, depthwise, without bias, 1-D), Conv1d with BatchNorm1d,
    1-D pooling, a flatten between the 2-D and 1-D worlds."""

    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.up_depthwise = nn.ConvTranspose2d(8, 8, 3, stride=2, padding=1, output_padding=1, groups=8)
        self.smooth = nn.ConvTranspose2d(8, 4, 3, padding=1, bias=False)
        self.conv1d = nn.Conv1d(4, 6, 3, stride=2, padding=1)
        self.bn1d = nn.BatchNorm1d(6)
        self.up1d = nn.ConvTranspose1d(6, 4, 4, stride=2, padding=1)
        with torch.no_grad():
            self.bn1d.running_mean.uniform_(-0.5, 0.5)
            self.bn1d.running_var.uniform_(0.5, 2)

    def forward(self, x):
        x = self.smooth(self.up_depthwise(F.relu(self.up(F.relu(self.down(x))))))
        y = F.relu(self.bn1d(self.conv1d(x.flatten(2))))
        y = F.avg_pool1d(F.max_pool1d(y, 2), 3, stride=1, padding=1)
        return x, self.up1d(y)


class DataMovement(nn.Module):
    """chunk, cat, a channel shuffle (view, transpose, view), nearest and bilinear resizing,
    constant padding with a non-zero value, split, slices with a step, reductions, stack,
    permute, and average pooling counting its padding."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.branch = nn.Conv2d(4, 4, 1)
        self.mix = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 3, 5)

    def forward(self, x):
        x = F.relu(self.stem(x))
        a, b = x.chunk(2, dim=1)
        c = torch.cat([a, F.relu(self.branch(b))], 1)
        c = c.view(1, 2, 4, 8, 8).transpose(1, 2).contiguous().view(1, 8, 8, 8)
        d = F.interpolate(F.interpolate(c, scale_factor=2, mode="nearest"), size=(8, 8), mode="bilinear")
        e = torch.split(F.pad(d, (1, 1, 2, 0), value=0.5), [3, 7], dim=2)[1]
        h = F.relu(self.mix(e[:, :, :, 1:9]))
        summed, peak = h.sum(dim=2), h.amax(dim=1)
        t = torch.stack([summed[:, :, 0], peak[:, 0, :], summed.mean(dim=2)], dim=2)
        pooled = F.avg_pool2d(h, 3, stride=2, padding=1)
        return self.fc(t.flatten(1)), h[:, ::2].permute(0, 2, 3, 1), pooled


class ChannelsLastMovement(nn.Module):
    """On channels-last data: torch.roll (one axis, two axes, flattened) and torch.flip, each a
    copy in a few strided parts (a roll moves each part by one offset; a flip strides backwards);
    reductions over H alone (the output stays channels last) and over W with keepdim."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 1)

    def forward(self, x):
        y = self.conv(x)
        return (
            torch.roll(y, 2, 3),
            torch.roll(y, (-1, 3), (2, 3)),
            torch.roll(y, 5),
            torch.flip(y, [1, 3]),
            y.mean(2),
            y.amax(3, keepdim=True),
        )


class Attention(nn.Module):
    """Attention building blocks: a class token (cat of a parameter) and a positional embedding
    (add of a parameter), linear on 3-D tokens, layer_norm with and without affine parameters,
    nn.MultiheadAttention(batch_first=True), F.scaled_dot_product_attention with a scale,
    torch.matmul with a broadcast batch and bmm of two activations, tanh GELU, mean over tokens."""

    def __init__(self, dim: int = 16, tokens: int = 6):
        super().__init__()
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.5)
        self.pos_embed = nn.Parameter(torch.randn(1, tokens + 1, dim) * 0.5)
        self.norm = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, 2, batch_first=True)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.bare_norm = nn.LayerNorm(dim, elementwise_affine=False)
        self.fc = nn.Linear(dim, 4)

    def forward(self, x):
        x = torch.cat([self.cls_token, x], dim=1) + self.pos_embed
        x = x + self.attn(*(self.norm(x),) * 3, need_weights=False)[0]
        q, k, v = self.qkv(x).view(1, -1, 2, 3 * 8).transpose(1, 2).chunk(3, dim=-1)
        y = F.scaled_dot_product_attention(q, k, v, scale=0.3).transpose(1, 2).reshape(x.shape)
        gram = torch.bmm(y, y.transpose(1, 2))  # [1, 7, 7]
        mixed = torch.matmul(F.softmax(gram, dim=-1), x.unsqueeze(1).expand(1, 2, 7, 16)[:, 0])
        z = F.gelu(self.bare_norm(x + mixed), approximate="tanh")
        return self.fc(z.mean(dim=1)), z[:, 0]


def _seeded(cls, shape):
    def factory():
        torch.manual_seed(0)
        return cls().eval(), (torch.randn(*shape),)

    return factory


activations = _seeded(Activations, (1, 3, 8, 8))
resampling = _seeded(Resampling, (1, 3, 16, 16))
data_movement = _seeded(DataMovement, (1, 3, 8, 8))
channels_last_movement = _seeded(ChannelsLastMovement, (1, 3, 4, 5))
attention = _seeded(Attention, (1, 6, 16))
