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

/*
 * The fast path's constraints on top of edgec_conv_args_valid; anything else must go through
 * edgec_conv_s8. Without padding every output pixel must read an input pixel.
 */
static int pointwise_layout_valid(const edgec_conv_params *params, const edgec_dims *input_dims,
                                  const edgec_dims *filter_dims, const edgec_dims *output_dims)
{
    return filter_dims->h == 1 && filter_dims->w == 1 && filter_dims->c == input_dims->c &&
           filter_dims->n == output_dims->c && params->groups == 1 && params->pad_top == 0 &&
           params->pad_left == 0 && params->dilation_h == 1 && params->dilation_w == 1 &&
           (output_dims->h - 1) * params->stride_h < input_dims->h &&
           (output_dims->w - 1) * params->stride_w < input_dims->w;
}

edgec_status edgec_conv_1x1_s8(const edgec_conv_params *params,
                               const edgec_per_channel_quant *quant,
                               const edgec_dims *input_dims, const int8_t *input,
                               const edgec_dims *filter_dims, const int8_t *filter,
                               const int32_t *bias, const edgec_dims *output_dims, int8_t *output,
                               int8_t *scratch)
{
    (void)scratch; /* the portable path needs none */
    if (!edgec_conv_args_valid(params, quant, input_dims, input, filter_dims, filter, output_dims,
                               output) ||
        !pointwise_layout_valid(params, input_dims, filter_dims, output_dims)) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t in_c = input_dims->c;
    const int32_t in_row_len = input_dims->w * in_c;
    const int32_t out_c = output_dims->c;
    const int32_t input_offset = params->input_offset;
    const edgec_output_stage stage =
        edgec_output_stage_make(params->output_offset, params->act_min, params->act_max);
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
                    *out++ =
                        edgec_requantize_s8(acc, quant->multiplier[oc], quant->shift[oc], stage);
                }
            }
        }
    }
    return EDGEC_OK;
}
