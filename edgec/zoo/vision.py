"""Vision models whose activation peak sits in their first, widest layers: the RAM-budget models
(band stages, edgec.backend.banding; issue #24).

- mobilenet_v2_035: torchvision's MobileNetV2 definition (InvertedResidual, `x + self.conv(x)`
  residuals, ReLU6, Conv2dNormActivation children) at width 0.35 on 96x96, 10 classes.
- pnet: the MTCNN proposal network (Zhang et al. 2016), fully convolutional, on a 72x96 frame:
  conv 3x3 10 - PReLU - max pool 2x2 (ceil) - conv 3x3 16 - PReLU - conv 3x3 32 - PReLU, then a
  face-probability head (1x1 conv 2, softmax over the channels) and a box head (1x1 conv 4).

Conventions are those of `edgec.zoo.mlperf`: `(model.eval(), example_inputs)`, batch 1, random
deterministic weights, BatchNorm statistics measured on `calibration_data`.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import torch
from torch import nn

from edgec.zoo.cnn import ConvNormActivation, make_divisible
from edgec.zoo.mlperf import ModelAndInputs, build_model, random_inputs

_INPUTS: dict[str, tuple[tuple[int, ...], str]] = {
    "mobilenet_v2_035": ((1, 3, 96, 96), "unit"),
    "pnet": ((1, 3, 72, 96), "unit"),
}


def calibration_data(name: str, n: int, seed: int = 0) -> np.ndarray:
    """`n` float32 inputs for model `name`, shaped [n, *input_shape[1:]]."""
    shape, distribution = _INPUTS[name]
    return random_inputs(shape, distribution, n, seed)


class InvertedResidual(nn.Module):
    """torchvision's: 1x1 expand (unless t = 1), depthwise 3x3, linear 1x1 project; `x + conv(x)`
    when the shape is kept."""

    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: int):
        super().__init__()
        hidden = int(round(inp * expand_ratio))
        self.use_res_connect = stride == 1 and inp == oup
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(ConvNormActivation(inp, hidden, kernel_size=1, activation=nn.ReLU6))
        layers += [
            ConvNormActivation(hidden, hidden, stride=stride, groups=hidden, activation=nn.ReLU6),
            nn.Conv2d(hidden, oup, 1, 1, 0, bias=False),
            nn.BatchNorm2d(oup),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.use_res_connect:
            return x + self.conv(x)
        return self.conv(x)


# torchvision's inverted residual setting: expansion t, channels c, repeats n, first stride s.
_MOBILENET_V2_SETTING = [
    [1, 16, 1, 1],
    [6, 24, 2, 2],
    [6, 32, 3, 2],
    [6, 64, 4, 2],
    [6, 96, 3, 1],
    [6, 160, 3, 2],
    [6, 320, 1, 1],
]


class MobileNetV2(nn.Module):
    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0, dropout: float = 0.2):
        super().__init__()
        input_channel = make_divisible(32 * width_mult)
        last_channel = make_divisible(1280 * max(1.0, width_mult))
        features: list[nn.Module] = [ConvNormActivation(3, input_channel, stride=2, activation=nn.ReLU6)]
        for t, c, n, s in _MOBILENET_V2_SETTING:
            output_channel = make_divisible(c * width_mult)
            for i in range(n):
                features.append(InvertedResidual(input_channel, output_channel, s if i == 0 else 1, t))
                input_channel = output_channel
        features.append(ConvNormActivation(input_channel, last_channel, kernel_size=1, activation=nn.ReLU6))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout), nn.Linear(last_channel, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = nn.functional.adaptive_avg_pool2d(x, (1, 1))
        return self.classifier(torch.flatten(x, 1))


def mobilenet_v2_035(seed: int = 0) -> ModelAndInputs:
    """MobileNetV2 width 0.35 on 96x96, 10 classes (112,896 B arena layer by layer on cortex-m4)."""
    return build_model(
        lambda: MobileNetV2(num_classes=10, width_mult=0.35), partial(calibration_data, "mobilenet_v2_035"), seed
    )


class PNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 10, 3),
            nn.PReLU(10),
            nn.MaxPool2d(2, 2, ceil_mode=True),
            nn.Conv2d(10, 16, 3),
            nn.PReLU(16),
            nn.Conv2d(16, 32, 3),
            nn.PReLU(32),
        )
        self.face = nn.Conv2d(32, 2, 1)
        self.box = nn.Conv2d(32, 4, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.body(x)
        return torch.softmax(self.face(x), dim=1), self.box(x)


def pnet(seed: int = 0) -> ModelAndInputs:
    """MTCNN's PNet on a 72x96 frame: a face-probability map and box offsets, 31x43 each."""
    return build_model(PNet, partial(calibration_data, "pnet"), seed)


ZOO_VISION = {"mobilenet_v2_035": mobilenet_v2_035, "pnet": pnet}
