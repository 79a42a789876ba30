"""The Cortex-M DSP (SMLAD) and Helium (MVE) kernels against the golden kernels, byte for byte.

Those paths only compile for Arm, so tests/data/port/packed_kernels.c runs them under QEMU: many
random cases (odd channel counts, tails, padding, dilation, extreme zero points, multipliers and
shifts, including those outside the short requantization) go in one file, with their constants
laid out by the same edgec.ops.kernel_layout functions code generation uses, and come back in
another. Guard bytes after every output and scratch buffer catch writes past them, and each
scratch buffer is exactly the size the op unit declares to the planner.

The kernels are built at -O2 (what edgec's builds use) and, on a fifth of the cases, at -Os and
-O0: optimised builds (__OPTIMIZE__, -Os included) run the hand-written assembly loops, -O0 builds
their C fallbacks, which must agree too.
"""

from __future__ import annotations

import dataclasses
import itertools
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from edgec.ir import Graph, Op, Tensor
from edgec.numerics import quantize_multiplier
from edgec.ops.conv import (
    CONV_BLOCKING,
    CONV_DESC,
    CONV_DSP_WIDE_1X1X8_SCRATCH,
    conv2d_s8,
    conv_output_size,
    mve_filter_rows,
    packed_conv_scratch_bytes,
    window_first_pixels,
)
from edgec.ops.conv import UNIT as CONV
from edgec.ops.depthwise import (
    DEPTHWISE_CONV_DESC,
    depthwise_conv2d_s8,
    packed_depthwise_bias,
    packed_depthwise_filter,
)
from edgec.ops.depthwise import UNIT as DEPTHWISE
from edgec.ops.eltwise import ADD_SCRATCH_BYTES, add_desc, add_params, add_s8
from edgec.ops.kernel_layout import (
    DSP,
    MVE,
    RowBlocking,
    blocked_bias,
    dsp_channel_table,
    folded_bias,
    interleave_rows,
    widen_taps,
)
from edgec.ops.linear import fc_packed_filter, fully_connected_s8
from edgec.ops.pool import avg_pool2d_s8, max_pool2d_s8, pool2d_desc
from edgec.pipeline import compile_model, emit
from edgec.targets import toolchain
from edgec.targets.cores import Target, get_target
from tests.data.models import all_ops_samples
from tests.device_support import ALL_OPS, ROOT, needs_toolchain, require_tools

DRIVER = ROOT / "tests" / "data" / "port" / "packed_kernels.c"
RUNTIME = ROOT / "runtime_c"
SOURCES = [
    RUNTIME / "src" / f
    for f in (
        "conv/edgec_conv_s8.c",
        "conv/edgec_conv_s8_dsp.c",
        "conv/edgec_conv_s8_mve.c",
        "conv/edgec_conv_1x1_s8.c",
        "fc/edgec_fully_connected_s8.c",
        "eltwise/edgec_add_s8.c",
        "depthwise/edgec_depthwise_conv_s8_packed.c",
        "depthwise/edgec_depthwise_conv_s8_packed_dsp.c",
        "depthwise/edgec_depthwise_conv_s8_packed_dsp_wide.c",
        "depthwise/edgec_depthwise_conv_s8_packed_mve.c",
        "depthwise/edgec_depthwise_conv_s8_packed_portable.c",
        "pool/edgec_avgpool_s8.c",
        "pool/edgec_maxpool_s8.c",
    )
]
KIND = {"conv": 1, "fc": 2, "add": 3, "depthwise": 5, "avgpool": 6, "maxpool": 7}
WIDE = "dsp_wide"  # edgec_conv_s8_dsp_wide, edgec_fully_connected_s8_dsp_wide (--opt speed)
WIDE_1X1X8 = "dsp_wide_1x1x8"  # edgec_conv_s8_dsp_wide_1x1x8: WIDE's layout, its own scratch
ISA_CODE = {DSP: 1, MVE: 2, WIDE: 3, WIDE_1X1X8: 4}
HEADER_WORDS = 48
# Header words of a conv / depthwise record before its extra words (in_place, input_at, ...): the
# descriptor's int32 fields (the driver copies them into its edgec_conv_desc / _depthwise_conv_desc).
CONV_INTS = sum(not f.pointer for f in CONV_DESC.fields)
DEPTHWISE_INTS = sum(not f.pointer for f in DEPTHWISE_CONV_DESC.fields)
ARG_ERROR = -1
GUARD_BYTE = 0x5A  # the driver's GUARD_VALUE: it fills every output and scratch buffer with it first
ISAS = {"cortex-m4": (DSP, WIDE), "cortex-m55": (MVE, DSP)}
CASES = {"conv": 400, "fc": 200, "add": 160, "pointwise": 300, "depthwise": 300, "avgpool": 150, "maxpool": 150}
# Optimisation levels and the share of CASES each runs: -Os takes the assembly paths like -O2,
# -O0 the C fallbacks.
OPT_LEVELS = {"-O2": 1, "-Os": 5, "-O0": 5}


@dataclass
class Case:
    kind: str
    isa: str
    fields: list[int]  # the kernel's header words
    arrays: list[np.ndarray]
    expected: np.ndarray  # int8 output (the size of the output buffer for an argument error)
    scratch_bytes: int
    scratch_skew: int = 0  # 1: a misaligned scratch pointer, which the kernel must refuse
    status: int = 0

    def record(self) -> bytes:
        payload = b"".join(_padded(np.ascontiguousarray(a).tobytes()) for a in self.arrays)
        header = [
            KIND[self.kind],
            ISA_CODE[self.isa],
            len(payload),
            self.expected.size,
            self.scratch_bytes,
            self.scratch_skew,
            *self.fields,
        ]
        return struct.pack(f"<{HEADER_WORDS}i", *header, *[0] * (HEADER_WORDS - len(header))) + payload


def _padded(data: bytes) -> bytes:
    return data + bytes(-len(data) % 4)


# --- random arguments ------------------------------------------------------------------------


def zero_point(rng) -> int:
    return int(rng.choice([-128, 127, 0, int(rng.integers(-128, 128))]))


def act_bounds(rng) -> tuple[int, int]:
    lo, hi = sorted(int(v) for v in rng.integers(-128, 128, 2))
    return [(-128, 127), (lo, 127), (lo, hi)][int(rng.integers(3))]


def multipliers(rng, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(multiplier, shift) pairs, mostly realistic, some that need the general requantization:
    exact powers of two (multiplier 2^30), shifts of -1 or more, or below -24, and some at the
    limits (multipliers 2^31 - 1 and 2^30, shifts -31, 30 and 31)."""
    style = int(rng.integers(5))
    if style == 4:
        return (
            rng.choice(np.array([2**31 - 1, 2**30], dtype=np.int32), count),
            rng.choice(np.array([-31, -24, -2, -1, 0, 30, 31], dtype=np.int32), count),
        )
    if style == 0:
        real = 2.0 ** rng.uniform(-14, -1, count)
    elif style == 1:
        real = 2.0 ** rng.integers(-20, -1, count).astype(np.float64)
    elif style == 2:
        real = 2.0 ** rng.uniform(-30, 1.5, count)
    else:
        real = 2.0 ** rng.uniform(-26, -24, count)
    pairs = [quantize_multiplier(float(v)) for v in real]
    return (np.array([m for m, _ in pairs], dtype=np.int32), np.array([s for _, s in pairs], dtype=np.int32))


def short_multipliers(rng, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(multiplier, shift) pairs that all admit the DSP kernels' short requantization (multiplier
    >= 2^30, shift -2..-24): a layer whose every channel pair runs the assembly routines."""
    pairs = [quantize_multiplier(float(v)) for v in 2.0 ** rng.uniform(-24, -2.5, count)]
    return (np.array([m for m, _ in pairs], dtype=np.int32), np.array([s for _, s in pairs], dtype=np.int32))


def bias_values(rng, count: int) -> np.ndarray | None:
    """No bias, typical biases, or (one case in ten) biases at the int32 limits, where the folded
    bias and the sums wrap modulo 2^32 as the golden's."""
    style = rng.random()
    if style < 0.2:
        return None
    if style < 0.3:
        return rng.choice(np.array([-(2**31), -(2**31) + 1, 2**31 - 2, 2**31 - 1], dtype=np.int32), count)
    return rng.integers(-(2**20), 2**20, count).astype(np.int32)


def int8_array(rng, shape) -> np.ndarray:
    if rng.random() < 0.1:
        return rng.choice(np.array([-128, 127], dtype=np.int8), shape)
    return rng.integers(-128, 128, shape, dtype=np.int8)


# --- cases -----------------------------------------------------------------------------------


def _padded_image(rng, kernel, stride, dilation):
    """(pad, pad_end, (n, h, w), out_hw) drawn for a window: pads below the kernel size, a small
    image, and its output size (None when the window does not fit)."""
    pad = tuple(int(rng.integers(0, k)) for k in kernel)
    pad_end = tuple(int(rng.integers(0, k)) for k in kernel)
    n, h, w = int(rng.integers(1, 3)), int(rng.integers(1, 11)), int(rng.integers(1, 11))
    try:
        out_hw = tuple(
            conv_output_size(size, k, s, p, e, d)
            for size, k, s, p, e, d in zip((h, w), kernel, stride, pad, pad_end, dilation)
        )
    except ValueError:
        out_hw = None
    return pad, pad_end, (n, h, w), out_hw


def conv_case(rng, isa: str) -> Case:
    while True:
        c_in = int(rng.choice([1, 2, 3, 4, 5, 7, 8, 12, 16, 17]))
        kh, kw = (int(v) for v in rng.integers(1, 6, 2))
        if rng.random() < 0.15:  # a first convolution: the DSP kernel's constant-size im2col (dsp_stem_row)
            c_in, kh, kw = int(rng.integers(1, 4)), 3, 3
        stride, dilation = tuple(int(v) for v in rng.integers(1, 4, 2)), tuple(int(v) for v in rng.integers(1, 3, 2))
        pad, pad_end, (n, h, w), out_hw = _padded_image(rng, (kh, kw), stride, dilation)
        if out_hw is not None:
            break
    return _conv_case(
        rng,
        isa,
        int8_array(rng, (n, h, w, c_in)),
        int8_array(rng, (int(rng.integers(1, 14)), kh, kw, c_in)),
        stride,
        dilation,
        (*pad, *pad_end),
        out_hw,
    )


def pointwise_case(rng, isa: str) -> Case:
    """A 1x1 conv (edgec runs those on the generic packed kernels too): wider channel counts,
    any stride, the output the whole input or cropped."""
    c_in = int(rng.choice([1, 3, 4, 5, 15, 16, 17, 33, int(rng.integers(1, 80))]))
    c_out = int(rng.choice([1, 2, 3, 4, 5, 7, 8, 13, 16, int(rng.integers(1, 70))]))
    n, h, w = int(rng.integers(1, 3)), int(rng.integers(1, 7)), int(rng.integers(1, 7))
    stride = tuple(int(v) for v in rng.choice([1, 1, 2, 3], 2))
    out_hw = tuple((size - 1) // s + 1 - int(rng.random() < 0.2 and size > s) for size, s in zip((h, w), stride))
    return _conv_case(
        rng,
        isa,
        int8_array(rng, (n, h, w, c_in)),
        int8_array(rng, (c_out, 1, 1, c_in)),
        stride,
        (1, 1),
        (0, 0, 0, 0),
        out_hw,
    )


def _conv_case(rng, isa: str, x, weights, stride, dilation, pad, out_hw, act=None, in_place=None) -> Case:
    """edgec_conv_s8_dsp/_mve on x and weights with random quantization (`act`: these activation
    bounds and short requantizations only); half the time (`in_place`: always or never) in place:
    the output over its input at the planner's offset (Conv2d.in_place), at the lowest offset the
    packed kernels' contract (edgec_nn.h) allows, or apart from it."""
    n, h, w, c_in = x.shape
    c_out, kh, kw, _ = weights.shape
    bias = bias_values(rng, c_out)
    m, s = multipliers(rng, c_out) if act is None else short_multipliers(rng, c_out)
    zp_in, zp_out = zero_point(rng), zero_point(rng)
    act_min, act_max = act_bounds(rng) if act is None else act
    expected = conv2d_s8(
        x,
        weights,
        bias,
        m,
        s,
        input_zp=zp_in,
        output_zp=zp_out,
        stride=stride,
        pad=pad[:2],
        dilation=dilation,
        out_hw=out_hw,
        act_min=act_min,
        act_max=act_max,
    )
    rows = weights.reshape(c_out, -1)
    quant = dict(input_offset=-zp_in, output_offset=zp_out, act_min=act_min, act_max=act_max)
    geometry = _geometry(x.shape, out_hw, (kh, kw), stride, pad, dilation)
    fields = desc_words(CONV_DESC, **geometry, **quant, output_c=c_out, groups=1)
    family = DSP if isa in (WIDE, WIDE_1X1X8) else isa
    packed = interleave_rows(mve_filter_rows(weights) if family == MVE else rows, CONV_BLOCKING[family])
    folded = blocked_bias(bias, rows, zp_in, CONV_BLOCKING[family].rows)
    if isa in (WIDE, WIDE_1X1X8):
        packed, folded = widen_taps(packed), dsp_channel_table(folded, m, s, zp_out)
    arrays = [x, packed, folded, m, s]
    scratch = packed_conv_scratch_bytes(family, weights.shape)
    if isa == WIDE_1X1X8:
        scratch = max(scratch, CONV_DSP_WIDE_1X1X8_SCRATCH.value())
    if not in_place if in_place is not None else rng.random() < 0.5:
        return Case("conv", isa, fields + [0, 0, 0], arrays, expected, scratch)
    op, graph = _conv_op(x.shape, weights, stride, expected.shape, pad, dilation)
    op.attrs["isa"] = family
    op.attrs["wide"] = isa == WIDE_1X1X8  # the layers edgec build gives that kernel, and their scratch
    [planned] = CONV.in_place(op, graph, None)
    first = window_first_pixels(x.shape, expected.shape, stride, pad)
    lowest = int((np.arange(len(first)) * c_out - first * c_in).max())  # the packed kernels' bound
    assert planned.scratch_bytes == scratch and planned.input_offset >= lowest
    offset = [planned.input_offset, lowest, -x.size][int(rng.integers(3))]
    input_at, output_at, block = in_place_block(x, expected, offset)
    return Case("conv", isa, fields + [1, input_at, output_at], arrays, block, scratch)


def desc_field(case: Case, name: str) -> int:
    """Descriptor field `name` of a conv, pointwise or depthwise case (its header words)."""
    struct = DEPTHWISE_CONV_DESC if case.kind == "depthwise" else CONV_DESC
    return case.fields[[f.name for f in struct.fields if not f.pointer].index(name)]


def desc_words(struct, **values) -> list[int]:
    """A descriptor's (edgec.ops.kernel.Struct) int32 fields as header words, in its order: the
    driver copies them into the C struct."""
    return [int(values[f.name]) for f in struct.fields if not f.pointer]


def _geometry(x_shape, out_hw, kernel, stride, pad, dilation) -> dict:
    n, h, w, c = x_shape
    return dict(
        batches=n,
        input_h=h,
        input_w=w,
        input_c=c,
        output_h=out_hw[0],
        output_w=out_hw[1],
        kernel_h=kernel[0],
        kernel_w=kernel[1],
        stride_h=stride[0],
        stride_w=stride[1],
        pad_top=pad[0],
        pad_left=pad[1],
        dilation_h=dilation[0],
        dilation_w=dilation[1],
    )


def in_place_block(x: np.ndarray, output: np.ndarray, input_offset: int) -> tuple[int, int, np.ndarray]:
    """(input_at, output_at, expected block) for a kernel run with its input starting
    `input_offset` bytes after its output inside one guard-filled block: afterwards the block
    holds the output, the input's bytes the output does not cover, and guard bytes elsewhere."""
    low, high = min(0, input_offset), max(output.size, input_offset + x.size)
    input_at, output_at = input_offset - low, -low
    block = np.full(high - low, GUARD_BYTE, dtype=np.int8)
    block[input_at : input_at + x.size] = x.ravel()
    block[output_at : output_at + output.size] = output.ravel()
    return input_at, output_at, block


def fc_case(rng, isa: str) -> Case:
    batches = int(rng.integers(1, 4))
    in_size = int(rng.choice([1, 3, 4, 15, 16, 17, 33, int(rng.integers(1, 300))]))
    # 48 outputs or more: the DSP kernel widens the input row once (8 whole blocks of 6)
    out_size = int(rng.integers(1, 21)) if rng.random() < 0.8 else int(rng.integers(48, 61))
    per_channel = bool(rng.random() < 0.7)
    x = int8_array(rng, (batches, in_size))
    weights = int8_array(rng, (out_size, in_size))
    bias = bias_values(rng, out_size)
    m, s = multipliers(rng, out_size if per_channel else 1)
    zp_in, zp_out = zero_point(rng), zero_point(rng)
    act_min, act_max = act_bounds(rng)
    scalar_or_array = (lambda v: v) if per_channel else (lambda v: int(v[0]))
    expected = fully_connected_s8(
        x,
        weights,
        bias,
        scalar_or_array(m),
        scalar_or_array(s),
        input_zp=zp_in,
        output_zp=zp_out,
        act_min=act_min,
        act_max=act_max,
    )
    fields = [batches, in_size, out_size, -zp_in, zp_out, int(per_channel), act_min, act_max]  # the desc's
    packed = fc_packed_filter(weights, DSP if isa == WIDE else isa, wide=isa == WIDE)
    arrays = [x, widen_taps(packed) if isa == WIDE else packed, folded_bias(bias, weights, zp_in), m, s]
    return Case("fc", isa, fields, arrays, expected, scratch_bytes=0)


def depthwise_case(
    rng,
    isa: str,
    strides: tuple[int, ...] = (1, 1, 2, 3),
    channels=None,
    square=0.6,
    dilations=(1, 1, 1, 2),
    mults=None,
) -> Case:
    """edgec_depthwise_conv_s8_packed and _in_place (the build's -mcpu picks the path: DSP on
    cortex-m4, Helium on cortex-m55): the plain kernel apart from its input, over it at the
    planner's unstaged offset (DepthwiseConv2d.in_place) and at the lowest multiple of C its
    contract allows; the _in_place kernel at the staged form's offset, head-aligned, or apart.
    Mostly 3x3 with channel counts around the 4-channel group, so full groups, tails,
    borders and every row phase occur; some other windows, strides (drawn from `strides`),
    dilations and pads. `channels`, `square` (the share of 3x3 windows), `dilations` and `mults`
    (the multiplier maker) narrow the draw to a path."""
    while True:
        c = int(rng.choice(channels or [1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17, int(rng.integers(1, 40))]))
        kh, kw = (3, 3) if rng.random() < square else tuple(int(v) for v in rng.integers(1, 6, 2))
        stride = tuple(int(v) for v in rng.choice(list(strides), 2))
        dilation = tuple(int(v) for v in rng.choice(list(dilations), 2))
        pad, pad_end, (n, h, w), out_hw = _padded_image(rng, (kh, kw), stride, dilation)
        if out_hw is not None:
            break
    x = int8_array(rng, (n, h, w, c))
    weights = int8_array(rng, (1, kh, kw, c))
    bias = bias_values(rng, c)
    m, s = (mults or multipliers)(rng, c)
    zp_in, zp_out = zero_point(rng), zero_point(rng)
    act_min, act_max = act_bounds(rng)
    golden = depthwise_conv2d_s8(
        x,
        weights,
        bias,
        m,
        s,
        input_zp=zp_in,
        output_zp=zp_out,
        stride=stride,
        pad=pad,
        dilation=dilation,
        out_hw=out_hw,
        act_min=act_min,
        act_max=act_max,
    )
    graph = Graph(inputs=["x"], outputs=["y"])
    graph.add_tensor(Tensor("x", x.shape))
    graph.add_tensor(Tensor("y", golden.shape))
    op = Op(
        "layer",
        "depthwise_conv2d",
        ["x"],
        ["y"],
        dict(weight=weights, ch_mult=1, stride=stride, pad=pad, dilation=dilation, isa=isa),
    )
    unstaged, staged = DEPTHWISE.in_place(op, graph, None)
    tightest = DEPTHWISE._unstaged(op, graph.tensors["x"], graph.tensors["y"], c, 0).input_offset
    plain, offset = [
        (True, -x.size),
        (True, unstaged.input_offset),
        (True, tightest),
        (False, staged.input_offset),
        (False, 0),
        (False, -x.size),
    ][int(rng.integers(6))]
    input_at, output_at, block = in_place_block(x, golden, offset)
    quant = dict(input_offset=-zp_in, output_offset=zp_out, act_min=act_min, act_max=act_max)
    geometry = _geometry(x.shape, out_hw, (kh, kw), stride, pad, dilation)
    fields = desc_words(DEPTHWISE_CONV_DESC, **geometry, **quant, ch_mult=1) + [1, input_at, output_at, int(plain)]
    arrays = [x, packed_depthwise_filter(weights), packed_depthwise_bias(bias, weights, zp_in), m, s]
    scratch = unstaged.scratch_bytes if plain else staged.scratch_bytes
    return Case("depthwise", isa, fields, arrays, block, scratch)


def right_shift_multipliers(rng, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(multiplier, shift) pairs with no left shift, as Helium's 8-channel depthwise path takes
    them: realistic ones (all shifts < 0), some with shift 0 or at the limits (multipliers
    2^31 - 1 and 2^30, shifts 0 and -31), and one case in eight with one channel's shift > 0."""
    style = int(rng.integers(8))
    if style == 0:
        return (
            rng.choice(np.array([2**31 - 1, 2**30], dtype=np.int32), count),
            rng.choice(np.array([-31, -24, -1, 0], dtype=np.int32), count),
        )
    real = 2.0 ** rng.uniform(-30, -0.01 if style == 1 else -1, count)
    if style == 2:
        real[int(rng.integers(count))] = 2.0 ** rng.uniform(0.5, 3)
    pairs = [quantize_multiplier(float(v)) for v in real]
    return (np.array([m for m, _ in pairs], dtype=np.int32), np.array([s for _, s in pairs], dtype=np.int32))


def octet_depthwise_case(rng, isa: str) -> Case:
    """Helium's 8-channel depthwise path (3x3, undilated, stride_w 1 or 2, no left shift among
    8 channels): channel counts of whole octets and with a 4-channel or shorter tail, strides 1
    and 2 (and 3 vertically), every pad; else as depthwise_case."""
    return depthwise_case(
        rng,
        isa,
        strides=(1, 1, 2, 3),
        channels=[8, 8, 12, 13, 16, 20, 24, 64, int(rng.integers(8, 41))],
        square=0.9,
        dilations=(1, 1, 1, 1, 1, 2),
        mults=right_shift_multipliers,
    )


def _conv_op(input_shape, weights, stride, out_shape, pad=(0, 0, 0, 0), dilation=(1, 1)) -> tuple[Op, Graph]:
    """The IR op the planner and Conv2d's hooks see for a convolution."""
    graph = Graph(inputs=["x"], outputs=["y"])
    graph.add_tensor(Tensor("x", input_shape))
    graph.add_tensor(Tensor("y", out_shape))
    op = Op(
        "layer",
        "conv2d",
        ["x"],
        ["y"],
        dict(weight=weights, stride=stride, pad=pad, dilation=dilation, groups=1, isa=DSP),
    )
    graph.ops = [op]
    return op, graph


def add_case(rng, isa: str) -> Case:
    size = int(rng.choice([0, 1, 3, 4, 5, 64, 257, int(rng.integers(1, 600))]))
    x1, x2 = int8_array(rng, size), int8_array(rng, size)
    if rng.random() < 0.75:
        s1, s2, s_out = 2.0 ** rng.uniform(-10, 0, 3)
        if rng.random() < 0.3:
            s2 = s_out = s1  # equal scales: the output multiplier is exactly 2^30
        params = add_params(s1, zero_point(rng), s2, zero_point(rng), s_out, zero_point(rng), *act_bounds(rng))
    else:  # any valid parameters, e.g. left shifts of the sum or no headroom at all
        params = dict(
            zip(
                (
                    "input1_offset",
                    "input1_multiplier",
                    "input1_shift",
                    "input2_offset",
                    "input2_multiplier",
                    "input2_shift",
                    "left_shift",
                    "output_offset",
                    "output_multiplier",
                    "output_shift",
                ),
                (
                    -zero_point(rng),
                    int(rng.integers(0, 2**31)),
                    int(rng.integers(-31, 8)),
                    -zero_point(rng),
                    int(rng.integers(0, 2**31)),
                    int(rng.integers(-31, 8)),
                    int(rng.integers(0, 24)),
                    zero_point(rng),
                    int(rng.integers(0, 2**31)),
                    int(rng.integers(-31, 8)),
                ),
            )
        )
        params["act_min"], params["act_max"] = act_bounds(rng)
    expected = add_s8(x1, x2, params)
    return Case("add", isa, list(add_desc(size, params).values()), [x1, x2], expected, ADD_SCRATCH_BYTES)


def avgpool_case(rng, isa: str) -> Case:
    """edgec_avgpool_s8, whose Helium path the build's -mcpu picks: channel counts around its
    four lanes, windows with padding (excluded from the count) and global pools."""
    c = int(rng.choice([1, 2, 3, 4, 5, 7, 8, 16, 17, 64]))
    n, h, w = int(rng.integers(1, 3)), int(rng.integers(1, 9)), int(rng.integers(1, 9))
    if rng.random() < 0.3:
        kernel, stride, pad, out_hw = (h, w), (1, 1), (0, 0), (1, 1)
    else:
        kernel = tuple(int(v) for v in rng.integers(1, 4, 2))
        stride = tuple(int(v) for v in rng.integers(1, 3, 2))
        pad = tuple(int(rng.integers(0, k)) for k in kernel)
        out_hw = tuple((size + p - 1) // s + 1 for size, p, s in zip((h, w), pad, stride))  # last window starts inside
    x = int8_array(rng, (n, h, w, c))
    act_min, act_max = act_bounds(rng)
    expected = avg_pool2d_s8(x, kernel=kernel, stride=stride, pad=pad, out_hw=out_hw, act_min=act_min, act_max=act_max)
    desc = pool2d_desc(x.shape, kernel=kernel, stride=stride, pad=pad, out_hw=out_hw, act_min=act_min, act_max=act_max)
    return Case("avgpool", isa, list(desc.values()), [x], expected, 0)


def maxpool_case(rng, isa: str) -> Case:
    """edgec_maxpool_s8, whose Helium (16 channels) or DSP (8 and 4 channels) path the build's -mcpu
    picks: channel counts around those blocks and their tails, windows with padding."""
    c = int(rng.choice([1, 3, 4, 5, 8, 12, 13, 16, 17, 31, 40]))
    n, h, w = int(rng.integers(1, 3)), int(rng.integers(1, 9)), int(rng.integers(1, 9))
    kernel = tuple(int(v) for v in rng.integers(1, 4, 2))
    stride = tuple(int(v) for v in rng.integers(1, 3, 2))
    pad = tuple(int(rng.integers(0, k)) for k in kernel)
    out_hw = tuple((size + p - 1) // s + 1 for size, p, s in zip((h, w), pad, stride))  # last window starts inside
    x = int8_array(rng, (n, h, w, c))
    act_min, act_max = act_bounds(rng)
    expected = max_pool2d_s8(x, kernel=kernel, stride=stride, pad=pad, out_hw=out_hw, act_min=act_min, act_max=act_max)
    desc = pool2d_desc(x.shape, kernel=kernel, stride=stride, pad=pad, out_hw=out_hw, act_min=act_min, act_max=act_max)
    return Case("maxpool", isa, list(desc.values()), [x], expected, 0)


MAKERS = {
    "conv": conv_case,
    "fc": fc_case,
    "add": add_case,
    "pointwise": pointwise_case,
    "depthwise": depthwise_case,
    "avgpool": avgpool_case,
    "maxpool": maxpool_case,
}


def misaligned_scratch(case: Case) -> Case:
    """The same call with scratch one byte off a word boundary: the kernel must refuse it and
    write nothing, so its buffer keeps the guard bytes (and a depthwise block its input)."""
    untouched = np.full(case.expected.size, GUARD_BYTE, dtype=np.int8)
    if case.kind == "depthwise":  # its block holds the input
        x = case.arrays[0].ravel()
        at = DEPTHWISE_INTS + 1  # input_at
        untouched[case.fields[at] : case.fields[at] + x.size] = x
    return Case(
        case.kind, case.isa, case.fields, case.arrays, untouched, case.scratch_bytes, scratch_skew=1, status=ARG_ERROR
    )


def all_cases(target: str, seed: int, divisor: int = 1) -> list[Case]:
    """Random cases of every kind for each of the target's kernel families (CASES, divided by
    `divisor`), then, per family and kind with scratch, two of them (conv: not in place) with a
    misaligned scratch pointer."""
    rng = np.random.default_rng(seed)
    cases = [
        MAKERS[kind](rng, isa)
        for isa in ISAS[target]
        for kind, count in CASES.items()
        for _ in range(count // divisor)
        if (kind not in ("depthwise", "avgpool", "maxpool") or isa == ISAS[target][0])  # -mcpu picks the path
        and (isa != WIDE or kind in ("conv", "pointwise", "fc"))
    ]
    refusable = [c for c in cases if c.kind != "conv" or not c.fields[CONV_INTS]]
    refused = [
        misaligned_scratch(c)
        for isa in ISAS[target]
        for kind in ("conv", "add", "depthwise")
        for c in [c for c in refusable if (c.isa, c.kind) == (isa, kind) and c.expected.size][:2]
    ]
    return cases + refused


def run_on_target(
    target: str | Target, cases: list[Case], tmp_path: Path, opt: str = "-O2"
) -> list[tuple[int, bool, np.ndarray]]:
    elf = toolchain.cross_compile(
        target,
        [DRIVER, *SOURCES],
        [RUNTIME / "include"],
        tmp_path / "kernels.elf",
        opt=opt,
        extra_cflags=["-Wall", "-Wextra", "-Werror", "-pedantic"],
    )
    (tmp_path / "cases.bin").write_bytes(b"".join(c.record() for c in cases))
    result = toolchain.run_qemu(target, elf, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data, at, results = (tmp_path / "results.bin").read_bytes(), 0, []
    for case in cases:
        status, guards = struct.unpack_from("<2i", data, at)
        at += 8
        results.append((status, bool(guards), np.frombuffer(data, np.int8, case.expected.size, at)))
        at += case.expected.size
    assert at == len(data)
    return results


def describe(case: Case) -> str:
    return f"{case.kind} on {case.isa}: fields {case.fields}, arrays {[a.shape for a in case.arrays]}"


def failures(cases: list[Case], results: list[tuple[int, bool, np.ndarray]]) -> list[str]:
    """What each case that did not return its status, keep its guards and write its golden bytes did."""
    found = []
    for case, (status, guards, output) in zip(cases, results):
        if status != case.status or not guards:
            found.append(f"status {status} (expected {case.status}), guards intact {guards}: {describe(case)}")
        elif status != 0 and not np.array_equal(output, case.expected.ravel()):
            found.append(f"refused, but wrote its output: {describe(case)}")
        elif status == 0 and not np.array_equal(output, case.expected.ravel()):
            differ = int(np.count_nonzero(output != case.expected.ravel()))
            found.append(f"{differ} of {output.size} bytes differ: {describe(case)}")
    return found


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("opt", list(OPT_LEVELS))
@pytest.mark.parametrize("target", sorted(ISAS))
def test_packed_kernels_match_golden(target, opt, tmp_path):
    cases = all_cases(target, seed=5 + list(OPT_LEVELS).index(opt), divisor=OPT_LEVELS[opt])
    failed = failures(cases, run_on_target(target, cases, tmp_path, opt))
    assert not failed, f"{len(failed)} of {len(cases)} cases fail:\n" + "\n".join(failed[:10])


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("opt", list(OPT_LEVELS))
def test_mve_depthwise_octets_match_golden(opt, tmp_path):
    """Helium's 8-channel depthwise rows (edgec_depthwise_conv_s8_packed_mve.c's octet path; its
    C fallback at -O0), apart from and over the input, next to 4-channel groups of the same layer."""
    rng = np.random.default_rng(40 + list(OPT_LEVELS).index(opt))
    cases = [octet_depthwise_case(rng, MVE) for _ in range(300 // OPT_LEVELS[opt])]
    failed = failures(cases, run_on_target("cortex-m55", cases, tmp_path, opt))
    assert not failed, f"{len(failed)} of {len(cases)} cases fail:\n" + "\n".join(failed[:10])


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
def test_mve_depthwise_octets_in_a_clang_build(tmp_path):
    """The octet rows' assembly through clang's assembler (-munaligned-access, as
    tests/test_build_variants.py's clang-unaligned build)."""
    require_tools("clang", "ld.lld", install=toolchain.CLANG_APT_INSTALL)
    base = get_target("cortex-m55")
    clang = dataclasses.replace(base, compiler="clang", cflags=base.cflags + ("-munaligned-access",))
    rng = np.random.default_rng(47)
    cases = [octet_depthwise_case(rng, MVE) for _ in range(100)]
    failed = failures(cases, run_on_target(clang, cases, tmp_path))
    assert not failed, f"{len(failed)} of {len(cases)} cases fail:\n" + "\n".join(failed[:10])


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("opt", list(OPT_LEVELS))
def test_dsp_conv_routines_enter_at_every_copy_and_take_both_output_tails(opt, tmp_path):
    """edgec_conv_s8_dsp(_wide)'s assembly pair routines on the Cortex-M4: 1 to 17 groups of 4 taps
    (every one of the eight loop entries, once and twice round the loop), each without a clamp
    (one BFI a pixel) and with one (the packed clamp), as a pointwise layer (8 pixels: two steps
    and a short one) and as a padded 3x3 layer."""
    rng = np.random.default_rng(11)
    cases = []
    for isa, groups, act in itertools.product((DSP, WIDE), range(1, 18), [(-128, 127), (-100, 90)]):
        x = int8_array(rng, (1, 2, 4, 4 * groups))
        cases.append(
            _conv_case(
                rng, isa, x, int8_array(rng, (6, 1, 1, 4 * groups)), (1, 1), (1, 1), (0,) * 4, (2, 4), act, False
            )
        )
        x = int8_array(rng, (1, 3, 3, groups))  # 9 * groups taps
        weights = int8_array(rng, (5, 3, 3, groups))
        cases.append(_conv_case(rng, isa, x, weights, (1, 1), (1, 1), (1, 1, 1, 1), (3, 3), act, False))
    failed = failures(cases, run_on_target("cortex-m4", cases, tmp_path, opt))
    assert not failed, f"{len(failed)} of {len(cases)} cases fail:\n" + "\n".join(failed[:10])


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("opt", list(OPT_LEVELS))
def test_dsp_wide_1x1x8_bands_match_golden(opt, tmp_path):
    """edgec_conv_s8_dsp_wide_1x1x8 on the Cortex-M4: its band routine (no clamp, short
    requantizations) at 1 to 53 pixels (one band and several, every entry of the 6-copy loop, a
    short last band) and 2 to 34 output channels, apart and in place (at the planner's offset with
    its 192-byte scratch, or the lowest one the packed kernels allow); then the layers it hands to
    edgec_conv_s8_dsp_wide (a clamp, any requantization, an odd output count, 4 or 12 input
    channels, stride 2) and a misaligned scratch, which it refuses."""
    rng = np.random.default_rng(23)
    cases = []
    for pixels in [*range(1, 14), 17, 23, 24, 25, 29, 30, 47, 48, 49, 53]:
        c_out = int(rng.choice([2, 4, 6, 16, 18, 34]))
        x = int8_array(rng, (1, 1, pixels, 8)) if pixels % 2 else int8_array(rng, (2, pixels // 2, 1, 8))
        w = int8_array(rng, (c_out, 1, 1, 8))
        cases.append(_conv_case(rng, WIDE_1X1X8, x, w, (1, 1), (1, 1), (0,) * 4, x.shape[1:3], (-128, 127)))
    for c_in, c_out, stride, act in [
        (8, 6, 1, None),
        (8, 6, 1, (-100, 90)),
        (8, 7, 1, (-128, 127)),
        (4, 6, 1, (-128, 127)),
        (12, 6, 1, (-128, 127)),
        (8, 6, 2, (-128, 127)),
    ]:
        x = int8_array(rng, (1, 5, 6, c_in))
        out_hw = ((5 - 1) // stride + 1, (6 - 1) // stride + 1)
        w = int8_array(rng, (c_out, 1, 1, c_in))
        cases.append(_conv_case(rng, WIDE_1X1X8, x, w, (stride,) * 2, (1, 1), (0,) * 4, out_hw, act, False))
    cases.append(misaligned_scratch(cases[-1]))
    failed = failures(cases, run_on_target("cortex-m4", cases, tmp_path, opt))
    assert not failed, f"{len(failed)} of {len(cases)} cases fail:\n" + "\n".join(failed[:10])


@pytest.mark.parametrize(
    "target,opt,suffix,conv_suffix",
    [
        ("cortex-m3", "speed", "", ""),
        ("cortex-m4", "speed", "_dsp", "_dsp_wide"),
        ("cortex-m4", "size", "_dsp", "_dsp"),
        ("cortex-m55", "speed", "_mve", "_mve_with"),  # the Helium conv names its assembly routines
    ],
)
def test_each_target_calls_its_kernels(target, opt, suffix, conv_suffix, tmp_path):
    """Each target's kernel family; --opt speed widens the DSP convolution's and fully connected
    layer's filters to int16 (twice their flash), --opt size keeps them int8."""
    compiled = compile_model(
        ALL_OPS, calibration=all_ops_samples(8, 0), target=get_target(target).with_opt(opt), warn=lambda _: None
    )
    emit(compiled, tmp_path / "model", "model")
    model_c = (tmp_path / "model" / "model.c").read_text()
    assert f"edgec_conv_s8{conv_suffix}(" in model_c
    assert f"edgec_fully_connected_s8{conv_suffix.removesuffix('_with')}(" in model_c
    assert f"edgec_add_s8{suffix}(" in model_c
    weights_h = (tmp_path / "model" / "model_weights.h").read_text()
    # int16 filters: the DSP kernels' widened ones, or the small-window kernels' (no packed kernels).
    assert ("const int16_t" in weights_h) == (conv_suffix == "_dsp_wide" or suffix == "")
    # all_ops' RGB stem and 1x1 conv: without packed kernels, kernels with their windows compiled
    # in (edgec.ops.conv_small), else the packed generic kernel.
    small = "edgec_conv_s8_small_3x3x3(" in model_c and "edgec_conv_s8_small_1x1x16(" in model_c
    assert small == (suffix == "")


# --- the layouts themselves (host) -------------------------------------------------------------


def test_interleave_rows_orders_blocks_then_groups_then_rows():
    weights = np.arange(5 * 6, dtype=np.int8).reshape(5, 6)
    packed = interleave_rows(weights, RowBlocking(rows=2, group=4))
    padded = np.zeros((6, 8), dtype=np.int8)
    padded[:5, :6] = weights
    expected = [
        padded[block * 2 + row, group * 4 + byte]
        for block in range(3)
        for group in range(2)
        for row in range(2)
        for byte in range(4)
    ]
    np.testing.assert_array_equal(packed, expected)


def test_folded_bias_moves_the_input_offset_into_the_bias():
    rng = np.random.default_rng(0)
    weights = rng.integers(-128, 128, (7, 40), dtype=np.int8)
    x = rng.integers(-128, 128, 40)
    bias = rng.integers(-(2**31), 2**31, 7)
    zp = -97
    exact = bias + weights.astype(np.int64) @ (x - zp)
    folded = folded_bias(bias, weights, zp).astype(np.int64) + weights.astype(np.int64) @ x
    np.testing.assert_array_equal(folded % 2**32, exact % 2**32)
