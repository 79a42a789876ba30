/*
 * edgec_conv_s8 -- generic int8 2-D convolution: the portable C path and the reference.
 * Golden kernel: edgec.ops.conv.conv2d_s8. Arithmetic: docs/numerics.md.
 *
 * On Arm cores with the DSP extension (edgec_conv_s8_dsp, and _dsp_wide with its filter widened to
 * int16 for --opt speed: edgec_conv_s8_dsp.c) or Helium (edgec_conv_s8_mve: edgec_conv_s8_mve.c)
 * a packed path reads its filter re-laid at compile time (edgec.ops.kernel_layout) and its bias
 * with the input offset folded in, so that the inner loops carry no offset arithmetic; their
 * hottest loops are inline assembly in optimised builds. The two share their im2col
 * (edgec_conv_s8_packed.h).
 *
 * Portable loop order: output pixel, then output channel, then the in-bounds taps, then the input
 * channels of the group (innermost, contiguous in both the NHWC input and the OHWI filter).
 * The in-bounds tap range is computed once per output pixel instead of testing every tap.
 *
 * The accumulator is 32 bits, as in CMSIS-NN: |w * (x + input_offset)| <= 128 * 255. It is summed
 * in uint32_t, so a sum past int32 (possible only when |bias| + KH*KW*C_in/groups * 32640 >= 2^31,
 * which edgec refuses at compile time) wraps modulo 2^32 like the golden kernel instead of being
 * undefined behaviour; the SMLAD and VMLADAVA paths wrap the same way.
 */
#include "edgec_nn.h"
#include "../support/edgec_support.h"

#include <stddef.h>
#include <string.h>

/* This kernel's own constraints: a general window and a grouped OHWI filter (C_in and C_out
 * divisible by groups). */
static int conv_layout_valid(const edgec_conv_params *params, const edgec_dims *input_dims,
                             const edgec_dims *filter_dims, const edgec_dims *output_dims)
{
    return edgec_conv_window_valid(params, input_dims, filter_dims, output_dims) && params->groups >= 1 &&
           input_dims->c % params->groups == 0 && output_dims->c % params->groups == 0 &&
           filter_dims->c * params->groups == input_dims->c && filter_dims->n == output_dims->c;
}

static edgec_status conv_s8(const edgec_conv_params *params, const edgec_per_channel_quant *quant,
                            const edgec_dims *input_dims, const int8_t *input, const edgec_dims *filter_dims,
                            const int8_t *filter, const int32_t *bias, const edgec_dims *output_dims, int8_t *output,
                            int8_t *scratch)
{
    (void)scratch; /* the portable path needs none */
    if (!edgec_conv_args_valid(params, quant, input_dims, input, filter_dims, filter, output_dims, output) ||
        !conv_layout_valid(params, input_dims, filter_dims, output_dims)) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t cin_g = filter_dims->c;
    const int32_t out_c = output_dims->c;
    const int32_t cout_g = out_c / params->groups;
    const int32_t input_offset = params->input_offset;
    const edgec_output_stage stage = edgec_output_stage_make(params->output_offset, params->act_min, params->act_max);
    const int32_t in_row_len = in_w * in_c;
    const int32_t filter_len = k_h * k_w * cin_g; /* one output channel's filter */
    int8_t *out = output;

    for (int32_t b = 0; b < output_dims->n; b++) {
        const int8_t *in_batch = input + b * in_h * in_row_len;
        for (int32_t oy = 0; oy < output_dims->h; oy++) {
            const edgec_tap_range ty =
                edgec_conv_taps(oy, params->stride_h, params->pad_top, params->dilation_h, k_h, in_h);
            for (int32_t ox = 0; ox < output_dims->w; ox++) {
                const edgec_tap_range tx =
                    edgec_conv_taps(ox, params->stride_w, params->pad_left, params->dilation_w, k_w, in_w);
                for (int32_t oc = 0; oc < out_c; oc++) {
                    /* This channel's group of input channels, and its OHWI filter. */
                    const int8_t *in_group = in_batch + (oc / cout_g) * cin_g;
                    const int8_t *w_oc = filter + oc * filter_len;
                    uint32_t acc = bias != NULL ? (uint32_t)bias[oc] : 0u;
                    /* Pointers are formed for in-bounds taps only (no out-of-array arithmetic). */
                    for (int32_t ky = ty.first; ky < ty.last; ky++) {
                        const int32_t iy = ty.base + ky * params->dilation_h;
                        const int8_t *in_y = in_group + iy * in_row_len;
                        const int8_t *w_y = w_oc + ky * k_w * cin_g;
                        for (int32_t kx = tx.first; kx < tx.last; kx++) {
                            const int32_t ix = tx.base + kx * params->dilation_w;
                            const int8_t *in_tap = in_y + ix * in_c;
                            const int8_t *w_tap = w_y + kx * cin_g;
                            for (int32_t ic = 0; ic < cin_g; ic++) {
                                acc += (uint32_t)(((int32_t)in_tap[ic] + input_offset) * (int32_t)w_tap[ic]);
                            }
                        }
                    }
                    *out++ = edgec_requantize_s8((int32_t)acc, quant->multiplier[oc], quant->shift[oc], stage);
                }
            }
        }
    }
    return EDGEC_OK;
}

edgec_status edgec_conv_s8(const edgec_conv_desc *desc, const int8_t *input, int8_t *output)
{
    EDGEC_CONV_ENTRY(desc, conv_s8, desc->filter, desc->bias, input, output, NULL);
}
