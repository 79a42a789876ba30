/*
 * edgec_depthwise_conv_s16.c -- int16 x int8 depthwise convolution with int64 accumulators (the
 * 16x8 scheme), following CMSIS-NN arm_depthwise_conv_s16
 * (Source/ConvolutionFunctions/arm_depthwise_conv_s16.c, depthwise_conv_s16_generic_s16) and
 * arm_nn_requantize_s64; golden: edgec.ops.int16.depthwise_conv_s16.
 */
#include "../support/edgec_support.h"

static int depthwise_conv_s16_valid(const edgec_depthwise_conv_s16_desc *d, const int16_t *input, const int16_t *output)
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
           edgec_s16_output_valid(d->multiplier, d->shift, (int32_t)output_c, d->act_min, d->act_max);
}

edgec_status edgec_depthwise_conv_s16(const edgec_depthwise_conv_s16_desc *desc, const int16_t *input, int16_t *output)
{
    if (!depthwise_conv_s16_valid(desc, input, output)) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_depthwise_conv_s16_desc d = *desc;
    const int32_t output_c = d.input_c * d.ch_mult;
    int16_t *out = output;
    for (int32_t n = 0; n < d.batches; n++) {
        const int16_t *image = input + n * d.input_h * d.input_w * d.input_c;
        for (int32_t oy = 0; oy < d.output_h; oy++) {
            const edgec_tap_range ty = edgec_conv_taps(oy, d.stride_h, d.pad_top, d.dilation_h, d.kernel_h, d.input_h);
            for (int32_t ox = 0; ox < d.output_w; ox++) {
                const edgec_tap_range tx =
                    edgec_conv_taps(ox, d.stride_w, d.pad_left, d.dilation_w, d.kernel_w, d.input_w);
                for (int32_t o = 0; o < output_c; o++) {
                    const int32_t c = o / d.ch_mult;
                    int64_t acc = 0;
                    for (int32_t ky = ty.first; ky < ty.last; ky++) {
                        const int32_t iy = ty.base + ky * d.dilation_h;
                        for (int32_t kx = tx.first; kx < tx.last; kx++) {
                            const int32_t ix = tx.base + kx * d.dilation_w;
                            acc += (int32_t)image[(iy * d.input_w + ix) * d.input_c + c] *
                                   d.filter[(ky * d.kernel_w + kx) * output_c + o];
                        }
                    }
                    *out++ = edgec_output_s16(acc, d.bias, d.multiplier, d.shift, o, d.act_min, d.act_max);
                }
            }
        }
    }
    return EDGEC_OK;
}

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
/*
 * Helium path (as CMSIS-NN's arm_nn_depthwise_conv_nt_t_s16): four channels a vector, each tap
 * one VLDRH.S32 of inputs and one VLDRB.S32 of weights multiplied lane by lane (VMUL.S32) and
 * added to 32-bit lane sums. A product is at most 2^22 in magnitude, so a window of at most
 * DEPTHWISE_S16_MVE_MAX_TAPS taps sums exactly in int32 (511 * 2^22 < 2^31) and the result equals
 * the portable kernel's int64 sum. The loops run over channel groups, then pixels, so that each
 * group's output stage is prepared once (depthwise_s16_stage).
 */
#define DEPTHWISE_S16_MVE_MAX_TAPS 511

/*
 * One channel's output stage for a 32-bit sum: clamp((acc * reduced + offset) >> shift) with
 * offset = bias * reduced + 2^(shift - 1) and shift = 15 - shift[c]. When |bias| <= 2^47 - 2^31,
 * acc + bias never reaches edgec_add_bias_s64's saturation, and rounding (x * reduced) >> (shift - 1)
 * up by one then halving equals adding 2^(shift - 1) before one shift, so this is
 * edgec_output_s16 exactly; `exact` is 0 for a larger bias, whose channel takes edgec_output_s16.
 */
typedef struct {
    int64_t offset;
    int32_t reduced;
    int32_t shift;
    int32_t exact;
} depthwise_s16_stage;

static depthwise_s16_stage depthwise_s16_stage_of(const edgec_depthwise_conv_s16_desc *d, int32_t c)
{
    const int64_t bias_limit = ((int64_t)1 << 47) - ((int64_t)1 << 31);
    const int64_t bias = d->bias ? d->bias[c] : 0;
    depthwise_s16_stage stage;
    stage.reduced = edgec_reduce_multiplier(d->multiplier[c]);
    stage.shift = 15 - d->shift[c];
    stage.exact = bias >= -bias_limit && bias <= bias_limit;
    stage.offset = (stage.exact ? bias * stage.reduced : 0) + ((int64_t)1 << (stage.shift - 1));
    return stage;
}

static int16_t depthwise_s16_output(const edgec_depthwise_conv_s16_desc *d, const depthwise_s16_stage *stage,
                                    int32_t acc, int32_t c)
{
    if (!stage->exact) {
        return edgec_output_s16(acc, d->bias, d->multiplier, d->shift, c, d->act_min, d->act_max);
    }
    const int64_t result = ((int64_t)acc * stage->reduced + stage->offset) >> stage->shift;
    return (int16_t)EDGEC_MIN(EDGEC_MAX(result, (int64_t)d->act_min), (int64_t)d->act_max);
}

/* The sums of the four channels c.. over the window's taps inside the input. */
static int32x4_t depthwise_s16_mve_sum(const edgec_depthwise_conv_s16_desc *d, const int16_t *image, edgec_tap_range ty,
                                       edgec_tap_range tx, int32_t c)
{
    const int32_t channels = d->input_c;
    const int32_t x_step = d->dilation_w * channels;
    int32x4_t sum = vdupq_n_s32(0);
    if (tx.first == tx.last) {
        return sum; /* (no pointer is formed to a row outside the input) */
    }
    for (int32_t ky = ty.first; ky < ty.last; ky++) {
        const int32_t iy = ty.base + ky * d->dilation_h;
        const int16_t *x = image + (iy * d->input_w + tx.base + tx.first * d->dilation_w) * channels + c;
        const int8_t *w = d->filter + (ky * d->kernel_w + tx.first) * channels + c;
        for (int32_t kx = tx.first; kx < tx.last; kx++) {
            sum = vaddq_s32(sum, vmulq_s32(vldrhq_s32(x), vldrbq_s32(w)));
            x += x_step;
            w += channels;
        }
    }
    return sum;
}

/* Channels c + first .. c + 3 of every output pixel (the lanes before `first` belong to the
 * previous group). */
static void depthwise_s16_mve_group(const edgec_depthwise_conv_s16_desc *d, const int16_t *input, int32_t c,
                                    int32_t first, int16_t *output)
{
    depthwise_s16_stage stage[4];
    for (int32_t i = first; i < 4; i++) {
        stage[i] = depthwise_s16_stage_of(d, c + i);
    }
    int16_t *out = output + c;
    for (int32_t n = 0; n < d->batches; n++) {
        const int16_t *image = input + n * d->input_h * d->input_w * d->input_c;
        for (int32_t oy = 0; oy < d->output_h; oy++) {
            const edgec_tap_range ty =
                edgec_conv_taps(oy, d->stride_h, d->pad_top, d->dilation_h, d->kernel_h, d->input_h);
            for (int32_t ox = 0; ox < d->output_w; ox++) {
                const edgec_tap_range tx =
                    edgec_conv_taps(ox, d->stride_w, d->pad_left, d->dilation_w, d->kernel_w, d->input_w);
                int32_t sum[4];
                vstrwq_s32(sum, depthwise_s16_mve_sum(d, image, ty, tx, c));
                for (int32_t i = first; i < 4; i++) {
                    out[i] = depthwise_s16_output(d, &stage[i], sum[i], c + i);
                }
                out += d->input_c;
            }
        }
    }
}

edgec_status edgec_depthwise_conv_s16_mve(const edgec_depthwise_conv_s16_desc *desc, const int16_t *input,
                                          int16_t *output)
{
    if (!depthwise_conv_s16_valid(desc, input, output)) {
        return EDGEC_ARG_ERROR;
    }
    /* A channel multiplier reads each input channel for several outputs, fewer than four
     * channels fill no vector, and a window past DEPTHWISE_S16_MVE_MAX_TAPS taps could overflow
     * the lane sums: the portable loops. */
    if (desc->ch_mult != 1 || desc->input_c < 4 ||
        (int64_t)desc->kernel_h * desc->kernel_w > DEPTHWISE_S16_MVE_MAX_TAPS) {
        return edgec_depthwise_conv_s16(desc, input, output);
    }
    /* A channel count not a multiple of four ends with the group of the last four channels,
     * overlapping the previous one: every load stays unpredicated and within the channels. */
    for (int32_t c = 0; c < desc->input_c; c += 4) {
        const int32_t start = EDGEC_MIN(c, desc->input_c - 4);
        depthwise_s16_mve_group(desc, input, start, c - start, output);
    }
    return EDGEC_OK;
}
#endif /* __ARM_FEATURE_MVE */
