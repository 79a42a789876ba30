/*
 * edgec_conv_s4.c -- convolution (NHWC, any kernel, stride, padding, dilation, groups) with int4
 * weights (packed two per byte, low nibble first) and int8 activations: CMSIS-NN
 * arm_convolve_s4's packing and arithmetic (Source/ConvolutionFunctions/arm_convolve_s4.c) with
 * per-channel requantization; golden: edgec.ops.int4.conv_s4. Each tap's run of input_c / groups
 * weights is read straight from the packed filter (no im2col, no scratch).
 */
#include "../support/edgec_support.h"

static int conv_s4_valid(const edgec_conv_s4_desc *d, const int8_t *input, const int8_t *output)
{
    if (!d || !input || !output || !d->filter || !d->multiplier || !d->shift) {
        return 0;
    }
    if (d->batches < 1 || d->input_h < 1 || d->input_w < 1 || d->input_c < 1 || d->output_h < 1 || d->output_w < 1 ||
        d->output_c < 1 || d->kernel_h < 1 || d->kernel_w < 1 || d->stride_h < 1 || d->stride_w < 1 ||
        d->dilation_h < 1 || d->dilation_w < 1 || d->pad_top < 0 || d->pad_left < 0 || d->groups < 1 ||
        d->input_c % d->groups != 0 || d->output_c % d->groups != 0) {
        return 0;
    }
    if ((int64_t)d->batches * d->input_h * d->input_w * d->input_c > INT32_MAX ||
        (int64_t)d->batches * d->output_h * d->output_w * d->output_c > INT32_MAX ||
        (int64_t)d->output_c * d->kernel_h * d->kernel_w * (d->input_c / d->groups) > INT32_MAX) {
        return 0;
    }
    return edgec_conv_axis_valid(d->input_h, d->output_h, d->kernel_h, d->stride_h, d->pad_top, d->dilation_h) &&
           edgec_conv_axis_valid(d->input_w, d->output_w, d->kernel_w, d->stride_w, d->pad_left, d->dilation_w) &&
           edgec_s4_output_valid(d->input_offset, d->output_offset, d->act_min, d->act_max, d->shift, d->output_c);
}

edgec_status edgec_conv_s4(const edgec_conv_s4_desc *desc, const int8_t *input, int8_t *output)
{
    if (!conv_s4_valid(desc, input, output)) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_conv_s4_desc d = *desc;
    const edgec_output_stage stage = edgec_output_stage_make(d.output_offset, d.act_min, d.act_max);
    const int32_t cin_g = d.input_c / d.groups;
    const int32_t cout_g = d.output_c / d.groups;
    for (int32_t n = 0; n < d.batches; n++) {
        for (int32_t oy = 0; oy < d.output_h; oy++) {
            const edgec_tap_range ty = edgec_conv_taps(oy, d.stride_h, d.pad_top, d.dilation_h, d.kernel_h, d.input_h);
            for (int32_t ox = 0; ox < d.output_w; ox++) {
                const edgec_tap_range tx =
                    edgec_conv_taps(ox, d.stride_w, d.pad_left, d.dilation_w, d.kernel_w, d.input_w);
                int8_t *out = output + ((n * d.output_h + oy) * d.output_w + ox) * d.output_c;
                for (int32_t o = 0; o < d.output_c; o++) {
                    const int32_t g = o / cout_g;
                    uint32_t acc = d.bias ? (uint32_t)d.bias[o] : 0u;
                    for (int32_t ky = ty.first; ky < ty.last; ky++) {
                        const int32_t iy = ty.base + ky * d.dilation_h;
                        for (int32_t kx = tx.first; kx < tx.last; kx++) {
                            const int32_t ix = tx.base + kx * d.dilation_w;
                            const int8_t *x = input + ((n * d.input_h + iy) * d.input_w + ix) * d.input_c + g * cin_g;
                            acc = edgec_s4_dot(d.filter, ((o * d.kernel_h + ky) * d.kernel_w + kx) * cin_g, x, cin_g,
                                               d.input_offset, acc);
                        }
                    }
                    out[o] = edgec_requantize_s8((int32_t)acc, d.multiplier[o], d.shift[o], stage);
                }
            }
        }
    }
    return EDGEC_OK;
}
