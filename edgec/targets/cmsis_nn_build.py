"""Building the user's CMSIS-NN checkout (edgec.targets.cmsis_nn finds it): its integer kernels for the
target, and its `*_get_buffer_size_{dsp,mve}` functions (exactly what the kernels will need on the
core) compiled for the host into a small library and called through ctypes at compile time, so no
size formula is copied by hand.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import subprocess
from pathlib import Path

from edgec.errors import EdgecError
from edgec.targets import toolchain
from edgec.targets.cmsis_nn import SIZE_SOURCES, sources


def objects(target, root: Path) -> list[Path]:
    """The library compiled for `target` at its cmsis_nn_opt (-O2, or -Ofast as Arm recommends for
    CMSIS-NN), cached like edgec's own objects. Without -Werror: the warnings are Arm's, and its
    code is not edgec's to change."""
    return toolchain.compile_objects(target, sources(root), include_dirs=[root / "Include"], opt=target.cmsis_nn_opt)


# -- context-buffer sizes, from the checkout's own functions --------------------------------------


class Tile(ctypes.Structure):
    _fields_ = [("w", ctypes.c_int32), ("h", ctypes.c_int32)]


class Activation(ctypes.Structure):
    _fields_ = [("min", ctypes.c_int32), ("max", ctypes.c_int32)]


class Dims(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int32), ("h", ctypes.c_int32), ("w", ctypes.c_int32), ("c", ctypes.c_int32)]


class ConvParams(ctypes.Structure):
    _fields_ = [
        ("input_offset", ctypes.c_int32),
        ("output_offset", ctypes.c_int32),
        ("stride", Tile),
        ("padding", Tile),
        ("dilation", Tile),
        ("activation", Activation),
    ]


class DwConvParams(ctypes.Structure):
    _fields_ = [
        ("input_offset", ctypes.c_int32),
        ("output_offset", ctypes.c_int32),
        ("ch_mult", ctypes.c_int32),
        ("stride", Tile),
        ("padding", Tile),
        ("dilation", Tile),
        ("activation", Activation),
    ]


def _size_library(root: Path) -> ctypes.CDLL:
    """The checkout's get_buffer_size sources as a host shared library, built once per content."""
    files = [root / "Source" / name for name in SIZE_SOURCES]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise EdgecError(f"{root}: CMSIS-NN checkout without {missing[0]} (edgec needs CMSIS-NN 6.0 or newer)")
    key = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:24]
    library = toolchain.default_cache_dir() / "cmsis_nn" / f"buffer_sizes-{key}.so"
    if not library.exists():
        library.parent.mkdir(parents=True, exist_ok=True)
        partial = library.with_suffix(f".{os.getpid()}.tmp")
        command = [
            toolchain.require_host_cc(),
            "-std=c99",
            "-O1",
            "-fPIC",
            "-shared",
            f"-I{root / 'Include'}",
            *map(str, files),
            "-o",
            str(partial),
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise EdgecError(
                f"building CMSIS-NN's buffer-size functions from {root} failed: "
                f"{(result.stderr.strip().splitlines() or [''])[0]}"
            )
        os.replace(partial, library)
    return ctypes.CDLL(str(library))


@functools.cache
def _sizes(root: Path) -> ctypes.CDLL:
    return _size_library(root)


def _variant(target) -> str:
    """Which of CMSIS-NN's code paths the kernels compile to on `target` (as its get_buffer_size
    functions name them): Helium, the DSP extension, or plain C ('' : the host-compiled default,
    which is plain C)."""
    return "_mve" if target.mve else "_dsp" if target.dsp else ""


def _call(root: Path, name: str, target, *args) -> int:
    function = getattr(_sizes(root), name + _variant(target))
    function.restype = ctypes.c_int32
    return int(function(*args))


def dims(shape) -> Dims:
    return Dims(*(int(v) for v in shape))


def conv_buffer_bytes(
    root: Path, target, params: ConvParams, input_dims: Dims, filter_dims: Dims, output_dims: Dims
) -> int:
    """arm_convolve_wrapper_s8's context buffer on `target`."""
    return _call(
        root,
        "arm_convolve_wrapper_s8_get_buffer_size",
        target,
        ctypes.byref(params),
        ctypes.byref(input_dims),
        ctypes.byref(filter_dims),
        ctypes.byref(output_dims),
    )


def depthwise_buffer_bytes(
    root: Path, target, params: DwConvParams, input_dims: Dims, filter_dims: Dims, output_dims: Dims
) -> int:
    """arm_depthwise_conv_wrapper_s8's context buffer on `target`."""
    return _call(
        root,
        "arm_depthwise_conv_wrapper_s8_get_buffer_size",
        target,
        ctypes.byref(params),
        ctypes.byref(input_dims),
        ctypes.byref(filter_dims),
        ctypes.byref(output_dims),
    )


def fully_connected_buffer_bytes(root: Path, target, filter_dims: Dims) -> int:
    """arm_fully_connected_s8's context buffer on `target` (Helium: the per-row kernel sums)."""
    return _call(root, "arm_fully_connected_s8_get_buffer_size", target, ctypes.byref(filter_dims))


def avgpool_buffer_bytes(root: Path, target, output_width: int, channels: int) -> int:
    """arm_avgpool_s8's context buffer on `target`."""
    return _call(root, "arm_avgpool_s8_get_buffer_size", target, ctypes.c_int(output_width), ctypes.c_int(channels))
