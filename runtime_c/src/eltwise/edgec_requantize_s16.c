/*
 * edgec_requantize_s16.c -- int8 <-> int16 requantization, TFLite's QUANTIZE between int8 and
 * int16 (tensorflow/lite/kernels/internal/reference/requantize.h, Requantize; parameters from
 * tensorflow/lite/micro/kernels/quantize_common.cc); goldens: edgec.ops.int16.requantize_s8_s16 /
 * requantize_s16_s8.
 */
#include "../support/edgec_support.h"

static int requantize_s16_valid(const edgec_requantize_s16_desc *d, const void *input, const void *output,
                                int32_t in_min, int32_t in_max, int32_t out_min, int32_t out_max)
{
    return d && input && output && d->size >= 1 && d->input_offset >= -in_max && d->input_offset <= -in_min &&
           d->output_offset >= out_min && d->output_offset <= out_max && d->multiplier >= 0 &&
           edgec_shift_valid(d->shift);
}

/* clamp(requantize(x + input_offset) + output_offset, lo, hi), the clamp before the offset so the
 * int32 addition cannot overflow. */
static inline int32_t requantize_one(const edgec_requantize_s16_desc *d, int32_t x, int32_t lo, int32_t hi)
{
    const int32_t r = edgec_requantize(x + d->input_offset, d->multiplier, d->shift);
    return EDGEC_MIN(EDGEC_MAX(r, lo - d->output_offset), hi - d->output_offset) + d->output_offset;
}

edgec_status edgec_requantize_s8_s16(const edgec_requantize_s16_desc *desc, const int8_t *input, int16_t *output)
{
    if (!requantize_s16_valid(desc, input, output, INT8_MIN, INT8_MAX, INT16_MIN, INT16_MAX)) {
        return EDGEC_ARG_ERROR;
    }
    for (int32_t i = 0; i < desc->size; i++) {
        output[i] = (int16_t)requantize_one(desc, input[i], INT16_MIN, INT16_MAX);
    }
    return EDGEC_OK;
}

edgec_status edgec_requantize_s16_s8(const edgec_requantize_s16_desc *desc, const int16_t *input, int8_t *output)
{
    if (!requantize_s16_valid(desc, input, output, INT16_MIN, INT16_MAX, INT8_MIN, INT8_MAX)) {
        return EDGEC_ARG_ERROR;
    }
    for (int32_t i = 0; i < desc->size; i++) {
        output[i] = (int8_t)requantize_one(desc, input[i], INT8_MIN, INT8_MAX);
    }
    return EDGEC_OK;
}
