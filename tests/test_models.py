"""End to end on the reference architectures: real torch.export, PT2E quantization, generated C
compiled by the host compiler with ASan/UBSan, and 0 LSB against the golden simulator."""

from __future__ import annotations

import numpy as np
import pytest

from edgec.pipeline import compile_model, emit
from edgec.tools import verify
from edgec.zoo import mlperf

SAMPLES = 20
# int8 vs float floors measured on these random-weight models (see the closing notes); they guard
# against quantization regressions, not against LSB differences (those must be zero).
MIN_OUTPUT_SQNR_DB = {"ds_cnn": 25.0, "mobilenet_v1_025": 12.0, "resnet8": 25.0, "fc_autoencoder": 12.0}


@pytest.fixture(scope="module", params=sorted(mlperf.ZOO))
def built(request, tmp_path_factory):
    name = request.param
    compiled = compile_model(f"{mlperf.__file__}:{name}", calibration=mlperf.calibration_data(name, 16, seed=0))
    out_dir = tmp_path_factory.mktemp(name) / name
    emit(compiled, out_dir, name)
    return name, compiled, out_dir


def test_generated_c_is_bit_exact_with_golden(built, tmp_path):
    name, compiled, out_dir = built
    floats = mlperf.calibration_data(name, SAMPLES, seed=1)
    inputs = verify.quantized_inputs(compiled.graph, floats)
    exe = verify.build_host(out_dir, name, tmp_path, sanitize=True)
    device = verify.run_host(exe, inputs, verify.output_bytes(compiled.graph))
    result = verify.compare(verify.golden_outputs(compiled.graph, inputs), device)
    assert result.mismatched_bytes == 0
    assert len(np.unique(device, axis=0)) > 1, "outputs do not depend on the input"


def test_int8_output_is_close_to_float(built):
    name, compiled, _ = built
    floats = mlperf.calibration_data(name, SAMPLES, seed=1)
    inputs = verify.quantized_inputs(compiled.graph, floats)
    int8 = verify.golden_outputs(compiled.graph, inputs)
    summary = verify.accuracy_summary(compiled, verify.float_reference(compiled, floats), int8)
    print(f"{name}: {summary}")
    assert summary["output_sqnr_db"] >= MIN_OUTPUT_SQNR_DB[name]


def test_report_matches_the_mlperf_architecture(built):
    name, compiled, out_dir = built
    import json

    report = json.loads((out_dir / "report.json").read_text())
    expected_macs = {"ds_cnn": 2.66e6, "mobilenet_v1_025": 7.49e6, "resnet8": 12.5e6, "fc_autoencoder": 0.264e6}
    assert report["macs"] == pytest.approx(expected_macs[name], rel=0.01)
    assert report["arena_bytes"] >= report["lower_bound_bytes"] > 0
    for layer in report["layers"]:
        assert set(layer) >= {"name", "op", "macs", "output_shape", "arena_offset", "output_bytes", "scratch_bytes"}
