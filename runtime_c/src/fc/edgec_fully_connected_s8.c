/*
 * edgec_fully_connected_s8.c -- int8 fully connected layer (portable C99 path).
 *
 * acc[o] = bias[o] + sum_j w[o][j] * (x[j] + input_offset)
 * y[o]   = clamp(requantize(acc[o], m, s) + output_offset, act_min, act_max)
 *
 * Accumulation is done in uint32_t: products are bounded (|w * (x + off)| <= 128 * 255), but a long
 * row plus an int32 bias could overflow a signed accumulator, which is undefined behaviour in C.
 * Unsigned arithmetic wraps modulo 2^32 instead, which is exactly the int32 wrap the golden
 * kernel (edgec.ops.linear.fully_connected_s8) models, and compiles to the same MLA instructions.
 */
#include <stddef.h>

#include "edgec_nn.h"
#include "../support/edgec_support.h"

static int fc_shifts_valid(const int32_t *shift, int32_t count)
{
    int32_t i;
    for (i = 0; i < count; ++i) {
        if (!edgec_shift_valid(shift[i])) {
            return 0;
        }
    }
    return 1;
}

static int fc_args_valid(const edgec_fc_params *params, const edgec_per_channel_quant *quant,
                         int32_t batches, int32_t input_size, const int8_t *input,
                         int32_t output_size, const int8_t *filter, const int8_t *output)
{
    if (params == NULL || quant == NULL || quant->multiplier == NULL || quant->shift == NULL ||
        input == NULL || filter == NULL || output == NULL) {
        return 0;
    }
    if (batches < 1 || input_size < 1 || output_size < 1) {
        return 0;
    }
    /* The offset ranges keep x + input_offset and the products far from int32 overflow. */
    if (params->input_offset < -127 || params->input_offset > 128 ||
        params->output_offset < -128 || params->output_offset > 127) {
        return 0;
    }
    if (!edgec_act_range_valid(params->act_min, params->act_max)) {
        return 0;
    }
    return fc_shifts_valid(quant->shift, params->per_channel ? output_size : 1);
}

/*
 * Two dot products against the same input row at once: each (x + offset) is loaded and offset
 * once and used twice, which roughly halves the loads per MAC on a core without a data cache.
 */
static void fc_dot2(const int8_t *x, const int8_t *w0, const int8_t *w1, int32_t n,
                    int32_t input_offset, uint32_t *acc0, uint32_t *acc1)
{
    uint32_t sum0 = *acc0;
    uint32_t sum1 = *acc1;
    const int8_t *const x_end = x + n;
    while (x < x_end) {
        const int32_t xv = (int32_t)*x++ + input_offset;
        sum0 += (uint32_t)((int32_t)*w0++ * xv);
        sum1 += (uint32_t)((int32_t)*w1++ * xv);
    }
    *acc0 = sum0;
    *acc1 = sum1;
}

static uint32_t fc_dot1(const int8_t *x, const int8_t *w, int32_t n, int32_t input_offset, uint32_t acc)
{
    const int8_t *const x_end = x + n;
    while (x < x_end) {
        const int32_t xv = (int32_t)*x++ + input_offset;
        acc += (uint32_t)((int32_t)*w++ * xv);
    }
    return acc;
}

edgec_status edgec_fully_connected_s8(const edgec_fc_params *params, const edgec_per_channel_quant *quant,
                                      int32_t batches, int32_t input_size, const int8_t *input,
                                      int32_t output_size, const int8_t *filter, const int32_t *bias,
                                      int8_t *output)
{
    int32_t b;
    int32_t input_offset, quant_step;
    edgec_output_stage stage;

    if (!fc_args_valid(params, quant, batches, input_size, input, output_size, filter, output)) {
        return EDGEC_ARG_ERROR;
    }
    input_offset = params->input_offset;
    stage = edgec_output_stage_make(params->output_offset, params->act_min, params->act_max);
    /* Per-tensor quantization reads entry 0 for every output: a stride of 0 avoids a branch. */
    quant_step = params->per_channel ? 1 : 0;

    /* (int32_t)acc below, modular -> int32: implementation-defined two's complement wrap on every
     * supported compiler. */
    for (b = 0; b < batches; ++b) {
        const int8_t *const x = input + b * input_size;
        const int8_t *w = filter;
        const int32_t *mult = quant->multiplier;
        const int32_t *shift = quant->shift;
        int8_t *y = output + b * output_size;
        int32_t o = 0;

        for (; o + 1 < output_size; o += 2) {
            uint32_t acc0 = bias ? (uint32_t)bias[o] : 0u;
            uint32_t acc1 = bias ? (uint32_t)bias[o + 1] : 0u;
            fc_dot2(x, w, w + input_size, input_size, input_offset, &acc0, &acc1);
            w += 2 * input_size;
            *y++ = edgec_requantize_s8((int32_t)acc0, *mult, *shift, stage);
            mult += quant_step;
            shift += quant_step;
            *y++ = edgec_requantize_s8((int32_t)acc1, *mult, *shift, stage);
            mult += quant_step;
            shift += quant_step;
        }
        if (o < output_size) {
            const uint32_t acc = fc_dot1(x, w, input_size, input_offset, bias ? (uint32_t)bias[o] : 0u);
            *y = edgec_requantize_s8((int32_t)acc, *mult, *shift, stage);
        }
    }
    return EDGEC_OK;
}
