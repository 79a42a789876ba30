"""Shared by the tests that build generated code for Cortex-M targets and run it under QEMU.

A test that needs a tool this machine lacks (arm-none-eabi-gcc, qemu-system-arm, make, cmake) is
skipped, and `pytest -rs` lists it -- unless EDGEC_REQUIRE_TOOLCHAIN=1 (set by .ci/run), which
turns every such skip into a failure, so CI cannot go green by skipping the Cortex-M tests.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from edgec.targets import toolchain

ROOT = Path(__file__).resolve().parent.parent
DIGITS = ROOT / "examples" / "digits"
ALL_OPS = f"{ROOT / 'tests' / 'data' / 'models.py'}:all_ops"

REQUIRE_TOOLCHAIN = "EDGEC_REQUIRE_TOOLCHAIN"


def require_tools(*tools: str, install: str = toolchain.APT_INSTALL) -> None:
    """Skip the calling test if one of the programs `tools` is not on PATH -- or, with
    EDGEC_REQUIRE_TOOLCHAIN=1, fail it."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if not missing:
        return
    message = f"needs {' and '.join(missing)} ({install})"
    if os.environ.get(REQUIRE_TOOLCHAIN) == "1":
        pytest.fail(f"{message}; {REQUIRE_TOOLCHAIN}=1 makes a missing tool a failure, not a skip", pytrace=False)
    pytest.skip(message)


# Marks a test, a parameter set or (in pytestmark) a module that cross-compiles and runs under
# QEMU; the two hooks below, which conftest.py installs, act on it.
needs_toolchain = pytest.mark.needs_toolchain


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers",
        "needs_toolchain: cross-compiles with arm-none-eabi-gcc and runs under "
        f"qemu-system-arm (skipped without them, failed with {REQUIRE_TOOLCHAIN}=1)",
    )


def pytest_runtest_setup(item) -> None:
    if item.get_closest_marker("needs_toolchain") is not None:
        require_tools("arm-none-eabi-gcc", "qemu-system-arm")


@pytest.fixture(scope="session")
def edgec_cache(tmp_path_factory):
    """A fresh object cache for this test run (so CI starts clean), shared by the xdist workers:
    their base temporary directories are siblings."""
    base = tmp_path_factory.getbasetemp()
    cache = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "edgec-cache"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EDGEC_CACHE_DIR", str(cache))
        yield cache


@pytest.fixture
def small_digits_calib(tmp_path) -> Path:
    """The first 16 digits calibration images: quick to calibrate on, and the verification inputs."""
    path = tmp_path / "calib16.npy"
    np.save(path, np.load(DIGITS / "calib.npy")[:16])
    return path


def compile_and_run(quantized, target, floats, tmp_path: Path, name: str = "m"):
    """`quantized` compiled for `target`, its C directory emitted and run on `floats` (host C or
    QEMU): (compiled, the output bytes, their comparison with the golden simulator's)."""
    from edgec.pipeline import compile_for, emit
    from edgec.tools import verify

    compiled = compile_for(quantized, target)
    emit(compiled, tmp_path / name, name)
    inputs = verify.quantized_inputs(compiled.graph, floats)
    outputs = verify.run_on(compiled, tmp_path / name, name, inputs, tmp_path / "build")
    return compiled, outputs, verify.compare(verify.golden_outputs(compiled.graph, inputs), outputs)
