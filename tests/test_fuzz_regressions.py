"""Bugs the differential fuzzer (tests/fuzz) found, as minimised models: each must now compile
and run bit-exact on the host with ASan/UBSan and the arena write checks, or be refused cleanly."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from edgec.errors import EdgecError
from edgec.ops import unit_of
from edgec.pipeline import compile_model, emit
from edgec.tools import verify


class SelfAdd(nn.Module):
    """Fuzz seed 16: an add reading one tensor twice (x0 + x0) crashed the scheduler, which
    counted the producer's dependency bit twice (a carry into the next op's bit)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 33, 1, bias=False)

    def forward(self, x):
        y = self.conv(x + x)
        return F.relu(torch.add(y, y))


def _factory_file(tmp_path, constructor: str, shape: tuple) -> str:
    path = tmp_path / "model.py"
    path.write_text(
        "import torch\nfrom tests import test_fuzz_regressions as regressions\n\n"
        "def factory():\n    torch.manual_seed(0)\n"
        f"    return regressions.{constructor}.eval(), (torch.zeros{shape},)\n"
    )
    return f"{path}:factory"


def _compile_and_compare(tmp_path, constructor: str, shape: tuple, offset: float, scale: float):
    rng = np.random.default_rng(0)
    samples = (offset + scale * np.abs(rng.standard_normal((12, *shape[1:])))).astype(np.float32)
    compiled = compile_model(_factory_file(tmp_path, constructor, shape), calibration=samples[:8])
    emit(compiled, tmp_path / "out", "m")
    inputs = verify.quantized_inputs(compiled.graph, samples[8:])
    exe = verify.build_host(tmp_path / "out", "m", tmp_path / "build", sanitize=True)
    output = verify.run_host(exe, inputs, verify.output_bytes(compiled.graph))
    return compiled, verify.compare(verify.golden_outputs(compiled.graph, inputs), output)


def test_an_add_of_a_tensor_with_itself_is_scheduled(tmp_path):
    compiled, comparison = _compile_and_compare(tmp_path, "SelfAdd()", (1, 1, 3, 2), 0.0, 0.4)
    assert [op.kind for op in compiled.graph.ops] == ["add", "conv2d", "add"]
    assert comparison.exact


@pytest.mark.parametrize("body", ["torch.flatten(x, 1)", "x.view(1, 16)", "x.reshape(4, 4)"])
def test_a_model_that_computes_nothing_is_refused(tmp_path, body):
    """Fuzz seed 186: a model whose only op is a view emitted C that does not compile with the
    documented flags (an unused status variable; in a test build also unused check functions)."""
    path = tmp_path / "nothing.py"
    path.write_text(
        "import torch\n\n\nclass Nothing(torch.nn.Module):\n"
        f"    def forward(self, x):\n        return {body}\n\n\n"
        "def factory():\n    return Nothing(), (torch.zeros(1, 1, 4, 4),)\n"
    )
    with pytest.raises(EdgecError, match="computes nothing"):
        compile_model(f"{path}:factory", calibration=np.ones((2, 1, 4, 4), dtype=np.float32))


class DisjointClamps(nn.Module):
    """Fuzz seed 247: hardtanh(-1, -0.5) then ReLU, both fused into the add before them, gave the
    clamp bounds [0, -0.5] (an intersection, empty), so act_min > act_max and the add kernel
    returned EDGEC_ARG_ERROR ("invoke failed"). Clamping to [a, b] then [c, d] is one clamp to
    [clamp(a, c, d), clamp(b, c, d)]: here the constant 0. torch.clamp with min > max (every
    element becomes max) gave the same invalid bounds."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 1)

    def forward(self, x):
        return F.relu(F.hardtanh(x + x, -1.0, -0.5)) + torch.clamp(self.conv(x), 1.0, 0.5)


def test_clamps_with_disjoint_bounds_compose_to_a_constant(tmp_path):
    compiled, comparison = _compile_and_compare(tmp_path, "DisjointClamps()", (1, 2, 3, 3), -1.0, 1.0)
    assert comparison.exact
    assert [op.kind for op in compiled.graph.ops] == ["add", "conv2d", "add"]
    assert compiled.graph.ops[0].attrs["clamp"] == (0.0, 0.0) and compiled.graph.ops[1].attrs["clamp"] == (0.5, 0.5)
    out = compiled.graph.tensors[compiled.graph.outputs[0]]
    assert np.allclose(out.dequantize(comparison.golden), 0.5, atol=out.scale)


class NarrowingActivations(nn.Module):
    """Fuzz seeds 28, 230, 280 (v2): a conv followed by clamp(max=0.5) then hardtanh(0, 6), both
    fused into it, took the qparams observed after the first activation (range up to -7800),
    so the fused output [0, 0.5] was all one value: 0 dB from the float model, bit-exact."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        with torch.no_grad():
            self.conv.weight.mul_(1000.0)

    def forward(self, x):
        return F.hardtanh(self.conv(x).clamp(max=0.5), 0.0, 6.0)


def test_fused_activations_take_the_qparams_after_the_last_one(tmp_path):
    compiled, comparison = _compile_and_compare(tmp_path, "NarrowingActivations()", (1, 2, 5, 5), -1.0, 2.0)
    assert comparison.exact
    assert [op.kind for op in compiled.graph.ops] == ["conv2d"] and compiled.graph.ops[0].attrs["clamp"] == (0.0, 0.5)
    assert compiled.graph.tensors[compiled.graph.outputs[0]].scale == pytest.approx(0.5 / 255)
    floats = (-1.0 + 2.0 * np.abs(np.random.default_rng(2).standard_normal((4, 2, 5, 5)))).astype(np.float32)
    int8 = verify.golden_outputs(compiled.graph, verify.quantized_inputs(compiled.graph, floats))
    assert verify.accuracy_summary(compiled, verify.float_reference(compiled, floats), int8)["output_sqnr_db"] > 30


class NearestResize(nn.Module):
    def __init__(self, size: tuple):
        super().__init__()
        self.size = size

    def forward(self, x):
        return F.interpolate(F.relu(x), size=self.size, mode="nearest")


@pytest.mark.parametrize(
    "size, shape, kind",
    [
        ((8, 11), (1, 3, 4, 5), "resize"),  # fuzz seed 35 (v3): refused as "not a strided copy"
        ((6, 8), (1, 3, 4, 4), "resize"),  # 4x4 -> 6x8, a factor of 1.5 and 2
        ((3, 4), (1, 3, 5, 7), "resize"),  # shrinking by uneven factors
        ((2, 5), (1, 3, 4, 5), "copy"),  # integer downsampling: a strided copy
    ],
)
def test_a_nearest_resize_by_any_factor_copies_pytorchs_pixels(tmp_path, size, shape, kind):
    """Fuzz seed 35 (v3) crashed, then was refused as "not a strided copy edgec can run": a
    nearest resize by a factor that is not an integer now reads PyTorch's source rows and columns
    through the bilinear kernel's tables (fraction 0: an exact copy), bit-exact on the host, each
    output pixel the input pixel PyTorch picks."""
    compiled, comparison = _compile_and_compare(tmp_path, f"NearestResize({size})", shape, -1.0, 1.0)
    assert comparison.exact and [op.kind for op in compiled.graph.ops][-1] == kind
    if kind == "copy":
        return
    x = np.random.default_rng(2).integers(-128, 128, shape).astype(np.int8)
    op = compiled.graph.ops[-1]
    stored = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    got = unit_of(op).golden(op, compiled.graph, [stored.reshape(compiled.graph.tensors[op.inputs[0]].shape)])
    expected = F.interpolate(torch.from_numpy(x.astype(np.float32)), size=size, mode="nearest").numpy()
    np.testing.assert_array_equal(np.asarray(got).reshape(1, *size, 3).transpose(0, 3, 1, 2), expected)


class ReduceOverSizeOne(nn.Module):
    """Fuzz seeds 144, 251 (v3): a reduction over axes of size 1 has no kept and no reduced loop
    left, and its descriptor's empty arrays were emitted as {} -- not C99 (-pedantic fails). Such a
    reduction is now the view it is (passes/normalize.py), before any kernel is chosen."""

    def forward(self, x):
        return x.sum(1, keepdim=True) + x.amax(2, keepdim=True).amin((1, 2), keepdim=True)


def test_a_reduction_over_size_one_axes_compiles(tmp_path):
    compiled, comparison = _compile_and_compare(tmp_path, "ReduceOverSizeOne()", (1, 1, 1, 3), -1.0, 2.0)
    assert comparison.exact and [op.kind for op in compiled.graph.ops] == ["reshape", "reshape", "reshape", "add"]


class SelfMaximum(nn.Module):
    """Fuzz seed 254 (v3): torch.maximum(x, x) annotated its second input edge to share the
    qparams of the first, the same edge, and PT2E's prepare recursed until RecursionError."""

    def forward(self, x):
        y = F.elu(x, alpha=0.7)
        return torch.maximum(y, y) + torch.minimum(x, x)


def test_a_minimum_or_maximum_of_a_tensor_with_itself_compiles(tmp_path):
    compiled, comparison = _compile_and_compare(tmp_path, "SelfMaximum()", (1, 2, 3, 3), -1.0, 2.0)
    assert comparison.exact


class WideMul(nn.Module):
    """Fuzz seeds 12, 56, 489: a product whose output step is far finer than its inputs' (here
    s1 * s2 / s_out near 2^20: a ReLU6 of a product of two wide tensors) requantizes with a left
    shift of about 20 bits. arm_nn_requantize computes x * 2^left in int32, which overflows
    (undefined in C); edgec wrapped it, golden and C alike, so outputs that saturate came out with
    the wrong sign. The left shift now saturates, as the real arithmetic does."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 1, 1)
        with torch.no_grad():
            self.conv.weight.fill_(300000.0)
            self.conv.bias.fill_(0.0)

    def forward(self, x):
        return F.relu6(F.relu(self.conv(x)) * x)


def test_a_left_shift_past_int32_saturates(tmp_path):
    compiled, comparison = _compile_and_compare(tmp_path, "WideMul()", (1, 1, 4, 4), -20.0, 40.0)
    mul = next(op for op in compiled.graph.ops if op.kind == "binary")
    assert mul.attrs["desc"]["output_shift"] >= 16
    assert comparison.exact
    rng = np.random.default_rng(1)
    verify.check_against_reference(
        compiled, (-20.0 + 40.0 * np.abs(rng.standard_normal((8, 1, 4, 4)))).astype(np.float32)
    )


class DeadChannelWithBias(nn.Module):
    """Fuzz seeds 23, 50: an output channel whose weights are near zero (a dead filter, or one a
    BatchNorm scaled down) gets a per-channel weight scale near zero, so its real bias divided by
    s_in * s_w left int32 and saturated: the channel output a wrong constant (every value off, C
    and golden alike). Its weight scale is now raised until the bias fits, as TFLite's quantizer
    does; the channel's weights, tiny against its bias, round to zero.

    Fuzz seed 63 (multi mode): a grouped transposed conv (one weight scale for every group) whose
    weights are all zero saturated its bias the same way (151 steps off); its one scale is raised."""

    def __init__(self, layer: str):
        super().__init__()
        self.layer = {
            "conv": lambda: nn.Conv2d(3, 4, 1),
            "linear": lambda: nn.Linear(12, 4),
            "grouped_transposed": lambda: nn.ConvTranspose2d(3, 3, 1, stride=3, output_padding=1, groups=3),
        }[layer]()
        with torch.no_grad():
            if layer == "grouped_transposed":
                self.layer.weight.zero_()
                self.layer.bias.copy_(torch.tensor([-0.4, 0.3, 60.0]))
                return
            self.layer.weight[2].mul_(1e-9)
            self.layer.bias.copy_(torch.tensor([0.1, -0.2, 60.0, 0.3]))

    def forward(self, x):
        return self.layer(x if not isinstance(self.layer, nn.Linear) else x.flatten(1))


@pytest.mark.parametrize("layer", ["conv", "linear", "grouped_transposed"])
def test_a_bias_behind_near_zero_weights_fits_int32(tmp_path, layer):
    compiled, comparison = _compile_and_compare(tmp_path, f"DeadChannelWithBias({layer!r})", (1, 3, 2, 2), -1.0, 2.0)
    op = compiled.graph.ops[-1]
    assert comparison.exact
    dead = op.attrs["weight"] if layer == "grouped_transposed" else op.attrs["weight"][2]
    assert np.abs(op.attrs["bias"].astype(np.int64)).max() <= 2**30 and not dead.any()
    rng = np.random.default_rng(1)
    verify.check_against_reference(
        compiled, (-1.0 + 2.0 * np.abs(rng.standard_normal((8, 1, 3, 2, 2)))).astype(np.float32)
    )


class TokenMean(nn.Module):
    """Generator finding: tokens [1, T, C] -> Linear -> mean over the last axis ran the mean as a
    1-D average pool, which stored the linear's output channels last although the linear writes
    PyTorch's order: golden != C, and with Linear(4, 4) the linear wrote past its arena slot. The
    layout pass now gives the pool a relayout copy of its own."""

    def __init__(self, features: int, between: str = ""):
        super().__init__()
        self.fc, self.between = nn.Linear(4, features), between

    def forward(self, x):
        y = self.fc(x)
        if self.between == "sigmoid":
            y = torch.sigmoid(y)
        elif self.between == "pad":
            y = F.pad(y, (1, 2))
        return torch.mean(y, 2)


@pytest.mark.parametrize(
    "constructor", ["TokenMean(4)", "TokenMean(6)", "TokenMean(5, 'sigmoid')", "TokenMean(3, 'pad')"]
)
def test_a_mean_over_the_last_axis_of_a_linear_output_is_exact(tmp_path, constructor):
    compiled, comparison = _compile_and_compare(tmp_path, constructor, (1, 5, 4), -1.0, 1.0)
    assert "copy" in [op.kind for op in compiled.graph.ops]
    assert comparison.exact


class NoOps(nn.Module):
    """Ops that compute nothing: a mean over a size-1 axis, a pad of zero width, a reshape to the
    same shape, an identity permute and transpose. They cost no layer and do not block int16."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)

    def forward(self, x):
        y = torch.mean(F.relu(self.conv(x)), dim=2)
        y = F.pad(y, (0, 0)).reshape(1, 4, 8).permute(0, 1, 2).transpose(1, 1)
        return torch.sigmoid(y)


@pytest.mark.parametrize("activations", ["int8", "int16"])
def test_ops_that_compute_nothing_vanish(tmp_path, activations):
    path = tmp_path / "noops.py"
    path.write_text(
        "import torch\nfrom tests.test_fuzz_regressions import NoOps\n\n"
        "def factory():\n    torch.manual_seed(0)\n    return NoOps().eval(), (torch.zeros(1, 1, 1, 8),)\n"
    )
    samples = np.random.default_rng(0).standard_normal((8, 1, 1, 8)).astype(np.float32)
    compiled = compile_model(f"{path}:factory", calibration=samples, activations=activations)
    assert [op.kind.removesuffix("_s16") for op in compiled.graph.ops] == ["conv2d", "reshape", "lut"]


class SelfCat(nn.Module):
    """A cat or stack of a tensor with itself: PT2E's prepare recursed without end (RecursionError)
    on the copy's annotation, whose second input shared the first input's qparams -- its own."""

    def __init__(self, stack: bool):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3)
        self.stack = stack

    def forward(self, x):
        y = self.conv(x)
        return torch.stack([y, y, F.relu(y)], 2) if self.stack else torch.cat([y, y], 1)


@pytest.mark.parametrize("stack", [False, True])
def test_a_cat_or_stack_of_a_tensor_with_itself_compiles(tmp_path, stack):
    compiled, comparison = _compile_and_compare(tmp_path, f"SelfCat({stack})", (1, 2, 6, 6), -0.5, 1.0)
    assert [op.kind for op in compiled.graph.ops][-1] == "copy"
    assert comparison.exact


class AdaptivePool(nn.Module):
    """Adaptive average pooling to a size that does not divide the input: PyTorch's windows of
    uneven size (5 -> 3: [0, 2), [1, 4), [3, 5)) were refused as "not a uniform window"."""

    def __init__(self, size):
        super().__init__()
        self.conv = nn.Conv2d(2, 5, 1)
        self.size = size

    def forward(self, x):
        return F.adaptive_avg_pool2d(self.conv(x), self.size)


@pytest.mark.parametrize(
    "size, shape, kinds",
    [
        ((3, 3), (1, 2, 7, 7), ["conv2d", "avg_pool2d"]),  # windows of 3 every 2: a plain average pool
        ((3, 2), (1, 2, 5, 9), ["conv2d", "avg_pool2d"]),  # uneven: edgec_adaptive_avg_pool_s8
        ((12, 6), (1, 2, 13, 9), ["conv2d", "avg_pool2d"]),
    ],
)
def test_adaptive_average_pooling_takes_pytorchs_uneven_windows(tmp_path, size, shape, kinds):
    compiled, comparison = _compile_and_compare(tmp_path, f"AdaptivePool({size})", shape, -0.5, 1.0)
    assert [op.kind for op in compiled.graph.ops] == kinds and comparison.exact
    calls = (tmp_path / "out" / "m.c").read_text()
    assert ("edgec_adaptive_avg_pool_s8" in calls) == (size != (3, 3))
    samples = np.random.default_rng(1).uniform(-0.5, 0.5, (4, *shape[1:])).astype(np.float32)
    rows = verify.layer_agreement(compiled, verify.qdq_reference(compiled, samples))
    assert not verify.disagreeing_layers(rows) and "avg_pool2d" in [row["op"] for row in rows]


class SmallRecurrent(nn.Module):
    """A bias-free GRU or LSTM on inputs of ~1e-2..1e-4: its hidden state's step (~1e-5) is finer
    than the tanh gates' Q3.12 input and Q0.15 output (and the LSTM's 2^-15 cell), so the integer
    cell departed from the program (issue 22: 92 % of the values off, up to 41 steps). Such a
    layer's tanh gates now run linear (tanh(x) = x there) at finer power-of-two scales. The LSTM
    over 4 steps then failed verify's recurrent check by up to 206 steps, though its integer cell
    was right: the check read the cell state at the tables' scale 2^-15 instead of the linear
    cell's finer one (each step's float cell started from a cell 128 times too large; at 1 step
    the cell starts at 0, so only T > 1 showed it). It now reads the scale the kernel runs at."""

    def __init__(self, cell: str, steps: int):
        super().__init__()
        self.rnn = getattr(nn, cell)(6, 20, bias=False, batch_first=True)
        self.steps = steps

    def forward(self, x):
        return self.rnn(x.view(1, self.steps, 6))[0]


@pytest.mark.parametrize("cell, steps", [("GRU", 1), ("GRU", 4), ("LSTM", 1), ("LSTM", 4)])
def test_a_bias_free_recurrent_layer_on_small_inputs_follows_its_program(tmp_path, cell, steps):
    rng = np.random.default_rng(3)
    samples = (rng.uniform(-1, 1, (12, 1, steps, 6)) * 10 ** rng.uniform(-4, -2, (12, 1, 1, 1))).astype(np.float32)
    compiled = compile_model(
        _factory_file(tmp_path, f"SmallRecurrent({cell!r}, {steps})", (1, 1, steps, 6)), calibration=samples[:8]
    )
    recurrent = next(op for op in compiled.graph.ops if op.kind == "recurrent")
    assert recurrent.attrs["desc"]["tanh_linear"] == 1
    rows = verify.layer_agreement(compiled, verify.qdq_reference(compiled, samples[8:]))
    row = next(row for row in rows if row["op"] == "recurrent")
    assert row["beyond_fraction"] == 0 and row["max_steps"] <= 1, row
    emit(compiled, tmp_path / "out", "m")
    inputs = verify.quantized_inputs(compiled.graph, samples[8:])
    exe = verify.build_host(tmp_path / "out", "m", tmp_path / "build", sanitize=True)
    output = verify.run_host(exe, inputs, verify.output_bytes(compiled.graph))
    assert verify.compare(verify.golden_outputs(compiled.graph, inputs), output).exact


class CollapsedLinear(nn.Module):
    """Fuzz seed 57 (v4): a linear layer on values ~1e8 whose output two clamps with disjoint
    bounds pin to 0 -- the output step is the observer's eps, s_in * s_w / s_out ~ 1e9 -- crashed
    (ValueError: multiplier too large to requantize in int32)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 6)

    def forward(self, x):
        return torch.clamp(self.fc(x * 1e7).clamp(max=-0.5), min=0.0)


def test_an_output_step_a_billion_times_finer_saturates_like_the_program(tmp_path):
    compiled, comparison = _compile_and_compare(tmp_path, "CollapsedLinear()", (1, 4), -5.0, 20.0)
    assert comparison.exact and "fully_connected" in [op.kind for op in compiled.graph.ops]


class CrossAttention(nn.Module):
    """nn.MultiheadAttention whose key/value source is not the query (fuzz seeds 73, 194 v4):
    PyTorch splits the packed in-projection weight with split_with_sizes, which was refused as
    "aten.split_with_sizes.default of a constant tensor is not supported"; the split of a
    constant now folds into constants (and a submodule's parameter is found by its dotted name)."""

    def __init__(self):
        super().__init__()
        self.memory = nn.Linear(8, 8)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        tokens = x.flatten(2).transpose(1, 2)
        memory = self.memory(tokens)
        return self.attn(tokens, memory, memory, need_weights=False)[0]


def test_cross_attention_compiles_and_follows_its_program(tmp_path):
    compiled, comparison = _compile_and_compare(tmp_path, "CrossAttention()", (1, 8, 3, 3), -0.5, 1.0)
    assert comparison.exact and "batch_matmul" in [op.kind for op in compiled.graph.ops]
    samples = np.random.default_rng(4).uniform(-0.5, 1.5, (4, 8, 3, 3)).astype(np.float32)
    assert not verify.disagreeing_layers(verify.layer_agreement(compiled, verify.qdq_reference(compiled, samples)))


class ChannelsLastOperand(nn.Module):
    """matmul, layer norm and linear over the last axis of a Conv1d's output, which edgec stores
    channels last, were refused ("matmul operand ... is stored channels last; edgec runs matmul on
    tensors in PyTorch's axis order", layer norm and linear alike): the layout pass now gives the
    conv a copy of its output in PyTorch's order (passes/layout.py), as the mean over the last axis
    of a linear's output gets one to channels last."""

    def __init__(self, form: str):
        super().__init__()
        self.conv = nn.Conv1d(4, 6, 3, padding=1)
        self.linear = nn.Linear(9, 5)
        self.form = form

    def forward(self, x):
        y = self.conv(x)
        if self.form == "gram":
            return torch.matmul(y, y.transpose(1, 2))
        if self.form == "tokens":
            return torch.matmul(y.transpose(1, 2), y)
        if self.form == "linear":
            return self.linear(y)
        return F.layer_norm(y, (y.shape[-1],))


@pytest.mark.parametrize(
    "form, kind",
    [("gram", "batch_matmul"), ("tokens", "batch_matmul"), ("norm", "layer_norm"), ("linear", "fully_connected")],
)
def test_an_operand_stored_channels_last_is_copied_to_pytorchs_order(tmp_path, form, kind):
    compiled, comparison = _compile_and_compare(tmp_path, f"ChannelsLastOperand({form!r})", (1, 4, 9), -0.5, 1.0)
    assert comparison.exact and kind in [op.kind for op in compiled.graph.ops]
    samples = np.random.default_rng(5).uniform(-0.5, 1.5, (4, 4, 9)).astype(np.float32)
    assert not verify.disagreeing_layers(verify.layer_agreement(compiled, verify.qdq_reference(compiled, samples)))


class BilinearByFactor(nn.Module):
    def forward(self, x):
        return F.interpolate(F.relu(x), scale_factor=(1.5, 1.5), mode="bilinear", align_corners=False)


def test_a_bilinear_resize_by_a_factor_steps_as_pytorch_does(tmp_path):
    """Fuzz seed 682 (v4): 5x4 x 1.5 -> 7x6; PyTorch steps the source by 1/1.5, edgec's TFLite
    tables by in/out = 5/7: 71 % of the values off, up to 34 steps (the fuzzer's computed bound
    for TFLite's 1/1024 positions is 1). The tables now take PyTorch's step."""
    compiled, comparison = _compile_and_compare(tmp_path, "BilinearByFactor()", (1, 2, 5, 4), -0.5, 1.0)
    assert comparison.exact and compiled.graph.ops[-1].kind == "resize"
    samples = np.random.default_rng(6).uniform(-0.5, 1.5, (4, 2, 5, 4)).astype(np.float32)
    row = next(
        row
        for row in verify.layer_agreement(compiled, verify.qdq_reference(compiled, samples))
        if row["op"] == "resize"
    )
    assert row["max_steps"] <= 1, row


class RollOfStridedSlice(nn.Module):
    """Fuzz seed 841 (v4): torch.roll of a strided slice of a convolution's (channels-last)
    output, x[:, ::2].roll(1, 1), was refused as "not a strided copy edgec can run": the copy's
    source - position offsets differ at every byte, so grouping by offset (a plain roll's parts)
    made too many parts. The output is now cut where the source steps change (the wrap) into boxes,
    each one strided copy."""

    MOVES = {
        "channels": lambda x: torch.roll(x[:, ::2], 1, 1),
        "spatial": lambda x: torch.roll(x[:, :, ::2, 1::2], (1, -2), (2, 3)),
        "both": lambda x: torch.roll(x[:, 1::3, :, ::3], (2, 1), (1, 3)),
    }

    def __init__(self, move: str):
        super().__init__()
        self.conv = nn.Conv2d(3, 9, 1)
        self.move = move

    def forward(self, x):
        return self.MOVES[self.move](F.relu(self.conv(x)))


@pytest.mark.parametrize("move", list(RollOfStridedSlice.MOVES))
def test_a_roll_of_a_strided_slice_is_strided_copies(tmp_path, move):
    from edgec.ir import to_stored, to_torch_order

    compiled, comparison = _compile_and_compare(tmp_path, f"RollOfStridedSlice({move!r})", (1, 3, 6, 7), -1.0, 1.0)
    assert comparison.exact
    op = next(op for op in compiled.graph.ops if op.kind == "copy")
    x_tensor, out = compiled.graph.tensors[op.inputs[0]], compiled.graph.tensors[op.outputs[0]]
    x = np.random.default_rng(4).integers(-128, 128, x_tensor.torch_shape).astype(np.int8)
    got = to_torch_order(out, unit_of(op).golden(op, compiled.graph, [to_stored(x_tensor, x).reshape(x_tensor.shape)]))
    np.testing.assert_array_equal(got, RollOfStridedSlice.MOVES[move](torch.from_numpy(x)).numpy())
    assert len(op.attrs["copies"]) > 1


class TinyVarianceLayerNorm(nn.Module):
    """Fuzz seed 343 (v4): a layer norm over 3 features of values ~-2.78 +- 0.03 quantized at
    s_x ~0.011 (the input range includes 0): rows of a few nearly equal steps, sum d_i^2 ~ 42,
    where eps * n^3 / s_x^2 = 0.21 was rounded to a whole unit (0) -- up to 2 steps off the program.
    eps_term now carries F fraction bits (docs/numerics.md, "Layer norm")."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(3, eps=1e-6)
        with torch.no_grad():
            self.norm.weight.copy_(torch.tensor([-0.72, 0.51, -1.36]))
            self.norm.bias.copy_(torch.tensor([-0.17, -0.79, -0.05]))

    def forward(self, x):
        return self.norm(x.flatten(2).transpose(1, 2))


def test_a_layer_norm_of_nearly_equal_values_follows_its_program(tmp_path):
    compiled, comparison = _compile_and_compare(tmp_path, "TinyVarianceLayerNorm()", (1, 3, 4, 4), -2.784, 0.0331)
    assert comparison.exact
    samples = (-2.784 + 0.0331 * np.abs(np.random.default_rng(5).standard_normal((6, 3, 4, 4)))).astype(np.float32)
    rows = verify.layer_agreement(compiled, verify.qdq_reference(compiled, samples))
    row = next(row for row in rows if row["op"] == "layer_norm")
    assert row["max_steps"] <= 1 and row["beyond_fraction"] == 0, row


class LinearReLU6(nn.Module):
    """Fuzz int16 mode, seeds 14, 18, 19: --int16-layers naming a layer and the activation module
    after it (fc, act) was refused as "no module named act in the model": the clamp is fused into
    the linear layer's output stage, so no node of its own matched. A fused clamp now counts as
    named when its producer is selected (it runs at that precision)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 6)
        self.act = nn.ReLU6()
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        return self.head(self.act(self.fc(x)))


def test_int16_layers_may_name_an_activation_fused_into_a_named_layer(tmp_path):
    rng = np.random.default_rng(6)
    samples = rng.standard_normal((12, 8)).astype(np.float32)
    compiled = compile_model(
        _factory_file(tmp_path, "LinearReLU6()", (1, 8)), calibration=samples[:8], int16_layers=["fc", "act"]
    )
    assert [unit_of(op).kind for op in compiled.graph.ops if op.kind.startswith("fully")] == [
        "fully_connected_s16",
        "fully_connected",
    ]
    emit(compiled, tmp_path / "out", "m")
    inputs = verify.quantized_inputs(compiled.graph, samples[8:])
    exe = verify.build_host(tmp_path / "out", "m", tmp_path / "build", sanitize=True)
    output = verify.run_host(exe, inputs, verify.output_bytes(compiled.graph))
    assert verify.compare(verify.golden_outputs(compiled.graph, inputs), output).exact


@pytest.mark.parametrize(
    "seed, mode, verdicts",
    [
        (419, "int8", ("ok", "inaccurate")),  # a depthwise layer whose output step is 77x finer than its accumulator's
        (15, "int16", ("ok", "inaccurate")),  # int16 conv and depthwise one step off on average (the Q15 multiplier)
        (13, "int16", ("ok", "inaccurate")),  # an int16 fully connected reading a value saturated at -32768
        (222, "int8", ("bounded",)),  # a GRU whose hidden step is ~40x finer than its gates: within its own bound
        (405, "int8", ("ok", "inaccurate")),  # one channel's values at a repeated tie, rounded twice by the kernel
    ],
)
def test_a_layer_follows_its_program_with_the_arithmetic_its_scheme_fixes(tmp_path, seed, mode, verdicts):
    """Fuzz seeds that departed from their programs with golden == C: verify's reference now carries
    what the quantization scheme fixes exactly for the layer
    (docs/numerics.md, "What verify checks"): a bias on the accumulator's grid, whose rounding a
    collapsed output scale magnifies to
    M / 2 steps (seeds 419, 464, 62 and multi 52 had their tolerance capped at 4 steps), and an
    int16 layer's multiplier rounded to 15 bits (seeds 15, 27, 79: one channel 0.75 step off), the
    program's int16 range [-32767, 32767] (seed 13: its kernels saturate at -32768, as TFLite's), an
    int8 layer's output stage rounding twice (seed 405: 12 of one channel's 16 values at a tie
    -x.5 after the first rounding, each rounded away from zero, read as a -0.75 step offset).
    A recurrent layer beyond what its int16 gates resolve fails verify, and the fuzzer counts it
    "bounded" only within its own computed bound (seed 222: 40 steps, bound 39 + 1)."""
    from tests.fuzz import generator, runner

    outcome = runner.check_spec(generator.generate(seed, mode), "host", tmp_path / "work")
    assert outcome.verdict in verdicts, f"{outcome.verdict}: {outcome.message}"
