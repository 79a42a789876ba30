"""Mutation testing of verify's layer check: lowering bugs planted into lowered programs.

Golden == C holds for any lowered program, right or wrong, since both run it; the layer check
(edgec.tools.verify.check_against_reference: every layer against the program's own Q/DQ graph, per
output channel, recurrent layers step by step against the float cell) is what must catch a
lowering that computes something else. Each mutation below edits one model's lowered graph the
way a lowering bug would (a channel's weights, bias, shift; a zero point; a layout; a gate order;
a broadcast) and must make the check fail. Each test prints its mutation score.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

from edgec.errors import EdgecError
from edgec.ops import unit_of
from edgec.pipeline import compile_for, emit, quantize_model
from edgec.tools import verify
from tests.data import mutation_models
from tests.device_support import needs_toolchain

SAMPLES = 20  # as many as verify takes by default
CHANNEL = 5
WEIGHT_CHANNEL_AXIS = {
    "conv2d": 0,
    "conv2d_s16": 0,
    "fully_connected": 0,
    "fully_connected_s16": 0,
    "depthwise_conv2d": 3,
    "depthwise_conv2d_s16": 3,
    "conv_transpose2d": 1,
}


def _samples(name: str, count: int, seed: int) -> list[np.ndarray]:
    _, example = getattr(mutation_models, name)()
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((count, *x.shape[1:])).astype(np.float32) for x in example]


def _quantized(name: str, activations: str = "int8"):
    calibration = _samples(name, 16, 0)
    return quantize_model(
        f"{mutation_models.__file__}:{name}",
        calibration=calibration[0] if len(calibration) == 1 else calibration,
        activations=activations,
    )


def _op(graph, kind: str, index: int = -1):
    return [op for op in graph.ops if unit_of(op).kind == kind][index]


# -- the mutations: each edits the lowered graph in place -------------------------------------------


def _parts(op) -> dict:
    """The arrays the golden kernel computes with: the op's attrs, or an int16 op's descriptor."""
    if unit_of(op).kind.endswith("_s16"):
        d = op.attrs["desc"]
        return {"weight": d["filter"], "bias": d["bias"], "multiplier": d["multiplier"], "shift": d["shift"]}
    return op.attrs


def _channel(op, c: int):
    return (slice(None),) * WEIGHT_CHANNEL_AXIS[unit_of(op).kind] + (c,)


def zero_channel(op, graph, c=CHANNEL):
    _parts(op)["weight"][_channel(op, c)] = 0
    _parts(op)["bias"][c] = 0


def negate_channel(op, graph, c=CHANNEL):
    _parts(op)["weight"][_channel(op, c)] *= -1
    _parts(op)["bias"][c] *= -1


def swap_channels(op, graph, c=CHANNEL):
    a = _parts(op)
    for key, axis in (("weight", WEIGHT_CHANNEL_AXIS[unit_of(op).kind]), ("bias", 0), ("multiplier", 0), ("shift", 0)):
        if np.shape(a[key])[axis] > 1:
            a[key][:] = np.swapaxes(
                np.swapaxes(a[key], 0, axis)[[*range(c), c + 1, c, *range(c + 2, np.shape(a[key])[axis])]], 0, axis
            )


def shift_off(op, graph, c=CHANNEL):
    shift = _parts(op)["shift"]
    shift[c if len(shift) > 1 else 0] += 1


def _step_in_accumulator(op, c):
    a = _parts(op)
    m = np.asarray(a["multiplier"], np.float64) * 2.0 ** (np.asarray(a["shift"], np.float64) - 31)
    return 1.0 / m[c if m.size > 1 else 0]


def bias_off(op, graph, c=CHANNEL):
    """One channel's bias one output step off (e.g. rounded at another channel's scale)."""
    _parts(op)["bias"][c] += int(round(_step_in_accumulator(op, c)))


def input_zero_point_off(op, graph, c=None):
    """The bias folded with the input zero point off by one: acc gains sum(w) per channel."""
    a = _parts(op)
    w = np.asarray(a["weight"], np.int64)
    axis = WEIGHT_CHANNEL_AXIS[op.kind]
    a["bias"][:] += np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1).sum(axis=1).astype(a["bias"].dtype)


def kernel_transposed(op, graph, c=None):
    """A filter stored KW x KH instead of KH x KW (OHWI read as OWHI)."""
    w = _parts(op)["weight"]
    w[:] = w.transpose(0, 2, 1, 3)


def output_offset_off(op, graph, c=None):
    op.attrs["desc"]["output_offset"] += 1


def desc_multiplier_halved(op, graph, c=None):
    op.attrs["desc"]["shift"] -= 1


def columns_unpermuted(op, graph, c=None):
    """A linear layer after a flatten of channels-last data reading its columns in NCHW order."""
    w = op.attrs["weight"]
    h = w.shape[1] // 4
    side = int(round(h**0.5))
    w[:] = w.reshape(w.shape[0], 4, side, side).transpose(0, 2, 3, 1).reshape(w.shape)


def _gate_rows(desc, gate):
    size = desc["hidden_size"]
    return slice(gate * size, (gate + 1) * size)


def gates_swapped(op, graph, c=None):
    """The first two gate blocks (LSTM i/f, GRU r/z) in each other's place."""
    d = op.attrs["desc"]
    first, second = _gate_rows(d, 0), _gate_rows(d, 1)
    for key in ("input_weights", "hidden_weights", "input_bias", "hidden_bias"):
        d[key][first], d[key][second] = d[key][second].copy(), d[key][first].copy()
    for key in ("input_multiplier", "input_shift", "hidden_multiplier", "hidden_shift"):
        d[key] = list(d[key])
        d[key][0], d[key][1] = d[key][1], d[key][0]


def gate_row_zeroed(op, graph, c=None):
    """One hidden unit's candidate gate (LSTM g, GRU n) row zeroed."""
    d = op.attrs["desc"]
    row = _gate_rows(d, 2).start + CHANNEL
    for key in ("input_weights", "hidden_weights", "input_bias", "hidden_bias"):
        d[key][row] = 0


def recurrent_weights_halved(op, graph, c=None):
    d = op.attrs["desc"]
    d["hidden_shift"] = [s - 1 for s in d["hidden_shift"]]


def broadcast_axes_swapped(op, graph, c=None):
    """The per-pixel operand of the add broadcast along the other axis (its strides over the
    collapsed [pixels, channels] dims swapped: read per channel)."""
    d = op.attrs["desc"]
    d["strides2"] = (d["strides2"][1], d["strides2"][0]) + tuple(d["strides2"][2:])


def channel_broadcast_rolled(op, graph, c=None):
    """The [1, C, 1, 1] constant's values one channel off."""
    const = op.attrs["constant"]
    const.values[:] = np.roll(const.values, 1, axis=-1)


def table_rolled(op, graph, c=None):
    """A lookup table one entry off (an index offset wrong by one)."""
    t = op.attrs["desc"]["table"]
    t[:] = np.roll(t, 1)


def norm_feature_negated(op, graph, c=CHANNEL):
    op.attrs["desc"]["scale"][c] *= -1


def softmax_beta_halved(op, graph, c=None):
    op.attrs["desc"]["input_left_shift"] -= 1


# model -> [(op kind, op index among that kind, mutation)]
CHANNEL_FAULTS = (zero_channel, negate_channel, swap_channels, shift_off, bias_off, input_zero_point_off)
MUTATIONS = {
    "conv": [("conv2d", i, m) for i in (0, 1) for m in CHANNEL_FAULTS] + [("conv2d", 1, kernel_transposed)],
    "conv1x1_128": [("conv2d", 0, lambda op, g: zero_channel(op, g, 77))]
    + [("conv2d", 0, m) for m in (negate_channel, swap_channels, shift_off, bias_off)],
    "depthwise": [("depthwise_conv2d", 0, m) for m in CHANNEL_FAULTS] + [("depthwise_conv2d", 0, kernel_transposed)],
    "fully_connected": [("fully_connected", i, m) for i in (0, 1) for m in CHANNEL_FAULTS],
    "transposed_conv": [("conv_transpose2d", 0, m) for m in CHANNEL_FAULTS],
    "conv_flatten_linear": [("fully_connected", 0, columns_unpermuted)],
    "binary_broadcast": [
        ("binary", 1, broadcast_axes_swapped),
        ("binary", 0, channel_broadcast_rolled),
        ("binary", 0, output_offset_off),
        ("binary", 1, output_offset_off),
        ("reduce", 0, output_offset_off),
    ],
    "lstm": [("recurrent", 0, m) for m in (gates_swapped, gate_row_zeroed, recurrent_weights_halved)],
    "gru": [("recurrent", 0, m) for m in (gates_swapped, gate_row_zeroed, recurrent_weights_halved)],
    "layer_norm": [("layer_norm", 0, m) for m in (norm_feature_negated, output_offset_off)],
    "matmul": [("batch_matmul", i, m) for i in (0, 1) for m in (output_offset_off, desc_multiplier_halved)]
    + [("softmax", 0, softmax_beta_halved)],
    "tables": [("lut", i, table_rolled) for i in (0, 2)],
}
INT16_MUTATIONS = {
    "conv": [("conv2d_s16", i, m) for i in (0, 1) for m in CHANNEL_FAULTS],
    "fully_connected": [("fully_connected_s16", i, m) for i in (0, 1) for m in CHANNEL_FAULTS],
}


def _survivors(compiled, floats, mutations) -> list[str]:
    sound = verify.check_against_reference(compiled, floats)  # the sound program passes, every layer checked
    assert all(row["op"] in verify.DATA_MOVEMENT for row in sound.skipped), sound
    survivors = []
    for kind, index, mutate in mutations:
        mutant = dataclasses.replace(compiled, graph=copy.deepcopy(compiled.graph))
        mutate(_op(mutant.graph, kind, index), mutant.graph)
        try:
            verify.check_against_reference(mutant, floats)
        except EdgecError:
            continue
        survivors.append(f"{kind}[{index}] {getattr(mutate, '__name__', 'mutation')}")
    return survivors


def _score(name: str, mutations, survivors) -> str:
    return f"mutation score {name}: {len(mutations) - len(survivors)}/{len(mutations)} caught"


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_every_planted_lowering_bug_fails_the_layer_check(name):
    floats = _samples(name, SAMPLES, 1)
    survivors = _survivors(compile_for(_quantized(name), "host"), floats, MUTATIONS[name])
    print(_score(name, MUTATIONS[name], survivors))
    assert not survivors, survivors


@pytest.mark.parametrize("name", sorted(INT16_MUTATIONS))
def test_every_planted_bug_in_an_int16_layer_fails_the_layer_check(name):
    floats = _samples(name, SAMPLES, 1)
    survivors = _survivors(compile_for(_quantized(name, "int16"), "host"), floats, INT16_MUTATIONS[name])
    print(_score(f"{name} (int16)", INT16_MUTATIONS[name], survivors))
    assert not survivors, survivors


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize(
    "name, mutation",
    [("conv1x1_128", ("conv2d", 0, lambda op, g: zero_channel(op, g, 77))), ("lstm", ("recurrent", 0, gates_swapped))],
)
def test_a_planted_bug_runs_identically_on_cortex_m4_and_fails_the_layer_check(name, mutation, tmp_path):
    """On the device the mutated program's C equals its golden byte for byte (both run the same
    wrong program); only the layer check tells."""
    compiled = compile_for(_quantized(name), "cortex-m4")
    kind, index, mutate = mutation
    mutate(_op(compiled.graph, kind, index), compiled.graph)
    floats = _samples(name, 4, 1)
    emit(compiled, tmp_path / name, name)
    inputs = verify.quantized_inputs(compiled.graph, floats)
    outputs = verify.run_on(compiled, tmp_path / name, name, inputs, tmp_path / "build")
    assert verify.compare(verify.golden_outputs(compiled.graph, inputs), outputs).exact
    with pytest.raises(EdgecError, match="departs from its quantized program"):
        verify.check_against_reference(compiled, floats)


def test_a_computing_layer_without_a_float_counterpart_fails_unless_allowed():
    compiled = compile_for(_quantized("fully_connected"), "host")
    first = _op(compiled.graph, "fully_connected", 0)
    compiled.graph.tensors[first.outputs[0]].source = ""  # as if the lowering lost track of it
    floats = _samples("fully_connected", 4, 1)
    with pytest.raises(
        EdgecError,
        match=r"could not check 2 computing layer.*fully_connected_0.*no float counterpart"
        r".*its input is fully_connected_0's result",
    ):
        verify.check_against_reference(compiled, floats)
    result = verify.check_against_reference(compiled, floats, allow_unchecked=True)
    assert (result.checked, result.total) == (0, len(compiled.graph.ops)), result
    assert "fully_connected_0 (fully_connected): no float counterpart of its output; " in str(result), result
    assert str(result).startswith(f"checked 0 of {len(compiled.graph.ops)} layers (skipped "), result


def test_the_rule_per_channel():
    """judge: one channel of 128 off by 3 steps fails although it is < 1 % of the values; rounding
    noise passes; a shifted channel fails on its mean; a tolerance above the cap fails."""
    rng = np.random.default_rng(0)
    noise = rng.choice([-1, 0, 0, 0, 0, 0, 0, 0, 1], size=(20, 4, 4, 128))
    one = np.ones(noise.shape, np.int64)
    assert verify.judge(noise, one) is None
    far = noise.copy()
    far[0, 0, 0, 77] = 3
    assert "channel 77" in verify.judge(far, one)
    shifted = noise.copy()
    shifted[..., 9] = rng.choice([0, 1, 1, 1, 1], size=shifted[..., 9].shape)
    assert "channel 9" in verify.judge(shifted, one) and "average" in verify.judge(shifted, one)
    # A near-constant channel (fewer than MEAN_MIN_DISTINCT reference values) has no mean rule: one
    # rounding repeated over every sample is not a shifted offset.
    constant = noise.copy()
    constant[..., 9] = -1
    expected = rng.integers(-100, 100, size=noise.shape)
    assert "channel 9" in verify.judge(constant, one, expected=expected)
    expected[..., 9] = 42
    assert verify.judge(constant, one, expected=expected) is None
    # A wider tolerance (a collapsed output scale) is capped: a sound layer passes, a fault fails named.
    wide = one * (verify.LAYER_MAX_TOLERANCE_STEPS + 20)
    assert verify.judge(noise, wide) is None
    beyond_cap = noise.copy()
    beyond_cap[0, 0, 0, 5] = verify.LAYER_MAX_TOLERANCE_STEPS + 2
    assert "channel 5" in verify.judge(beyond_cap, wide) and "collapsed output scale" in verify.judge(beyond_cap, wide)


def test_a_tensor_whose_zero_point_moved_fails_the_layer_check():
    """A zero point the lowering changed moves the golden and the reference's quantization alike;
    the tensor's qparams against the program's quantize nodes tell."""
    compiled = compile_for(_quantized("conv"), "host")
    first = _op(compiled.graph, "conv2d", 0)
    compiled.graph.tensors[first.outputs[0]].zero_point += 1
    with pytest.raises(EdgecError, match=r"conv2d_0 .*zero point -?\d+; the program quantizes .* zero point"):
        verify.check_against_reference(compiled, _samples("conv", 4, 1))


def test_a_recurrent_layer_over_several_steps_is_checked(tmp_path):
    """An LSTM-only model over 4 time steps: its one layer is checked (every step's hidden state)."""
    path = tmp_path / "rnn.py"
    path.write_text(
        "import torch\nfrom torch import nn\n\n"
        "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.rnn = nn.LSTM(6, 20, batch_first=True)\n\n"
        "    def forward(self, x):\n        return self.rnn(x)[0]\n\n"
        "def lstm():\n    torch.manual_seed(0)\n    return M().eval(), (torch.randn(1, 4, 6),)\n"
    )
    unit = np.random.default_rng(0).standard_normal((16, 4, 6)).astype(np.float32)
    lstm = compile_for(quantize_model(f"{path}:lstm", calibration=unit), "host")
    result = verify.check_against_reference(lstm, unit[:8])
    assert (result.checked, result.total) == (1, 1), result
