/*
 * edgec_conv_1x1_s8 -- int8 pointwise (1x1) convolution, portable C path, and
 * edgec_conv_1x1_s8_in_place, the same layer written over its own input.
 * Golden kernel: edgec.ops.conv.conv2d_s8 with a 1x1 filter. Arithmetic: docs/numerics.md.
 *
 * A 1x1 convolution without padding is a matrix product: every output pixel is the dot product
 * of one input pixel's C_in channels with each filter row. No tap is ever out of bounds, so
 * there is no im2col and no bounds logic; the inner loop walks two contiguous int8 rows.
 * In place, each output pixel goes to a C_out-byte scratch first and is stored only once its
 * input pixel has been read in full (see edgec_nn.h for the layouts that allows).
 * The accumulator wraps modulo 2^32 (uint32_t) as in edgec_conv_s8: no undefined behaviour for any
 * bias, bit-exact with the golden kernel.
 */
#include "edgec_nn.h"
#include "../support/edgec_support.h"

#include <stddef.h>
#include <string.h>

/*
 * The fast path's constraints on top of edgec_conv_args_valid; anything else must go through
 * edgec_conv_s8. Without padding every output pixel must read an input pixel.
 */
static int pointwise_layout_valid(const edgec_conv_params *params, const edgec_dims *input_dims,
                                  const edgec_dims *filter_dims, const edgec_dims *output_dims)
{
    return filter_dims->h == 1 && filter_dims->w == 1 && filter_dims->c == input_dims->c &&
           filter_dims->n == output_dims->c && params->groups == 1 && params->pad_top == 0 && params->pad_left == 0 &&
           params->dilation_h == 1 && params->dilation_w == 1 &&
           (int64_t)(output_dims->h - 1) * params->stride_h < input_dims->h &&
           (int64_t)(output_dims->w - 1) * params->stride_w < input_dims->w;
}

static int pointwise_args_valid(const edgec_conv_params *params, const edgec_per_channel_quant *quant,
                                const edgec_dims *input_dims, const int8_t *input, const edgec_dims *filter_dims,
                                const int8_t *filter, const edgec_dims *output_dims, const int8_t *output)
{
    return edgec_conv_args_valid(params, quant, input_dims, input, filter_dims, filter, output_dims, output) &&
           pointwise_layout_valid(params, input_dims, filter_dims, output_dims);
}

/* The C_out outputs of one pixel from its C_in input channels. */
static void pointwise_pixel(const edgec_conv_params *params, const edgec_per_channel_quant *quant, const int8_t *filter,
                            const int32_t *bias, int32_t in_c, int32_t out_c, edgec_output_stage stage,
                            const int8_t *in_px, int8_t *out_px)
{
    const int8_t *w_row = filter;
    for (int32_t oc = 0; oc < out_c; oc++) {
        uint32_t acc = bias != NULL ? (uint32_t)bias[oc] : 0u;
        for (int32_t ic = 0; ic < in_c; ic++) {
            acc += (uint32_t)(((int32_t)in_px[ic] + params->input_offset) * (int32_t)w_row[ic]);
        }
        w_row += in_c;
        out_px[oc] = edgec_requantize_s8((int32_t)acc, quant->multiplier[oc], quant->shift[oc], stage);
    }
}

/*
 * Every output pixel in NHWC order, each from the input pixel under it. With a `staging` buffer
 * of C_out bytes, a pixel's outputs are stored only after all of them are computed.
 */
static void pointwise_layer(const edgec_conv_params *params, const edgec_per_channel_quant *quant,
                            const edgec_dims *input_dims, const int8_t *input, const int8_t *filter,
                            const int32_t *bias, const edgec_dims *output_dims, int8_t *output, int8_t *staging)
{
    const int32_t in_c = input_dims->c;
    const int32_t in_row_len = input_dims->w * in_c;
    const int32_t out_c = output_dims->c;
    const edgec_output_stage stage = edgec_output_stage_make(params->output_offset, params->act_min, params->act_max);
    int8_t *out = output;

    for (int32_t b = 0; b < output_dims->n; b++) {
        for (int32_t oy = 0; oy < output_dims->h; oy++) {
            const int32_t iy = b * input_dims->h + oy * params->stride_h; /* row of N*H */
            for (int32_t ox = 0; ox < output_dims->w; ox++) {
                const int8_t *in_px = input + iy * in_row_len + ox * params->stride_w * in_c;
                pointwise_pixel(params, quant, filter, bias, in_c, out_c, stage, in_px,
                                staging != NULL ? staging : out);
                if (staging != NULL) {
                    memcpy(out, staging, (size_t)out_c);
                }
                out += out_c;
            }
        }
    }
}

/* Both entry points: the layer of `desc`, checked, with a staging buffer or none. */
static edgec_status pointwise(const edgec_conv_desc *desc, const int8_t *input, int8_t *output, int8_t *staging)
{
    edgec_conv_layer l;
    if (desc == NULL) {
        return EDGEC_ARG_ERROR;
    }
    EDGEC_CONV_LAYER_OF(desc, l);
    if (!pointwise_args_valid(&l.params, &l.quant, &l.input_dims, input, &l.filter_dims, desc->filter, &l.output_dims,
                              output)) {
        return EDGEC_ARG_ERROR;
    }
    pointwise_layer(&l.params, &l.quant, &l.input_dims, input, desc->filter, desc->bias, &l.output_dims, output,
                    staging);
    return EDGEC_OK;
}

edgec_status edgec_conv_1x1_s8(const edgec_conv_desc *desc, const int8_t *input, int8_t *output)
{
    return pointwise(desc, input, output, NULL);
}

edgec_status edgec_conv_1x1_s8_in_place(const edgec_conv_desc *desc, const int8_t *input, int8_t *output,
                                        int8_t *scratch)
{
    return scratch == NULL ? EDGEC_ARG_ERROR : pointwise(desc, input, output, scratch);
}
