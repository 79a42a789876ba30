"""Generated C on emulated Cortex-M cores, for real (arm-none-eabi-gcc, QEMU): byte for byte equal
to the golden simulator for every kernel kind and the four reference models; targets that cannot
run; the memory budget check of `edgec build`.

Each case compiles its model for its target once and runs all samples in one QEMU run.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from edgec.errors import EdgecError
from edgec.pipeline import check_memory_budget, compile_model, emit
from edgec.targets import device
from edgec.targets.cores import get_target
from edgec.targets.toolchain import elf_memory
from edgec.tools.verify import compare, golden_outputs, quantized_inputs, run_on
from edgec.zoo import mlperf
from tests.data.models import all_ops_samples
from tests.device_support import ALL_OPS, DIGITS, ROOT, needs_toolchain
from tests.test_cli import run_cli

SPECS = {"all_ops": ALL_OPS, **{name: f"{ROOT / 'edgec' / 'zoo' / 'mlperf.py'}:{name}" for name in mlperf.ZOO}}
SAMPLES = 8
CALIBRATION_SAMPLES = 16
EVERY_TARGET_MODELS = ("all_ops", "ds_cnn")
CASES = [(model, target) for target in ("cortex-m4", "cortex-m55") for model in SPECS] + [
    (model, target) for target in ("cortex-m3", "cortex-m7", "cortex-m33") for model in EVERY_TARGET_MODELS
]


def float_samples(model: str, count: int, seed: int) -> np.ndarray:
    if model == "all_ops":
        return all_ops_samples(count, seed)
    return mlperf.calibration_data(model, count, seed)


def compile_for(model: str, target: str):
    return compile_model(
        SPECS[model], calibration=float_samples(model, CALIBRATION_SAMPLES, 0), target=target, warn=lambda _: None
    )


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("model,target", CASES)
def test_generated_c_is_bit_exact_on_target(model, target, tmp_path):
    compiled = compile_for(model, target)
    inputs = quantized_inputs(compiled.graph, float_samples(model, SAMPLES, seed=1))
    emit(compiled, tmp_path / "model", "model")

    outputs = run_on(compiled, tmp_path / "model", "model", inputs, tmp_path / "build")

    result = compare(golden_outputs(compiled.graph, inputs), outputs)
    assert result.exact, (
        f"{result.mismatched_samples} of {result.samples} samples differ ({result.mismatched_bytes} bytes)"
    )


def test_all_ops_model_calls_every_kernel(tmp_path):
    compiled = compile_for("all_ops", "cortex-m4")
    # Zero padding is folded into the next convolution, so no pad op ever reaches the device.
    # (The coverage work's kinds have their models in tests/data/op_models.py.)
    assert {op.kind for op in compiled.graph.ops} == {
        "conv2d",
        "depthwise_conv2d",
        "clamp",
        "add",
        "max_pool2d",
        "avg_pool2d",
        "reshape",
        "fully_connected",
        "softmax",
    }
    emit(compiled, tmp_path / "model", "model")
    model_c = (tmp_path / "model" / "model.c").read_text()
    for kernel in ("edgec_conv_s8_dsp_wide", "edgec_depthwise_conv_s8"):
        assert f"{kernel}(" in model_c
    # The 1x1 conv's input dies there, so it runs over it (plain 1x1: tests/test_kernels_conv.py).
    assert any(op.kind == "conv2d" and op.name in compiled.plan.in_place for op in compiled.graph.ops)
    assert any(op.attrs.get("ch_mult", 1) > 1 for op in compiled.graph.ops)
    assert any(op.attrs.get("dilation", (1, 1)) != (1, 1) for op in compiled.graph.ops)


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
def test_a_wrong_weight_is_caught(tmp_path):
    compiled = compile_for("all_ops", "cortex-m4")
    inputs = quantized_inputs(compiled.graph, float_samples("all_ops", SAMPLES, seed=1))
    emit(compiled, tmp_path / "model", "model")
    weights = tmp_path / "model" / "model_weights.c"
    first_value = re.compile(r"(= \{\n    /\* clang-format off \*/\n    )(-?\d+)")
    weights.write_text(
        first_value.sub(
            lambda m: m.group(1) + ("-128" if m.group(2) != "-128" else "127"), weights.read_text(), count=1
        )
    )

    outputs = run_on(compiled, tmp_path / "model", "model", inputs, tmp_path / "build")

    assert not compare(golden_outputs(compiled.graph, inputs), outputs).exact


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
def test_verify_command_on_a_target(small_digits_calib, capsys):
    code, out, err = run_cli(
        "verify",
        DIGITS / "digits.pt2",
        "--calib",
        small_digits_calib,
        "--target",
        "cortex-m7",
        "--samples",
        5,
        "--quiet",
        capsys=capsys,
    )
    assert code == 0, err
    assert "OK: 5 samples, golden simulator == cortex-m7 (QEMU), 0 LSB" in out


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
def test_cortex_m0plus_builds_but_does_not_run(tmp_path, capsys):
    compiled = compile_for("all_ops", "cortex-m0plus")
    emit(compiled, tmp_path / "model", "model")
    elf = device.build_program(compiled.target, tmp_path / "model", "model", tmp_path / "build")
    memory = elf_memory(elf)
    assert 0 < memory["flash_bytes"] <= compiled.target.flash_bytes
    assert memory["ram_bytes"] <= compiled.target.ram_bytes

    code, _, err = run_cli("verify", DIGITS / "digits.pt2", "--target", "cortex-m0plus", capsys=capsys)
    assert code == 2
    assert err.strip().splitlines() == [
        "edgec: error: cortex-m0plus has no emulated board to run on (targets that run under QEMU: "
        "cortex-m3, cortex-m4, cortex-m7, cortex-m33, cortex-m55)"
    ]


def test_build_refuses_a_model_over_the_budget(tmp_path, small_digits_calib, capsys):
    out = tmp_path / "out"
    code, stdout, err = run_cli(
        "build",
        DIGITS / "digits.pt2",
        "--calib",
        small_digits_calib,
        "--target",
        "cortex-m4",
        "--ram",
        "512",
        "--flash",
        "1K",
        "-o",
        out,
        "--quiet",
        capsys=capsys,
    )
    assert code == 2 and stdout == ""
    [line] = err.strip().splitlines()
    # --opt auto (the default) already kept every constant compact: no hint; the arena is the smallest
    # band stages reach (docs/band-stages.md)
    assert re.fullmatch(
        r"edgec: error: model does not fit cortex-m4: arena ([\d,]+) B > RAM budget 512 B; "
        r"constants [\d,]+ B > flash budget 1,024 B \(budget from --ram/--flash; [\d,]+ B is the smallest the "
        r"constants reach with int4 weights in every layer that can take them; \1 B is the smallest "
        r"arena band stages reach, from [\d,]+ B layer by layer\)",
        line,
    ), line
    code, stdout, err = run_cli(
        "build",
        DIGITS / "digits.pt2",
        "--calib",
        small_digits_calib,
        "--target",
        "cortex-m4",
        "--flash",
        "1K",
        "--opt",
        "speed",
        "-o",
        out,
        "--quiet",
        capsys=capsys,
    )
    assert code == 2 and re.search(
        r"\(budget from --ram/--flash; --opt auto or size keeps the DSP kernels' constants smaller; [\d,]+ B is "
        r"the smallest the constants reach with int4 weights in every layer that can take them\)$",
        err.strip(),
    ), err
    assert sorted(p.name for p in tmp_path.iterdir()) == [small_digits_calib.name]  # no output, no staging left

    code, _, err = run_cli(
        "build",
        DIGITS / "digits.pt2",
        "--calib",
        small_digits_calib,
        "--target",
        "cortex-m4",
        "--ram",
        "256K",
        "--flash",
        "1M",
        "-o",
        out,
        "--quiet",
        capsys=capsys,
    )
    assert code == 0, err
    assert (out / "report.json").exists()


def test_budget_error_names_the_typical_part():
    m3 = get_target("cortex-m3")
    with pytest.raises(
        EdgecError,
        match=r"^model does not fit cortex-m3: arena 70,000 B > RAM budget 65,536 B "
        r"\(budget of NXP LPC1766 .*; set yours with --ram/--flash\)$",
    ):
        check_memory_budget({"arena_bytes": 70000, "weights_bytes": 1000}, m3)
    check_memory_budget({"arena_bytes": m3.ram_bytes, "weights_bytes": m3.flash_bytes}, m3)
    check_memory_budget({"arena_bytes": 10**9, "weights_bytes": 10**9}, get_target("host"))
    # --opt size: still the typical part's budget, and no hint to shrink the constants further; the
    # int4 chooser runs only under a budget the user gives, so the error says how to ask for it
    m4_size = get_target("cortex-m4").with_opt("size")
    with pytest.raises(
        EdgecError,
        match=r"^model does not fit cortex-m4: constants 2,000,000 B > flash budget "
        r"1,048,576 B \(budget of ST STM32F407VG .*; set yours with --ram/--flash; with --flash, edgec may "
        r"give some layers int4 weights to fit \(docs/int4.md\)\)$",
    ):
        check_memory_budget({"arena_bytes": 1000, "weights_bytes": 2_000_000}, m4_size)


def test_bad_budget_size_is_a_usage_error(capsys):
    code, _, err = run_cli("build", DIGITS / "digits.pt2", "--ram", "12 parsecs", "-o", "unused", capsys=capsys)
    assert code == 2
    assert "Invalid value for '--ram'" in err
    code, _, err = run_cli("build", DIGITS / "digits.pt2", "--opt", "fast", "-o", "unused", capsys=capsys)
    assert code == 2
    assert "Invalid value for '--opt'" in err
