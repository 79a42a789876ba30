"""int16 (16x8) kernels: golden numpy kernels (edgec.ops.int16) vs the C kernels, byte for byte.

The portable C kernels run through ctypes (UBSan host build); the goldens are checked against a
slow per-element reference written from TFLite's reference_integer_ops (int16 overloads: int64
accumulator, int64 bias, MultiplyByQuantizedMultiplier(int64) with its reduced multiplier and
"(x * m + 2^(14 - shift)) >> (15 - shift)" rounding, not CMSIS-NN's two-step form); the DSP paths
and the portable ones run under QEMU on cortex-m4 and cortex-m55 (test_s16_arm at the end; driver
tests/data/port/s16_kernels.c), which also prints instruction counts.
"""

from __future__ import annotations

import ctypes as C
import hashlib
import math
import os
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgec.numerics import (
    INT16_MAX,
    INT16_MIN,
    INT32_MAX,
    INT32_MIN,
    add_bias_s64,
    quantize_bias_s64,
    quantize_multiplier,
    requantize_s64,
)
from edgec.ops import int16
from edgec.ops.pool import pool_output_size
from edgec.targets import toolchain
from tests.device_support import ROOT, needs_toolchain
from tests.kernel_lib import (
    BinaryS16Desc,
    ConvS16Desc,
    DepthwiseConvS16Desc,
    FullyConnectedS16Desc,
    LutS16Desc,
    PoolS16Desc,
    RequantizeS16Desc,
    SoftmaxS16Desc,
    ptr,
    struct_from_desc,
)

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
GUARD = 16
GUARD_VALUE = 0x5A5A
ARG_ERROR = -1


# --------------------------------------------------------------------------------------------
# Slow independent reference (TFLite reference_integer_ops, int16 overloads)
# --------------------------------------------------------------------------------------------


def tflite_multiply_by_quantized_multiplier_s64(x: int, multiplier: int, shift: int) -> int:
    """TFLite MultiplyByQuantizedMultiplier(int64_t x, int32_t quantized_multiplier, int shift),
    as written there (one rounding add before the full shift); edgec saturates the int32 cast
    and reads x within [-2^47, 2^47) (TFLite DCHECKs it)."""
    reduced = (multiplier + (1 << 15)) >> 16 if multiplier < 0x7FFF0000 else 0x7FFF
    total_shift = 15 - shift
    x = min(max(x, -(2**47)), 2**47 - 1)
    result = (x * reduced + (1 << (total_shift - 1))) >> total_shift
    return min(max(result, INT32_MIN), INT32_MAX)


def _reference_output(acc: int, desc: dict, o: int) -> int:
    bias = 0 if desc["bias"] is None else int(desc["bias"][o])
    y = tflite_multiply_by_quantized_multiplier_s64(acc + bias, int(desc["multiplier"][o]), int(desc["shift"][o]))
    return min(max(y, desc["act_min"]), desc["act_max"])


def reference_conv(desc: dict, x: np.ndarray, depthwise: bool = False) -> np.ndarray:
    """ConvPerChannel / DepthwiseConvPerChannel, int16: loops over every output element and tap."""
    d = desc
    n_, h, w, c = d["batches"], d["input_h"], d["input_w"], d["input_c"]
    x = x.reshape(n_, h, w, c).tolist()
    c_out = c * d["ch_mult"] if depthwise else d["output_c"]
    groups = c if depthwise else d["groups"]
    cg, og = c // groups, c_out // groups
    filt = (
        d["filter"].reshape(d["kernel_h"], d["kernel_w"], c_out)
        if depthwise
        else d["filter"].reshape(c_out, d["kernel_h"], d["kernel_w"], cg)
    )
    out = np.zeros((n_, d["output_h"], d["output_w"], c_out), dtype=np.int16)
    for n in range(n_):
        for oy in range(d["output_h"]):
            for ox in range(d["output_w"]):
                for o in range(c_out):
                    acc = 0
                    for ky in range(d["kernel_h"]):
                        for kx in range(d["kernel_w"]):
                            iy = oy * d["stride_h"] - d["pad_top"] + ky * d["dilation_h"]
                            ix = ox * d["stride_w"] - d["pad_left"] + kx * d["dilation_w"]
                            if not (0 <= iy < h and 0 <= ix < w):
                                continue
                            for i in range(cg):
                                weight = filt[ky, kx, o] if depthwise else filt[o, ky, kx, i]
                                acc += x[n][iy][ix][(o // og) * cg + i] * int(weight)
                    out[n, oy, ox, o] = _reference_output(acc, d, o)
    return out


def reference_fc(desc: dict, x: np.ndarray) -> np.ndarray:
    xs = x.reshape(desc["batches"], desc["input_c"]).tolist()
    out = np.zeros((desc["batches"], desc["output_c"]), dtype=np.int16)
    for b in range(desc["batches"]):
        for o in range(desc["output_c"]):
            acc = sum(v * int(wv) for v, wv in zip(xs[b], desc["filter"][o]))
            out[b, o] = _reference_output(acc, desc, o)
    return out


# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------


@dataclass
class Case:
    kind: str  # "conv", "depthwise", "fc", "add" or "mul"
    desc: dict
    x: np.ndarray  # int16
    x2: np.ndarray | None = None  # add, mul: the second input

    def golden(self) -> np.ndarray:
        if self.kind in REQUANTIZE:
            return REQUANTIZE[self.kind][0](self.desc, self.x)
        if self.kind == "lut":
            return int16.lut_s16(self.desc, self.x)
        if self.kind == "softmax":
            return int16.softmax_s16(self.desc, self.x)
        if self.kind in POOL:
            return POOL[self.kind][0](self.desc, self.x)
        if self.kind in BINARY:
            return BINARY[self.kind][1](self.x, self.x2, self.desc)
        return GOLDEN[self.kind](self.desc, self.x)

    def reference(self) -> np.ndarray:
        if self.kind == "fc":
            return reference_fc(self.desc, self.x)
        return reference_conv(self.desc, self.x, depthwise=self.kind == "depthwise")


GOLDEN = {"conv": int16.conv_s16, "depthwise": int16.depthwise_conv_s16, "fc": int16.fully_connected_s16}


def int16_array(rng, shape) -> np.ndarray:
    style = rng.random()
    if style < 0.15:
        return rng.choice(np.array([INT16_MIN, INT16_MAX], dtype=np.int16), shape)
    if style < 0.3:
        return rng.integers(-300, 300, shape).astype(np.int16)
    return rng.integers(INT16_MIN, INT16_MAX + 1, shape).astype(np.int16)


def int8_array(rng, shape) -> np.ndarray:
    if rng.random() < 0.15:
        return rng.choice(np.array([-128, 127], dtype=np.int8), shape)
    return rng.integers(-128, 128, shape).astype(np.int8)


def scales(rng, terms: int) -> tuple[float, np.ndarray, float]:
    """(s_in, s_w, s_out) whose effective scales put outputs across the int16 range: the
    accumulator spreads about sqrt(terms) * 2^14 * 2^6, the outputs about 2^13 * 2^(-1..2)."""
    s_in, s_w = float(2.0 ** rng.uniform(-12, -4)), 2.0 ** rng.uniform(-9, -5, 1)
    return s_in, s_w, s_in * float(s_w[0]) * float(np.sqrt(terms)) * 2 ** rng.uniform(5, 9)


def bias_for(rng, c_out: int, s_in: float, s_w, s_out: float) -> np.ndarray | None:
    style = rng.integers(5)
    if style == 0:
        return None
    if style == 1:  # extremes: saturate into requantize_s64's range
        return rng.choice(np.array([-(2**63), 2**63 - 1, -(2**47), 2**47 - 1, 2**47], dtype=np.int64), c_out)
    return quantize_bias_s64(rng.normal(0, 2**12 * s_out, c_out), s_in, np.broadcast_to(s_w, (c_out,)))


def override_quant(rng, desc: dict) -> None:
    """Now and then replaces the multipliers and shifts by extreme or arbitrary valid ones."""
    c_out = len(desc["multiplier"])
    style = rng.integers(6)
    if style == 0:
        desc["multiplier"] = rng.choice(np.array([2**31 - 1, 0x7FFF0000, 0x7FFEFFFF, 2**30, 0, 1], np.int32), c_out)
        desc["shift"] = rng.choice(np.array([-31, -20, -1, 0, 7], np.int32), c_out)
    elif style == 1:
        desc["multiplier"] = rng.integers(0, 2**31, c_out).astype(np.int32)
        desc["shift"] = rng.integers(-31, 8, c_out).astype(np.int32)


def act_range(rng) -> tuple[int, int]:
    lo, hi = sorted(int(v) for v in rng.integers(INT16_MIN, INT16_MAX + 1, 2))
    return [(INT16_MIN, INT16_MAX), (INT16_MIN, INT16_MAX), (0, INT16_MAX), (lo, hi), (lo, lo)][int(rng.integers(5))]


def geometry(rng, max_hw: int):
    while True:
        kernel = tuple(int(v) for v in rng.integers(1, 4, 2))
        stride = tuple(int(v) for v in rng.integers(1, 3, 2))
        dilation = tuple(int(v) for v in rng.choice([1, 1, 2], 2))
        pad = tuple(int(rng.integers(0, k * d)) if rng.random() < 0.6 else 0 for k, d in zip(kernel, dilation))
        hw = tuple(int(v) for v in rng.integers(1, max_hw + 1, 2))
        if all(s + 2 * p - d * (k - 1) - 1 >= 0 for s, p, d, k in zip(hw, pad, dilation, kernel)):
            return kernel, stride, dilation, pad, hw


def random_case(rng, kind: str, *, max_hw: int = 5, max_c: int = 9, quant_override: bool = True) -> Case:
    act_min, act_max = act_range(rng)
    n = int(rng.integers(1, 3))
    if kind == "fc":
        c_in, c_out = int(rng.integers(1, 3 * max_c)), int(rng.integers(1, max_c + 1))
        weight = int8_array(rng, (c_out, c_in))
        s_in, s_w, s_out = scales(rng, c_in)
        desc = int16.fully_connected_s16_desc(
            n, weight, bias_for(rng, c_out, s_in, s_w, s_out), s_in, s_w, s_out, act_min=act_min, act_max=act_max
        )
        x = int16_array(rng, (n, c_in))
    else:
        kernel, stride, dilation, pad, (h, w) = geometry(rng, max_hw)
        if kind == "conv":
            groups = int(rng.choice([1, 1, 1, 2, 3]))
            c_in, c_out = groups * int(rng.integers(1, max_c + 1)), groups * int(rng.integers(1, max_c + 1))
            weight = int8_array(rng, (c_out, c_in // groups, *kernel))
        else:
            c_in = int(rng.integers(1, max_c + 1))
            c_out = c_in * int(rng.choice([1, 1, 2, 3]))
            weight = int8_array(rng, (c_out, 1, *kernel))
        s_in, s_w, s_out = scales(rng, weight[0].size)
        args = ((n, h, w, c_in), weight, bias_for(rng, c_out, s_in, s_w, s_out), s_in, s_w, s_out)
        attrs = dict(stride=stride, pad=pad, dilation=dilation, act_min=act_min, act_max=act_max)
        desc = (
            int16.conv_s16_desc(*args, groups=groups, **attrs)
            if kind == "conv"
            else int16.depthwise_conv_s16_desc(*args, **attrs)
        )
        x = int16_array(rng, (n, h, w, c_in))
    if quant_override:
        override_quant(rng, desc)
    return Case(kind, desc, x)


# --------------------------------------------------------------------------------------------
# ctypes
# --------------------------------------------------------------------------------------------

CTYPES = {
    "conv": (ConvS16Desc, "edgec_conv_s16"),
    "depthwise": (DepthwiseConvS16Desc, "edgec_depthwise_conv_s16"),
    "fc": (FullyConnectedS16Desc, "edgec_fully_connected_s16"),
}


def run_c(lib, kind: str, desc: dict, x: np.ndarray, output_size: int) -> tuple[int, np.ndarray]:
    cls, name = CTYPES[kind]
    fn = getattr(lib, name)
    fn.argtypes = [C.POINTER(cls), C.POINTER(C.c_int16), C.POINTER(C.c_int16)]
    fn.restype = C.c_int
    keep: list = []
    c_desc = struct_from_desc(cls, desc, keep)
    x = np.ascontiguousarray(x, dtype=np.int16)
    out = np.full(output_size + GUARD, GUARD_VALUE, dtype=np.int16)
    status = fn(C.byref(c_desc), ptr(x, C.c_int16), ptr(out, C.c_int16))
    assert (out[output_size:] == GUARD_VALUE).all(), "wrote past its output"
    return status, out[:output_size]


def check_c_matches(lib, case: Case) -> None:
    expected = case.golden()
    status, out = run_c(lib, case.kind, case.desc, case.x, expected.size)
    assert status == 0
    np.testing.assert_array_equal(out.reshape(expected.shape), expected)


# --------------------------------------------------------------------------------------------
# Golden vs C (portable, UBSan)
# --------------------------------------------------------------------------------------------


@settings(max_examples=300, **SETTINGS)
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["conv", "depthwise", "fc"]))
def test_golden_matches_c(kernel_lib, seed, kind):
    check_c_matches(kernel_lib, random_case(np.random.default_rng(seed), kind))


@pytest.mark.parametrize("kind", ["conv", "depthwise", "fc"])
def test_extremes_match_c(kernel_lib, kind):
    """Size-1 dims, every input at an int16 limit, every weight at an int8 limit, biases at the
    int64 limits, multipliers at 2^31 - 1 / 0x7FFF0000 (reduced to 0x7FFF) and shifts -31 / 7."""
    rng = np.random.default_rng(3)
    for x_value in (INT16_MIN, INT16_MAX):
        for w_value in (-128, 127):
            for bias_value in (-(2**63), 2**63 - 1, 0):
                for multiplier, shift in ((2**31 - 1, 7), (0x7FFF0000, -31), (0x7FFEFFFF, 0), (2**30, -15)):
                    case = random_case(rng, kind, max_hw=3, max_c=3, quant_override=False)
                    case.x[...] = x_value
                    case.desc["filter"][...] = w_value
                    c_out = len(case.desc["multiplier"])
                    case.desc["bias"] = np.full(c_out, bias_value, dtype=np.int64)
                    case.desc["multiplier"] = np.full(c_out, multiplier, dtype=np.int32)
                    case.desc["shift"] = np.full(c_out, shift, dtype=np.int32)
                    check_c_matches(kernel_lib, case)


def test_large_reduction_is_exact(kernel_lib):
    """K = 3000 extreme products (2^22 each) overflow an int32 accumulator; the kernels sum in int64."""
    weight = np.full((2, 3000), -128, dtype=np.int8)
    desc = int16.fully_connected_s16_desc(1, weight, None, 2**-10, 2**-7, 2**-2)
    x = np.full((1, 3000), INT16_MIN, dtype=np.int16)
    expected = int16.fully_connected_s16(desc, x)
    assert expected[0, 0] == INT16_MAX
    check_c_matches(kernel_lib, Case("fc", desc, x))
    # 3000 * 2^22 * 2^-10 * 2^-7 / 2^-2 = 3000 * 2^7 saturates; a smaller scale does not
    desc = int16.fully_connected_s16_desc(1, weight, None, 2**-10, 2**-7, 2**4)
    assert int16.fully_connected_s16(desc, x)[0, 0] == round(3000 * 2**22 * 2**-21)
    check_c_matches(kernel_lib, Case("fc", desc, x))


def _invalid_variants(desc: dict, kind: str) -> list[dict]:
    """Descriptors the kernels must refuse."""
    bad = []
    for name, value in (
        ("act_min", INT16_MIN - 1),
        ("act_max", INT16_MAX + 1),
        ("act_max", desc["act_min"] - 1),
        ("batches", 0),
        ("filter", None),
        ("multiplier", None),
        ("shift", None),
        ("input_c", 0),
        ("output_c", -1),
        ("groups", 0),
        ("groups", desc.get("input_c", 0) + 1),
        ("stride_h", 0),
        ("dilation_w", 0),
        ("pad_top", -1),
        ("ch_mult", 0),
        ("kernel_w", 0),
    ):
        if name in desc:
            bad.append({**desc, name: value})
    bad.append({**desc, "shift": np.full_like(desc["shift"], 8)})
    bad.append({**desc, "shift": np.full_like(desc["shift"], -32)})
    bad.append({**desc, "multiplier": np.full_like(desc["multiplier"], -1)})
    if kind != "fc":
        bad.append({**desc, "output_h": 2**31 - 1, "stride_h": 2})
    return bad


@pytest.mark.parametrize("kind", ["conv", "depthwise", "fc"])
def test_invalid_descriptors_are_refused(kernel_lib, kind):
    rng = np.random.default_rng(11)
    case = random_case(rng, kind, quant_override=False)
    check_c_matches(kernel_lib, case)
    for desc in _invalid_variants(case.desc, kind):
        status, out = run_c(kernel_lib, kind, desc, case.x, 8)
        assert status == ARG_ERROR, {k: v for k, v in desc.items() if not isinstance(v, np.ndarray)}
        assert (out == GUARD_VALUE).all()


# --------------------------------------------------------------------------------------------
# Golden vs the slow reference; the arithmetic pieces
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["conv", "depthwise", "fc"])
def test_golden_matches_slow_reference(kind):
    rng = np.random.default_rng({"conv": 1, "depthwise": 2, "fc": 3}[kind])
    for _ in range(40):
        case = random_case(rng, kind, max_hw=4, max_c=5)
        np.testing.assert_array_equal(case.golden(), case.reference())


@settings(max_examples=500, **SETTINGS)
@given(x=st.integers(-(2**47), 2**47 - 1), multiplier=st.integers(0, 2**31 - 1), shift=st.integers(-31, 7))
def test_requantize_s64_is_tflite_rounding(x, multiplier, shift):
    """CMSIS-NN's ((x*m >> (14 - s)) + 1) >> 1 equals TFLite's (x*m + 2^(14-s)) >> (15 - s)."""
    got = int(requantize_s64(np.array([x]), np.array([multiplier]), np.array([shift]))[0])
    assert got == tflite_multiply_by_quantized_multiplier_s64(x, multiplier, shift)


def test_add_bias_s64_saturates_exactly():
    acc = np.array([2**53, -(2**53), 5, 0, 2**47 - 10], dtype=np.int64)
    bias = np.array([-(2**63), 2**63 - 1, 2**47, -(2**47) - 5, 9], dtype=np.int64)
    assert add_bias_s64(acc, bias).tolist() == [-(2**47), 2**47 - 1, 2**47 - 1, -(2**47), 2**47 - 1]


def test_desc_refuses_a_scale_beyond_shift_7():
    with pytest.raises(ValueError, match="below 2"):
        int16.fully_connected_s16_desc(1, np.ones((1, 1), np.int8), None, 1.0, 1.0, 2**-8)
    assert quantize_multiplier(2.0**6.5)[1] == 7  # the largest scale still accepted


# --------------------------------------------------------------------------------------------
# add and mul
# --------------------------------------------------------------------------------------------


def tflite_multiply_by_quantized_multiplier(x: int, multiplier: int, shift: int) -> int:
    """TFLite MultiplyByQuantizedMultiplier (int32): SaturatingRoundingDoublingHighMul (nudge,
    then division truncating toward zero) of x * 2^max(shift, 0) by the multiplier, then
    RoundingDivideByPOT by max(-shift, 0); edgec saturates the left shift."""
    x = min(max(x * 2 ** max(shift, 0), INT32_MIN), INT32_MAX)
    ab = x * multiplier
    nudge = 2**30 if ab >= 0 else 1 - 2**30
    high = (abs(ab + nudge) >> 31) * (1 if ab + nudge >= 0 else -1)  # C division: toward zero
    exponent = max(-shift, 0)
    mask = (1 << exponent) - 1
    remainder, result = high & mask, high >> exponent
    return result + (remainder > (mask >> 1) + (result < 0))


def reference_binary(op: str, x1: np.ndarray, x2: np.ndarray, d: dict) -> np.ndarray:
    """TFLite reference_integer_ops Add / Mul (int16, offsets 0), per broadcast element."""
    a, b = np.broadcast_arrays(x1, x2)
    out = np.zeros(a.shape, dtype=np.int16)
    for index in np.ndindex(a.shape):
        v1, v2 = int(a[index]), int(b[index])
        if op == "add":
            s1 = tflite_multiply_by_quantized_multiplier(
                v1 * 2 ** d["left_shift"], d["input1_multiplier"], d["input1_shift"]
            )
            s2 = tflite_multiply_by_quantized_multiplier(
                v2 * 2 ** d["left_shift"], d["input2_multiplier"], d["input2_shift"]
            )
            y = tflite_multiply_by_quantized_multiplier(s1 + s2, d["output_multiplier"], d["output_shift"])
        else:
            y = tflite_multiply_by_quantized_multiplier(v1 * v2, d["output_multiplier"], d["output_shift"])
        out[index] = min(max(y, d["act_min"]), d["act_max"])
    return out


BINARY = {
    "add": (int16.add_s16_desc, int16.add_s16, "edgec_add_s16"),
    "mul": (int16.mul_s16_desc, int16.mul_s16, "edgec_mul_s16"),
}


def broadcast_shapes(rng) -> tuple[tuple[int, ...], tuple[int, ...]]:
    rank = int(rng.integers(1, 5))
    out = [int(v) for v in rng.integers(1, 6, rank)]
    shapes = []
    for _ in range(2):
        shape = [1 if rng.random() < 0.3 else d for d in out]
        shapes.append(tuple(shape[int(rng.integers(0, rank)) if rng.random() < 0.3 else 0 :]) or (1,))
    return shapes[0], shapes[1]


def random_binary(rng, op: str):
    shape1, shape2 = broadcast_shapes(rng)
    s1, s2 = (float(2.0 ** rng.uniform(-12, -2)) for _ in range(2))
    s_out = (max(s1, s2) if op == "add" else s1 * s2 * 2**15) * 2 ** rng.uniform(-1, 4)
    if rng.random() < 0.15:  # extreme scale ratios
        s2 = s1 * float(rng.choice([2.0**-20, 2.0**20, 1.0]))
    act_min, act_max = act_range(rng)
    desc = BINARY[op][0](shape1, shape2, s1, s2, s_out, act_min=act_min, act_max=act_max)
    if rng.random() < 0.15:
        desc.update(
            output_multiplier=int(rng.choice([2**31 - 1, 2**30, 0])), output_shift=int(rng.choice([-31, 0, 15, 31]))
        )
    return int16_array(rng, shape1), int16_array(rng, shape2), desc


def run_binary_c(lib, op: str, desc: dict, x1, x2, output_size: int, out=None):
    fn = getattr(lib, BINARY[op][2])
    fn.argtypes = [C.POINTER(BinaryS16Desc), C.POINTER(C.c_int16), C.POINTER(C.c_int16), C.POINTER(C.c_int16)]
    fn.restype = C.c_int
    c_desc = struct_from_desc(BinaryS16Desc, desc, [])
    x1, x2 = np.ascontiguousarray(x1), np.ascontiguousarray(x2)
    if out is None:
        out = np.full(output_size + GUARD, GUARD_VALUE, dtype=np.int16)
    status = fn(C.byref(c_desc), ptr(x1, C.c_int16), ptr(x2, C.c_int16), ptr(out, C.c_int16))
    return status, out


@settings(max_examples=300, **SETTINGS)
@given(seed=st.integers(0, 2**32 - 1), op=st.sampled_from(["add", "mul"]))
def test_binary_golden_matches_c(kernel_lib, seed, op):
    x1, x2, desc = random_binary(np.random.default_rng(seed), op)
    expected = BINARY[op][1](x1, x2, desc)
    status, out = run_binary_c(kernel_lib, op, desc, x1, x2, expected.size)
    assert status == 0
    assert (out[expected.size :] == GUARD_VALUE).all()
    np.testing.assert_array_equal(out[: expected.size].reshape(expected.shape), expected)


@pytest.mark.parametrize("op", ["add", "mul"])
def test_binary_golden_matches_slow_reference(op):
    rng = np.random.default_rng(7)
    for _ in range(60):
        x1, x2, desc = random_binary(rng, op)
        np.testing.assert_array_equal(BINARY[op][1](x1, x2, desc), reference_binary(op, x1, x2, desc))


@pytest.mark.parametrize("op", ["add", "mul"])
def test_binary_in_place_and_refusals(kernel_lib, op):
    rng = np.random.default_rng(8)
    x1, x2 = int16_array(rng, (3, 5)), int16_array(rng, (5,))
    desc = BINARY[op][0](x1.shape, x2.shape, 2**-8, 2**-9, 2**-7 if op == "add" else 2**-10)
    expected = BINARY[op][1](x1, x2, desc)
    buffer = x1.copy()
    status, _ = run_binary_c(kernel_lib, op, desc, buffer, x2, 0, out=buffer)
    assert status == 0
    np.testing.assert_array_equal(buffer, expected)
    for name, value in (
        ("num_dims", 0),
        ("num_dims", 7),
        ("left_shift", 17),
        ("left_shift", -1),
        ("output_multiplier", -1),
        ("output_shift", 32),
        ("input1_shift", -32),
        ("act_min", -32769),
        ("act_max", 32768),
        ("dims", (0, 5, 1, 1, 1, 1)),
        ("strides1", (-5, 1, 0, 0, 0, 0)),
        ("dims", (2**16, 2**16, 1, 1, 1, 1)),
    ):
        status, out = run_binary_c(kernel_lib, op, {**desc, name: value}, x1, x2, 8)
        assert status == ARG_ERROR, (name, value)
        assert (out == GUARD_VALUE).all()
    for act_min, act_max in ((1, 0), (32767, -32768)):
        status, out = run_binary_c(kernel_lib, op, {**desc, "act_min": act_min, "act_max": act_max}, x1, x2, 8)
        assert status == ARG_ERROR
        assert (out == GUARD_VALUE).all()


# --------------------------------------------------------------------------------------------
# pooling
# --------------------------------------------------------------------------------------------

POOL = {"max_pool": (int16.max_pool_s16, "edgec_max_pool_s16"), "avg_pool": (int16.avg_pool_s16, "edgec_avg_pool_s16")}


def random_pool(rng, kind: str) -> Case:
    while True:
        kernel = tuple(int(v) for v in rng.integers(1, 5, 2))
        stride = tuple(int(v) for v in rng.integers(1, 4, 2))
        pad = tuple(int(rng.integers(0, k)) if rng.random() < 0.5 else 0 for k in kernel)
        hw = tuple(int(v) for v in rng.integers(1, 7, 2))
        ceil_mode = bool(rng.random() < 0.3)
        if all(h + 2 * p >= k for h, p, k in zip(hw, pad, kernel)):
            break
    out_hw = tuple(pool_output_size(h, k, s, p, ceil_mode) for h, k, s, p in zip(hw, kernel, stride, pad))
    shape = (int(rng.integers(1, 3)), *hw, int(rng.integers(1, 8)))
    divisor = "in_bounds"
    if kind == "avg_pool":
        divisor = ["in_bounds", "include_pad", int(rng.integers(1, 40)), 2**23][int(rng.choice([0, 0, 1, 1, 2, 3]))]
    act_min, act_max = act_range(rng)
    desc = int16.pool_s16_desc(
        shape, kernel=kernel, stride=stride, pad=pad, out_hw=out_hw, divisor=divisor, act_min=act_min, act_max=act_max
    )
    return Case(kind, desc, int16_array(rng, shape))


def reference_pool(case: Case) -> np.ndarray:
    """TFLite reference_integer_ops MaxPool / AveragePool (int16) per output element; the average's
    divisor by PyTorch's rules when count_include_pad or divisor_override is set."""
    d = case.desc
    n_, h, w, c = d["batches"], d["input_h"], d["input_w"], d["channels"]
    x = case.x.reshape(n_, h, w, c).tolist()
    out = np.zeros((n_, d["output_h"], d["output_w"], c), dtype=np.int16)
    for n in range(n_):
        for oy in range(d["output_h"]):
            for ox in range(d["output_w"]):
                y_origin, x_origin = oy * d["stride_h"] - d["pad_top"], ox * d["stride_w"] - d["pad_left"]
                ys = range(max(0, y_origin), min(h, y_origin + d["filter_h"]))
                xs = range(max(0, x_origin), min(w, x_origin + d["filter_w"]))
                count = len(ys) * len(xs)
                if d["divisor_override"]:
                    count = d["divisor_override"]
                elif d["count_include_pad"]:
                    count = (min(y_origin + d["filter_h"], h + d["pad_top"]) - y_origin) * (
                        min(x_origin + d["filter_w"], w + d["pad_left"]) - x_origin
                    )
                for ch in range(c):
                    values = [x[n][iy][ix][ch] for iy in ys for ix in xs]
                    if case.kind == "max_pool":
                        y = max(values)
                    else:
                        acc = sum(values)
                        num = acc + count // 2 if acc > 0 else acc - count // 2
                        y = abs(num) // count * (1 if num >= 0 else -1)
                    out[n, oy, ox, ch] = min(max(y, d["act_min"]), d["act_max"])
    return out


def run_pool_c(lib, kind: str, desc: dict, x: np.ndarray, output_size: int):
    fn = getattr(lib, POOL[kind][1])
    fn.argtypes = [C.POINTER(PoolS16Desc), C.POINTER(C.c_int16), C.POINTER(C.c_int16)]
    fn.restype = C.c_int
    c_desc = struct_from_desc(PoolS16Desc, desc, [])
    x = np.ascontiguousarray(x)
    out = np.full(output_size + GUARD, GUARD_VALUE, dtype=np.int16)
    return fn(C.byref(c_desc), ptr(x, C.c_int16), ptr(out, C.c_int16)), out


@settings(max_examples=200, **SETTINGS)
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["max_pool", "avg_pool"]))
def test_pool_golden_matches_c(kernel_lib, seed, kind):
    case = random_pool(np.random.default_rng(seed), kind)
    expected = case.golden()
    status, out = run_pool_c(kernel_lib, kind, case.desc, case.x, expected.size)
    assert status == 0
    assert (out[expected.size :] == GUARD_VALUE).all()
    np.testing.assert_array_equal(out[: expected.size].reshape(expected.shape), expected)


@pytest.mark.parametrize("kind", ["max_pool", "avg_pool"])
def test_pool_golden_matches_slow_reference(kind):
    rng = np.random.default_rng(9)
    for _ in range(60):
        case = random_pool(rng, kind)
        np.testing.assert_array_equal(case.golden(), reference_pool(case))


@pytest.mark.parametrize("kind", ["max_pool", "avg_pool"])
def test_pool_refusals(kernel_lib, kind):
    desc = int16.pool_s16_desc((1, 4, 4, 3), kernel=(2, 2), stride=(2, 2), pad=(1, 1), out_hw=(3, 3))
    x = np.zeros((1, 4, 4, 3), np.int16)
    assert run_pool_c(kernel_lib, kind, desc, x, 27)[0] == 0
    for name, value in (
        ("batches", 0),
        ("channels", 0),
        ("pad_top", 2),
        ("output_h", 4),
        ("stride_w", 0),
        ("count_include_pad", 2),
        ("divisor_override", -1),
        ("divisor_override", 2**23 + 1),
        ("act_min", -32769),
        ("act_max", 32768),
        ("filter_h", 0),
    ):
        status, out = run_pool_c(kernel_lib, kind, {**desc, name: value}, x, 8)
        assert status == ARG_ERROR, (name, value)
        assert (out == GUARD_VALUE).all()


# --------------------------------------------------------------------------------------------
# lookup tables and softmax
# --------------------------------------------------------------------------------------------


def _int16(v: int) -> int:
    """static_cast<int16_t> of an int (two's complement)."""
    return (v + 2**15) % 2**16 - 2**15


def reference_lut_lookup(value: int, lut) -> int:
    """TFLite LUTLookup(int16_t value, const int16_t* lut), line by line."""
    index = 256 + (value >> 7)
    offset = value & 0x7F
    base = int(lut[index])
    slope = _int16(int(lut[index + 1]) - int(lut[index]))
    delta = (slope * offset + 64) >> 7
    return _int16(base + delta)


def reference_softmax(desc: dict, x: np.ndarray) -> np.ndarray:
    """TFLite reference_ops::SoftmaxInt16 (with SoftMaxCalculateExp), per row, in Python ints."""
    rows = np.moveaxis(x.reshape(desc["outer"], desc["axis_size"], desc["inner"]), 1, 2).reshape(-1, desc["axis_size"])
    out = []
    for row in rows.tolist():
        max_in_row = max(row)
        exps = []
        for v in row:
            scaled = tflite_multiply_by_quantized_multiplier(
                v - max_in_row, desc["input_multiplier"], desc["input_left_shift"]
            )
            exps.append(reference_lut_lookup(min(max(scaled + 32767, -32768), 32767), desc["exp_lut"]))
        total = sum(exps)
        headroom_plus_one = 32 - total.bit_length()
        shifted_sum = ((total << (headroom_plus_one - 1)) + (1 << 13)) >> 14
        sym = min(max(shifted_sum - ((1 << 15) + (1 << 16)), -32768), 32767)
        reciprocal = reference_lut_lookup(sym, desc["one_over_one_plus_x_lut"])
        right_shift = 31 - headroom_plus_one
        out.append([min(max((e * reciprocal + (1 << (right_shift - 1))) >> right_shift, 0), 32767) for e in exps])
    out = np.array(out, dtype=np.int16).reshape(desc["outer"], desc["inner"], desc["axis_size"])
    return np.moveaxis(out, 1, 2).reshape(-1)


def gelu(v):
    return np.float32(0.5) * v * (np.float32(1.0) + np.float32(math.erf(float(v) / math.sqrt(2.0))))


def random_lut(rng) -> Case:
    size = int(rng.integers(1, 300))
    style = int(rng.integers(4))
    if style == 0:  # any table: neighbours up to the full int16 range apart (the wrapping slope)
        desc = {"size": size, "table": rng.integers(INT16_MIN, INT16_MAX + 1, 513).astype(np.int16)}
    else:
        function = ["sigmoid", "tanh", gelu][style - 1]
        s_in = float(2.0 ** rng.uniform(-14, -8))
        desc = int16.lut_s16_desc(size, function, s_in, 2.0**-15 if style < 3 else s_in)
    return Case("lut", desc, int16_array(rng, (size,)))


def random_softmax(rng) -> Case:
    outer, axis, inner = int(rng.integers(1, 4)), int(rng.choice([1, 2, 5, 17, 300])), int(rng.integers(1, 4))
    desc = SOFTMAX_DESCS[int(rng.integers(len(SOFTMAX_DESCS)))]
    x = int16_array(rng, (outer * axis * inner,))
    return Case("softmax", {**desc, "outer": outer, "axis_size": axis, "inner": inner}, x)


# input scales (and a beta) for softmax: multipliers with right and left shifts
SOFTMAX_DESCS = [
    int16.softmax_s16_desc(1, 1, 1, s, beta)
    for s, beta in ((2.0**-12, 1.0), (1 / 3000, 1.0), (2.0**-8, 1.0), (0.01, 0.5), (1e-6, 1.0), (0.5, 1.0))
]


def run_table_c(lib, case: Case, out=None):
    cls, name = {"lut": (LutS16Desc, "edgec_lut_s16"), "softmax": (SoftmaxS16Desc, "edgec_softmax_s16")}[case.kind]
    fn = getattr(lib, name)
    fn.argtypes = [C.POINTER(cls), C.POINTER(C.c_int16), C.POINTER(C.c_int16)]
    fn.restype = C.c_int
    keep: list = []
    c_desc = struct_from_desc(cls, case.desc, keep)
    x = np.ascontiguousarray(case.x)
    if out is None:
        out = np.full(x.size + GUARD, GUARD_VALUE, dtype=np.int16)
    return fn(C.byref(c_desc), ptr(x, C.c_int16), ptr(out, C.c_int16)), out


@settings(max_examples=200, **SETTINGS)
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["lut", "softmax"]))
def test_table_kernels_golden_match_c(kernel_lib, seed, kind):
    rng = np.random.default_rng(seed)
    case = random_lut(rng) if kind == "lut" else random_softmax(rng)
    expected = case.golden()
    status, out = run_table_c(kernel_lib, case)
    assert status == 0
    assert (out[expected.size :] == GUARD_VALUE).all()
    np.testing.assert_array_equal(out[: expected.size], expected)
    in_place = case.x.copy()
    assert run_table_c(kernel_lib, Case(case.kind, case.desc, in_place), out=in_place)[0] == 0
    np.testing.assert_array_equal(in_place, expected)


def test_table_kernels_golden_match_slow_reference():
    rng = np.random.default_rng(12)
    for _ in range(30):
        case = random_lut(rng)
        assert case.golden().tolist() == [reference_lut_lookup(v, case.desc["table"]) for v in case.x.tolist()]
        case = random_softmax(rng)
        np.testing.assert_array_equal(case.golden(), reference_softmax(case.desc, case.x))


def gelu_f32(v):
    """0.5f * v * (1.0f + std::erf(v / std::sqrt(2.0f))) in float."""
    f32 = np.float32
    v = f32(v)
    return f32(0.5) * v * (f32(1.0) + f32(math.erf(float(v / f32(math.sqrt(2.0))))))


# sha256 (first 16 hex digits) of the little-endian tables TFLite's own
# detail::LUTPopulateInt16<float> (tensorflow/lite/kernels/internal/common.h, tflite-micro
# 90b983c2b3f1480642e040bbd2ddb37b998f3424) wrote when compiled with g++ and glibc on x86-64.
TFLITE_TABLE_HASHES = {
    "softmax exp": "1f064505e52b5558",
    "softmax 1/(1+x)": "36dabd62f9189220",
    "sigmoid 2^-11 -> 2^-15": "aefc1bf0dd758ce5",
    "tanh 2^-12 -> 2^-15": "76e4822c005d334c",
    "sigmoid 0.003f -> 0.0007f": "caccb336b8098e93",
    "gelu 2^-10 -> 2^-11": "7871a357c36bf1f7",
}


def test_tables_equal_tflite_lut_populate():
    softmax = int16.softmax_s16_desc(1, 1, 1, 1 / 256)
    tables = {
        "softmax exp": softmax["exp_lut"],
        "softmax 1/(1+x)": softmax["one_over_one_plus_x_lut"],
        "sigmoid 2^-11 -> 2^-15": int16.lut_s16_desc(1, "sigmoid", 2**-11, 2**-15)["table"],
        "tanh 2^-12 -> 2^-15": int16.lut_s16_desc(1, "tanh", 2**-12, 2**-15)["table"],
        "sigmoid 0.003f -> 0.0007f": int16.lut_s16_desc(1, "sigmoid", np.float32(0.003), np.float32(0.0007))["table"],
        "gelu 2^-10 -> 2^-11": int16.lut_s16_desc(1, gelu_f32, 2**-10, 2**-11)["table"],
    }
    for name, table in tables.items():
        assert hashlib.sha256(table.astype("<i2").tobytes()).hexdigest()[:16] == TFLITE_TABLE_HASHES[name], name


def test_lut_tables_approximate_their_functions():
    """sigmoid, tanh and GELU through the 513-entry tables (segments of 128 input steps) stay within
    7 output steps of float64 (tanh over [-8, 8): 6), and within 1 on average."""
    x = np.arange(INT16_MIN, INT16_MAX + 1, dtype=np.int16)
    for function, exact, s_in, s_out in (
        ("sigmoid", lambda v: 1 / (1 + np.exp(-v)), 2.0**-11, 2.0**-15),
        ("tanh", np.tanh, 2.0**-12, 2.0**-15),
        (gelu, None, 2.0**-11, 2.0**-11),
    ):
        desc = int16.lut_s16_desc(x.size, function, s_in, s_out)
        got = int16.lut_s16(desc, x).astype(np.float64) * s_out
        real = x * s_in
        want = exact(real) if exact else 0.5 * real * (1 + np.vectorize(math.erf)(real / math.sqrt(2)))
        error = np.abs(got - np.clip(want, INT16_MIN * s_out, INT16_MAX * s_out)) / s_out
        assert error.max() <= 7 and error.mean() < 1


def test_softmax_approximates_float():
    rng = np.random.default_rng(4)
    for s_in in (2.0**-12, 2.0**-9, 1 / 3000):
        x = rng.integers(-20000, 20000, (4, 10)).astype(np.int16)
        desc = int16.softmax_s16_desc(4, 10, 1, s_in)
        got = int16.softmax_s16(desc, x).reshape(4, 10) / 32768
        real = x * s_in
        want = np.exp(real - real.max(1, keepdims=True))
        # exp is tabulated over [-10, 0] (TFLite's choice): terms below exp(-10) are lost
        np.testing.assert_allclose(got, want / want.sum(1, keepdims=True), atol=2e-3)


def test_table_kernels_refuse_bad_descriptors(kernel_lib):
    lut = random_lut(np.random.default_rng(1))
    for bad in ({**lut.desc, "size": 0}, {**lut.desc, "table": None}):
        assert run_table_c(kernel_lib, Case("lut", bad, lut.x))[0] == ARG_ERROR
    softmax = random_softmax(np.random.default_rng(2))
    negative, zero_top = softmax.desc["exp_lut"].copy(), softmax.desc["exp_lut"].copy()
    negative[3], zero_top[511:] = -1, 0
    for name, value in (
        ("outer", 0),
        ("axis_size", 0),
        ("axis_size", 65537),
        ("inner", 0),
        ("input_multiplier", -1),
        ("input_left_shift", 32),
        ("exp_lut", None),
        ("one_over_one_plus_x_lut", None),
        ("exp_lut", negative),
        ("exp_lut", zero_top),
    ):
        status, out = run_table_c(kernel_lib, Case("softmax", {**softmax.desc, name: value}, softmax.x))
        assert status == ARG_ERROR, name
        assert (out == GUARD_VALUE).all()


# --------------------------------------------------------------------------------------------
# int8 <-> int16 requantization
# --------------------------------------------------------------------------------------------

REQUANTIZE = {
    "s8_s16": (int16.requantize_s8_s16, "edgec_requantize_s8_s16", np.int8, np.int16, C.c_int8, C.c_int16),
    "s16_s8": (int16.requantize_s16_s8, "edgec_requantize_s16_s8", np.int16, np.int8, C.c_int16, C.c_int8),
}


def random_requantize(rng, kind: str) -> Case:
    size = int(rng.integers(1, 200))
    s8_scale = float(2.0 ** rng.uniform(-8, 0))
    s16_scale = s8_scale * float(2.0 ** rng.uniform(-10, -5))
    zp8 = int(rng.choice([-128, 127, 0, int(rng.integers(-128, 128))]))
    if kind == "s8_s16":
        desc = int16.requantize_s16_desc(size, s8_scale, zp8, s16_scale, 0)
        x = int8_array(rng, (size,))
    else:
        desc = int16.requantize_s16_desc(size, s16_scale, 0, s8_scale, zp8)
        x = int16_array(rng, (size,))
    if rng.random() < 0.2:
        desc.update(multiplier=int(rng.choice([2**31 - 1, 2**30, 0])), shift=int(rng.choice([-31, -1, 0, 15, 31])))
    return Case(kind, desc, x)


def reference_requantize(case: Case) -> list[int]:
    """TFLite reference_ops::Requantize, element by element."""
    lo, hi = (-32768, 32767) if case.kind == "s8_s16" else (-128, 127)
    d = case.desc
    return [
        min(
            max(
                tflite_multiply_by_quantized_multiplier(v + d["input_offset"], d["multiplier"], d["shift"])
                + d["output_offset"],
                lo,
            ),
            hi,
        )
        for v in case.x.tolist()
    ]


def run_requantize_c(lib, case: Case, size: int):
    _, name, _, out_type, c_in, c_out = REQUANTIZE[case.kind]
    fn = getattr(lib, name)
    fn.argtypes = [C.POINTER(RequantizeS16Desc), C.POINTER(c_in), C.POINTER(c_out)]
    fn.restype = C.c_int
    c_desc = struct_from_desc(RequantizeS16Desc, case.desc, [])
    x = np.ascontiguousarray(case.x)
    out = np.full(size + GUARD, 0x5A, dtype=out_type)
    return fn(C.byref(c_desc), ptr(x, c_in), ptr(out, c_out)), out


@settings(max_examples=200, **SETTINGS)
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(sorted(REQUANTIZE)))
def test_requantize_golden_matches_c_and_reference(kernel_lib, seed, kind):
    case = random_requantize(np.random.default_rng(seed), kind)
    expected = case.golden()
    assert expected.tolist() == reference_requantize(case)
    status, out = run_requantize_c(kernel_lib, case, expected.size)
    assert status == 0
    assert (out[expected.size :] == 0x5A).all()
    np.testing.assert_array_equal(out[: expected.size], expected)


@pytest.mark.parametrize("kind", sorted(REQUANTIZE))
def test_requantize_refusals(kernel_lib, kind):
    case = random_requantize(np.random.default_rng(5), kind)
    in_limit = 128 if kind == "s8_s16" else 32768
    out_limit = 32768 if kind == "s8_s16" else 128
    for name, value in (
        ("size", 0),
        ("input_offset", in_limit + 1),
        ("input_offset", -in_limit),
        ("output_offset", out_limit),
        ("output_offset", -out_limit - 1),
        ("multiplier", -1),
        ("shift", 32),
        ("shift", -32),
    ):
        status, out = run_requantize_c(kernel_lib, Case(kind, {**case.desc, name: value}, case.x), 8)
        assert status == ARG_ERROR, (name, value)
        assert (out == 0x5A).all()


# --------------------------------------------------------------------------------------------
# Cortex-M4 (DSP) and Cortex-M55 under QEMU
# --------------------------------------------------------------------------------------------

DRIVER = ROOT / "tests" / "data" / "port" / "s16_kernels.c"
SOURCES = [
    ROOT / "runtime_c" / "src" / "conv" / "edgec_conv_s16.c",
    ROOT / "runtime_c" / "src" / "eltwise" / "edgec_binary_s16.c",
    ROOT / "runtime_c" / "src" / "pool" / "edgec_pool_s16.c",
    ROOT / "runtime_c" / "src" / "activation" / "edgec_lut_s16.c",
    ROOT / "runtime_c" / "src" / "softmax" / "edgec_softmax_s16.c",
    ROOT / "runtime_c" / "src" / "eltwise" / "edgec_requantize_s16.c",
    ROOT / "runtime_c" / "src" / "depthwise" / "edgec_depthwise_conv_s16.c",
    ROOT / "runtime_c" / "src" / "fc" / "edgec_fully_connected_s16.c",
]
KERNEL_CODE = {
    ("conv", "portable"): 0,
    ("conv", "dsp"): 1,
    ("depthwise", "portable"): 2,
    ("fc", "portable"): 3,
    ("fc", "dsp"): 4,
    ("add", "portable"): 5,
    ("mul", "portable"): 6,
    ("max_pool", "portable"): 7,
    ("avg_pool", "portable"): 8,
    ("lut", "portable"): 9,
    ("softmax", "portable"): 10,
    ("s8_s16", "portable"): 11,
    ("s16_s8", "portable"): 12,
}
# The Helium paths (cortex-m55 only; a build without MVE has no such case).
MVE_CODE = {("conv", "mve"): 13, ("fc", "mve"): 14, ("depthwise", "mve"): 15}
# The DSP depthwise path (tested on its own cases: test_s16_depthwise_dsp_arm).
DSP_DEPTHWISE_CODE = {("depthwise", "dsp"): 16}
HEADER_FIELDS, MAX_FIELDS = 9, 32
TARGETS = ("cortex-m4", "cortex-m55")


def _padded(data: bytes) -> bytes:
    return data + bytes(-len(data) % 8)


def scratch_bytes(case: Case, isa: str) -> int:
    if isa == "portable" or case.kind == "depthwise" or (isa == "mve" and case.kind != "conv"):
        return 0
    return (
        int16.conv_s16_dsp_scratch_bytes(case.desc)
        if case.kind == "conv"
        else int16.fully_connected_s16_dsp_scratch_bytes(case.desc)
    )


def record(case: Case, isa: str, output_bytes: int, skew: int = 0) -> bytes:
    """One driver record: header (kernel, payload bytes, output bytes, scratch bytes, input bytes,
    filter bytes, bias count (0: NULL), channels, scratch skew, the descriptor's int fields) then
    x, filter, bias, multiplier, shift, each padded to 8 bytes."""
    d = case.desc
    ints = [
        int(v)
        for value in d.values()
        if not isinstance(value, np.ndarray) and value is not None
        for v in (value if isinstance(value, tuple) else (value,))
    ]
    if case.kind in BINARY:
        arrays, second, bias_count, channels = [case.x, case.x2], case.x2.nbytes, 0, 0
    elif case.kind in POOL or case.kind in REQUANTIZE:
        arrays, second, bias_count, channels = [case.x], 0, 0, 0
    elif case.kind in ("lut", "softmax"):
        tables = [d["table"]] if case.kind == "lut" else [d["exp_lut"], d["one_over_one_plus_x_lut"]]
        table_bytes = np.concatenate(tables).astype(np.int16)
        arrays, second, bias_count, channels = [case.x, table_bytes], table_bytes.nbytes, 0, 0
    else:
        arrays, second = [case.x, d["filter"], d["bias"], d["multiplier"], d["shift"]], d["filter"].nbytes
        bias_count, channels = 0 if d["bias"] is None else len(d["bias"]), len(d["multiplier"])
    payload = b"".join(_padded(np.ascontiguousarray(a).tobytes()) for a in arrays if a is not None)
    header = [
        {**KERNEL_CODE, **MVE_CODE, **DSP_DEPTHWISE_CODE}[case.kind, isa],
        len(payload),
        output_bytes,
        scratch_bytes(case, isa),
        case.x.nbytes,
        second,
        bias_count,
        channels,
        skew,
        *ints,
    ]
    return (
        struct.pack(f"<{HEADER_FIELDS + MAX_FIELDS}i", *header, *[0] * (HEADER_FIELDS + MAX_FIELDS - len(header)))
        + payload
    )


BENCH = {"conv": "Conv2d(16, 16, 3, pad 1) on 8x8x16", "fc": "Linear(256, 64)"}


def bench_cases(rng) -> list[Case]:
    x = int16_array(rng, (1, 8, 8, 16))
    weight = int8_array(rng, (16, 16, 3, 3))
    s_in, s_w, s_out = scales(rng, 144)
    conv = Case(
        "conv",
        int16.conv_s16_desc(x.shape, weight, bias_for(rng, 16, s_in, s_w, s_out), s_in, s_w, s_out, pad=(1, 1)),
        x,
    )
    weight = int8_array(rng, (64, 256))
    s_in, s_w, s_out = scales(rng, 256)
    fc = Case("fc", int16.fully_connected_s16_desc(1, weight, None, s_in, s_w, s_out), int16_array(rng, (1, 256)))
    return [conv, fc]


def arm_cases() -> list[tuple[Case, str, bool, int]]:
    """(case, isa, is_bench, scratch skew): random cases of every kernel and path, the benchmark
    layers, and a misaligned scratch (skew 2) the DSP paths must refuse."""
    rng = np.random.default_rng(23)
    cases = []
    for kind, isa in KERNEL_CODE:
        for _ in range(40):
            if kind in BINARY:
                x1, x2, desc = random_binary(rng, kind)
                cases.append((Case(kind, desc, x1, x2), isa, False, 0))
            elif kind in POOL:
                cases.append((random_pool(rng, kind), isa, False, 0))
            elif kind == "lut":
                cases.append((random_lut(rng), isa, False, 0))
            elif kind == "softmax":
                cases.append((random_softmax(rng), isa, False, 0))
            elif kind in REQUANTIZE:
                cases.append((random_requantize(rng, kind), isa, False, 0))
            else:
                cases.append((random_case(rng, kind, max_c=12), isa, False, 0))
    for case in bench_cases(rng):
        for isa in ("portable", "dsp"):
            cases.append((case, isa, True, 0))
        cases.append((case, "dsp", False, 2))
    return cases


def run_arm(target: str, cases, tmp_path, opt: str = "-O2") -> dict:
    """Runs (case, isa, is_bench, scratch skew) records under QEMU built at `opt`, asserts every
    output equals the golden (and every skewed scratch is refused cleanly); returns the benchmark
    cases' instructions per MAC by (kind, isa)."""
    expected = [case.golden().ravel() for case, _, _, _ in cases]
    elf = toolchain.cross_compile(
        target,
        [DRIVER, *SOURCES],
        [ROOT / "runtime_c" / "include"],
        tmp_path / "kernels.elf",
        opt=opt,
        extra_cflags=["-Wall", "-Wextra", "-Werror", "-pedantic"],
    )
    (tmp_path / "cases.bin").write_bytes(
        b"".join(record(c, isa, e.nbytes, skew) for (c, isa, _, skew), e in zip(cases, expected))
    )
    counts = toolchain.count_instructions(target, elf, timeout=300, cwd=tmp_path)
    assert len(counts["insns"]) == len(cases)
    data, at, failures, bench = (tmp_path / "results.bin").read_bytes(), 0, [], {}
    for (case, isa, is_bench, skew), want, insns in zip(cases, expected, counts["insns"]):
        status, guards = struct.unpack_from("<2i", data, at)
        out = np.frombuffer(data, want.dtype, want.size, at + 8)
        at += 8 + want.nbytes
        what = f"{case.kind} {isa} {case.x.shape}"
        if skew:
            if status != ARG_ERROR or not guards or (out.view(np.uint8) != 0x5A).any():
                failures.append(f"misaligned scratch not refused cleanly: {what}")
        elif status != 0 or not guards:
            failures.append(f"status {status}, guards intact {guards}: {what}")
        elif not np.array_equal(out, want):
            failures.append(f"{np.count_nonzero(out != want)} of {want.size} values differ: {what}")
        if is_bench:
            bench[case.kind, isa] = insns / macs(case)
    assert at == len(data)
    assert not failures, f"{len(failures)} of {len(cases)} fail:\n" + "\n".join(failures[:10])
    return bench


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", TARGETS)
def test_s16_arm(target, tmp_path):
    bench = run_arm(target, arm_cases(), tmp_path)
    for kind, name in BENCH.items():
        print(f"{target} {name}: portable {bench[kind, 'portable']:.2f}, dsp {bench[kind, 'dsp']:.2f} instructions/MAC")
        assert bench[kind, "dsp"] < bench[kind, "portable"]


def extreme_case(kind: str, k: int) -> Case:
    """Every product at 2^22 over K = k (conv: 3x3 windows over k / 9 channels, padded): int32
    sums of more than 511 such terms would overflow; the golden's are exact in int64."""
    if kind == "fc":
        weight = np.full((6, k), -128, dtype=np.int8)
        desc = int16.fully_connected_s16_desc(1, weight, None, 2**-10, 2**-7, 2**4)
        return Case("fc", desc, np.full((1, k), INT16_MIN, dtype=np.int16))
    c_in = k // 9
    weight = np.full((5, c_in, 3, 3), -128, dtype=np.int8)
    desc = int16.conv_s16_desc((1, 3, 3, c_in), weight, None, 2**-10, 2**-7, 2**4, pad=(1, 1))
    return Case("conv", desc, np.full((1, 3, 3, c_in), INT16_MIN, dtype=np.int16))


def one_by_one_padded(rng) -> Case:
    """A 1x1 convolution with padding: the border pixels' taps lie outside the input (read as
    zeros from the gathered column), the inner ones in place."""
    c_in, c_out = 13, 7
    weight = int8_array(rng, (c_out, c_in, 1, 1))
    s_in, s_w, s_out = scales(rng, c_in)
    desc = int16.conv_s16_desc(
        (2, 3, 4, c_in), weight, bias_for(rng, c_out, s_in, s_w, s_out), s_in, s_w, s_out, pad=(1, 1)
    )
    return Case("conv", desc, int16_array(rng, (2, 3, 4, c_in)))


def one_d_padded(rng) -> Case:
    """A 1-D convolution (kernel 1 x 9, stride 4, padded) of 3 channels, as the VAD's encoder:
    the inner windows are read in place, those over the padding gathered."""
    c_in, c_out = 3, 6
    weight = int8_array(rng, (c_out, c_in, 1, 9))
    s_in, s_w, s_out = scales(rng, 27)
    desc = int16.conv_s16_desc(
        (1, 1, 40, c_in), weight, bias_for(rng, c_out, s_in, s_w, s_out), s_in, s_w, s_out, stride=(1, 4), pad=(0, 2)
    )
    return Case("conv", desc, int16_array(rng, (1, 1, 40, c_in)))


def pointwise_layer(rng, shape, c_out: int, stride=(1, 1), trained_bias: bool = True) -> Case:
    """A 1x1 unpadded convolution: the Helium kernel runs it as a fully connected layer over its
    pixels (K up to 511) by groups of four output channels, the last group overlapping."""
    c_in = shape[3]
    weight = int8_array(rng, (c_out, c_in, 1, 1))
    s_in, s_w, s_out = scales(rng, c_in)
    bias = (
        quantize_bias_s64(rng.normal(0, 2**12 * s_out, c_out), s_in, np.broadcast_to(s_w, (c_out,)))
        if trained_bias
        else bias_for(rng, c_out, s_in, s_w, s_out)
    )
    act_min, act_max = act_range(rng)
    desc = int16.conv_s16_desc(shape, weight, bias, s_in, s_w, s_out, stride=stride, act_min=act_min, act_max=act_max)
    if not trained_bias:
        override_quant(rng, desc)
    return Case("conv", desc, int16_array(rng, shape))


def extreme_pointwise(k: int) -> Case:
    """A 1x1 layer over K = k channels, every product at +-2^22 (+ in even output channels, - in
    odd ones): 32-bit sums are exact up to K = 511, a larger K takes the int64 blocks. Shift 7 in
    channel 5 puts requantized sums beyond int32 (the group of channels 2 to 5 takes the scalar
    stage, that of 0 to 3 the vector one)."""
    weight = np.where(np.arange(6) % 2, 127, -128).astype(np.int8).reshape(6, 1, 1, 1).repeat(k, 1)
    desc = int16.conv_s16_desc((1, 2, 3, k), weight, None, 2**-10, 2**-7, 2**4)
    desc["shift"] = np.where(np.arange(6) == 5, 7, desc["shift"]).astype(np.int32)
    return Case("conv", desc, np.full((1, 2, 3, k), INT16_MIN, dtype=np.int16))


def pointwise_mve_cases(rng) -> list[tuple[Case, str, bool, int]]:
    """1x1 layers of 1 to 511 input channels and 1 to 65 outputs (multiples of four and not),
    strides 1 and 2, batches, trained and extreme biases and quantization, the extreme sums on
    both sides of 511 terms."""
    layers = [
        ((1, 3, 4, 1), 4, (1, 1)),
        ((2, 5, 3, 3), 5, (2, 2)),
        ((1, 4, 4, 7), 9, (1, 2)),
        ((1, 5, 5, 13), 17, (2, 1)),
        ((1, 3, 3, 16), 16, (1, 1)),
        ((2, 2, 3, 24), 30, (1, 1)),
        ((1, 5, 5, 64), 64, (1, 1)),
        ((1, 2, 2, 100), 6, (2, 2)),
        ((1, 3, 1, 40), 3, (1, 1)),
        ((1, 2, 2, 9), 65, (1, 1)),
        ((1, 1, 2, 511), 7, (1, 1)),
    ]
    cases = []
    for shape, c_out, stride in layers:
        for trained in (True, False):
            cases.append((pointwise_layer(rng, shape, c_out, stride, trained), "mve", False, 0))
    cases += [(extreme_pointwise(k), "mve", False, 0) for k in (511, 512)]
    return cases


def extreme_depthwise(k: int) -> Case:
    """A k x k window over 5 channels, every product at 2^22: the DSP and Helium sums are exact up to
    511 taps (k = 22: 484), a larger window (k = 23: 529) takes the portable loops."""
    weight = np.full((5, 1, k, k), -128, dtype=np.int8)
    desc = int16.depthwise_conv_s16_desc((1, k, k, 5), weight, None, 2**-10, 2**-7, 2**6)
    return Case("depthwise", desc, np.full((1, k, k, 5), INT16_MIN, dtype=np.int16))


def depthwise_beyond_int32() -> Case:
    """Extreme inputs and weights at multiplier 2^31 - 1 and shift 7 (shift 0 in one channel):
    requantized sums of up to 9 * 2^29 that do not fit int32 before the clamp to int16."""
    c = 10
    weight = np.where(np.arange(c) % 2, 127, -128).astype(np.int8).reshape(c, 1, 1, 1).repeat(3, 2).repeat(3, 3)
    desc = int16.depthwise_conv_s16_desc((1, 4, 4, c), weight, None, 2**-10, 2**-7, 2**4, pad=(1, 1))
    desc["multiplier"] = np.full(c, 2**31 - 1, dtype=np.int32)
    desc["shift"] = np.where(np.arange(c) == 4, 0, 7).astype(np.int32)
    return Case("depthwise", desc, np.full((1, 4, 4, c), INT16_MIN, dtype=np.int16))


def depthwise_layer(
    rng, shape, kernel, stride, pad, ch_mult: int = 1, trained_bias: bool = False, dilation=(1, 1)
) -> Case:
    """A depthwise layer; trained_bias: a bias as quantization gives it (bias_for's styles
    otherwise, extremes among them)."""
    c_in = shape[3]
    weight = int8_array(rng, (c_in * ch_mult, 1, *kernel))
    s_in, s_w, s_out = scales(rng, kernel[0] * kernel[1])
    c_out = c_in * ch_mult
    bias = (
        quantize_bias_s64(rng.normal(0, 2**12 * s_out, c_out), s_in, np.broadcast_to(s_w, (c_out,)))
        if trained_bias
        else bias_for(rng, c_out, s_in, s_w, s_out)
    )
    desc = int16.depthwise_conv_s16_desc(
        shape, weight, bias, s_in, s_w, s_out, stride=stride, pad=pad, dilation=dilation
    )
    return Case("depthwise", desc, int16_array(rng, shape))


# DS-CNN's depthwise layers (64 channels of 25x5, 3x3, padded) on the portable and Helium paths.
DW_BENCH = "depthwise 3x3 pad 1 on 25x5x64"


def depthwise_mve_cases(rng, per_kind: int) -> list[tuple[Case, str, bool, int]]:
    """Random depthwise layers (channel multipliers 1 to 3: those above 1 take the portable loops),
    odd channel counts padded at stride 2, the extreme windows on both sides of 511 taps,
    requantized sums beyond int32, and the DS-CNN layer benchmarked."""
    cases = [(random_case(rng, "depthwise", max_c=19), "mve", False, 0) for _ in range(per_kind)]
    for c in (1, 3, 7, 8, 13, 21):
        cases.append((depthwise_layer(rng, (2, 7, 6, c), (3, 3), (2, 2), (1, 1)), "mve", False, 0))
    cases.append((depthwise_layer(rng, (1, 6, 5, 5), (3, 2), (2, 1), (2, 1), ch_mult=2), "mve", False, 0))
    cases += [(extreme_depthwise(k), "mve", False, 0) for k in (22, 23)]
    cases.append((depthwise_beyond_int32(), "mve", False, 0))
    layer = depthwise_layer(rng, (1, 25, 5, 64), (3, 3), (1, 1), (1, 1), trained_bias=True)
    cases += [(layer, "portable", True, 0), (layer, "mve", True, 0)]
    return cases


def mve_cases(per_kind: int) -> list[tuple[Case, str, bool, int]]:
    """The Helium paths' cases: random layers of up to 40 channels per group (full blocks of four
    output channels and remainders of 1 to 3, C_in not a multiple of 8, 1x1 and k x k windows,
    padding, groups), a padded 1x1 and a padded 1-D layer, K of 3000 and 3600 extreme products, and the benchmark
    layers on the DSP and Helium paths."""
    rng = np.random.default_rng(55)
    cases = []
    for kind in ("conv", "fc"):
        for _ in range(per_kind):
            cases.append((random_case(rng, kind, max_c=40), "mve", False, 0))
        cases.append((extreme_case(kind, 3000 if kind == "fc" else 3600), "mve", False, 0))
    cases.append((one_by_one_padded(rng), "mve", False, 0))
    cases.append((one_d_padded(rng), "mve", False, 0))
    for case in bench_cases(rng):
        for isa in ("dsp", "mve"):
            cases.append((case, isa, True, 0))
    return cases + pointwise_mve_cases(rng) + depthwise_mve_cases(rng, per_kind)


def depthwise_dsp_cases(per_kind: int) -> list[tuple[Case, str, bool, int]]:
    """The DSP depthwise path's cases: random layers (dilation, padding, channel multipliers 1 to 3:
    those above 1 take the portable loops), 1 to 70 channels (fewer than four take the portable
    loops, a count not a multiple of four ends with an overlapping group) at strides 1 and 2,
    padded and dilated, the extreme windows on both sides of 511 taps, requantized sums beyond
    int32, and the DS-CNN layer benchmarked on the portable and DSP paths."""
    rng = np.random.default_rng(16)
    cases = [(random_case(rng, "depthwise", max_c=19), "dsp", False, 0) for _ in range(per_kind)]
    for c in (1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 21, 33, 64, 70):
        cases.append((depthwise_layer(rng, (2, 7, 6, c), (3, 3), (2, 2), (1, 1)), "dsp", False, 0))
        cases.append((depthwise_layer(rng, (1, 6, 5, c), (3, 3), (1, 1), (1, 1), trained_bias=True), "dsp", False, 0))
    cases.append((depthwise_layer(rng, (1, 9, 8, 11), (3, 2), (1, 2), (2, 1), dilation=(2, 3)), "dsp", False, 0))
    cases.append((depthwise_layer(rng, (1, 6, 5, 5), (3, 2), (2, 1), (2, 1), ch_mult=2), "dsp", False, 0))
    cases += [(extreme_depthwise(k), "dsp", False, 0) for k in (22, 23)]
    cases.append((depthwise_beyond_int32(), "dsp", False, 0))
    layer = depthwise_layer(rng, (1, 25, 5, 64), (3, 3), (1, 1), (1, 1), trained_bias=True)
    cases += [(layer, "portable", True, 0), (layer, "dsp", True, 0)]
    return cases


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("opt", ["-O2", "-Os", "-O0"])
def test_s16_depthwise_dsp_arm(opt, tmp_path):
    bench = run_arm("cortex-m4", depthwise_dsp_cases(60 if opt == "-O2" else 25), tmp_path, opt)
    dw = bench["depthwise", "portable"], bench["depthwise", "dsp"]
    print(f"cortex-m4 {opt} {DW_BENCH}: portable {dw[0]:.2f}, dsp {dw[1]:.2f} instructions/MAC")
    assert dw[1] < dw[0]


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("opt", ["-O2", "-Os", "-O0"])
def test_s16_mve_arm(opt, tmp_path):
    bench = run_arm("cortex-m55", mve_cases(60 if opt == "-O2" else 25), tmp_path, opt)
    for kind, name in BENCH.items():
        print(f"cortex-m55 {opt} {name}: dsp {bench[kind, 'dsp']:.2f}, mve {bench[kind, 'mve']:.2f} instructions/MAC")
        if opt != "-O0":
            assert bench[kind, "mve"] < bench[kind, "dsp"]
    dw = bench["depthwise", "portable"], bench["depthwise", "mve"]
    print(f"cortex-m55 {opt} {DW_BENCH}: portable {dw[0]:.2f}, mve {dw[1]:.2f} instructions/MAC")
    assert dw[1] < dw[0]


def macs(case: Case) -> int:
    d = case.desc
    if case.kind == "fc":
        return d["batches"] * d["input_c"] * d["output_c"]
    if case.kind == "depthwise":
        window = d["kernel_h"] * d["kernel_w"]
        return d["batches"] * d["output_h"] * d["output_w"] * d["input_c"] * d["ch_mult"] * window
    return (
        d["batches"]
        * d["output_h"]
        * d["output_w"]
        * d["output_c"]
        * d["kernel_h"]
        * d["kernel_w"]
        * d["input_c"]
        // d["groups"]
    )


# --------------------------------------------------------------------------------------------
# CMSIS-NN's arm_convolve_s16 (plain C, built on the host from CMSIS_NN_DIR)
# --------------------------------------------------------------------------------------------


class _Tile(C.Structure):
    _fields_ = [("w", C.c_int32), ("h", C.c_int32)]


class _ConvParams(C.Structure):
    _fields_ = [
        ("input_offset", C.c_int32),
        ("output_offset", C.c_int32),
        ("stride", _Tile),
        ("padding", _Tile),
        ("dilation", _Tile),
        ("activation", _Tile),  # cmsis_nn_activation {min, max}: two int32 as a tile's
    ]


class _Dims(C.Structure):
    _fields_ = [(name, C.c_int32) for name in "nhwc"]


class _Context(C.Structure):
    _fields_ = [("buf", C.c_void_p), ("size", C.c_int32)]


class _Quant(C.Structure):
    _fields_ = [("multiplier", C.c_void_p), ("shift", C.c_void_p)]


class _Bias(C.Structure):
    _fields_ = [("data", C.c_void_p), ("is_int32_bias", C.c_bool)]


@pytest.fixture(scope="module")
def cmsis_conv_s16(tmp_path_factory):
    checkout = os.environ.get("CMSIS_NN_DIR")
    if not checkout:
        pytest.skip(
            "CMSIS_NN_DIR is not set: no CMSIS-NN checkout to build (git clone https://github.com/ARM-software/CMSIS-NN)"
        )
    root, out = Path(checkout), tmp_path_factory.mktemp("cmsis_nn_conv_s16")
    lib = out / "libcmsis_nn_conv_s16.so"
    sources = (
        "ConvolutionFunctions/arm_convolve_s16.c",
        "ConvolutionFunctions/arm_nn_mat_mult_kernel_s16.c",
        "NNSupportFunctions/arm_nn_mat_mult_nt_t_s16.c",
    )
    subprocess.run(
        ["cc", "-std=c99", "-O1", "-fPIC", "-shared", f"-I{root / 'Include'}"]
        + [str(root / "Source" / s) for s in sources]
        + ["-o", str(lib)],
        check=True,
        capture_output=True,
        text=True,
    )
    return C.CDLL(str(lib))


def run_cmsis_conv(lib, case: Case) -> np.ndarray:
    """arm_convolve_s16 on an ungrouped case: int64 bias (NULL data: none), per-channel quant."""
    d, keep = case.desc, []

    def pointer(array, dtype):
        array = np.ascontiguousarray(array, dtype=dtype)
        keep.append(array)
        return array.ctypes.data

    k = d["kernel_h"] * d["kernel_w"] * d["input_c"]
    buffer = np.zeros(2 * k, np.int16)  # arm_convolve_s16_get_buffer_size: two columns
    out = np.zeros((d["batches"], d["output_h"], d["output_w"], d["output_c"]), np.int16)
    params = _ConvParams(
        0,
        0,
        _Tile(d["stride_w"], d["stride_h"]),
        _Tile(d["pad_left"], d["pad_top"]),
        _Tile(d["dilation_w"], d["dilation_h"]),
        _Tile(d["act_min"], d["act_max"]),
    )
    bias = _Bias(None if d["bias"] is None else pointer(d["bias"], np.int64), False)
    status = lib.arm_convolve_s16(
        C.byref(_Context(buffer.ctypes.data, buffer.nbytes)),
        C.byref(params),
        C.byref(_Quant(pointer(d["multiplier"], np.int32), pointer(d["shift"], np.int32))),
        C.byref(_Dims(d["batches"], d["input_h"], d["input_w"], d["input_c"])),
        C.c_void_p(pointer(case.x, np.int16)),
        C.byref(_Dims(d["output_c"], d["kernel_h"], d["kernel_w"], d["input_c"])),
        C.c_void_p(pointer(d["filter"], np.int8)),
        C.byref(_Dims(1, 1, 1, d["output_c"])),
        C.byref(bias),
        C.byref(_Dims(d["batches"], d["output_h"], d["output_w"], d["output_c"])),
        C.c_void_p(out.ctypes.data),
    )
    assert status == 0
    return out


def test_conv_golden_equals_cmsis_nn(cmsis_conv_s16):
    """The golden (which every edgec_conv_s16 path equals: the tests above) against CMSIS-NN's own
    arm_convolve_s16 on ungrouped layers with K < 512 (its plain-C int32 sum is exact there),
    biases within requantize_s64's input range (CMSIS-NN adds them without saturating) and the
    layers' own multipliers (an extreme one can take arm_nn_requantize_s64's int64 result past
    int32, which CMSIS-NN truncates and edgec saturates)."""
    rng, checked = np.random.default_rng(16), 0
    while checked < 200:
        case = random_case(rng, "conv", max_c=12, quant_override=False)
        bias = case.desc["bias"]
        if case.desc["groups"] != 1 or (bias is not None and (np.abs(bias) >= 2**40).any()):
            continue
        np.testing.assert_array_equal(run_cmsis_conv(cmsis_conv_s16, case), case.golden())
        checked += 1
