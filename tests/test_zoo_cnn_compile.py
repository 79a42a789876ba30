"""The public-architecture zoo (edgec.zoo.cnn) through the whole compiler: real torch.export and
PT2E, then the generated C on the host (ASan/UBSan, arena writes checked), on Cortex-M4 and on
Cortex-M55 under QEMU, byte for byte equal to the golden simulator.

Each model is quantized once and compiled for every target. The int8-vs-float floors are the
measured SQNR less a margin; these are random-weight networks, whose quantization noise grows with
depth (PyTorch's own Q/DQ simulation of the same program is as far from float: see the closing
notes), so the floors guard against regressions, not the LSB (that must be zero)."""

from __future__ import annotations

import pytest

from edgec.pipeline import quantize_model
from edgec.targets.cores import get_target
from edgec.tools import verify
from edgec.zoo import cnn
from tests.device_support import compile_and_run, needs_toolchain

MIN_SQNR_DB = {
    "binary_classifier": 20,
    "efficientnet_b0": 6,
    "kws_conv1d": 26,
    "lenet5_tanh": 26,
    "mlp_log_softmax": 21,
    "mnasnet0_5": 3,
    "mobilenet_v3_small": 7,
    "resnet18": 16,
    "shufflenet_v2_x0_5": 6,
    "squeezenet1_1": 27,
    "two_heads": 29,
    "unet_nearest": 15,
    "unet_transposed": 17,
}
# mnasnet0_5's weights are past the Cortex-M4 part's 1 MiB flash even as int8: it gets --flash 2M
# (the board has 4 MiB). The others build with the default --opt auto, which at the part's 5 wait
# states keeps most of their DSP filters compact (and would narrow more to fit the flash budget).
FLASH_ON_M4 = {"mnasnet0_5": 2 * 1024 * 1024}
SAMPLES = {"host": 4, "cortex-m4": 2, "cortex-m55": 2}


@pytest.fixture(scope="module", params=sorted(cnn.ZOO_CNN))
def quantized(request):
    name = request.param
    return name, quantize_model(f"{cnn.__file__}:{name}", calibration=cnn.calibration_data(name, 16, seed=0))


def _run(quantized, target_name, tmp_path):
    name, q = quantized
    target = get_target(target_name)
    if target_name == "cortex-m4" and name in FLASH_ON_M4:
        target = target.with_budget(flash=FLASH_ON_M4[name])
    floats = cnn.calibration_data(name, SAMPLES[target_name], seed=1)
    compiled, outputs, result = compile_and_run(q, target, floats, tmp_path, name)
    return compiled, floats, outputs, result


def test_zoo_model_is_bit_exact_on_host(quantized, tmp_path):
    name, _ = quantized
    compiled, floats, outputs, result = _run(quantized, "host", tmp_path)
    assert result.exact, f"{name}: {result.mismatched_bytes} bytes differ"
    summary = verify.accuracy_summary(compiled, verify.float_reference(compiled, floats), outputs)
    assert summary["output_sqnr_db"] >= MIN_SQNR_DB[name], summary
    verify.check_against_reference(compiled, floats)  # every layer within a step of the Q/DQ program


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
def test_zoo_model_is_bit_exact_on_cortex_m(quantized, target, tmp_path):
    name, _ = quantized
    *_, result = _run(quantized, target, tmp_path)
    assert result.exact, f"{name} on {target}: {result.mismatched_bytes} bytes differ"
