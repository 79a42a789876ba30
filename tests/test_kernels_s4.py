"""int4-weight kernels: golden numpy kernels (edgec.ops.int4) vs the C kernels, byte for byte.

The portable C kernels (edgec_fully_connected_s4, edgec_conv_s4, edgec_depthwise_conv_s4) run
through ctypes (UBSan host build) on hypothesis-drawn shapes, weights, offsets and quantization;
the packing is checked against CMSIS-NN's nibble arithmetic ((int8_t)(b << 4) >> 4, b >> 4) and the
fully connected golden against a slow per-element reference reading the packed bytes.
"""

from __future__ import annotations

import ctypes as C

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgec.numerics import quantize_multiplier, requantize
from edgec.ops import conv, depthwise, int4, linear
from edgec.ops.conv import conv_output_size
from tests.kernel_lib import ctypes_struct, ptr, struct_from_desc

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
GUARD = 16
GUARD_VALUE = 0x5A
ARG_ERROR = -1


FullyConnectedS4Desc, ConvS4Desc, DepthwiseConvS4Desc = (ctypes_struct(s) for s in int4.STRUCTS)

CTYPES = {
    "fc": (FullyConnectedS4Desc, "edgec_fully_connected_s4"),
    "conv": (ConvS4Desc, "edgec_conv_s4"),
    "depthwise": (DepthwiseConvS4Desc, "edgec_depthwise_conv_s4"),
}
GOLDEN = {"fc": linear.fully_connected_s4, "conv": conv.conv_s4, "depthwise": depthwise.depthwise_conv_s4}


# --------------------------------------------------------------------------------------------
# Packing
# --------------------------------------------------------------------------------------------


def cmsis_nn_nibbles(packed: np.ndarray, count: int) -> list[int]:
    """The values CMSIS-NN's _s4 kernels read: (int8_t)(b << 4) >> 4 for even elements, b >> 4
    (arithmetic) for odd ones, element i in byte i / 2."""
    values = []
    for i in range(count):
        b = int(packed[i // 2])  # int8
        low = (b << 4) & 0xFF
        values.append((low - 256 if low >= 128 else low) >> 4 if i % 2 == 0 else b >> 4)
    return values


@given(values=st.lists(st.integers(-8, 7), min_size=1, max_size=41))
def test_packing_is_cmsis_nn_s4(values):
    packed = int4.pack_int4(np.array(values, dtype=np.int8))
    assert packed.dtype == np.int8 and packed.size == (len(values) + 1) // 2
    assert cmsis_nn_nibbles(packed, len(values)) == values
    assert int4.unpack_int4(packed, len(values)).tolist() == values
    if len(values) % 2:
        assert int(packed[-1]) & 0xF0 == 0  # the unused last high nibble is 0


def test_packing_refuses_values_beyond_int4():
    with pytest.raises(ValueError):
        int4.pack_int4(np.array([8], dtype=np.int8))


# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------


def int8_array(rng, shape) -> np.ndarray:
    if rng.random() < 0.15:
        return rng.choice(np.array([-128, 127], dtype=np.int8), shape)
    return rng.integers(-128, 128, shape).astype(np.int8)


def int4_weights(rng, shape) -> np.ndarray:
    if rng.random() < 0.15:
        return rng.choice(np.array([-8, 7], dtype=np.int8), shape)
    return rng.integers(-8, 8, shape).astype(np.int8)


def output_stage(rng, c_out: int, terms: int) -> dict:
    """Bias, per-channel multipliers and shifts (now and then extreme), zero points and bounds."""
    scales = 2.0 ** rng.uniform(-3, 0, c_out) / (np.sqrt(terms) * 128 * 8)
    pairs = [quantize_multiplier(float(s)) for s in scales]
    a = {"multiplier": np.array([m for m, _ in pairs], np.int32), "shift": np.array([s for _, s in pairs], np.int32)}
    if rng.random() < 0.15:
        a["multiplier"] = rng.choice(np.array([2**31 - 1, 2**30, 0, 1], np.int32), c_out)
        a["shift"] = rng.choice(np.array([-31, -5, 0, 3, 31], np.int32), c_out)
    style = rng.integers(4)
    a["bias"] = (
        None
        if style == 0
        else (
            rng.choice(np.array([2**31 - 1, -(2**31)], np.int64), c_out).astype(np.int32)
            if style == 1
            else rng.integers(-(2**14), 2**14, c_out).astype(np.int32)
        )
    )
    lo, hi = sorted(int(v) for v in rng.integers(-128, 128, 2))
    a["act_min"], a["act_max"] = [(-128, 127), (-128, 127), (0, 127), (lo, hi)][int(rng.integers(4))]
    return a


def geometry(rng, max_hw: int):
    while True:
        kernel = tuple(int(v) for v in rng.integers(1, 4, 2))
        stride = tuple(int(v) for v in rng.integers(1, 3, 2))
        dilation = tuple(int(v) for v in rng.choice([1, 1, 2], 2))
        pad = tuple(int(rng.integers(0, k * d)) if rng.random() < 0.6 else 0 for k, d in zip(kernel, dilation))
        hw = tuple(int(v) for v in rng.integers(1, max_hw + 1, 2))
        if all(s + 2 * p - d * (k - 1) - 1 >= 0 for s, p, d, k in zip(hw, pad, dilation, kernel)):
            return kernel, stride, dilation, pad, hw


def random_case(rng, kind: str, max_hw: int = 5, max_c: int = 9) -> tuple[dict, np.ndarray]:
    n = int(rng.integers(1, 3))
    input_zp, output_zp = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
    if kind == "fc":
        c_in, c_out = int(rng.integers(1, 4 * max_c)), int(rng.integers(1, max_c + 1))
        a = {"weight": int4_weights(rng, (c_out, c_in)), **output_stage(rng, c_out, c_in)}
        return int4.fully_connected_s4_desc(a, input_zp, output_zp, n), int8_array(rng, (n, c_in))
    kernel, stride, dilation, pad, (h, w) = geometry(rng, max_hw)
    out_hw = tuple(
        conv_output_size(s, k, st_, p, p, d) for s, k, st_, p, d in zip((h, w), kernel, stride, pad, dilation)
    )
    geometry_attrs = {"stride": stride, "pad": (*pad, *pad), "dilation": dilation}
    if kind == "conv":
        groups = int(rng.choice([1, 1, 1, 2, 3]))
        c_in, c_out = groups * int(rng.integers(1, max_c + 1)), groups * int(rng.integers(1, max_c + 1))
        weight = int4_weights(rng, (c_out, *kernel, c_in // groups))
        a = {"weight": weight, "groups": groups, **geometry_attrs, **output_stage(rng, c_out, weight[0].size)}
        desc = int4.conv_s4_desc(a, (n, h, w, c_in), (n, *out_hw, c_out), input_zp, output_zp)
    else:
        c_in = int(rng.integers(1, max_c + 1))
        ch_mult = int(rng.choice([1, 1, 2, 3]))
        a = {
            "weight": int4_weights(rng, (1, *kernel, c_in * ch_mult)),
            "ch_mult": ch_mult,
            **geometry_attrs,
            **output_stage(rng, c_in * ch_mult, kernel[0] * kernel[1]),
        }
        desc = int4.depthwise_conv_s4_desc(a, (n, h, w, c_in), (n, *out_hw, c_in * ch_mult), input_zp, output_zp)
    return desc, int8_array(rng, (n, h, w, c_in))


# Windows crossing every border (padding top, left, bottom, right, each side its own), odd input
# widths, strides 1 and 2, 1 and 3 input channels, kernel rows of up to 16 bytes and longer, windows
# wholly in the padding: the shapes of the Helium convolution's gather (edgec_conv_s4_mve), DS-CNN's
# 10x4 stride-2 stem among them. (kernel, stride, dilation, (top, left, bottom, right), (H, W), C_in,
# C_out, batches); every K = KH * KW * C_in is even (the Helium kernel's rows).
GATHER_SHAPES = [
    ((10, 4), (2, 2), (1, 1), (4, 1, 5, 1), (49, 10), 1, 64, 1),  # DS-CNN's stem
    ((10, 4), (2, 2), (1, 1), (4, 1, 5, 1), (13, 9), 1, 6, 2),
    ((10, 4), (1, 1), (1, 1), (5, 2, 4, 1), (11, 7), 1, 3, 1),
    ((3, 2), (1, 1), (1, 1), (1, 1, 1, 1), (5, 7), 3, 5, 2),
    ((3, 2), (2, 2), (1, 1), (2, 0, 0, 1), (6, 9), 3, 8, 1),
    ((4, 3), (2, 2), (1, 1), (0, 2, 3, 1), (7, 5), 3, 9, 1),
    ((5, 6), (1, 2), (1, 1), (2, 5, 4, 0), (6, 9), 3, 7, 1),  # rows of 18 bytes
    ((2, 2), (1, 1), (1, 1), (0, 0, 1, 1), (3, 5), 1, 1, 1),
    ((1, 2), (2, 1), (1, 1), (0, 1, 0, 1), (5, 3), 1, 2, 2),
    ((4, 1), (1, 2), (1, 1), (2, 0, 1, 0), (5, 5), 3, 4, 1),  # one tap a row, four rows
    ((3, 4), (2, 2), (1, 1), (3, 4, 3, 4), (3, 5), 1, 5, 1),  # whole windows in the padding
    ((3, 2), (1, 1), (2, 1), (2, 1, 2, 1), (7, 5), 3, 4, 1),  # dilated rows
    ((1, 1), (2, 2), (1, 1), (1, 1, 1, 1), (5, 7), 4, 6, 1),  # a 1x1 window, padded and strided
]


# Odd row lengths K (GATHER_SHAPES' fields): the Helium convolution reads every other row from a
# high nibble (edgec_conv_s4_mve's conv_s4_mve_odd). RGB 3x3 stems (K = 27: MobileNet's stride 2,
# ResNet-8's 16 channels), 3x3 and 5x5 on one channel (K = 9, 25), 3x3x5 (45); odd and even C_out,
# not a multiple of 4, 1 (no odd rows), more than 16 groups of 4 a parity; odd and even pixel
# counts, one pixel; padding, dilation (the generic gather), 1x1 windows (the pixel itself, padded);
# K + 1 a multiple of 32 (no partial block), several blocks with a partial one.
ODD_K_SHAPES = [
    ((3, 3), (2, 2), (1, 1), (0, 0, 1, 1), (12, 12), 3, 8, 1),  # MobileNet's stem
    ((3, 3), (1, 1), (1, 1), (1, 1, 1, 1), (7, 6), 3, 16, 1),  # ResNet-8's
    ((3, 3), (1, 1), (1, 1), (1, 1, 1, 1), (5, 5), 1, 5, 1),
    ((5, 5), (1, 1), (1, 1), (2, 2, 2, 2), (6, 5), 1, 7, 2),
    ((3, 3), (2, 1), (1, 1), (1, 0, 1, 2), (7, 6), 5, 6, 1),
    ((3, 3), (1, 1), (1, 1), (0, 0, 0, 0), (4, 5), 3, 1, 1),
    ((3, 3), (1, 1), (1, 1), (1, 1, 1, 1), (5, 5), 3, 2, 1),
    ((3, 3), (1, 1), (1, 1), (0, 0, 0, 0), (3, 3), 1, 4, 1),  # one pixel
    ((1, 1), (1, 1), (1, 1), (0, 0, 0, 0), (3, 3), 7, 10, 1),
    ((1, 1), (2, 2), (1, 1), (1, 1, 1, 1), (5, 5), 3, 3, 1),
    ((3, 3), (1, 1), (2, 2), (2, 2, 2, 2), (7, 7), 3, 9, 1),
    ((3, 3), (2, 2), (1, 1), (1, 1, 1, 1), (9, 9), 11, 33, 1),  # K = 99
    ((7, 9), (1, 1), (1, 1), (3, 4, 3, 4), (8, 9), 1, 12, 1),  # K = 63
    ((3, 3), (2, 2), (1, 1), (1, 1, 1, 1), (4, 4), 3, 135, 1),
]

# Even row lengths the unpacked kernels (edgec_conv_s4_{dsp,mve}_unpacked[_narrow]) take: MobileNetV1
# 0.25's first pointwise layers (8 -> 16, 16 -> 32), ResNet-8's 3x3 of 16 channels (K = 144) and its
# stride-2 shortcut (1x1, 16 -> 32); K = 2, 6, 18, 34 (a last group of 4 half full, K % 16 = 2), C_out
# odd, 1, not a multiple of 4 (padding rows); a 3x3 on 4 channels (Helium's padded window rows are
# for rows of 8 to 15 taps: 12 here, C_out 8).
EVEN_K_SHAPES = [
    ((1, 1), (1, 1), (1, 1), (0, 0, 0, 0), (6, 5), 8, 16, 1),
    ((1, 1), (1, 1), (1, 1), (0, 0, 0, 0), (4, 3), 16, 32, 1),
    ((3, 3), (1, 1), (1, 1), (1, 1, 1, 1), (5, 6), 16, 16, 1),
    ((1, 1), (2, 2), (1, 1), (0, 0, 0, 0), (7, 6), 16, 32, 1),
    ((1, 1), (1, 1), (1, 1), (0, 0, 0, 0), (3, 3), 2, 5, 2),
    ((1, 1), (2, 1), (1, 1), (1, 0, 1, 0), (5, 4), 6, 3, 1),
    ((3, 3), (1, 1), (1, 1), (1, 1, 1, 1), (4, 5), 2, 7, 1),
    ((1, 1), (1, 1), (1, 1), (0, 0, 0, 0), (2, 3), 34, 1, 1),
    ((3, 3), (2, 2), (1, 1), (1, 1, 1, 1), (6, 6), 4, 8, 1),
]


def gather_cases(seed: int, shapes: list = GATHER_SHAPES) -> list[tuple[dict, np.ndarray]]:
    """One convolution of each of `shapes`, weights, zero points and quantization drawn from seed."""
    rng = np.random.default_rng(seed)
    cases = []
    for kernel, stride, dilation, (top, left, bottom, right), (h, w), c_in, c_out, n in shapes:
        out_hw = (
            conv_output_size(h, kernel[0], stride[0], top, bottom, dilation[0]),
            conv_output_size(w, kernel[1], stride[1], left, right, dilation[1]),
        )
        weight = int4_weights(rng, (c_out, *kernel, c_in))
        a = {
            "weight": weight,
            "groups": 1,
            "stride": stride,
            "pad": (top, left, bottom, right),
            "dilation": dilation,
            **output_stage(rng, c_out, weight[0].size),
        }
        zp_in, zp_out = (int(v) for v in rng.choice([-128, 127, *rng.integers(-128, 128, 2)], 2))
        desc = int4.conv_s4_desc(a, (n, h, w, c_in), (n, *out_hw, c_out), zp_in, zp_out)
        cases.append((desc, int8_array(rng, (n, h, w, c_in))))
    return cases


# --------------------------------------------------------------------------------------------
# ctypes
# --------------------------------------------------------------------------------------------


def run_c(lib, kind: str, desc: dict, x: np.ndarray, output_size: int) -> tuple[int, np.ndarray]:
    cls, name = CTYPES[kind]
    fn = getattr(lib, name)
    fn.argtypes = [C.POINTER(cls), C.POINTER(C.c_int8), C.POINTER(C.c_int8)]
    fn.restype = C.c_int
    keep: list = []
    c_desc = struct_from_desc(cls, desc, keep)
    x = np.ascontiguousarray(x, dtype=np.int8)
    out = np.full(output_size + GUARD, GUARD_VALUE, dtype=np.int8)
    status = fn(C.byref(c_desc), ptr(x, C.c_int8), ptr(out, C.c_int8))
    assert (out[output_size:] == GUARD_VALUE).all(), "wrote past its output"
    return status, out[:output_size]


def check_c_matches(lib, kind: str, desc: dict, x: np.ndarray) -> None:
    expected = GOLDEN[kind](desc, x)
    status, out = run_c(lib, kind, desc, x, expected.size)
    assert status == 0
    np.testing.assert_array_equal(out.reshape(expected.shape), expected)


# --------------------------------------------------------------------------------------------
# Golden vs C (portable, UBSan)
# --------------------------------------------------------------------------------------------


@settings(max_examples=200, **SETTINGS)
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["conv", "depthwise", "fc"]))
def test_golden_matches_c(kernel_lib, seed, kind):
    check_c_matches(kernel_lib, kind, *random_case(np.random.default_rng(seed), kind))


@pytest.mark.parametrize("seed", range(3))
def test_gather_shapes_golden_matches_c(kernel_lib, seed):
    for desc, x in gather_cases(seed) + gather_cases(seed, ODD_K_SHAPES):
        check_c_matches(kernel_lib, "conv", desc, x)


def packed_depthwise_scratch(desc: dict, pixel_bytes: int = 4) -> int:
    """edgec_depthwise_conv_s4_packed's scratch, as the op unit declares it: the unpacked filter,
    then the int8 packed kernel's row cache (pixel_bytes per cached pixel: 8 on DSP-only builds)."""
    out_w = conv_output_size(
        desc["input_w"], desc["kernel_w"], desc["stride_w"], desc["pad_left"], desc["pad_left"], desc["dilation_w"]
    )
    rows = depthwise.PACKED_ROW_PIXELS.value(out_w, desc["stride_w"], desc["kernel_w"], desc["dilation_w"])
    return int4.depthwise_filter_bytes(desc) + desc["kernel_h"] * rows * pixel_bytes


def run_packed_depthwise(lib, desc: dict, x: np.ndarray, output_size: int, fold: bool = True) -> tuple[int, np.ndarray]:
    """edgec_depthwise_conv_s4_packed (the host build: the int8 packed kernel's portable C) with
    guard bytes after its output and its scratch; `fold`: the folded bias it requires."""
    fn = lib.edgec_depthwise_conv_s4_packed
    fn.argtypes = [C.POINTER(DepthwiseConvS4Desc), C.POINTER(C.c_int8), C.POINTER(C.c_int8), C.POINTER(C.c_int8)]
    fn.restype = C.c_int
    keep: list = []
    c_desc = struct_from_desc(DepthwiseConvS4Desc, int4.depthwise_packed_desc(desc) if fold else desc, keep)
    x = np.ascontiguousarray(x, dtype=np.int8)
    out = np.full(output_size + GUARD, GUARD_VALUE, dtype=np.int8)
    size = packed_depthwise_scratch(desc)
    scratch = np.full(size + GUARD + 4, GUARD_VALUE, dtype=np.int8)
    at = -scratch.ctypes.data % 4  # word-aligned, as the planner gives it
    status = fn(C.byref(c_desc), ptr(x, C.c_int8), ptr(out, C.c_int8), ptr(scratch[at:], C.c_int8))
    assert (out[output_size:] == GUARD_VALUE).all(), "wrote past its output"
    assert (scratch[at + size :] == GUARD_VALUE).all(), "wrote past its scratch"
    return status, out[:output_size]


@settings(max_examples=200, **SETTINGS)
@given(seed=st.integers(0, 2**32 - 1))
def test_packed_depthwise_matches_golden(kernel_lib, seed):
    """The filter unpacked per call (odd and even channel counts, a partial last group of 4) into
    the int8 packed kernel: golden == C, every channel multiplier 1 shape it takes."""
    rng = np.random.default_rng(seed)
    while True:
        desc, x = random_case(rng, "depthwise", max_c=int(rng.choice([9, 21])))
        if int4.depthwise_fits(desc):
            break
    expected = depthwise.depthwise_conv_s4(desc, x)
    status, out = run_packed_depthwise(kernel_lib, desc, x, expected.size)
    assert status == 0
    np.testing.assert_array_equal(out.reshape(expected.shape), expected)


def test_packed_depthwise_refuses_other_shapes(kernel_lib):
    """Channel multiplier 2, no (folded) bias: refused, the output untouched."""
    rng = np.random.default_rng(3)
    desc, x = random_case(rng, "depthwise")
    while not int4.depthwise_fits(desc):
        desc, x = random_case(rng, "depthwise")
    size = depthwise.depthwise_conv_s4(desc, x).size
    assert run_packed_depthwise(kernel_lib, desc, x, size)[0] == 0
    for bad, fold in ((dict(desc, ch_mult=2), True), (dict(desc, bias=None), False)):
        status, out = run_packed_depthwise(kernel_lib, bad, x, size, fold)
        assert status == ARG_ERROR and (out == GUARD_VALUE).all()


@settings(max_examples=30, **SETTINGS)
@given(seed=st.integers(0, 2**32 - 1))
def test_fully_connected_golden_is_the_packed_arithmetic(seed):
    """Per element from the packed bytes, as CMSIS-NN reads them: bias + sum w * (x + offset),
    requantized per channel, offset, clamped."""
    desc, x = random_case(np.random.default_rng(seed), "fc")
    d = desc
    w = np.array(cmsis_nn_nibbles(d["filter"], d["output_c"] * d["input_c"])).reshape(d["output_c"], d["input_c"])
    acc = (x.astype(np.int64) + d["input_offset"]) @ w.T + (0 if d["bias"] is None else d["bias"].astype(np.int64))
    acc = ((acc + 2**31) % 2**32) - 2**31
    y = requantize(acc, d["multiplier"].astype(np.int64), d["shift"].astype(np.int64)) + d["output_offset"]
    np.testing.assert_array_equal(linear.fully_connected_s4(desc, x), np.clip(y, d["act_min"], d["act_max"]))


@pytest.mark.parametrize("kind", ["conv", "depthwise", "fc"])
def test_invalid_descriptors_are_refused(kernel_lib, kind):
    desc, x = random_case(np.random.default_rng(7), kind)
    size = GOLDEN[kind](desc, x).size
    for field, value in (
        ("filter", None),
        ("multiplier", None),
        ("input_offset", 129),
        ("output_offset", 128),
        ("act_min", 5),
        ("batches", 0),
    ):
        bad = dict(desc, **{field: value})
        if field == "act_min":
            bad["act_max"] = 4
        status, out = run_c(kernel_lib, kind, bad, x, size)
        assert status == ARG_ERROR, field
        assert (out == GUARD_VALUE).all(), f"{field}: wrote its output"
    bad = dict(desc, shift=np.full_like(desc["shift"], 32))
    assert run_c(kernel_lib, kind, bad, x, size)[0] == ARG_ERROR
