/*
 * edgec_binary_s16.c -- int16 add and mul with NumPy broadcasting (the 16x8 scheme: symmetric
 * int16, no offsets), following CMSIS-NN arm_elementwise_add_s16 / arm_elementwise_mul_s16
 * (Source/BasicMathFunctions/) and TFLite's int16 ADD / MUL parameters; goldens:
 * edgec.ops.int16.add_s16 / mul_s16.
 */
#include "../support/edgec_support.h"

typedef void (*binary_s16_row)(const edgec_binary_s16_desc *d, const int16_t *in1, int32_t step1, const int16_t *in2,
                               int32_t step2, int16_t *out, int32_t n);

/* A layout whose every offset (and one stride past each dimension) fits int32, and requantization
 * constants within what edgec_requantize takes. */
static int binary_s16_valid(const edgec_binary_s16_desc *d, const int16_t *input1, const int16_t *input2,
                            const int16_t *output)
{
    if (!d || !input1 || !input2 || !output || d->num_dims < 1 || d->num_dims > EDGEC_BINARY_MAX_DIMS) {
        return 0;
    }
    int64_t elements = 1;
    int64_t span1 = 0;
    int64_t span2 = 0;
    for (int32_t k = 0; k < d->num_dims; k++) {
        if (d->dims[k] < 1 || d->strides1[k] < 0 || d->strides2[k] < 0) {
            return 0;
        }
        elements *= d->dims[k];
        span1 += (int64_t)d->dims[k] * d->strides1[k];
        span2 += (int64_t)d->dims[k] * d->strides2[k];
        if (elements > INT32_MAX || span1 > INT32_MAX || span2 > INT32_MAX) {
            return 0;
        }
    }
    return d->left_shift >= 0 && d->left_shift <= 16 && d->input1_multiplier >= 0 && d->input2_multiplier >= 0 &&
           d->output_multiplier >= 0 && edgec_shift_valid(d->input1_shift) && edgec_shift_valid(d->input2_shift) &&
           edgec_shift_valid(d->output_shift) && d->act_min >= INT16_MIN && d->act_max <= INT16_MAX &&
           d->act_min <= d->act_max;
}

static inline int16_t clamp_s16(int32_t y, const edgec_binary_s16_desc *d)
{
    return (int16_t)EDGEC_MIN(EDGEC_MAX(y, d->act_min), d->act_max);
}

static void add_row(const edgec_binary_s16_desc *d, const int16_t *in1, int32_t step1, const int16_t *in2,
                    int32_t step2, int16_t *out, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        /* |x| * 2^16 <= 2^31: the shift fits (through uint32 for -2^15 * 2^16) */
        const int32_t a = edgec_requantize((int32_t)((uint32_t)in1[i * step1] << d->left_shift), d->input1_multiplier,
                                           d->input1_shift);
        const int32_t b = edgec_requantize((int32_t)((uint32_t)in2[i * step2] << d->left_shift), d->input2_multiplier,
                                           d->input2_shift);
        const int32_t sum = (int32_t)((uint32_t)a + (uint32_t)b);
        out[i] = clamp_s16(edgec_requantize(sum, d->output_multiplier, d->output_shift), d);
    }
}

static void mul_row(const edgec_binary_s16_desc *d, const int16_t *in1, int32_t step1, const int16_t *in2,
                    int32_t step2, int16_t *out, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        const int32_t product = (int32_t)in1[i * step1] * in2[i * step2]; /* |.| <= 2^30 */
        out[i] = clamp_s16(edgec_requantize(product, d->output_multiplier, d->output_shift), d);
    }
}

/* Every row of the innermost dimension, the outer ones walked as an odometer. */
static void binary_s16_walk(const edgec_binary_s16_desc *d, const int16_t *in1, const int16_t *in2, int16_t *out,
                            binary_s16_row row)
{
    const int32_t inner = d->num_dims - 1;
    const int32_t n = d->dims[inner];
    int32_t index[EDGEC_BINARY_MAX_DIMS] = { 0 };
    int32_t rows = 1;
    int32_t offset1 = 0;
    int32_t offset2 = 0;
    for (int32_t k = 0; k < inner; k++) {
        rows *= d->dims[k];
    }
    for (int32_t r = 0; r < rows; r++) {
        row(d, in1 + offset1, d->strides1[inner], in2 + offset2, d->strides2[inner], out, n);
        out += n;
        for (int32_t k = inner - 1; k >= 0; k--) {
            index[k]++;
            offset1 += d->strides1[k];
            offset2 += d->strides2[k];
            if (index[k] < d->dims[k]) {
                break;
            }
            index[k] = 0;
            offset1 -= d->dims[k] * d->strides1[k];
            offset2 -= d->dims[k] * d->strides2[k];
        }
    }
}

edgec_status edgec_add_s16(const edgec_binary_s16_desc *desc, const int16_t *input1, const int16_t *input2,
                           int16_t *output)
{
    if (!binary_s16_valid(desc, input1, input2, output)) {
        return EDGEC_ARG_ERROR;
    }
    binary_s16_walk(desc, input1, input2, output, add_row);
    return EDGEC_OK;
}

edgec_status edgec_mul_s16(const edgec_binary_s16_desc *desc, const int16_t *input1, const int16_t *input2,
                           int16_t *output)
{
    if (!binary_s16_valid(desc, input1, input2, output)) {
        return EDGEC_ARG_ERROR;
    }
    binary_s16_walk(desc, input1, input2, output, mul_row);
    return EDGEC_OK;
}
