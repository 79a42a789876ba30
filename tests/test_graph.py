"""Graph generality: in-place ATen spellings and eval no-ops are normalised away, and a model may
have any number of inputs and outputs, each with its own buffer, qparams and accessors."""

from __future__ import annotations

import re

import numpy as np
import pytest

from edgec.pipeline import compile_model, emit
from edgec.tools import verify
from tests.device_support import ROOT, needs_toolchain

MODELS = ROOT / "tests" / "data" / "graph_models.py"


def _samples(compiled, count, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((count, *x.shape[1:])).astype(np.float32) for x in compiled.example_inputs]


def _compiled(factory, target="host"):
    probe = compile_model(f"{MODELS}:{factory}", calibration=None, warn=lambda _: None)
    return compile_model(f"{MODELS}:{factory}", calibration=_samples(probe, 16, 0), target=target)


def _run(compiled, tmp_path, count=6):
    emit(compiled, tmp_path / "m", "m")
    floats = _samples(compiled, count, 1)
    inputs = verify.quantized_inputs(compiled.graph, floats)
    outputs = verify.run_on(compiled, tmp_path / "m", "m", inputs, tmp_path / "build")
    return floats, inputs, outputs


def test_in_place_spellings_and_no_ops_are_normalised(tmp_path):
    compiled = _compiled("in_place_spellings")
    kinds = [op.kind for op in compiled.graph.ops]
    assert kinds == ["conv2d", "conv2d", "add", "reshape", "fully_connected"], kinds
    assert compiled.graph.ops[2].attrs["clamp"] == (0.0, None)  # relu_ after `out += identity` fused
    _, inputs, outputs = _run(compiled, tmp_path)
    assert verify.compare(verify.golden_outputs(compiled.graph, inputs), outputs).exact


def test_two_inputs_two_outputs_have_their_own_accessors(tmp_path):
    compiled = _compiled("two_in_two_out")
    assert len(compiled.graph.inputs) == 2 and len(compiled.graph.outputs) == 2
    floats, inputs, outputs = _run(compiled, tmp_path)
    assert verify.compare(verify.golden_outputs(compiled.graph, inputs), outputs).exact
    header = (tmp_path / "m" / "m.h").read_text()
    for symbol in (
        "M_INPUTS 2",
        "M_OUTPUTS 2",
        "int8_t *m_input_1(void)",
        "const int8_t *m_output_1(void)",
        "m_quantize_input_1(const float *input)",
        "m_dequantize_output_1(float *output)",
        "M_INPUT_1_SIZE 6",
        "M_OUTPUT_1_SIZE 16",
        "M_INPUT_0_C 3",
        "M_OUTPUT_0_SIZE 4",
    ):
        assert symbol in header, symbol
    scales = re.findall(r"#define M_OUTPUT_(\d)_SCALE (\S+)", header)
    assert scales[0][1] != scales[1][1], "each output has its own qparams"
    summary = verify.accuracy_summary(compiled, verify.float_reference(compiled, floats), outputs)
    assert summary["output_sqnr_db"] > 25 and summary["top1_agreement"] == 1.0


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
def test_two_inputs_two_outputs_on_target(target, tmp_path):
    compiled = _compiled("two_in_two_out", target)
    _, inputs, outputs = _run(compiled, tmp_path)
    assert verify.compare(verify.golden_outputs(compiled.graph, inputs), outputs).exact
