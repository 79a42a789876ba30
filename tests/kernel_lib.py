"""ctypes bindings to runtime_c/, compiled once per test session into a shared library.

Kernel tests call the real C kernels through these bindings and compare with edgec's golden
numpy kernels byte for byte. The library is built with UBSan so undefined behaviour fails tests.
"""

from __future__ import annotations

import ctypes as C
import struct
import subprocess
from pathlib import Path

import numpy as np

from edgec.ops import (
    binary,
    conv,
    conv_transpose,
    depthwise,
    eltwise,
    int16,
    layer_norm,
    linear,
    lut,
    matmul,
    movement,
    pool,
    recurrent,
    softmax,
)
from edgec.ops.kernel import Struct

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "runtime_c"
CFLAGS = [
    "-std=c99",
    "-O1",
    "-g",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-pedantic",
    "-fPIC",
    "-shared",
    "-fsanitize=undefined",
    "-fno-sanitize-recover=undefined",
]


_SCALARS = {
    "int8_t": C.c_int8,
    "uint8_t": C.c_uint8,
    "int16_t": C.c_int16,
    "uint16_t": C.c_uint16,
    "int32_t": C.c_int32,
    "int64_t": C.c_int64,
}


def ctypes_struct(struct: Struct) -> type:
    """The ctypes mirror of a struct of the kernel schema (edgec.ops.kernel), field for field."""
    fields = []
    for field in struct.fields:
        ctype = _SCALARS[field.ctype.removeprefix("const ").rstrip(" *")]
        ctype = C.POINTER(ctype) if field.pointer else ctype
        fields.append((field.name, ctype if field.length is None else ctype * field.length))
    return type(struct.name, (C.Structure,), {"_fields_": fields})


ConvDesc, ConvDspWideDesc = ctypes_struct(conv.CONV_DESC), ctypes_struct(conv.CONV_DSP_WIDE_DESC)
DepthwiseConvDesc = ctypes_struct(depthwise.DEPTHWISE_CONV_DESC)
FullyConnectedS8Desc = ctypes_struct(linear.FULLY_CONNECTED_S8_DESC)
AddS8Desc, ClampS8Desc = (ctypes_struct(s) for s in eltwise.STRUCTS)
Pool2dDesc = ctypes_struct(pool.POOL2D_DESC)
SoftmaxDesc, LogSoftmaxDesc = (ctypes_struct(s) for s in softmax.STRUCTS[:2])
ConvTransposeDesc = ctypes_struct(conv_transpose.CONV_TRANSPOSE_DESC)
CONV_TRANSPOSE_INT_FIELDS = tuple(f.name for f in conv_transpose.CONV_TRANSPOSE_DESC.fields if not f.pointer)
LutDesc, LutChannelsDesc = ctypes_struct(lut.LUT_DESC), ctypes_struct(lut.LUT_CHANNELS_DESC)
BinaryDesc, PreluDesc = ctypes_struct(binary.BINARY_DESC), ctypes_struct(binary.PRELU_DESC)
CopyDesc, PadDesc, UpsampleNearestDesc, ResizeBilinearDesc, ReduceDesc = (ctypes_struct(s) for s in movement.STRUCTS)
(
    ConvS16Desc,
    DepthwiseConvS16Desc,
    FullyConnectedS16Desc,
    BinaryS16Desc,
    PoolS16Desc,
    LutS16Desc,
    SoftmaxS16Desc,
    RequantizeS16Desc,
    SqrtS16Desc,
) = (ctypes_struct(s) for s in int16.STRUCTS)
BatchMatmulDesc, LayerNormDesc = ctypes_struct(matmul.BATCH_MATMUL_DESC), ctypes_struct(layer_norm.LAYER_NORM_DESC)
RecurrentDesc, LstmS16Desc = ctypes_struct(recurrent.RECURRENT_DESC), ctypes_struct(recurrent.LSTM_S16_DESC)


def struct_from_desc(cls, desc: dict, keep: list | None = None):
    """A ctypes descriptor from an edgec *_desc dict (keys = the struct's fields, in order): lists
    and tuples fill the fixed arrays (the rest zero), numpy arrays become pointers (kept alive in
    `keep`), None a NULL pointer."""
    names = [name for name, _ in cls._fields_]
    if list(desc) != names:
        raise ValueError(f"{cls.__name__} fields {names}, got {list(desc)}")
    values = []
    for (name, ctype), value in zip(cls._fields_, desc.values()):
        if isinstance(value, np.ndarray):
            array = np.ascontiguousarray(value, dtype=np.dtype(ctype._type_))
            keep.append(array)
            values.append(array.ctypes.data_as(ctype))
        elif isinstance(value, (list, tuple)):
            values.append(ctype(*[int(v) for v in value]))
        else:
            values.append(None if value is None else int(value))
    return cls(*values)


def build_shared_library(out_dir: Path) -> Path:
    sources = sorted(str(p) for p in (RUNTIME / "src").rglob("*.c"))
    lib = out_dir / "libedgec_nn.so"
    subprocess.run(
        ["cc", *CFLAGS, f"-I{RUNTIME / 'include'}", *sources, "-o", str(lib)],
        check=True,
        capture_output=True,
        text=True,
    )
    return lib


def ptr(array: np.ndarray, ctype):
    """Pointer to a C-contiguous numpy array's data (the array must outlive the call)."""
    assert array.flags["C_CONTIGUOUS"]
    return array.ctypes.data_as(C.POINTER(ctype))


def pack_record(flags: int, desc: dict, int_fields, header_words: int, arrays, align: int) -> bytes:
    """One case of a QEMU kernel driver: a header of header_words int32 (flags, then desc's
    int_fields in order, lists flattened, zero-padded), then each array's bytes padded to `align`
    (the driver's pointer alignment for its widest element)."""
    ints = []
    for name in int_fields:
        value = desc[name]
        ints.extend(value if isinstance(value, list) else [value])
    header = struct.pack(f"<{header_words}i", flags, *ints, *[0] * (header_words - 1 - len(ints)))
    payload = b""
    for array in arrays:
        data = np.ascontiguousarray(array).tobytes()
        payload += data + bytes(-len(data) % align)
    return header + payload
