/*
 * edgec_conv_1x1_s8 -- int8 pointwise (1x1) convolution, portable C path.
 * Golden kernel: edgec.ops.conv.conv2d_s8 with a 1x1 filter. Arithmetic: docs/numerics.md.
 *
 * A 1x1 convolution without padding is a matrix product: every output pixel is the dot product
 * of one input pixel's C_in channels with each filter row. No tap is ever out of bounds, so
 * there is no im2col and no bounds logic; the inner loop walks two contiguous int8 rows.
 * int32 accumulator as in edgec_conv_s8 (C_in * 32640 + |bias| < 2^31 for realistic layers).
 */
#include "edgec_nn.h"
#include "../support/edgec_support.h"

#include <stddef.h>

static edgec_status check_args(const edgec_conv_params *params,
                               const edgec_per_channel_quant *quant,
                               const edgec_dims *input_dims, const int8_t *input,
                               const edgec_dims *filter_dims, const int8_t *filter,
                               const edgec_dims *output_dims, const int8_t *output)
{
    if (params == NULL || quant == NULL || quant->multiplier == NULL || quant->shift == NULL ||
        input_dims == NULL || input == NULL || filter_dims == NULL || filter == NULL ||
        output_dims == NULL || output == NULL) {
        return EDGEC_ARG_ERROR;
    }
    if (input_dims->n < 1 || input_dims->h < 1 || input_dims->w < 1 || input_dims->c < 1 ||
        output_dims->n != input_dims->n || output_dims->h < 1 || output_dims->w < 1 ||
        output_dims->c < 1) {
        return EDGEC_ARG_ERROR;
    }
    /* The fast path's constraints; anything else must go through edgec_conv_s8. */
    if (filter_dims->h != 1 || filter_dims->w != 1 || filter_dims->c != input_dims->c ||
        filter_dims->n != output_dims->c || params->groups != 1 || params->pad_top != 0 ||
        params->pad_left != 0 || params->dilation_h != 1 || params->dilation_w != 1 ||
        params->stride_h < 1 || params->stride_w < 1) {
        return EDGEC_ARG_ERROR;
    }
    /* Without padding every output pixel must read an input pixel. */
    if ((output_dims->h - 1) * params->stride_h >= input_dims->h ||
        (output_dims->w - 1) * params->stride_w >= input_dims->w) {
        return EDGEC_ARG_ERROR;
    }
    if (params->act_min < INT8_MIN || params->act_max > INT8_MAX ||
        params->act_min > params->act_max) {
        return EDGEC_ARG_ERROR;
    }
    return EDGEC_OK;
}

edgec_status edgec_conv_1x1_s8(const edgec_conv_params *params,
                               const edgec_per_channel_quant *quant,
                               const edgec_dims *input_dims, const int8_t *input,
                               const edgec_dims *filter_dims, const int8_t *filter,
                               const int32_t *bias, const edgec_dims *output_dims, int8_t *output,
                               int8_t *scratch)
{
    (void)scratch; /* the portable path needs none */
    if (check_args(params, quant, input_dims, input, filter_dims, filter, output_dims, output) !=
        EDGEC_OK) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t in_c = input_dims->c;
    const int32_t in_row_len = input_dims->w * in_c;
    const int32_t out_c = output_dims->c;
    const int32_t input_offset = params->input_offset;
    const int32_t output_offset = params->output_offset;
    /* Clamp before adding the output offset: same as clamp(y + offset), without int32 overflow. */
    const int32_t lo = params->act_min - output_offset;
    const int32_t hi = params->act_max - output_offset;
    int8_t *out = output;

    for (int32_t b = 0; b < output_dims->n; b++) {
        for (int32_t oy = 0; oy < output_dims->h; oy++) {
            const int32_t iy = b * input_dims->h + oy * params->stride_h; /* row of N*H */
            for (int32_t ox = 0; ox < output_dims->w; ox++) {
                const int8_t *in_px = input + iy * in_row_len + ox * params->stride_w * in_c;
                const int8_t *w_row = filter;
                for (int32_t oc = 0; oc < out_c; oc++) {
                    int32_t acc = bias != NULL ? bias[oc] : 0;
                    for (int32_t ic = 0; ic < in_c; ic++) {
                        acc += ((int32_t)in_px[ic] + input_offset) * (int32_t)w_row[ic];
                    }
                    w_row += in_c;
                    acc = edgec_requantize(acc, quant->multiplier[oc], quant->shift[oc]);
                    acc = EDGEC_MIN(EDGEC_MAX(acc, lo), hi);
                    *out++ = (int8_t)(acc + output_offset);
                }
            }
        }
    }
    return EDGEC_OK;
}
