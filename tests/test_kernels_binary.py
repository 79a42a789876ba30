"""Elementwise binary ops with broadcasting and PReLU: golden numpy == portable C, byte for byte.

  1. broadcast_layout: the fewest loop levels, and they read what NumPy broadcasting reads;
  2. a slow per-element reference written from TFLite's int8 kernels (reference_integer_ops::Add,
     reference_ops::Sub, reference_integer_ops::Mul, MaximumMinimumBroadcastSlow,
     BroadcastPrelu4DSlow, with gemmlowp's SaturatingRoundingDoublingHighMul and
     RoundingDivideByPOT, NdArrayDesc-style indexing, QuantizeMultiplier from the float scales)
     checks the golden kernels, so golden and C cannot share a bug;
  3. hypothesis: random broadcastable shape pairs up to 6-D with size-1 dims, every op, extreme
     qparams and raw descriptor fields, golden == C (UBSan library); argument checks; in place.
Every C output buffer carries a guard tail that must come back untouched.
"""

from __future__ import annotations

import ctypes as C
import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from edgec.ops.binary import (
    BINARY_MAX_DIMS,
    BINARY_OPS,
    binary_desc,
    binary_s8,
    broadcast_layout,
    prelu_desc,
    prelu_s8,
    prelu_s8_lookup,
    prelu_tables,
)
from edgec.ops.eltwise import add_params, add_s8
from tests.kernel_lib import BinaryDesc, PreluDesc, ptr, struct_from_desc

EDGEC_OK, EDGEC_ARG_ERROR = 0, -1
GUARD = 16
GUARD_BYTE = 0x5A
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
P8 = C.POINTER(C.c_int8)
OPS = tuple(BINARY_OPS)


@pytest.fixture(scope="module")
def lib(kernel_lib):
    kernel_lib.edgec_binary_s8.argtypes = [C.POINTER(BinaryDesc), P8, P8, P8]
    kernel_lib.edgec_prelu_s8.argtypes = [C.POINTER(PreluDesc), P8, P8, P8]
    kernel_lib.edgec_prelu_s8_lookup.argtypes = [C.POINTER(PreluDesc), P8, P8, P8]
    kernel_lib.edgec_binary_s8.restype = kernel_lib.edgec_prelu_s8.restype = C.c_int
    kernel_lib.edgec_prelu_s8_lookup.restype = C.c_int
    return kernel_lib


def call(function, cls, desc: dict, x1: np.ndarray, x2: np.ndarray, size: int) -> tuple[int, np.ndarray]:
    """(status, output) of a C kernel into a guarded buffer of `size` bytes."""
    x1, x2 = np.ascontiguousarray(x1, np.int8), np.ascontiguousarray(x2, np.int8)
    out = np.full(size + GUARD, GUARD_BYTE, dtype=np.int8)
    c_desc = struct_from_desc(cls, desc)
    status = function(C.byref(c_desc), ptr(x1, C.c_int8), ptr(x2, C.c_int8), ptr(out, C.c_int8))
    assert (out[size:] == GUARD_BYTE).all(), "C kernel wrote past the end of its output"
    return status, out[:size]


def c_binary(lib, desc, x1, x2) -> np.ndarray:
    shape = np.broadcast_shapes(x1.shape, x2.shape)
    status, out = call(lib.edgec_binary_s8, BinaryDesc, desc, x1, x2, math.prod(shape))
    assert status == EDGEC_OK
    return out.reshape(shape)


def c_prelu(lib, desc, x, alpha) -> np.ndarray:
    shape = np.broadcast_shapes(x.shape, alpha.shape)
    status, out = call(lib.edgec_prelu_s8, PreluDesc, desc, x, alpha, math.prod(shape))
    assert status == EDGEC_OK
    return out.reshape(shape)


# --------------------------------------------------------------------------------------------
# The slow reference: TFLite's per-element formulas, plain Python integers
# --------------------------------------------------------------------------------------------


def ref_int32(x: int) -> int:
    return (x + 2**31) % 2**32 - 2**31


def ref_quantize_multiplier(d: float) -> tuple[int, int]:
    """TFLite QuantizeMultiplier."""
    if d == 0.0:
        return 0, 0
    q, shift = math.frexp(d)
    q_fixed = int(math.floor(abs(q) * 2**31 + 0.5))  # TfLiteRound of a positive value
    if q_fixed == 2**31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q_fixed, shift


def ref_srdhm(a: int, b: int) -> int:
    """gemmlowp SaturatingRoundingDoublingHighMul: nudge, then C (truncating) division."""
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = 2**30 if ab >= 0 else 1 - 2**30
    total = ab + nudge
    quotient = abs(total) // 2**31
    return ref_int32(quotient if total >= 0 else -quotient)


def ref_rounding_divide_by_pot(x: int, exponent: int) -> int:
    """gemmlowp RoundingDivideByPOT."""
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def ref_multiply_by_quantized_multiplier(x: int, multiplier: int, shift: int) -> int:
    """TFLite MultiplyByQuantizedMultiplier; x * 2^left saturates to int32 (UB in C++ there)."""
    left, right = max(shift, 0), max(-shift, 0)
    return ref_rounding_divide_by_pot(ref_srdhm(max(-(2**31), min(2**31 - 1, x * (1 << left))), multiplier), right)


def ref_params(op: str, q1, q2, q_out) -> dict:
    """TFLite's Prepare arithmetic for int8 ADD/SUB (add.cc), MUL (mul.cc) from float scales."""
    (s1, zp1), (s2, zp2), (s_out, zp_out) = q1, q2, q_out
    p = {"in1_offset": -zp1, "in2_offset": -zp2, "out_offset": zp_out}
    if op in ("add", "sub"):
        twice_max = 2 * max(s1, s2)
        p["left_shift"] = 20
        p["in1"] = ref_quantize_multiplier(s1 / twice_max)
        p["in2"] = ref_quantize_multiplier(s2 / twice_max)
        p["out"] = ref_quantize_multiplier(twice_max / ((1 << 20) * s_out))
    elif op == "mul":
        p["out"] = ref_quantize_multiplier(s1 * s2 / s_out)
    return p


def ref_element(op: str, v1: int, v2: int, p: dict) -> int:
    if op in ("minimum", "maximum"):
        return min(v1, v2) if op == "minimum" else max(v1, v2)
    if op == "mul":
        product = (v1 + p["in1_offset"]) * (v2 + p["in2_offset"])
        return p["out_offset"] + ref_multiply_by_quantized_multiplier(product, *p["out"])
    shifted1 = (v1 + p["in1_offset"]) * (1 << p["left_shift"])
    shifted2 = (v2 + p["in2_offset"]) * (1 << p["left_shift"])
    scaled1 = ref_multiply_by_quantized_multiplier(shifted1, *p["in1"])
    scaled2 = ref_multiply_by_quantized_multiplier(shifted2, *p["in2"])
    raw = ref_int32(scaled1 + scaled2 if op == "add" else scaled1 - scaled2)
    return p["out_offset"] + ref_multiply_by_quantized_multiplier(raw, *p["out"])


def ref_subscripts(out_shape, shape):
    """Per output element (row-major), the flat index it reads from a tensor of `shape`
    (NdArrayDesc: stride 0 along a broadcast dimension)."""
    padded = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
    for index in itertools.product(*(range(d) for d in out_shape)):
        flat = 0
        for i, size in zip(index, padded):
            flat = flat * size + (0 if size == 1 else i)
        yield flat


def ref_binary(op: str, x1: np.ndarray, x2: np.ndarray, p: dict, act_min: int, act_max: int) -> np.ndarray:
    out_shape = np.broadcast_shapes(x1.shape, x2.shape)
    flat1, flat2 = x1.reshape(-1).tolist(), x2.reshape(-1).tolist()
    values = [
        min(act_max, max(act_min, ref_element(op, flat1[i], flat2[j], p)))
        for i, j in zip(ref_subscripts(out_shape, x1.shape), ref_subscripts(out_shape, x2.shape))
    ]
    return np.array(values, dtype=np.int8).reshape(out_shape)


def ref_prelu(x: np.ndarray, alpha: np.ndarray, q_in, q_alpha, q_out, act_min: int, act_max: int) -> np.ndarray:
    """BroadcastPrelu4DSlow with CalculatePreluParams' multipliers."""
    (s_in, zp_in), (s_alpha, zp_alpha), (s_out, zp_out) = q_in, q_alpha, q_out
    identity = ref_quantize_multiplier(s_in / s_out)
    scaled = ref_quantize_multiplier(s_in * s_alpha / s_out)
    out_shape = np.broadcast_shapes(x.shape, alpha.shape)
    flat_x, flat_alpha = x.reshape(-1).tolist(), alpha.reshape(-1).tolist()
    values = []
    for i, j in zip(ref_subscripts(out_shape, x.shape), ref_subscripts(out_shape, alpha.shape)):
        v = flat_x[i] - zp_in
        r = (
            ref_multiply_by_quantized_multiplier(v, *identity)
            if v >= 0
            else ref_multiply_by_quantized_multiplier(v * (flat_alpha[j] - zp_alpha), *scaled)
        )
        values.append(min(act_max, max(act_min, r + zp_out)))
    return np.array(values, dtype=np.int8).reshape(out_shape)


# --------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------


@st.composite
def shape_pairs(draw, max_rank: int = BINARY_MAX_DIMS, max_size: int = 600):
    """Two NumPy-broadcastable shapes, each of rank <= max_rank, sizes 1..5, output <= max_size
    elements; each input keeps or drops (to 1) each output dimension, and may be of lower rank."""
    rank = draw(st.integers(0, max_rank))
    out = draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank))
    while math.prod(out) > max_size:
        out[out.index(max(out))] -= 1
    shapes = []
    for _ in range(2):
        kept = [d if draw(st.booleans()) else 1 for d in out]
        drop = draw(st.integers(0, rank))
        shapes.append(tuple(kept[drop:]))
    # an output dimension both inputs dropped is 1 in the output
    return shapes[0], shapes[1]


def int8_arrays(draw, shape) -> np.ndarray:
    style = draw(st.sampled_from(["random", "random", "extremes"]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if style == "extremes":
        return rng.choice(np.array([-128, -127, 0, 126, 127], dtype=np.int8), shape)
    return rng.integers(-128, 128, shape, dtype=np.int8)


zero_points = st.one_of(st.sampled_from([-128, 127, 0, -1]), st.integers(-128, 127))
scales = st.one_of(st.floats(2.0**-14, 2.0**2), st.sampled_from([2.0**-8, 1.0 / 255, 0.5, 1.0]))


@st.composite
def qparams(draw):
    return draw(scales), draw(zero_points)


@st.composite
def act_ranges(draw):
    lo, hi = sorted((draw(st.integers(-128, 127)), draw(st.integers(-128, 127))))
    return draw(st.sampled_from([(-128, 127), (lo, 127), (-128, hi), (lo, hi)]))


@st.composite
def float_binary_cases(draw, ops=OPS):
    """(op, x1, x2, q1, q2, q_out, act) with qparams drawn as floats."""
    op = draw(st.sampled_from(ops))
    shape1, shape2 = draw(shape_pairs())
    q1 = draw(qparams())
    if op in ("minimum", "maximum"):
        q2 = q_out = q1
    else:
        q2, q_out = draw(qparams()), draw(qparams())
        if op == "mul" and q1[0] * q2[0] / q_out[0] >= 2.0**30:
            q_out = (q1[0] * q2[0], q_out[1])  # keep QuantizeMultiplier's shift within 30
    return op, int8_arrays(draw, shape1), int8_arrays(draw, shape2), q1, q2, q_out, draw(act_ranges())


multipliers = st.one_of(st.sampled_from([0, 1, 2**30, 2**30 + 1, INT32_MAX - 1, INT32_MAX]), st.integers(0, INT32_MAX))
shifts = st.one_of(st.sampled_from([-31, -30, -24, -2, -1, 0, 1, 30, 31]), st.integers(-31, 31))
offsets = st.one_of(st.sampled_from([-127, 128, 0]), st.integers(-127, 128))


@st.composite
def raw_binary_descs(draw, shape1, shape2):
    """A valid descriptor with arbitrary quantization fields (any multiplier, any shift, any left
    shift the kernel accepts): the golden and C must agree even where no float scale leads."""
    desc = binary_desc(draw(st.sampled_from(OPS)), shape1, shape2, (1.0, 0), (1.0, 0), (1.0, 0))
    desc.update(
        input1_offset=draw(offsets),
        input1_multiplier=draw(multipliers),
        input1_shift=draw(shifts),
        input2_offset=draw(offsets),
        input2_multiplier=draw(multipliers),
        input2_shift=draw(shifts),
        left_shift=draw(st.integers(0, 23)),
        output_offset=draw(zero_points),
        output_multiplier=draw(multipliers),
        output_shift=draw(shifts),
    )
    desc["act_min"], desc["act_max"] = draw(act_ranges())
    return desc


# --------------------------------------------------------------------------------------------
# 1. broadcast_layout
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape1,shape2,expected",
    [
        ((4096,), (4096,), ((4096,), (1,), (1,))),  # same shape: one loop
        ((1, 8, 8, 64), (1, 8, 8, 64), ((4096,), (1,), (1,))),
        ((1, 8, 8, 64), (1, 1, 1, 64), ((64, 64), (64, 1), (0, 1))),  # squeeze-excite
        ((1, 1, 1, 64), (1, 8, 8, 64), ((64, 64), (0, 1), (64, 1))),
        ((1, 8, 8, 64), (1,), ((4096,), (1,), (0,))),  # scalar operand
        ((1, 8, 8, 64), (), ((4096,), (1,), (0,))),
        ((1, 8, 8, 64), (1, 8, 8, 1), ((64, 64), (64, 1), (1, 0))),  # per-pixel operand
        ((3, 1, 5), (1, 4, 1), ((3, 4, 5), (5, 0, 1), (0, 1, 0))),  # an outer product
        ((2, 3, 4), (2, 1, 4), ((2, 3, 4), (12, 4, 1), (4, 0, 1))),
        ((1, 1), (1,), ((1,), (1,), (1,))),  # one element
    ],
)
def test_broadcast_layout_merges_dimensions(shape1, shape2, expected):
    assert broadcast_layout(shape1, shape2) == expected


def test_broadcast_layout_refuses_what_numpy_refuses():
    with pytest.raises(ValueError):
        broadcast_layout((2, 3), (4,))
    with pytest.raises(ValueError):
        broadcast_layout((0, 3), (3,))


@settings(max_examples=300, deadline=None)
@given(shape_pairs(max_rank=7, max_size=400))
def test_broadcast_layout_reads_what_numpy_broadcasting_reads(shapes):
    shape1, shape2 = shapes
    dims, strides1, strides2 = broadcast_layout(shape1, shape2)
    out_shape = np.broadcast_shapes(shape1, shape2)
    assert math.prod(dims) == math.prod(out_shape)
    assert all(d > 1 for d in dims) or dims == (1,)
    # minimal: no two neighbours that each input treats alike (both broadcast or both read)
    for k in range(len(dims) - 1):
        assert any((s[k] == 0) != (s[k + 1] == 0) for s in (strides1, strides2))
    for shape, strides in ((shape1, strides1), (shape2, strides2)):
        source = np.arange(math.prod(shape)).reshape(shape)
        index = np.zeros((), dtype=np.int64)
        for size, stride in zip(dims, strides):
            index = index[..., None] + np.arange(size) * stride
        expected = np.broadcast_to(source, out_shape).reshape(-1)
        np.testing.assert_array_equal(source.reshape(-1)[index.reshape(-1)], expected)


def test_binary_desc_fields_and_refusals():
    desc = binary_desc("mul", (1, 8, 8, 64), (1, 1, 1, 64), (0.05, 3), (1 / 256, -128), (0.04, -5), -5, 127)
    assert desc["num_dims"] == 2 and desc["dims"] == (64, 64, 1, 1, 1, 1)
    assert desc["strides1"] == (64, 1, 0, 0, 0, 0) and desc["strides2"] == (0, 1, 0, 0, 0, 0)
    assert (desc["output_multiplier"], desc["output_shift"]) == ref_quantize_multiplier(0.05 / 256 / 0.04)
    assert list(desc)[5:] == list(add_params(1, 0, 1, 0, 1, 0))  # edgec_add_s8_desc's quantization fields, in order
    add = binary_desc("sub", (5,), (5,), (0.1, 1), (0.3, 2), (0.2, 3))
    assert {k: add[k] for k in list(add)[5:]} == add_params(0.1, 1, 0.3, 2, 0.2, 3)
    with pytest.raises(ValueError, match="same scale"):
        binary_desc("maximum", (5,), (5,), (0.1, 1), (0.1, 2), (0.1, 1))
    with pytest.raises(ValueError, match="unknown"):
        binary_desc("div", (5,), (5,), (0.1, 1), (0.1, 1), (0.1, 1))
    with pytest.raises(ValueError, match="loop levels"):  # 7 alternating levels
        binary_desc("add", (2, 1, 2, 1, 2, 1, 2), (1, 2, 1, 2, 1, 2, 1), (1, 0), (1, 0), (1, 0))


# --------------------------------------------------------------------------------------------
# 2. golden against the slow reference
# --------------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(float_binary_cases())
def test_golden_binary_matches_tflite_reference(case):
    op, x1, x2, q1, q2, q_out, (act_min, act_max) = case
    desc = binary_desc(op, x1.shape, x2.shape, q1, q2, q_out, act_min, act_max)
    p = ref_params(op, q1, q2, q_out)
    expected = ref_binary(op, x1, x2, p, act_min, act_max)
    np.testing.assert_array_equal(binary_s8(x1, x2, desc), expected)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_golden_binary_matches_tflite_reference_on_raw_fields(data):
    """Arbitrary multipliers and shifts (left shifts that saturate, sums that wrap)."""
    shape1, shape2 = data.draw(shape_pairs(max_size=60))
    desc = data.draw(raw_binary_descs(shape1, shape2))
    x1, x2 = int8_arrays(data.draw, shape1), int8_arrays(data.draw, shape2)
    op = OPS[desc["op"]]
    p = {
        "in1_offset": desc["input1_offset"],
        "in2_offset": desc["input2_offset"],
        "out_offset": desc["output_offset"],
        "left_shift": desc["left_shift"],
        "in1": (desc["input1_multiplier"], desc["input1_shift"]),
        "in2": (desc["input2_multiplier"], desc["input2_shift"]),
        "out": (desc["output_multiplier"], desc["output_shift"]),
    }
    expected = ref_binary(op, x1, x2, p, desc["act_min"], desc["act_max"])
    np.testing.assert_array_equal(binary_s8(x1, x2, desc), expected)


def test_golden_add_is_the_same_shape_add():
    rng = np.random.default_rng(1)
    for _ in range(20):
        x1, x2 = rng.integers(-128, 128, (2, 3, 5, 7), dtype=np.int8)
        q1, q2, q_out = [(float(2.0 ** rng.uniform(-9, 0)), int(rng.integers(-128, 128))) for _ in range(3)]
        desc = binary_desc("add", x1.shape, x2.shape, q1, q2, q_out, -100, 120)
        np.testing.assert_array_equal(binary_s8(x1, x2, desc), add_s8(x1, x2, add_params(*q1, *q2, *q_out, -100, 120)))


@st.composite
def prelu_cases(draw):
    """(x, alpha, q_in, q_alpha, q_out, act): alpha per channel (last dim), one alpha, or any
    shape that broadcasts against x."""
    shape, alpha_shape = draw(shape_pairs())
    kind = draw(st.sampled_from(["channel", "scalar", "any"]))
    if kind == "channel":
        alpha_shape = shape[-1:]
    elif kind == "scalar":
        alpha_shape = (1,)
    return (
        int8_arrays(draw, shape),
        int8_arrays(draw, alpha_shape),
        draw(qparams()),
        draw(qparams()),
        draw(qparams()),
        draw(act_ranges()),
    )


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prelu_cases())
def test_golden_prelu_matches_tflite_reference(case):
    x, alpha, q_in, q_alpha, q_out, act = case
    desc = prelu_desc(x.shape, alpha.shape, q_in, q_alpha, q_out, *act)
    np.testing.assert_array_equal(prelu_s8(x, alpha, desc), ref_prelu(x, alpha, q_in, q_alpha, q_out, *act))


# --------------------------------------------------------------------------------------------
# 3. golden against C
# --------------------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(float_binary_cases())
@example(
    (
        "mul",
        np.full((1, 8, 8, 64), -128, np.int8),
        np.full((1, 1, 1, 64), 127, np.int8),
        (1.0, 127),
        (1.0, -128),
        (2.0**-14, 0),
        (-128, 127),
    )
)
def test_c_binary_matches_golden(lib, case):
    op, x1, x2, q1, q2, q_out, act = case
    desc = binary_desc(op, x1.shape, x2.shape, q1, q2, q_out, *act)
    np.testing.assert_array_equal(c_binary(lib, desc, x1, x2), binary_s8(x1, x2, desc))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_c_binary_matches_golden_on_raw_fields(lib, data):
    shape1, shape2 = data.draw(shape_pairs())
    desc = data.draw(raw_binary_descs(shape1, shape2))
    x1, x2 = int8_arrays(data.draw, shape1), int8_arrays(data.draw, shape2)
    np.testing.assert_array_equal(c_binary(lib, desc, x1, x2), binary_s8(x1, x2, desc))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prelu_cases(), st.data())
def test_c_prelu_matches_golden(lib, case, data):
    x, alpha, q_in, q_alpha, q_out, act = case
    desc = prelu_desc(x.shape, alpha.shape, q_in, q_alpha, q_out, *act)
    if data.draw(st.booleans()):  # raw multipliers and shifts
        desc.update(
            identity_multiplier=data.draw(multipliers),
            identity_shift=data.draw(shifts),
            alpha_multiplier=data.draw(multipliers),
            alpha_shift=data.draw(shifts),
            input_offset=data.draw(offsets),
            alpha_offset=data.draw(offsets),
        )
    np.testing.assert_array_equal(c_prelu(lib, desc, x, alpha), prelu_s8(x, alpha, desc))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("which", [1, 2])
def test_c_binary_in_place_over_the_unbroadcast_input(lib, op, which):
    """The output may be the input that has the output's shape (the other one broadcast)."""
    rng = np.random.default_rng(7)
    big = rng.integers(-128, 128, (1, 5, 3, 24), dtype=np.int8)
    small = rng.integers(-128, 128, (1, 1, 1, 24), dtype=np.int8)
    x1, x2 = (big, small) if which == 1 else (small, big)
    q = [(0.02, 3), (0.03, -7), (0.05, 1)] if op not in ("minimum", "maximum") else [(0.02, 3)] * 3
    desc = binary_desc(op, x1.shape, x2.shape, *q)
    expected = binary_s8(x1, x2, desc)
    buffer = big.copy()
    in1, in2 = (buffer, small) if which == 1 else (small, buffer)
    status = lib.edgec_binary_s8(
        C.byref(struct_from_desc(BinaryDesc, desc)), ptr(in1, C.c_int8), ptr(in2, C.c_int8), ptr(buffer, C.c_int8)
    )
    assert status == EDGEC_OK
    np.testing.assert_array_equal(buffer, expected)


def test_c_prelu_in_place_over_its_input(lib):
    rng = np.random.default_rng(8)
    x = rng.integers(-128, 128, (1, 4, 4, 16), dtype=np.int8)
    alpha = rng.integers(-128, 128, (16,), dtype=np.int8)
    desc = prelu_desc(x.shape, alpha.shape, (0.05, -3), (0.01, 4), (0.04, 2))
    expected = prelu_s8(x, alpha, desc)
    status = lib.edgec_prelu_s8(
        C.byref(struct_from_desc(PreluDesc, desc)), ptr(x, C.c_int8), ptr(alpha, C.c_int8), ptr(x, C.c_int8)
    )
    assert status == EDGEC_OK
    np.testing.assert_array_equal(x, expected)


@pytest.mark.parametrize("alpha_shape", [(16,), (1,), (1, 5, 1, 16)])
def test_c_prelu_lookup_equals_golden_and_prelu(lib, alpha_shape):
    """edgec_prelu_s8_lookup on tables made by prelu_tables equals its golden and edgec_prelu_s8's
    arithmetic on every input byte, also in place."""
    rng = np.random.default_rng(9)
    x = np.resize(np.arange(-128, 128, dtype=np.int8), (1, 5, 7, 16))
    alpha = rng.integers(-128, 128, alpha_shape, dtype=np.int8)
    desc = prelu_desc(x.shape, alpha.shape, (0.05, -3), (0.01, 4), (0.04, 2), -120, 127)
    tables = prelu_tables(alpha, desc)
    expected = prelu_s8(x, alpha, desc)
    np.testing.assert_array_equal(prelu_s8_lookup(x, tables, desc), expected)
    status, out = call(lib.edgec_prelu_s8_lookup, PreluDesc, desc, tables, x, x.size)
    assert status == EDGEC_OK
    np.testing.assert_array_equal(out.reshape(x.shape), expected)
    c_desc = struct_from_desc(PreluDesc, desc)
    assert lib.edgec_prelu_s8_lookup(C.byref(c_desc), ptr(tables, C.c_int8), ptr(x, C.c_int8), ptr(x, C.c_int8)) == 0
    np.testing.assert_array_equal(x, expected)
    assert lib.edgec_prelu_s8_lookup(C.byref(c_desc), None, ptr(x, C.c_int8), ptr(x, C.c_int8)) == EDGEC_ARG_ERROR


# --------------------------------------------------------------------------------------------
# argument checks
# --------------------------------------------------------------------------------------------


def _valid_binary_desc() -> dict:
    return binary_desc("add", (2, 3, 4), (1, 3, 1), (0.1, 2), (0.2, -3), (0.15, 1))


BAD_BINARY_FIELDS = [
    {"op": -1},
    {"op": 5},
    {"num_dims": 0},
    {"num_dims": 7},
    {"dims": (2, 0, 4, 1, 1, 1)},
    {"dims": (2, -3, 4, 1, 1, 1)},
    {"strides1": (12, -4, 1, 0, 0, 0)},
    {"strides2": (0, 1, -1, 0, 0, 0)},
    {"dims": (65536, 32768, 1, 1, 1, 1), "num_dims": 2},  # 2^31 output elements
    {"strides1": (12, 2**30, 1, 0, 0, 0)},  # input 1 reaches past INT32_MAX
    {"input1_offset": -128},
    {"input1_offset": 129},
    {"input2_offset": 129},
    {"output_offset": 128},
    {"output_offset": -129},
    {"left_shift": -1},
    {"left_shift": 24},
    {"input1_multiplier": -1},
    {"input2_multiplier": -5},
    {"output_multiplier": INT32_MIN},
    {"input1_shift": 32},
    {"input2_shift": -32},
    {"output_shift": 32},
    {"act_min": 10, "act_max": 9},
    {"act_min": -129},
    {"act_max": 128},
]


@pytest.mark.parametrize("bad", BAD_BINARY_FIELDS)
def test_c_binary_refuses_invalid_descriptors(lib, bad):
    desc = {**_valid_binary_desc(), **bad}
    x1, x2 = np.zeros(24, np.int8), np.zeros(3, np.int8)
    status, out = call(lib.edgec_binary_s8, BinaryDesc, desc, x1, x2, 24)
    assert status == EDGEC_ARG_ERROR
    assert (out == GUARD_BYTE).all()


def test_c_binary_refuses_null_pointers(lib):
    c_desc = struct_from_desc(BinaryDesc, _valid_binary_desc())
    x, out = np.zeros(24, np.int8), np.zeros(24, np.int8)
    good = ptr(x, C.c_int8)
    for args in [
        (None, good, good, ptr(out, C.c_int8)),
        (C.byref(c_desc), None, good, ptr(out, C.c_int8)),
        (C.byref(c_desc), good, None, ptr(out, C.c_int8)),
        (C.byref(c_desc), good, good, None),
    ]:
        assert lib.edgec_binary_s8(*args) == EDGEC_ARG_ERROR
    assert lib.edgec_binary_s8(C.byref(c_desc), good, good, ptr(out, C.c_int8)) == EDGEC_OK


@pytest.mark.parametrize(
    "bad",
    [
        {"num_dims": 0},
        {"dims": (4, 0, 1, 1, 1, 1)},
        {"alpha_strides": (0, -1, 0, 0, 0, 0)},
        {"input_offset": -128},
        {"alpha_offset": 129},
        {"output_offset": 128},
        {"identity_multiplier": -1},
        {"alpha_multiplier": -1},
        {"identity_shift": 32},
        {"alpha_shift": -32},
        {"act_min": 5, "act_max": 4},
    ],
)
def test_c_prelu_refuses_invalid_descriptors(lib, bad):
    desc = {**prelu_desc((1, 4, 4, 3), (3,), (0.1, 2), (0.01, 0), (0.1, 2)), **bad}
    status, out = call(lib.edgec_prelu_s8, PreluDesc, desc, np.zeros(48, np.int8), np.zeros(3, np.int8), 48)
    assert status == EDGEC_ARG_ERROR
    assert (out == GUARD_BYTE).all()
    c_desc = struct_from_desc(PreluDesc, prelu_desc((3,), (3,), (0.1, 2), (0.01, 0), (0.1, 2)))
    x = np.zeros(3, np.int8)
    assert lib.edgec_prelu_s8(C.byref(c_desc), ptr(x, C.c_int8), None, ptr(x, C.c_int8)) == EDGEC_ARG_ERROR
