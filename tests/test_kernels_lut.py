"""The lut family: lookup-table activations, softmax over any axis, int8 log_softmax.

Layers of checks:
  1. edgec_lut_s8 and edgec_lut_channels_s8 (one table per channel): golden (the table lookup) == C
     through ctypes (UBSan), in place and apart, at every byte alignment, random and extreme tables;
     argument checks;
  2. the table builders against independent computations: each float function's table against
     torch's own float64 function on the dequantized input, quantized here (equal except at float
     rounding ties, which must be ties to 1e-9); leaky_relu and requantize against a per-element
     transcription of TFLite's integer arithmetic (QuantizeMultiplier, MultiplyByQuantizedMultiplier
     written from quantization_util.cc / common.h, float32 multiplier arithmetic for leaky_relu);
  3. softmax over any axis: the golden against the existing row golden on transposed data, golden
     == C, inner == 1 identical to edgec_softmax_s8;
  4. log_softmax: the golden against a scalar transcription of TFLite's int8 LogSoftmax (with
     gemmlowp's and TFLite's saturating helpers as written there, every int32 intermediate
     range-checked), TFLite Micro's own test vector, loosely against float log_softmax, golden == C;
  5. QEMU: every path of edgec_lut_s8 and edgec_lut_channels_s8 (portable, word, Helium) on
     cortex-m4 and cortex-m55 (the channel tables also at -Os and -O0), softmax over an axis and
     log_softmax, byte for byte with the golden; instruction counts per element.
"""

from __future__ import annotations

import ctypes as C
import math
import struct
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import edgec.ops.softmax as softmax_module
from edgec.ops.lut import (
    FIXED_OUTPUT_QPARAMS,
    FLOAT_FUNCTIONS,
    OBSERVED_OUTPUT_FUNCTIONS,
    lut_channels_s8,
    lut_desc,
    lut_s8,
    lut_table,
)
from edgec.ops.softmax import (
    LOG_SOFTMAX_OUTPUT_SCALE,
    LOG_SOFTMAX_OUTPUT_ZERO_POINT,
    _log_x_for_x_ge_1,
    log_softmax_desc,
    log_softmax_params,
    log_softmax_s8,
    softmax_axis_desc,
    softmax_axis_s8,
    softmax_params,
    softmax_s8,
)
from edgec.targets import toolchain
from tests.device_support import ROOT, needs_toolchain
from tests.kernel_lib import LogSoftmaxDesc, LutChannelsDesc, LutDesc, SoftmaxDesc, ptr
from tests.test_kernels_softmax import (
    I32_MAX,
    I32_MIN,
    _const,
    _i32,
    random_rows,
    ref_exp_on_negative_values,
    ref_one_over_one_plus_x,
    ref_rounding_divide_by_pot,
    ref_saturating_mul_pot,
    ref_srdhm,
)

EDGEC_OK, EDGEC_ARG_ERROR = 0, -1
GUARD = 16
GUARD_BYTE = 0x5A
P8 = C.POINTER(C.c_int8)


# --------------------------------------------------------------------------------------------
# ctypes
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lib(kernel_lib):
    for name, desc in (
        ("edgec_lut_s8", LutDesc),
        ("edgec_softmax_axis_s8", SoftmaxDesc),
        ("edgec_softmax_s8", SoftmaxDesc),
        ("edgec_log_softmax_s8", LogSoftmaxDesc),
    ):
        getattr(kernel_lib, name).argtypes = [C.POINTER(desc), P8, P8]
        getattr(kernel_lib, name).restype = C.c_int
    kernel_lib.edgec_lut_channels_s8.argtypes = [C.POINTER(LutChannelsDesc), P8, P8, P8]
    kernel_lib.edgec_lut_channels_s8.restype = C.c_int
    return kernel_lib


def c_desc(cls, desc: dict, keep: list):
    """The ctypes Structure of a descriptor dict (keys are the struct's fields, in order)."""
    assert list(desc) == [name for name, _ in cls._fields_]
    values = []
    for value in desc.values():
        if isinstance(value, np.ndarray):
            keep.append(value)
            value = ptr(value, C.c_int8)
        values.append(value)
    return cls(*values)


def run_c(lib, name: str, cls, x: np.ndarray, desc: dict, in_place: bool = False, skew: int = 0) -> np.ndarray:
    """Calls the kernel on x (output `skew` bytes into a guard-filled block, input copied there
    too when in place); checks the status and the guard tail; returns the output, x's shape."""
    keep: list = []
    return _guarded(
        x,
        in_place,
        skew,
        lambda src, out: getattr(lib, name)(
            C.byref(c_desc(cls, desc, keep)), src.ctypes.data_as(P8), out.ctypes.data_as(P8)
        ),
    )


def _guarded(x: np.ndarray, in_place: bool, skew: int, call) -> np.ndarray:
    """`call(src, out)` with out `skew` bytes into a guard-filled block (x copied there when in
    place); checks the status and the guard tail; returns the output, x's shape."""
    x = np.ascontiguousarray(x, dtype=np.int8)
    block = np.full(x.size + skew + GUARD, GUARD_BYTE, dtype=np.uint8).view(np.int8)
    out = block[skew : skew + x.size]
    if in_place:
        out[:] = x.ravel()
    assert call(out if in_place else x, out) == EDGEC_OK
    assert (block[skew + x.size :].view(np.uint8) == GUARD_BYTE).all(), "C kernel wrote past its output"
    return out.copy().reshape(x.shape)


# --------------------------------------------------------------------------------------------
# 1. edgec_lut_s8
# --------------------------------------------------------------------------------------------
def random_table(rng) -> np.ndarray:
    style = rng.integers(4)
    if style == 0:
        return rng.integers(-128, 128, 256, dtype=np.int8)
    if style == 1:
        return rng.choice(np.array([-128, 127], dtype=np.int8), 256)
    if style == 2:
        return np.arange(-128, 128).astype(np.int8)  # identity
    return lut_table(
        str(rng.choice(DEFINED_EVERYWHERE)),
        2.0 ** rng.uniform(-8, 0),
        int(rng.integers(-128, 128)),
        2.0 ** rng.uniform(-8, 0),
        int(rng.integers(-128, 128)),
    )


# The float functions of one argument that are numbers on every int8 input (not sqrt of -1).
DEFINED_EVERYWHERE = sorted(set(FLOAT_FUNCTIONS) - {"sqrt", "rsqrt", "log", "pow"})


def random_int8(rng, size: int) -> np.ndarray:
    if rng.random() < 0.2:
        return rng.choice(np.array([-128, 127, 0, -1], dtype=np.int8), size)
    return rng.integers(-128, 128, size, dtype=np.int8)


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    size=st.one_of(st.integers(1, 40), st.integers(1, 5000)),
    in_place=st.booleans(),
    skew=st.integers(0, 3),
)
def test_lut_golden_equals_c(lib, seed, size, in_place, skew):
    rng = np.random.default_rng(seed)
    desc = lut_desc(random_table(rng), size)
    x = random_int8(rng, size)
    expected = lut_s8(x, desc)
    np.testing.assert_array_equal(run_c(lib, "edgec_lut_s8", LutDesc, x, desc, in_place, skew), expected)


def test_lut_every_input_value(lib):
    """All 256 inputs, in both orders: entry x + 128 comes out for input x."""
    table = np.random.default_rng(3).integers(-128, 128, 256, dtype=np.int8)
    x = np.arange(-128, 128).astype(np.int8)
    for values in (x, x[::-1].copy()):
        desc = lut_desc(table, values.size)
        expected = table[values.astype(int) + 128]
        np.testing.assert_array_equal(run_c(lib, "edgec_lut_s8", LutDesc, values, desc), expected)
        np.testing.assert_array_equal(lut_s8(values, desc), expected)


def test_lut_rejects_bad_arguments(lib):
    table = np.zeros(256, dtype=np.int8)
    x = np.zeros(8, dtype=np.int8)
    out = np.zeros(8, dtype=np.int8)
    f = lib.edgec_lut_s8

    def call(size=8, table_ptr=ptr(table, C.c_int8), x_ptr=ptr(x, C.c_int8), out_ptr=ptr(out, C.c_int8)):
        return f(C.byref(LutDesc(size, table_ptr)), x_ptr, out_ptr)

    assert call() == EDGEC_OK
    for bad in (dict(size=0), dict(size=-1), dict(table_ptr=None), dict(x_ptr=None), dict(out_ptr=None)):
        assert call(**bad) == EDGEC_ARG_ERROR, bad
    assert f(None, ptr(x, C.c_int8), ptr(out, C.c_int8)) == EDGEC_ARG_ERROR
    with pytest.raises(ValueError):
        lut_desc(np.zeros(255, dtype=np.int8), 8)
    with pytest.raises(ValueError):
        lut_desc(table, 0)


def random_tables(rng, channels: int) -> np.ndarray:
    return np.stack([random_table(rng) for _ in range(channels)])


def run_channels_c(lib, x: np.ndarray, tables: np.ndarray, desc: dict, in_place=False, skew=0) -> np.ndarray:
    """edgec_lut_channels_s8 on x as run_c calls the one-table kernels (guard, skew, in place)."""
    tables = np.ascontiguousarray(tables, dtype=np.int8)
    c_desc = LutChannelsDesc(desc["pixels"], desc["channels"])
    return _guarded(
        x,
        in_place,
        skew,
        lambda src, out: lib.edgec_lut_channels_s8(
            C.byref(c_desc), ptr(tables, C.c_int8), src.ctypes.data_as(P8), out.ctypes.data_as(P8)
        ),
    )


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    pixels=st.integers(1, 40),
    channels=st.one_of(st.integers(1, 20), st.integers(1, 70)),
    in_place=st.booleans(),
    skew=st.integers(0, 3),
)
def test_lut_channels_golden_equals_c(lib, seed, pixels, channels, in_place, skew):
    rng = np.random.default_rng(seed)
    tables = random_tables(rng, channels)
    desc = {"pixels": pixels, "channels": channels}
    x = random_int8(rng, pixels * channels).reshape(pixels, channels)
    expected = lut_channels_s8(x, tables, desc)
    assert np.array_equal(expected, tables[np.arange(channels), x.astype(int) + 128])
    np.testing.assert_array_equal(run_channels_c(lib, x, tables, desc, in_place, skew), expected)


def test_lut_channels_rejects_bad_arguments(lib):
    tables, x, out = np.zeros(512, np.int8), np.zeros(8, np.int8), np.zeros(8, np.int8)
    f = lib.edgec_lut_channels_s8

    def call(pixels=4, channels=2, t=ptr(tables, C.c_int8), x_ptr=ptr(x, C.c_int8), out_ptr=ptr(out, C.c_int8)):
        return f(C.byref(LutChannelsDesc(pixels, channels)), t, x_ptr, out_ptr)

    assert call() == EDGEC_OK
    for bad in (
        dict(pixels=0),
        dict(channels=0),
        dict(channels=-1),
        dict(t=None),
        dict(x_ptr=None),
        dict(out_ptr=None),
    ):
        assert call(**bad) == EDGEC_ARG_ERROR, bad
    assert f(None, ptr(tables, C.c_int8), ptr(x, C.c_int8), ptr(out, C.c_int8)) == EDGEC_ARG_ERROR


# --------------------------------------------------------------------------------------------
# 2. Table builders
# --------------------------------------------------------------------------------------------
def _torch_function(function: str, attrs: dict):
    if function == "gelu":
        return lambda t: F.gelu(t, approximate=attrs.get("approximate", "none"))
    if function == "elu" and "scale" in attrs:
        return lambda t: torch.ops.aten.elu(t, attrs["alpha"], attrs["scale"], attrs.get("input_scale", 1.0))
    if function == "elu":
        return lambda t: F.elu(t, alpha=attrs.get("alpha", 1.0))
    if function == "celu":
        return lambda t: F.celu(t, alpha=attrs.get("alpha", 1.0))
    if function == "softplus":
        return lambda t: F.softplus(t, beta=attrs.get("beta", 1.0), threshold=attrs.get("threshold", 20.0))
    if function == "pow":
        return lambda t: torch.pow(t, attrs["exponent"])
    return {
        "sigmoid": torch.sigmoid,
        "tanh": torch.tanh,
        "hardswish": F.hardswish,
        "hardsigmoid": F.hardsigmoid,
        "silu": F.silu,
        "mish": F.mish,
        "exp": torch.exp,
        "abs": torch.abs,
        "sign": torch.sign,
        "neg": torch.neg,
        "erf": torch.erf,
        "log_sigmoid": F.logsigmoid,
        "softsign": F.softsign,
        "sin": torch.sin,
        "cos": torch.cos,
        "sqrt": torch.sqrt,
        "rsqrt": torch.rsqrt,
        "reciprocal": torch.reciprocal,
        "log": torch.log,
    }[function]


def torch_table(function: str, s_in, zp_in, s_out, zp_out, **attrs) -> tuple[np.ndarray, np.ndarray]:
    """(table, quotient): torch's float64 function of the dequantized inputs over s_out, rounded
    half away from zero, plus zp_out, clamped; and the unrounded quotient."""
    q = torch.arange(-128, 128, dtype=torch.float64)
    v = _torch_function(function, attrs)(s_in * (q - zp_in)) / s_out
    rounded = torch.where(v >= 0, torch.floor(v + 0.5), torch.ceil(v - 0.5))
    return torch.clamp(rounded + zp_out, -128, 127).to(torch.int8).numpy(), v.numpy()


FUNCTION_CASES = [(name, {}) for name in sorted(FLOAT_FUNCTIONS) if name not in ("gelu", "elu", "softplus", "pow")] + [
    ("gelu", {}),
    ("gelu", {"approximate": "tanh"}),
    ("elu", {}),
    ("elu", {"alpha": 0.3}),
    ("elu", {"alpha": 1.6732632423543772, "scale": 1.0507009873554805}),  # selu
    ("elu", {"alpha": 0.7, "scale": 1.5, "input_scale": 0.5}),
    ("celu", {"alpha": 0.5}),
    ("softplus", {}),
    ("softplus", {"beta": 2.0, "threshold": 5.0}),
    ("softplus", {"beta": 0.5, "threshold": 1.0}),
    ("pow", {"exponent": 2}),
    ("pow", {"exponent": 3}),
    ("pow", {"exponent": -1}),
    ("pow", {"exponent": 0.5}),
]
# Functions defined on x >= 0 only: their tables are built for inputs whose zero point is -128.
NON_NEGATIVE_DOMAIN = {("sqrt", ()), ("rsqrt", ()), ("log", ()), ("pow", (("exponent", 0.5),))}
qparams = st.tuples(
    st.floats(-9.0, 1.0).map(lambda e: 2.0**e),
    st.integers(-128, 127),
    st.floats(-9.0, 1.0).map(lambda e: 2.0**e),
    st.integers(-128, 127),
)


@pytest.mark.parametrize("function, attrs", FUNCTION_CASES, ids=[f"{f}{a or ''}" for f, a in FUNCTION_CASES])
@settings(max_examples=60, deadline=None)
@given(q=qparams, fixed=st.booleans())
def test_float_tables_match_torch(function, attrs, q, fixed):
    s_in, zp_in, s_out, zp_out = q
    if (function, tuple(attrs.items())) in NON_NEGATIVE_DOMAIN:
        zp_in = -128
    if fixed and function in FIXED_OUTPUT_QPARAMS:
        s_out, zp_out = FIXED_OUTPUT_QPARAMS[function]
    table = lut_table(function, s_in, zp_in, s_out, zp_out, **attrs)
    expected, quotient = torch_table(function, s_in, zp_in, s_out, zp_out, **attrs)
    differ = np.flatnonzero(table != expected)
    # Only where the float64 quotient sits on a rounding tie can two float64 evaluations of the
    # same function round differently; there the results differ by one step.
    fraction = np.abs(quotient[differ]) - np.floor(np.abs(quotient[differ]))
    assert (np.abs(fraction - 0.5) < 1e-9 * np.maximum(1.0, np.abs(quotient[differ]))).all(), (
        f"{function}{attrs} differs from torch away from a tie at inputs {differ - 128}"
    )
    assert (np.abs(table[differ].astype(int) - expected[differ]) == 1).all()


def test_float_table_rounds_exact_ties_away_from_zero():
    """Quotients exactly at .5 round away from zero; one ulp below .5 does not round up."""
    # exp(0) = 1: 1 / s_out with s_out = 2/3 (float64 quotient 1.5) and 2/5 (2.5), 2/7 (3.5).
    for s_out, expected in ((2 / 3, 2), (0.4, 3), (2 / 7, 4)):
        assert lut_table("exp", 0.1, 0, s_out, 0)[128] == expected == np.round(1 / s_out + 1e-9)
    # hardswish(x) = x * (x + 3) / 6 at x = 3: 3, and at x = -1: -1/3.
    assert lut_table("hardswish", 1.0, 0, 2.0, 0)[128 + 3] == 2  # 1.5 -> 2
    assert lut_table("hardswish", 1.0, 0, 2.0 / 3.0, 0)[128 - 1] == -1  # -0.5 -> -1
    assert lut_table("exp", 1.0, 0, 1.0 / math.nextafter(0.5, 0.0), 0)[128] == 0  # 0.4999999999999999


def test_fixed_output_qparams():
    assert FIXED_OUTPUT_QPARAMS == {"sigmoid": (1 / 256, -128), "tanh": (1 / 128, 0), "hardsigmoid": (1 / 256, -128)}
    assert OBSERVED_OUTPUT_FUNCTIONS == {
        "hardswish",
        "silu",
        "gelu",
        "elu",
        "celu",
        "sign",
        "softplus",
        "mish",
        "exp",
        "leaky_relu",
        "abs",
        "neg",
        "erf",
        "log_sigmoid",
        "softsign",
        "sin",
        "cos",
        "sqrt",
        "rsqrt",
        "reciprocal",
        "log",
        "pow",
    }
    # The fixed ones cover the function's whole range: sigmoid(+-large) -> -128 / 127 etc.
    for function, (s_out, zp_out) in FIXED_OUTPUT_QPARAMS.items():
        table = lut_table(function, 0.25, 0, s_out, zp_out)
        assert table[0] == -128 and table[-1] == 127
    assert lut_table("sigmoid", 0.25, 0, 1 / 256, -128)[128] == 0  # sigmoid(0) = 1/2


def test_lut_table_rejects_bad_arguments():
    for bad in ((0.0, 0, 0.1, 0), (0.1, 0, -1.0, 0), (0.1, 128, 0.1, 0), (0.1, 0, 0.1, -129), (math.inf, 0, 0.1, 0)):
        with pytest.raises(ValueError):
            lut_table("sigmoid", *bad)
    with pytest.raises(ValueError):
        lut_table("relu7", 0.1, 0, 0.1, 0)
    with pytest.raises(ValueError):
        lut_table("gelu", 0.1, 0, 0.1, 0, approximate="erf")
    with pytest.raises(ValueError):  # TFLite's x << shift overflows
        lut_table("requantize", 1.0, 0, 2.0**-24, 0)
    with pytest.raises(ValueError):
        lut_table("leaky_relu", 1.0, 0, 1.0, 0, negative_slope=2.0**24)


# Per-element transcription of TFLite's integer arithmetic ----------------------------------------
def ref_quantize_multiplier(d: float) -> tuple[int, int]:
    """QuantizeMultiplier (quantization_util.cc, double-rounding build): frexp, round(q * 2^31)
    half away from zero (exact, with Fraction), renormalise 2^31, flush shifts below -31. A
    negative d gives a negative multiplier, as in TFLite."""
    if d == 0.0:
        return 0, 0
    q, shift = math.frexp(d)
    scaled = Fraction(q) * 2**31
    q_fixed = math.floor(abs(scaled) + Fraction(1, 2)) * (1 if scaled > 0 else -1)
    assert q_fixed <= 2**31
    if q_fixed == 2**31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return _i32(q_fixed), shift


def ref_multiply_by_quantized_multiplier(x: int, multiplier: int, shift: int) -> int:
    """common.cc, double rounding: RoundingDivideByPOT(SRDHM(x * (1 << left), m), right)."""
    left, right = max(shift, 0), max(-shift, 0)
    return ref_rounding_divide_by_pot(ref_srdhm(_i32(x * (1 << left)), multiplier), right)


def ref_leaky_relu(q: int, s_in: float, zp_in: int, s_out: float, zp_out: int, alpha: float) -> int:
    """reference_ops::QuantizeLeakyRelu with TFLite Micro's CalculateOpDataLeakyRelu multipliers
    (float32 arithmetic: input->params.scale * params->alpha / output->params.scale)."""
    f32 = np.float32
    m_alpha, shift_alpha = ref_quantize_multiplier(float(f32(s_in) * f32(alpha) / f32(s_out)))
    m_identity, shift_identity = ref_quantize_multiplier(float(f32(s_in) / f32(s_out)))
    x = q - zp_in
    if x >= 0:
        y = zp_out + ref_multiply_by_quantized_multiplier(x, m_identity, shift_identity)
    else:
        scaled = ref_multiply_by_quantized_multiplier(x, abs(m_alpha), shift_alpha)
        y = zp_out + (-scaled if m_alpha < 0 else scaled)
    return max(-128, min(127, y))


def ref_requantize(q: int, s_in: float, zp_in: int, s_out: float, zp_out: int) -> int:
    """reference_ops::Requantize int8 -> int8, multiplier QuantizeMultiplier(double(s_in) / double(s_out))."""
    multiplier, shift = ref_quantize_multiplier(float(s_in) / float(s_out))
    return max(-128, min(127, ref_multiply_by_quantized_multiplier(q - zp_in, multiplier, shift) + zp_out))


slopes = st.one_of(
    st.sampled_from([0.01, 0.1, 0.2, 0.5, 1.0, 0.0, -0.5, -1.0, 2.0, 3.0, 1 / 3]), st.floats(-4.0, 4.0, allow_nan=False)
)
scales32 = st.floats(-12.0, 3.0).map(lambda e: float(np.float32(2.0**e)))


@settings(max_examples=300, deadline=None)
@given(s_in=scales32, zp_in=st.integers(-128, 127), s_out=scales32, zp_out=st.integers(-128, 127), alpha=slopes)
def test_leaky_relu_table_is_tflites_arithmetic(s_in, zp_in, s_out, zp_out, alpha):
    try:
        table = lut_table("leaky_relu", s_in, zp_in, s_out, zp_out, negative_slope=alpha)
    except ValueError:
        assert s_in / s_out * max(1.0, abs(alpha)) > 2.0**22  # only an overflowing multiplier
        return
    expected = [ref_leaky_relu(q, s_in, zp_in, s_out, zp_out, alpha) for q in range(-128, 128)]
    np.testing.assert_array_equal(table, expected)


@settings(max_examples=300, deadline=None)
@given(s_in=scales32, zp_in=st.integers(-128, 127), s_out=scales32, zp_out=st.integers(-128, 127))
def test_requantize_table_is_tflites_arithmetic(s_in, zp_in, s_out, zp_out):
    try:
        table = lut_table("requantize", s_in, zp_in, s_out, zp_out)
    except ValueError:
        assert s_in / s_out > 2.0**22
        return
    expected = [ref_requantize(q, s_in, zp_in, s_out, zp_out) for q in range(-128, 128)]
    np.testing.assert_array_equal(table, expected)


@pytest.mark.parametrize(
    "ratio",
    [
        1 - 2.0**-33,
        1 - 2.0**-31,
        1 - 2.0**-30,
        2.0**-31,
        2.0**-31 * 1.5,
        2.0**-32,
        2.0**-40,
        2.0**22,
        2.0**22 * (1 - 2.0**-40),
        0.5,
        1.0,
        3.0,
        1 / 3,
    ],
)
@pytest.mark.parametrize("zp_in, zp_out", [(-128, 127), (127, -128), (0, 0)])
def test_integer_tables_at_extreme_multipliers(ratio, zp_in, zp_out):
    """Multipliers that round up to 2^31 (renormalised), that reach 2^31 - 1, right shifts of 31
    and below (flushed to zero), left shifts up to the overflow bound."""
    try:
        table = lut_table("requantize", ratio, zp_in, 1.0, zp_out)
    except ValueError:
        assert ratio * max(127 - zp_in, zp_in + 128) > 2.0**30
    else:
        np.testing.assert_array_equal(table, [ref_requantize(q, ratio, zp_in, 1.0, zp_out) for q in range(-128, 128)])
    for slope in (ratio, -ratio):
        try:
            table = lut_table("leaky_relu", 1.0, zp_in, 1.0, zp_out, negative_slope=slope)
        except ValueError:
            assert abs(float(np.float32(slope))) * (zp_in + 128) > 2.0**30
        else:
            expected = [ref_leaky_relu(q, 1.0, zp_in, 1.0, zp_out, slope) for q in range(-128, 128)]
            np.testing.assert_array_equal(table, expected)


def test_integer_tables_on_exact_ratios():
    """Power-of-two ratios make MBQM land on exact .5 ties: ratio 1/2 is multiplier 2^30 with no
    right shift, so SRDHM alone rounds, ties up; ratio 1/4 adds a right shift by one, whose
    RoundingDivideByPOT rounds ties away from zero. The tables follow."""
    half = lut_table("requantize", 1.0, 0, 2.0, 0)
    assert [half[128 + v] for v in (-3, -1, 1, 3)] == [-1, 0, 1, 2]
    quarter = lut_table("requantize", 1.0, 0, 4.0, 0)
    assert [quarter[128 + v] for v in (-6, -2, 2, 6)] == [-2, -1, 1, 2]
    leaky = lut_table("leaky_relu", 1.0, 0, 1.0, 0, negative_slope=-0.5)
    assert [leaky[128 + v] for v in (-3, -1, 0, 5)] == [ref_leaky_relu(v, 1.0, 0, 1.0, 0, -0.5) for v in (-3, -1, 0, 5)]
    assert leaky[128 - 3] == 1  # -(MBQM(-3, 1/2)) = -(-1): SRDHM rounds -1.5 up
    assert (lut_table("requantize", 0.05, 7, 0.05, 7) == np.arange(-128, 128)).all()  # identity


@pytest.mark.parametrize("alpha", [0.01, 0.2, -0.3, 1.5])
def test_leaky_relu_table_close_to_float(alpha):
    """TFLite's integer leaky_relu is within one step of the float function (rounding of the
    multipliers and of MBQM)."""
    for s_in, zp_in, s_out, zp_out in ((0.05, 3, 0.04, -7), (0.1, -128, 0.1, -128), (1 / 255, 127, 2 / 255, 0)):
        table = lut_table("leaky_relu", s_in, zp_in, s_out, zp_out, negative_slope=alpha)
        x = s_in * (np.arange(-128, 128) - zp_in)
        exact = np.clip(np.where(x >= 0, x, alpha * x) / s_out + zp_out, -128, 127)
        assert np.abs(table - exact).max() <= 1.0


# --------------------------------------------------------------------------------------------
# 3. Softmax over any axis
# --------------------------------------------------------------------------------------------
def random_tensor(seed: int, shape) -> np.ndarray:
    """Softmax test rows (tests.test_kernels_softmax.random_rows styles) reshaped to `shape`."""
    size = int(np.prod(shape))
    return random_rows(seed, 1, size).reshape(shape)


shapes3 = st.tuples(st.integers(1, 5), st.one_of(st.integers(1, 20), st.integers(1, 700)), st.integers(1, 7))
scales = st.one_of(st.floats(-4.0, 1.5).map(lambda e: 10.0**e), st.sampled_from([1 / 255, 16 / 255, 0.1, 1.0, 32.0]))


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), shape=shapes3, scale=scales)
def test_softmax_axis_golden_equals_rows_of_transposed_data(seed, shape, scale):
    x = random_tensor(seed, shape)
    desc = softmax_axis_desc(shape, 1, scale)
    assert (desc["outer"], desc["axis_size"], desc["inner"]) == shape
    params = softmax_params(scale)
    rows = np.ascontiguousarray(x.transpose(0, 2, 1)).reshape(-1, shape[1])
    expected = softmax_s8(rows, params).reshape(shape[0], shape[2], shape[1]).transpose(0, 2, 1)
    np.testing.assert_array_equal(softmax_axis_s8(x, desc), expected)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), shape=shapes3, scale=scales)
def test_softmax_axis_golden_equals_c(lib, seed, shape, scale):
    x = random_tensor(seed, shape)
    desc = softmax_axis_desc(shape, 1, scale)
    np.testing.assert_array_equal(run_c(lib, "edgec_softmax_axis_s8", SoftmaxDesc, x, desc), softmax_axis_s8(x, desc))


@pytest.mark.parametrize(
    "shape, axis",
    [
        ((2, 3, 4, 5), 1),
        ((2, 3, 4, 5), -1),
        ((2, 3, 4, 5), 0),
        ((6,), 0),
        ((1, 1, 9), 2),
        ((3, 1, 2), 1),
        ((4, 600, 3), 1),
    ],
)
def test_softmax_any_axis_of_nd_tensors(lib, shape, axis):
    x = random_tensor(11, shape)
    desc = softmax_axis_desc(shape, axis, 0.07)
    moved = np.moveaxis(x, axis, -1)
    expected = np.moveaxis(softmax_s8(np.ascontiguousarray(moved), softmax_params(0.07)), -1, axis)
    np.testing.assert_array_equal(softmax_axis_s8(x, desc), expected)
    np.testing.assert_array_equal(run_c(lib, "edgec_softmax_axis_s8", SoftmaxDesc, x, desc), expected)


def test_softmax_axis_inner_one_is_the_row_kernel(lib):
    x = random_tensor(5, (7, 300))
    desc = softmax_axis_desc(x.shape, -1, 0.05)
    assert desc["inner"] == 1
    rows = run_c(lib, "edgec_softmax_s8", SoftmaxDesc, x, desc)
    np.testing.assert_array_equal(rows, softmax_s8(x, softmax_params(0.05)))
    np.testing.assert_array_equal(run_c(lib, "edgec_softmax_axis_s8", SoftmaxDesc, x, desc), rows)


def _rejects(lib, name: str, cls, good: dict, bad_descs) -> None:
    x = np.zeros(int(good["outer"] * good["axis_size"] * good["inner"]), dtype=np.int8)
    out = np.zeros_like(x)
    f = getattr(lib, name)
    assert f(C.byref(cls(*good.values())), ptr(x, C.c_int8), ptr(out, C.c_int8)) == EDGEC_OK
    assert f(None, ptr(x, C.c_int8), ptr(out, C.c_int8)) == EDGEC_ARG_ERROR
    assert f(C.byref(cls(*good.values())), None, ptr(out, C.c_int8)) == EDGEC_ARG_ERROR
    assert f(C.byref(cls(*good.values())), ptr(x, C.c_int8), None) == EDGEC_ARG_ERROR
    for bad in bad_descs:
        assert f(C.byref(cls(*bad.values())), ptr(x, C.c_int8), ptr(out, C.c_int8)) == EDGEC_ARG_ERROR, bad


def _shape_errors(good: dict) -> list[dict]:
    return [
        dict(good, outer=0),
        dict(good, axis_size=0),
        dict(good, inner=0),
        dict(good, inner=-2),
        dict(good, outer=2**16, axis_size=2**8, inner=2**8),
    ]  # 2^32 elements


def test_softmax_axis_rejects_bad_descriptors(lib):
    for inner in (1, 3):
        good = softmax_axis_desc((2, 5, inner), 1, 0.1)
        _rejects(
            lib,
            "edgec_softmax_axis_s8",
            SoftmaxDesc,
            good,
            _shape_errors(good)
            + [
                dict(good, input_left_shift=32),
                dict(good, input_multiplier=-1),
                dict(good, diff_min=good["diff_min"] - 1),
            ],
        )


# --------------------------------------------------------------------------------------------
# 4. log_softmax
# --------------------------------------------------------------------------------------------
def ref_saturating_add(a: int, b: int) -> int:
    return max(I32_MIN, min(I32_MAX, a + b))


def ref_mul_pot_param(x: int, exponent: int) -> int:
    """SaturatingRoundingMultiplyByPOTParam (common.h): x itself for exponent 0."""
    return x if exponent == 0 else ref_saturating_mul_pot(x, exponent)


def ref_rounding_half_sum(a: int, b: int) -> int:
    total = a + b
    half = (abs(total) + 1) // 2  # (total + sign) / 2, truncated toward zero
    return _i32(half if total >= 0 else -half)


def ref_clz(x: int) -> int:
    return 32 - (x & 0xFFFFFFFF).bit_length()


LOG_CONSTANTS = {
    "log_2": math.log(2.0),
    "sqrt_sqrt_half": math.sqrt(math.sqrt(0.5)),
    "sqrt_half": math.sqrt(0.5),
    "alpha_n": 11.0 / 240.0 * math.sqrt(math.sqrt(2.0)),
    "alpha_d": 1.0 / 20.0 * math.sqrt(math.sqrt(2.0)),
    "alpha_i": 2.0 / math.sqrt(math.sqrt(2.0)) - math.sqrt(math.sqrt(2.0)),
    "alpha_f": 1.0 / 4.0 * math.sqrt(math.sqrt(2.0)),
}


def ref_log_x_for_x_ge_1(z: int, input_integer_bits: int = 12, output_integer_bits: int = 5) -> int:
    """log_x_for_x_greater_than_or_equal_to_1_impl<5, 12> (TFLite common.h) on raw int32 values,
    constants derived from their real values (GEMMLOWP_CHECKED_FIXEDPOINT_CONSTANT)."""
    k = {name: _const(value, 31) for name, value in LOG_CONSTANTS.items()}
    accum_bits = output_integer_bits + 1
    shifted_quarter = ref_rounding_divide_by_pot(_const(0.25, 31), accum_bits)  # Rescale<6>(F0)
    headroom_a_plus_1 = ref_clz(z)
    r_a_tmp = ref_mul_pot_param(z, headroom_a_plus_1 - 1)
    r_a = ref_mul_pot_param(ref_srdhm(r_a_tmp, k["sqrt_half"]), 1)
    pow_a = ref_saturating_add(
        ref_mul_pot_param(input_integer_bits - headroom_a_plus_1, 31 - accum_bits), shifted_quarter
    )
    z_b = ref_srdhm(z, k["sqrt_half"])
    headroom_b = ref_clz(z_b) - 1
    r_b = ref_mul_pot_param(z, headroom_b)
    pow_b = max(
        I32_MIN, min(I32_MAX, ref_mul_pot_param(input_integer_bits - headroom_b, 31 - accum_bits) - shifted_quarter)
    )  # SaturatingSub
    r = min(r_a, r_b)
    pow_2_adj = max(pow_a, pow_b)
    p = ref_rounding_half_sum(r, k["sqrt_sqrt_half"])
    q = _i32(r - k["sqrt_sqrt_half"])
    q = _i32(q + q)
    common_sq = ref_srdhm(q, q)
    num = _i32(ref_srdhm(q, r) + ref_srdhm(ref_srdhm(q, common_sq), k["alpha_n"]))
    denom_minus_one = _i32(
        ref_srdhm(p, _i32(_i32(k["alpha_i"] + q) + ref_srdhm(k["alpha_d"], common_sq))) + ref_srdhm(k["alpha_f"], q)
    )
    recip_denom = ref_one_over_one_plus_x(denom_minus_one)
    num_scaled = ref_rounding_divide_by_pot(num, accum_bits)  # Rescale<6>(F0)
    total = _i32(ref_srdhm(pow_2_adj, k["log_2"]) + ref_srdhm(num_scaled, recip_denom))
    return ref_saturating_mul_pot(total, accum_bits - output_integer_bits)  # Rescale<5>(F6)


def ref_log_softmax_row(row, desc: dict) -> list[int]:
    """reference_integer_ops::LogSoftmax on one row, every int32 intermediate range-checked."""
    row = [int(v) for v in row]
    mx = max(row)
    diff_min = desc["diff_min"]

    def diff_q5(v):
        return ref_multiply_by_quantized_multiplier(v - mx, desc["input_multiplier"], desc["input_left_shift"])

    total = 0
    for v in row:
        if v - mx >= diff_min:
            total = _i32(total + ref_rounding_divide_by_pot(ref_exp_on_negative_values(diff_q5(v)), 12))
    log_sum = ref_log_x_for_x_ge_1(total)
    adjusted = max(
        diff_min - 1,
        ref_multiply_by_quantized_multiplier(
            _i32(log_sum + I32_MIN), desc["reverse_scaling_divisor"], -desc["reverse_scaling_right_shift"]
        ),
    )
    out = []
    for v in row:
        if v - mx > adjusted:
            y = ref_rounding_divide_by_pot(_i32(diff_q5(v) - log_sum), 31 - 5 - 4) + 127
            out.append(max(-128, min(127, y)))
        else:
            out.append(-128)
    return out


def ref_log_softmax_params(scale: float) -> dict:
    """PreprocessLogSoftmaxScalingExp + CalculateInputRadius (quantization_util.cc), beta 1."""
    real = min(scale * (1 << 26), (1 << 31) - 1.0)
    multiplier, left_shift = ref_quantize_multiplier(real)
    assert real > 1.0 and left_shift >= 0  # QuantizeMultiplierGreaterThanOne
    reverse = (1 << (31 - left_shift)) / float(multiplier)
    divisor, shift = ref_quantize_multiplier(reverse)
    assert 0 < reverse < 1 and shift <= 0  # ...SmallerThanOneExp
    radius = math.floor(1.0 * ((1 << 5) - 1) * (1 << 26) / (1 << left_shift))
    return {
        "input_multiplier": multiplier,
        "input_left_shift": left_shift,
        "reverse_scaling_divisor": divisor,
        "reverse_scaling_right_shift": -shift,
        "diff_min": -radius,
    }


def ref_log_softmax(x: np.ndarray, desc: dict) -> np.ndarray:
    rows = np.moveaxis(x.reshape(desc["outer"], desc["axis_size"], desc["inner"]), 1, 2).reshape(-1, desc["axis_size"])
    out = np.array([ref_log_softmax_row(r, desc) for r in rows], dtype=np.int8)
    return np.moveaxis(out.reshape(desc["outer"], desc["inner"], desc["axis_size"]), 1, 2).reshape(x.shape)


def test_log_softmax_tflite_micro_vectors(lib):
    """TFLite Micro's log_softmax_test.cc: QuantizedActivationsOpTestLogSoftmaxInt8 (input range
    [-10, 10], scale 20/255 in float32, zero point 0) and ExtraTestLogSoftmaxInt8."""
    scale = float(np.float32(np.float32(20.0) / np.float32(255.0)))
    x = np.array([[0, -77, 26, 51], [38, -26, 127, 13]], dtype=np.int8)  # kInput quantized
    desc = log_softmax_desc(x.shape, -1, scale)
    expected = np.array([[61, -36, 93, 125], [15, -65, 127, -16]], dtype=np.int8)
    c_output = run_c(lib, "edgec_log_softmax_s8", LogSoftmaxDesc, x, desc)
    for got in (log_softmax_s8(x, desc), ref_log_softmax(x, desc), c_output):
        np.testing.assert_array_equal(got, expected)
    x = np.array([[0], [-128], [127]], dtype=np.int8)
    desc = log_softmax_desc(x.shape, -1, float(np.float32(2.0 / 255.0)))
    np.testing.assert_array_equal(log_softmax_s8(x, desc), np.full((3, 1), 127, np.int8))


def test_log_softmax_params_match_tflite():
    for scale in (1e-4, 1 / 255, 20 / 255, 0.1, 0.25, 1.0, 4.0, 31.9, 32.0, 1e3):
        scale32 = float(np.float32(scale))
        assert log_softmax_params(scale32) == ref_log_softmax_params(scale32)
    assert log_softmax_params(1.0)["diff_min"] == -15
    with pytest.raises(ValueError):
        log_softmax_params(2.0**-26)  # beta * scale * 2^26 = 1: TFLite rejects it


def test_log_of_sum_domain():
    """The golden log over the sum's whole range [2^19, 2^31) (1.0 to 4096 in Q12.19): equal to
    the transcription (which checks that no int32 step of TFLite's wraps), non-negative (so
    log_sum + INT32_MIN does not wrap), and within 1e-7 of log."""
    near_root_2 = (2 ** np.arange(19, 31) * math.sqrt(2)).astype(np.int64) + np.arange(-1, 2)[:, None]
    z = np.unique(
        np.concatenate(
            [
                np.arange(2**19, 2**19 + 3000),
                np.linspace(2**19, 2**31 - 1, 4000).astype(np.int64),
                2 ** np.arange(19, 31),
                2 ** np.arange(20, 32) - 1,
                near_root_2.ravel(),
            ]
        )
    )
    z = z[(z >= 2**19) & (z < 2**31)]
    got = _log_x_for_x_ge_1(z)
    assert got.min() >= 0
    np.testing.assert_array_less(np.abs(got / 2.0**26 - np.log(z / 2.0**19)), 1e-7)
    for v in z[:: max(1, len(z) // 800)]:
        assert _log_x_for_x_ge_1(np.array([v]))[0] == ref_log_x_for_x_ge_1(int(v))
    for name, value in LOG_CONSTANTS.items():  # the golden's literal constants
        assert _const(value, 31) == getattr(softmax_module, f"_{name.upper()}")


log_shapes = st.tuples(st.integers(1, 3), st.one_of(st.integers(1, 12), st.integers(1, 300)), st.integers(1, 4))


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), shape=log_shapes, scale=scales)
def test_log_softmax_golden_equals_tflite_transcription(seed, shape, scale):
    x = random_tensor(seed, shape)
    desc = log_softmax_desc(shape, 1, scale)
    np.testing.assert_array_equal(log_softmax_s8(x, desc), ref_log_softmax(x, desc))


@settings(max_examples=60, deadline=None)
@given(x=st.lists(st.integers(-128, 127), min_size=1, max_size=30), scale=scales)
def test_log_softmax_golden_equals_transcription_hypothesis_values(x, scale):
    x = np.array([x], dtype=np.int8)
    desc = log_softmax_desc(x.shape, -1, scale)
    np.testing.assert_array_equal(log_softmax_s8(x, desc), ref_log_softmax(x, desc))


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    shape=st.tuples(st.integers(1, 4), st.integers(1, 4095), st.integers(1, 3)),
    scale=scales,
)
def test_log_softmax_golden_close_to_float(seed, shape, scale):
    """Within one output step (1/16) of the float log_softmax of the dequantized input where
    neither is clamped (TFLite's fixed point, exp, 12 accumulator bits and the log approximation,
    is not correctly rounded: about 0.501 steps seen), and -128 wherever the float is far below."""
    x = random_tensor(seed, shape)
    desc = log_softmax_desc(shape, 1, scale)
    got = log_softmax_s8(x, desc).astype(np.float64)
    z = scale * (x.astype(np.float64) - x.max(axis=1, keepdims=True))
    log_softmax = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    exact = log_softmax / LOG_SOFTMAX_OUTPUT_SCALE + LOG_SOFTMAX_OUTPUT_ZERO_POINT
    inside = (exact > -127.0) & (got > -128)
    assert np.abs(got - exact)[inside].max(initial=0.0) <= 1.0
    assert (got[exact < -129.0] == -128).all()


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    shape=st.one_of(log_shapes, st.tuples(st.just(1), st.integers(1, 4095), st.just(1))),
    scale=scales,
)
def test_log_softmax_golden_equals_c(lib, seed, shape, scale):
    x = random_tensor(seed, shape)
    desc = log_softmax_desc(shape, 1, scale)
    np.testing.assert_array_equal(run_c(lib, "edgec_log_softmax_s8", LogSoftmaxDesc, x, desc), log_softmax_s8(x, desc))


def test_log_softmax_row_limit(lib):
    x = np.full((1, 4095), 9, dtype=np.int8)  # the largest sum: 4095 exps of 1.0
    desc = log_softmax_desc(x.shape, -1, 0.1)
    expected = log_softmax_s8(x, desc)
    np.testing.assert_array_equal(expected, ref_log_softmax(x, desc))
    np.testing.assert_array_equal(run_c(lib, "edgec_log_softmax_s8", LogSoftmaxDesc, x, desc), expected)
    assert expected[0, 0] == round(127 - 16 * math.log(4095))
    with pytest.raises(ValueError):
        log_softmax_desc((1, 4096), -1, 0.1)


def test_log_softmax_difference_below_int32_min(lib):
    """TFLite's adjusted diff_min keeps d5 - log_sum above INT32_MIN for its own parameters. With a
    hand-made reverse scaling that lets every diff >= diff_min through, the difference of the
    row's lowest element is below INT32_MIN (TFLite's int32 subtraction would overflow): golden
    and C give -128, the exact value, without undefined behaviour (UBSan library)."""
    x = np.full((1, 65), 100, dtype=np.int8)
    x[0, 0] = 85  # diff -15 = diff_min
    tflite = log_softmax_desc(x.shape, -1, 1.9)
    assert tflite["diff_min"] == -15
    loose = dict(tflite, reverse_scaling_divisor=I32_MAX, reverse_scaling_right_shift=0)
    for desc in (tflite, loose):
        golden = log_softmax_s8(x, desc)
        np.testing.assert_array_equal(run_c(lib, "edgec_log_softmax_s8", LogSoftmaxDesc, x, desc), golden)
        assert golden[0, 0] == -128 and (golden[0, 1:] == 60).all()
    np.testing.assert_array_equal(ref_log_softmax(x, tflite), log_softmax_s8(x, tflite))
    with pytest.raises(AssertionError, match="int32 overflow"):
        ref_log_softmax(x, loose)


def test_log_softmax_rejects_bad_descriptors(lib):
    good = log_softmax_desc((2, 5, 3), 1, 0.1)
    _rejects(
        lib,
        "edgec_log_softmax_s8",
        LogSoftmaxDesc,
        good,
        _shape_errors(good)
        + [
            dict(good, axis_size=4096, outer=1, inner=1),
            dict(good, input_left_shift=32),
            dict(good, input_left_shift=-1),
            dict(good, input_multiplier=-1),
            dict(good, reverse_scaling_divisor=-1),
            dict(good, reverse_scaling_right_shift=32),
            dict(good, reverse_scaling_right_shift=-1),
            dict(good, diff_min=good["diff_min"] - 1),
            dict(good, diff_min=1),
        ],
    )
    for bad in (dict(good, diff_min=1), dict(good, input_left_shift=32)):
        with pytest.raises(ValueError):
            log_softmax_s8(np.zeros((2, 5, 3), np.int8), bad)


# --------------------------------------------------------------------------------------------
# 5. Cortex-M under QEMU
# --------------------------------------------------------------------------------------------
DRIVER = ROOT / "tests" / "data" / "port" / "lut_kernels.c"
SOURCES = [ROOT / "runtime_c" / "src" / f for f in ("activation/edgec_lut_s8.c", "softmax/edgec_softmax_s8.c")]
KIND = {"lut": 1, "softmax_axis": 2, "log_softmax": 3, "softmax_rows": 4, "lut_channels": 5}
MAX_TABLES = 64  # the driver's table buffer
HEADER_WORDS = 16
IN_PLACE, BENCH = 1, 2
# Each build's lut path: the -mcpu picks it; undefining the feature macro selects the next one.
PATHS = {
    "cortex-m4": {"word": [], "portable": ["-U__ARM_FEATURE_UNALIGNED"]},
    "cortex-m55": {
        "mve": [],
        "word": ["-U__ARM_FEATURE_MVE"],
        "portable": ["-U__ARM_FEATURE_MVE", "-U__ARM_FEATURE_UNALIGNED"],
    },
}
BENCH_SIZE, BENCH_CHANNELS = 4096, 16
# Instructions per element of the 16-channel lookup, measured at -O2: the word path's column order
# 4.34 (M4) and 3.86 (M55; the portable loop 6.64 and 5.76), Helium 1.14.
WORD_CHANNELS_PER_ELEMENT, MVE_CHANNELS_PER_ELEMENT = 4.4, 1.2


def record(
    kind: str,
    x: np.ndarray,
    fields: list[int],
    table: np.ndarray | None = None,
    flags: int = 0,
    in_skew: int = 0,
    out_skew: int = 0,
) -> bytes:
    header = [KIND[kind], flags, in_skew, out_skew, x.size, *fields]
    payload = b"" if table is None else table.tobytes()
    data = x.tobytes()
    return (
        struct.pack(f"<{HEADER_WORDS}i", *header, *[0] * (HEADER_WORDS - len(header)))
        + payload
        + data
        + bytes(-len(data) % 4)
    )


def lut_cases(rng, count: int) -> list[tuple[bytes, np.ndarray]]:
    cases = []
    for k in range(count):
        size = int(rng.choice([1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, int(rng.integers(1, 600))]))
        desc = lut_desc(random_table(rng), size)
        x = random_int8(rng, size)
        flags = IN_PLACE if k % 3 == 0 else 0
        cases.append(
            (
                record("lut", x, [size], desc["table"], flags, int(rng.integers(4)), int(rng.integers(4))),
                lut_s8(x, desc),
            )
        )
    return cases


def lut_channels_cases(rng, count: int) -> list[tuple[bytes, np.ndarray]]:
    """Channel counts around the word (4) and Helium (8) steps and up to the driver's 64 tables."""
    cases = []
    for k in range(count):
        channels = int(
            rng.choice([1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 31, 33, 64, int(rng.integers(1, MAX_TABLES + 1))])
        )
        # many pixels and few channels: the word path walks channel by channel (lut_channels_run)
        pixels = int(rng.choice([1, 2, 3, int(rng.integers(1, 40)), int(rng.integers(40, 300))]))
        tables = random_tables(rng, channels)
        desc = {"pixels": pixels, "channels": channels}
        x = random_int8(rng, pixels * channels)
        flags = IN_PLACE if k % 3 == 0 else 0
        skews = int(rng.integers(4)), int(rng.integers(4))
        cases.append(
            (record("lut_channels", x, [pixels, channels], tables, flags, *skews), lut_channels_s8(x, tables, desc))
        )
    return cases


def softmax_cases(rng, count: int) -> list[tuple[bytes, np.ndarray]]:
    cases = []
    for k in range(count):
        shape = (
            int(rng.integers(1, 4)),
            int(rng.choice([1, 2, 5, 17, int(rng.integers(1, 600))])),
            int(rng.choice([1, 1, 2, 3, 8])),
        )
        x = random_tensor(int(rng.integers(2**32)), shape)
        scale = float(10.0 ** rng.uniform(-4, 1.5))
        if k % 2:
            desc = softmax_axis_desc(shape, 1, scale)
            cases.append((record("softmax_axis", x, list(desc.values())), softmax_axis_s8(x, desc)))
        else:
            desc = log_softmax_desc(shape, 1, scale)
            cases.append((record("log_softmax", x, list(desc.values())), log_softmax_s8(x, desc)))
    return cases


def bench_cases(rng) -> list[tuple[bytes, np.ndarray]]:
    """The measured calls: a 4096-element lookup, the same through 16 channel tables (binary_
    classifier's first PReLU, 16x16x16), and the same softmax rows through edgec_softmax_s8 and
    through edgec_softmax_axis_s8 with inner == 1."""
    desc = lut_desc(lut_table("sigmoid", 0.05, 0, 1 / 256, -128), BENCH_SIZE)
    x = random_int8(rng, BENCH_SIZE)
    tables = random_tables(rng, BENCH_CHANNELS)
    channels = {"pixels": BENCH_SIZE // BENCH_CHANNELS, "channels": BENCH_CHANNELS}
    rows = random_tensor(1, (16, 64))
    axis = softmax_axis_desc(rows.shape, -1, 0.05)
    return [
        (record("lut", x, [BENCH_SIZE], desc["table"], BENCH), lut_s8(x, desc)),
        (
            record("lut_channels", x, list(channels.values()), tables, BENCH),
            lut_channels_s8(x, tables, channels),
        ),
        (record("softmax_rows", rows, list(axis.values()), flags=BENCH), softmax_axis_s8(rows, axis)),
        (record("softmax_axis", rows, list(axis.values()), flags=BENCH), softmax_axis_s8(rows, axis)),
    ]


def run_cases(target: str, flags: list[str], cases, tmp_path: Path, opt: str = "-O2") -> tuple[list, list[int]]:
    """Builds the driver for `target` with `flags`, runs `cases` with the instruction-count
    plugin; returns [(status, guard intact, output)] and the bench regions' counts."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    elf = toolchain.cross_compile(
        target,
        [DRIVER, *SOURCES],
        [ROOT / "runtime_c" / "include"],
        tmp_path / "lut.elf",
        opt=opt,
        extra_cflags=["-Wall", "-Wextra", "-Werror", "-pedantic", *flags],
    )
    (tmp_path / "cases.bin").write_bytes(b"".join(data for data, _ in cases))
    counts = toolchain.count_instructions(target, elf, timeout=120, cwd=tmp_path)
    data, at, results = (tmp_path / "results.bin").read_bytes(), 0, []
    for _, expected in cases:
        status, guard = struct.unpack_from("<2i", data, at)
        results.append((status, bool(guard), np.frombuffer(data, np.int8, expected.size, at + 8)))
        at += 8 + expected.size
    assert at == len(data)
    return results, counts["insns"]


def check_results(cases, results) -> None:
    failures = [
        f"case {k}: status {status}, guard {guard}, {np.count_nonzero(out != expected.ravel())} bytes differ"
        for k, ((_, expected), (status, guard, out)) in enumerate(zip(cases, results))
        if status != EDGEC_OK or not guard or not np.array_equal(out, expected.ravel())
    ]
    assert not failures, "\n".join(failures[:10])


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", sorted(PATHS))
def test_lut_family_on_cortex_m(target, tmp_path):
    """Every lut path the target can build, and softmax over an axis and log_softmax, byte for
    byte with the golden. Instructions per element of a 4096-element lookup (at -O2): Helium
    gathers 16 per 5-instruction pass, the word path needs about 3.6, the portable loop 5; the
    faster path is the one each build picks. Through 16 channel tables (256 pixels): Helium 8 per
    6-instruction pass and 6 a pixel, the word path channel by channel (four pixels a pass). Softmax
    through the axis entry with inner == 1 costs only the entry's own checks more than
    edgec_softmax_s8."""
    rng = np.random.default_rng(17)
    lut = lut_cases(rng, 250) + lut_channels_cases(rng, 150)
    others = softmax_cases(rng, 120) + bench_cases(rng)
    per_element, per_channel_element = {}, {}
    for path, flags in PATHS[target].items():
        cases = lut + (others if not flags else bench_cases(np.random.default_rng(1))[:2])
        results, insns = run_cases(target, flags, cases, tmp_path / path)
        check_results(cases, results)
        per_element[path], per_channel_element[path] = insns[0] / BENCH_SIZE, insns[1] / BENCH_SIZE
        if not flags:
            rows, axis = insns[2:]
            assert 0 <= axis - rows <= 60, (rows, axis)
    assert per_element["portable"] >= 4.5 and per_element["word"] <= 3.7, per_element
    assert per_channel_element["word"] <= min(WORD_CHANNELS_PER_ELEMENT, per_channel_element["portable"]), (
        per_channel_element
    )
    if target == "cortex-m55":
        assert per_element["mve"] <= 0.35, per_element
        assert per_channel_element["mve"] <= MVE_CHANNELS_PER_ELEMENT, per_channel_element


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("opt", ["-Os", "-O0"])
@pytest.mark.parametrize("target", sorted(PATHS))
def test_lut_channels_paths_at_os_and_o0(target, opt, tmp_path):
    """edgec_lut_channels_s8's paths (Helium's assembly loop, the word path, the portable loop)
    byte for byte with the golden when built at -Os and -O0 too."""
    cases = lut_channels_cases(np.random.default_rng(29), 80)
    for path, flags in PATHS[target].items():
        results, _ = run_cases(target, flags, cases, tmp_path / path, opt)
        check_results(cases, results)


def test_tflite_hardswish_is_tflite_micros_and_within_one_step_of_the_float_rule():
    """TFLite's integer HARD_SWISH (what a pre-quantized program gets): TFLite Micro wrote 60 for
    input 89 at op_activations' qparams (tests/data/tflm), where the correctly rounded table says 61;
    over random qparams it never moves more than one step from the float rule."""
    from edgec.ops.lut import hardswish_tflite_table

    qparams = (float(np.float32(0.05428553372621536)), -12, float(np.float32(0.031063569709658623)), -116)
    assert hardswish_tflite_table(*qparams)[89 + 128] == 60
    assert lut_table("hardswish", *qparams)[89 + 128] == 61
    rng = np.random.default_rng(0)
    for _ in range(200):
        s_in = float(np.float32(10 ** rng.uniform(-3, 0)))
        s_out = float(np.float32(s_in * 10 ** rng.uniform(-0.5, 0.5)))
        zp_in, zp_out = (int(v) for v in rng.integers(-128, 128, size=2))
        tflite = hardswish_tflite_table(s_in, zp_in, s_out, zp_out).astype(int)
        assert np.abs(tflite - lut_table("hardswish", s_in, zp_in, s_out, zp_out)).max() <= 1
