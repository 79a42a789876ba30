/*
 * edgec_fully_connected_s16.c -- int16 x int8 fully connected layer with int64 accumulators (the
 * 16x8 scheme), following CMSIS-NN arm_fully_connected_s16
 * (Source/FullyConnectedFunctions/arm_fully_connected_s16.c, arm_nn_vec_mat_mult_t_s16) with
 * per-channel requantization; golden: edgec.ops.int16.fully_connected_s16.
 */
#include "../support/edgec_support.h"

static int fully_connected_s16_valid(const edgec_fully_connected_s16_desc *d, const int16_t *input,
                                     const int16_t *output)
{
    if (!d || !input || !output || !d->filter || !d->multiplier || !d->shift) {
        return 0;
    }
    return d->batches >= 1 && d->input_c >= 1 && d->output_c >= 1 && (int64_t)d->batches * d->input_c <= INT32_MAX &&
           (int64_t)d->batches * d->output_c <= INT32_MAX && (int64_t)d->input_c * d->output_c <= INT32_MAX &&
           edgec_s16_output_valid(d->multiplier, d->shift, d->output_c, d->act_min, d->act_max);
}

edgec_status edgec_fully_connected_s16(const edgec_fully_connected_s16_desc *desc, const int16_t *input,
                                       int16_t *output)
{
    if (!fully_connected_s16_valid(desc, input, output)) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_fully_connected_s16_desc d = *desc;
    for (int32_t b = 0; b < d.batches; b++) {
        const int16_t *x = input + b * d.input_c;
        for (int32_t o = 0; o < d.output_c; o++) {
            const int8_t *w = d.filter + o * d.input_c;
            int64_t acc = 0;
            for (int32_t k = 0; k < d.input_c; k++) {
                acc += (int32_t)x[k] * w[k];
            }
            output[b * d.output_c + o] = edgec_output_s16(acc, d.bias, d.multiplier, d.shift, o, d.act_min, d.act_max);
        }
    }
    return EDGEC_OK;
}

#if defined(__ARM_FEATURE_DSP)
edgec_status edgec_fully_connected_s16_dsp(const edgec_fully_connected_s16_desc *desc, const int16_t *input,
                                           int16_t *output, int16_t *scratch)
{
    if (!fully_connected_s16_valid(desc, input, output) || !scratch || !edgec_word_aligned(scratch)) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_fully_connected_s16_desc d = *desc;
    for (int32_t b = 0; b < d.batches; b++) {
        const int16_t *x = input + b * d.input_c;
        for (int32_t k = 0; k < d.input_c; k++) {
            scratch[k] = x[k];
        }
        edgec_s16_dsp_reorder(scratch, d.input_c);
        edgec_s16_dsp_rows(scratch, d.filter, d.input_c, 0, d.output_c, d.bias, d.multiplier, d.shift, d.act_min,
                           d.act_max, output + b * d.output_c);
    }
    return EDGEC_OK;
}
#endif /* __ARM_FEATURE_DSP */

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
edgec_status edgec_fully_connected_s16_mve(const edgec_fully_connected_s16_desc *desc, const int16_t *input,
                                           int16_t *output)
{
    if (!fully_connected_s16_valid(desc, input, output)) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_fully_connected_s16_desc d = *desc;
    for (int32_t b = 0; b < d.batches; b++) {
        edgec_s16_mve_rows(input + b * d.input_c, d.filter, d.input_c, 0, d.output_c, d.bias, d.multiplier, d.shift,
                           d.act_min, d.act_max, output + b * d.output_c);
    }
    return EDGEC_OK;
}
#endif /* __ARM_FEATURE_MVE */
