"""edgec.zoo.cnn: the public-architecture test models export, rebuild identically, fit a Cortex-M4
board, and really contain the pieces (blocks, operators, attributes) they are in the zoo for."""

import functools
import math

import numpy as np
import pytest
import torch
from torch import nn

from edgec.zoo.cnn import (
    DISTINCTIVE_OPS,
    ZOO_CNN,
    BasicBlock,
    Fire,
    MBConv,
    MnasNetBlock,
    MobileNetV3Block,
    ShuffleBlock,
    SqueezeExcitation,
    StochasticDepth,
    calibration_data,
    estimate_int8_activation_peak,
)
from edgec.zoo.mlperf import count_macs

aten = torch.ops.aten

# Parameters and MACs (convolutions and Linear layers) of each model at its default input.
SIZES = {
    "mobilenet_v3_small": (409_394, 3_611_376),
    "efficientnet_b0": (663_530, 6_069_312),
    "squeezenet1_1": (727_626, 23_511_040),
    "shufflenet_v2_x0_5": (352_042, 3_230_848),
    "resnet18": (703_386, 11_060_480),
    "mnasnet0_5": (950_322, 8_435_328),
    "unet_nearest": (118_627, 28_803_072),
    "unet_transposed": (119_955, 25_788_416),
    "kws_conv1d": (81_452, 1_686_144),
    "lenet5_tanh": (61_706, 416_520),
    "binary_classifier": (8_561, 429_120),
    "mlp_log_softmax": (17_226, 17_024),
    "two_heads": (26_426, 703_104),
}
OUTPUT_SHAPES = {
    **{
        name: [(1, 10)]
        for name in (
            "mobilenet_v3_small",
            "efficientnet_b0",
            "squeezenet1_1",
            "shufflenet_v2_x0_5",
            "resnet18",
            "mnasnet0_5",
            "lenet5_tanh",
            "mlp_log_softmax",
        )
    },
    "unet_nearest": [(1, 3, 32, 32)],
    "unet_transposed": [(1, 3, 32, 32)],
    "kws_conv1d": [(1, 12)],
    "binary_classifier": [(1, 1)],
    "two_heads": [(1, 10), (1, 32)],
}
# Cortex-M4 board budget: int8 weights (one byte per parameter) and int8 activations.
MAX_WEIGHT_BYTES = 1_000_000
MAX_ACTIVATION_BYTES = 128 * 1024

# How many of each block / layer the model holds.
MODULE_COUNTS = {
    "mobilenet_v3_small": {MobileNetV3Block: 11, SqueezeExcitation: 9, nn.Hardsigmoid: 9, nn.Hardswish: 19},
    "efficientnet_b0": {MBConv: 10, SqueezeExcitation: 10, nn.Sigmoid: 10, StochasticDepth: 10},
    "squeezenet1_1": {Fire: 8, nn.MaxPool2d: 3, nn.BatchNorm2d: 0},
    "shufflenet_v2_x0_5": {ShuffleBlock: 16},
    "resnet18": {BasicBlock: 8},
    "mnasnet0_5": {MnasNetBlock: 16},
    "unet_nearest": {nn.Upsample: 2, nn.ConvTranspose2d: 0},
    "unet_transposed": {nn.ConvTranspose2d: 2, nn.Upsample: 0},
    "kws_conv1d": {nn.Conv1d: 6, nn.BatchNorm1d: 6, nn.Conv2d: 0},
    "lenet5_tanh": {nn.Tanh: 4, nn.AvgPool2d: 2},
    "binary_classifier": {nn.PReLU: 3, nn.LeakyReLU: 4},
    "mlp_log_softmax": {nn.Linear: 3, nn.GELU: 1},
    "two_heads": {nn.Linear: 2},
}
# How many times each distinctive operator appears in the exported graph.
GRAPH_OP_COUNTS = {
    # 7 residuals at width 0.5 (6 at width 1.0: the 5th 40->48 block becomes 24->24).
    "mobilenet_v3_small": {
        aten.hardsigmoid.default: 9,
        aten.mul.Tensor: 9,
        aten.add_.Tensor: 7,
        aten.hardswish_.default: 19,
        aten.relu.default: 9,
    },
    # Stochastic depth leaves no operator at inference.
    "efficientnet_b0": {
        aten.sigmoid.default: 10,
        aten.mul.Tensor: 10,
        aten.add_.Tensor: 3,
        aten.silu_.default: 31,
        aten.bernoulli_.float: 0,
    },
    "squeezenet1_1": {aten.cat.default: 8, aten.max_pool2d.default: 3},
    "shufflenet_v2_x0_5": {
        aten.chunk.default: 13,
        aten.cat.default: 16,
        aten.transpose.int: 16,
        aten.contiguous.default: 16,
        aten.view.default: 32,
        aten.mean.dim: 1,
    },
    "resnet18": {aten.add_.Tensor: 8, aten.relu_.default: 17},
    "mnasnet0_5": {aten.add.Tensor: 10, aten.mean.dim: 1},
    "unet_nearest": {aten.upsample_nearest2d.vec: 2, aten.cat.default: 2},
    "unet_transposed": {aten.conv_transpose2d.input: 2, aten.cat.default: 2},
    "kws_conv1d": {aten.conv1d.default: 6, aten.max_pool1d.default: 1, aten.adaptive_avg_pool1d.default: 1},
    "lenet5_tanh": {aten.tanh.default: 4, aten.avg_pool2d.default: 2},
    "binary_classifier": {aten.prelu.default: 3, aten.leaky_relu_.default: 4, aten.sigmoid.default: 1},
    "mlp_log_softmax": {aten.gelu.default: 1, aten.log_softmax.int: 1},
    "two_heads": {aten.softmax.int: 1, aten.linear.default: 2},
}


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """These models are small: a second intra-op thread only adds synchronisation (10x the CPU time
    on a loaded 2-core machine), so this file runs torch on one thread and then restores it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@functools.cache
def _build_and_export(name: str):
    """Each model built and exported once for the whole file (the tests only read them)."""
    model, example_inputs = ZOO_CNN[name]()
    return model, example_inputs, torch.export.export(model, example_inputs)


@pytest.fixture(params=sorted(ZOO_CNN))
def built(request):
    return request.param, *_build_and_export(request.param)


def _as_tuple(outputs):
    return outputs if isinstance(outputs, tuple) else (outputs,)


def _graph_ops(program) -> list:
    return [node.target for node in program.graph.nodes if node.op == "call_function"]


def _modules(model: nn.Module, kind: type) -> list:
    return [module for module in model.modules() if type(module) is kind]


def test_registries_name_the_same_models():
    assert set(DISTINCTIVE_OPS) == set(ZOO_CNN) == set(SIZES) == set(MODULE_COUNTS) == set(GRAPH_OP_COUNTS)


def test_exported_program_matches_eager(built):
    name, model, example_inputs, program = built
    with torch.no_grad():
        expected = _as_tuple(model(*example_inputs))
        actual = _as_tuple(program.module()(*example_inputs))
    assert [tuple(t.shape) for t in expected] == OUTPUT_SHAPES[name]
    torch.testing.assert_close(actual, expected)


def test_rebuild_is_identical(built):
    name, model, example_inputs, _ = built
    rebuilt, rebuilt_inputs = ZOO_CNN[name]()
    torch.testing.assert_close(rebuilt_inputs, example_inputs, rtol=0, atol=0)
    assert list(rebuilt.state_dict()) == list(model.state_dict())
    for key, value in model.state_dict().items():
        assert torch.equal(value, rebuilt.state_dict()[key]), key


def test_calibration_data_matches_model_input(built):
    name, _, (example,), _ = built
    data = calibration_data(name, 5, seed=3)
    assert data.dtype == np.float32
    assert data.shape == (5, *example.shape[1:])
    np.testing.assert_array_equal(data, calibration_data(name, 5, seed=3))
    np.testing.assert_array_equal(example.numpy(), calibration_data(name, 1, seed=0))


def test_batchnorm_is_not_identity(built):
    _, model, _, _ = built
    for bn in model.modules():
        if isinstance(bn, nn.modules.batchnorm._BatchNorm):
            assert not torch.allclose(bn.running_mean, torch.zeros_like(bn.running_mean))
            assert not torch.allclose(bn.running_var, torch.ones_like(bn.running_var))


def test_size_and_fits_cortex_m4(built):
    name, model, example_inputs, program = built
    parameters = sum(p.numel() for p in model.parameters())
    assert (parameters, count_macs(model, example_inputs)) == SIZES[name]
    assert parameters < MAX_WEIGHT_BYTES
    assert estimate_int8_activation_peak(program) < MAX_ACTIVATION_BYTES


def test_distinctive_ops_are_in_the_exported_graph(built):
    name, _, _, program = built
    assert DISTINCTIVE_OPS[name] <= set(_graph_ops(program))


def test_block_and_operator_counts(built):
    name, model, _, program = built
    assert {kind: len(_modules(model, kind)) for kind in MODULE_COUNTS[name]} == MODULE_COUNTS[name]
    ops = _graph_ops(program)
    assert {op: ops.count(op) for op in GRAPH_OP_COUNTS[name]} == GRAPH_OP_COUNTS[name]


# --- per-model details -----------------------------------------------------------------------


def _build(name: str) -> nn.Module:
    return _build_and_export(name)[0]


def test_squeeze_excitation_gates():
    for name, activation, gate in (
        ("mobilenet_v3_small", nn.ReLU, nn.Hardsigmoid),
        ("efficientnet_b0", nn.SiLU, nn.Sigmoid),
    ):
        for se in _modules(_build(name), SqueezeExcitation):
            assert type(se.activation) is activation and type(se.scale_activation) is gate
            assert isinstance(se.avgpool, nn.AdaptiveAvgPool2d)
            assert se.fc1.kernel_size == se.fc2.kernel_size == (1, 1)
            assert se.fc1.in_channels == se.fc2.out_channels >= se.fc1.out_channels  # 8 -> 8 at the minimum


def test_efficientnet_has_every_block_kind():
    blocks = _modules(_build("efficientnet_b0"), MBConv)
    depthwise = [next(m for m in block.modules() if isinstance(m, nn.Conv2d) and m.groups > 1) for block in blocks]
    assert {conv.kernel_size for conv in depthwise} == {(3, 3), (5, 5)}
    assert {conv.stride for conv in depthwise} == {(1, 1), (2, 2)}
    assert {block.use_res_connect for block in blocks} == {True, False}
    assert len(blocks[0].block) == 3  # expansion ratio 1: depthwise, SE, projection
    assert all(len(block.block) == 4 for block in blocks[1:])
    probabilities = [block.stochastic_depth.p for block in blocks]
    assert probabilities == sorted(probabilities) and probabilities[0] == 0 and probabilities[-1] > 0


def test_squeezenet_max_pools_round_up():
    program = _build_and_export("squeezenet1_1")[2]
    pools = [node for node in program.graph.nodes if node.target == aten.max_pool2d.default]
    assert [node.args[1:4] for node in pools] == [([3, 3], [2, 2], [0, 0])] * 3
    for node in pools:
        assert node.kwargs.get("ceil_mode", node.args[5] if len(node.args) > 5 else False)
        size_in, size_out = node.args[0].meta["val"].shape[-1], node.meta["val"].shape[-1]
        assert size_out == math.ceil((size_in - 3) / 2) + 1 == (size_in - 3) // 2 + 2  # ceil differs from floor


def test_shufflenet_downsampling_and_split_blocks():
    blocks = _modules(_build("shufflenet_v2_x0_5"), ShuffleBlock)
    assert [block.stride for block in blocks] == [2, 1, 1, 1, 2] + [1] * 7 + [2, 1, 1, 1]
    assert all(len(block.branch1) == (5 if block.stride == 2 else 0) for block in blocks)


def test_resnet18_stem_and_shortcuts():
    model = _build("resnet18")
    assert (model.conv1.kernel_size, model.conv1.stride, model.conv1.padding) == ((7, 7), (2, 2), (3, 3))
    assert (model.maxpool.kernel_size, model.maxpool.stride, model.maxpool.padding) == (3, 2, 1)
    blocks = _modules(model, BasicBlock)
    shortcuts = [block.downsample for block in blocks if block.downsample is not None]
    assert len(shortcuts) == 3
    for conv, bn in shortcuts:
        assert conv.kernel_size == (1, 1) and conv.stride == (2, 2) and isinstance(bn, nn.BatchNorm2d)
    assert [block.conv2.out_channels for block in blocks[::2]] == [16, 32, 64, 128]


def test_mnasnet_residuals_and_classifier_dropout():
    model = _build("mnasnet0_5")
    assert sum(block.apply_residual for block in _modules(model, MnasNetBlock)) == 10
    assert isinstance(model.classifier[0], nn.Dropout) and model.classifier[0].p == 0.2


def test_unet_transposed_convolutions():
    model = _build("unet_transposed")
    attributes = [(m.kernel_size, m.stride, m.padding, m.output_padding) for m in _modules(model, nn.ConvTranspose2d)]
    assert attributes == [((2, 2), (2, 2), (0, 0), (0, 0)), ((3, 3), (2, 2), (1, 1), (1, 1))]


def test_kws_conv1d_strides_dilations_and_depthwise():
    convs = _modules(_build("kws_conv1d"), nn.Conv1d)
    assert {conv.stride[0] for conv in convs} == {1, 2}
    assert {conv.dilation[0] for conv in convs} == {1, 2, 4}
    assert any(conv.groups == conv.in_channels == conv.out_channels > 1 for conv in convs)


def test_lenet5_average_pools_count_padding():
    pools = _modules(_build("lenet5_tanh"), nn.AvgPool2d)
    assert all(pool.kernel_size == 2 and pool.count_include_pad for pool in pools)


def test_binary_classifier_activations_and_probability():
    model = _build("binary_classifier")
    for prelu in _modules(model, nn.PReLU):
        assert prelu.num_parameters > 1 and prelu.weight.unique().numel() == prelu.num_parameters
    assert {leaky.negative_slope for leaky in _modules(model, nn.LeakyReLU)} == {0.1}
    with torch.no_grad():
        probability = model(torch.from_numpy(calibration_data("binary_classifier", 8, seed=1)))
    assert ((probability > 0) & (probability < 1)).all()


def test_normalised_outputs():
    for name in ("mlp_log_softmax", "two_heads"):
        model = _build(name)
        with torch.no_grad():
            first = _as_tuple(model(torch.from_numpy(calibration_data(name, 4, seed=2))))[0]
        probabilities = first.exp() if name == "mlp_log_softmax" else first
        torch.testing.assert_close(probabilities.sum(dim=1), torch.ones(4))


def test_activation_peak_estimate_follows_liveness():
    class Skip(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.conv2 = nn.Conv2d(8, 4, 1)

        def forward(self, x):
            y = torch.relu_(self.bn(self.conv1(x)))  # BN and in-place ReLU reuse conv1's buffer
            return torch.cat([self.conv2(y), y], dim=1).flatten(1)  # flatten is a view

    program = torch.export.export(Skip().eval(), (torch.zeros(1, 3, 16, 16),))
    pixels = 16 * 16
    # At the cat: y (8 ch), conv2's output (4 ch) and the cat result (12 ch) are alive; x is dead.
    assert estimate_int8_activation_peak(program) == (8 + 4 + 12) * pixels
