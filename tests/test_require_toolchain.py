"""CI cannot go green by skipping: with EDGEC_REQUIRE_TOOLCHAIN=1 a test whose Cortex-M toolchain,
emulator or build tool is missing fails instead of skipping (tests/device_support.py). Checked on
a tiny pytest session in a subprocess whose PATH has none of those tools."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.device_support import REQUIRE_TOOLCHAIN, ROOT, needs_toolchain

SESSION = """
import pytest

from tests.device_support import needs_toolchain, require_tools


@needs_toolchain
def test_runs_on_qemu():
    pass


def test_builds_with_cmake():
    require_tools("cmake")


def test_needs_nothing():
    pass


@pytest.mark.parametrize("target", ["host", pytest.param("cortex-m4", marks=needs_toolchain)])
def test_on_a_target(target):
    pass
"""


def run_session(tmp_path, *, path: str, require: bool) -> subprocess.CompletedProcess:
    (tmp_path / "test_tiny.py").write_text(SESSION)
    env = {
        key: value
        for key, value in os.environ.items()
        if key != REQUIRE_TOOLCHAIN and not key.startswith(("PYTEST_", "PYTHONPATH"))
    }
    env.update(PATH=path, PYTHONPATH=str(ROOT))
    if require:
        env[REQUIRE_TOOLCHAIN] = "1"
    # -p: the hooks behind needs_toolchain, as tests/conftest.py installs them
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.device_support",
            "test_tiny.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_missing_tools_skip_with_a_reason_and_fail_when_required(tmp_path):
    no_tools = tmp_path / "bin"  # a PATH without arm-none-eabi-gcc, qemu-system-arm or cmake
    no_tools.mkdir()

    skipped = run_session(tmp_path, path=str(no_tools), require=False)
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    assert "2 passed, 3 skipped" in skipped.stdout
    assert "SKIPPED" in skipped.stdout and "needs arm-none-eabi-gcc and qemu-system-arm" in skipped.stdout  # -rs

    failed = run_session(tmp_path, path=str(no_tools), require=True)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    # needs_toolchain fails a test at set-up (an error), require_tools in the test body (a failure)
    assert "1 failed, 2 passed, 2 errors" in failed.stdout and "skipped" not in failed.stdout
    assert f"{REQUIRE_TOOLCHAIN}=1 makes a missing tool a failure" in failed.stdout
    assert "needs arm-none-eabi-gcc and qemu-system-arm" in failed.stdout and "needs cmake" in failed.stdout


@needs_toolchain
def test_required_tools_that_are_present_pass(tmp_path):
    result = run_session(tmp_path, path=os.environ["PATH"], require=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 passed" in result.stdout
