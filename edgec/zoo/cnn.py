"""Small, faithful float versions of today's public architectures: test models for operator coverage.

The six ImageNet classifiers follow the published architectures and torchvision's spelling of them
(module names, `+=` residuals, in-place activations, `x.mean([2, 3])` pooling, channel shuffle by
view/transpose/view), because that is the code users export; each class builds the full-size network
with its default arguments, and the factories shrink width, depth, resolution or classes to fit a
Cortex-M4 board (int8 activations well under 200 KB, int8 weights under 1 MB). The other seven are
small models that each bring operators the classifiers do not: U-Nets (upsampling, skip
concatenation, transposed convolutions), 1-D convolutions, tanh/average pooling, LeakyReLU/PReLU/
sigmoid, GELU/log_softmax, and two outputs.

Conventions are those of `edgec.zoo.mlperf`: each factory returns `(model.eval(), example_inputs)` with
batch 1, random deterministic weights, BatchNorm statistics measured on `calibration_data`.
"""

from __future__ import annotations

import math
import operator
from functools import partial
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.export import ExportedProgram

from edgec.zoo.mlperf import ModelAndInputs, build_model, random_inputs

aten = torch.ops.aten

# Input shape (batch 1) and value distribution per model (see edgec.zoo.mlperf.random_inputs).
_INPUTS: dict[str, tuple[tuple[int, ...], str]] = {
    "mobilenet_v3_small": ((1, 3, 96, 96), "unit"),
    "efficientnet_b0": ((1, 3, 64, 64), "unit"),
    # 66, not 64: the 3x3/2 stem gives 32x32 so that all three ceil_mode max pools round up
    # (32 -> 16 -> 8 -> 4 instead of 15, 7, 3); at 64 (and at 224) ceil_mode would change nothing.
    "squeezenet1_1": ((1, 3, 66, 66), "unit"),
    "shufflenet_v2_x0_5": ((1, 3, 64, 64), "unit"),
    "resnet18": ((1, 3, 64, 64), "unit"),
    "mnasnet0_5": ((1, 3, 64, 64), "unit"),
    "unet_nearest": ((1, 3, 32, 32), "unit"),
    "unet_transposed": ((1, 3, 32, 32), "unit"),
    "kws_conv1d": ((1, 40, 49), "normal"),  # 40 MFCC channels x 49 frames
    "lenet5_tanh": ((1, 1, 32, 32), "unit"),
    "binary_classifier": ((1, 1, 32, 32), "unit"),
    "mlp_log_softmax": ((1, 64), "normal"),
    "two_heads": ((1, 3, 32, 32), "unit"),
}

# The operators each model is here to exercise, as they appear in its torch.export (training IR)
# graph. Trailing-underscore overloads are the in-place spellings torchvision's code produces.
DISTINCTIVE_OPS: dict[str, frozenset] = {
    # hardswish_ (in-place) and hardsigmoid, SE: adaptive_avg_pool2d -> 1x1 convs -> relu (not in
    # place) -> gate, broadcast mul; `result += x` residual as add_; classifier
    # Linear-Hardswish-Dropout-Linear.
    "mobilenet_v3_small": frozenset(
        {
            aten.hardswish_.default,
            aten.hardsigmoid.default,
            aten.mul.Tensor,
            aten.adaptive_avg_pool2d.default,
            aten.relu.default,
            aten.add_.Tensor,
            aten.linear.default,
            aten.dropout_.default,
        }
    ),
    # silu_ everywhere, SE gate sigmoid, broadcast mul, 5x5 depthwise, `result += x` as add_.
    "efficientnet_b0": frozenset(
        {
            aten.silu_.default,
            aten.sigmoid.default,
            aten.mul.Tensor,
            aten.adaptive_avg_pool2d.default,
            aten.add_.Tensor,
            aten.dropout_.default,
        }
    ),
    # Fire: channel cat of two expand branches; max_pool2d ceil_mode=True; conv classifier then pool.
    "squeezenet1_1": frozenset(
        {
            aten.cat.default,
            aten.max_pool2d.default,
            aten.relu_.default,
            aten.adaptive_avg_pool2d.default,
            aten.dropout.default,
        }
    ),
    # chunk + cat, channel shuffle as view -> transpose -> contiguous -> view, global mean.
    "shufflenet_v2_x0_5": frozenset(
        {
            aten.chunk.default,
            aten.cat.default,
            aten.view.default,
            aten.transpose.int,
            aten.contiguous.default,
            aten.mean.dim,
            aten.max_pool2d.default,
        }
    ),
    # `out += identity` (add_), shared in-place ReLU, 7x7/2 stem, padded max pool, 1x1/2 downsample.
    "resnet18": frozenset(
        {aten.add_.Tensor, aten.relu_.default, aten.max_pool2d.default, aten.adaptive_avg_pool2d.default}
    ),
    # `self.layers(x) + x` (an out-of-place add), global mean, in-place dropout.
    "mnasnet0_5": frozenset({aten.add.Tensor, aten.mean.dim, aten.dropout_.default}),
    # nearest 2x upsampling and skip concatenation.
    "unet_nearest": frozenset({aten.upsample_nearest2d.vec, aten.cat.default, aten.max_pool2d.default}),
    # transposed convolutions (k2 s2, and k3 s2 p1 output_padding 1) and skip concatenation.
    "unet_transposed": frozenset({aten.conv_transpose2d.input, aten.cat.default, aten.max_pool2d.default}),
    # 1-D convolutions (stride, dilation, depthwise), 1-D max and adaptive average pooling.
    "kws_conv1d": frozenset({aten.conv1d.default, aten.max_pool1d.default, aten.adaptive_avg_pool1d.default}),
    # tanh and 2x2 average pooling.
    "lenet5_tanh": frozenset({aten.tanh.default, aten.avg_pool2d.default}),
    # leaky_relu_ (in-place, slope 0.1), per-channel prelu, sigmoid output.
    "binary_classifier": frozenset({aten.leaky_relu_.default, aten.prelu.default, aten.sigmoid.default}),
    # exact (erf) GELU and log_softmax.
    "mlp_log_softmax": frozenset({aten.gelu.default, aten.log_softmax.int}),
    # two graph outputs: softmax probabilities and a raw embedding.
    "two_heads": frozenset({aten.softmax.int, aten.linear.default}),
}


def calibration_data(name: str, n: int, seed: int = 0) -> np.ndarray:
    """`n` float32 inputs for model `name`, shaped [n, *input_shape[1:]]."""
    shape, distribution = _INPUTS[name]
    return random_inputs(shape, distribution, n, seed)


def _build(name: str, make_model: Callable[[], nn.Module], seed: int) -> ModelAndInputs:
    return build_model(make_model, partial(calibration_data, name), seed)


# Ops that need no buffer of their own: views of their input, inference no-ops, and BatchNorm
# (folded into the convolution before it).
_NO_NEW_BUFFER = {
    aten.view.default,
    aten.reshape.default,
    aten._unsafe_view.default,
    aten.flatten.using_ints,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.unsqueeze.default,
    aten.transpose.int,
    aten.chunk.default,
    operator.getitem,
    aten.dropout.default,
    aten.alias.default,
    aten.detach.default,
    aten.batch_norm.default,
}


def estimate_int8_activation_peak(program: ExportedProgram) -> int:
    """Bytes of the largest set of int8 activations alive at once, running the graph in its order.

    A simple estimate of the arena: each op's result is a buffer (one byte per element) alive from
    its producer to its last consumer (graph outputs to the end); in-place ops and _NO_NEW_BUFFER
    ops reuse their input's buffer. Weights and kernel scratch are not counted.
    """
    user_inputs = set(program.graph_signature.user_inputs)
    nodes = list(program.graph.nodes)
    owner: dict = {}  # node -> node whose buffer holds its value
    size: dict = {}
    start: dict = {}
    end: dict = {}
    for index, node in enumerate(nodes):
        if node.op == "placeholder" and node.name not in user_inputs:
            continue  # parameter, buffer or constant
        inputs = [owner[arg] for arg in node.all_input_nodes if arg in owner]
        for buffer in inputs:
            end[buffer] = len(nodes) if node.op == "output" else index
        if node.op == "output":
            continue
        aliases = node.target in _NO_NEW_BUFFER or getattr(getattr(node.target, "_schema", None), "is_mutable", False)
        if aliases and inputs:
            owner[node] = inputs[0]
            continue
        owner[node] = node
        values = node.meta["val"] if isinstance(node.meta["val"], (list, tuple)) else [node.meta["val"]]
        size[node] = sum(value.numel() for value in values)
        start[node] = end[node] = index
    return max(sum(size[b] for b in size if start[b] <= index <= end[b]) for index in range(len(nodes)))


# --- shared pieces ---------------------------------------------------------------------------


def make_divisible(value: float, divisor: int = 8) -> int:
    """Channels rounded to the nearest multiple of `divisor`, at least `divisor` and never more than
    10% below `value` (the MobileNet / EfficientNet channel rule)."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


class ConvNormActivation(nn.Sequential):
    """Conv2d without bias, `norm`, then an optional in-place activation; children 0, 1, 2 as in
    torchvision's Conv2dNormActivation. Padding keeps the size for odd kernels at stride 1."""

    def __init__(
        self,
        in_ch: int,
        out_ch: int,
        kernel_size: int = 3,
        stride: int = 1,
        groups: int = 1,
        activation: type[nn.Module] | None = nn.ReLU,
        norm: Callable[[int], nn.Module] = nn.BatchNorm2d,
    ):
        layers: list[nn.Module] = [
            nn.Conv2d(in_ch, out_ch, kernel_size, stride, padding=(kernel_size - 1) // 2, groups=groups, bias=False),
            norm(out_ch),
        ]
        if activation is not None:
            layers.append(activation(inplace=True))
        super().__init__(*layers)


class SqueezeExcitation(nn.Module):
    """Channel gate: global average pool, 1x1 conv down, activation, 1x1 conv up, gate, multiply."""

    def __init__(
        self, channels: int, squeeze_channels: int, activation: Callable[[], nn.Module], gate: Callable[[], nn.Module]
    ):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze_channels, 1)
        self.fc2 = nn.Conv2d(squeeze_channels, channels, 1)
        self.activation = activation()
        self.scale_activation = gate()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
        return scale * x


# --- MobileNetV3-Small (Howard et al. 2019) --------------------------------------------------

# Per bottleneck at width 1.0: input, kernel, expanded, output channels, squeeze-excite,
# hard-swish (else ReLU), stride.
_MOBILENET_V3_SMALL_BLOCKS = [
    (16, 3, 16, 16, True, False, 2),
    (16, 3, 72, 24, False, False, 2),
    (24, 3, 88, 24, False, False, 1),
    (24, 5, 96, 40, True, True, 2),
    (40, 5, 240, 40, True, True, 1),
    (40, 5, 240, 40, True, True, 1),
    (40, 5, 120, 48, True, True, 1),
    (48, 5, 144, 48, True, True, 1),
    (48, 5, 288, 96, True, True, 2),
    (96, 5, 576, 96, True, True, 1),
    (96, 5, 576, 96, True, True, 1),
]
_MOBILENET_V3_NORM = partial(nn.BatchNorm2d, eps=1e-3, momentum=0.01)


class MobileNetV3Block(nn.Module):
    """Inverted residual: 1x1 expand (skipped when it would not widen), depthwise, optional SE
    (hard-sigmoid gate, squeeze to a quarter), linear 1x1 projection, `+=` shortcut when shapes match."""

    def __init__(
        self, in_ch: int, kernel: int, expanded: int, out_ch: int, use_se: bool, use_hardswish: bool, stride: int
    ):
        super().__init__()
        activation = nn.Hardswish if use_hardswish else nn.ReLU
        conv = partial(ConvNormActivation, norm=_MOBILENET_V3_NORM)
        layers: list[nn.Module] = []
        if expanded != in_ch:
            layers.append(conv(in_ch, expanded, 1, activation=activation))
        layers.append(conv(expanded, expanded, kernel, stride, groups=expanded, activation=activation))
        if use_se:
            layers.append(SqueezeExcitation(expanded, make_divisible(expanded // 4), nn.ReLU, nn.Hardsigmoid))
        layers.append(conv(expanded, out_ch, 1, activation=None))
        self.block = nn.Sequential(*layers)
        self.use_res_connect = stride == 1 and in_ch == out_ch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result = self.block(x)
        if self.use_res_connect:
            result += x
        return result


class MobileNetV3Small(nn.Module):
    def __init__(self, width_mult: float = 1.0, num_classes: int = 1000, dropout: float = 0.2):
        super().__init__()

        def channels(count: int) -> int:
            return make_divisible(count * width_mult)

        first_ch = channels(_MOBILENET_V3_SMALL_BLOCKS[0][0])
        layers: list[nn.Module] = [
            ConvNormActivation(3, first_ch, 3, 2, activation=nn.Hardswish, norm=_MOBILENET_V3_NORM)
        ]
        for in_ch, kernel, expanded, out_ch, use_se, use_hardswish, stride in _MOBILENET_V3_SMALL_BLOCKS:
            layers.append(
                MobileNetV3Block(
                    channels(in_ch), kernel, channels(expanded), channels(out_ch), use_se, use_hardswish, stride
                )
            )
        last_in = channels(_MOBILENET_V3_SMALL_BLOCKS[-1][3])
        last_conv = 6 * last_in
        layers.append(ConvNormActivation(last_in, last_conv, 1, activation=nn.Hardswish, norm=_MOBILENET_V3_NORM))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        hidden = channels(1024)
        self.classifier = nn.Sequential(
            nn.Linear(last_conv, hidden),
            nn.Hardswish(inplace=True),
            nn.Dropout(dropout, inplace=True),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


def mobilenet_v3_small(seed: int = 0) -> ModelAndInputs:
    """MobileNetV3-Small at width 0.5, 96x96 input, 10 classes: 11 bottlenecks, 9 with SE."""
    return _build("mobilenet_v3_small", lambda: MobileNetV3Small(width_mult=0.5, num_classes=10), seed)


# --- EfficientNet-B0 (Tan & Le 2019) ---------------------------------------------------------

# Per stage at width and depth 1.0: expansion ratio, kernel, stride, input and output channels, repeats.
_EFFICIENTNET_B0_STAGES = [
    (1, 3, 1, 32, 16, 1),
    (6, 3, 2, 16, 24, 2),
    (6, 5, 2, 24, 40, 2),
    (6, 3, 2, 40, 80, 3),
    (6, 5, 1, 80, 112, 3),
    (6, 5, 2, 112, 192, 4),
    (6, 3, 1, 192, 320, 1),
]


class StochasticDepth(nn.Module):
    """Drops the whole residual branch of a random subset of samples ("row" mode) while training,
    rescaling survivors; the identity at inference, so it leaves no operator in an exported graph."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        survival = 1.0 - self.p
        keep = torch.empty((x.shape[0],) + (1,) * (x.dim() - 1), dtype=x.dtype).bernoulli_(survival)
        return x * keep / survival


class MBConv(nn.Module):
    """Mobile inverted bottleneck: 1x1 expand (not at ratio 1), depthwise, SE (SiLU, sigmoid gate,
    squeeze to a quarter of the block input), linear 1x1 projection, stochastic depth, `+=` shortcut."""

    def __init__(
        self, expand_ratio: int, kernel: int, stride: int, in_ch: int, out_ch: int, stochastic_depth_prob: float
    ):
        super().__init__()
        expanded = make_divisible(in_ch * expand_ratio)
        layers: list[nn.Module] = []
        if expanded != in_ch:
            layers.append(ConvNormActivation(in_ch, expanded, 1, activation=nn.SiLU))
        layers.append(ConvNormActivation(expanded, expanded, kernel, stride, groups=expanded, activation=nn.SiLU))
        layers.append(SqueezeExcitation(expanded, max(1, in_ch // 4), partial(nn.SiLU, inplace=True), nn.Sigmoid))
        layers.append(ConvNormActivation(expanded, out_ch, 1, activation=None))
        self.block = nn.Sequential(*layers)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob)
        self.use_res_connect = stride == 1 and in_ch == out_ch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result = self.block(x)
        if self.use_res_connect:
            result = self.stochastic_depth(result)
            result += x
        return result


class EfficientNet(nn.Module):
    """EfficientNet-B0 scaled by `width_mult` (channels, make_divisible) and `depth_mult` (repeats,
    rounded up); stochastic depth grows linearly with the block index up to `stochastic_depth_prob`."""

    def __init__(
        self,
        width_mult: float = 1.0,
        depth_mult: float = 1.0,
        num_classes: int = 1000,
        dropout: float = 0.2,
        stochastic_depth_prob: float = 0.2,
    ):
        super().__init__()
        stages = [
            (
                ratio,
                kernel,
                stride,
                make_divisible(in_ch * width_mult),
                make_divisible(out_ch * width_mult),
                math.ceil(repeats * depth_mult),
            )
            for ratio, kernel, stride, in_ch, out_ch, repeats in _EFFICIENTNET_B0_STAGES
        ]
        layers: list[nn.Module] = [ConvNormActivation(3, stages[0][3], 3, 2, activation=nn.SiLU)]
        total_blocks = sum(stage[-1] for stage in stages)
        block_index = 0
        for ratio, kernel, stride, in_ch, out_ch, repeats in stages:
            blocks = []
            for repeat in range(repeats):
                first = repeat == 0
                blocks.append(
                    MBConv(
                        ratio,
                        kernel,
                        stride if first else 1,
                        in_ch if first else out_ch,
                        out_ch,
                        stochastic_depth_prob * block_index / total_blocks,
                    )
                )
                block_index += 1
            layers.append(nn.Sequential(*blocks))
        last_in = stages[-1][4]
        layers.append(ConvNormActivation(last_in, 4 * last_in, 1, activation=nn.SiLU))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(dropout, inplace=True), nn.Linear(4 * last_in, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


def efficientnet_b0(seed: int = 0) -> ModelAndInputs:
    """EfficientNet-B0 at width 0.5, depth 0.5 (10 MBConv blocks, every kind: ratio 1 and 6, 3x3 and
    5x5, stride 1 and 2, with and without shortcut), 64x64 input, 10 classes."""
    return _build("efficientnet_b0", lambda: EfficientNet(width_mult=0.5, depth_mult=0.5, num_classes=10), seed)


# --- SqueezeNet 1.1 (Iandola et al. 2016) ----------------------------------------------------


class Fire(nn.Module):
    """1x1 squeeze + ReLU, then 1x1 and 3x3 expands (each + ReLU) concatenated on channels."""

    def __init__(self, in_ch: int, squeeze: int, expand1x1: int, expand3x3: int):
        super().__init__()
        self.squeeze = nn.Conv2d(in_ch, squeeze, 1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze, expand1x1, 1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze, expand3x3, 3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.squeeze_activation(self.squeeze(x))
        return torch.cat(
            [self.expand1x1_activation(self.expand1x1(x)), self.expand3x3_activation(self.expand3x3(x))], 1
        )


class SqueezeNet11(nn.Module):
    def __init__(self, num_classes: int = 1000, dropout: float = 0.5):
        super().__init__()
        pool = partial(nn.MaxPool2d, kernel_size=3, stride=2, ceil_mode=True)
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, stride=2),
            nn.ReLU(inplace=True),
            pool(),
            Fire(64, 16, 64, 64),
            Fire(128, 16, 64, 64),
            pool(),
            Fire(128, 32, 128, 128),
            Fire(256, 32, 128, 128),
            pool(),
            Fire(256, 48, 192, 192),
            Fire(384, 48, 192, 192),
            Fire(384, 64, 256, 256),
            Fire(512, 64, 256, 256),
        )
        self.classifier = nn.Sequential(
            nn.Dropout(dropout),
            nn.Conv2d(512, num_classes, 1),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d((1, 1)),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.classifier(self.features(x)), 1)


def squeezenet1_1(seed: int = 0) -> ModelAndInputs:
    """SqueezeNet 1.1 at full width (8 Fire modules), 66x66 input (see _INPUTS), 10 classes."""
    return _build("squeezenet1_1", lambda: SqueezeNet11(num_classes=10), seed)


# --- ShuffleNet V2 (Ma et al. 2018) ----------------------------------------------------------


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    """Interleave the channel groups: [g0c0, g0c1, .., g1c0, ..] -> [g0c0, g1c0, .., g0c1, ..]."""
    batch, channels, height, width = x.size()
    x = x.view(batch, groups, channels // groups, height, width)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(batch, channels, height, width)


class ShuffleBlock(nn.Module):
    """Stride 1: split channels in half, transform one half, concatenate, shuffle. Stride 2: both
    branches see the whole input (branch1 a strided depthwise + 1x1), concatenate, shuffle."""

    def __init__(self, in_ch: int, out_ch: int, stride: int):
        super().__init__()
        self.stride = stride
        half = out_ch // 2
        if stride > 1:
            self.branch1 = nn.Sequential(
                nn.Conv2d(in_ch, in_ch, 3, stride, 1, groups=in_ch, bias=False),
                nn.BatchNorm2d(in_ch),
                nn.Conv2d(in_ch, half, 1, bias=False),
                nn.BatchNorm2d(half),
                nn.ReLU(inplace=True),
            )
        else:
            self.branch1 = nn.Sequential()
        self.branch2 = nn.Sequential(
            nn.Conv2d(in_ch if stride > 1 else half, half, 1, bias=False),
            nn.BatchNorm2d(half),
            nn.ReLU(inplace=True),
            nn.Conv2d(half, half, 3, stride, 1, groups=half, bias=False),
            nn.BatchNorm2d(half),
            nn.Conv2d(half, half, 1, bias=False),
            nn.BatchNorm2d(half),
            nn.ReLU(inplace=True),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    """ShuffleNet V2; the default channels are those of the x0.5 model."""

    def __init__(
        self,
        stage_repeats: tuple[int, ...] = (4, 8, 4),
        stage_channels: tuple[int, ...] = (24, 48, 96, 192, 1024),
        num_classes: int = 1000,
    ):
        super().__init__()
        self.conv1 = nn.Sequential(
            nn.Conv2d(3, stage_channels[0], 3, 2, 1, bias=False),
            nn.BatchNorm2d(stage_channels[0]),
            nn.ReLU(inplace=True),
        )
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        in_ch = stage_channels[0]
        for index, (repeats, out_ch) in enumerate(zip(stage_repeats, stage_channels[1:-1]), start=2):
            blocks = [ShuffleBlock(in_ch, out_ch, 2)] + [ShuffleBlock(out_ch, out_ch, 1) for _ in range(repeats - 1)]
            setattr(self, f"stage{index}", nn.Sequential(*blocks))
            in_ch = out_ch
        self.conv5 = nn.Sequential(
            nn.Conv2d(in_ch, stage_channels[-1], 1, bias=False),
            nn.BatchNorm2d(stage_channels[-1]),
            nn.ReLU(inplace=True),
        )
        self.fc = nn.Linear(stage_channels[-1], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.conv1(x))
        x = self.conv5(self.stage4(self.stage3(self.stage2(x))))
        return self.fc(x.mean([2, 3]))


def shufflenet_v2_x0_5(seed: int = 0) -> ModelAndInputs:
    """ShuffleNet V2 x0.5 at its own width and depth (16 blocks, 13 with channel split), 64x64 input,
    10 classes."""
    return _build("shufflenet_v2_x0_5", lambda: ShuffleNetV2(num_classes=10), seed)


# --- ResNet-18 (He et al. 2016) --------------------------------------------------------------


class BasicBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN, `out += identity` (1x1 conv + BN shortcut when the shape
    changes), then the same in-place ReLU module again."""

    def __init__(self, in_ch: int, out_ch: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.downsample = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(nn.Conv2d(in_ch, out_ch, 1, stride, bias=False), nn.BatchNorm2d(out_ch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet18(nn.Module):
    def __init__(self, widths: tuple[int, ...] = (64, 128, 256, 512), num_classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, widths[0], 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        in_ch = widths[0]
        for index, out_ch in enumerate(widths, start=1):
            stride = 1 if index == 1 else 2
            setattr(
                self, f"layer{index}", nn.Sequential(BasicBlock(in_ch, out_ch, stride), BasicBlock(out_ch, out_ch, 1))
            )
            in_ch = out_ch
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(in_ch, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18(seed: int = 0) -> ModelAndInputs:
    """ResNet-18 at quarter width (16-32-64-128 channels instead of 64-128-256-512, so the int8
    weights are ~0.7 MB instead of ~11.7 MB), full depth, 64x64 input, 10 classes."""
    return _build("resnet18", lambda: ResNet18(widths=(16, 32, 64, 128), num_classes=10), seed)


# --- MnasNet (Tan et al. 2019) ---------------------------------------------------------------

# Per stack: kernel, stride, expansion factor, repeats; output depths come from _mnasnet_depths.
_MNASNET_STACKS = [(3, 2, 3, 3), (5, 2, 3, 3), (5, 2, 6, 3), (3, 1, 6, 2), (5, 2, 6, 4), (3, 1, 6, 1)]
_MNASNET_BN_MOMENTUM = 1 - 0.9997


def _mnasnet_depths(alpha: float) -> list[int]:
    """Stem, separable-conv and six stack widths scaled by `alpha` (same rounding rule as MobileNet)."""
    return [make_divisible(depth * alpha) for depth in (32, 16, 24, 40, 80, 96, 192, 320)]


class MnasNetBlock(nn.Module):
    """Inverted residual with ReLU: 1x1 expand, depthwise, linear 1x1; `layers(x) + x` if shapes match."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int, expansion: int):
        super().__init__()
        mid = in_ch * expansion
        bn = partial(nn.BatchNorm2d, momentum=_MNASNET_BN_MOMENTUM)
        self.apply_residual = in_ch == out_ch and stride == 1
        self.layers = nn.Sequential(
            nn.Conv2d(in_ch, mid, 1, bias=False),
            bn(mid),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, mid, kernel, stride, padding=kernel // 2, groups=mid, bias=False),
            bn(mid),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, out_ch, 1, bias=False),
            bn(out_ch),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.apply_residual:
            return self.layers(x) + x
        return self.layers(x)


class MNASNet(nn.Module):
    def __init__(self, alpha: float, num_classes: int = 1000, dropout: float = 0.2):
        super().__init__()
        depths = _mnasnet_depths(alpha)
        bn = partial(nn.BatchNorm2d, momentum=_MNASNET_BN_MOMENTUM)
        layers: list[nn.Module] = [
            nn.Conv2d(3, depths[0], 3, padding=1, stride=2, bias=False),
            bn(depths[0]),
            nn.ReLU(inplace=True),
            nn.Conv2d(depths[0], depths[0], 3, padding=1, groups=depths[0], bias=False),
            bn(depths[0]),
            nn.ReLU(inplace=True),
            nn.Conv2d(depths[0], depths[1], 1, bias=False),
            bn(depths[1]),
        ]
        for (kernel, stride, expansion, repeats), in_ch, out_ch in zip(_MNASNET_STACKS, depths[1:], depths[2:]):
            blocks = [MnasNetBlock(in_ch, out_ch, kernel, stride, expansion)]
            blocks += [MnasNetBlock(out_ch, out_ch, kernel, 1, expansion) for _ in range(repeats - 1)]
            layers.append(nn.Sequential(*blocks))
        layers += [nn.Conv2d(depths[-1], 1280, 1, bias=False), bn(1280), nn.ReLU(inplace=True)]
        self.layers = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(dropout, inplace=True), nn.Linear(1280, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.layers(x).mean([2, 3]))


def mnasnet0_5(seed: int = 0) -> ModelAndInputs:
    """MnasNet-A1 depth multiplier 0.5 at full depth (16 inverted residuals), 64x64 input, 10 classes."""
    return _build("mnasnet0_5", lambda: MNASNet(alpha=0.5, num_classes=10), seed)


# --- U-Nets (Ronneberger et al. 2015), three levels ------------------------------------------


def _double_conv(in_ch: int, out_ch: int) -> nn.Sequential:
    return nn.Sequential(ConvNormActivation(in_ch, out_ch), ConvNormActivation(out_ch, out_ch))


class UNet(nn.Module):
    """Encoder 2 levels + bottleneck, decoder upsamples 2x and concatenates the encoder's skip
    tensor on channels, 1x1 segmentation head. `upsampling`: "nearest" (nn.Upsample, channels kept)
    or "transposed" (ConvTranspose2d halving channels: kernel 2 stride 2 at the deeper level,
    kernel 3 stride 2 padding 1 output_padding 1 at the shallower one)."""

    def __init__(
        self, upsampling: str, widths: tuple[int, int, int] = (16, 32, 64), in_ch: int = 3, num_classes: int = 3
    ):
        super().__init__()
        w1, w2, w3 = widths
        self.enc1 = _double_conv(in_ch, w1)
        self.enc2 = _double_conv(w1, w2)
        self.pool = nn.MaxPool2d(2)
        self.bottleneck = _double_conv(w2, w3)
        if upsampling == "nearest":
            self.up2 = nn.Upsample(scale_factor=2, mode="nearest")
            self.up1 = nn.Upsample(scale_factor=2, mode="nearest")
            up2_ch, up1_ch = w3, w2
        elif upsampling == "transposed":
            self.up2 = nn.ConvTranspose2d(w3, w2, kernel_size=2, stride=2)
            self.up1 = nn.ConvTranspose2d(w2, w1, kernel_size=3, stride=2, padding=1, output_padding=1)
            up2_ch, up1_ch = w2, w1
        else:
            raise ValueError(f"unknown upsampling {upsampling!r}")
        self.dec2 = _double_conv(up2_ch + w2, w2)
        self.dec1 = _double_conv(up1_ch + w1, w1)
        self.head = nn.Conv2d(w1, num_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip1 = self.enc1(x)
        skip2 = self.enc2(self.pool(skip1))
        x = self.bottleneck(self.pool(skip2))
        x = self.dec2(torch.cat([self.up2(x), skip2], dim=1))
        x = self.dec1(torch.cat([self.up1(x), skip1], dim=1))
        return self.head(x)


def unet_nearest(seed: int = 0) -> ModelAndInputs:
    """U-Net, nearest-neighbour upsampling: [1,3,32,32] -> [1,3,32,32] per-pixel class logits."""
    return _build("unet_nearest", lambda: UNet("nearest"), seed)


def unet_transposed(seed: int = 0) -> ModelAndInputs:
    """U-Net, transposed-convolution upsampling: [1,3,32,32] -> [1,3,32,32] per-pixel class logits."""
    return _build("unet_transposed", lambda: UNet("transposed"), seed)


# --- small single-purpose models -------------------------------------------------------------


def _conv1d_bn_relu(
    in_ch: int, out_ch: int, kernel: int, stride: int = 1, dilation: int = 1, groups: int = 1
) -> list[nn.Module]:
    padding = (kernel - 1) // 2 * dilation
    return [
        nn.Conv1d(in_ch, out_ch, kernel, stride, padding, dilation, groups, bias=False),
        nn.BatchNorm1d(out_ch),
        nn.ReLU(),
    ]


def kws_conv1d(seed: int = 0) -> ModelAndInputs:
    """Keyword spotting over time: [1,40,49] MFCCs (channels x frames) -> 12 logits, by 1-D
    convolutions (dilated, strided, depthwise-separable), max pooling and global average pooling."""

    def make() -> nn.Module:
        return nn.Sequential(
            *_conv1d_bn_relu(40, 64, 3),  # 49 frames
            *_conv1d_bn_relu(64, 64, 3, dilation=2),  # 49
            nn.MaxPool1d(2),  # 24
            *_conv1d_bn_relu(64, 96, 3, stride=2),  # 12
            *_conv1d_bn_relu(96, 96, 3, dilation=4),  # 12
            *_conv1d_bn_relu(96, 96, 5, groups=96),  # 12, depthwise
            *_conv1d_bn_relu(96, 128, 1),  # 12, pointwise
            nn.AdaptiveAvgPool1d(1),
            nn.Flatten(),
            nn.Linear(128, 12),
        )

    return _build("kws_conv1d", make, seed)


def lenet5_tanh(seed: int = 0) -> ModelAndInputs:
    """LeNet-5 (LeCun et al. 1998) with tanh and 2x2 average pooling: [1,1,32,32] -> 10 logits."""

    def make() -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(1, 6, 5),
            nn.Tanh(),
            nn.AvgPool2d(2),
            nn.Conv2d(6, 16, 5),
            nn.Tanh(),
            nn.AvgPool2d(2),
            nn.Flatten(),
            nn.Linear(400, 120),
            nn.Tanh(),
            nn.Linear(120, 84),
            nn.Tanh(),
            nn.Linear(84, 10),
        )

    return _build("lenet5_tanh", make, seed)


def _separable_prelu(in_ch: int, out_ch: int, stride: int) -> nn.Sequential:
    """Depthwise 3x3 + BN + per-channel PReLU, pointwise 1x1 + BN + LeakyReLU(0.1)."""
    return nn.Sequential(
        nn.Conv2d(in_ch, in_ch, 3, stride, 1, groups=in_ch, bias=False),
        nn.BatchNorm2d(in_ch),
        nn.PReLU(num_parameters=in_ch),
        nn.Conv2d(in_ch, out_ch, 1, bias=False),
        nn.BatchNorm2d(out_ch),
        nn.LeakyReLU(0.1, inplace=True),
    )


def binary_classifier(seed: int = 0) -> ModelAndInputs:
    """Person / no person style detector: [1,1,32,32] -> [1,1] probability (sigmoid of one logit)."""

    def make() -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(1, 16, 3, 2, 1, bias=False),
            nn.BatchNorm2d(16),
            nn.LeakyReLU(0.1, inplace=True),  # 16x16
            _separable_prelu(16, 32, 1),
            _separable_prelu(32, 64, 2),  # 8x8
            _separable_prelu(64, 64, 2),  # 4x4
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(64, 1),
            nn.Sigmoid(),
        )

    return _build("binary_classifier", make, seed)


class _MLPLogSoftmax(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.GELU(), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.layers(x), dim=1)


def mlp_log_softmax(seed: int = 0) -> ModelAndInputs:
    """MLP with ReLU and GELU: [1,64] features -> 10 log-probabilities."""
    return _build("mlp_log_softmax", _MLPLogSoftmax, seed)


class _TwoHeads(nn.Module):
    """Shared CNN trunk; one head gives class probabilities, the other a raw (unnormalised) embedding."""

    def __init__(self, num_classes: int = 10, embedding: int = 32):
        super().__init__()
        self.trunk = nn.Sequential(
            ConvNormActivation(3, 16, 3, 2),
            ConvNormActivation(16, 32, 3, 2),
            ConvNormActivation(32, 64, 3, 2),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.classifier = nn.Linear(64, num_classes)
        self.embedding = nn.Linear(64, embedding)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.trunk(x)
        return F.softmax(self.classifier(features), dim=1), self.embedding(features)


def two_heads(seed: int = 0) -> ModelAndInputs:
    """[1,3,32,32] -> ([1,10] probabilities, [1,32] embedding)."""
    return _build("two_heads", _TwoHeads, seed)


ZOO_CNN: dict[str, Callable[..., ModelAndInputs]] = {
    "mobilenet_v3_small": mobilenet_v3_small,
    "efficientnet_b0": efficientnet_b0,
    "squeezenet1_1": squeezenet1_1,
    "shufflenet_v2_x0_5": shufflenet_v2_x0_5,
    "resnet18": resnet18,
    "mnasnet0_5": mnasnet0_5,
    "unet_nearest": unet_nearest,
    "unet_transposed": unet_transposed,
    "kws_conv1d": kws_conv1d,
    "lenet5_tanh": lenet5_tanh,
    "binary_classifier": binary_classifier,
    "mlp_log_softmax": mlp_log_softmax,
    "two_heads": two_heads,
}
