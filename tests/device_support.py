"""Shared by the tests that build generated code for Cortex-M targets and run it under QEMU."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from edgec import toolchain

ROOT = Path(__file__).resolve().parent.parent
DIGITS = ROOT / "examples" / "digits"
ALL_OPS = f"{ROOT / 'tests' / 'data' / 'models.py'}:all_ops"

needs_toolchain = pytest.mark.skipif(
    toolchain.find_arm_gcc() is None or toolchain.find_qemu() is None,
    reason=f"needs arm-none-eabi-gcc and qemu-system-arm: {toolchain.APT_INSTALL}")


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
