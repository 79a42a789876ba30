/*
 * edgec_layer_norm_s8.c -- int8 layer normalisation over the last axis, integer only (golden and
 * the derivation of every bound: edgec.ops.layer_norm; docs/numerics.md).
 *
 * Per row: d_i = n q_i - sum q; V = sum d_i^2 + eps_term (int64); r = isqrt(V 4^t) in
 * [2^30, 2^31); g = (2^61 - 1) / r; u_i = RoundShift(d_i 2^t g, 37);
 * y_i = clamp(RoundShift(u_i scale[i] + offset[i], shift) + output_offset, act_min, act_max).
 * u_i's rounding shift works on an offset unsigned value; the output's takes the high word of
 * the 64-bit sum with its rounding and zero-point terms added (|sum| < 2^63; S >= 32), then an
 * arithmetic shift of that int32 by S - 32 (the implementation-defined shift every Arm and host
 * compiler does arithmetically, as edgec_support.h assumes).
 */
#include <stddef.h>

#include "edgec_nn.h"
#include "../support/edgec_support.h"

#define U_SHIFT 37

/* floor((v + 2^(s-1)) / 2^s) for |v| < 2^62 and 1 <= s <= 62, through an unsigned value. */
static int64_t edgec_round_shift64(int64_t v, int32_t s)
{
    const uint64_t bias = (uint64_t)1 << 62;
    const uint64_t shifted = ((uint64_t)v + bias + ((uint64_t)1 << (s - 1))) >> s;
    return (int64_t)(shifted - (bias >> s));
}

/* floor(sqrt(v)) for v in [2^60, 2^62): the root is in [2^30, 2^31); its bits are decided from the
 * top, each by one 32 x 32 -> 64-bit square (exact, no division). */
static uint32_t edgec_isqrt64(uint64_t v)
{
    uint32_t root = (uint32_t)1 << 30, bit;
    for (bit = (uint32_t)1 << 29; bit != 0; bit >>= 1) {
        const uint32_t candidate = root | bit;
        if ((uint64_t)candidate * candidate <= v) {
            root = candidate;
        }
    }
    return root;
}

/* The number of significant bits of v > 0 (64 - count of leading zeros), by halving. */
static int32_t bit_length64(uint64_t v)
{
    int32_t bits = 1, step;
    for (step = 32; step > 0; step >>= 1) {
        if (v >> step) {
            v >>= step;
            bits += step;
        }
    }
    return bits;
}

/* F: the fraction bits of eps_term, max(0, (30 - 3 ceil(log2 n)) / 2) (layer_norm.eps_fraction_bits). */
static int32_t eps_fraction_bits(int32_t n)
{
    int32_t bits = 0;
    while (bits < 31 && ((int32_t)1 << bits) < n) {
        bits++;
    }
    return 3 * bits >= 30 ? 0 : (30 - 3 * bits) / 2;
}

static int64_t join64(int32_t hi, int32_t lo)
{
    return (int64_t)hi * ((int64_t)1 << 32) + (int64_t)(uint32_t)lo;
}

static int layer_norm_desc_valid(const edgec_layer_norm_desc *d)
{
    const int64_t eps_term = join64(d->eps_term_hi, d->eps_term_lo);
    return d->rows >= 1 && d->features >= 1 && d->features <= EDGEC_LAYER_NORM_MAX_FEATURES &&
           (int64_t)d->rows * d->features <= INT32_MAX && eps_term >= 0 && eps_term <= ((int64_t)1 << 60) &&
           d->shift >= 32 && d->shift <= 62 && d->output_offset >= INT8_MIN && d->output_offset <= INT8_MAX &&
           edgec_act_range_valid(d->act_min, d->act_max) && d->scale != NULL && d->offset_hi != NULL &&
           d->offset_lo != NULL;
}

static int offsets_valid(const edgec_layer_norm_desc *d)
{
    int32_t j;
    for (j = 0; j < d->features; j++) {
        const int64_t offset = join64(d->offset_hi[j], d->offset_lo[j]);
        if (offset > ((int64_t)1 << 56) || offset < -((int64_t)1 << 56)) {
            return 0;
        }
    }
    return 1;
}

edgec_status edgec_layer_norm_s8(const edgec_layer_norm_desc *desc, const int8_t *input, int8_t *output)
{
    int32_t row, i, act_min, act_max, high_shift;
    int64_t eps_term, rounding;
    const int32_t *scale, *offset_hi, *offset_lo;
    if (desc == NULL || input == NULL || output == NULL || !layer_norm_desc_valid(desc) || !offsets_valid(desc)) {
        return EDGEC_ARG_ERROR;
    }
    eps_term = join64(desc->eps_term_hi, desc->eps_term_lo);
    /* RoundShift(v, S) + zp = floor((v + 2^(S-1) + zp 2^S) / 2^S); |v| < 2^57 keeps the sum in int64 */
    rounding = ((int64_t)1 << (desc->shift - 1)) + (int64_t)desc->output_offset * ((int64_t)1 << desc->shift);
    /* locals: the int8 output could alias the descriptor as far as the compiler knows */
    scale = desc->scale;
    offset_hi = desc->offset_hi;
    offset_lo = desc->offset_lo;
    act_min = desc->act_min;
    act_max = desc->act_max;
    high_shift = desc->shift - 32;
    for (row = 0; row < desc->rows; row++) {
        const int8_t *x = input + (ptrdiff_t)row * desc->features;
        int8_t *y = output + (ptrdiff_t)row * desc->features;
        const int32_t n = desc->features;
        const int32_t fraction = eps_fraction_bits(n);
        int32_t sum = 0, t = 0;
        uint64_t variance = (uint64_t)eps_term;
        int32_t g = 0;
        for (i = 0; i < n; i++) {
            sum += x[i];
        }
        for (i = 0; i < n; i++) {
            const int32_t d = n * x[i] - sum; /* |d| <= 255 (n - 1): 4^F sum d^2 < 2^46 */
            variance += (uint64_t)((int64_t)d * d) << (2 * fraction);
        }
        if (variance != 0) {
            /* the smallest t >= 0 with V 4^t >= 2^60: bit_length + 2t >= 61 */
            const int32_t bits = bit_length64(variance);
            t = bits >= 61 ? 0 : (62 - bits) / 2;
            g = (int32_t)((((uint64_t)1 << 61) - 1) / edgec_isqrt64(variance << (2 * t)));
        }
        if (g == 0) {
            for (i = 0; i < n; i++) {
                const int64_t v = join64(offset_hi[i], offset_lo[i]) + rounding;
                y[i] = (int8_t)EDGEC_MIN(EDGEC_MAX((int32_t)(v >> 32) >> high_shift, act_min), act_max);
            }
            continue;
        }
        for (i = 0; i < n; i++) {
            /* |d 2^(t+F)| <= sqrt(V 4^t) < 2^31 and g < 2^31: a product below 2^62; |u| <= 2^24 + 1
             * (t + F <= 45: d = 0 when V is eps alone) */
            const int64_t d = (int64_t)(n * x[i] - sum) * ((int64_t)1 << (t + fraction));
            const int32_t u = (int32_t)edgec_round_shift64(d * g, U_SHIFT);
            const int64_t v = (int64_t)u * scale[i] + join64(offset_hi[i], offset_lo[i]) + rounding;
            const int32_t out = (int32_t)(v >> 32) >> high_shift;
            y[i] = (int8_t)EDGEC_MIN(EDGEC_MAX(out, act_min), act_max);
        }
    }
    return EDGEC_OK;
}
