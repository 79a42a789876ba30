"""The 16x8 LSTM in models (issue #27: int16 activations accepted): `--activations int16` and
`--int16-layers` compile an LSTM to edgec_lstm_s16 -- whole sequence, several layers,
bidirectional, the caller-held state (h0/c0 inputs, h_n/c_n outputs) and --stream --; golden ==
host C (sanitizers) == QEMU Cortex-M4 / M55 byte for byte, each layer within its tolerance of the
quantized program. A GRU stays int8: refused in one line. The Silero-style VAD with int16
activations (its STFT magnitude on edgec_mul_s16 and edgec_sqrt_s16): bit exact everywhere, each
layer within its tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import edgec
from edgec.errors import EdgecError
from edgec.pipeline import emit
from edgec.targets.cores import get_target
from edgec.tools import verify
from edgec.zoo import seq
from tests.device_support import compile_and_run, needs_toolchain
from tests.test_recurrent_state import _case


def _lstm_ops(compiled):
    return [op for op in compiled.graph.ops if op.kind == "recurrent"]


def _sanitized_exact(compiled, floats, tmp_path) -> None:
    emit(compiled, tmp_path / "out", "m")
    inputs = verify.quantized_inputs(compiled.graph, floats)
    exe = verify.build_host(tmp_path / "out", "m", tmp_path / "build", sanitize=True)
    golden = verify.golden_outputs(compiled.graph, inputs)
    assert verify.compare(golden, verify.run_host(exe, inputs, verify.output_bytes(compiled.graph))).exact


@pytest.mark.parametrize("name", ["lstm", "lstm_cell", "c_n"])
def test_held_state_int16_lstm_is_bit_exact_and_within_tolerance(name, tmp_path):
    model, example, samples = _case(name)
    compiled = edgec.compile(model, example, calibration=samples, target="host", activations="int16")
    assert "golden simulator == host C, 0 LSB" in str(compiled.verify([s[:4] for s in samples]))
    _sanitized_exact(compiled.compiled, [s[:4] for s in samples], tmp_path)
    graph = compiled.graph
    (op,) = _lstm_ops(compiled)
    assert op.kernel.function == "edgec_lstm_s16"
    out = graph.tensors[op.outputs[0]]
    assert (out.dtype, out.zero_point) == ("int16", 0)
    if op.attrs["h0"] is not None:  # the caller feeds h_n back as h0: one int16 qparams
        h0 = graph.tensors[op.inputs[op.attrs["h0"]]]
        assert (h0.scale, h0.zero_point, h0.dtype) == (out.scale, 0, "int16")
    for key, names in (("c0", op.inputs), ("c_n", op.outputs)):
        if op.attrs[key] is not None:
            cell = graph.tensors[names[op.attrs[key]]]
            assert (cell.dtype, cell.zero_point, cell.scale) == ("int16", 0, 2.0 ** op.attrs["state_cell_power"])


class _Stacked(nn.Module):
    def __init__(self, layers: int, bidirectional: bool):
        super().__init__()
        self.rnn = nn.LSTM(8, 6, num_layers=layers, batch_first=True, bidirectional=bidirectional)
        self.head = nn.Linear(12 if bidirectional else 6, 3)

    def forward(self, x):
        return self.head(self.rnn(x)[0])


@pytest.mark.parametrize(("layers", "bidirectional"), [(2, False), (1, True)])
def test_stacked_and_bidirectional_int16_lstm(layers, bidirectional, tmp_path):
    torch.manual_seed(0)
    samples = np.random.default_rng(0).standard_normal((20, 1, 5, 8)).astype(np.float32)
    model = _Stacked(layers, bidirectional).eval()
    compiled = edgec.compile(
        model, (torch.from_numpy(samples[0]),), calibration=samples[:16], target="host", activations="int16"
    )
    assert "golden simulator == host C, 0 LSB" in str(compiled.verify(samples[16:]))
    ops = _lstm_ops(compiled)
    assert len(ops) == 2 and all(op.kernel.function == "edgec_lstm_s16" for op in ops)
    assert all(compiled.graph.tensors[op.outputs[0]].dtype == "int16" for op in ops)
    _sanitized_exact(compiled.compiled, samples[16:], tmp_path)


def test_int16_gru_is_refused_in_one_line():
    model, example, samples = _case("gru")
    with pytest.raises(EdgecError) as error:
        edgec.compile(model, example, calibration=samples, target="host", activations="int16")
    lines = [line for line in str(error.value).splitlines() if "GRU" in line]
    assert len(lines) == 1 and "keep the GRU int8" in lines[0], str(error.value)


def test_int16_stream_keeps_a_held_state_and_equals_the_model_fed_back_its_state(tmp_path):
    model, example, samples = _case("lstm_cell")
    compiled = edgec.compile(model, example, calibration=samples, target="host", activations="int16", stream=True)
    streaming = compiled.streaming.graph
    assert len(streaming.inputs) == 1 and len(streaming.outputs) == 1
    (op,) = [op for op in streaming.ops if op.kind == "recurrent"]
    assert op.kernel.function == "edgec_lstm_s16" and op.attrs["stream"]
    floats = [s[:6] for s in samples]
    whole = compiled.compiled
    result = verify.compare_stream(whole, floats, verify.quantized_inputs(whole.graph, floats), "cell", tmp_path)
    assert result.steps == 6 and result.mismatched_bytes == 0 and result.equals_whole_sequence, result


def test_int16_stream_from_zero_equals_the_whole_sequence():
    """The LSTM keyword spotter, one frame per invoke from a zero state (verify's stream check)."""
    model, example = seq.lstm_kws()
    calibration = seq.calibration_data("lstm_kws", 8)
    compiled = edgec.compile(model, example, calibration=calibration, target="host", activations="int16", stream=True)
    result = compiled.verify(seq.calibration_data("lstm_kws", 2, seed=1))
    assert "golden simulator == host C, 0 LSB" in str(result) and result.stream_steps > 0, result


def _device_case(name: str, target: str, tmp_path):
    model, example, samples = _case(name)
    compiled = edgec.compile(model, example, calibration=samples, target="host", activations="int16")
    _, _, result = compile_and_run(compiled.compiled, get_target(target), [s[:2] for s in samples], tmp_path, name)
    assert result.exact, f"{name} on {target}: {result.mismatched_bytes} bytes differ"


@needs_toolchain
def test_int16_held_lstm_cell_is_bit_exact_on_cortex_m4(tmp_path):
    _device_case("lstm_cell", "cortex-m4", tmp_path)


@needs_toolchain
def test_int16_held_lstm_sequence_is_bit_exact_on_cortex_m55(tmp_path):
    _device_case("lstm", "cortex-m55", tmp_path)


@pytest.fixture(scope="module")
def vad():
    model, example = seq.silero_vad()
    return model, example, seq.vad_samples(model, 12, seed=1), seq.vad_samples(model, 4, seed=2)


def test_vad_with_int16_activations_is_bit_exact_on_host_and_passes_the_layer_check(vad, tmp_path):
    model, example, calibration, samples = vad
    compiled = edgec.compile(model, example, calibration=calibration, target="host", activations="int16")
    assert {op.kernel.function for op in _lstm_ops(compiled)} == {"edgec_lstm_s16"}
    _sanitized_exact(compiled.compiled, samples, tmp_path)
    result = compiled.verify(samples)
    assert "golden simulator == host C, 0 LSB" in str(result) and "each within its tolerance" in str(result)
    assert result.outputs[0]["sqnr_db"] > 50  # the probability: 52.8 dB on these 4 samples (59.5 on 20)


@needs_toolchain
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
def test_vad_with_int16_activations_is_bit_exact_on_cortex_m(vad, target, tmp_path):
    model, example, calibration, samples = vad
    compiled = edgec.compile(model, example, calibration=calibration, target="host", activations="int16")
    _, _, result = compile_and_run(compiled.compiled, get_target(target), [s[:2] for s in samples], tmp_path, "vad")
    assert result.exact, f"vad on {target}: {result.mismatched_bytes} bytes differ"


def test_vad_with_an_int16_lstm_passes_the_layer_check(vad):
    model, example, calibration, samples = vad
    compiled = edgec.compile(
        model, example, calibration=calibration, target="host", int16_layers=["encoder", "rnn", "decoder"]
    )
    result = compiled.verify(samples)
    assert "golden simulator == host C, 0 LSB" in str(result) and "each within its tolerance" in str(result)
