/*
 * edgec_softmax_s16.c -- int16 softmax over one axis, TFLite reference_ops::SoftmaxInt16
 * (tensorflow/lite/kernels/internal/reference/softmax.h), which CMSIS-NN arm_softmax_s16
 * (Source/SoftmaxFunctions/arm_softmax_s16.c) computes the same way where its int32 steps do not
 * overflow; golden: edgec.ops.int16.softmax_s16.
 */
#include "../support/edgec_support.h"

/* Every exp is >= 0 and the row maximum's (x - max = 0 reads entries 511 and 512) >= 1, so each
 * row's sum is in [1, 32767 * axis_size]: the reciprocal's shifts are defined. */
static int exp_lut_valid(const int16_t *exp_lut)
{
    for (int32_t i = 0; i < EDGEC_LUT_S16_SIZE; i++) {
        if (exp_lut[i] < 0) {
            return 0;
        }
    }
    return exp_lut[511] >= 1 && exp_lut[512] >= 1;
}

static int32_t count_leading_zeros(uint32_t x)
{
    int32_t n = 0;
    while (n < 32 && !(x & 0x80000000u)) {
        x <<= 1;
        n++;
    }
    return n;
}

edgec_status edgec_softmax_s16(const edgec_softmax_s16_desc *desc, const int16_t *input, int16_t *output)
{
    if (!desc || !input || !output || !desc->exp_lut || !desc->one_over_one_plus_x_lut || desc->outer < 1 ||
        desc->axis_size < 1 || desc->axis_size > EDGEC_SOFTMAX_S16_MAX_AXIS || desc->inner < 1 ||
        (int64_t)desc->outer * desc->axis_size * desc->inner > INT32_MAX || desc->input_multiplier < 0 ||
        !edgec_shift_valid(desc->input_left_shift) || !exp_lut_valid(desc->exp_lut)) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t inner = desc->inner;
    for (int32_t o = 0; o < desc->outer; o++) {
        for (int32_t i = 0; i < inner; i++) {
            const int32_t first = o * desc->axis_size * inner + i;
            const int16_t *x = input + first;
            int16_t *y = output + first;
            int32_t max = INT16_MIN;
            for (int32_t a = 0; a < desc->axis_size; a++) {
                max = EDGEC_MAX(max, x[a * inner]);
            }
            /* the exps are cached in the output (read before written: in place is fine) */
            int32_t sum = 0;
            for (int32_t a = 0; a < desc->axis_size; a++) {
                const int32_t scaled =
                    edgec_requantize(x[a * inner] - max, desc->input_multiplier, desc->input_left_shift);
                /* scaled <= 0 (multiplier >= 0): the sum with 32767 cannot overflow */
                const int32_t symmetric = EDGEC_MAX(scaled + INT16_MAX, INT16_MIN);
                y[a * inner] = edgec_lut_lookup_s16((int16_t)symmetric, desc->exp_lut);
                sum += y[a * inner];
            }
            const int32_t headroom = count_leading_zeros((uint32_t)sum); /* 1..31 */
            const int64_t shifted = (((int64_t)sum << (headroom - 1)) + (1 << 13)) >> 14;
            const int64_t symmetric_sum = EDGEC_MIN(shifted - 98304, (int64_t)INT16_MAX);
            const int32_t reciprocal = edgec_lut_lookup_s16((int16_t)symmetric_sum, desc->one_over_one_plus_x_lut);
            const int32_t right_shift = 31 - headroom;
            const int64_t round = right_shift > 0 ? (int64_t)1 << (right_shift - 1) : 0;
            for (int32_t a = 0; a < desc->axis_size; a++) {
                const int64_t result = ((int64_t)y[a * inner] * reciprocal + round) >> right_shift;
                y[a * inner] = (int16_t)EDGEC_MIN(EDGEC_MAX(result, (int64_t)0), INT16_MAX);
            }
        }
    }
    return EDGEC_OK;
}
