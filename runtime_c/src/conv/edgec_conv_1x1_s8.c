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
 * int32 accumulator as in edgec_conv_s8 (C_in * 32640 + |bias| < 2^31 for realistic layers).
 *
 * On Arm cores with the DSP extension or Helium, edgec_conv_1x1_s8_dsp/_mve (and their _in_place
 * forms) run the packed fully connected kernels over the pixels, with the filter laid out for
 * them at compile time: an FC row is a pixel, so no im2col and no scratch beyond the in-place
 * staging buffer.
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
           filter_dims->n == output_dims->c && params->groups == 1 && params->pad_top == 0 &&
           params->pad_left == 0 && params->dilation_h == 1 && params->dilation_w == 1 &&
           (output_dims->h - 1) * params->stride_h < input_dims->h &&
           (output_dims->w - 1) * params->stride_w < input_dims->w;
}

static int pointwise_args_valid(const edgec_conv_params *params,
                                const edgec_per_channel_quant *quant, const edgec_dims *input_dims,
                                const int8_t *input, const edgec_dims *filter_dims,
                                const int8_t *filter, const edgec_dims *output_dims,
                                const int8_t *output)
{
    return edgec_conv_args_valid(params, quant, input_dims, input, filter_dims, filter,
                                 output_dims, output) &&
           pointwise_layout_valid(params, input_dims, filter_dims, output_dims);
}

/* The C_out outputs of one pixel from its C_in input channels. */
static void pointwise_pixel(const edgec_conv_params *params, const edgec_per_channel_quant *quant,
                            const int8_t *filter, const int32_t *bias, int32_t in_c, int32_t out_c,
                            edgec_output_stage stage, const int8_t *in_px, int8_t *out_px)
{
    const int8_t *w_row = filter;
    for (int32_t oc = 0; oc < out_c; oc++) {
        int32_t acc = bias != NULL ? bias[oc] : 0;
        for (int32_t ic = 0; ic < in_c; ic++) {
            acc += ((int32_t)in_px[ic] + params->input_offset) * (int32_t)w_row[ic];
        }
        w_row += in_c;
        out_px[oc] = edgec_requantize_s8(acc, quant->multiplier[oc], quant->shift[oc], stage);
    }
}

/*
 * Every output pixel in NHWC order, each from the input pixel under it. With a `staging` buffer
 * of C_out bytes, a pixel's outputs are stored only after all of them are computed.
 */
static void pointwise_layer(const edgec_conv_params *params, const edgec_per_channel_quant *quant,
                            const edgec_dims *input_dims, const int8_t *input,
                            const int8_t *filter, const int32_t *bias,
                            const edgec_dims *output_dims, int8_t *output, int8_t *staging)
{
    const int32_t in_c = input_dims->c;
    const int32_t in_row_len = input_dims->w * in_c;
    const int32_t out_c = output_dims->c;
    const edgec_output_stage stage =
        edgec_output_stage_make(params->output_offset, params->act_min, params->act_max);
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

edgec_status edgec_conv_1x1_s8(const edgec_conv_params *params,
                               const edgec_per_channel_quant *quant,
                               const edgec_dims *input_dims, const int8_t *input,
                               const edgec_dims *filter_dims, const int8_t *filter,
                               const int32_t *bias, const edgec_dims *output_dims, int8_t *output,
                               int8_t *scratch)
{
    (void)scratch; /* the portable path needs none */
    if (!pointwise_args_valid(params, quant, input_dims, input, filter_dims, filter, output_dims,
                              output)) {
        return EDGEC_ARG_ERROR;
    }
    pointwise_layer(params, quant, input_dims, input, filter, bias, output_dims, output, NULL);
    return EDGEC_OK;
}

edgec_status edgec_conv_1x1_s8_in_place(const edgec_conv_params *params,
                                        const edgec_per_channel_quant *quant,
                                        const edgec_dims *input_dims, const int8_t *input,
                                        const edgec_dims *filter_dims, const int8_t *filter,
                                        const int32_t *bias, const edgec_dims *output_dims,
                                        int8_t *output, int8_t *scratch)
{
    if (!pointwise_args_valid(params, quant, input_dims, input, filter_dims, filter, output_dims,
                              output) ||
        scratch == NULL) {
        return EDGEC_ARG_ERROR;
    }
    pointwise_layer(params, quant, input_dims, input, filter, bias, output_dims, output, scratch);
    return EDGEC_OK;
}

/* ==== Packed paths: Arm DSP extension and Helium ============================================= */
#if defined(__ARM_FEATURE_DSP) || (defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))

/* edgec_fully_connected_s8_dsp or _mve: the matrix product over `batches` contiguous pixels. */
typedef edgec_status (*packed_fc_kernel)(const edgec_fc_params *params,
                                         const edgec_per_channel_quant *quant, int32_t batches,
                                         int32_t input_size, const int8_t *input,
                                         int32_t output_size, const int8_t *packed_filter,
                                         const int32_t *folded_bias, int8_t *output);

/*
 * pointwise_layer on the packed FC kernel. Without staging, each call covers as many pixels as
 * lie contiguously in the input: the whole layer when nothing is skipped (stride 1, output as
 * large as the input), else an output row at stride_w 1, else one pixel; so the per-call set-up
 * (argument and requantization checks over C_out) is paid once per layer in the common case. With
 * `staging` (in place) every pixel is one call into it, then stored: the FC kernel writes an
 * output block before it has read its input row to the end, which only staging makes safe.
 */
static edgec_status packed_layer(packed_fc_kernel fc, const edgec_conv_params *params,
                                 const edgec_per_channel_quant *quant,
                                 const edgec_dims *input_dims, const int8_t *input,
                                 const edgec_dims *filter_dims, const int8_t *packed_filter,
                                 const int32_t *folded_bias, const edgec_dims *output_dims,
                                 int8_t *output, int8_t *staging)
{
    if (!pointwise_args_valid(params, quant, input_dims, input, filter_dims, packed_filter,
                              output_dims, output)) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_fc_params fc_params = {params->input_offset, params->output_offset, 1,
                                       params->act_min, params->act_max};
    const int32_t in_c = input_dims->c;
    const int32_t out_c = output_dims->c;
    const int32_t in_row_len = input_dims->w * in_c;
    /* Pixels per call: at stride_w 1 an output row reads a contiguous run of input pixels. */
    const int32_t run = (staging == NULL && params->stride_w == 1) ? output_dims->w : 1;
    const int32_t row_runs = output_dims->w / run;
    int8_t *out = output;

    if (staging == NULL && run == input_dims->w && params->stride_h == 1 &&
        output_dims->h == input_dims->h) {
        return fc(&fc_params, quant, output_dims->n * output_dims->h * output_dims->w, in_c, input,
                  out_c, packed_filter, folded_bias, output);
    }
    for (int32_t b = 0; b < output_dims->n; b++) {
        for (int32_t oy = 0; oy < output_dims->h; oy++) {
            const int32_t iy = b * input_dims->h + oy * params->stride_h; /* row of N*H */
            for (int32_t i = 0; i < row_runs; i++) {
                const int8_t *in_px = input + iy * in_row_len + i * params->stride_w * in_c;
                /* Every call has the same arguments: only the first can fail, before writing. */
                if (fc(&fc_params, quant, run, in_c, in_px, out_c, packed_filter, folded_bias,
                       staging != NULL ? staging : out) != EDGEC_OK) {
                    return EDGEC_ARG_ERROR;
                }
                if (staging != NULL) {
                    memcpy(out, staging, (size_t)out_c);
                }
                out += run * out_c;
            }
        }
    }
    return EDGEC_OK;
}

#endif /* packed paths */

#if defined(__ARM_FEATURE_DSP)

edgec_status edgec_conv_1x1_s8_dsp(const edgec_conv_params *params,
                                   const edgec_per_channel_quant *quant,
                                   const edgec_dims *input_dims, const int8_t *input,
                                   const edgec_dims *filter_dims, const int8_t *packed_filter,
                                   const int32_t *folded_bias, const edgec_dims *output_dims,
                                   int8_t *output, int8_t *scratch)
{
    (void)scratch; /* the FC kernel reads the pixels where they are */
    return packed_layer(edgec_fully_connected_s8_dsp, params, quant, input_dims, input,
                        filter_dims, packed_filter, folded_bias, output_dims, output, NULL);
}

edgec_status edgec_conv_1x1_s8_dsp_in_place(const edgec_conv_params *params,
                                            const edgec_per_channel_quant *quant,
                                            const edgec_dims *input_dims, const int8_t *input,
                                            const edgec_dims *filter_dims,
                                            const int8_t *packed_filter,
                                            const int32_t *folded_bias,
                                            const edgec_dims *output_dims, int8_t *output,
                                            int8_t *scratch)
{
    if (scratch == NULL) {
        return EDGEC_ARG_ERROR;
    }
    return packed_layer(edgec_fully_connected_s8_dsp, params, quant, input_dims, input,
                        filter_dims, packed_filter, folded_bias, output_dims, output, scratch);
}

#endif /* __ARM_FEATURE_DSP */

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)

edgec_status edgec_conv_1x1_s8_mve(const edgec_conv_params *params,
                                   const edgec_per_channel_quant *quant,
                                   const edgec_dims *input_dims, const int8_t *input,
                                   const edgec_dims *filter_dims, const int8_t *packed_filter,
                                   const int32_t *folded_bias, const edgec_dims *output_dims,
                                   int8_t *output, int8_t *scratch)
{
    (void)scratch; /* the FC kernel reads the pixels where they are */
    return packed_layer(edgec_fully_connected_s8_mve, params, quant, input_dims, input,
                        filter_dims, packed_filter, folded_bias, output_dims, output, NULL);
}

edgec_status edgec_conv_1x1_s8_mve_in_place(const edgec_conv_params *params,
                                            const edgec_per_channel_quant *quant,
                                            const edgec_dims *input_dims, const int8_t *input,
                                            const edgec_dims *filter_dims,
                                            const int8_t *packed_filter,
                                            const int32_t *folded_bias,
                                            const edgec_dims *output_dims, int8_t *output,
                                            int8_t *scratch)
{
    if (scratch == NULL) {
        return EDGEC_ARG_ERROR;
    }
    return packed_layer(edgec_fully_connected_s8_mve, params, quant, input_dims, input,
                        filter_dims, packed_filter, folded_bias, output_dims, output, scratch);
}

#endif /* __ARM_FEATURE_MVE */
