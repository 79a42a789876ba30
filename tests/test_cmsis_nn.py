"""--kernels cmsis-nn: the layers Arm's CMSIS-NN has kernels for call it, linked from the checkout in
CMSIS_NN_DIR, bit-exact with the golden on the host (CMSIS-NN's plain C), Cortex-M4 (its DSP
paths) and Cortex-M55 (Helium).

The tests that build against CMSIS-NN need a checkout (CMSIS_NN_DIR). edgec never copies Arm's
code, and CI's machine reaches PyPI and Debian only, not GitHub, so there they are skipped with that
reason (pytest -rs lists it); on a machine with a checkout they run.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from edgec.errors import EdgecError
from edgec.ops.cmsis_nn import kernel_sums
from edgec.pipeline import compile_for, emit, quantize_model
from edgec.targets.cores import get_target
from edgec.tools import verify
from tests.device_support import ROOT, compile_and_run, needs_toolchain, require_tools

CHECKOUT = os.environ.get("CMSIS_NN_DIR")
needs_checkout = pytest.mark.skipif(
    not CHECKOUT,
    reason="CMSIS_NN_DIR is not set: no CMSIS-NN checkout to link "
    "(git clone https://github.com/ARM-software/CMSIS-NN; CI cannot reach GitHub)",
)


class EveryCmsisKernel(nn.Module):
    """Each layer kind --kernels cmsis-nn maps: a strided stem with bias, a depthwise layer with
    channel multiplier 2, a 1x1 without bias, a dilated 3x3, a residual add, a 3x3 depthwise, max
    and average pooling, a fully connected head and softmax."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.expand = nn.Conv2d(8, 16, 3, padding=1, groups=8)
        self.project = nn.Conv2d(16, 16, 1, bias=False)
        self.dilated = nn.Conv2d(16, 16, 3, padding=2, dilation=2)
        self.depthwise = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.head = nn.Linear(16 * 3 * 3, 10)

    def forward(self, x):
        x = F.relu(self.stem(x))
        x = F.relu(self.expand(x))
        y = self.project(x)
        x = F.relu(self.dilated(y) + y)
        x = F.max_pool2d(F.relu(self.depthwise(x)), 2)
        x = F.avg_pool2d(x, 2, stride=1)
        return torch.softmax(self.head(torch.flatten(x, 1)), dim=1)


class TokenMlp(nn.Module):
    """Fully connected layers over the last axis of [1, tokens, features]: batches of rows."""

    def __init__(self):
        super().__init__()
        self.up, self.down = nn.Linear(8, 12), nn.Linear(12, 4)

    def forward(self, x):
        return self.down(F.relu(self.up(x)))


def _quantized(model: nn.Module, shape, **options):
    torch.manual_seed(0)
    model = model.eval()
    calibration = np.random.default_rng(0).standard_normal((16, *shape[1:])).astype(np.float32)
    return quantize_model(
        model, calibration=calibration, example_inputs=(torch.zeros(shape),), warn=lambda _: None, **options
    ), calibration


@pytest.fixture(scope="module")
def every_kernel():
    torch.manual_seed(0)
    return _quantized(EveryCmsisKernel(), (1, 3, 16, 16))


@pytest.fixture(scope="module")
def token_mlp():
    torch.manual_seed(1)
    return _quantized(TokenMlp(), (1, 5, 8), per_channel_linear=True)


def cmsis_target(name: str):
    return get_target(name).with_kernels("cmsis-nn", CHECKOUT)


@needs_checkout
@pytest.mark.parametrize(
    "target_name",
    ["host", pytest.param("cortex-m4", marks=needs_toolchain), pytest.param("cortex-m55", marks=needs_toolchain)],
)
def test_every_cmsis_nn_kernel_is_bit_exact(every_kernel, target_name, tmp_path, edgec_cache):
    quantized, floats = every_kernel
    compiled, _, result = compile_and_run(quantized, cmsis_target(target_name), floats[:6], tmp_path)
    kernels = [op.kernel for op in compiled.graph.ops if op.kind != "reshape"]
    assert all(kernel.variant == "cmsis-nn" for kernel in kernels), kernels
    kinds = [kernel.unit for kernel in kernels]
    assert {
        "cmsis_nn_conv2d",
        "cmsis_nn_depthwise_conv2d",
        "cmsis_nn_add",
        "cmsis_nn_max_pool2d",
        "cmsis_nn_avg_pool2d",
        "cmsis_nn_fully_connected",
        "cmsis_nn_softmax",
    } <= set(kinds)
    assert result.exact, f"{result.mismatched_bytes} bytes differ from the golden on {target_name}"


@needs_checkout
@pytest.mark.parametrize("target_name", ["host", pytest.param("cortex-m55", marks=needs_toolchain)])
def test_per_channel_fully_connected_over_rows(token_mlp, target_name, tmp_path, edgec_cache):
    """arm_fully_connected_per_channel_s8 with 5 rows as batches; on Helium with its kernel sums."""
    quantized, floats = token_mlp
    compiled, _, result = compile_and_run(quantized, cmsis_target(target_name), floats[:6], tmp_path)
    layers = [op for op in compiled.graph.ops if op.kernel.unit == "cmsis_nn_fully_connected"]
    assert len(layers) == 2 and all(len(op.attrs["multiplier"]) > 1 for op in layers)
    assert result.exact


@needs_checkout
def test_a_context_buffer_smaller_than_cmsis_nn_asks_fails_the_verify_build(every_kernel, tmp_path, edgec_cache):
    """The verify build asks CMSIS-NN's own get_buffer_size, compiled for the core, whether each
    planned context buffer is big enough: a plan one word short stops invoke at that layer."""
    quantized, floats = every_kernel
    compiled = compile_for(quantized, cmsis_target("host"))
    [layer] = [op for op in compiled.graph.ops if op.kernel.unit == "cmsis_nn_conv2d" and op.attrs["cmsis_nn_buffer"]][
        :1
    ]
    layer.attrs["cmsis_nn_buffer"] -= 4
    emit(compiled, tmp_path / "m", "m")
    with pytest.raises(EdgecError, match=r"failed \(exit"):
        verify.run_on(
            compiled, tmp_path / "m", "m", verify.quantized_inputs(compiled.graph, floats[:1]), tmp_path / "b"
        )


@needs_checkout
def test_the_directory_records_the_checkout_and_links_it(every_kernel, tmp_path):
    quantized, _ = every_kernel
    compiled = compile_for(quantized, cmsis_target("cortex-m4"))
    report = emit(compiled, tmp_path / "m", "m")
    assert report["cmsis_nn"]["dir"] == str(get_target("host").with_kernels("cmsis-nn", CHECKOUT).cmsis_nn_dir)
    assert len(report["cmsis_nn"]["commit"]) >= 40 or report["cmsis_nn"]["commit"] == "unknown"
    assert all(layer["kernel"].startswith("arm_") for layer in report["layers"] if layer["op"] != "reshape")
    assert "CMSIS_NN_DIR ?=" in (tmp_path / "m" / "edgec.mk").read_text()
    assert '#include "arm_nnfunctions.h"' in (tmp_path / "m" / "m.c").read_text()
    assert "cmsis-nn" in " ".join(compiled.choices)


@needs_checkout
@needs_toolchain
def test_firmware_makefile_links_cmsis_nn_through_edgec_mk(tmp_path, edgec_cache):
    """The firmware example, built as a user would with KERNELS=cmsis-nn: the generated edgec.mk
    adds CMSIS-NN's sources (compiled with the application's -Wall -Wextra -Werror) and headers."""
    require_tools("make", install="apt-get install make")
    result = subprocess.run(
        [
            "make",
            "-C",
            str(ROOT / "examples" / "firmware"),
            "TARGET=cortex-m55",
            "KERNELS=cmsis-nn",
            f"CMSIS_NN_DIR={CHECKOUT}",
            f"BUILD_DIR={tmp_path}",
            f"PYTHON={sys.executable}",
            "run",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert "predicted digit" in output
    predicted = output.split("predicted digit ")[1].split(",")[0]
    assert output.split("label ")[1].strip()[0] == predicted


@needs_checkout
@needs_toolchain
def test_firmware_cmake_links_cmsis_nn_through_the_generated_cmakelists(tmp_path, edgec_cache):
    """The same with CMake: the generated CMakeLists.txt compiles CMSIS-NN into edgec_digits."""
    require_tools("cmake", install="apt-get install cmake")
    firmware, build = ROOT / "examples" / "firmware", tmp_path / "build"
    env = {**os.environ, "CMSIS_NN_DIR": CHECKOUT}
    for command in (
        [
            "cmake",
            "-S",
            firmware,
            "-B",
            build,
            f"-DCMAKE_TOOLCHAIN_FILE={firmware / 'arm-none-eabi.cmake'}",
            "-DEDGEC_TARGET=cortex-m33",
            "-DEDGEC_KERNELS=cmsis-nn",
            f"-DPython3_EXECUTABLE={sys.executable}",
        ],
        ["cmake", "--build", build, "--target", "run"],
    ):
        result = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=900, env=env)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "predicted digit" in result.stdout + result.stderr
    assert "arm_convolve_wrapper_s8" in (build / "digits" / "digits.c").read_text()


def test_kernel_sums_are_bias_plus_input_offset_times_row_sums():
    """The Helium FC's per-row sums (arm_vector_sum_s8 with a symmetric filter), wrapping in int32."""
    weight = np.array([[1, -2, 3], [127, 127, 127]], dtype=np.int8)
    bias = np.array([10, 2**31 - 1], dtype=np.int32)
    assert kernel_sums(weight, bias, 5).tolist() == [10 + 5 * 2, -(2**31) + 5 * 381 - 1]
    assert kernel_sums(weight, bias, 0).tolist() == bias.tolist()


def test_without_a_checkout_the_cli_says_what_to_set(tmp_path):
    unset = {k: v for k, v in os.environ.items() if k != "CMSIS_NN_DIR"}
    for env, message in (
        (unset, "needs a CMSIS-NN checkout: set CMSIS_NN_DIR"),
        ({**unset, "CMSIS_NN_DIR": str(tmp_path)}, "not a CMSIS-NN checkout"),
    ):
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "edgec.cli",
                "build",
                "edgec/zoo/mlperf.py:fc_autoencoder",
                "--kernels",
                "cmsis-nn",
                "--target",
                "cortex-m4",
                "-o",
                str(tmp_path / "out"),
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=300,
        )
        assert result.returncode == 2, result.stderr
        assert message in result.stderr and "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert not (tmp_path / "out").exists()


def test_cmsis_nn_compiles_at_the_optimisation_the_target_asks(monkeypatch, tmp_path):
    """--cmsis-nn-opt Ofast (Arm's recommendation for CMSIS-NN) reaches the compiler for CMSIS-NN's
    sources only; -O2 stays the default; anything else is one clear error."""
    from edgec.targets import cmsis_nn_build, toolchain

    (tmp_path / "Source" / "X").mkdir(parents=True)
    (tmp_path / "Source" / "X" / "a.c").write_text("int a;\n")
    seen = []
    monkeypatch.setattr(toolchain, "compile_objects", lambda target, sources, **kwargs: seen.append(kwargs["opt"]))
    target = get_target("cortex-m4")
    cmsis_nn_build.objects(target, tmp_path)
    cmsis_nn_build.objects(target.with_cmsis_nn_opt("-Ofast"), tmp_path)
    assert seen == ["-O2", "-Ofast"]
    with pytest.raises(EdgecError, match="--cmsis-nn-opt '-O3': expected one of -O2, -Ofast"):
        target.with_cmsis_nn_opt("-O3")
