"""ctypes bindings to runtime_c/, compiled once per test session into a shared library.

Kernel tests call the real C kernels through these bindings and compare with edgec's golden
numpy kernels byte for byte. The library is built with UBSan so undefined behaviour fails tests.
"""
from __future__ import annotations

import ctypes as C
import subprocess
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "runtime_c"
CFLAGS = ["-std=c99", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-pedantic", "-fPIC", "-shared",
          "-fsanitize=undefined", "-fno-sanitize-recover=undefined"]


class Dims(C.Structure):
    _fields_ = [("n", C.c_int32), ("h", C.c_int32), ("w", C.c_int32), ("c", C.c_int32)]


class PerChannelQuant(C.Structure):
    _fields_ = [("multiplier", C.POINTER(C.c_int32)), ("shift", C.POINTER(C.c_int32))]


class ConvParams(C.Structure):
    _fields_ = [(name, C.c_int32) for name in (
        "input_offset", "output_offset", "stride_h", "stride_w", "pad_top", "pad_left",
        "dilation_h", "dilation_w", "groups", "ch_mult", "act_min", "act_max")]


class FcParams(C.Structure):
    _fields_ = [(name, C.c_int32) for name in (
        "input_offset", "output_offset", "per_channel", "act_min", "act_max")]


class PoolParams(C.Structure):
    _fields_ = [(name, C.c_int32) for name in (
        "stride_h", "stride_w", "pad_top", "pad_left", "filter_h", "filter_w", "act_min", "act_max")]


class AddParams(C.Structure):
    _fields_ = [(name, C.c_int32) for name in (
        "input1_offset", "input1_multiplier", "input1_shift", "input2_offset", "input2_multiplier",
        "input2_shift", "left_shift", "output_offset", "output_multiplier", "output_shift",
        "act_min", "act_max")]


class SoftmaxParams(C.Structure):
    _fields_ = [(name, C.c_int32) for name in ("input_multiplier", "input_left_shift", "diff_min")]


def build_shared_library(out_dir: Path) -> Path:
    sources = sorted(str(p) for p in (RUNTIME / "src").rglob("*.c"))
    lib = out_dir / "libedgec_nn.so"
    subprocess.run(["cc", *CFLAGS, f"-I{RUNTIME / 'include'}", *sources, "-o", str(lib)],
                   check=True, capture_output=True, text=True)
    return lib


def ptr(array: np.ndarray, ctype):
    """Pointer to a C-contiguous numpy array's data (the array must outlive the call)."""
    assert array.flags["C_CONTIGUOUS"]
    return array.ctypes.data_as(C.POINTER(ctype))


def dims(shape) -> Dims:
    return Dims(*[int(v) for v in shape])


def per_channel_quant(multiplier: np.ndarray, shift: np.ndarray, keep: list) -> PerChannelQuant:
    m = np.ascontiguousarray(multiplier, dtype=np.int32)
    s = np.ascontiguousarray(shift, dtype=np.int32)
    keep.extend([m, s])
    return PerChannelQuant(ptr(m, C.c_int32), ptr(s, C.c_int32))


# -- data movement and reductions (edgec.ops.movement; runtime_c/src/movement/) -----------------
MAX_DIMS = 6
DimsArray = C.c_int32 * MAX_DIMS


class CopyDesc(C.Structure):
    _fields_ = [("rank", C.c_int32), ("dims", DimsArray), ("input_strides", DimsArray),
                ("output_strides", DimsArray), ("input_start", C.c_int32), ("output_start", C.c_int32),
                ("input_elements", C.c_int32), ("output_elements", C.c_int32)]


class PadDesc(C.Structure):
    _fields_ = [("rank", C.c_int32), ("input_dims", DimsArray), ("pad_before", DimsArray),
                ("pad_after", DimsArray), ("fill", C.c_int32)]


class UpsampleNearestDesc(C.Structure):
    _fields_ = [(name, C.c_int32) for name in ("batches", "input_h", "input_w", "channels", "scale_h", "scale_w")]


class ResizeBilinearDesc(C.Structure):
    _fields_ = [*[(name, C.c_int32) for name in ("batches", "input_h", "input_w", "channels", "output_h", "output_w")],
                ("y_table", C.POINTER(C.c_int16)), ("x_table", C.POINTER(C.c_int16))]


class ReduceDesc(C.Structure):
    _fields_ = [("op", C.c_int32), ("kept_rank", C.c_int32), ("kept_dims", DimsArray), ("kept_strides", DimsArray),
                ("reduced_rank", C.c_int32), ("reduced_dims", DimsArray), ("reduced_strides", DimsArray),
                *[(name, C.c_int32) for name in ("sum_offset", "multiplier", "shift", "output_offset",
                                                 "act_min", "act_max")]]


def struct_from_desc(cls, desc: dict, keep: list):
    """A ctypes descriptor from an edgec.ops.movement *_desc dict (keys = the struct's fields in
    order): tuples fill the fixed arrays (the rest zero), numpy arrays become pointers (kept alive
    in `keep`)."""
    assert list(desc) == [name for name, _ in cls._fields_], (list(desc), cls._fields_)
    values = []
    for (name, ctype), value in zip(cls._fields_, desc.values()):
        if isinstance(value, np.ndarray):
            array = np.ascontiguousarray(value)
            keep.append(array)
            values.append(array.ctypes.data_as(ctype))
        elif isinstance(value, tuple):
            values.append(DimsArray(*value))
        else:
            values.append(value)
    return cls(*values)
