"""Softmax and log_softmax: golden int8 kernels, their compile-time parameters and the op unit.

C kernels: runtime_c/src/softmax/edgec_softmax_s8.c (edgec_softmax_s8 over rows of the last
dimension, edgec_softmax_axis_s8 and edgec_log_softmax_s8 over any axis; one descriptor each). Softmax is bit-exact with
TFLite Micro's reference int8 softmax (reference_ops::Softmax with SoftmaxParams from
PreprocessSoftmaxScaling) and CMSIS-NN's arm_softmax_s8 / arm_nn_softmax_common_s8. Output qparams
are fixed: scale 1/256, zero point -128. log_softmax: see log_softmax_s8 below.

Any axis: a tensor is viewed as [outer][axis_size][inner] (element (o, a, i) at
(o * axis_size + a) * inner + i) and each of the outer * inner strided rows is one row below.

Per row (all values int32, gemmlowp fixed point):
  diff = x - max(row); elements with diff < diff_min contribute nothing and output -128.
  s = SRDHM(diff << input_left_shift, input_multiplier)          # Q5.26, <= 0
  e = exp_on_negative_values(s)                                   # Q0.31
  sum = sum of RoundingDivideByPOT(e, 12)                         # Q12.19
  headroom = clz(sum); r = one_over_one_plus_x((sum << headroom) - 2^31)
  y = clamp(RoundingDivideByPOT(SRDHM(r, e), 35 - headroom) - 128, -128, 127)
The one deliberate extension: TFLite aborts (TFLITE_CHECK) and CMSIS-NN shifts by >= 32 (undefined)
when sum >= 2^28 (an effective row mass of 512 or more, only possible with >= 512 elements). The
exact value of that final division is 0 there, so the whole row outputs -128 (every probability is
below 1/512, which rounds to 0 at scale 1/256). A sum of 0 (only with a diff_min > 0, which
CMSIS-NN's tests use as "invalid") also gives -128 everywhere.
"""

from __future__ import annotations

import math

import numpy as np

from edgec.errors import EdgecError
from edgec.frontend.torch_ops import INPUT_MASKED_SOFTMAXES, LOG_SOFTMAXES, MASKED_SOFTMAXES, SOFTMAXES
from edgec.numerics import (
    INT8_MAX,
    INT8_MIN,
    INT32_MAX,
    INT32_MIN,
    divide_by_power_of_two,
    quantize_multiplier,
    requantize,
    round_half_away,
)
from edgec.ops.base import CCall, OpDef, descriptor
from edgec.ops.kernel import Field, Struct, ints
from edgec.ops.qspec import activation_inputs, annotate, fixed_qspec

# The C structs of this unit's kernels (edgec.ops.kernel); edgec_nn.h's are generated from these.
SOFTMAX_DESC = Struct(
    "edgec_softmax_desc",
    (
        *ints("outer axis_size inner"),
        Field("input_multiplier", doc="edgec.ops.softmax.softmax_params: the three fields"),
        *ints("input_left_shift diff_min"),
    ),
)
LOG_SOFTMAX_DESC = Struct(
    "edgec_log_softmax_desc",
    (
        *ints("outer"),
        Field("axis_size", doc="1..4095: TFLite's Q12.19 sum of exps overflows at 4096"),
        *ints("inner"),
        Field("input_multiplier", doc="PreprocessLogSoftmaxScalingExp (beta 1, 5 integer bits)"),
        *ints("input_left_shift reverse_scaling_divisor reverse_scaling_right_shift"),
        Field("diff_min", doc="-CalculateInputRadius(5, input_left_shift)"),
    ),
)
MASKED_SOFTMAX_DESC = Struct(
    "edgec_masked_softmax_desc",
    (
        Field("rows", doc="contiguous rows of row_size int8 values"),
        *ints("row_size"),
        Field("mask_rows", doc="row r reads mask row r % mask_rows; rows % mask_rows == 0"),
        Field("mask", "const uint8_t *", doc="[mask_rows][row_size] in flash: non-zero where the element takes part"),
        Field("input_multiplier", doc="edgec.ops.softmax.softmax_params: the three fields"),
        *ints("input_left_shift diff_min"),
    ),
)
INPUT_MASKED_SOFTMAX_DESC = Struct(
    "edgec_input_masked_softmax_desc",
    (
        Field("rows", doc="contiguous rows of row_size int8 values"),
        *ints("row_size"),
        Field("rows_per_mask", doc="row r reads mask row r / rows_per_mask; rows % rows_per_mask == 0"),
        Field("ignore", doc="1: a non-zero mask byte drops its key (key_padding_mask); 0: it keeps it"),
        Field("keep_rows", doc="0: no constant mask; else row r reads keep row r % keep_rows"),
        Field(
            "keep",
            "const uint8_t *",
            doc="[keep_rows][row_size] in flash, or NULL: a constant mask (causal) an element must pass too",
        ),
        Field("input_multiplier", doc="edgec.ops.softmax.softmax_params: the three fields"),
        *ints("input_left_shift diff_min"),
    ),
)
STRUCTS = (SOFTMAX_DESC, LOG_SOFTMAX_DESC, MASKED_SOFTMAX_DESC, INPUT_MASKED_SOFTMAX_DESC)

SOFTMAX_OUTPUT_SCALE = 1.0 / 256.0
SOFTMAX_OUTPUT_ZERO_POINT = -128
SCALED_DIFF_INTEGER_BITS = 5  # exp() input is Q5.26
ACCUM_INTEGER_BITS = 12  # sum of exps is Q12.19
_SUM_LIMIT = 1 << 28  # sum >= this gives a final shift > 31 (see module docstring)


def softmax_params(input_scale: float, beta: float = 1.0) -> dict:
    """TFLite PreprocessSoftmaxScaling + CalculateInputRadius for int8 softmax.

    Returns {"input_multiplier", "input_left_shift", "diff_min"} (edgec_softmax_desc's last three fields).
    For bit-exact parity with a TFLite model pass the float32 scale and beta (as Python floats).
    """
    real = min(float(beta) * float(input_scale) * float(1 << (31 - SCALED_DIFF_INTEGER_BITS)), float(INT32_MAX))
    if not real > 1.0 or not math.isfinite(real):
        raise ValueError(
            f"softmax beta * input_scale = {beta * input_scale} is too small "
            "(QuantizeMultiplierGreaterThanOne needs beta*scale*2^26 > 1)"
        )
    # QuantizeMultiplier (double-rounding build). The cap at 2^31-1 can give shift 31, which
    # edgec.numerics.quantize_multiplier rejects for requantization, so it is inlined here.
    q, shift = math.frexp(real)
    q_fixed = round_half_away(q * (1 << 31))
    if q_fixed == 1 << 31:
        q_fixed //= 2
        shift += 1
    assert 0 <= shift <= 31 and q_fixed <= INT32_MAX
    return {"input_multiplier": int(q_fixed), "input_left_shift": int(shift), "diff_min": -_input_radius(shift)}


def _input_radius(left_shift: int) -> int:
    """CalculateInputRadius(5, left_shift, 31) = floor(31 * 2^26 / 2^left_shift), exact in integers."""
    return (((1 << SCALED_DIFF_INTEGER_BITS) - 1) << (31 - SCALED_DIFF_INTEGER_BITS)) >> left_shift


def _srdhm(a: np.ndarray, b) -> np.ndarray:
    """gemmlowp SaturatingRoundingDoublingHighMul on int32 values held in int64.

    Its nudge-and-truncate form equals floor((a*b + 2^30) / 2^31); the only overflow is
    INT32_MIN * INT32_MIN, which saturates to INT32_MAX.
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    return np.minimum((a * b + (1 << 30)) >> 31, INT32_MAX)


def _saturating_shift_left(x: np.ndarray, exponent) -> np.ndarray:
    """gemmlowp SaturatingRoundingMultiplyByPOT<exponent> (TFLite's ...Param form) for exponents
    >= 0, an int or an array: exponent 0 leaves x unchanged."""
    threshold = (1 << (31 - exponent)) - 1
    return np.where(x > threshold, INT32_MAX, np.where(x < -threshold, INT32_MIN, x << exponent))


def _exp_on_negative_values(a: np.ndarray) -> np.ndarray:
    """gemmlowp exp_on_negative_values: Q5.26 input <= 0 -> Q0.31 output."""
    quarter = 1 << 24  # 1/4 in Q5.26
    a_mod_quarter_minus_quarter = (a & (quarter - 1)) - quarter
    # exp on [-1/4, 0): Taylor series around -1/8, argument rescaled to Q0.31 (<< 5).
    x = (a_mod_quarter_minus_quarter << 5) + (1 << 28)
    x2 = _srdhm(x, x)
    x3 = _srdhm(x2, x)
    x4 = _srdhm(x2, x2)
    x4_over_4 = divide_by_power_of_two(x4, 2)
    poly = divide_by_power_of_two(_srdhm(x4_over_4 + x3, 715827883) + x2, 1)
    result = 1895147668 + _srdhm(1895147668, x + poly)  # exp(-1/8) * (1 + x + ...)
    # Barrel shifter: multiply by exp(-2^k) for each set bit of the remaining whole quarters.
    remainder = a_mod_quarter_minus_quarter - a
    for bit, multiplier in enumerate((1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242)):
        hit = (remainder & (1 << (24 + bit))) != 0
        result = np.where(hit, _srdhm(result, multiplier), result)
    return np.where(a == 0, INT32_MAX, result)


def _rounding_half_sum(a: np.ndarray, b) -> np.ndarray:
    """gemmlowp RoundingHalfSum: (a + b + sign(a + b)) / 2, the division truncating."""
    total = np.asarray(a, dtype=np.int64) + b
    return np.where(total >= 0, (total + 1) // 2, -((-(total - 1)) // 2))


def _one_over_one_plus_x_for_x_in_0_1(a: np.ndarray) -> np.ndarray:
    """gemmlowp one_over_one_plus_x_for_x_in_0_1: Q0.31 in [0, 1) -> Q0.31 1/(1+a)."""
    half_denominator = _rounding_half_sum(a, INT32_MAX)  # RoundingHalfSum(a, One)
    # Newton-Raphson in Q2.29, starting from 48/17 - 32/17 * d.
    x = 1515870810 + _srdhm(half_denominator, -1010580540)
    for _ in range(3):
        one_minus_dx = (1 << 29) - _srdhm(half_denominator, x)
        x = x + _saturating_shift_left(_srdhm(x, one_minus_dx), 2)
    return _saturating_shift_left(x, 1)


def _bit_length(v: np.ndarray) -> np.ndarray:
    """Exact bit length of non-negative integers below 2^53 (frexp is exact)."""
    return np.frexp(v.astype(np.float64))[1].astype(np.int64)


def softmax_s8(x: np.ndarray, params: dict, keep: np.ndarray | None = None) -> np.ndarray:
    """Golden int8 softmax over the last axis, bit-exact with edgec_softmax_s8.

    x: int8 array [..., row_size] (typically [rows, row_size]); params from softmax_params.
    Returns int8 of the same shape with scale 1/256 and zero point -128. `keep` (bool, of the rows'
    shape): the softmax among the kept elements only, the others -128 (edgec_masked_softmax_s8;
    a row keeping nothing is all -128).
    """
    x = np.asarray(x)
    if x.dtype != np.int8 or x.ndim < 1 or x.shape[-1] < 1:
        raise TypeError(f"softmax expects a non-empty int8 array, got {x.dtype} {x.shape}")
    mult = int(params["input_multiplier"])
    shift = int(params["input_left_shift"])
    diff_min = int(params["diff_min"])
    # Same check as the C kernel: keeps the exp() argument inside Q5.26 (-32, 0].
    if not 0 <= shift <= 31 or mult < 0 or diff_min < -_input_radius(shift):
        raise ValueError(f"invalid softmax params {params}")
    rows = x.reshape(-1, x.shape[-1]).astype(np.int64)
    keep = np.ones(rows.shape, bool) if keep is None else np.broadcast_to(keep, rows.shape)

    diff = rows - np.where(keep, rows, INT8_MIN).max(axis=1, keepdims=True)
    valid = (diff >= diff_min) & keep
    # Skipped elements are computed as diff 0 and masked out afterwards, which keeps every
    # intermediate in int32 range (the C code simply never evaluates them).
    scaled = _srdhm(np.where(valid, diff, 0) << shift, mult)
    exp = _exp_on_negative_values(scaled)
    total = np.where(valid, divide_by_power_of_two(exp, ACCUM_INTEGER_BITS), 0).sum(axis=1)

    usable = (total > 0) & (total < _SUM_LIMIT)
    safe_total = np.where(usable, total, 1 << 20)
    headroom = 32 - _bit_length(safe_total)  # clz of a 32-bit value
    reciprocal = _one_over_one_plus_x_for_x_in_0_1((safe_total << headroom) - (1 << 31))
    exponent = (ACCUM_INTEGER_BITS - headroom) + 31 - 8  # num_bits_over_unit + 31 - output bits
    out = divide_by_power_of_two(_srdhm(reciprocal[:, None], exp), exponent[:, None]) + INT8_MIN
    out = np.clip(out, INT8_MIN, INT8_MAX)
    out = np.where(valid & usable[:, None], out, INT8_MIN)
    return out.astype(np.int8).reshape(x.shape)


# -- any axis -----------------------------------------------------------------------------------


def outer_axis_inner(shape, axis: int) -> tuple[int, int, int]:
    """(outer, axis_size, inner) of a contiguous tensor reduced over `axis`."""
    shape = tuple(int(d) for d in shape)
    axis = axis % len(shape)
    return int(np.prod(shape[:axis])), shape[axis], int(np.prod(shape[axis + 1 :]))


def _rows(x: np.ndarray, desc: dict) -> np.ndarray:
    """The [outer * inner, axis_size] rows of x viewed as [outer][axis_size][inner]."""
    x = np.asarray(x)
    outer, axis_size, inner = desc["outer"], desc["axis_size"], desc["inner"]
    if x.dtype != np.int8 or x.size != outer * axis_size * inner or min(outer, axis_size, inner) < 1:
        raise TypeError(f"expected {outer}x{axis_size}x{inner} int8 values, got {x.dtype} {x.shape}")
    return x.reshape(outer, axis_size, inner).transpose(0, 2, 1).reshape(-1, axis_size)


def _unrows(rows: np.ndarray, desc: dict, shape) -> np.ndarray:
    outer, axis_size, inner = desc["outer"], desc["axis_size"], desc["inner"]
    return rows.reshape(outer, inner, axis_size).transpose(0, 2, 1).reshape(shape)


def softmax_axis_desc(shape, axis: int, input_scale: float, beta: float = 1.0) -> dict:
    """Fields of the C struct edgec_softmax_desc (same names, same order): softmax over `axis` of
    a contiguous tensor of `shape`, parameters as softmax_params."""
    outer, axis_size, inner = outer_axis_inner(shape, axis)
    return {"outer": outer, "axis_size": axis_size, "inner": inner, **softmax_params(input_scale, beta)}


def softmax_axis_s8(x: np.ndarray, desc: dict) -> np.ndarray:
    """Golden edgec_softmax_axis_s8: softmax_s8 on each strided row of x viewed as
    [outer][axis_size][inner]; returns x's shape (scale 1/256, zero point -128)."""
    params = {key: desc[key] for key in ("input_multiplier", "input_left_shift", "diff_min")}
    return _unrows(softmax_s8(_rows(x, desc), params), desc, np.shape(x))


# -- log_softmax ----------------------------------------------------------------------------------
#
# TFLite's int8 LOG_SOFTMAX, bit for bit: reference_integer_ops::LogSoftmax (TFLite) /
# reference_ops::LogSoftmaxQuantized (TFLite Micro), same arithmetic. Parameters, from TFLite
# Micro's log_softmax.cc CalculateOpData and TFLite's LogSoftmaxPrepare (activations.cc), which
# agree: the CalculateInputRadius path, not a lookup table (PopulateSoftmaxLookupTable serves only
# the uint8 kernel):
#   PreprocessLogSoftmaxScalingExp(beta = 1, input_scale, 5):
#     PreprocessSoftmaxScaling: (input_multiplier, input_left_shift) =
#       QuantizeMultiplierGreaterThanOne(min(input_scale * 2^26, 2^31 - 1))   (= softmax_params)
#     reverse = 2^(31 - input_left_shift) / input_multiplier, the inverse of that real multiplier;
#     (reverse_scaling_divisor, shift) = QuantizeMultiplierSmallerThanOneExp(reverse), shift <= 0,
#     reverse_scaling_right_shift = -shift
#   diff_min = -CalculateInputRadius(5, input_left_shift) = -floor(31 * 2^26 / 2^input_left_shift)
# Output qparams are fixed: scale 16/256, zero point 127 (TFLite rejects any other).
# Per row (int32 gemmlowp fixed point):
#   diff = x - max(row); d5 = SRDHM(diff << input_left_shift, input_multiplier)      # Q5.26
#   sum = sum over diff >= diff_min of RoundingDivideByPOT(exp_on_negative_values(d5), 12)  # Q12.19
#   log_sum = log_x_for_x_greater_than_or_equal_to_1<5>(sum)                            # Q5.26
#   adjusted = max(diff_min - 1, MBQM(log_sum + INT32_MIN, reverse_scaling_divisor,
#                                     -reverse_scaling_right_shift))
#   y = diff > adjusted ? clamp(RoundingDivideByPOT(d5 - log_sum, 22) + 127) : -128
# Rows are limited to 4095 elements: at 4096 the Q12.19 sum of TFLite's int32 accumulator
# overflows (TFLite does not check; edgec refuses). Where d5 - log_sum would fall below INT32_MIN
# (TFLite's int32 subtraction overflows) the output is -128, the exact value.

LOG_SOFTMAX_OUTPUT_SCALE = 16.0 / 256.0
LOG_SOFTMAX_OUTPUT_ZERO_POINT = 127
LOG_SOFTMAX_MAX_AXIS = 4095
_LOG_OUTPUT_SHIFT = 31 - SCALED_DIFF_INTEGER_BITS - 4  # Q5.26 -> units of 1/16 (4 integer bits)

# log_x_for_x_greater_than_or_equal_to_1 constants (Q0.31), as in TFLite's common.h.
_LOG_2 = 1488522236
_SQRT_SQRT_HALF = 1805811301
_SQRT_HALF = 1518500250
_ALPHA_N, _ALPHA_D, _ALPHA_I, _ALPHA_F = 117049297, 127690142, 1057819769, 638450708


def log_softmax_params(input_scale: float) -> dict:
    """TFLite PreprocessLogSoftmaxScalingExp + CalculateInputRadius for int8 log_softmax.

    Returns {"input_multiplier", "input_left_shift", "reverse_scaling_divisor",
    "reverse_scaling_right_shift", "diff_min"}. Pass the float32 scale for parity with TFLite.
    """
    forward = softmax_params(input_scale)
    multiplier, left_shift = forward["input_multiplier"], forward["input_left_shift"]
    reverse = float(1 << (31 - left_shift)) / float(multiplier)
    if not 0.0 < reverse < 1.0:
        raise ValueError(
            f"log_softmax reverse scaling {reverse} is not in (0, 1) "
            f"(TFLite's QuantizeMultiplierSmallerThanOneExp check)"
        )
    divisor, shift = quantize_multiplier(reverse)
    if shift > 0:
        raise ValueError(f"log_softmax reverse scaling {reverse} rounds up to 1")
    return {
        "input_multiplier": multiplier,
        "input_left_shift": left_shift,
        "reverse_scaling_divisor": divisor,
        "reverse_scaling_right_shift": -shift,
        "diff_min": forward["diff_min"],
    }


def log_softmax_desc(shape, axis: int, input_scale: float) -> dict:
    """Fields of the C struct edgec_log_softmax_desc (same names, same order)."""
    outer, axis_size, inner = outer_axis_inner(shape, axis)
    if axis_size > LOG_SOFTMAX_MAX_AXIS:
        raise ValueError(
            f"log_softmax over {axis_size} elements: TFLite's int8 sum of exps overflows beyond {LOG_SOFTMAX_MAX_AXIS}"
        )
    params = log_softmax_params(input_scale)
    return {
        "outer": outer,
        "axis_size": axis_size,
        "inner": inner,
        **{
            key: params[key]
            for key in (
                "input_multiplier",
                "input_left_shift",
                "reverse_scaling_divisor",
                "reverse_scaling_right_shift",
                "diff_min",
            )
        },
    }


def _log_x_for_x_ge_1(z: np.ndarray) -> np.ndarray:
    """TFLite log_x_for_x_greater_than_or_equal_to_1<5> of a Q12.19 value in [1, 4096) (raw
    [2^19, 2^31)): log(z) in Q5.26. The saturating additions of TFLite's source never saturate
    in this domain, so they are plain additions here (the tests check against the saturating
    forms)."""
    z = np.asarray(z, dtype=np.int64)
    clz_a = 32 - _bit_length(z)
    z_b = _srdhm(z, _SQRT_HALF)
    headroom_b = 32 - _bit_length(z_b) - 1
    r_a = _saturating_shift_left(_srdhm(_saturating_shift_left(z, clz_a - 1), _SQRT_HALF), 1)
    r_b = _saturating_shift_left(z, headroom_b)
    quarter_q6 = 1 << 23  # 1/4 in Q6.25
    pow_2_a = ((ACCUM_INTEGER_BITS - clz_a) << 25) + quarter_q6
    pow_2_b = ((ACCUM_INTEGER_BITS - headroom_b) << 25) - quarter_q6
    r = np.minimum(r_a, r_b)
    z_pow_2_adj = np.maximum(pow_2_a, pow_2_b)
    p = _rounding_half_sum(r, _SQRT_SQRT_HALF)
    q = 2 * (r - _SQRT_SQRT_HALF)
    common_sq = _srdhm(q, q)
    num = _srdhm(q, r) + _srdhm(_srdhm(q, common_sq), _ALPHA_N)
    denom_minus_one = _srdhm(p, _ALPHA_I + q + _srdhm(_ALPHA_D, common_sq)) + _srdhm(_ALPHA_F, q)
    recip_denom = _one_over_one_plus_x_for_x_in_0_1(denom_minus_one)
    num_q6 = divide_by_power_of_two(num, 6)
    return _saturating_shift_left(_srdhm(z_pow_2_adj, _LOG_2) + _srdhm(num_q6, recip_denom), 1)


def _log_softmax_desc_valid(desc: dict) -> bool:
    """The C kernel's check: as softmax's, plus the reverse scaling, diff_min <= 0 and the row limit."""
    shift = int(desc["input_left_shift"])
    return (
        0 <= shift <= 31
        and desc["input_multiplier"] >= 0
        and desc["reverse_scaling_divisor"] >= 0
        and 0 <= desc["reverse_scaling_right_shift"] <= 31
        and -_input_radius(shift) <= desc["diff_min"] <= 0
        and desc["axis_size"] <= LOG_SOFTMAX_MAX_AXIS
    )


def log_softmax_s8(x: np.ndarray, desc: dict) -> np.ndarray:
    """Golden edgec_log_softmax_s8 (the steps above) over the strided rows of x viewed as
    [outer][axis_size][inner]; returns x's shape, scale 16/256, zero point 127."""
    if not _log_softmax_desc_valid(desc):
        raise ValueError(f"invalid log_softmax descriptor {desc}")
    rows = _rows(x, desc).astype(np.int64)
    diff = rows - rows.max(axis=1, keepdims=True)
    valid = diff >= desc["diff_min"]
    # Elements failing diff_min are computed as diff 0 and masked out (kept in int32 range).
    scaled = _srdhm(np.where(valid, diff, 0) << desc["input_left_shift"], desc["input_multiplier"])
    total = np.where(valid, divide_by_power_of_two(_exp_on_negative_values(scaled), ACCUM_INTEGER_BITS), 0).sum(axis=1)
    log_sum = _log_x_for_x_ge_1(total)[:, None]
    reverse = requantize(log_sum + INT32_MIN, desc["reverse_scaling_divisor"], -desc["reverse_scaling_right_shift"])
    adjusted_diff_min = np.maximum(desc["diff_min"] - 1, reverse)
    shifted = scaled - log_sum
    out = divide_by_power_of_two(np.maximum(shifted, INT32_MIN), _LOG_OUTPUT_SHIFT) + LOG_SOFTMAX_OUTPUT_ZERO_POINT
    out = np.where((diff > adjusted_diff_min) & (shifted >= INT32_MIN), np.clip(out, INT8_MIN, INT8_MAX), INT8_MIN)
    return _unrows(out.astype(np.int8), desc, np.shape(x))


# -- the op unit ------------------------------------------------------------------------------


class Softmax(OpDef):
    """softmax and log_softmax over any axis: the row kernel when the axis is stored last (the
    channel axis of channels-last data), the strided one otherwise."""

    kind = "softmax"
    targets = frozenset(SOFTMAXES)
    runtime_sources = ("softmax/edgec_softmax_s8.c",)
    layout_follows_input = True
    output_qparams = (SOFTMAX_OUTPUT_SCALE, SOFTMAX_OUTPUT_ZERO_POINT)

    def annotate(self, node) -> None:
        annotate(node, activation_inputs(node, 1), fixed_qspec(*self.output_qparams))

    def check(self, node) -> str | None:
        if len(node.args) > 2 and node.args[2] not in (False, None):
            return f"{node.target} with half_to_float"
        return None

    def lower(self, ctx, node) -> None:
        x = ctx.tensor(node.args[0])
        ctx.add_op(self.kind, node, [x], [ctx.output(node)], dim=node.args[1] % len(x.shape))

    def relayout(self, op, graph) -> None:
        op.attrs["stored_dim"] = graph.tensors[op.inputs[0]].stored_axis(op.attrs["dim"])

    def finalize(self, op, graph) -> None:
        x_t, out_t = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        if (out_t.scale, out_t.zero_point) != self.output_qparams:
            raise EdgecError(
                f"{op.source}: {self.kind} output must be quantized with scale {self.output_qparams[0]} "
                f"and zero point {self.output_qparams[1]}, got ({out_t.scale}, {out_t.zero_point})"
            )
        op.attrs["desc"] = self.descriptor(x_t.shape, op.attrs["stored_dim"], x_t.scale, op)

    def descriptor(self, shape, axis, scale, op) -> dict:
        return softmax_axis_desc(shape, axis, scale)

    def golden(self, op, graph, inputs):
        return softmax_axis_s8(inputs[0], op.attrs["desc"])

    def kernel_function(self, op) -> str:
        if self.kind == "softmax":  # inner 1: the kernel without the strided rows' code
            return "edgec_softmax_s8" if op.attrs["desc"]["inner"] == 1 else "edgec_softmax_axis_s8"
        return "edgec_log_softmax_s8"

    def emit(self, op, graph, names) -> CCall:
        p = names.symbol(op, "desc")
        desc = op.attrs["desc"]
        call = descriptor(SOFTMAX_DESC if self.kind == "softmax" else LOG_SOFTMAX_DESC, p, desc)
        call.code = f"status |= {op.kernel.function}(&{p}, {names.ptr(op.inputs[0])}, {names.ptr(op.outputs[0])});"
        return call


class LogSoftmax(Softmax):
    kind = "log_softmax"
    targets = frozenset(LOG_SOFTMAXES)
    output_qparams = (LOG_SOFTMAX_OUTPUT_SCALE, LOG_SOFTMAX_OUTPUT_ZERO_POINT)
    limits = f"at most {LOG_SOFTMAX_MAX_AXIS} elements along the axis"

    def check(self, node) -> str | None:
        shape = node.args[0].meta["val"].shape
        if shape[node.args[1] % len(shape)] > LOG_SOFTMAX_MAX_AXIS:
            return f"log_softmax over {shape[node.args[1] % len(shape)]} elements (at most {LOG_SOFTMAX_MAX_AXIS})"
        return super().check(node)

    def descriptor(self, shape, axis, scale, op) -> dict:
        try:
            return log_softmax_desc(shape, axis, scale)
        except ValueError as exc:
            raise EdgecError(f"{op.source}: {exc}") from None

    def golden(self, op, graph, inputs):
        return log_softmax_s8(inputs[0], op.attrs["desc"])


# -- masked softmax (attention with a constant mask) ------------------------------------------------


def masked_softmax_desc(rows: int, row_size: int, keep: np.ndarray, input_scale: float) -> dict:
    """Fields of the C struct edgec_masked_softmax_desc (same names, same order): softmax over each
    of `rows` contiguous rows of `row_size` among the elements whose mask byte is 1; `keep` is the
    bool mask of every row, stored once per distinct block (row r reads mask row r % mask_rows)."""
    mask_rows, mask = _periodic_rows(rows, row_size, keep)
    return {"rows": rows, "row_size": row_size, "mask_rows": mask_rows, "mask": mask, **softmax_params(input_scale)}


def _periodic_rows(rows: int, row_size: int, keep: np.ndarray) -> tuple[int, np.ndarray]:
    """(n, bytes): the fewest rows n whose repetition gives the bool mask `keep` of every row, and
    those n rows as uint8 (row r reads row r % n)."""
    keep = np.asarray(keep, bool).reshape(rows, row_size)
    n = next(n for n in range(1, rows + 1) if rows % n == 0 and (keep.reshape(-1, n, row_size) == keep[:n]).all())
    return n, keep[:n].astype(np.uint8).ravel()


def masked_softmax_s8(x: np.ndarray, desc: dict) -> np.ndarray:
    """Golden edgec_masked_softmax_s8."""
    rows, row_size, mask_rows = desc["rows"], desc["row_size"], desc["mask_rows"]
    keep = np.tile(np.asarray(desc["mask"], bool).reshape(mask_rows, row_size), (rows // mask_rows, 1))
    params = {key: desc[key] for key in ("input_multiplier", "input_left_shift", "diff_min")}
    return softmax_s8(np.asarray(x, np.int8).reshape(rows, row_size), params, keep).reshape(np.shape(x))


class MaskedSoftmax(Softmax):
    """Attention's softmax with a constant mask (SDPA's attn_mask or is_causal, normalize.py): over
    the last axis, rows in PyTorch order."""

    kind = "masked_softmax"
    family = "masked_softmax (attention with a constant mask or is_causal)"
    targets = frozenset(MASKED_SOFTMAXES)
    limits = "a constant mask (bool, or float of 0 and -inf)"

    def kernel_function(self, op) -> str:
        return "edgec_masked_softmax_s8"

    def lower(self, ctx, node) -> None:
        x = ctx.tensor(node.args[0])
        keep = np.broadcast_to(np.asarray(ctx.constant(node.args[1]).value, bool), x.shape)
        ctx.add_op(self.kind, node, [x], [ctx.output(node)], keep=np.ascontiguousarray(keep))

    def torch_order_tensors(self, op, graph) -> list[str]:
        return [op.inputs[0], op.outputs[0]]

    def relayout(self, op, graph) -> None:
        op.attrs["stored_dim"] = len(graph.tensors[op.inputs[0]].shape) - 1  # PyTorch order (torch_order_tensors)

    def descriptor(self, shape, axis, scale, op) -> dict:
        return masked_softmax_desc(math.prod(shape[:-1]), shape[-1], op.attrs["keep"], scale)

    def golden(self, op, graph, inputs):
        return masked_softmax_s8(inputs[0], op.attrs["desc"])

    def emit(self, op, graph, names) -> CCall:
        p = names.symbol(op, "desc")
        call = descriptor(MASKED_SOFTMAX_DESC, p, op.attrs["desc"])
        call.code = f"status |= {op.kernel.function}(&{p}, {names.ptr(op.inputs[0])}, {names.ptr(op.outputs[0])});"
        return call


# -- softmax with a mask given as a model input (MHA's key_padding_mask) ---------------------------


def input_masked_softmax_desc(
    rows: int, row_size: int, masks: int, ignore: bool, input_scale: float, keep: np.ndarray | None = None
) -> dict:
    """Fields of the C struct edgec_input_masked_softmax_desc: `rows` rows of `row_size` scores,
    the first rows / masks reading mask row 0, and so on (scores [B, ..., S], mask [B, S]); `keep`:
    a constant bool mask of every row (a causal attn_mask) that an element must pass as well."""
    keep_rows, keep_bytes = (0, None) if keep is None else _periodic_rows(rows, row_size, keep)
    return {
        "rows": rows,
        "row_size": row_size,
        "rows_per_mask": rows // masks,
        "ignore": int(ignore),
        "keep_rows": keep_rows,
        "keep": keep_bytes,
        **softmax_params(input_scale),
    }


def input_masked_softmax_s8(x: np.ndarray, mask: np.ndarray, desc: dict) -> np.ndarray:
    """Golden edgec_input_masked_softmax_s8: masked_softmax_s8's rows, each keeping the keys its
    mask row keeps (a non-zero byte keeps a key, or drops it with `ignore`)."""
    rows, row_size = desc["rows"], desc["row_size"]
    flags = np.asarray(mask).reshape(-1, row_size) != 0
    keep = np.repeat(flags != bool(desc["ignore"]), desc["rows_per_mask"], axis=0)
    if desc["keep_rows"]:
        constant = np.asarray(desc["keep"], bool).reshape(desc["keep_rows"], row_size)
        keep &= np.tile(constant, (rows // desc["keep_rows"], 1))
    params = {key: desc[key] for key in ("input_multiplier", "input_left_shift", "diff_min")}
    return softmax_s8(np.asarray(x, np.int8).reshape(rows, row_size), params, keep).reshape(np.shape(x))


class InputMaskedSoftmax(MaskedSoftmax):
    """Attention's softmax with a key mask the model takes as an input ([B, S] bool, one byte per
    key on the device): nn.MultiheadAttention's key_padding_mask, or SDPA's bool attn_mask."""

    kind = "input_masked_softmax"
    family = "input_masked_softmax (attention with key_padding_mask given as a model input, and a causal mask)"
    targets = frozenset(INPUT_MASKED_SOFTMAXES)
    limits = "a bool [batch, keys] model input (key_padding_mask), alone or with a constant (causal) mask added"

    def kernel_function(self, op) -> str:
        return "edgec_input_masked_softmax_s8"

    def check(self, node) -> str | None:
        return None  # normalize.py wrote it only for a [batch, keys] bool model input

    def lower(self, ctx, node) -> None:
        x, mask = ctx.tensor(node.args[0]), ctx.tensor(node.args[1])
        also = node.args[3] if len(node.args) > 3 else None
        keep = None if also is None else np.broadcast_to(np.asarray(ctx.constant(also).value, bool), x.shape)
        ctx.add_op(
            self.kind, node, [x, mask], [ctx.output(node)], ignore=bool(node.args[2]), masks=mask.shape[0], keep=keep
        )

    def torch_order_tensors(self, op, graph) -> list[str]:
        return [*op.inputs, op.outputs[0]]

    def descriptor(self, shape, axis, scale, op) -> dict:
        rows, masks, ignore = math.prod(shape[:-1]), op.attrs["masks"], op.attrs["ignore"]
        return input_masked_softmax_desc(rows, shape[-1], masks, ignore, scale, op.attrs.get("keep"))

    def golden(self, op, graph, inputs):
        return input_masked_softmax_s8(inputs[0], inputs[1], op.attrs["desc"])

    def emit(self, op, graph, names) -> CCall:
        p = names.symbol(op, "desc")
        call = descriptor(INPUT_MASKED_SOFTMAX_DESC, p, op.attrs["desc"])
        x, mask, out = names.ptr(op.inputs[0]), names.ptr(op.inputs[1]), names.ptr(op.outputs[0])
        call.code = f"status |= {op.kernel.function}(&{p}, {x}, {mask}, {out});"
        return call


UNITS = (Softmax(), LogSoftmax(), MaskedSoftmax(), InputMaskedSoftmax())
