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

/* Shifts edgec_requantize handles without undefined behaviour (QuantizeMultiplier: -31..30). */
#define FC_SHIFT_MIN (-31)
#define FC_SHIFT_MAX 31

static int fc_shifts_valid(const int32_t *shift, int32_t count)
{
    int32_t i;
    for (i = 0; i < count; ++i) {
        if (shift[i] < FC_SHIFT_MIN || shift[i] > FC_SHIFT_MAX) {
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
    if (params->act_min < -128 || params->act_max > 127 || params->act_min > params->act_max) {
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

/*
 * Output stage. clamp(r + off, lo, hi) == clamp(r, lo - off, hi - off) + off, and the right-hand
 * form cannot overflow even when requantize returns a value near INT32_MAX, so the bounds are
 * pre-shifted by the caller (act_lo/act_hi below are act_min/act_max - output_offset).
 */
static int8_t fc_output(uint32_t acc, int32_t multiplier, int32_t shift, int32_t output_offset,
                        int32_t act_lo, int32_t act_hi)
{
    /* Modular -> int32: implementation-defined two's complement wrap on every supported compiler. */
    int32_t r = edgec_requantize((int32_t)acc, multiplier, shift);
    r = EDGEC_MAX(r, act_lo);
    r = EDGEC_MIN(r, act_hi);
    return (int8_t)(r + output_offset);
}

edgec_status edgec_fully_connected_s8(const edgec_fc_params *params, const edgec_per_channel_quant *quant,
                                      int32_t batches, int32_t input_size, const int8_t *input,
                                      int32_t output_size, const int8_t *filter, const int32_t *bias,
                                      int8_t *output)
{
    int32_t b;
    int32_t input_offset, output_offset, act_lo, act_hi, quant_step;

    if (!fc_args_valid(params, quant, batches, input_size, input, output_size, filter, output)) {
        return EDGEC_ARG_ERROR;
    }
    input_offset = params->input_offset;
    output_offset = params->output_offset;
    act_lo = params->act_min - output_offset;
    act_hi = params->act_max - output_offset;
    /* Per-tensor quantization reads entry 0 for every output: a stride of 0 avoids a branch. */
    quant_step = params->per_channel ? 1 : 0;

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
            *y++ = fc_output(acc0, *mult, *shift, output_offset, act_lo, act_hi);
            mult += quant_step;
            shift += quant_step;
            *y++ = fc_output(acc1, *mult, *shift, output_offset, act_lo, act_hi);
            mult += quant_step;
            shift += quant_step;
        }
        if (o < output_size) {
            const uint32_t acc = fc_dot1(x, w, input_size, input_offset, bias ? (uint32_t)bias[o] : 0u);
            *y = fc_output(acc, *mult, *shift, output_offset, act_lo, act_hi);
        }
    }
    return EDGEC_OK;
}
