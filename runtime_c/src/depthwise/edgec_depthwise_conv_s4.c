/*
 * edgec_depthwise_conv_s4.c -- depthwise convolution (NHWC, channel multiplier) with int4 weights
 * (packed two per byte, low nibble first) and int8 activations: CMSIS-NN
 * arm_depthwise_conv_s4's packing and arithmetic (Source/ConvolutionFunctions/
 * arm_depthwise_conv_s4.c) with per-channel requantization; golden:
 * edgec.ops.int4.depthwise_conv_s4.
 */
#include "../support/edgec_support.h"

static int depthwise_conv_s4_valid(const edgec_depthwise_conv_s4_desc *d, const int8_t *input, const int8_t *output)
{
    if (!d || !input || !output || !d->filter || !d->multiplier || !d->shift) {
        return 0;
    }
    if (d->batches < 1 || d->input_h < 1 || d->input_w < 1 || d->input_c < 1 || d->output_h < 1 || d->output_w < 1 ||
        d->ch_mult < 1 || d->kernel_h < 1 || d->kernel_w < 1 || d->stride_h < 1 || d->stride_w < 1 ||
        d->dilation_h < 1 || d->dilation_w < 1 || d->pad_top < 0 || d->pad_left < 0) {
        return 0;
    }
    const int64_t output_c = (int64_t)d->input_c * d->ch_mult;
    if ((int64_t)d->batches * d->input_h * d->input_w * d->input_c > INT32_MAX ||
        (int64_t)d->batches * d->output_h * d->output_w * output_c > INT32_MAX ||
        (int64_t)d->kernel_h * d->kernel_w * output_c > INT32_MAX) {
        return 0;
    }
    return edgec_conv_axis_valid(d->input_h, d->output_h, d->kernel_h, d->stride_h, d->pad_top, d->dilation_h) &&
           edgec_conv_axis_valid(d->input_w, d->output_w, d->kernel_w, d->stride_w, d->pad_left, d->dilation_w) &&
           edgec_s4_output_valid(d->input_offset, d->output_offset, d->act_min, d->act_max, d->shift,
                                 (int32_t)output_c);
}

edgec_status edgec_depthwise_conv_s4(const edgec_depthwise_conv_s4_desc *desc, const int8_t *input, int8_t *output)
{
    if (!depthwise_conv_s4_valid(desc, input, output)) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_depthwise_conv_s4_desc d = *desc;
    const edgec_output_stage stage = edgec_output_stage_make(d.output_offset, d.act_min, d.act_max);
    const int32_t output_c = d.input_c * d.ch_mult;
    for (int32_t n = 0; n < d.batches; n++) {
        for (int32_t oy = 0; oy < d.output_h; oy++) {
            const edgec_tap_range ty = edgec_conv_taps(oy, d.stride_h, d.pad_top, d.dilation_h, d.kernel_h, d.input_h);
            for (int32_t ox = 0; ox < d.output_w; ox++) {
                const edgec_tap_range tx =
                    edgec_conv_taps(ox, d.stride_w, d.pad_left, d.dilation_w, d.kernel_w, d.input_w);
                int8_t *out = output + ((n * d.output_h + oy) * d.output_w + ox) * output_c;
                for (int32_t o = 0; o < output_c; o++) {
                    const int32_t c = o / d.ch_mult;
                    uint32_t acc = d.bias ? (uint32_t)d.bias[o] : 0u;
                    for (int32_t ky = ty.first; ky < ty.last; ky++) {
                        const int32_t iy = ty.base + ky * d.dilation_h;
                        for (int32_t kx = tx.first; kx < tx.last; kx++) {
                            const int32_t ix = tx.base + kx * d.dilation_w;
                            const int32_t x = input[((n * d.input_h + iy) * d.input_w + ix) * d.input_c + c];
                            const int32_t w = edgec_s4_at(d.filter, (ky * d.kernel_w + kx) * output_c + o);
                            acc += (uint32_t)(w * (x + d.input_offset));
                        }
                    }
                    out[o] = edgec_requantize_s8((int32_t)acc, d.multiplier[o], d.shift[o], stage);
                }
            }
        }
    }
    return EDGEC_OK;
}
