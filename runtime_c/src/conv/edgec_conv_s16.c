/*
 * edgec_conv_s16.c -- int16 x int8 convolution with int64 accumulators (the 16x8 scheme),
 * following CMSIS-NN arm_convolve_s16 (Source/ConvolutionFunctions/arm_convolve_s16.c) and its
 * output stage arm_nn_requantize_s64; golden: edgec.ops.int16.conv_s16.
 *
 * Accumulation is exact in int64 (|int16 * int8| <= 2^22, K < 2^31 terms): CMSIS-NN's plain C
 * path sums in int32 and can overflow past 512 extreme terms; TFLite's reference sums in int64.
 */
#include "../support/edgec_support.h"

/* Every product of the descriptor's dimensions the kernel indexes with fits int32. */
static int conv_s16_valid(const edgec_conv_s16_desc *d, const int16_t *input, const int16_t *output)
{
    if (!d || !input || !output || !d->filter || !d->multiplier || !d->shift) {
        return 0;
    }
    if (d->batches < 1 || d->input_h < 1 || d->input_w < 1 || d->input_c < 1 || d->output_h < 1 || d->output_w < 1 ||
        d->output_c < 1 || d->kernel_h < 1 || d->kernel_w < 1 || d->groups < 1 || d->stride_h < 1 || d->stride_w < 1 ||
        d->dilation_h < 1 || d->dilation_w < 1 || d->pad_top < 0 || d->pad_left < 0 || d->input_c % d->groups != 0 ||
        d->output_c % d->groups != 0) {
        return 0;
    }
    if ((int64_t)d->batches * d->input_h * d->input_w * d->input_c > INT32_MAX ||
        (int64_t)d->batches * d->output_h * d->output_w * d->output_c > INT32_MAX ||
        (int64_t)d->output_c * d->kernel_h * d->kernel_w * (d->input_c / d->groups) > INT32_MAX) {
        return 0;
    }
    return edgec_conv_axis_valid(d->input_h, d->output_h, d->kernel_h, d->stride_h, d->pad_top, d->dilation_h) &&
           edgec_conv_axis_valid(d->input_w, d->output_w, d->kernel_w, d->stride_w, d->pad_left, d->dilation_w) &&
           edgec_s16_output_valid(d->multiplier, d->shift, d->output_c, d->act_min, d->act_max);
}

edgec_status edgec_conv_s16(const edgec_conv_s16_desc *desc, const int16_t *input, int16_t *output)
{
    if (!conv_s16_valid(desc, input, output)) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_conv_s16_desc d = *desc;
    const int32_t cg = d.input_c / d.groups;
    const int32_t og = d.output_c / d.groups;
    const int32_t k_size = d.kernel_h * d.kernel_w * cg;
    int16_t *out = output;
    for (int32_t n = 0; n < d.batches; n++) {
        const int16_t *image = input + n * d.input_h * d.input_w * d.input_c;
        for (int32_t oy = 0; oy < d.output_h; oy++) {
            const edgec_tap_range ty = edgec_conv_taps(oy, d.stride_h, d.pad_top, d.dilation_h, d.kernel_h, d.input_h);
            for (int32_t ox = 0; ox < d.output_w; ox++) {
                const edgec_tap_range tx =
                    edgec_conv_taps(ox, d.stride_w, d.pad_left, d.dilation_w, d.kernel_w, d.input_w);
                for (int32_t o = 0; o < d.output_c; o++) {
                    const int32_t channel0 = (o / og) * cg;
                    const int8_t *row = d.filter + o * k_size;
                    int64_t acc = 0;
                    for (int32_t ky = ty.first; ky < ty.last; ky++) {
                        const int32_t iy = ty.base + ky * d.dilation_h;
                        for (int32_t kx = tx.first; kx < tx.last; kx++) {
                            const int32_t ix = tx.base + kx * d.dilation_w;
                            const int16_t *x = image + (iy * d.input_w + ix) * d.input_c + channel0;
                            const int8_t *w = row + (ky * d.kernel_w + kx) * cg;
                            for (int32_t i = 0; i < cg; i++) {
                                acc += (int32_t)x[i] * w[i];
                            }
                        }
                    }
                    *out++ = edgec_output_s16(acc, d.bias, d.multiplier, d.shift, o, d.act_min, d.act_max);
                }
            }
        }
    }
    return EDGEC_OK;
}

#if defined(__ARM_FEATURE_DSP) || (defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))
/* The window's K inputs of group g at one output pixel in filter order, zero for taps outside
 * the input. */
static void conv_s16_gather(const edgec_conv_s16_desc *d, const int16_t *image, edgec_tap_range ty, edgec_tap_range tx,
                            int32_t channel0, int16_t *column)
{
    const int32_t cg = d->input_c / d->groups;
    int16_t *dst = column;
    for (int32_t ky = 0; ky < d->kernel_h; ky++) {
        const int32_t iy = ty.base + ky * d->dilation_h;
        for (int32_t kx = 0; kx < d->kernel_w; kx++) {
            const int32_t ix = tx.base + kx * d->dilation_w;
            if (ky >= ty.first && ky < ty.last && kx >= tx.first && kx < tx.last) {
                const int16_t *src = image + (iy * d->input_w + ix) * d->input_c + channel0;
                for (int32_t i = 0; i < cg; i++) {
                    dst[i] = src[i];
                }
            } else {
                for (int32_t i = 0; i < cg; i++) {
                    dst[i] = 0;
                }
            }
            dst += cg;
        }
    }
}
#endif

#if defined(__ARM_FEATURE_DSP)
edgec_status edgec_conv_s16_dsp(const edgec_conv_s16_desc *desc, const int16_t *input, int16_t *output,
                                int16_t *scratch)
{
    if (!conv_s16_valid(desc, input, output) || !scratch || !edgec_word_aligned(scratch)) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_conv_s16_desc d = *desc;
    const int32_t cg = d.input_c / d.groups;
    const int32_t og = d.output_c / d.groups;
    const int32_t k_size = d.kernel_h * d.kernel_w * cg;
    int16_t *out = output;
    for (int32_t n = 0; n < d.batches; n++) {
        const int16_t *image = input + n * d.input_h * d.input_w * d.input_c;
        for (int32_t oy = 0; oy < d.output_h; oy++) {
            const edgec_tap_range ty = edgec_conv_taps(oy, d.stride_h, d.pad_top, d.dilation_h, d.kernel_h, d.input_h);
            for (int32_t ox = 0; ox < d.output_w; ox++) {
                const edgec_tap_range tx =
                    edgec_conv_taps(ox, d.stride_w, d.pad_left, d.dilation_w, d.kernel_w, d.input_w);
                for (int32_t g = 0; g < d.groups; g++) {
                    conv_s16_gather(&d, image, ty, tx, g * cg, scratch);
                    edgec_s16_dsp_reorder(scratch, k_size);
                    edgec_s16_dsp_rows(scratch, d.filter, k_size, g * og, og, d.bias, d.multiplier, d.shift, d.act_min,
                                       d.act_max, out);
                    out += og;
                }
            }
        }
    }
    return EDGEC_OK;
}
#endif /* __ARM_FEATURE_DSP */

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
/* The column of group g at one output pixel for the Helium rows. A one-row window lying inside
 * the input is read in place when its K inputs are contiguous there (one tap, or undilated taps
 * of an ungrouped layer: the 1x1 and 1-D convolutions); any other window is gathered into scratch. */
static const int16_t *conv_s16_mve_column(const edgec_conv_s16_desc *d, const int16_t *image, edgec_tap_range ty,
                                          edgec_tap_range tx, int32_t channel0, int16_t *scratch)
{
    const int contiguous = d->kernel_w == 1 || (d->dilation_w == 1 && d->groups == 1);
    if (d->kernel_h == 1 && contiguous && ty.first < ty.last && tx.first == 0 && tx.last == d->kernel_w) {
        return image + (ty.base * d->input_w + tx.base) * d->input_c + channel0;
    }
    conv_s16_gather(d, image, ty, tx, channel0, scratch);
    return scratch;
}

/* An unpadded, ungrouped 1x1 layer whose every tap lies inside the input, K short enough for
 * int32 sums (EDGEC_S16_MVE_INT32_TERMS) and at least four output channels: a fully connected
 * layer over its pixels, each pixel's inputs contiguous. */
static int conv_s16_mve_pointwise(const edgec_conv_s16_desc *d)
{
    return d->kernel_h == 1 && d->kernel_w == 1 && d->groups == 1 && d->pad_top == 0 && d->pad_left == 0 &&
           (int64_t)(d->output_h - 1) * d->stride_h < d->input_h &&
           (int64_t)(d->output_w - 1) * d->stride_w < d->input_w && d->input_c <= EDGEC_S16_MVE_INT32_TERMS &&
           d->output_c >= 4;
}

/* Output channels o .. o + 3 of every pixel of a pointwise layer: the group's output stage is
 * prepared once, and each pixel's four sums (one block, exact in int32) are requantized as one
 * vector. Not inlined: inside the caller GCC spills this loop's pointers to the stack. */
static EDGEC_NOINLINE void conv_s16_mve_1x1_group(const edgec_conv_s16_desc *d, const int16_t *input, int32_t o,
                                                  int16_t *output)
{
    const edgec_s16_mve_stage stage = edgec_s16_mve_stage_of(d->bias, d->multiplier, d->shift, o, 1);
    const int32_t count = d->input_c;
    const int8_t *row = d->filter + o * count;
    const int32_t x_row = d->stride_h * d->input_w * count;
    const int32_t x_col = d->stride_w * count;
    int16_t *out = output + o;
    for (int32_t n = 0; n < d->batches; n++) {
        const int16_t *image = input + n * d->input_h * d->input_w * count;
        for (int32_t oy = 0; oy < d->output_h; oy++) {
            const int16_t *x = image + oy * x_row;
            for (int32_t ox = 0; ox < d->output_w; ox++) {
                int32_t sum[4];
                edgec_s16_mve_block4(x, row, count, count, sum);
                if (stage.vector) {
                    vstrhq_s32(out, edgec_s16_mve_requantize(vldrwq_s32(sum), &stage, d->act_min, d->act_max));
                } else {
                    for (int32_t i = 0; i < 4; i++) {
                        out[i] =
                            edgec_output_s16(sum[i], d->bias, d->multiplier, d->shift, o + i, d->act_min, d->act_max);
                    }
                }
                x += x_col;
                out += d->output_c;
            }
        }
    }
}

/* A pointwise layer by groups of four output channels; a channel count not a multiple of four
 * ends with the group of the last four, overlapping the previous one (its outputs there are
 * computed again, to the same values). */
static void conv_s16_mve_1x1(const edgec_conv_s16_desc *d, const int16_t *input, int16_t *output)
{
    for (int32_t o = 0; o < d->output_c; o += 4) {
        conv_s16_mve_1x1_group(d, input, EDGEC_MIN(o, d->output_c - 4), output);
    }
}

edgec_status edgec_conv_s16_mve(const edgec_conv_s16_desc *desc, const int16_t *input, int16_t *output,
                                int16_t *scratch)
{
    if (!conv_s16_valid(desc, input, output) || !scratch) {
        return EDGEC_ARG_ERROR;
    }
    if (conv_s16_mve_pointwise(desc)) {
        conv_s16_mve_1x1(desc, input, output);
        return EDGEC_OK;
    }
    const edgec_conv_s16_desc d = *desc;
    const int32_t cg = d.input_c / d.groups;
    const int32_t og = d.output_c / d.groups;
    const int32_t k_size = d.kernel_h * d.kernel_w * cg;
    int16_t *out = output;
    for (int32_t n = 0; n < d.batches; n++) {
        const int16_t *image = input + n * d.input_h * d.input_w * d.input_c;
        for (int32_t oy = 0; oy < d.output_h; oy++) {
            const edgec_tap_range ty = edgec_conv_taps(oy, d.stride_h, d.pad_top, d.dilation_h, d.kernel_h, d.input_h);
            for (int32_t ox = 0; ox < d.output_w; ox++) {
                const edgec_tap_range tx =
                    edgec_conv_taps(ox, d.stride_w, d.pad_left, d.dilation_w, d.kernel_w, d.input_w);
                for (int32_t g = 0; g < d.groups; g++) {
                    const int16_t *column = conv_s16_mve_column(&d, image, ty, tx, g * cg, scratch);
                    edgec_s16_mve_rows(column, d.filter, k_size, g * og, og, d.bias, d.multiplier, d.shift, d.act_min,
                                       d.act_max, out);
                    out += og;
                }
            }
        }
    }
    return EDGEC_OK;
}
#endif /* __ARM_FEATURE_MVE */
