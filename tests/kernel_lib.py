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



CONV_TRANSPOSE_INT_FIELDS = (
    "batches", "input_h", "input_w", "input_c", "output_h", "output_w", "output_c", "kernel_h", "kernel_w",
    "stride_h", "stride_w", "pad_h", "pad_w", "output_padding_h", "output_padding_w", "dilation_h", "dilation_w",
    "groups", "input_offset", "output_offset", "act_min", "act_max")


class ConvTransposeDesc(C.Structure):
    """edgec_conv_transpose_desc (edgec.ops.conv_transpose.conv_transpose_desc gives the values)."""
    _fields_ = [(name, C.c_int32) for name in CONV_TRANSPOSE_INT_FIELDS] + [
        ("filter", C.POINTER(C.c_int8)), ("bias", C.POINTER(C.c_int32)),
        ("multiplier", C.POINTER(C.c_int32)), ("shift", C.POINTER(C.c_int32))]


class AvgPool2dDesc(C.Structure):
    """edgec_avg_pool2d_desc (edgec.ops.pool.avg_pool2d_desc gives the values)."""
    _fields_ = [(name, C.c_int32) for name in (
        "batches", "input_h", "input_w", "channels", "output_h", "output_w", "filter_h", "filter_w",
        "stride_h", "stride_w", "pad_top", "pad_left", "count_include_pad", "divisor_override",
        "zero_point", "act_min", "act_max")]

# lut family: field names and order as the dicts of edgec.ops.lut.lut_desc,
# edgec.ops.softmax.softmax_axis_desc and log_softmax_desc.
class LutDesc(C.Structure):
    _fields_ = [("size", C.c_int32), ("table", C.POINTER(C.c_int8))]


class SoftmaxDesc(C.Structure):
    _fields_ = [(name, C.c_int32) for name in (
        "outer", "axis_size", "inner", "input_multiplier", "input_left_shift", "diff_min")]


class LogSoftmaxDesc(C.Structure):
    _fields_ = [(name, C.c_int32) for name in (
        "outer", "axis_size", "inner", "input_multiplier", "input_left_shift", "reverse_scaling_divisor",
        "reverse_scaling_right_shift", "diff_min")]

BINARY_MAX_DIMS = 6  # EDGEC_BINARY_MAX_DIMS


def _descriptor_fields(names: tuple[str, ...], arrays: tuple[str, ...]) -> list:
    """ctypes fields of an all-int32 descriptor: names in `arrays` are int32[BINARY_MAX_DIMS]."""
    return [(name, C.c_int32 * BINARY_MAX_DIMS if name in arrays else C.c_int32) for name in names]


class BinaryDesc(C.Structure):
    _fields_ = _descriptor_fields(
        ("op", "num_dims", "dims", "strides1", "strides2", "input1_offset", "input1_multiplier",
         "input1_shift", "input2_offset", "input2_multiplier", "input2_shift", "left_shift",
         "output_offset", "output_multiplier", "output_shift", "act_min", "act_max"),
        ("dims", "strides1", "strides2"))


class PreluDesc(C.Structure):
    _fields_ = _descriptor_fields(
        ("num_dims", "dims", "input_strides", "alpha_strides", "input_offset", "alpha_offset",
         "output_offset", "identity_multiplier", "identity_shift", "alpha_multiplier", "alpha_shift",
         "act_min", "act_max"),
        ("dims", "input_strides", "alpha_strides"))


def descriptor(cls, fields: dict):
    """A ctypes descriptor from a dict of its fields in declaration order (an edgec desc dict):
    the keys must be exactly the struct's fields, in order."""
    names = [name for name, _ in cls._fields_]
    if list(fields) != names:
        raise ValueError(f"{cls.__name__} fields {names}, got {list(fields)}")
    values = []
    for (name, ctype), value in zip(cls._fields_, fields.values()):
        values.append(ctype(*[int(v) for v in value]) if hasattr(ctype, "_length_") else int(value))
    return cls(*values)


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


# -- int16 (16x8) kernels (edgec.ops.int16; runtime_c/src/{conv,depthwise,fc}/*_s16.c) ----------
# Field names and order as the dicts of edgec.ops.int16.*_desc; fill with struct_from_desc
# (a None pointer field stays NULL).
def _s16_fields(ints: tuple[str, ...]) -> list:
    return [*[(name, C.c_int32) for name in ints], ("filter", C.POINTER(C.c_int8)), ("bias", C.POINTER(C.c_int64)),
            ("multiplier", C.POINTER(C.c_int32)), ("shift", C.POINTER(C.c_int32))]


class ConvS16Desc(C.Structure):
    _fields_ = _s16_fields(("batches", "input_h", "input_w", "input_c", "output_h", "output_w", "output_c",
                            "kernel_h", "kernel_w", "stride_h", "stride_w", "pad_top", "pad_left", "dilation_h",
                            "dilation_w", "groups", "act_min", "act_max"))


class DepthwiseConvS16Desc(C.Structure):
    _fields_ = _s16_fields(("batches", "input_h", "input_w", "input_c", "output_h", "output_w", "ch_mult",
                            "kernel_h", "kernel_w", "stride_h", "stride_w", "pad_top", "pad_left", "dilation_h",
                            "dilation_w", "act_min", "act_max"))


class FullyConnectedS16Desc(C.Structure):
    _fields_ = _s16_fields(("batches", "input_c", "output_c", "act_min", "act_max"))


class BinaryS16Desc(C.Structure):
    _fields_ = _descriptor_fields(
        ("num_dims", "dims", "strides1", "strides2", "input1_multiplier", "input1_shift", "input2_multiplier",
         "input2_shift", "left_shift", "output_multiplier", "output_shift", "act_min", "act_max"),
        ("dims", "strides1", "strides2"))


class PoolS16Desc(C.Structure):
    _fields_ = [(name, C.c_int32) for name in (
        "batches", "input_h", "input_w", "channels", "output_h", "output_w", "filter_h", "filter_w",
        "stride_h", "stride_w", "pad_top", "pad_left", "count_include_pad", "divisor_override", "act_min", "act_max")]


class LutS16Desc(C.Structure):
    _fields_ = [("size", C.c_int32), ("table", C.POINTER(C.c_int16))]


class SoftmaxS16Desc(C.Structure):
    _fields_ = [*[(name, C.c_int32) for name in ("outer", "axis_size", "inner", "input_multiplier",
                                                 "input_left_shift")],
                ("exp_lut", C.POINTER(C.c_int16)), ("one_over_one_plus_x_lut", C.POINTER(C.c_int16))]


class RequantizeS16Desc(C.Structure):
    _fields_ = [(name, C.c_int32) for name in ("size", "input_offset", "multiplier", "shift", "output_offset")]
# -- attention family: batch matmul, layer norm (edgec.ops.matmul / layer_norm) -------------------
MATMUL_MAX_BATCH_DIMS = 4
BatchDimsArray = C.c_int32 * MATMUL_MAX_BATCH_DIMS


class BatchMatmulDesc(C.Structure):
    _fields_ = [("batch_rank", C.c_int32), ("batch_dims", BatchDimsArray), ("lhs_batch_strides", BatchDimsArray),
                ("rhs_batch_strides", BatchDimsArray),
                *[(name, C.c_int32) for name in ("rows", "cols", "depth", "rhs_depth_stride", "rhs_col_stride",
                                                 "lhs_offset", "rhs_offset", "output_offset", "multiplier", "shift",
                                                 "act_min", "act_max")]]


class LayerNormDesc(C.Structure):
    _fields_ = [*[(name, C.c_int32) for name in ("rows", "features", "eps_term_hi", "eps_term_lo", "shift",
                                                 "output_offset", "act_min", "act_max")],
                ("scale", C.POINTER(C.c_int32)), ("offset_hi", C.POINTER(C.c_int32)),
                ("offset_lo", C.POINTER(C.c_int32))]


def attention_struct(cls, desc: dict, keep: list):
    """A ctypes descriptor from an edgec.ops.matmul / layer_norm *_desc dict (keys = the struct's
    fields in order): tuples fill the fixed arrays, numpy arrays become int32 pointers (kept alive
    in `keep`)."""
    assert list(desc) == [name for name, _ in cls._fields_], (list(desc), cls._fields_)
    values = []
    for (name, ctype), value in zip(cls._fields_, desc.values()):
        if isinstance(value, np.ndarray):
            array = np.ascontiguousarray(value, dtype=np.int32)
            keep.append(array)
            values.append(array.ctypes.data_as(ctype))
        elif isinstance(value, tuple):
            values.append(ctype(*value))
        else:
            values.append(int(value))
    return cls(*values)


# -- recurrent cells (edgec.ops.recurrent; runtime_c/src/recurrent/) --------------------
class RecurrentDesc(C.Structure):
    _fields_ = [*[(name, C.c_int32) for name in ("cell", "batches", "time_steps", "input_size", "hidden_size",
                                                 "time_major", "reset_state")],
                ("input_weights", C.POINTER(C.c_int8)), ("hidden_weights", C.POINTER(C.c_int8)),
                ("input_bias", C.POINTER(C.c_int32)), ("hidden_bias", C.POINTER(C.c_int32)),
                *[(name, C.c_int32 * 4) for name in ("input_multiplier", "input_shift", "hidden_multiplier",
                                                     "hidden_shift")],
                *[(name, C.c_int32) for name in ("forget_cell_multiplier", "forget_cell_shift", "input_cell_multiplier",
                                                 "input_cell_shift", "cell_tanh_shift", "output_multiplier",
                                                 "output_shift", "output_offset", "hidden_q15_multiplier",
                                                 "hidden_q15_shift", "last_step_only", "tanh_linear")],
                ("sigmoid_table", C.POINTER(C.c_uint16))]


def recurrent_struct(desc: dict, keep: list) -> RecurrentDesc:
    """A ctypes RecurrentDesc from an edgec.ops.recurrent.recurrent_desc dict (pointer
    fields kept alive in `keep`; the per-gate lists fill the int32[4] arrays)."""
    assert list(desc) == [name for name, _ in RecurrentDesc._fields_], list(desc)
    values = []
    for (name, ctype), value in zip(RecurrentDesc._fields_, desc.values()):
        if isinstance(value, np.ndarray):
            array = np.ascontiguousarray(value)
            keep.append(array)
            values.append(array.ctypes.data_as(ctype))
        elif isinstance(value, (list, tuple)):
            values.append(ctype(*[int(v) for v in value]))
        else:
            values.append(int(value))
    return RecurrentDesc(*values)
