"""Float reference models for tests and benchmarks: the four MLPerf Tiny architectures.

Each factory returns `(model in eval mode, example_inputs)` with batch size 1 (NCHW). Weights are
random but deterministic for a given seed. BatchNorm is deliberately not the identity: its affine
parameters are random and its running statistics are measured on `calibration_data`, so every
layer's output is roughly zero-mean / unit-scale before the affine step. That keeps activations
well-scaled through 13+ layers, which random running statistics alone would not (scales would
drift geometrically and make int8 quantization tests meaningless).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Callable

import numpy as np
import torch
from torch import nn

ModelAndInputs = tuple[nn.Module, tuple[torch.Tensor, ...]]

# Input shape (batch 1) and value distribution per model: "normal" suits feature inputs
# (MFCCs, log-mel frames), "unit" suits images scaled to [0, 1).
_INPUTS: dict[str, tuple[tuple[int, ...], str]] = {
    "ds_cnn": ((1, 1, 49, 10), "normal"),
    "mobilenet_v1_025": ((1, 3, 96, 96), "unit"),
    "resnet8": ((1, 3, 32, 32), "unit"),
    "fc_autoencoder": ((1, 640), "normal"),
}

_BATCHNORM_STATISTICS_SAMPLES = 64


def calibration_data(name: str, n: int, seed: int = 0) -> np.ndarray:
    """`n` float32 inputs for zoo model `name`, shaped [n, *input_shape[1:]]."""
    shape, distribution = _INPUTS[name]
    return random_inputs(shape, distribution, n, seed)


def random_inputs(shape: tuple[int, ...], distribution: str, n: int, seed: int) -> np.ndarray:
    """`n` float32 samples shaped [n, *shape[1:]]: standard "normal", or "unit" uniform in [0, 1)."""
    rng = np.random.default_rng(seed)
    size = (n, *shape[1:])
    if distribution == "normal":
        return rng.standard_normal(size, dtype=np.float32)
    return rng.random(size, dtype=np.float32)


def count_macs(module: nn.Module, example_inputs: tuple[torch.Tensor, ...]) -> int:
    """Multiply-accumulates of every convolution (1-D, 2-D, transposed) and Linear in one forward pass."""
    total = 0

    def count_conv(conv: nn.modules.conv._ConvNd, inputs, output: torch.Tensor) -> None:
        nonlocal total
        kernel_size = math.prod(conv.kernel_size)
        if conv.transposed:  # every input element is scattered through the kernel to out/groups channels
            total += inputs[0].numel() * (conv.out_channels // conv.groups) * kernel_size
        else:
            total += output.numel() * (conv.in_channels // conv.groups) * kernel_size

    def count_linear(linear: nn.Linear, _inputs, output: torch.Tensor) -> None:
        nonlocal total
        total += output.numel() * linear.in_features

    handles = []
    for layer in module.modules():
        if isinstance(layer, nn.modules.conv._ConvNd):
            handles.append(layer.register_forward_hook(count_conv))
        elif isinstance(layer, nn.Linear):
            handles.append(layer.register_forward_hook(count_linear))
    try:
        with torch.no_grad():
            module(*example_inputs)
    finally:
        for handle in handles:
            handle.remove()
    return total


# --- building blocks -------------------------------------------------------------------------


def _conv_bn(in_ch: int, out_ch: int, kernel, stride=1, padding=0, groups=1) -> list[nn.Module]:
    return [
        nn.Conv2d(in_ch, out_ch, kernel, stride=stride, padding=padding, groups=groups, bias=False),
        nn.BatchNorm2d(out_ch),
    ]


def _depthwise_separable(in_ch: int, out_ch: int, stride: int, activation: type[nn.Module]) -> nn.Sequential:
    """Depthwise 3x3 + BN + act, then pointwise 1x1 + BN + act."""
    return nn.Sequential(
        *_conv_bn(in_ch, in_ch, 3, stride=stride, padding=1, groups=in_ch),
        activation(),
        *_conv_bn(in_ch, out_ch, 1),
        activation(),
    )


class _ResidualStack(nn.Module):
    """ResNet-8 stack: conv-BN-ReLU-conv-BN plus shortcut, added, then ReLU.

    The shortcut is the identity when the shape is kept, otherwise a strided 1x1 conv (with bias,
    no BN, as in the MLPerf Tiny Keras reference).
    """

    def __init__(self, in_ch: int, out_ch: int, stride: int):
        super().__init__()
        self.main = nn.Sequential(
            *_conv_bn(in_ch, out_ch, 3, stride=stride, padding=1),
            nn.ReLU(),
            *_conv_bn(out_ch, out_ch, 3, padding=1),
        )
        self.shortcut = nn.Identity() if stride == 1 and in_ch == out_ch else nn.Conv2d(in_ch, out_ch, 1, stride=stride)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.main(x) + self.shortcut(x))


def _dense_bn_relu(in_features: int, out_features: int) -> list[nn.Module]:
    return [nn.Linear(in_features, out_features), nn.BatchNorm1d(out_features), nn.ReLU()]


# --- randomisation ---------------------------------------------------------------------------


def _randomise_parameters(model: nn.Module) -> None:
    """He-normal weights (keeps activation scale through ReLU layers), small biases, random BN affine,
    PReLU slopes different per channel."""
    for layer in model.modules():
        if isinstance(layer, (nn.modules.conv._ConvNd, nn.Linear)):
            nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
            if layer.bias is not None:
                nn.init.uniform_(layer.bias, -0.1, 0.1)
        elif isinstance(layer, (nn.BatchNorm1d, nn.BatchNorm2d)):
            nn.init.uniform_(layer.weight, 0.5, 1.5)
            nn.init.uniform_(layer.bias, -0.25, 0.25)
        elif isinstance(layer, nn.PReLU):
            nn.init.uniform_(layer.weight, 0.05, 0.3)


def _measure_batchnorm_statistics(model: nn.Module, inputs: torch.Tensor) -> None:
    """Set every BN's running mean/var to the statistics of its input over one batch of `inputs`."""
    batchnorms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    momenta = [bn.momentum for bn in batchnorms]
    for bn in batchnorms:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average: after one batch, running stats == batch stats
    model.train()
    with torch.no_grad():
        model(inputs)
    for bn, momentum in zip(batchnorms, momenta):
        bn.momentum = momentum


def build_model(
    make_model: Callable[[], nn.Module], calibration: Callable[[int, int], np.ndarray], seed: int
) -> ModelAndInputs:
    """Make a model with random deterministic weights and measured BatchNorm statistics.

    `calibration(n, seed)` gives the model's float inputs; its sample `seed` is the example input.
    """
    # fork_rng: building a zoo model must not perturb the caller's global torch RNG.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = make_model()
        _randomise_parameters(model)
        statistics_inputs = calibration(_BATCHNORM_STATISTICS_SAMPLES, seed + 1)
        _measure_batchnorm_statistics(model, torch.from_numpy(statistics_inputs))
    example = torch.from_numpy(calibration(1, seed))
    return model.eval(), (example,)


# --- the four MLPerf Tiny models -------------------------------------------------------------


def ds_cnn(seed: int = 0) -> ModelAndInputs:
    """Keyword spotting DS-CNN: [1,1,49,10] MFCCs -> 12 class probabilities (~2.66 M MACs)."""

    def make() -> nn.Module:
        return nn.Sequential(
            # TF 'same' padding for a 10x4 stride-2 kernel on 49x10: 4 top, 5 bottom, 1 left, 1 right.
            nn.ZeroPad2d((1, 1, 4, 5)),
            *_conv_bn(1, 64, (10, 4), stride=2),
            nn.ReLU(),
            *[_depthwise_separable(64, 64, 1, nn.ReLU) for _ in range(4)],
            nn.AvgPool2d((25, 5)),
            nn.Flatten(),
            nn.Linear(64, 12),
            nn.Softmax(dim=1),
        )

    return build_model(make, partial(calibration_data, "ds_cnn"), seed)


# (output channels, stride) of MobileNetV1's 13 depthwise-separable blocks at width 0.25.
_MOBILENET_V1_025_BLOCKS = [
    (16, 1),
    (32, 2),
    (32, 1),
    (64, 2),
    (64, 1),
    (128, 2),
    (128, 1),
    (128, 1),
    (128, 1),
    (128, 1),
    (128, 1),
    (256, 2),
    (256, 1),
]


def mobilenet_v1_025(seed: int = 0) -> ModelAndInputs:
    """Visual wake words MobileNetV1 alpha 0.25 with ReLU6: [1,3,96,96] -> 2 probabilities (~7.49 M MACs)."""

    def make() -> nn.Module:
        layers: list[nn.Module] = [*_conv_bn(3, 8, 3, stride=2, padding=1), nn.ReLU6()]
        in_ch = 8
        for out_ch, stride in _MOBILENET_V1_025_BLOCKS:
            layers.append(_depthwise_separable(in_ch, out_ch, stride, nn.ReLU6))
            in_ch = out_ch
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(in_ch, 2), nn.Softmax(dim=1)]
        return nn.Sequential(*layers)

    return build_model(make, partial(calibration_data, "mobilenet_v1_025"), seed)


def resnet8(seed: int = 0) -> ModelAndInputs:
    """Image classification ResNet-8 (CIFAR-10): [1,3,32,32] -> 10 probabilities (~12.5 M MACs)."""

    def make() -> nn.Module:
        return nn.Sequential(
            *_conv_bn(3, 16, 3, padding=1),
            nn.ReLU(),
            _ResidualStack(16, 16, 1),
            _ResidualStack(16, 32, 2),
            _ResidualStack(32, 64, 2),
            nn.AvgPool2d(8),
            nn.Flatten(),
            nn.Linear(64, 10),
            nn.Softmax(dim=1),
        )

    return build_model(make, partial(calibration_data, "resnet8"), seed)


def fc_autoencoder(seed: int = 0) -> ModelAndInputs:
    """Anomaly detection FC autoencoder: [1,640] -> [1,640] reconstruction (~0.264 M MACs)."""

    def make() -> nn.Module:
        widths = [640, 128, 128, 128, 128, 8, 128, 128, 128, 128]
        blocks = [layer for a, b in zip(widths, widths[1:]) for layer in _dense_bn_relu(a, b)]
        return nn.Sequential(*blocks, nn.Linear(128, 640))

    return build_model(make, partial(calibration_data, "fc_autoencoder"), seed)


ZOO: dict[str, Callable[..., ModelAndInputs]] = {
    "ds_cnn": ds_cnn,
    "mobilenet_v1_025": mobilenet_v1_025,
    "resnet8": resnet8,
    "fc_autoencoder": fc_autoencoder,
}
