"""The generated C checks its own build: it refuses (#error) to compile for a core whose ISA
extensions differ from the target it was generated for, checks every planned scratch against the
kernels' sizes from edgec_nn.h (which follow -mcpu) at compile time, checks an external arena's
alignment when invoked, stops at the first failing layer and says which, keeps user text from
ending its comments, and passes its CPU flags to CMake privately (to a project without its own)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from edgec.backend.codegen import c_comment
from edgec.pipeline import compile_model, emit
from edgec.targets import toolchain
from edgec.targets.cores import get_target
from tests.device_support import DIGITS, needs_toolchain
from tests.test_cli import run_cli

STRICT = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic"]


@pytest.fixture(scope="module")
def digits_dirs(tmp_path_factory) -> dict[str, Path]:
    """The digits example generated for each target, once."""
    out = tmp_path_factory.mktemp("generated")
    calibration = np.load(DIGITS / "calib.npy")[:16]
    dirs = {}
    for target in ("host", "cortex-m3", "cortex-m4", "cortex-m55"):
        compiled = compile_model(
            str(DIGITS / "digits.pt2"), calibration=calibration, target=target, warn=lambda _: None
        )
        emit(compiled, out / target, "digits")
        dirs[target] = out / target
    return dirs


def compile_model_c(model_dir: Path, target: str, *extra: str) -> subprocess.CompletedProcess:
    """digits.c compiled (-c) for `target`'s CPU with the cross compiler, or the host's."""
    compiler = toolchain.require_host_cc() if target == "host" else toolchain.require_cross_toolchain()
    return subprocess.run(
        [
            compiler,
            *get_target(target).cflags,
            *STRICT,
            *extra,
            f"-I{model_dir}",
            f"-I{model_dir / 'runtime' / 'include'}",
            "-c",
            str(model_dir / "digits.c"),
            "-o",
            str(model_dir / f"digits-{target}.o"),
        ],
        capture_output=True,
        text=True,
    )


@needs_toolchain
@pytest.mark.parametrize(
    "generated,compiled_for,message",
    [
        (
            "cortex-m55",
            "cortex-m4",
            "digits.c was generated for cortex-m55 (the DSP extension and Helium) but is compiled "
            "for a DSP core without Helium",
        ),
        (
            "cortex-m4",
            "cortex-m3",
            "digits.c was generated for cortex-m4 (the DSP extension, no Helium) but is compiled for "
            "a core without DSP or Helium",
        ),
        (
            "host",
            "cortex-m55",
            "digits.c was generated for host (no DSP extension, no Helium) but is compiled for a core with Helium",
        ),
    ],
)
def test_compiling_for_another_isa_is_an_error_naming_both(digits_dirs, generated, compiled_for, message):
    assert compile_model_c(digits_dirs[generated], generated).returncode == 0
    result = compile_model_c(digits_dirs[generated], compiled_for)
    assert result.returncode != 0
    assert f'#error "{message}' in result.stderr
    assert "compile it with edgec.mk's EDGEC_TARGET_CFLAGS or regenerate it for your core" in result.stderr
    assert "scratch_too_small" not in result.stderr  # one clear message, not the size checks' too


@needs_toolchain
def test_a_scratch_smaller_than_the_kernel_needs_on_this_cpu_does_not_compile(digits_dirs, tmp_path):
    """The plan was made with the M55's 4-byte depthwise cache entries; a runtime whose entries
    are larger (as on a DSP core) needs more than was planned: the layer is named."""
    model_dir = tmp_path / "digits"
    shutil.copytree(digits_dirs["cortex-m55"], model_dir)
    header = model_dir / "runtime" / "include" / "edgec_nn.h"
    header.write_text(
        header.read_text().replace(
            "#define EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES 4", "#define EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES 16"
        )
    )
    result = compile_model_c(model_dir, "cortex-m55")
    assert result.returncode != 0
    layers = re.findall(r"size of array 'digits_(\w+)_scratch_too_small' is negative", result.stderr)
    assert layers and all(layer.startswith("depthwise_conv2d") for layer in layers), result.stderr


def run_host_program(model_dir: Path, tmp_path: Path, main: str, *flags: str) -> subprocess.CompletedProcess:
    sources = [model_dir / "digits.c", model_dir / "digits_weights.c", *(model_dir / "runtime" / "src").rglob("*.c")]
    (tmp_path / "main.c").write_text(main)
    program = tmp_path / "program"
    subprocess.run(
        [
            toolchain.require_host_cc(),
            *STRICT,
            *flags,
            f"-I{model_dir}",
            f"-I{model_dir / 'runtime' / 'include'}",
            str(tmp_path / "main.c"),
            *map(str, sources),
            "-o",
            str(program),
        ],
        check=True,
        capture_output=True,
    )
    return subprocess.run([str(program)], capture_output=True, text=True)


PRINT_INVOKE = (
    '#include <stdio.h>\n#include "digits.h"\nint main(void) { printf("%d\\n", digits_invoke()); return 0; }\n'
)


def test_invoke_returns_the_first_failing_layer(digits_dirs, tmp_path):
    model_dir = tmp_path / "digits"
    shutil.copytree(digits_dirs["host"], model_dir)
    assert run_host_program(model_dir, tmp_path, PRINT_INVOKE).stdout == "0\n"
    layers = json.loads((model_dir / "report.json").read_text())["layers"]
    index = next(i for i, layer in enumerate(layers) if layer["op"] == "depthwise_conv2d")
    assert f"#define DIGITS_LAYERS {len(layers)}\n" in (model_dir / "digits.h").read_text()
    model_c = model_dir / "digits.c"
    source = model_c.read_text()
    layer = re.findall(r"EDGEC_LAYER_BEGIN\((\d+)\);\n    status \|= edgec_depthwise", source)
    assert layer == [str(index)]
    # Crossed activation bounds in its descriptor: its kernel refuses them.
    corrupted = re.sub(
        r"(static const edgec_depthwise_conv_desc digits_depthwise_conv2d_\w+_desc = \{[^}]*)"
        r"\.act_min = -?\d+,\s*\.act_max = -?\d+",
        r"\1.act_min = 10, .act_max = -10",
        source,
    )
    assert corrupted != source
    model_c.write_text(corrupted)
    assert run_host_program(model_dir, tmp_path, PRINT_INVOKE).stdout == f"{index + 1}\n"


def test_invoke_refuses_a_misaligned_external_arena(digits_dirs, tmp_path):
    """An external arena one byte off: invoke returns DIGITS_ERROR_ARENA_ALIGNMENT before any layer."""
    main = (
        '#include <stdio.h>\n#include "digits.h"\n'
        "int8_t digits_storage[DIGITS_ARENA_SIZE + 16] __attribute__((aligned(16)));\n"
        'int main(void) { printf("%d %d\\n", digits_invoke(), DIGITS_ERROR_ARENA_ALIGNMENT); return 0; }\n'
    )
    aligned = run_host_program(
        digits_dirs["host"], tmp_path, main, "-DDIGITS_EXTERNAL_ARENA", "-Wl,--defsym=digits_arena=digits_storage"
    )
    assert aligned.stdout == "0 -1\n"
    misaligned = run_host_program(
        digits_dirs["host"], tmp_path, main, "-DDIGITS_EXTERNAL_ARENA", "-Wl,--defsym=digits_arena=digits_storage+1"
    )
    assert misaligned.stdout == "-1 -1\n"


def test_user_text_cannot_end_a_comment(tmp_path, capsys):
    assert c_comment("x = f(x)  # */ int evil; /* ??/") == "x = f(x) # * / int evil; / * ? ?/"
    model = tmp_path / "model.py"
    model.write_text(
        textwrap.dedent("""
        import torch
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)

            def forward(self, x):
                return self.fc(x)  # */ int evil; /* ??/


        def factory():
            torch.manual_seed(0)
            return Net().eval(), (torch.randn(1, 4),)
    """)
    )
    out = tmp_path / "out"
    code, _, err = run_cli("build", f"{model}:factory", "-o", out, "--name", "digits", "--quiet", capsys=capsys)
    assert code == 0, err
    source = (out / "digits.c").read_text()
    assert "# * / int evil; / * ? ?/ */" in source and "int evil;" not in source.replace("* / int evil;", "")
    assert run_host_program(out, tmp_path, PRINT_INVOKE).stdout == "0\n"


def test_cmake_gets_the_cpu_flags_privately(digits_dirs):
    """... and only when the project sets no -mcpu of its own (tests/test_firmware.py: softfp)."""
    m55 = (digits_dirs["cortex-m55"] / "CMakeLists.txt").read_text()
    assert (
        'if(NOT "${CMAKE_C_FLAGS} ${EDGEC_DIGITS_OPTIONS}" MATCHES "-mcpu=")\n'
        "    set(EDGEC_DIGITS_CPU_FLAGS -mcpu=cortex-m55 -mthumb -mfloat-abi=hard)"
    ) in m55
    assert "target_compile_options(edgec_digits PRIVATE ${EDGEC_DIGITS_CPU_FLAGS})" in m55
    assert "target_compile_options(edgec_runtime PRIVATE ${EDGEC_DIGITS_CPU_FLAGS})" in m55
    assert "-std=c99" not in m55 and "C_STANDARD 99" in m55
    assert "target_compile_options" not in (digits_dirs["host"] / "CMakeLists.txt").read_text()
