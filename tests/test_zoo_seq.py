"""The sequence zoo (edgec.zoo.seq: LSTM / GRU keyword spotters) through the whole compiler, and
the streaming build: golden == host C (sanitizers, arena writes checked) == Cortex-M4 and
Cortex-M55 under QEMU, byte for byte.

Streaming (compile_for(..., stream=True)): one MFCC frame per invoke, the recurrent state kept
between invokes outside the arena. Its output after step t must equal the whole-sequence model's
on the first t + 1 frames (the same quantized program compiled for t + 1 steps), the golden's,
and after <name>_reset_state() the first output again.
"""

from __future__ import annotations

import ctypes as C
import subprocess

import numpy as np
import pytest
import torch

from edgec import sim
from edgec.backend import codegen
from edgec.errors import EdgecError
from edgec.ops import unit_of
from edgec.ops.recurrent import reset_state, with_time_steps
from edgec.pipeline import compile_for, emit, quantize_model
from edgec.targets.cores import get_target
from edgec.tools import verify
from edgec.zoo import seq
from tests.device_support import compile_and_run, needs_toolchain

# Measured output SQNR less a margin (random-weight models; the floors guard regressions).
MIN_SQNR_DB = {"lstm_kws": 32, "gru_kws": 25, "conv_gru_kws": 33}
SAMPLES = {"host": 4, "cortex-m4": 2, "cortex-m55": 2}
STREAM_STEPS = 12  # frames streamed in the step-by-step test (a prefix of the 49)


@pytest.fixture(scope="module", params=sorted(seq.ZOO_SEQ))
def quantized(request):
    name = request.param
    return name, quantize_model(f"{seq.__file__}:{name}", calibration=seq.calibration_data(name, 16, seed=0))


def _run(quantized, target_name, tmp_path):
    name, q = quantized
    floats = seq.calibration_data(name, SAMPLES[target_name], seed=1)
    compiled, outputs, result = compile_and_run(q, get_target(target_name), floats, tmp_path, name)
    return compiled, floats, outputs, result


def test_zoo_seq_has_the_recurrent_operators():
    for name, ops in seq.DISTINCTIVE_OPS.items():
        model, example = seq.ZOO_SEQ[name]()
        targets = {n.target for n in torch.export.export(model, example).graph.nodes if n.op == "call_function"}
        assert ops <= targets, (name, ops - targets)


def test_zoo_seq_model_is_bit_exact_on_host(quantized, tmp_path):
    name, _ = quantized
    compiled, floats, outputs, result = _run(quantized, "host", tmp_path)
    assert result.exact, f"{name}: {result.mismatched_bytes} bytes differ"
    summary = verify.accuracy_summary(compiled, verify.float_reference(compiled, floats), outputs)
    assert summary["output_sqnr_db"] >= MIN_SQNR_DB[name], summary
    checked = verify.check_against_reference(compiled, floats)  # the recurrent layers step by step vs the float cell
    assert not any(row["op"] == "recurrent" for row in checked.skipped), checked
    last_layer = [op for op in compiled.graph.ops if op.kind == "recurrent"][-1]
    assert last_layer.attrs["last_step_only"]  # read at its last step only: only that step is in the arena
    assert compiled.graph.tensors[last_layer.outputs[0]].elements == 64
    assert codegen.state_layout(compiled.graph)[1] == 0  # no persistent state outside streaming


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
def test_zoo_seq_model_is_bit_exact_on_cortex_m(quantized, target, tmp_path):
    name, _ = quantized
    *_, result = _run(quantized, target, tmp_path)
    assert result.exact, f"{name} on {target}: {result.mismatched_bytes} bytes differ"


# -- streaming --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def streaming():
    name = sorted(seq.STREAMING)[0]
    q = quantize_model(f"{seq.__file__}:{name}", calibration=seq.calibration_data(name, 16, seed=0))
    frames = seq.calibration_data(name, 1, seed=1)[0]  # [49, 10]
    return name, q, frames


def _prefix_golden(q, frames: np.ndarray, steps: int) -> np.ndarray:
    """The whole-sequence model's golden output on the first `steps` frames."""
    compiled = compile_for(q, "host")
    with_time_steps(compiled.graph, steps)
    for op in compiled.graph.ops:  # finalize again: descriptors hold the step count, copies the shapes
        unit_of(op).finalize(op, compiled.graph)
    x = sim.quantize_input(compiled.graph, frames[None, :steps])
    return sim.invoke(compiled.graph, [x])[0].ravel()


def _stream_inputs(compiled, frames):
    return verify.quantized_inputs(compiled.graph, frames)


def test_stream_report_keeps_state_out_of_the_arena(streaming, tmp_path):
    name, q, _ = streaming
    whole, stream = compile_for(q, "host"), compile_for(q, "host", stream=True)
    report = emit(stream, tmp_path / name, name)
    assert report["state_bytes"] == 64 * (1 + 2)  # int8 hidden + int16 cell, hidden 64
    assert report["ram_bytes"] == report["arena_bytes"] + report["state_bytes"]
    assert report["arena_bytes"] < whole.plan.arena_bytes  # one frame in the arena, not 49
    header = (tmp_path / name / f"{name}.h").read_text()
    assert f"void {name}_reset_state(void);" in header and f"{name.upper()}_STATE_BYTES 192" in header


def test_stream_equals_whole_sequence_step_by_step_and_resets(streaming, tmp_path):
    """Host C through ctypes: each step's output == the whole-sequence golden on that prefix ==
    the streaming golden; after reset_state the first output comes back."""
    name, q, frames = streaming
    compiled = compile_for(q, "host", stream=True)
    emit(compiled, tmp_path / name, name)
    out_dir = tmp_path / name
    sources = [
        out_dir / f"{name}.c",
        out_dir / f"{name}_weights.c",
        *sorted((out_dir / "runtime" / "src").rglob("*.c")),
    ]
    lib_path = tmp_path / "model.so"
    subprocess.run(
        [
            "cc",
            "-std=c99",
            "-O1",
            "-shared",
            "-fPIC",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-fsanitize=undefined",
            "-fno-sanitize-recover=undefined",
            f"-I{out_dir}",
            f"-I{out_dir / 'runtime' / 'include'}",
            *map(str, sources),
            "-o",
            str(lib_path),
        ],
        check=True,
    )
    lib = C.CDLL(str(lib_path))
    model_input, model_output = getattr(lib, f"{name}_input"), getattr(lib, f"{name}_output")
    invoke, reset = getattr(lib, f"{name}_invoke"), getattr(lib, f"{name}_reset_state")
    model_input.restype = model_output.restype = C.POINTER(C.c_int8)
    inputs = _stream_inputs(compiled, frames)
    reset_state(compiled.graph)
    outputs = []
    for step in range(STREAM_STEPS):
        C.memmove(model_input(), inputs[step].tobytes(), inputs.shape[1])
        assert invoke() == 0
        got = np.ctypeslib.as_array(model_output(), (12,)).copy()
        golden = sim.invoke(compiled.graph, [inputs[step]])[0].ravel()
        np.testing.assert_array_equal(got, golden, err_msg=f"step {step}: C != streaming golden")
        np.testing.assert_array_equal(got, _prefix_golden(q, frames, step + 1), err_msg=f"step {step}")
        outputs.append(got)
    assert any(not np.array_equal(outputs[0], o) for o in outputs[1:])  # the state does carry over
    reset()
    C.memmove(model_input(), inputs[0].tobytes(), inputs.shape[1])
    assert invoke() == 0
    np.testing.assert_array_equal(np.ctypeslib.as_array(model_output(), (12,)), outputs[0])


@pytest.mark.parametrize(
    "target",
    ["host", pytest.param("cortex-m4", marks=needs_toolchain), pytest.param("cortex-m55", marks=needs_toolchain)],
)
@pytest.mark.usefixtures("edgec_cache")
def test_stream_of_a_whole_sequence_equals_the_whole_model(streaming, target, tmp_path):
    """All 49 frames, one per invoke (the driver's samples), on the target: == the streaming
    golden at every step, and the last == the whole-sequence model's C output."""
    name, q, frames = streaming
    stream, whole = compile_for(q, get_target(target), stream=True), compile_for(q, get_target(target))
    emit(stream, tmp_path / "stream", name)
    emit(whole, tmp_path / "whole", name)
    inputs = _stream_inputs(stream, frames)
    outputs = verify.run_on(stream, tmp_path / "stream", name, inputs, tmp_path / "build_stream")
    reset_state(stream.graph)
    assert verify.compare(verify.golden_outputs(stream.graph, inputs), outputs).exact
    whole_out = verify.run_on(
        whole, tmp_path / "whole", name, verify.quantized_inputs(whole.graph, frames[None]), tmp_path / "build_whole"
    )
    np.testing.assert_array_equal(outputs[-1], whole_out[0])


def test_stream_refuses_a_conv_front_end():
    q = quantize_model(f"{seq.__file__}:conv_gru_kws", calibration=seq.calibration_data("conv_gru_kws", 4))
    with pytest.raises(EdgecError, match="--stream needs the recurrent layer to read a model input"):
        compile_for(q, "host", stream=True)


@pytest.mark.parametrize("factory", ["cells", "time_major_lstm"])
def test_cells_and_time_major_layers_on_host(factory, tmp_path):
    from tests.data import recurrent_models

    _, (example,) = getattr(recurrent_models, factory)()
    calibration = np.random.default_rng(0).standard_normal((16, *example.shape[1:])).astype(np.float32)
    q = quantize_model(f"{recurrent_models.__file__}:{factory}", calibration=calibration)
    compiled = compile_for(q, "host")
    assert sum(op.kind == "recurrent" for op in compiled.graph.ops) == 2
    emit(compiled, tmp_path / factory, factory)
    floats = calibration[:3]
    inputs = verify.quantized_inputs(compiled.graph, floats)
    outputs = verify.run_on(compiled, tmp_path / factory, factory, inputs, tmp_path / "build")
    assert verify.compare(verify.golden_outputs(compiled.graph, inputs), outputs).exact
    summary = verify.accuracy_summary(compiled, verify.float_reference(compiled, floats), outputs)
    assert summary["output_sqnr_db"] >= 25, summary


def test_cli_build_and_verify_stream(tmp_path, capsys):
    """edgec build --stream writes <name>_reset_state and reports the state; edgec verify --stream
    checks the stream against the golden and the whole-sequence model."""
    from tests.test_cli import run_cli

    calib = tmp_path / "calib.npy"
    np.save(calib, seq.calibration_data("lstm_kws", 8, seed=0))
    model = f"{seq.__file__}:lstm_kws"
    code, out, err = run_cli(
        "build", model, "-o", tmp_path / "out", "--calib", calib, "--stream", "--quiet", capsys=capsys
    )
    assert code == 0, err
    assert "streaming state 192 B outside the arena" in out
    assert "void lstm_kws_reset_state(void)" in (tmp_path / "out" / "lstm_kws.c").read_text()
    code, out, err = run_cli("verify", model, "--calib", calib, "--samples", "2", "--stream", "--quiet", capsys=capsys)
    assert code == 0, err
    assert "OK (stream): 98 steps" in out and "== the whole-sequence model" in out


def test_stream_refuses_reading_other_steps(tmp_path):
    """output[:, 0] would be the current frame's output in a stream, not the first frame's."""
    path = tmp_path / "first_step.py"
    path.write_text(
        "import torch\nfrom torch import nn\n\n"
        "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.rnn = nn.GRU(4, 6, batch_first=True)\n\n"
        "    def forward(self, x):\n        return self.rnn(x)[0][:, 0]\n\n"
        "def model():\n    torch.manual_seed(0)\n    return M().eval(), (torch.randn(1, 5, 4),)\n"
    )
    q = quantize_model(
        f"{path}:model", calibration=np.random.default_rng(0).standard_normal((4, 5, 4)).astype(np.float32)
    )
    with pytest.raises(EdgecError, match="reads time steps other than the last"):
        compile_for(q, "host", stream=True)
    compile_for(q, "host")  # the whole-sequence model is fine
