"""Arm's CMSIS-NN library, linked from the user's checkout (`--kernels cmsis-nn`).

edgec never copies CMSIS-NN: the user names a checkout (`CMSIS_NN_DIR`, or `cmsis_nn_dir`), the
generated directory records its path and commit, and every build (edgec.mk, CMakeLists.txt, verify,
bench) compiles its integer sources from there. The context-buffer sizes come from the same
checkout (edgec.targets.cmsis_nn_build). This module only finds the checkout and names its sources.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from edgec.errors import EdgecError

ENV = "CMSIS_NN_DIR"
CLONE = "git clone https://github.com/ARM-software/CMSIS-NN"
# The integer kernels edgec calls live in these sources; the float ones (_f16, _f32) need build
# options of their own (ARM_NN_ENABLE_F32/F16) and are left out.
FLOAT_SUFFIXES = ("_f16.c", "_f32.c")
SIZE_SOURCES = (
    "ConvolutionFunctions/arm_convolve_get_buffer_sizes_s8.c",
    "ConvolutionFunctions/arm_depthwise_conv_get_buffer_sizes_s8.c",
    "FullyConnectedFunctions/arm_fully_connected_get_buffer_sizes_s8.c",
    "PoolingFunctions/arm_avgpool_get_buffer_sizes_s8.c",
)


def checkout(path: str | os.PathLike | None = None) -> Path:
    """The CMSIS-NN checkout to link: `path`, else $CMSIS_NN_DIR; a clear error if neither names one."""
    where = path if path is not None else os.environ.get(ENV)
    if not where:
        raise EdgecError(f"--kernels cmsis-nn needs a CMSIS-NN checkout: set {ENV}=/path/to/CMSIS-NN ({CLONE})")
    root = Path(where).expanduser().resolve()
    if not (root / "Include" / "arm_nnfunctions.h").is_file() or not (root / "Source").is_dir():
        raise EdgecError(f"{ENV}={where}: not a CMSIS-NN checkout (no Include/arm_nnfunctions.h and Source/)")
    return root


def commit(root: Path) -> str:
    """The checkout's git commit (with '-dirty' if it has local changes), or 'unknown' outside git."""

    def git(*args: str) -> str:
        result = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)
        return result.stdout.strip() if result.returncode == 0 else ""

    head = git("rev-parse", "HEAD")
    if not head:
        return "unknown"
    return head + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def sources(root: Path) -> list[Path]:
    """The checkout's integer kernel sources (what edgec.mk's EDGEC_SRCS adds), in a stable order."""
    return sorted(p for p in (root / "Source").glob("*/*.c") if not p.name.endswith(FLOAT_SUFFIXES))
