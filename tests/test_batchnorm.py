"""BatchNorm wherever it sits: folded into the conv, transposed conv or linear before it, or run
as the per-channel affine it is (a 1x1 depthwise convolution) after an activation, after a layer
whose output is read elsewhere too, or on [N, C] features. Each model is bit-exact on the host
and its int8 output follows the torch module's own output (a wrong fold would not)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import edgec
from edgec import sim
from edgec.ir import to_torch_order
from edgec.pipeline import compile_model, emit
from edgec.tools import verify


def _trained_bn(channels: int, dims: int) -> nn.Module:
    bn = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d}[dims](channels)
    generator = torch.Generator().manual_seed(channels)
    bn.running_mean.uniform_(-1, 1, generator=generator)
    bn.running_var.uniform_(0.3, 2, generator=generator)
    bn.weight.data.uniform_(0.5, 1.5, generator=generator)
    bn.bias.data.uniform_(-0.5, 0.5, generator=generator)
    return bn


class AfterRelu(nn.Module):
    """A pitch tracker's conv -> ReLU -> BatchNorm: nothing to fold into."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(2, 6, 3, padding=1), _trained_bn(6, 2)

    def forward(self, x):
        return self.bn(F.relu(self.conv(x)))


class AfterRelu1d(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.bn_features = nn.Conv1d(2, 5, 3), _trained_bn(5, 1), _trained_bn(5, 1)

    def forward(self, x):
        y = self.bn(F.relu(self.conv(x)))
        return self.bn_features(y.mean(2))  # [N, C] features


class SharedOutput(nn.Module):
    """The conv's output is read by the BatchNorm and by the add: folding would change the add."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(2, 2, 3, padding=1), _trained_bn(2, 2)

    def forward(self, x):
        y = self.conv(x)
        return self.bn(y) + y


class AfterTransposed(nn.Module):
    def __init__(self, groups: int):
        super().__init__()
        self.up = nn.ConvTranspose2d(4, 6, 2, stride=2, groups=groups)
        self.bn = _trained_bn(6, 2)

    def forward(self, x):
        return F.relu(self.bn(self.up(x)))


class PitchFrontEnd(nn.Module):
    """A pitch tracker's first layers on a long signal: the standalone BatchNorm has 122 pixels per
    channel, enough for its per-channel tables (depthwise.AFFINE_LOOKUP_MIN_PIXELS)."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv1d(1, 12, 8, stride=4), _trained_bn(12, 1)

    def forward(self, x):
        return self.bn(F.relu(self.conv(x)))


CASES = {
    "PitchFrontEnd()": ((1, 1, 492), "depthwise_conv2d"),
    "AfterRelu()": ((1, 2, 6, 5), "depthwise_conv2d"),
    "AfterRelu1d()": ((1, 2, 9), "depthwise_conv2d"),
    "SharedOutput()": ((1, 2, 5, 5), "depthwise_conv2d"),
    "AfterTransposed(1)": ((1, 4, 3, 3), None),
    "AfterTransposed(2)": ((1, 4, 3, 3), None),
}


@pytest.mark.parametrize("constructor", sorted(CASES))
def test_batch_norm_anywhere_is_exact_and_means_the_model(tmp_path, constructor):
    shape, standalone_kind = CASES[constructor]
    path = tmp_path / "bn.py"
    path.write_text(
        f"import torch\nfrom tests.test_batchnorm import *  # noqa: F403\n\n"
        f"def factory():\n    torch.manual_seed(0)\n    return {constructor}.eval(), (torch.zeros{shape},)\n"
    )
    rng = np.random.default_rng(0)
    samples = rng.standard_normal((24, *shape[1:])).astype(np.float32)
    compiled = compile_model(f"{path}:factory", calibration=samples[:16])
    kinds = [op.kind for op in compiled.graph.ops]
    assert (standalone_kind in kinds) if standalone_kind else ("depthwise_conv2d" not in kinds)

    emit(compiled, tmp_path / "out", "m")
    inputs = verify.quantized_inputs(compiled.graph, samples[16:])
    exe = verify.build_host(tmp_path / "out", "m", tmp_path / "build", sanitize=True)
    golden = verify.golden_outputs(compiled.graph, inputs)
    assert verify.compare(golden, verify.run_host(exe, inputs, verify.output_bytes(compiled.graph))).exact

    torch.manual_seed(0)
    module = eval(constructor).eval()
    output = compiled.graph.tensors[compiled.graph.outputs[0]]
    int8 = np.stack([output.dequantize(to_torch_order(output, row.reshape(output.shape))) for row in golden])
    with torch.no_grad():
        expected = np.stack([module(torch.from_numpy(x[None])).numpy()[0] for x in samples[16:]])
    assert sim.sqnr_db(expected, int8.reshape(expected.shape)) > 30


def test_a_long_standalone_batch_norm_runs_through_channel_tables_on_the_device():
    """The per-channel affine as one table per channel (edgec_lut_channels_s8), on Cortex-M4 and
    M55 under QEMU: golden == device and each layer within its tolerance of the program."""
    torch.manual_seed(0)
    samples = torch.randn(16, 1, 492)
    for target in ("cortex-m4", "cortex-m55"):
        compiled = edgec.compile(
            PitchFrontEnd().eval(), (samples[:1],), calibration=samples, target=target, progress=False
        )
        [affine] = [op for op in compiled.graph.ops if op.kind == "depthwise_conv2d"]
        assert affine.kernel.function == "edgec_lut_channels_s8", affine.kernel
        report = compiled.verify(samples[:4])  # raises on any byte differing or a layer off its program
        assert report.layers_checked == len(compiled.graph.ops) and report.output_sqnr_db > 30, report


def test_core_aten_spelling_of_transposed_convolutions_compiles_bit_exact():
    """A core-ATen program (run_decompositions) spells ConvTranspose1d/2d as aten.convolution with
    transposed=True; normalize gives the transposed convolution unit its own spelling."""

    class Up(nn.Module):
        def __init__(self):
            super().__init__()
            self.up2d = nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1)
            self.up1d = nn.ConvTranspose1d(4, 2, 2, stride=2)

        def forward(self, x):
            y = self.up2d(x)
            return self.up1d(y.flatten(2))

    model, example = Up().eval(), (torch.randn(1, 3, 4, 5),)
    program = torch.export.export(model, example).run_decompositions()
    assert any(
        node.target == torch.ops.aten.convolution.default and node.args[6]
        for node in program.graph.nodes
        if node.op == "call_function"
    )
    compiled = edgec.compile(program, calibration=torch.randn(16, 3, 4, 5))
    assert [op.kind for op in compiled.graph.ops].count("conv_transpose2d") == 2
    result = compiled.verify(count=4)  # raises unless the host C equals the golden simulator
    assert result.output_sqnr_db > 30, result
