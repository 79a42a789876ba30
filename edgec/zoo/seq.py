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


# --- a voice-activity detector as shipped (Silero VAD v5's architecture, our own code) -----------
# 16 kHz audio in 32 ms chunks: 512 new samples after the previous chunk's last 64 (the context the
# caller keeps), the LSTM cell's state (h, c) handed in and returned: the caller feeds it back with
# the next chunk. Sizes as the published 16 kHz model: STFT 256 / hop 128 -> 129 bins, a
# four-conv encoder to 128 features, LSTMCell(128, 128), a 1x1 conv decoder and a sigmoid.
VAD_CHUNK, VAD_CONTEXT, VAD_FFT, VAD_HOP, VAD_HIDDEN = 512, 64, 256, 128, 128


def stft_basis(n_fft: int = VAD_FFT) -> torch.Tensor:
    """[2 * (n_fft/2 + 1), 1, n_fft]: Hann-windowed cosines then negated sines, one filter per bin
    (the real and imaginary parts of the DFT of each frame)."""
    n = torch.arange(n_fft, dtype=torch.float64)
    k = torch.arange(n_fft // 2 + 1, dtype=torch.float64)[:, None]
    window = 0.5 - 0.5 * torch.cos(2 * torch.pi * n / n_fft)
    angle = 2 * torch.pi * k * n / n_fft
    return torch.cat([torch.cos(angle) * window, -torch.sin(angle) * window]).float().unsqueeze(1)


class StftMagnitude(nn.Module):
    """[1, 576] audio -> [1, 129, 4] magnitudes, as the shipped model writes it: reflect padding,
    the STFT as a Conv1d with a fixed basis (a buffer), sqrt(re ** 2 + im ** 2)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("basis", stft_basis())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.pad(x.unsqueeze(1), (0, VAD_CONTEXT), mode="reflect")
        spectrum = nn.functional.conv1d(x, self.basis, stride=VAD_HOP)  # [1, 258, 4]
        bins = VAD_FFT // 2 + 1
        return torch.sqrt(spectrum[:, :bins] ** 2 + spectrum[:, bins:] ** 2)


class SileroStyleVad(nn.Module):
    """x [1, 576] (context + chunk), h, c [1, 128] -> (speech probability [1, 1], h', c').

    stft (StftMagnitude); encoder Conv1d+ReLU x4 (two strided); rnn LSTMCell(128, 128) on the
    caller's state; decoder ReLU, Conv1d(128, 1, 1), sigmoid, the mean over its time axis."""

    def __init__(self):
        super().__init__()
        self.stft = StftMagnitude()
        bins = VAD_FFT // 2 + 1
        self.encoder = nn.Sequential(
            nn.Conv1d(bins, 128, 3, padding=1),
            nn.ReLU(),
            nn.Conv1d(128, 64, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv1d(64, 64, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv1d(64, 128, 3, padding=1),
            nn.ReLU(),
        )
        self.rnn = nn.LSTMCell(128, VAD_HIDDEN)
        self.decoder = nn.Sequential(nn.ReLU(), nn.Conv1d(VAD_HIDDEN, 1, 1), nn.Sigmoid())

    def forward(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor):
        features = self.encoder(self.stft(x)).squeeze(-1)  # [1, 128]
        h, c = self.rnn(features, (h, c))
        probability = self.decoder(h.unsqueeze(-1)).mean(dim=2)  # [1, 1]
        return probability, h, c


def vad_audio(chunks: int, seed: int = 0) -> np.ndarray:
    """A deterministic 16 kHz test signal of `chunks` chunks: quiet noise with bursts of voiced-like
    harmonics (a 120-220 Hz fundamental and its overtones), [chunks, 576] with each chunk's context."""
    rng = np.random.default_rng(seed)
    total = chunks * VAD_CHUNK + VAD_CONTEXT
    t = np.arange(total) / 16000.0
    signal = 0.01 * rng.standard_normal(total)
    for start in range(0, total, 4096):
        if rng.random() < 0.5:
            f0 = rng.uniform(120, 220)
            end = min(start + int(rng.integers(1500, 4096)), total)
            voiced = sum(np.sin(2 * np.pi * f0 * k * t[start:end]) / k for k in range(1, 6))
            signal[start:end] += 0.2 * voiced
    return np.stack([signal[i * VAD_CHUNK : i * VAD_CHUNK + VAD_CHUNK + VAD_CONTEXT] for i in range(chunks)]).astype(
        np.float32
    )


def vad_samples(model: nn.Module, chunks: int, seed: int = 0) -> list[np.ndarray]:
    """[x, h, c] for `chunks` consecutive chunks of vad_audio, each with the state the float model
    returned for the chunk before (the first a zero state): the inputs a caller gives it."""
    xs = vad_audio(chunks, seed)
    h = torch.zeros(1, VAD_HIDDEN)
    c = torch.zeros(1, VAD_HIDDEN)
    hs, cs = [], []
    with torch.no_grad():
        for x in xs:
            hs.append(h[0].numpy().copy())
            cs.append(c[0].numpy().copy())
            _, h, c = model(torch.from_numpy(x)[None], h, c)
    return [xs, np.stack(hs), np.stack(cs)]


def silero_vad(seed: int = 0) -> ModelAndInputs:
    """Silero-VAD-v5-style detector: ([1, 576] audio, h, c) -> (probability, h', c'); calibrate with
    vad_samples(model, n), which carries the state from chunk to chunk as a caller does."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = SileroStyleVad()
        for layer in model.modules():
            if isinstance(layer, nn.Conv1d):
                nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
                nn.init.uniform_(layer.bias, -0.1, 0.1)
        model.encoder[0].weight.data *= 0.2  # the magnitudes reach ~10: keep the encoder's range moderate
    model.eval()
    x, h, c = vad_samples(model, 1, seed)
    return model, (torch.from_numpy(x), torch.from_numpy(h), torch.from_numpy(c))
