/*
 * edgec_depthwise_conv_s8 -- int8 depthwise convolution with channel multiplier, portable C path.
 * Golden kernel: edgec.ops.depthwise.depthwise_conv2d_s8. Arithmetic: docs/numerics.md.
 *
 * Output channel oc = ic * ch_mult + m reads input channel ic only. Loop order: output pixel,
 * input channel, multiplier, then the in-bounds taps (range computed once per output pixel, so
 * there is no per-tap bounds test). Output writes stay sequential in NHWC order.
 *
 * int32 accumulator as in CMSIS-NN: KH*KW * 32640 + |bias| < 2^31 for any realistic layer.
 */
#include "edgec_nn.h"
#include "../support/edgec_support.h"

#include <stddef.h>

/* This kernel's own constraints: a general window and a [KH][KW][C_in * ch_mult] filter. */
static int depthwise_layout_valid(const edgec_conv_params *params, const edgec_dims *input_dims,
                                  const edgec_dims *filter_dims, const edgec_dims *output_dims)
{
    return edgec_conv_window_valid(params, filter_dims) && params->ch_mult >= 1 &&
           filter_dims->n == 1 && filter_dims->c == input_dims->c * params->ch_mult &&
           output_dims->c == filter_dims->c;
}

edgec_status edgec_depthwise_conv_s8(const edgec_conv_params *params,
                                     const edgec_per_channel_quant *quant,
                                     const edgec_dims *input_dims, const int8_t *input,
                                     const edgec_dims *filter_dims, const int8_t *filter,
                                     const int32_t *bias, const edgec_dims *output_dims,
                                     int8_t *output, int8_t *scratch)
{
    (void)scratch; /* the portable path needs none */
    if (!edgec_conv_args_valid(params, quant, input_dims, input, filter_dims, filter, output_dims,
                               output) ||
        !depthwise_layout_valid(params, input_dims, filter_dims, output_dims)) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t ch_mult = params->ch_mult;
    const int32_t out_c = output_dims->c;
    const int32_t input_offset = params->input_offset;
    const edgec_output_stage stage =
        edgec_output_stage_make(params->output_offset, params->act_min, params->act_max);
    const int32_t in_row_len = in_w * in_c;
    const int32_t filter_row_len = k_w * out_c; /* filter is [KH][KW][C_out] */
    int8_t *out = output;

    for (int32_t b = 0; b < output_dims->n; b++) {
        const int8_t *in_batch = input + b * in_h * in_row_len;
        for (int32_t oy = 0; oy < output_dims->h; oy++) {
            const edgec_tap_range ty = edgec_conv_taps(oy, params->stride_h, params->pad_top,
                                                       params->dilation_h, k_h, in_h);
            for (int32_t ox = 0; ox < output_dims->w; ox++) {
                const edgec_tap_range tx = edgec_conv_taps(ox, params->stride_w, params->pad_left,
                                                           params->dilation_w, k_w, in_w);
                for (int32_t ic = 0; ic < in_c; ic++) {
                    for (int32_t m = 0; m < ch_mult; m++) {
                        const int32_t oc = ic * ch_mult + m;
                        int32_t acc = bias != NULL ? bias[oc] : 0;
                        /* Pointers are formed for in-bounds taps only. */
                        for (int32_t ky = ty.first; ky < ty.last; ky++) {
                            const int32_t iy = ty.base + ky * params->dilation_h;
                            const int8_t *in_y = in_batch + iy * in_row_len + ic;
                            const int8_t *w_y = filter + ky * filter_row_len + oc;
                            for (int32_t kx = tx.first; kx < tx.last; kx++) {
                                const int32_t ix = tx.base + kx * params->dilation_w;
                                acc += ((int32_t)in_y[ix * in_c] + input_offset) *
                                       (int32_t)w_y[kx * out_c];
                            }
                        }
                        *out++ = edgec_requantize_s8(acc, quant->multiplier[oc],
                                                     quant->shift[oc], stage);
                    }
                }
            }
        }
    }
    return EDGEC_OK;
}
