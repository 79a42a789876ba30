"""Sequence models: recurrent keyword spotters over MFCC frames and small transformers, as test
models for the recurrent and attention operators.

Conventions are those of `edgec.zoo.mlperf`: each factory returns `(model.eval(), example_inputs)` with
batch 1, random deterministic weights, BatchNorm statistics measured on `calibration_data`.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import numpy as np
import torch
from torch import nn

from edgec.zoo.mlperf import ModelAndInputs, build_model, random_inputs

aten = torch.ops.aten

# Input shape (batch 1) and value distribution per model (see edgec.zoo.mlperf.random_inputs).
_INPUTS: dict[str, tuple[tuple[int, ...], str]] = {}
# The operators each model is here to exercise, as they appear in its torch.export graph.
DISTINCTIVE_OPS: dict[str, frozenset] = {}
ZOO_SEQ: dict[str, Callable[..., ModelAndInputs]] = {}


def calibration_data(name: str, n: int, seed: int = 0) -> np.ndarray:
    """`n` float32 inputs for model `name`, shaped [n, *input_shape[1:]]."""
    shape, distribution = _INPUTS[name]
    return random_inputs(shape, distribution, n, seed)


def _build(name: str, make_model: Callable[[], nn.Module], seed: int) -> ModelAndInputs:
    return build_model(make_model, partial(calibration_data, name), seed)


# --- recurrent keyword spotters (LSTM, GRU) ------------------------------------------------------
# 49 frames x 10 MFCC coefficients (the DS-CNN keyword-spotting front end), hidden 64, 12 classes.
KWS_FRAMES, KWS_MFCC, KWS_HIDDEN, KWS_CLASSES = 49, 10, 64, 12


class _RecurrentKws(nn.Module):
    """[1, 49, 10] MFCC frames -> recurrent layer(s) -> the last step's hidden state -> 12 logits.
    `last` is how the last hidden state is read: "sequence" as output[:, -1], "h_n" as h_n[-1]."""

    def __init__(self, cell: type, layers: int = 1, last: str = "sequence", features: int = KWS_MFCC):
        super().__init__()
        self.last = last
        self.rnn = cell(features, KWS_HIDDEN, num_layers=layers, batch_first=True)
        self.classifier = nn.Linear(KWS_HIDDEN, KWS_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        output, state = self.rnn(x)
        if self.last == "h_n":
            hidden = state[0] if isinstance(state, tuple) else state
            return self.classifier(hidden[-1])
        return self.classifier(output[:, -1])


class _ConvGruKws(nn.Module):
    """[1, 49, 10] -> temporal Conv1d (10 -> 32 channels, k5) + BN + ReLU over the frames -> 2-layer
    GRU -> last step -> 12 logits."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(KWS_MFCC, 32, 5, padding=2, bias=False), nn.BatchNorm1d(32), nn.ReLU())
        self.rnn = nn.GRU(32, KWS_HIDDEN, num_layers=2, batch_first=True)
        self.classifier = nn.Linear(KWS_HIDDEN, KWS_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.conv(x.transpose(1, 2)).transpose(1, 2)  # [1, 49, 32]
        output, _ = self.rnn(features)
        return self.classifier(output[:, -1])


def _register(name: str, make: Callable[[], nn.Module], ops: set, doc: str) -> None:
    _INPUTS[name] = ((1, KWS_FRAMES, KWS_MFCC), "normal")
    DISTINCTIVE_OPS[name] = frozenset(ops)

    def factory(seed: int = 0) -> ModelAndInputs:
        return _build(name, make, seed)

    factory.__name__, factory.__doc__ = name, doc
    ZOO_SEQ[name] = factory
    globals()[name] = factory


_register(
    "lstm_kws",
    partial(_RecurrentKws, nn.LSTM),
    {aten.lstm.input, aten.zeros.default, aten.select.int},
    "LSTM keyword spotter: [1,49,10] MFCCs -> LSTM(64) -> output[:, -1] -> 12 logits.",
)
_register(
    "gru_kws",
    partial(_RecurrentKws, nn.GRU, last="h_n"),
    {aten.gru.input, aten.zeros.default, aten.select.int},
    "GRU keyword spotter: [1,49,10] MFCCs -> GRU(64) -> h_n[-1] -> 12 logits.",
)
_register(
    "conv_gru_kws",
    _ConvGruKws,
    {aten.conv1d.default, aten.gru.input, aten.transpose.int},
    "Temporal conv + GRU keyword spotter: [1,49,10] -> Conv1d(32, k5) -> 2-layer GRU(64) -> 12 logits.",
)

# The streaming model: lstm_kws compiled with --stream runs one frame per invoke (edgec.pipeline).
STREAMING = {"lstm_kws"}


# --- transformers ----------------------------------------------------------------------------

_INPUTS.update(
    {
        "vit_tiny": ((1, 3, 32, 32), "unit"),
        "kws_transformer": ((1, 49, 10), "normal"),  # 49 MFCC frames x 10 coefficients
    }
)


class TransformerBlock(nn.Module):
    """Pre-norm encoder block (ViT): x + MHA(LN(x)), then x + MLP(LN(x)) with a GELU MLP.

    `native` picks nn.MultiheadAttention(batch_first=True); otherwise the attention is written out
    with linear projections, head split by view/transpose and F.scaled_dot_product_attention."""

    def __init__(self, dim: int, heads: int, mlp_ratio: int = 2, native: bool = True):
        super().__init__()
        self.heads, self.native = heads, native
        self.norm1 = nn.LayerNorm(dim)
        if native:
            self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        else:
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim))

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        if self.native:
            return self.attn(x, x, x, need_weights=False)[0]
        batch, tokens, dim = x.shape
        q, k, v = self.qkv(x).reshape(batch, tokens, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        out = nn.functional.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(batch, tokens, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    """ViT (Dosovitskiy et al. 2021) in miniature: patch embedding by a strided convolution, a
    class token, learned positional embeddings, pre-norm blocks, classifier on the class token."""

    def __init__(
        self,
        image: int = 32,
        patch: int = 4,
        dim: int = 32,
        depth: int = 2,
        heads: int = 2,
        classes: int = 10,
        channels: int = 3,
    ):
        super().__init__()
        tokens = (image // patch) ** 2
        self.patch_embed = nn.Conv2d(channels, dim, patch, patch)
        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, dim))
        self.pos_embed = nn.Parameter(0.02 * torch.randn(1, tokens + 1, dim))
        self.blocks = nn.Sequential(*(TransformerBlock(dim, heads, native=i % 2 == 0) for i in range(depth)))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)  # [B, tokens, dim]
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def vit_tiny(seed: int = 0) -> ModelAndInputs:
    """[1,3,32,32] image -> 10 logits: 64 patches of 4x4 + a class token, dim 32, 2 heads, 2 blocks
    (one with nn.MultiheadAttention, one with F.scaled_dot_product_attention)."""
    return _build("vit_tiny", VisionTransformer, seed)


class KeywordTransformer(nn.Module):
    """Keyword transformer (Berg et al. 2021) in miniature: each of the 49 MFCC frames is a token
    (linear embedding of its 10 coefficients), learned positional embeddings, pre-norm blocks,
    classifier on the mean over tokens."""

    def __init__(
        self, frames: int = 49, coefficients: int = 10, dim: int = 32, depth: int = 2, heads: int = 2, classes: int = 12
    ):
        super().__init__()
        self.embed = nn.Linear(coefficients, dim)
        self.pos_embed = nn.Parameter(0.02 * torch.randn(1, frames, dim))
        self.blocks = nn.Sequential(*(TransformerBlock(dim, heads, native=True) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm(self.blocks(self.embed(x) + self.pos_embed))
        return self.head(x.mean(dim=1))


def kws_transformer(seed: int = 0) -> ModelAndInputs:
    """[1,49,10] MFCC frames -> 12 logits, dim 32, 2 heads, 2 blocks, token mean."""
    return _build("kws_transformer", KeywordTransformer, seed)


ZOO_TRANSFORMERS: dict[str, Callable[..., ModelAndInputs]] = {
    "vit_tiny": vit_tiny,
    "kws_transformer": kws_transformer,
}
