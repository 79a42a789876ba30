"""Small sequence models: test models for the operators of token sequences.

Conventions are those of `edgec.zoo`: each factory returns `(model.eval(), example_inputs)` with
batch 1 and random deterministic weights.
"""
from __future__ import annotations

from functools import partial
from typing import Callable

import numpy as np
import torch
from torch import nn

from edgec.zoo import ModelAndInputs, build_model, random_inputs

# Input shape (batch 1) and value distribution per model (see edgec.zoo.random_inputs).
_INPUTS: dict[str, tuple[tuple[int, ...], str]] = {}


def calibration_data(name: str, n: int, seed: int = 0) -> np.ndarray:
    """`n` float32 inputs for model `name`, shaped [n, *input_shape[1:]]."""
    shape, distribution = _INPUTS[name]
    return random_inputs(shape, distribution, n, seed)


def _build(name: str, make_model: Callable[[], nn.Module], seed: int) -> ModelAndInputs:
    return build_model(make_model, partial(calibration_data, name), seed)


# --- transformers ----------------------------------------------------------------------------

_INPUTS.update({
    "vit_tiny": ((1, 3, 32, 32), "unit"),
    "kws_transformer": ((1, 49, 10), "normal"),  # 49 MFCC frames x 10 coefficients
})


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

    def __init__(self, image: int = 32, patch: int = 4, dim: int = 32, depth: int = 2, heads: int = 2,
                 classes: int = 10, channels: int = 3):
        super().__init__()
        tokens = (image // patch) ** 2
        self.patch_embed = nn.Conv2d(channels, dim, patch, patch)
        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, dim))
        self.pos_embed = nn.Parameter(0.02 * torch.randn(1, tokens + 1, dim))
        self.blocks = nn.Sequential(*(TransformerBlock(dim, heads, native=i % 2 == 0) for i in range(depth)))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)          # [B, tokens, dim]
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

    def __init__(self, frames: int = 49, coefficients: int = 10, dim: int = 32, depth: int = 2, heads: int = 2,
                 classes: int = 12):
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
