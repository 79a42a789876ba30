/*
 * edgec_softmax_s8.c -- int8 softmax and log_softmax (portable C99 path).
 *
 * Softmax: bit-exact with TFLite Micro's reference int8 softmax and CMSIS-NN's arm_softmax_s8:
 * gemmlowp fixed point with the scaled input difference in Q5.26, exp() results in Q0.31, their
 * sum in Q12.19 (12 accumulator bits) and a Newton-Raphson reciprocal. Output scale 1/256, zero
 * point -128. Golden: edgec.ops.softmax.softmax_s8 (the module docstring lists the steps), and
 * softmax_axis_s8 for edgec_softmax_axis_s8, the same rows read with a stride.
 *
 * log_softmax: bit-exact with TFLite's int8 LOG_SOFTMAX (reference_integer_ops::LogSoftmax, the
 * same arithmetic as reference_ops::LogSoftmaxQuantized in TFLite Micro): the same exp and sum,
 * then gemmlowp's log_x_for_x_greater_than_or_equal_to_1 into Q5.26. Output scale 16/256, zero
 * point 127. Golden: edgec.ops.softmax.log_softmax_s8.
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
    static const int32_t barrel[7] = { 1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242 };
    const int32_t quarter = (int32_t)1 << 24; /* 1/4 in Q5.26 */
    if (a == 0) {                             /* the row's maximum: gemmlowp's result for 0, without the polynomial */
        return INT32_MAX;
    }
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
    return result;
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

/* Number of leading zero bits of a non-zero value (CLZ where the compiler has it). */
static int32_t softmax_clz(uint32_t v)
{
#if defined(__GNUC__)
    return (int32_t)__builtin_clz(v);
#else
    int32_t n = 0;
    while ((v & 0x80000000u) == 0u) {
        v <<= 1;
        ++n;
    }
    return n;
#endif
}

/*
 * beta * s_in * diff in Q5.26 (TFLite's MultiplyByQuantizedMultiplier with a left shift) for a
 * diff that passed the diff_min test: diff >= diff_min >= -radius (checked with the parameters)
 * keeps |diff| * 2^shift <= 31 * 2^26, so the shift cannot wrap.
 */
static inline int32_t softmax_scaled_diff(int32_t multiplier, int32_t left_shift, int32_t diff)
{
    return softmax_srdhm((int32_t)((uint32_t)diff << left_shift), multiplier);
}

/* exp(beta * s_in * diff) in Q0.31 for a diff that passed the diff_min test. */
static int32_t softmax_exp_of_diff(const edgec_softmax_desc *desc, int32_t diff)
{
    return softmax_exp_on_negative_values(softmax_scaled_diff(desc->input_multiplier, desc->input_left_shift, diff));
}

/* Forces the strided row into its two callers, so the contiguous one (edgec_softmax_s8's, stride
 * a constant 1) indexes directly, as before the strided form existed (its instruction count did
 * not rise: 16 rows of 64 on Cortex-M4, 334,593 before, 329,601 after). */
#if defined(__GNUC__)
#define SOFTMAX_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define SOFTMAX_ALWAYS_INLINE inline
#endif

/* Rows up to this long keep their exp() values from the sum for the outputs (on the stack), so
 * each is computed once: a 2-class softmax per pixel is mostly exp() and the reciprocal. */
#define SOFTMAX_SHORT_ROW 16

/*
 * exp() depends only on the difference to the row's maximum, an int8 difference in [-255, 0], and
 * the call's parameters: a call of at least SOFTMAX_TABLE_ELEMENTS elements keeps each exp() it
 * computes in a table on the stack (1 KiB, -1 where not computed yet; exp() is never negative), so
 * no difference is computed twice in the call (attention's rows of tokens repeat few differences).
 */
#define SOFTMAX_TABLE_ELEMENTS 256
#define SOFTMAX_TABLE_SIZE 256

/* exp() of a difference that passed the diff_min test, through `table` when there is one. */
static inline int32_t softmax_row_exp(const edgec_softmax_desc *desc, int32_t *table, int32_t diff)
{
    if (table == NULL) {
        return softmax_exp_of_diff(desc, diff);
    }
    if (table[-diff] < 0) {
        table[-diff] = softmax_exp_of_diff(desc, diff);
    }
    return table[-diff];
}

/* One softmax row of row_size elements `stride` bytes apart (input and output alike). */
static SOFTMAX_ALWAYS_INLINE void softmax_strided_row(const edgec_softmax_desc *desc, const int8_t *input,
                                                      int32_t row_size, int32_t stride, int8_t *output, int32_t *table)
{
    int32_t max = input[0];
    int32_t sum = 0;
    int32_t exps[SOFTMAX_SHORT_ROW];
    const int short_row = row_size <= SOFTMAX_SHORT_ROW;
    int32_t headroom;
    int32_t reciprocal;
    int32_t exponent;
    int32_t col;

    for (col = 1; col < row_size; ++col) {
        max = EDGEC_MAX(max, (int32_t)input[col * stride]);
    }
    for (col = 0; col < row_size; ++col) {
        const int32_t diff = input[col * stride] - max;
        /* Stop accumulating at the limit: the row's result is already decided and sum cannot overflow. */
        if (diff >= desc->diff_min && sum < SOFTMAX_SUM_LIMIT) {
            const int32_t e = softmax_row_exp(desc, table, diff);
            if (short_row) {
                exps[col] = e;
            }
            sum += edgec_divide_by_power_of_two(e, SOFTMAX_ACCUM_BITS);
        }
    }
    if (sum <= 0 || sum >= SOFTMAX_SUM_LIMIT) {
        for (col = 0; col < row_size; ++col) {
            output[col * stride] = (int8_t)-128;
        }
        return;
    }

    /* sum = (1 + x) * 2^(31 - headroom) with x in [0, 1): 1/sum = 1/(1 + x) * 2^-(12 - headroom). */
    headroom = softmax_clz((uint32_t)sum);
    reciprocal = softmax_one_over_one_plus_x((int32_t)(((uint32_t)sum << headroom) - 0x80000000u));
    /* Q0.31 * Q0.31 probability -> units of 1/256: shift by num_bits_over_unit + 31 - 8 (<= 31 here). */
    exponent = (SOFTMAX_ACCUM_BITS - headroom) + 31 - 8;

    for (col = 0; col < row_size; ++col) {
        const int32_t diff = input[col * stride] - max;
        if (diff >= desc->diff_min) { /* every such exp() was summed: the sum stayed under its limit */
            const int32_t e = short_row ? exps[col] : softmax_row_exp(desc, table, diff);
            const int32_t prob = softmax_srdhm(reciprocal, e);
            const int32_t y = edgec_divide_by_power_of_two(prob, exponent) - 128;
            output[col * stride] = edgec_clamp_to_s8(y, -128, 127);
        } else {
            output[col * stride] = (int8_t)-128;
        }
    }
}

static void softmax_row(const edgec_softmax_desc *desc, const int8_t *input, int32_t row_size, int8_t *output,
                        int32_t *table)
{
    softmax_strided_row(desc, input, row_size, 1, output, table);
}

/* An empty exp() table (every entry -1). */
static void softmax_table_clear(int32_t *table)
{
    for (int32_t i = 0; i < SOFTMAX_TABLE_SIZE; ++i) {
        table[i] = -1;
    }
}

/* A large call's rows, with the exp() table in this frame (only large calls use the stack). */
static EDGEC_NOINLINE void softmax_rows_tabled(const edgec_softmax_desc *desc, const int8_t *input, int32_t num_rows,
                                               int32_t row_size, int8_t *output)
{
    int32_t table[SOFTMAX_TABLE_SIZE];
    softmax_table_clear(table);
    for (int32_t row = 0; row < num_rows; ++row) {
        softmax_row(desc, input + row * row_size, row_size, output + row * row_size, table);
    }
}

/* The strided rows of edgec_softmax_axis_s8 (inner > 1), with the exp() table when large. */
static EDGEC_NOINLINE void softmax_axis_tabled(const edgec_softmax_desc *desc, const int8_t *input, int8_t *output)
{
    int32_t table[SOFTMAX_TABLE_SIZE];
    softmax_table_clear(table);
    for (int32_t o = 0; o < desc->outer; ++o) {
        const int32_t start = o * desc->axis_size * desc->inner;
        for (int32_t i = 0; i < desc->inner; ++i) {
            softmax_strided_row(desc, input + start + i, desc->axis_size, desc->inner, output + start + i, table);
        }
    }
}

/* Whether a call of outer x size x inner elements uses the exp() table. */
static int softmax_tabled(int32_t outer, int32_t size, int32_t inner)
{
    return (int64_t)outer * size * inner >= SOFTMAX_TABLE_ELEMENTS;
}

/*
 * The exp() argument must stay in Q5.26 range (-32, 0]: diff_min may be stricter than the
 * input radius floor(31 * 2^26 / 2^shift) that softmax_params derives, never looser, and the
 * multiplier must be non-negative. This is what rules out overflow everywhere below.
 */
static int softmax_params_valid(const edgec_softmax_desc *desc)
{
    int32_t radius;
    if (desc->input_left_shift < 0 || desc->input_left_shift > 31 || desc->input_multiplier < 0) {
        return 0;
    }
    radius = ((int32_t)31 << 26) >> desc->input_left_shift;
    return desc->diff_min >= -radius;
}

/* outer * axis_size * inner elements, each dimension >= 1, indexable in int32_t. */
static int softmax_shape_valid(int32_t outer, int32_t axis_size, int32_t inner)
{
    if (outer < 1 || axis_size < 1 || inner < 1) {
        return 0;
    }
    return inner <= INT32_MAX / axis_size && outer <= INT32_MAX / (axis_size * inner);
}

static int softmax_desc_valid(const edgec_softmax_desc *desc, const int8_t *input, const int8_t *output)
{
    return desc != NULL && input != NULL && output != NULL &&
           softmax_shape_valid(desc->outer, desc->axis_size, desc->inner) && softmax_params_valid(desc);
}

/* The outer contiguous rows of axis_size values (inner 1), with the exp() table when large. */
static void softmax_rows(const edgec_softmax_desc *desc, const int8_t *input, int8_t *output)
{
    int32_t o;
    if (softmax_tabled(desc->outer, desc->axis_size, 1)) {
        softmax_rows_tabled(desc, input, desc->outer, desc->axis_size, output);
        return;
    }
    for (o = 0; o < desc->outer; ++o) {
        softmax_row(desc, input, desc->axis_size, output, NULL);
        input += desc->axis_size;
        output += desc->axis_size;
    }
}

edgec_status edgec_softmax_s8(const edgec_softmax_desc *desc, const int8_t *input, int8_t *output)
{
    if (!softmax_desc_valid(desc, input, output) || desc->inner != 1) {
        return EDGEC_ARG_ERROR;
    }
    softmax_rows(desc, input, output);
    return EDGEC_OK;
}

edgec_status edgec_softmax_axis_s8(const edgec_softmax_desc *desc, const int8_t *input, int8_t *output)
{
    int32_t o;

    if (!softmax_desc_valid(desc, input, output)) {
        return EDGEC_ARG_ERROR;
    }
    if (desc->inner == 1) {
        softmax_rows(desc, input, output);
        return EDGEC_OK;
    }
    if (softmax_tabled(desc->outer, desc->axis_size, desc->inner)) {
        softmax_axis_tabled(desc, input, output);
        return EDGEC_OK;
    }
    for (o = 0; o < desc->outer; ++o) {
        const int32_t start = o * desc->axis_size * desc->inner;
        int32_t i;
        for (i = 0; i < desc->inner; ++i) {
            softmax_strided_row(desc, input + start + i, desc->axis_size, desc->inner, output + start + i, NULL);
        }
    }
    return EDGEC_OK;
}

/* ---- log_softmax ------------------------------------------------------------------------------ */

#define LOG_SOFTMAX_MAX_AXIS 4095   /* 4096 exps of 1.0 in Q12.19 make 2^31 */
#define LOG_SOFTMAX_OUTPUT_SHIFT 22 /* Q5.26 -> units of 1/16: 31 - 5 input - 4 output integer bits */
#define LOG_SOFTMAX_OUTPUT_ZERO_POINT 127

/*
 * gemmlowp RoundingHalfSum: (a + b + sign) / 2 with C99's truncating division, as in
 * softmax_one_over_one_plus_x.
 */
static int32_t log_softmax_rounding_half_sum(int32_t a, int32_t b)
{
    const int64_t total = (int64_t)a + b;
    return (int32_t)((total + (total >= 0 ? 1 : -1)) / 2);
}

/*
 * TFLite's log_x_for_x_greater_than_or_equal_to_1<5> of a Q12.19 sum in [1, 4096) (raw
 * [2^19, 2^31)): log(sum) in Q5.26. The sum is normalised two ways, r_a = z * 2^(clz - 1) *
 * sqrt(1/2) and r_b = z * 2^(clz(z * sqrt(1/2)) - 1), both in [sqrt(1/2), 1); the smaller r and
 * the larger power-of-two part z_pow_2_adj (Q6.25) are kept, and log(r) comes from a rational
 * approximation around 2^(-1/4): log(sum) = z_pow_2_adj * log(2) + num / denom.
 * In this domain no step saturates or wraps: the integer parts are at most 12 << 25 and the
 * polynomial terms stay below 2^31 (checked against TFLite's saturating forms in the tests).
 */
static int32_t log_softmax_log_of_sum(int32_t z)
{
    const int32_t log_2 = 1488522236; /* Q0.31 constants of the TFLite source */
    const int32_t sqrt_sqrt_half = 1805811301;
    const int32_t sqrt_half = 1518500250;
    const int32_t alpha_n = 117049297;
    const int32_t alpha_d = 127690142;
    const int32_t alpha_i = 1057819769;
    const int32_t alpha_f = 638450708;
    const int32_t quarter_q6 = (int32_t)1 << 23; /* 1/4 in Q6.25 */
    const int32_t clz_a = softmax_clz((uint32_t)z);
    const int32_t z_b = softmax_srdhm(z, sqrt_half);
    const int32_t headroom_b = softmax_clz((uint32_t)z_b) - 1;
    const int32_t r_a =
        softmax_saturating_shift_left(softmax_srdhm(softmax_saturating_shift_left(z, clz_a - 1), sqrt_half), 1);
    const int32_t r_b = softmax_saturating_shift_left(z, headroom_b);
    /* (12 - headroom) << 25: the integer part in Q6.25; 12 is the sum's integer bits. */
    const int32_t pow_2_a = (12 - clz_a) * ((int32_t)1 << 25) + quarter_q6;
    const int32_t pow_2_b = (12 - headroom_b) * ((int32_t)1 << 25) - quarter_q6;
    const int32_t r = EDGEC_MIN(r_a, r_b);
    const int32_t z_pow_2_adj = EDGEC_MAX(pow_2_a, pow_2_b);
    const int32_t p = log_softmax_rounding_half_sum(r, sqrt_sqrt_half);
    const int32_t q = 2 * (r - sqrt_sqrt_half);
    const int32_t common_sq = softmax_srdhm(q, q);
    const int32_t num = softmax_srdhm(q, r) + softmax_srdhm(softmax_srdhm(q, common_sq), alpha_n);
    const int32_t denom_minus_one =
        softmax_srdhm(p, alpha_i + q + softmax_srdhm(alpha_d, common_sq)) + softmax_srdhm(alpha_f, q);
    const int32_t recip_denom = softmax_one_over_one_plus_x(denom_minus_one);
    const int32_t num_q6 = edgec_divide_by_power_of_two(num, 6);
    return softmax_saturating_shift_left(softmax_srdhm(z_pow_2_adj, log_2) + softmax_srdhm(num_q6, recip_denom), 1);
}

static void log_softmax_row(const edgec_log_softmax_desc *desc, const int8_t *input, int32_t stride, int8_t *output)
{
    const int32_t multiplier = desc->input_multiplier;
    const int32_t left_shift = desc->input_left_shift;
    int32_t max = input[0];
    int32_t sum = 0;
    int32_t log_sum;
    int32_t adjusted_diff_min;
    int32_t a;

    for (a = 1; a < desc->axis_size; ++a) {
        max = EDGEC_MAX(max, (int32_t)input[a * stride]);
    }
    /* At most 4095 terms of at most 2^19: no overflow. The maximum contributes 2^19 (1.0). */
    for (a = 0; a < desc->axis_size; ++a) {
        const int32_t diff = input[a * stride] - max;
        if (diff >= desc->diff_min) {
            const int32_t e = softmax_exp_on_negative_values(softmax_scaled_diff(multiplier, left_shift, diff));
            sum += edgec_divide_by_power_of_two(e, SOFTMAX_ACCUM_BITS);
        }
    }
    log_sum = log_softmax_log_of_sum(sum);
    /* Differences whose Q5.26 value minus log_sum would fall below INT32_MIN are cut off: the
     * reverse-scaled threshold (log_sum >= 0, so log_sum + INT32_MIN cannot wrap). */
    adjusted_diff_min =
        EDGEC_MAX(desc->diff_min - 1, edgec_requantize(log_sum + INT32_MIN, desc->reverse_scaling_divisor,
                                                       -desc->reverse_scaling_right_shift));
    for (a = 0; a < desc->axis_size; ++a) {
        const int32_t diff = input[a * stride] - max;
        int32_t y = -128;
        if (diff > adjusted_diff_min) {
            const int64_t shifted = (int64_t)softmax_scaled_diff(multiplier, left_shift, diff) - log_sum;
            /* Below INT32_MIN (TFLite's int32 subtraction would wrap) the exact output is -128. */
            if (shifted >= INT32_MIN) {
                y = edgec_divide_by_power_of_two((int32_t)shifted, LOG_SOFTMAX_OUTPUT_SHIFT) +
                    LOG_SOFTMAX_OUTPUT_ZERO_POINT;
            }
        }
        output[a * stride] = edgec_clamp_to_s8(y, -128, 127);
    }
}

static int log_softmax_desc_valid(const edgec_log_softmax_desc *desc)
{
    int32_t radius;
    if (!softmax_shape_valid(desc->outer, desc->axis_size, desc->inner) || desc->axis_size > LOG_SOFTMAX_MAX_AXIS) {
        return 0;
    }
    if (desc->input_left_shift < 0 || desc->input_left_shift > 31 || desc->input_multiplier < 0 ||
        desc->reverse_scaling_right_shift < 0 || desc->reverse_scaling_right_shift > 31 ||
        desc->reverse_scaling_divisor < 0) {
        return 0;
    }
    radius = ((int32_t)31 << 26) >> desc->input_left_shift;
    return desc->diff_min >= -radius && desc->diff_min <= 0;
}

edgec_status edgec_log_softmax_s8(const edgec_log_softmax_desc *desc, const int8_t *input, int8_t *output)
{
    int32_t o;

    if (desc == NULL || input == NULL || output == NULL || !log_softmax_desc_valid(desc)) {
        return EDGEC_ARG_ERROR;
    }
    for (o = 0; o < desc->outer; ++o) {
        const int32_t start = o * desc->axis_size * desc->inner;
        int32_t i;
        for (i = 0; i < desc->inner; ++i) {
            log_softmax_row(desc, input + start + i, desc->inner, output + start + i);
        }
    }
    return EDGEC_OK;
}

/* ---- masked softmax ----------------------------------------------------------------------------- */

/* Whether element `col` of a masked row takes part: its mask byte non-zero (zero with `ignore`), and
 * its byte of the constant mask `also` non-zero where there is one. */
static int masked_kept(const uint8_t *mask, int ignore, const uint8_t *also, int32_t col)
{
    return ((mask[col] != 0u) != ignore) && (also == NULL || also[col] != 0u);
}

/* One row of edgec_masked_softmax_s8 (and _input_): softmax_strided_row's arithmetic over the elements
 * masked_kept keeps (the row's maximum among them), every other output -128. */
static void masked_softmax_row(const edgec_softmax_desc *params, const int8_t *input, const uint8_t *mask, int ignore,
                               const uint8_t *also, int32_t row_size, int8_t *output)
{
    int32_t max = -128;
    int32_t sum = 0;
    int32_t headroom;
    int32_t reciprocal;
    int32_t exponent;
    int32_t col;

    for (col = 0; col < row_size; ++col) {
        if (masked_kept(mask, ignore, also, col)) {
            max = EDGEC_MAX(max, (int32_t)input[col]);
        }
    }
    for (col = 0; col < row_size; ++col) {
        const int32_t diff = input[col] - max;
        if (masked_kept(mask, ignore, also, col) && diff >= params->diff_min && sum < SOFTMAX_SUM_LIMIT) {
            sum += edgec_divide_by_power_of_two(softmax_exp_of_diff(params, diff), SOFTMAX_ACCUM_BITS);
        }
    }
    if (sum <= 0 || sum >= SOFTMAX_SUM_LIMIT) { /* no kept element, or TFLite's undefined sums */
        for (col = 0; col < row_size; ++col) {
            output[col] = (int8_t)-128;
        }
        return;
    }
    headroom = softmax_clz((uint32_t)sum);
    reciprocal = softmax_one_over_one_plus_x((int32_t)(((uint32_t)sum << headroom) - 0x80000000u));
    exponent = (SOFTMAX_ACCUM_BITS - headroom) + 31 - 8;
    for (col = 0; col < row_size; ++col) {
        const int32_t diff = input[col] - max;
        if (masked_kept(mask, ignore, also, col) && diff >= params->diff_min) {
            const int32_t prob = softmax_srdhm(reciprocal, softmax_exp_of_diff(params, diff));
            output[col] = edgec_clamp_to_s8(edgec_divide_by_power_of_two(prob, exponent) - 128, -128, 127);
        } else {
            output[col] = (int8_t)-128;
        }
    }
}

/* The row arithmetic of the masked softmaxes: edgec_softmax_s8's, on `rows` rows of `row_size`;
 * 0 when it is not valid. */
static int masked_row_params(edgec_softmax_desc *params, int32_t rows, int32_t row_size, int32_t input_multiplier,
                             int32_t input_left_shift, int32_t diff_min)
{
    params->outer = rows;
    params->axis_size = row_size;
    params->inner = 1;
    params->input_multiplier = input_multiplier;
    params->input_left_shift = input_left_shift;
    params->diff_min = diff_min;
    return softmax_params_valid(params);
}

edgec_status edgec_masked_softmax_s8(const edgec_masked_softmax_desc *desc, const int8_t *input, int8_t *output)
{
    edgec_softmax_desc params; /* the row's arithmetic: edgec_softmax_s8's, on rows of row_size */
    int32_t row;

    if (desc == NULL || input == NULL || output == NULL || desc->mask == NULL || desc->mask_rows < 1 ||
        desc->rows % desc->mask_rows != 0 || !softmax_shape_valid(desc->rows, desc->row_size, 1)) {
        return EDGEC_ARG_ERROR;
    }
    if (!masked_row_params(&params, desc->rows, desc->row_size, desc->input_multiplier, desc->input_left_shift,
                           desc->diff_min)) {
        return EDGEC_ARG_ERROR;
    }
    for (row = 0; row < desc->rows; ++row) {
        const int32_t offset = row * desc->row_size;
        masked_softmax_row(&params, input + offset, desc->mask + (row % desc->mask_rows) * desc->row_size, 0, NULL,
                           desc->row_size, output + offset);
    }
    return EDGEC_OK;
}

edgec_status edgec_input_masked_softmax_s8(const edgec_input_masked_softmax_desc *desc, const int8_t *input,
                                           const int8_t *mask, int8_t *output)
{
    edgec_softmax_desc params; /* the row's arithmetic: edgec_softmax_s8's, on rows of row_size */
    int32_t row;

    if (desc == NULL || input == NULL || mask == NULL || output == NULL || desc->rows_per_mask < 1 ||
        desc->rows % desc->rows_per_mask != 0 || (desc->ignore != 0 && desc->ignore != 1) || desc->keep_rows < 0 ||
        (desc->keep_rows > 0 && (desc->keep == NULL || desc->rows % desc->keep_rows != 0)) ||
        !softmax_shape_valid(desc->rows, desc->row_size, 1)) {
        return EDGEC_ARG_ERROR;
    }
    if (!masked_row_params(&params, desc->rows, desc->row_size, desc->input_multiplier, desc->input_left_shift,
                           desc->diff_min)) {
        return EDGEC_ARG_ERROR;
    }
    for (row = 0; row < desc->rows; ++row) {
        const int32_t offset = row * desc->row_size;
        const uint8_t *also = desc->keep_rows > 0 ? desc->keep + (row % desc->keep_rows) * desc->row_size : NULL;
        masked_softmax_row(&params, input + offset,
                           (const uint8_t *)mask + (row / desc->rows_per_mask) * desc->row_size, desc->ignore, also,
                           desc->row_size, output + offset);
    }
    return EDGEC_OK;
}
