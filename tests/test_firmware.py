"""The firmware example (examples/firmware) built as a user would, with its Makefile and with CMake
through the generated CMakeLists.txt, and run under QEMU: it prints the predicted digit."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.device_support import ROOT, edgec_cache, needs_toolchain, require_tools  # noqa: F401

FIRMWARE = ROOT / "examples" / "firmware"
PREDICTION = re.compile(r"predicted digit (\d), label (\d)")

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
    result = run(["make", "-C", FIRMWARE, "TARGET=cortex-m4", f"BUILD_DIR={tmp_path}", f"PYTHON={sys.executable}",
                  "run"])

    assert_correct_prediction(result.stdout + result.stderr)
    assert (tmp_path / "digits" / "edgec.mk").exists()


def test_cmake_firmware_runs_on_qemu(tmp_path):
    require_tools("cmake", install="apt-get install cmake")
    build = tmp_path / "build"
    run(["cmake", "-S", FIRMWARE, "-B", build, f"-DCMAKE_TOOLCHAIN_FILE={FIRMWARE / 'arm-none-eabi.cmake'}",
         "-DEDGEC_TARGET=cortex-m33", f"-DPython3_EXECUTABLE={sys.executable}"])
    result = run(["cmake", "--build", build, "--target", "run"])

    assert_correct_prediction(result.stdout + result.stderr)
    assert (build / "digits" / "CMakeLists.txt").exists()
