/*
 * edgec_l2_norm_s8.c -- int8 L2 normalisation along one axis: TFLite Micro's integer
 * L2_NORMALIZATION, bit for bit (golden and the arithmetic: edgec.ops.l2_norm).
 *
 * Per row: acc = sum (q - zp)^2; (m, s) = 1 / sqrt(acc) by gemmlowp's fixed-point Newton-Raphson
 * (GetInvSqrtQuantizedMultiplierExp); y = clamp(requantize(q - zp, m, s + 7), -128, 127), at scale
 * 1/128, zero point 0. The arithmetic right shifts of negative values are the
 * implementation-defined ones every Arm and host compiler does arithmetically (edgec_support.h).
 */
#include <stddef.h>

#include "edgec_nn.h"
#include "../support/edgec_support.h"

/* gemmlowp SaturatingRoundingDoublingHighMul: round half away from zero, INT32_MIN^2 saturates. */
static int32_t srdhm(int32_t a, int32_t b)
{
    const int64_t product = (int64_t)a * (int64_t)b;
    const int64_t nudge = product >= 0 ? ((int64_t)1 << 30) : (int64_t)1 - ((int64_t)1 << 30);
    if (a == INT32_MIN && b == INT32_MIN) {
        return INT32_MAX;
    }
    return (int32_t)((product + nudge) / ((int64_t)1 << 31));
}

/* gemmlowp SaturatingRoundingMultiplyByPOT<exponent> for 0 < exponent < 31. */
static int32_t saturating_pot(int32_t x, int32_t exponent)
{
    const int32_t threshold = (int32_t)((1u << (31 - exponent)) - 1u);
    if (x > threshold) {
        return INT32_MAX;
    }
    if (x < -threshold) {
        return INT32_MIN;
    }
    return (int32_t)((uint32_t)x << exponent);
}

/* GetInvSqrtQuantizedMultiplierExp(acc, -1): *multiplier * 2^(*shift) / 2^31 ~ 1 / sqrt(acc). */
static void inv_sqrt_multiplier(int32_t acc, int32_t *multiplier, int32_t *shift)
{
    int32_t right = 11, pairs = 0, x = (int32_t)1 << 28, half_input, step;
    const int32_t half_three = ((int32_t)1 << 28) + ((int32_t)1 << 27);

    if (acc <= 1) {
        *multiplier = INT32_MAX;
        *shift = 0;
        return;
    }
    while (acc >= ((int32_t)1 << 29)) {
        acc /= 4;
        ++right;
    }
    while (acc < ((int32_t)1 << 27)) { /* the largest pair count keeping acc below 2^29 */
        acc <<= 2;
        ++pairs;
    }
    right -= pairs;
    half_input = edgec_divide_by_power_of_two(acc >> 1, 1);
    for (step = 0; step < 5; ++step) {
        const int32_t cube = saturating_pot(srdhm(srdhm(x, x), x), 6);
        x = saturating_pot(srdhm(half_three, x) - srdhm(half_input, cube), 3);
    }
    x = srdhm(x, 1518500250); /* sqrt(2) / 2 in Q31 */
    if (right < 0) {
        x = (int32_t)((uint32_t)x << -right);
        right = 0;
    }
    *multiplier = x;
    *shift = -right;
}

edgec_status edgec_l2_norm_s8(const edgec_l2_norm_desc *desc, const int8_t *input, int8_t *output)
{
    int32_t o, i, d;

    if (desc == NULL || input == NULL || output == NULL || desc->outer < 1 || desc->depth < 1 || desc->inner < 1 ||
        desc->depth > EDGEC_L2_NORM_MAX_DEPTH || desc->input_zero_point < -128 || desc->input_zero_point > 127) {
        return EDGEC_ARG_ERROR;
    }
    for (o = 0; o < desc->outer; ++o) {
        const int8_t *in_row = input + (size_t)o * (size_t)desc->depth * (size_t)desc->inner;
        int8_t *out_row = output + (size_t)o * (size_t)desc->depth * (size_t)desc->inner;
        for (i = 0; i < desc->inner; ++i) {
            int32_t acc = 0, multiplier, shift;
            for (d = 0; d < desc->depth; ++d) {
                const int32_t v = in_row[(size_t)d * (size_t)desc->inner + (size_t)i] - desc->input_zero_point;
                acc += v * v;
            }
            inv_sqrt_multiplier(acc, &multiplier, &shift);
            for (d = 0; d < desc->depth; ++d) {
                const size_t at = (size_t)d * (size_t)desc->inner + (size_t)i;
                const int32_t v = in_row[at] - desc->input_zero_point;
                out_row[at] = edgec_clamp_to_s8(edgec_requantize(v, multiplier, shift + 7), -128, 127);
            }
        }
    }
    return EDGEC_OK;
}
