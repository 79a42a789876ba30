"""Sequence models: keyword spotters over MFCC frames, as test models for the recurrent and
sequence operators.

Conventions are those of `edgec.zoo`: each factory returns `(model.eval(), example_inputs)` with
batch 1, random deterministic weights, BatchNorm statistics measured on `calibration_data`.
"""
from __future__ import annotations

from functools import partial
from typing import Callable

import numpy as np
import torch
from torch import nn

from edgec.zoo import ModelAndInputs, build_model, random_inputs

aten = torch.ops.aten

# Input shape (batch 1) and value distribution per model (see edgec.zoo.random_inputs).
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


_register("lstm_kws", partial(_RecurrentKws, nn.LSTM), {aten.lstm.input, aten.zeros.default, aten.select.int},
          "LSTM keyword spotter: [1,49,10] MFCCs -> LSTM(64) -> output[:, -1] -> 12 logits.")
_register("gru_kws", partial(_RecurrentKws, nn.GRU, last="h_n"), {aten.gru.input, aten.zeros.default, aten.select.int},
          "GRU keyword spotter: [1,49,10] MFCCs -> GRU(64) -> h_n[-1] -> 12 logits.")
_register("conv_gru_kws", _ConvGruKws, {aten.conv1d.default, aten.gru.input, aten.transpose.int},
          "Temporal conv + GRU keyword spotter: [1,49,10] -> Conv1d(32, k5) -> 2-layer GRU(64) -> 12 logits.")

# The streaming model: lstm_kws compiled with --stream runs one frame per invoke (edgec.pipeline).
STREAMING = {"lstm_kws"}
