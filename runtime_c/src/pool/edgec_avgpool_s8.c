/*
 * edgec_avgpool_s8.c -- int8 average pooling: portable C99, and the window sums of four channels
 * at a time on Helium (Cortex-M55: VLDRB.S32 and VADD per tap) and with the DSP extension
 * (Cortex-M4/M7/M33: two SXTAB16 per tap, into int16 halves, for windows of up to 256 taps).
 *
 * Each output is a window's sum divided by a divisor and rounded half away from zero exactly as
 * TFLite/CMSIS-NN do:
 *   y = clamp(trunc_div(sum > 0 ? sum + n/2 : sum - n/2, n), act_min, act_max),
 * the sum over the taps inside the input. edgec_avgpool_s8's divisor n is the number of those
 * taps (TFLite's rule: padding excluded); edgec_avg_pool2d_s8's may also be PyTorch's
 * count_include_pad rule or its divisor_override (edgec_nn.h).
 * Input and output share scale and zero point, so no requantization is needed.
 * Golden: edgec.ops.pool.avg_pool2d_s8.
 */
#include "edgec_nn.h"
#include "../support/edgec_support.h"

#include <string.h>

/* Both entry points inline every helper (the support header's checks too), as edgec_avgpool_s8
 * did when it was their only caller: its code, and so its instruction counts, stay what they
 * were. */
#if defined(__GNUC__)
#define AVGPOOL_FLATTEN __attribute__((flatten))
#else
#define AVGPOOL_FLATTEN
#endif

static int avgpool_args_valid(const edgec_pool2d_desc *desc, const int8_t *input, const int8_t *output)
{
    int64_t max_taps;
    if (!edgec_pool_args_valid(desc, input, output)) {
        return 0;
    }
    /* |sum| <= 128 * taps (+ taps/2 when rounding) must stay inside int32. */
    max_taps = (int64_t)EDGEC_MIN(desc->filter_h, desc->input_h) * EDGEC_MIN(desc->filter_w, desc->input_w);
    return max_taps <= ((int64_t)1 << 23);
}

/* Sum of one channel over a rows x cols window; `p` points at the window's top-left tap. */
static int32_t window_sum(const int8_t *p, int32_t rows, int32_t cols, int32_t row_stride, int32_t col_stride)
{
    int32_t sum = 0;
    int32_t r, k;
    for (r = 0; r < rows; ++r) {
        const int8_t *q = p;
        for (k = 0; k < cols; ++k) {
            sum += *q;
            q += col_stride;
        }
        p += row_stride;
    }
    return sum;
}

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
/* window_sum of `lanes` channels at once (lane = channel; the others read nothing). */
static int32x4_t window_sum_four(const int8_t *p, int32_t rows, int32_t cols, int32_t row_stride, int32_t col_stride,
                                 mve_pred16_t lanes)
{
    int32x4_t sum = vdupq_n_s32(0);
    for (int32_t r = 0; r < rows; ++r, p += row_stride) {
        const int8_t *q = p;
        for (int32_t k = 0; k < cols; ++k, q += col_stride) {
            sum = vaddq_s32(sum, vldrbq_z_s32(q, lanes));
        }
    }
    return sum;
}
#elif defined(__ARM_FEATURE_DSP)
#define DSP_MAX_TAPS 256 /* |sum| <= 256 * 128: a window's sums fit the int16 halves exactly */

/* window_sum of channels 0..3 at p at once: each tap's four int8 added into two registers of
 * int16 halves (channels 0/2 and 1/3) by SXTAB16, for windows of at most DSP_MAX_TAPS taps. */
static void window_sum_four(const int8_t *p, int32_t rows, int32_t cols, int32_t row_stride, int32_t col_stride,
                            int32_t sums[4])
{
    int32_t even = 0;
    int32_t odd = 0;
    for (int32_t r = 0; r < rows; ++r, p += row_stride) {
        const int8_t *q = p;
        for (int32_t k = 0; k < cols; ++k, q += col_stride) {
            int32_t x;
            memcpy(&x, q, 4);
            even = __sxtab16(even, x);
            __asm__("sxtab16 %0, %0, %1, ror #8" : "+r"(odd) : "r"(x));
        }
    }
    sums[0] = (int16_t)even;
    sums[1] = (int16_t)odd;
    sums[2] = even >> 16;
    sums[3] = odd >> 16;
}
#endif

/* PyTorch's count_include_pad divisor along one axis: the window at output o clipped to the
 * padded input [-pad, in_size + pad), not to the input itself. */
static inline int32_t padded_extent(int32_t o, int32_t stride, int32_t pad, int32_t filter, int32_t in_size)
{
    const int32_t origin = o * stride - pad;
    return EDGEC_MIN(origin + filter, in_size + pad) - origin;
}

/* Round-half-away-from-zero mean; C99 `/` truncates toward zero, which this relies on. */
static int32_t rounded_mean(int32_t sum, int32_t count)
{
    const int32_t half = count / 2;
    return (sum > 0 ? sum + half : sum - half) / count;
}

/*
 * The pooling loop. divisor_override > 0: every output divides by it; else count_include_pad:
 * by the window's extent clipped to the padded input (PyTorch); else by its in-bounds taps. A
 * divisor counting taps outside the input counts them at real 0, the value zero_point: the sum
 * gains (divisor - in-bounds taps) * zero_point.
 * Inlined with constant modes, so edgec_avgpool_s8 compiles to the loop it always had.
 */
static inline void avgpool(const edgec_pool2d_desc *desc, const int8_t *input, int8_t *output,
                           int32_t count_include_pad, int32_t divisor_override, int32_t zero_point)
{
    int32_t n, oy, ox, c;
    int32_t in_h, in_w, channels, out_h, out_w, row_stride;
    /* Read once: the int8 stores below may alias the descriptor as far as C knows. */
    const int32_t act_min = desc->act_min, act_max = desc->act_max;

    in_h = desc->input_h;
    in_w = desc->input_w;
    channels = desc->channels;
    out_h = desc->output_h;
    out_w = desc->output_w;
    row_stride = in_w * channels;

    /* Outputs are produced in NHWC memory order, so `output` is written sequentially. */
    for (n = 0; n < desc->batches; ++n) {
        const int8_t *const image = input + n * in_h * row_stride;
        for (oy = 0; oy < out_h; ++oy) {
            int32_t y0, y1;
            edgec_pool_window(oy, desc->stride_h, desc->pad_top, desc->filter_h, in_h, &y0, &y1);
            for (ox = 0; ox < out_w; ++ox) {
                int32_t x0, x1, count, divisor, correction;
                const int8_t *window;
                edgec_pool_window(ox, desc->stride_w, desc->pad_left, desc->filter_w, in_w, &x0, &x1);
                count = (y1 - y0) * (x1 - x0);
                divisor = count;
                if (divisor_override > 0) {
                    divisor = divisor_override;
                } else if (count_include_pad) {
                    divisor = padded_extent(oy, desc->stride_h, desc->pad_top, desc->filter_h, in_h) *
                              padded_extent(ox, desc->stride_w, desc->pad_left, desc->filter_w, in_w);
                }
                correction = (divisor - count) * zero_point;
                window = image + y0 * row_stride + x0 * channels;
                c = 0;
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
                for (; c < channels; c += 4) {
                    int32_t sums[4];
                    vstrwq_s32(sums, window_sum_four(window + c, y1 - y0, x1 - x0, row_stride, channels,
                                                     vctp32q((uint32_t)(channels - c))));
                    for (int32_t i = 0; i < EDGEC_MIN(4, channels - c); ++i) {
                        *output++ = edgec_clamp_to_s8(rounded_mean(sums[i] + correction, divisor), act_min, act_max);
                    }
                }
#elif defined(__ARM_FEATURE_DSP)
                for (; count <= DSP_MAX_TAPS && c + 4 <= channels; c += 4) {
                    int32_t sums[4];
                    window_sum_four(window + c, y1 - y0, x1 - x0, row_stride, channels, sums);
                    for (int32_t i = 0; i < 4; ++i) {
                        *output++ = edgec_clamp_to_s8(rounded_mean(sums[i] + correction, divisor), act_min, act_max);
                    }
                }
#endif
                for (; c < channels; ++c) {
                    const int32_t sum = window_sum(window + c, y1 - y0, x1 - x0, row_stride, channels);
                    *output++ = edgec_clamp_to_s8(rounded_mean(sum + correction, divisor), act_min, act_max);
                }
            }
        }
    }
}

AVGPOOL_FLATTEN edgec_status edgec_avgpool_s8(const edgec_pool2d_desc *desc, const int8_t *input, int8_t *output)
{
    if (!avgpool_args_valid(desc, input, output) || desc->count_include_pad != 0 || desc->divisor_override != 0) {
        return EDGEC_ARG_ERROR;
    }
    avgpool(desc, input, output, 0, 0, 0);
    return EDGEC_OK;
}

AVGPOOL_FLATTEN edgec_status edgec_avg_pool2d_s8(const edgec_pool2d_desc *desc, const int8_t *input, int8_t *output)
{
    if (desc == NULL || desc->divisor_override < 0 || desc->divisor_override > EDGEC_AVG_POOL2D_MAX_DIVISOR ||
        desc->count_include_pad < 0 || desc->count_include_pad > 1 || desc->zero_point < -128 ||
        desc->zero_point > 127) {
        return EDGEC_ARG_ERROR;
    }
    if (!avgpool_args_valid(desc, input, output)) {
        return EDGEC_ARG_ERROR;
    }
    /* The count_include_pad divisor, at most the padded extents' product, is bounded like an override. */
    if (desc->count_include_pad &&
        (int64_t)EDGEC_MIN(desc->filter_h, (int64_t)desc->input_h + 2 * (int64_t)desc->pad_top) *
                EDGEC_MIN(desc->filter_w, (int64_t)desc->input_w + 2 * (int64_t)desc->pad_left) >
            EDGEC_AVG_POOL2D_MAX_DIVISOR) {
        return EDGEC_ARG_ERROR;
    }
    avgpool(desc, input, output, desc->count_include_pad, desc->divisor_override, desc->zero_point);
    return EDGEC_OK;
}

/* [start, end) of PyTorch's adaptive window `o` along an axis of `in` inputs and `out` outputs. */
static void adaptive_window(int32_t o, int32_t in, int32_t out, int32_t *start, int32_t *end)
{
    *start = (int32_t)(((int64_t)o * in) / out);
    *end = (int32_t)((((int64_t)o + 1) * in + out - 1) / out);
}

edgec_status edgec_adaptive_avg_pool_s8(const edgec_adaptive_avg_pool_desc *desc, const int8_t *input, int8_t *output)
{
    int32_t b, oy, ox, ch;
    if (desc == NULL || input == NULL || output == NULL || desc->batches < 1 || desc->channels < 1 ||
        desc->output_h < 1 || desc->output_w < 1 || desc->input_h < desc->output_h || desc->input_w < desc->output_w ||
        (int64_t)desc->input_h * desc->input_w > ((int64_t)1 << 23) ||
        !edgec_act_range_valid(desc->act_min, desc->act_max)) {
        return EDGEC_ARG_ERROR;
    }
    for (b = 0; b < desc->batches; ++b) {
        const int8_t *image = input + (size_t)b * desc->input_h * desc->input_w * desc->channels;
        for (oy = 0; oy < desc->output_h; ++oy) {
            int32_t y0, y1;
            adaptive_window(oy, desc->input_h, desc->output_h, &y0, &y1);
            for (ox = 0; ox < desc->output_w; ++ox) {
                int32_t x0, x1, n;
                adaptive_window(ox, desc->input_w, desc->output_w, &x0, &x1);
                n = (y1 - y0) * (x1 - x0);
                for (ch = 0; ch < desc->channels; ++ch) {
                    const int8_t *p = image + ((size_t)y0 * desc->input_w + (size_t)x0) * desc->channels + ch;
                    int32_t sum = window_sum(p, y1 - y0, x1 - x0, desc->input_w * desc->channels, desc->channels);
                    sum = sum > 0 ? sum + n / 2 : sum - n / 2;
                    *output++ = edgec_clamp_to_s8(sum / n, desc->act_min, desc->act_max);
                }
            }
        }
    }
    return EDGEC_OK;
}
