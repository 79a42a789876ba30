/*
 * edgec_softmax_s8.c -- int8 softmax over the last dimension (portable C99 path).
 *
 * Bit-exact with TFLite Micro's reference int8 softmax and CMSIS-NN's arm_softmax_s8: gemmlowp
 * fixed point with the scaled input difference in Q5.26, exp() results in Q0.31, their sum in
 * Q12.19 (12 accumulator bits) and a Newton-Raphson reciprocal. Output scale 1/256, zero point -128.
 * Golden: edgec.ops.softmax.softmax_s8 (the module docstring lists the steps).
 *
 * Written without undefined behaviour: the input left shift goes through uint32_t (the shift may be
 * 31), the doubling high multiply saturates INT32_MIN * INT32_MIN, and the row sum is capped so it
 * cannot overflow. When the sum reaches 2^28 the final right shift would exceed 31 (TFLite aborts,
 * CMSIS-NN shifts out of range); the exact result of that division is 0, so such rows are all -128.
 */
#include <stddef.h>

#include "edgec_nn.h"
#include "../support/edgec_support.h"

#define SOFTMAX_ACCUM_BITS 12
/* A sum at or above this makes the output shift 35 - clz(sum) exceed 31: every output rounds to 0. */
#define SOFTMAX_SUM_LIMIT ((int32_t)1 << 28)

/*
 * gemmlowp SaturatingRoundingDoublingHighMul. Its nudge-and-truncate rounding equals
 * floor((a*b + 2^30) / 2^31), which is the support header's non-saturating version; the only
 * product that does not fit is INT32_MIN * INT32_MIN, which saturates.
 */
static inline int32_t softmax_srdhm(int32_t a, int32_t b)
{
    if (a == INT32_MIN && b == INT32_MIN) {
        return INT32_MAX;
    }
    return edgec_doubling_high_mult_no_sat(a, b);
}

/* gemmlowp SaturatingRoundingMultiplyByPOT<exponent> for exponent in 1..30. */
static inline int32_t softmax_saturating_shift_left(int32_t x, int32_t exponent)
{
    const int32_t threshold = (int32_t)((1u << (31 - exponent)) - 1u);
    if (x > threshold) {
        return INT32_MAX;
    }
    if (x < -threshold) {
        return INT32_MIN;
    }
    return x * ((int32_t)1 << exponent); /* in range, so the product cannot overflow */
}

/*
 * gemmlowp exp_on_negative_values for a Q5.26 input in (-32, 0]; result in Q0.31.
 * exp(a) = exp(a mod 1/4 - 1/4) * product of exp(-2^k) over the whole quarters that were removed.
 */
static int32_t softmax_exp_on_negative_values(int32_t a)
{
    /* exp(-2^k / 4) in Q0.31 for k = 0..6 (exp(-1/4) ... exp(-16)). */
    static const int32_t barrel[7] = {1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242};
    const int32_t quarter = (int32_t)1 << 24; /* 1/4 in Q5.26 */
    const int32_t a_mod_quarter_minus_quarter = (a & (quarter - 1)) - quarter;
    const int32_t remainder = a_mod_quarter_minus_quarter - a;
    /* Taylor series of exp around -1/8 on [-1/4, 0), argument rescaled to Q0.31 (x32 is exact). */
    const int32_t x = a_mod_quarter_minus_quarter * 32 + ((int32_t)1 << 28);
    const int32_t x2 = softmax_srdhm(x, x);
    const int32_t x3 = softmax_srdhm(x2, x);
    const int32_t x4 = softmax_srdhm(x2, x2);
    const int32_t x4_over_4 = edgec_divide_by_power_of_two(x4, 2);
    const int32_t poly = edgec_divide_by_power_of_two(softmax_srdhm(x4_over_4 + x3, 715827883) + x2, 1);
    const int32_t exp_minus_one_eighth = 1895147668;
    int32_t result = exp_minus_one_eighth + softmax_srdhm(exp_minus_one_eighth, x + poly);
    int32_t k;

    for (k = 0; k < 7; ++k) {
        if ((remainder & ((int32_t)1 << (24 + k))) != 0) {
            result = softmax_srdhm(result, barrel[k]);
        }
    }
    return a == 0 ? INT32_MAX : result;
}

/* gemmlowp one_over_one_plus_x_for_x_in_0_1: Q0.31 a in [0, 1) -> Q0.31 1/(1+a). */
static int32_t softmax_one_over_one_plus_x(int32_t a)
{
    /* RoundingHalfSum(a, 1.0): C99 division truncates, as gemmlowp's does. */
    const int64_t total = (int64_t)a + INT32_MAX;
    const int32_t half_denominator = (int32_t)((total + (total >= 0 ? 1 : -1)) / 2);
    /* Newton-Raphson in Q2.29 from the initial guess 48/17 - 32/17 * d. */
    int32_t x = 1515870810 + softmax_srdhm(half_denominator, -1010580540);
    int32_t i;

    for (i = 0; i < 3; ++i) {
        const int32_t one_minus_dx = ((int32_t)1 << 29) - softmax_srdhm(half_denominator, x);
        x += softmax_saturating_shift_left(softmax_srdhm(x, one_minus_dx), 2);
    }
    return softmax_saturating_shift_left(x, 1);
}

/* Number of leading zero bits of a non-zero value; once per row, so a loop is fine. */
static int32_t softmax_clz(uint32_t v)
{
    int32_t n = 0;
    while ((v & 0x80000000u) == 0u) {
        v <<= 1;
        ++n;
    }
    return n;
}

/* exp(beta * s_in * diff) in Q0.31 for a diff that passed the diff_min test. */
static int32_t softmax_exp_of_diff(const edgec_softmax_params *params, int32_t diff)
{
    /* diff >= diff_min >= -radius (softmax_params_valid) keeps |diff| * 2^shift <= 31 * 2^26: no wrap. */
    const int32_t shifted = (int32_t)((uint32_t)diff << params->input_left_shift);
    return softmax_exp_on_negative_values(softmax_srdhm(shifted, params->input_multiplier));
}

static void softmax_row(const edgec_softmax_params *params, const int8_t *input, int32_t row_size,
                        int8_t *output)
{
    int32_t max = input[0];
    int32_t sum = 0;
    int32_t headroom;
    int32_t reciprocal;
    int32_t exponent;
    int32_t col;

    for (col = 1; col < row_size; ++col) {
        max = EDGEC_MAX(max, (int32_t)input[col]);
    }
    for (col = 0; col < row_size; ++col) {
        const int32_t diff = input[col] - max;
        /* Stop accumulating at the limit: the row's result is already decided and sum cannot overflow. */
        if (diff >= params->diff_min && sum < SOFTMAX_SUM_LIMIT) {
            sum += edgec_divide_by_power_of_two(softmax_exp_of_diff(params, diff), SOFTMAX_ACCUM_BITS);
        }
    }
    if (sum <= 0 || sum >= SOFTMAX_SUM_LIMIT) {
        for (col = 0; col < row_size; ++col) {
            output[col] = (int8_t)-128;
        }
        return;
    }

    /* sum = (1 + x) * 2^(31 - headroom) with x in [0, 1): 1/sum = 1/(1 + x) * 2^-(12 - headroom). */
    headroom = softmax_clz((uint32_t)sum);
    reciprocal = softmax_one_over_one_plus_x((int32_t)(((uint32_t)sum << headroom) - 0x80000000u));
    /* Q0.31 * Q0.31 probability -> units of 1/256: shift by num_bits_over_unit + 31 - 8 (<= 31 here). */
    exponent = (SOFTMAX_ACCUM_BITS - headroom) + 31 - 8;

    for (col = 0; col < row_size; ++col) {
        const int32_t diff = input[col] - max;
        if (diff >= params->diff_min) {
            const int32_t prob = softmax_srdhm(reciprocal, softmax_exp_of_diff(params, diff));
            const int32_t y = edgec_divide_by_power_of_two(prob, exponent) - 128;
            output[col] = edgec_clamp_to_s8(y, -128, 127);
        } else {
            output[col] = (int8_t)-128;
        }
    }
}

/*
 * The exp() argument must stay in Q5.26 range (-32, 0]: diff_min may be stricter than the
 * input radius floor(31 * 2^26 / 2^shift) that softmax_params derives, never looser, and the
 * multiplier must be non-negative. This is what rules out overflow everywhere below.
 */
static int softmax_params_valid(const edgec_softmax_params *params)
{
    int32_t radius;
    if (params->input_left_shift < 0 || params->input_left_shift > 31 || params->input_multiplier < 0) {
        return 0;
    }
    radius = ((int32_t)31 << 26) >> params->input_left_shift;
    return params->diff_min >= -radius;
}

edgec_status edgec_softmax_s8(const edgec_softmax_params *params, const int8_t *input,
                              int32_t num_rows, int32_t row_size, int8_t *output)
{
    int32_t row;

    if (params == NULL || input == NULL || output == NULL || num_rows < 0 || row_size < 1) {
        return EDGEC_ARG_ERROR;
    }
    if (!softmax_params_valid(params)) {
        return EDGEC_ARG_ERROR;
    }
    for (row = 0; row < num_rows; ++row) {
        softmax_row(params, input, row_size, output);
        input += row_size;
        output += row_size;
    }
    return EDGEC_OK;
}
