"""The firmware example (examples/firmware) built as a user would, with its Makefile and with CMake
through the generated CMakeLists.txt, and run under QEMU: it prints the predicted digit. Also with
the application's own build settings, which the model's build must take and never change: a
softfp float ABI, another C standard for the application's sources, LLVM's clang."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pytest

from edgec.targets import toolchain
from tests.device_support import DIGITS, ROOT, needs_toolchain, require_tools

FIRMWARE = ROOT / "examples" / "firmware"
PREDICTION = re.compile(r"predicted digit (\d), label (\d)")
SOFTFP_M4 = ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=softfp", "-mfpu=fpv4-sp-d16")

pytestmark = [needs_toolchain, pytest.mark.usefixtures("edgec_cache")]


def run(command: list, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=600, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, command))}\n{result.stdout}\n{result.stderr}"
    return result


def assert_correct_prediction(output: str) -> None:
    match = PREDICTION.search(output)
    assert match, output
    assert match.group(1) == match.group(2)  # the bundled test image 0 is classified correctly


def test_makefile_firmware_runs_on_qemu(tmp_path):
    require_tools("make", install="apt-get install make")
    result = run(
        ["make", "-C", FIRMWARE, "TARGET=cortex-m4", f"BUILD_DIR={tmp_path}", f"PYTHON={sys.executable}", "run"]
    )

    assert_correct_prediction(result.stdout + result.stderr)
    assert (tmp_path / "digits" / "edgec.mk").exists()


def test_cmake_firmware_runs_on_qemu(tmp_path):
    require_tools("cmake", install="apt-get install cmake")
    build = tmp_path / "build"
    run(
        [
            "cmake",
            "-S",
            FIRMWARE,
            "-B",
            build,
            f"-DCMAKE_TOOLCHAIN_FILE={FIRMWARE / 'arm-none-eabi.cmake'}",
            "-DEDGEC_TARGET=cortex-m33",
            f"-DPython3_EXECUTABLE={sys.executable}",
        ]
    )
    result = run(["cmake", "--build", build, "--target", "run"])

    assert_correct_prediction(result.stdout + result.stderr)
    assert (build / "digits" / "CMakeLists.txt").exists()


@pytest.fixture(scope="module")
def digits_m4(tmp_path_factory):
    """The digits model generated for cortex-m4 as the firmware's build generates it, once."""
    from edgec.pipeline import compile_model, emit

    out = tmp_path_factory.mktemp("digits_m4") / "digits"
    compiled = compile_model(
        str(DIGITS / "digits.pt2"),
        calibration=np.load(DIGITS / "calib.npy")[:16],
        target="cortex-m4",
        warn=lambda _: None,
    )
    emit(compiled, out, "digits")
    return out


def make_firmware(build_dir, model_dir, *variables: str) -> subprocess.CompletedProcess:
    """The firmware's Makefile on a copy of `model_dir` (newer than the model file: not regenerated)."""
    require_tools("make", install="apt-get install make")
    shutil.copytree(model_dir, build_dir / "digits")
    return run(
        [
            "make",
            "-C",
            FIRMWARE,
            "TARGET=cortex-m4",
            f"BUILD_DIR={build_dir}",
            f"PYTHON={sys.executable}",
            *variables,
            "run",
        ]
    )


def compile_commands(output: str) -> dict[str, list[str]]:
    """The compiler's arguments per source (-c SOURCE) in make's echo of its commands."""
    commands = [shlex.split(line) for line in output.splitlines() if " -c " in line]
    return {words[words.index("-c") + 1].rsplit("/", 1)[-1]: words for words in commands}


def test_makefile_keeps_the_applications_flags_its_own(tmp_path, digits_m4):
    """A softfp application whose own sources are gnu89 links the model, which runs: edgec.mk adds
    no flag to the application's sources and gives its own objects -std=c99."""
    result = make_firmware(tmp_path, digits_m4, f"CPU_FLAGS={' '.join(SOFTFP_M4)}", "APP_CFLAGS=-std=gnu89")

    assert_correct_prediction(result.stdout + result.stderr)
    commands = compile_commands(result.stdout)
    for source in ("main.c", "startup.c", "semihost.c"):
        assert "-std=gnu89" in commands[source] and "-std=c99" not in commands[source]
    edgec_sources = [name for name in commands if name.startswith(("digits", "edgec_"))]
    assert len(edgec_sources) >= 4 and all("-std=c99" in commands[name] for name in edgec_sources)
    assert all("-mfloat-abi=softfp" in words and "-mfloat-abi=hard" not in words for words in commands.values())


def test_makefile_builds_with_clang(tmp_path, digits_m4):
    """CC=clang: the generated edgec.mk has nothing GCC-only; linked by ld.lld against newlib."""
    require_tools("clang", "ld.lld", install=toolchain.CLANG_APT_INSTALL)
    result = make_firmware(tmp_path, digits_m4, "CC=clang")

    assert_correct_prediction(result.stdout + result.stderr)
    assert all(words[0] == "clang" for words in compile_commands(result.stdout).values())


def test_cmake_library_takes_the_projects_float_abi(tmp_path, digits_m4):
    """The generated CMakeLists.txt compiles the model with the project's softfp flags (it used to add
    -mfloat-abi=hard, which does not link: "uses VFP register arguments")."""
    require_tools("cmake", install="apt-get install cmake")
    build = tmp_path / "build"
    run(
        [
            "cmake",
            "-S",
            FIRMWARE,
            "-B",
            build,
            f"-DCMAKE_TOOLCHAIN_FILE={FIRMWARE / 'arm-none-eabi.cmake'}",
            "-DEDGEC_TARGET=cortex-m4",
            f"-DCPU_FLAGS={';'.join(SOFTFP_M4)}",
            f"-DMODEL_DIR={digits_m4}",
            f"-DPython3_EXECUTABLE={sys.executable}",
        ]
    )
    result = run(["cmake", "--build", build, "--target", "run", "--", "VERBOSE=1"])

    assert_correct_prediction(result.stdout + result.stderr)
    assert "-mfloat-abi=hard" not in result.stdout
    assert "-mfloat-abi=softfp" in result.stdout
