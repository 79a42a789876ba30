"""Recurrent state the caller holds (issue #27 point 2): h0/c0 as model inputs and h_n/c_n as
model outputs, for nn.LSTM / nn.GRU (any number of layers, bidirectional or not, [L*D, B, H]
states) and nn.LSTMCell / nn.GRUCell. The hidden state in and out share one int8 qparams (a GRU's
at 1/128) across every layer and direction; the LSTM cell state in and out is int16 at one
power-of-two scale (the largest run's). Golden == host C == QEMU Cortex-M4 / M55 byte for byte, each layer
within its tolerance of the quantized program (verify's step check starts from the given state);
--stream keeps the state in <name>_state and equals the model fed back its own state.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

import edgec
from edgec.errors import EdgecError
from edgec.targets.cores import get_target
from edgec.tools import verify
from edgec.zoo import seq
from tests.device_support import compile_and_run, needs_toolchain


class LstmSequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 6, batch_first=True)

    def forward(self, x, h, c):
        return self.rnn(x, (h, c))


class GruSequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(8, 6, batch_first=True)

    def forward(self, x, h):
        return self.rnn(x, h)


class LstmCell(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(8, 6)
        self.head = nn.Linear(6, 3)

    def forward(self, x, h, c):
        h, c = self.cell(x, (h, c))
        return self.head(h), h, c


class GruCell(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(8, 6)

    def forward(self, x, h):
        return self.cell(x, h)


class Stacked(nn.Module):
    """nn.LSTM / nn.GRU of `layers` layers, bidirectional or not, h0 (and c0) given, y and h_n
    (and c_n) returned, as such a model is written."""

    def __init__(self, cell: str, layers: int, bidirectional: bool, batch_first: bool):
        super().__init__()
        make = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = make(8, 6, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first)

    def forward(self, x, h, c=None):
        if isinstance(self.rnn, nn.LSTM):
            y, (h, c) = self.rnn(x, (h, c))
            return y, h, c
        return self.rnn(x, h)


# name: (cell, layers, bidirectional, batch_first)
STACKS = {
    "lstm_2_layers": ("lstm", 2, False, True),
    "gru_3_layers_time_major": ("gru", 3, False, False),
    "lstm_bidirectional": ("lstm", 1, True, True),
    "gru_2_layers_bidirectional": ("gru", 2, True, True),
    "lstm_2_layers_bidirectional_time_major": ("lstm", 2, True, False),
}


class CellStateOnly(nn.Module):
    """c_n read from a layer that starts from zero."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 6, batch_first=True)

    def forward(self, x):
        y, (_, c) = self.rnn(x)
        return y, c


def _states(shape, n=1, seed=0):
    rng = np.random.default_rng(seed)
    return (0.3 * rng.standard_normal((n, *shape))).astype(np.float32)


def _case(name: str):
    rng = np.random.default_rng(0)
    x_seq, x_cell = rng.standard_normal((16, 1, 5, 8)), rng.standard_normal((16, 2, 8))
    cases = {
        "lstm": (LstmSequence, [x_seq, _states((1, 1, 6), 16), _states((1, 1, 6), 16, 1)]),
        "gru": (GruSequence, [x_seq, _states((1, 1, 6), 16)]),
        "lstm_cell": (LstmCell, [x_cell, _states((2, 6), 16), _states((2, 6), 16, 1)]),
        "gru_cell": (GruCell, [x_cell, _states((2, 6), 16)]),
        "c_n": (CellStateOnly, [x_seq]),
    }
    for stack, (cell, layers, bidirectional, batch_first) in STACKS.items():
        rows = (layers * (2 if bidirectional else 1), 1, 6)
        x = x_seq if batch_first else x_seq.transpose(0, 2, 1, 3)
        states = [_states(rows, 16)] + ([_states(rows, 16, 1)] if cell == "lstm" else [])
        cases[stack] = (lambda spec=STACKS[stack]: Stacked(*spec), [x, *states])
    make, samples = cases[name]
    torch.manual_seed(0)
    samples = [np.asarray(s, np.float32) for s in samples]
    model = make().eval()
    example = tuple(torch.from_numpy(s[0]) for s in samples)
    return model, example, samples


def _compile(name: str, **options):
    model, example, samples = _case(name)
    return edgec.compile(model, example, calibration=samples, target="host", **options), samples


@pytest.mark.parametrize("name", ["lstm", "gru", "lstm_cell", "gru_cell", "c_n", *STACKS])
def test_held_state_is_bit_exact_and_within_tolerance_on_host(name):
    compiled, samples = _compile(name)
    result = compiled.verify([s[:4] for s in samples])
    assert "golden simulator == host C, 0 LSB" in str(result)
    graph = compiled.graph
    ops = [op for op in graph.ops if op.kind == "recurrent"]
    runs = STACKS[name][1] * (2 if STACKS[name][2] else 1) if name in STACKS else 1
    assert len(ops) == runs
    assert [op.attrs["state_slot"] for op in ops] == list(range(runs))
    for op in ops:
        out = graph.tensors[op.outputs[0]]
        if op.attrs["h0"] is not None:  # the caller feeds h_n back as h0: one qparams for all runs
            h0 = graph.tensors[op.inputs[op.attrs["h0"]]]
            assert (h0.scale, h0.zero_point, h0.dtype) == (out.scale, out.zero_point, "int8")
            assert runs == 1 or h0.shape[0] == runs  # [layers * directions, B, H]
            if op.attrs["cell"] == "gru":
                assert (h0.scale, h0.zero_point) == (1 / 128, 0)
        for key, names in (("c0", op.inputs), ("c_n", op.outputs), ("c_part", op.outputs)):
            if op.attrs[key] is not None:
                cell = graph.tensors[names[op.attrs[key]]]
                assert cell.dtype == "int16" and cell.zero_point == 0
                assert cell.scale == 2.0 ** op.attrs["state_cell_power"] and math.log2(cell.scale).is_integer()
                assert (cell.name in graph.inputs + graph.outputs) == (key != "c_part")


@pytest.mark.parametrize("name", ["lstm_cell", "lstm_2_layers_bidirectional_time_major"])
def test_c_n_equals_the_float_cell_state_within_its_steps(name):
    """The int16 c_n output against PyTorch's c_n: a few cell steps (each step's rounding); a
    stacked layer's every row (a layer's direction) in PyTorch's order."""
    model, _, _ = _case(name)
    compiled, samples = _compile(name)
    graph = compiled.graph
    x, h, c = (s[:4] for s in samples)
    c_int = compiled.run(x, h, c)[2]
    c_float = np.stack([model(*(torch.from_numpy(a[i]) for a in (x, h, c)))[2].detach().numpy() for i in range(4)])
    last = [op for op in graph.ops if op.kind == "recurrent"][-1]
    step = graph.tensors[last.outputs[last.attrs["c_n"]]].scale
    assert np.asarray(c_int).shape == c_float.shape
    # measured 0.006 (the cell), 0.011 (2 layers x 2 directions: the upper layer reads the lower's rounding)
    assert np.abs(np.asarray(c_int) - c_float).max() <= 0.02 + 8 * step


def _device_case(name: str, target: str, tmp_path):
    compiled, samples = _compile(name)
    floats = [s[:2] for s in samples]
    _, _, result = compile_and_run(compiled.compiled, get_target(target), floats, tmp_path, name)
    assert result.exact, f"{name} on {target}: {result.mismatched_bytes} bytes differ"


@needs_toolchain
def test_held_lstm_cell_state_is_bit_exact_on_cortex_m4(tmp_path):
    _device_case("lstm_cell", "cortex-m4", tmp_path)


@needs_toolchain
def test_held_lstm_sequence_state_is_bit_exact_on_cortex_m55(tmp_path):
    _device_case("lstm", "cortex-m55", tmp_path)


@needs_toolchain
@pytest.mark.parametrize("name", ["lstm_2_layers_bidirectional_time_major", "gru_2_layers_bidirectional"])
def test_held_stacked_state_is_bit_exact_on_cortex_m4(name, tmp_path):
    _device_case(name, "cortex-m4", tmp_path)


@needs_toolchain
def test_held_stacked_state_is_bit_exact_on_cortex_m55(tmp_path):
    _device_case("lstm_2_layers", "cortex-m55", tmp_path)


def test_stream_keeps_a_held_state_and_equals_the_model_fed_back_its_state(tmp_path):
    compiled, samples = _compile("lstm_cell", stream=True)
    streaming = compiled.streaming.graph
    assert len(streaming.inputs) == 1 and len(streaming.outputs) == 1  # h, c live in <name>_state
    floats = [s[:6] for s in samples]
    whole = compiled.compiled
    result = verify.compare_stream(whole, floats, verify.quantized_inputs(whole.graph, floats), "cell", tmp_path)
    assert result.steps == 6 and result.mismatched_bytes == 0 and result.equals_whole_sequence, result


@pytest.mark.parametrize("name", ["lstm_2_layers_bidirectional_time_major", "gru_3_layers_time_major"])
def test_stream_keeps_a_stacked_held_state(name, tmp_path):
    """Every run's state in <name>_state; each invoke runs the whole input chunk (the reverse
    direction over it too), as the model fed back its own h_n / c_n."""
    compiled, samples = _compile(name, stream=True)
    streaming = compiled.streaming.graph
    assert streaming.inputs == ["x"] and len(streaming.outputs) == 1  # y; h, c live in <name>_state
    floats = [s[:5] for s in samples]
    whole = compiled.compiled
    result = verify.compare_stream(whole, floats, verify.quantized_inputs(whole.graph, floats), "stack", tmp_path)
    assert result.steps == 5 and result.mismatched_bytes == 0 and result.equals_whole_sequence, result


def test_stream_refuses_c_n_of_a_layer_starting_from_zero():
    with pytest.raises(EdgecError, match="c_n returned by a layer that starts from zero"):
        _compile("c_n", stream=True)


@pytest.mark.parametrize(
    ("module", "example", "message"),
    [
        (lambda: _CellRead(), (torch.randn(1, 5, 8),), "c_n read inside the model"),
        (lambda: _CellComputed(), (torch.randn(1, 5, 8), torch.randn(1, 1, 6)), "c0 the model computes"),
    ],
)
def test_what_stays_unsupported_is_refused_in_one_line(module, example, message):
    with pytest.raises(EdgecError) as error:
        edgec.compile(module().eval(), example, target="host")
    lines = [line for line in str(error.value).splitlines() if message in line]
    assert len(lines) == 1, str(error.value)


class _CellRead(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 6, batch_first=True)

    def forward(self, x):
        _, (h, c) = self.rnn(x)
        return h + c


class _CellComputed(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 6, batch_first=True)

    def forward(self, x, c):
        return self.rnn(x, (torch.zeros_like(c), c * 2))[0]


def test_silero_style_vad_is_bit_exact_on_host():
    model, example = seq.silero_vad()
    compiled = edgec.compile(model, example, calibration=seq.vad_samples(model, 12, seed=1), target="host")
    result = compiled.verify(seq.vad_samples(model, 4, seed=2))
    assert "golden simulator == host C, 0 LSB" in str(result)


def test_header_says_which_output_feeds_which_state_input(tmp_path):
    from edgec.pipeline import emit

    compiled, _ = _compile("lstm_cell")
    emit(compiled.compiled, tmp_path / "cell", "cell")
    header = (tmp_path / "cell" / "cell.h").read_text()
    h0 = compiled.graph.tensors["h"]
    hidden = f"the hidden state (int8, scale {h0.scale:.9g}, zero point {h0.zero_point})"
    assert f" * {hidden} after this invoke: give it back as input 1 */" in header
    assert " * the LSTM cell state (int16, scale 2^-15) the caller holds: the previous invoke's output 2 */" in header


def test_header_says_which_row_is_which_layer_and_direction(tmp_path):
    from edgec.pipeline import emit

    compiled, _ = _compile("lstm_2_layers_bidirectional_time_major")
    emit(compiled.compiled, tmp_path / "stack", "stack")
    header = (tmp_path / "stack" / "stack.h").read_text()
    rows = "; row 2 * layer + direction (of 2 layers, 2 directions) */"
    assert f" the caller holds: the previous invoke's output 1{rows}" in header  # h0, and h_n below
    assert f" after this invoke: give it back as input 1{rows}" in header
    power = round(math.log2(compiled.graph.tensors["c"].scale))
    assert (
        f" * the LSTM cell state (int16, scale 2^{power}) the caller holds: the previous invoke's output 2{rows}"
        in header
    )


def test_stacked_small_lstm_runs_linear_at_one_cell_scale():
    """A held 2-layer LSTM whose gates and cells stay where tanh(x) = x: both runs take the linear
    form together, at one cell scale (the coarser of theirs), which c0 and c_n carry."""
    torch.manual_seed(0)
    model = Stacked("lstm", 2, False, True).eval()
    with torch.no_grad():
        for weight in model.parameters():
            weight.mul_(0.005)
    rng = np.random.default_rng(0)
    samples = [
        (0.005 * rng.standard_normal((16, 1, 5, 8))).astype(np.float32),
        *(0.001 * rng.standard_normal((2, 16, 2, 1, 6))).astype(np.float32),
    ]
    example = tuple(torch.from_numpy(s[0]) for s in samples)
    compiled = edgec.compile(model, example, calibration=samples, target="host", progress=False)
    assert "golden simulator == host C, 0 LSB" in str(compiled.verify([s[:4] for s in samples]))
    graph = compiled.graph
    ops = [op for op in graph.ops if op.kind == "recurrent"]
    assert all(op.attrs["desc"]["tanh_linear"] for op in ops)
    (power,) = {op.attrs["state_cell_power"] for op in ops}
    assert power < -15 and graph.tensors["c"].scale == graph.tensors[graph.outputs[2]].scale == 2.0**power
