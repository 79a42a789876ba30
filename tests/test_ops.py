"""Every operator family of the coverage work, end to end: real torch.export and PT2E, then the
generated C on the host (ASan/UBSan, every layer's arena writes checked), Cortex-M4 and Cortex-M55
under QEMU, byte for byte equal to the golden simulator; int8 close to float."""

from __future__ import annotations

import numpy as np
import pytest

from edgec.pipeline import quantize_model
from edgec.tools import verify
from tests.device_support import ROOT, compile_and_run, needs_toolchain

MODELS = ROOT / "tests" / "data" / "op_models.py"
# The op kinds each model must lower to (so a regression to another kernel cannot pass silently).
KINDS = {
    "activations": {"lut", "binary", "prelu", "softmax", "log_softmax", "avg_pool2d"},
    "resampling": {"conv_transpose2d", "conv2d", "max_pool2d", "avg_pool2d"},
    "data_movement": {"copy", "resize", "constant_pad", "reduce", "avg_pool2d"},
    "channels_last_movement": {"copy", "reduce"},
    "attention": {
        "batch_matmul",
        "layer_norm",
        "fully_connected",
        "softmax",
        "lut",
        "reduce",
        "constant_pad",
        "binary",
        "add",
    },
}
MIN_SQNR_DB = {
    "activations": 30.0,
    "resampling": 35.0,
    "data_movement": 25.0,
    "channels_last_movement": 35.0,
    "attention": 20.0,
}


def _floats(quantized, count, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((count, *x.shape[1:])).astype(np.float32) for x in quantized.example_inputs]


@pytest.fixture(scope="module", params=sorted(KINDS))
def quantized(request):
    spec = f"{MODELS}:{request.param}"
    probe = quantize_model(spec, calibration=None, warn=lambda _: None)
    return request.param, quantize_model(spec, calibration=_floats(probe, 32, 0))


def _run(quantized, target, tmp_path, count):
    _, q = quantized
    floats = _floats(q, count, 1)
    compiled, outputs, result = compile_and_run(q, target, floats, tmp_path)
    return compiled, floats, outputs, result


def test_bit_exact_on_host_and_close_to_float(quantized, tmp_path):
    name, _ = quantized
    compiled, floats, outputs, result = _run(quantized, "host", tmp_path, 8)
    assert result.exact, f"{result.mismatched_bytes} bytes differ"
    assert KINDS[name] <= {op.kind for op in compiled.graph.ops}
    summary = verify.accuracy_summary(compiled, verify.float_reference(compiled, floats), outputs)
    assert summary["output_sqnr_db"] >= MIN_SQNR_DB[name], summary
    assert compiled.plan.arena_bytes == compiled.plan.lower_bound_bytes
    assert verify.check_against_reference(compiled, floats).checked >= len(compiled.graph.ops) // 2


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
def test_bit_exact_on_cortex_m(quantized, target, tmp_path):
    *_, result = _run(quantized, target, tmp_path, 3)
    assert result.exact, f"{result.mismatched_bytes} bytes differ on {target}"
