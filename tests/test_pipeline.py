"""Lowering and fusion of every supported op form, and programs that arrive already quantized."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from edgec import sim
from edgec.frontend.quantize import EdgecQuantizer
from edgec.pipeline import compile_model, emit
from edgec.tools import verify


class AllOps(nn.Module):
    """One of each op form edgec lowers: asymmetric pad, dilation, groups, depthwise multiplier,
    BN, every activation, a standalone clamp, residual add, pools, flatten into linear, softmax."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, (3, 2), stride=(2, 1))
        self.bn = nn.BatchNorm2d(8)
        self.dilated = nn.Conv2d(8, 8, 3, padding=2, dilation=2)
        self.grouped = nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.depthwise = nn.Conv2d(8, 16, 3, padding=1, groups=8)  # channel multiplier 2
        self.pointwise = nn.Conv2d(16, 8, 1)
        self.fc = nn.Linear(8 * 4 * 5, 12)
        self.head = nn.Linear(12, 5)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        x = F.pad(x, (1, 0, 2, 1))  # left, right, top, bottom: asymmetric
        x = F.relu6(self.bn(self.stem(x)))
        y = self.dilated(x)
        z = torch.clamp(y, -1.0, 2.0)  # y has two users, so this clamp runs on its own
        x = F.relu(self.grouped(z) + y)
        x = F.hardtanh(self.depthwise(x), -2.0, 2.0)
        x = F.max_pool2d(self.pointwise(x), 2, ceil_mode=True)
        x = F.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)
        x = F.relu(self.fc(torch.flatten(x, 1)))
        return torch.softmax(self.head(x), dim=1)


class Simple(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        x = F.relu(self.conv(x))
        x = F.relu(self.dw(x)) + x
        x = F.adaptive_avg_pool2d(x, 1)
        return torch.softmax(self.fc(torch.flatten(x, 1)), dim=1)


def _bit_exact(compiled, out_dir, tmp_path, floats):
    emit(compiled, out_dir, "m")
    inputs = verify.quantized_inputs(compiled.graph, floats)
    exe = verify.build_host(out_dir, "m", tmp_path / "build", sanitize=True)
    device = verify.run_host(exe, inputs, verify.output_bytes(compiled.graph))
    return verify.compare(verify.golden_outputs(compiled.graph, inputs), device)


def _factory_file(tmp_path, cls_name: str, shape: tuple = (1, 3, 13, 9)) -> str:
    path = tmp_path / "allops.py"
    path.write_text(
        f"import torch\nfrom tests.test_pipeline import {cls_name}\n\n"
        f"def factory():\n    torch.manual_seed(0)\n    return {cls_name}().eval(), (torch.randn{shape},)\n"
    )
    return f"{path}:factory"


def test_simple_graph_lowers_to_the_expected_fused_ops(tmp_path):
    rng = np.random.default_rng(0)
    compiled = compile_model(_factory_file(tmp_path, "Simple"), calibration=rng.standard_normal((8, 3, 13, 9)))
    kinds = [op.kind for op in compiled.graph.ops]
    assert kinds == ["conv2d", "depthwise_conv2d", "add", "avg_pool2d", "reshape", "fully_connected", "softmax"]
    assert compiled.graph.ops[0].attrs["clamp"] == (0.0, None)  # ReLU fused as clamp bounds
    assert compiled.graph.tensors[compiled.graph.inputs[0]].perm == (0, 2, 3, 1)
    assert _bit_exact(compiled, tmp_path / "out", tmp_path, rng.standard_normal((6, 3, 13, 9))).exact


def test_every_supported_op_form_is_bit_exact(tmp_path):
    rng = np.random.default_rng(2)
    compiled = compile_model(_factory_file(tmp_path, "AllOps"), calibration=rng.standard_normal((16, 3, 13, 9)))
    kinds = [op.kind for op in compiled.graph.ops]
    assert "pad" not in kinds and kinds.count("clamp") == 1
    assert compiled.graph.ops[0].attrs["pad"] == (2, 1, 1, 0)  # F.pad folded into the stem conv
    depthwise = next(op for op in compiled.graph.ops if op.kind == "depthwise_conv2d")
    assert depthwise.attrs["ch_mult"] == 2
    floats = rng.standard_normal((10, 3, 13, 9)).astype(np.float32)
    assert _bit_exact(compiled, tmp_path / "out", tmp_path, floats).exact
    # The NHWC layout (flatten into linear permutes the weight columns) must keep the float meaning.
    # Checked per layer: a wrong permutation drops the flatten-fed linear layer to ~0 dB.
    int8_values = [verify.golden_values(compiled.graph, row) for row in verify.quantized_inputs(compiled.graph, floats)]
    rows = sim.layer_sqnr(compiled.graph, verify.float_reference(compiled, floats), int8_values)
    assert len(rows) >= 8 and min(row["sqnr_db"] for row in rows) > 20, rows


def test_prequantized_program_keeps_its_qparams_exactly(tmp_path):
    torch.manual_seed(0)
    model, example = Simple().eval(), (torch.randn(1, 3, 13, 9),)
    module = torch.export.export(model, example).module()
    prepared = prepare_pt2e(module, EdgecQuantizer())
    for _ in range(4):
        prepared(torch.randn(1, 3, 13, 9) * 2)
    converted = convert_pt2e(prepared, fold_quantize=True)
    path = tmp_path / "quantized.pt2"
    torch.export.save(torch.export.export(converted, example), path)
    input_q = next(
        n for n in converted.graph.nodes if "quantize_per_tensor" in str(n.target) and n.args[0].op == "placeholder"
    )

    warnings = []
    compiled = compile_model(str(path), calibration=None, warn=warnings.append)
    assert not warnings, "a quantized program needs no calibration"
    assert compiled.float_module is None
    tensor = compiled.graph.tensors[compiled.graph.inputs[0]]
    assert (tensor.scale, tensor.zero_point) == (input_q.args[1], input_q.args[2])
    assert _bit_exact(
        compiled, tmp_path / "out", tmp_path, np.random.default_rng(3).standard_normal((5, 3, 13, 9))
    ).exact


class MeanHead(nn.Module):
    """Global average pooling spelled as torch.mean without keepdim: a pool plus a free view."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3)
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        return self.fc(torch.mean(F.relu(self.conv(x)), dim=(-1, -2)))


def test_mean_over_height_and_width_is_a_global_pool(tmp_path):
    rng = np.random.default_rng(4)
    compiled = compile_model(_factory_file(tmp_path, "MeanHead"), calibration=rng.standard_normal((8, 3, 13, 9)))
    kinds = [op.kind for op in compiled.graph.ops]
    assert kinds == ["conv2d", "avg_pool2d", "reshape", "fully_connected"]
    assert compiled.graph.ops[1].attrs["kernel"] == (11, 7)
    assert _bit_exact(compiled, tmp_path / "out", tmp_path, rng.standard_normal((5, 3, 13, 9))).exact


class BiasFree(nn.Module):
    """Convolutions without bias and with default stride/padding, no BatchNorm after them: aten.conv2d
    then has only (input, weight) as arguments."""

    def __init__(self):
        super().__init__()
        self.pointwise = nn.Conv2d(3, 8, 1, bias=False)
        self.conv = nn.Conv2d(8, 8, 3, bias=False)
        self.fc = nn.Linear(8 * 11 * 7, 4, bias=False)

    def forward(self, x):
        return self.fc(torch.flatten(self.conv(F.relu(self.pointwise(x))), 1))


def test_convolutions_without_bias_or_default_arguments(tmp_path):
    rng = np.random.default_rng(5)
    compiled = compile_model(_factory_file(tmp_path, "BiasFree"), calibration=rng.standard_normal((8, 3, 13, 9)))
    assert [op.kind for op in compiled.graph.ops] == ["conv2d", "conv2d", "reshape", "fully_connected"]
    assert all(op.attrs["bias"] is None for op in compiled.graph.ops if op.kind != "reshape")
    assert compiled.graph.ops[1].attrs["stride"] == (1, 1) and compiled.graph.ops[1].attrs["pad"] == (0, 0, 0, 0)
    assert _bit_exact(compiled, tmp_path / "out", tmp_path, rng.standard_normal((5, 3, 13, 9))).exact


class _Affine(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 8))
        self.register_buffer("shift", torch.linspace(-0.2, 0.2, 8))


class BufferAffine(nn.Module):
    """A per-channel affine whose vectors are a submodule's buffers, reshaped in forward (a pitch
    tracker's BatchNorm written by hand): get_attr targets are dotted ("affine.scale"), which
    crashed constant folding with an AttributeError."""

    def __init__(self):
        super().__init__()
        self.conv, self.affine = nn.Conv2d(3, 8, 3), _Affine()

    def forward(self, x):
        y = F.relu(self.conv(x))
        return y * self.affine.scale.view(1, 8, 1, 1) + self.affine.shift.view(1, 8, 1, 1)


def test_constants_held_by_submodules_fold(tmp_path):
    rng = np.random.default_rng(6)
    compiled = compile_model(_factory_file(tmp_path, "BufferAffine"), calibration=rng.standard_normal((8, 3, 13, 9)))
    assert _bit_exact(compiled, tmp_path / "out", tmp_path, rng.standard_normal((5, 3, 13, 9))).exact


class Spectrum(nn.Module):
    """A VAD's STFT-magnitude front end as people write it: x ** 2, sqrt, log, rsqrt, reciprocal."""

    def __init__(self):
        super().__init__()
        self.re, self.im = nn.Conv1d(1, 8, 16, stride=8), nn.Conv1d(1, 8, 16, stride=8)

    def forward(self, x):
        magnitude = torch.sqrt(self.re(x) ** 2 + self.im(x).pow(2))
        return torch.log(magnitude + 1e-2) + torch.rsqrt(magnitude + 0.5) + torch.reciprocal(magnitude + 1.0)


def test_unary_math_runs_as_tables(tmp_path):
    rng = np.random.default_rng(7)
    compiled = compile_model(
        _factory_file(tmp_path, "Spectrum", (1, 1, 64)), calibration=rng.standard_normal((8, 1, 64))
    )
    functions = sorted(op.attrs["function"] for op in compiled.graph.ops if op.kind == "lut")
    assert functions == ["log", "pow", "pow", "reciprocal", "rsqrt", "sqrt"]
    assert _bit_exact(compiled, tmp_path / "out", tmp_path, rng.standard_normal((5, 1, 64))).exact


class Aliases(nn.Module):
    """torch.clip, torch.max(a, b) and torch.min(a, b): other spellings of clamp, maximum, minimum."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        y = self.fc(x)
        return torch.clip(y, -1, 1) + torch.max(x, y) + torch.min(x, y) + y.clip(min=0)


def test_aliases_compile_as_the_operator_they_name(tmp_path):
    rng = np.random.default_rng(8)
    compiled = compile_model(_factory_file(tmp_path, "Aliases", (1, 6)), calibration=rng.standard_normal((8, 1, 6)))
    assert _bit_exact(compiled, tmp_path / "out", tmp_path, rng.standard_normal((5, 1, 6))).exact


class ClampByTensors(nn.Module):
    """torch.clamp with tensor bounds: a per-feature clip (constants) and a clip to another live tensor."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.register_buffer("low", -torch.linspace(0.2, 1.0, 6))
        self.register_buffer("high", torch.linspace(0.3, 1.2, 6))

    def forward(self, x):
        y = torch.clamp(self.fc(x), self.low, self.high)
        return y + torch.clip(x, max=y) + x.clamp(min=self.low)


def test_clamp_with_tensor_bounds_is_max_then_min(tmp_path):
    rng = np.random.default_rng(9)
    compiled = compile_model(
        _factory_file(tmp_path, "ClampByTensors", (1, 6)), calibration=rng.standard_normal((8, 1, 6))
    )
    ops = sorted(op.attrs["op"] for op in compiled.graph.ops if op.kind == "binary" and op.attrs["op"] != "add")
    assert ops == ["maximum", "maximum", "minimum", "minimum"]
    assert _bit_exact(compiled, tmp_path / "out", tmp_path, rng.standard_normal((5, 1, 6))).exact


def test_build_warns_on_collapsed_weights_and_saturated_biases():
    from types import SimpleNamespace

    from edgec.pipeline import quantization_warnings

    layer = SimpleNamespace(
        name="conv2d_0",
        source="m.py:3: y = self.conv(x)",
        attrs={"weight": np.array([[1, 0], [0, -2]], np.int8), "bias": np.array([5, -(2**31)], np.int32)},
    )
    dead = SimpleNamespace(name="fc_1", source="", attrs={"weight": np.zeros((2, 3), np.int8), "bias": None})
    assert quantization_warnings(SimpleNamespace(ops=[layer, dead])) == [
        "WARNING: m.py:3: y = self.conv(x) (conv2d_0): the int32 bias saturates in output channels [1] (too large "
        "for the layer's input and weight scales)",
        "WARNING: fc_1 (fc_1): every weight quantizes to 0; the layer outputs its bias alone",
    ]
