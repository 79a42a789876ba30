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

#if defined(__ARM_FEATURE_DSP) || (defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))
/*
 * The DSP and Helium paths sum a group of channels in 32-bit lanes. A product is at most 2^22 in
 * magnitude, so a window of at most DEPTHWISE_S16_MAX_TAPS taps sums exactly in int32
 * (511 * 2^22 < 2^31) and the result equals the portable kernel's int64 sum.
 */
#define DEPTHWISE_S16_MAX_TAPS 511

/* A window's taps inside the input: rows x cols of them from x and w, the steps between rows and
 * columns in elements. */
typedef struct {
    const int16_t *x;
    const int8_t *w;
    int32_t rows;
    int32_t cols;
    int32_t x_row;
    int32_t x_col;
    int32_t w_row;
    int32_t w_col;
} depthwise_s16_window;

/* The taps inside the input of the window at (ty, tx) for the channels from c; rows or cols 0
 * (and no pointer formed to a pixel outside the input) when there is none. */
static depthwise_s16_window depthwise_s16_window_of(const edgec_depthwise_conv_s16_desc *d, const int16_t *image,
                                                    edgec_tap_range ty, edgec_tap_range tx, int32_t c)
{
    depthwise_s16_window win = { image, d->filter, ty.last - ty.first, tx.last - tx.first, 0, 0, 0, 0 };
    if (win.rows == 0 || win.cols == 0) {
        return win;
    }
    const int32_t channels = d->input_c;
    const int32_t iy = ty.base + ty.first * d->dilation_h;
    const int32_t ix = tx.base + tx.first * d->dilation_w;
    win.x = image + (iy * d->input_w + ix) * channels + c;
    win.w = d->filter + (ty.first * d->kernel_w + tx.first) * channels + c;
    win.x_row = d->dilation_h * d->input_w * channels;
    win.x_col = d->dilation_w * channels;
    win.w_row = d->kernel_w * channels;
    win.w_col = channels;
    return win;
}

/* Whether the group paths apply: a channel multiplier reads each input channel for several
 * outputs, fewer than `group` channels fill no group, and a window past DEPTHWISE_S16_MAX_TAPS
 * taps could overflow the lane sums (those take the portable loops). */
static int depthwise_s16_groups_apply(const edgec_depthwise_conv_s16_desc *d, int32_t group)
{
    return d->ch_mult == 1 && d->input_c >= group && (int64_t)d->kernel_h * d->kernel_w <= DEPTHWISE_S16_MAX_TAPS;
}

/* One group of `group` channels from channel c (depthwise_s16_mve_group, depthwise_s16_dsp_group). */
typedef void (*depthwise_s16_group_fn)(const edgec_depthwise_conv_s16_desc *d, const int16_t *input, int32_t c,
                                       int16_t *output);

/* A group path over the layer: the arguments checked, the portable loops where the groups do not
 * apply; a channel count not a multiple of `group` ends with the group of the last `group`
 * channels, overlapping the previous one (its outputs there are computed again, to the same
 * values): every load stays within the channels. */
static edgec_status depthwise_s16_by_groups(const edgec_depthwise_conv_s16_desc *desc, const int16_t *input,
                                            int16_t *output, int32_t group, depthwise_s16_group_fn run_group)
{
    if (!depthwise_conv_s16_valid(desc, input, output)) {
        return EDGEC_ARG_ERROR;
    }
    if (!depthwise_s16_groups_apply(desc, group)) {
        return edgec_depthwise_conv_s16(desc, input, output);
    }
    for (int32_t c = 0; c < desc->input_c; c += group) {
        run_group(desc, input, EDGEC_MIN(c, desc->input_c - group), output);
    }
    return EDGEC_OK;
}
#endif

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
/*
 * Helium path: eight channels a group, each tap one VLDRH of eight inputs and one VLDRB.S16 of
 * eight weights, multiplied into the 32-bit sums of the even channels (VMULLB) and the odd ones
 * (VMULLT). The loops run over channel groups, then pixels, so that each group's output stage is
 * prepared once (edgec_s16_mve_stage).
 */

/* The even and the odd channels' sums of a group. */
typedef struct {
    int32x4_t even;
    int32x4_t odd;
} depthwise_s16_sums;

/* The group's sums over the window. Not inlined: inside the pixel loops GCC spills the pointers
 * and steps of this loop to the stack on every tap. */
static EDGEC_NOINLINE depthwise_s16_sums depthwise_s16_mve_window(const depthwise_s16_window *window)
{
    const depthwise_s16_window win = *window;
    depthwise_s16_sums sums = { vdupq_n_s32(0), vdupq_n_s32(0) };
    for (int32_t r = 0; r < win.rows; r++) {
        const int16_t *x = win.x + r * win.x_row;
        const int8_t *w = win.w + r * win.w_row;
        for (int32_t k = 0; k < win.cols; k++) {
            const int16x8_t xv = vldrhq_s16(x + k * win.x_col);
            const int16x8_t wv = vldrbq_s16(w + k * win.w_col);
            sums.even = vaddq_s32(sums.even, vmullbq_int_s16(xv, wv));
            sums.odd = vaddq_s32(sums.odd, vmulltq_int_s16(xv, wv));
        }
    }
    return sums;
}

/* The sums of the eight channels c.. over the window's taps inside the input. */
static depthwise_s16_sums depthwise_s16_mve_sum(const edgec_depthwise_conv_s16_desc *d, const int16_t *image,
                                                edgec_tap_range ty, edgec_tap_range tx, int32_t c)
{
    const depthwise_s16_window win = depthwise_s16_window_of(d, image, ty, tx, c);
    if (win.rows == 0 || win.cols == 0) {
        const depthwise_s16_sums zero = { vdupq_n_s32(0), vdupq_n_s32(0) };
        return zero;
    }
    return depthwise_s16_mve_window(&win);
}

/* Outputs c .. c + 7 in edgec_output_s16's scalar form. */
static void depthwise_s16_output_lanes(const edgec_depthwise_conv_s16_desc *d, depthwise_s16_sums sums, int32_t c,
                                       int16_t *out)
{
    int32_t lanes[2][4];
    vstrwq_s32(lanes[0], sums.even);
    vstrwq_s32(lanes[1], sums.odd);
    for (int32_t i = 0; i < 8; i++) {
        out[i] = edgec_output_s16(lanes[i % 2][i / 2], d->bias, d->multiplier, d->shift, c + i, d->act_min, d->act_max);
    }
}

/* Channels c .. c + 7 of every output pixel. */
static void depthwise_s16_mve_group(const edgec_depthwise_conv_s16_desc *d, const int16_t *input, int32_t c,
                                    int16_t *output)
{
    const edgec_s16_mve_stage even = edgec_s16_mve_stage_of(d->bias, d->multiplier, d->shift, c, 2);
    const edgec_s16_mve_stage odd = edgec_s16_mve_stage_of(d->bias, d->multiplier, d->shift, c + 1, 2);
    int16_t *out = output + c;
    for (int32_t n = 0; n < d->batches; n++) {
        const int16_t *image = input + n * d->input_h * d->input_w * d->input_c;
        for (int32_t oy = 0; oy < d->output_h; oy++) {
            const edgec_tap_range ty =
                edgec_conv_taps(oy, d->stride_h, d->pad_top, d->dilation_h, d->kernel_h, d->input_h);
            for (int32_t ox = 0; ox < d->output_w; ox++) {
                const edgec_tap_range tx =
                    edgec_conv_taps(ox, d->stride_w, d->pad_left, d->dilation_w, d->kernel_w, d->input_w);
                const depthwise_s16_sums sums = depthwise_s16_mve_sum(d, image, ty, tx, c);
                if (even.vector && odd.vector) {
                    /* both halves are clamped to int16: narrowing them back into channel order is exact */
                    int16x8_t result = vdupq_n_s16(0);
                    result = vmovnbq_s32(result, edgec_s16_mve_requantize(sums.even, &even, d->act_min, d->act_max));
                    result = vmovntq_s32(result, edgec_s16_mve_requantize(sums.odd, &odd, d->act_min, d->act_max));
                    vstrhq_s16(out, result);
                } else {
                    depthwise_s16_output_lanes(d, sums, c, out);
                }
                out += d->input_c;
            }
        }
    }
}

edgec_status edgec_depthwise_conv_s16_mve(const edgec_depthwise_conv_s16_desc *desc, const int16_t *input,
                                          int16_t *output)
{
    return depthwise_s16_by_groups(desc, input, output, 8, depthwise_s16_mve_group); /* unpredicated loads */
}
#endif /* __ARM_FEATURE_MVE */

#if defined(__ARM_FEATURE_DSP)
/*
 * DSP path: four channels c .. c + 3 a group. Per tap, the inputs are two words (x0, x1) and
 * (x2, x3) (NHWC: adjacent channels), the weights one word of four int8 widened by SXTB16 into
 * (w0, w2) and, rotated, (w1, w3); SMLABB, SMLATB, SMLABT and SMLATT add the four products into
 * the channels' 32-bit sums (exact: DEPTHWISE_S16_MAX_TAPS). The output stage is the portable
 * kernel's arithmetic, channel by channel, in a shorter exact form where the bias allows it.
 */

/* The word of the int16 pair at p (any int16 alignment; byte loads where the build forbids
 * unaligned words): the first in the low half. */
static inline int32_t depthwise_s16_dsp_pair(const int16_t *p)
{
    return edgec_s16_dsp_load_weights((const int8_t *)p);
}

/* The four channels' sums over the window's taps. Not inlined, as the Helium loop, so that the
 * window's pointers and steps stay in registers. */
static EDGEC_NOINLINE void depthwise_s16_dsp_window(const depthwise_s16_window *window, int32_t sums[4])
{
    const depthwise_s16_window win = *window;
    int32_t s0 = 0;
    int32_t s1 = 0;
    int32_t s2 = 0;
    int32_t s3 = 0;
    for (int32_t r = 0; r < win.rows; r++) {
        const int16_t *x = win.x + r * win.x_row;
        const int8_t *w = win.w + r * win.w_row;
        for (int32_t k = 0; k < win.cols; k++) {
            const int32_t x01 = depthwise_s16_dsp_pair(x);
            const int32_t x23 = depthwise_s16_dsp_pair(x + 2);
            const int32_t four = edgec_s16_dsp_load_weights(w);
            const int32_t w02 = __sxtb16(four);
            const int32_t w13 = edgec_sxtb16_ror8(four);
            s0 = __smlabb(x01, w02, s0);
            s1 = __smlatb(x01, w13, s1);
            s2 = __smlabt(x23, w02, s2);
            s3 = __smlatt(x23, w13, s3);
            x += win.x_col;
            w += win.w_col;
        }
    }
    sums[0] = s0;
    sums[1] = s1;
    sums[2] = s2;
    sums[3] = s3;
}

/*
 * A channel's output stage for 32-bit sums, prepared once per group: as edgec_s16_mve_stage
 * explains, with s = 15 - shift and offset = bias * reduced + 2^(s - 1), edgec_output_s16 of a
 * 32-bit sum is clamp((acc * reduced + offset) >> s) when |bias| <= 2^47 - 2^31 (`exact`; one
 * SMLAL and a 64-bit shift instead of the bias saturation and the two-step rounding). Otherwise
 * edgec_output_s16 itself.
 */
typedef struct {
    int64_t offset;
    int32_t reduced;
    int32_t s;
    int exact;
} depthwise_s16_dsp_stage;

static depthwise_s16_dsp_stage depthwise_s16_dsp_stage_of(const edgec_depthwise_conv_s16_desc *d, int32_t c)
{
    const int64_t bias_limit = ((int64_t)1 << 47) - ((int64_t)1 << 31);
    const int64_t b = d->bias ? d->bias[c] : 0;
    depthwise_s16_dsp_stage stage;
    stage.reduced = edgec_reduce_multiplier(d->multiplier[c]);
    stage.s = 15 - d->shift[c];
    stage.exact = b >= -bias_limit && b <= bias_limit;
    stage.offset = (stage.exact ? b * stage.reduced : 0) + ((int64_t)1 << (stage.s - 1));
    return stage;
}

/* Output channel c of the 32-bit sum acc. */
static inline int16_t depthwise_s16_dsp_output(const edgec_depthwise_conv_s16_desc *d,
                                               const depthwise_s16_dsp_stage *stage, int32_t acc, int32_t c)
{
    if (!stage->exact) {
        return edgec_output_s16(acc, d->bias, d->multiplier, d->shift, c, d->act_min, d->act_max);
    }
    const int64_t result = ((int64_t)acc * stage->reduced + stage->offset) >> stage->s;
    return (int16_t)EDGEC_MIN(EDGEC_MAX(result, (int64_t)d->act_min), (int64_t)d->act_max);
}

/* Channels c .. c + 3 of every output pixel. */
static void depthwise_s16_dsp_group(const edgec_depthwise_conv_s16_desc *d, const int16_t *input, int32_t c,
                                    int16_t *output)
{
    depthwise_s16_dsp_stage stages[4];
    for (int32_t i = 0; i < 4; i++) {
        stages[i] = depthwise_s16_dsp_stage_of(d, c + i);
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
                const depthwise_s16_window win = depthwise_s16_window_of(d, image, ty, tx, c);
                int32_t sums[4] = { 0, 0, 0, 0 };
                if (win.rows > 0 && win.cols > 0) {
                    depthwise_s16_dsp_window(&win, sums);
                }
                for (int32_t i = 0; i < 4; i++) {
                    out[i] = depthwise_s16_dsp_output(d, &stages[i], sums[i], c + i);
                }
                out += d->input_c;
            }
        }
    }
}

edgec_status edgec_depthwise_conv_s16_dsp(const edgec_depthwise_conv_s16_desc *desc, const int16_t *input,
                                          int16_t *output)
{
    return depthwise_s16_by_groups(desc, input, output, 4, depthwise_s16_dsp_group);
}
#endif /* __ARM_FEATURE_DSP */
