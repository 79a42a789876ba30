/*
 * edgec_depthwise_conv_s4.c -- depthwise convolution (NHWC, channel multiplier) with int4 weights
 * (packed two per byte, low nibble first) and int8 activations: CMSIS-NN
 * arm_depthwise_conv_s4's packing and arithmetic (Source/ConvolutionFunctions/
 * arm_depthwise_conv_s4.c) with per-channel requantization; golden:
 * edgec.ops.int4.depthwise_conv_s4. edgec_depthwise_conv_s4_packed (channel multiplier 1, on
 * cores with the DSP extension or Helium) unpacks the filter once per call and runs the int8
 * packed kernel over it: int4 saves flash, not arithmetic.
 */
#include <string.h>

#include "../support/edgec_s4.h"

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

/*
 * Tap t's channels c .. c + 3 of the packed stream (element t * C + c, c even: two whole bytes) as
 * four int8: the nibbles spread one per byte ((b0 & F, b0 >> 4, b1 & F, b1 >> 4)), each then
 * sign-extended in its byte by (n ^ 8) + 0x78, top bit flipped (no carry crosses a byte: at most
 * 0x87).
 */
static inline uint32_t depthwise_s4_unpack4(const int8_t *packed)
{
    const uint32_t v = (uint32_t)(uint8_t)packed[0] | (uint32_t)(uint8_t)packed[1] << 16;
    const uint32_t n = (v & 0x000F000Fu) | ((v << 4) & 0x0F000F00u);
    return ((n ^ 0x08080808u) + 0x78787878u) ^ 0x80808080u;
}

/* The flat int4 filter [taps][C] as edgec_depthwise_conv_s8_packed's layout, at `out`: per group
 * of 4 channels (C zero-padded to a multiple of 4) its taps of 4 int8 each. */
static void depthwise_s4_unpack(const int8_t *filter, int32_t taps, int32_t channels, int8_t *out)
{
    const int32_t groups = (channels + 3) / 4;
    for (int32_t g = 0; g < groups; g++) {
        const int32_t c = 4 * g;
        for (int32_t t = 0; t < taps; t++, out += 4) {
            if (channels % 2 == 0 && c + 4 <= channels) {
                const uint32_t four = depthwise_s4_unpack4(filter + (t * channels + c) / 2);
                memcpy(out, &four, 4);
                continue;
            }
            for (int32_t i = 0; i < 4; i++) { /* an odd C's nibbles, or the padded last group */
                out[i] = (int8_t)(c + i < channels ? edgec_s4_at(filter, t * channels + c + i) : 0);
            }
        }
    }
}

/*
 * Channel multiplier 1, kernel_h <= EDGEC_DEPTHWISE_PACKED_MAX_K: the int4 filter unpacked once
 * per call into scratch in edgec_depthwise_conv_s8_packed's layout, then that kernel (the DSP
 * extension's or Helium's, by the build) runs the layer. Its arithmetic is this file's: the int4
 * values are int8 values in [-8, 7]. bias: the folded bias (edgec_depthwise_conv_s8_packed's).
 */
edgec_status edgec_depthwise_conv_s4_packed(const edgec_depthwise_conv_s4_desc *desc, const int8_t *input,
                                            int8_t *output, int8_t *scratch)
{
    if (!depthwise_conv_s4_valid(desc, input, output) || desc->ch_mult != 1 || !desc->bias || !scratch ||
        !edgec_word_aligned(scratch) || desc->kernel_h > EDGEC_DEPTHWISE_PACKED_MAX_K ||
        (int64_t)4 * ((desc->input_c + 3) / 4) * desc->kernel_h * desc->kernel_w > INT32_MAX) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_depthwise_conv_s4_desc d = *desc;
    const int32_t taps = d.kernel_h * d.kernel_w;
    depthwise_s4_unpack(d.filter, taps, d.input_c, scratch);
    const edgec_depthwise_conv_desc unpacked = {
        d.batches,       d.input_h,  d.input_w,  d.input_c, d.output_h, d.output_w,   d.ch_mult,    d.kernel_h,
        d.kernel_w,      d.stride_h, d.stride_w, d.pad_top, d.pad_left, d.dilation_h, d.dilation_w, d.input_offset,
        d.output_offset, d.act_min,  d.act_max,  scratch,   d.bias,     d.multiplier, d.shift
    };
    return edgec_depthwise_conv_s8_packed(&unpacked, input, output,
                                          scratch + EDGEC_DEPTHWISE_CONV_S4_FILTER_BYTES(taps, d.input_c));
}
