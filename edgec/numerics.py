"""The int8 arithmetic every golden kernel shares (CMSIS-NN / TFLite conventions).

This module is the ground floor of the simulator: it imports nothing of edgec. Every function
works on numpy integer arrays (int64 internally, so intermediate products never overflow) and
reproduces the C kernels' int32 behaviour exactly, including the wrap of `x << shift`.
docs/numerics.md states the arithmetic every kernel shares.
"""

from __future__ import annotations

import math

import numpy as np

INT8_MIN, INT8_MAX = -128, 127
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1
ADD_LEFT_SHIFT = 20


def round_half_away(x: float) -> int:
    """Round to nearest, ties away from zero (C `round`, TFLite `TfLiteRound`)."""
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def quantize_multiplier(d: float) -> tuple[int, int]:
    """TFLite QuantizeMultiplier: real positive `d` -> (int32 multiplier, shift), d ~ m * 2^(shift-31)."""
    if d == 0.0:
        return 0, 0
    if d < 0 or not math.isfinite(d):
        raise ValueError(f"multiplier must be a finite non-negative number, got {d}")
    q, shift = math.frexp(d)
    q_fixed = round_half_away(q * (1 << 31))
    if q_fixed == (1 << 31):
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    if shift > 30:
        raise ValueError(f"multiplier {d} is too large to requantize in int32")
    return int(q_fixed), int(shift)


def wrap_int32(x: np.ndarray) -> np.ndarray:
    """Two's-complement wrap of int64 values to int32 (what a C cast does)."""
    x = np.asarray(x, dtype=np.int64)
    return ((x + 2**31) & 0xFFFFFFFF) - 2**31


def doubling_high_mult_no_sat(a: np.ndarray, m: np.ndarray) -> np.ndarray:
    """(a * m + 2^30) >> 31 on a 64-bit product, truncated to int32."""
    a = np.asarray(a, dtype=np.int64)
    m = np.asarray(m, dtype=np.int64)
    # a*m fits in int64 because both are int32.
    return wrap_int32((a * m + (1 << 30)) >> 31)


def divide_by_power_of_two(x: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """Arithmetic shift right by `exponent` rounding half away from zero (gemmlowp RoundingDivideByPOT)."""
    x = np.asarray(x, dtype=np.int64)
    e = np.asarray(exponent, dtype=np.int64)
    mask = (np.int64(1) << e) - 1
    remainder = x & mask
    result = x >> e
    threshold = (mask >> 1) + (result < 0)
    return result + (remainder > threshold)


def requantize(x: np.ndarray, multiplier: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """arm_nn_requantize, double-rounding mode, with the left shift saturating to int32.
    Broadcasts per-channel multiplier/shift arrays.

    CMSIS-NN and TFLite compute x * (1 << left) in int32, which overflows (undefined behaviour)
    when the effective scale is large (s_in * s_w / s_out >= 2^15 or so) and |x| too; saturating
    gives the value the float arithmetic saturates to, and equals theirs wherever theirs is defined.
    """
    x = np.asarray(x, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    shifted = np.clip(x << left, INT32_MIN, INT32_MAX)
    return divide_by_power_of_two(doubling_high_mult_no_sat(shifted, multiplier), right)


def saturate_int8(x: np.ndarray, act_min: int = INT8_MIN, act_max: int = INT8_MAX) -> np.ndarray:
    return np.clip(np.asarray(x, dtype=np.int64), act_min, act_max).astype(np.int8)


def quantize_bias(bias: np.ndarray, input_scale: float, weight_scales: np.ndarray) -> np.ndarray:
    """int32 bias = round(b / (s_in * s_w[c])), saturated to int32."""
    real = np.asarray(bias, dtype=np.float64) / (input_scale * np.asarray(weight_scales, dtype=np.float64))
    q = np.array([round_half_away(float(v)) for v in np.atleast_1d(real)], dtype=np.int64)
    return np.clip(q, INT32_MIN, INT32_MAX).astype(np.int32)


def activation_bounds(zero_point: int, scale: float, lo: float | None, hi: float | None) -> tuple[int, int]:
    """Clamp bounds in the quantized domain for a float clamp [lo, hi] (None = unbounded)."""
    act_min, act_max = INT8_MIN, INT8_MAX
    if lo is not None:
        act_min = max(INT8_MIN, min(INT8_MAX, zero_point + round_half_away(lo / scale)))
    if hi is not None:
        act_max = min(INT8_MAX, max(INT8_MIN, zero_point + round_half_away(hi / scale)))
    return act_min, act_max


# ---- int16 activations (the "16x8" scheme: int16 activations, int8 weights, int64 bias) ----------

# arm_nn_requantize_s64 / TFLite's int64 MultiplyByQuantizedMultiplier read values in
# [-2^47, 2^47) and shifts in [-31, 7] (their documented ranges and DCHECKs).
S64_REQUANTIZE_LIMIT = 2**47
S64_SHIFT_MIN, S64_SHIFT_MAX = -31, 7


def reduce_multiplier(multiplier: np.ndarray) -> np.ndarray:
    """CMSIS-NN REDUCE_MULTIPLIER: the Q31 multiplier rounded to Q15 (0x7FFF from 0x7FFF0000 up,
    where rounding would reach 2^15)."""
    m = np.asarray(multiplier, dtype=np.int64)
    return np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)


def add_bias_s64(acc: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """acc + bias saturated to requantize_s64's input range [-2^47, 2^47), computed exactly for
    any int64 bias and |acc| < 2^62 (the bias is first clipped to +-2^62, which cannot change a sum
    that then saturates anyway)."""
    acc = np.asarray(acc, dtype=np.int64)
    bias = np.clip(np.asarray(bias, dtype=np.int64), -(2**62), 2**62)
    return np.clip(acc + bias, -S64_REQUANTIZE_LIMIT, S64_REQUANTIZE_LIMIT - 1)


def requantize_s64(x: np.ndarray, multiplier: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """arm_nn_requantize_s64 with REDUCE_MULTIPLIER applied to the Q31 multiplier (CMSIS-NN's
    s16 conv, depthwise and fully connected; TFLite's int64 MultiplyByQuantizedMultiplier):
    r = (x * reduce_multiplier(m)) >> (14 - shift), then (r + 1) >> 1 (round half up), saturated
    to int32. x in [-2^47, 2^47), multiplier >= 0, shift in [-31, 7]: then the product fits int64.
    CMSIS-NN truncates r to int32 before the rounding step; saturating instead equals it wherever
    the result fits int32 and gives what the real arithmetic saturates to elsewhere."""
    x = np.asarray(x, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    high = (x * reduce_multiplier(multiplier)) >> (14 - shift)
    return np.clip((high + 1) >> 1, INT32_MIN, INT32_MAX)


def quantize_bias_s64(bias: np.ndarray, input_scale: float, weight_scales: np.ndarray) -> np.ndarray:
    """int64 bias of the 16x8 scheme = round(b / (s_in * s_w[c])) (half away from zero),
    saturated to int64."""
    real = np.asarray(bias, dtype=np.float64) / (input_scale * np.asarray(weight_scales, dtype=np.float64))
    real = np.clip(np.atleast_1d(real), -(2.0**63), 2.0**63 - 2**10)
    return np.array([round_half_away(float(v)) for v in real], dtype=np.int64)


def saturate_int16(x: np.ndarray, act_min: int = INT16_MIN, act_max: int = INT16_MAX) -> np.ndarray:
    return np.clip(np.asarray(x, dtype=np.int64), act_min, act_max).astype(np.int16)
