/*
 * edgec_support.h -- fixed-point helpers shared by the kernels (internal, header-only).
 * Mirrors edgec/numerics.py exactly. Written without undefined behaviour: shifts of negative
 * values use the implementation-defined arithmetic right shift every Arm and host compiler
 * provides, and left shifts that may wrap go through uint32_t.
 */
#ifndef EDGEC_SUPPORT_H
#define EDGEC_SUPPORT_H

#include <stdint.h>

#define EDGEC_MAX(a, b) ((a) > (b) ? (a) : (b))
#define EDGEC_MIN(a, b) ((a) < (b) ? (a) : (b))

/* (a * m + 2^30) >> 31 on the 64-bit product, truncated to int32. */
static inline int32_t edgec_doubling_high_mult_no_sat(int32_t a, int32_t m)
{
    const int64_t product = (int64_t)a * (int64_t)m + ((int64_t)1 << 30);
    return (int32_t)(product >> 31);
}

/* Shift right by `exponent` (0..31), rounding half away from zero. */
static inline int32_t edgec_divide_by_power_of_two(int32_t x, int32_t exponent)
{
    const int32_t mask = (int32_t)((1u << exponent) - 1u);
    const int32_t remainder = x & mask;
    int32_t result = x >> exponent;
    const int32_t threshold = (mask >> 1) + (result < 0 ? 1 : 0);
    if (remainder > threshold) {
        result += 1;
    }
    return result;
}

/* arm_nn_requantize, double-rounding mode. */
static inline int32_t edgec_requantize(int32_t x, int32_t multiplier, int32_t shift)
{
    const int32_t left = shift > 0 ? shift : 0;
    const int32_t right = shift > 0 ? 0 : -shift;
    const int32_t shifted = (int32_t)((uint32_t)x << left);
    return edgec_divide_by_power_of_two(edgec_doubling_high_mult_no_sat(shifted, multiplier), right);
}

static inline int8_t edgec_clamp_to_s8(int32_t x, int32_t act_min, int32_t act_max)
{
    x = EDGEC_MAX(x, act_min);
    x = EDGEC_MIN(x, act_max);
    return (int8_t)x;
}

#endif /* EDGEC_SUPPORT_H */
