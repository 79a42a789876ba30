/*
 * edgec_maxpool_s8.c -- int8 max pooling: the portable C99 path (the reference) and, picked by the
 * build's -mcpu, channels at once: sixteen on Helium (VMAX.S8 per tap, the tail predicated), eight
 * and four with the DSP extension (SSUB8/SEL per word of a tap), the rest one by one.
 *
 * Each output is the maximum of the taps that fall inside the input (padding never wins), then
 * clamped to act_min..act_max. Input and output share qparams. Golden: edgec.ops.pool.max_pool2d_s8.
 */
#include <string.h>

#include "edgec_nn.h"
#include "../support/edgec_support.h"

#if !(defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)) /* Helium predicates its tail instead */
/* Max of one channel over a non-empty rows x cols window; `p` points at the top-left tap. */
static int32_t window_max(const int8_t *p, int32_t rows, int32_t cols, int32_t row_stride, int32_t col_stride)
{
    int32_t max = INT8_MIN; /* the identity of max over int8, so no special first tap */
    int32_t r, k;
    for (r = 0; r < rows; ++r) {
        const int8_t *q = p;
        for (k = 0; k < cols; ++k) {
            max = EDGEC_MAX(max, (int32_t)*q);
            q += col_stride;
        }
        p += row_stride;
    }
    return max;
}
#endif

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
/* The clamped window maxima of `channels` channels into out, sixteen lanes at a time. */
static void window_max_channels(const int8_t *window, int32_t rows, int32_t cols, int32_t row_stride, int32_t channels,
                                int32_t act_min, int32_t act_max, int8_t *out)
{
    const int8x16_t lows = vdupq_n_s8((int8_t)act_min), highs = vdupq_n_s8((int8_t)act_max);
    for (int32_t c = 0; c < channels; c += 16) {
        const mve_pred16_t lanes = vctp8q((uint32_t)(channels - c));
        const int8_t *p = window + c;
        int8x16_t max = vdupq_n_s8(INT8_MIN);
        for (int32_t r = 0; r < rows; ++r, p += row_stride) {
            const int8_t *q = p;
            for (int32_t k = 0; k < cols; ++k, q += channels) {
                max = vmaxq_s8(max, vldrbq_z_s8(q, lanes));
            }
        }
        vstrbq_p_s8(out + c, vminq_s8(vmaxq_s8(max, lows), highs), lanes);
    }
}
#elif defined(__ARM_FEATURE_DSP)
static inline uint32_t load_s8x4(const int8_t *p)
{
    uint32_t word;
    memcpy(&word, p, sizeof(word));
    return word;
}

/* Bytewise signed maximum: SSUB8 sets each byte's GE flag where a >= b, SEL picks by them. */
static inline uint32_t max_s8x4(uint32_t a, uint32_t b)
{
    uint32_t difference;
    __asm__("ssub8 %1, %0, %2\n\tsel %0, %0, %2" : "+r"(a), "=&r"(difference) : "r"(b) : "cc");
    return a;
}

/* The clamped window maxima of `channels` channels into out: eight, then four at a time (words of
 * each tap), then one by one. */
static void window_max_channels(const int8_t *window, int32_t rows, int32_t cols, int32_t row_stride, int32_t channels,
                                int32_t act_min, int32_t act_max, int8_t *out)
{
    const uint32_t lows = edgec_dsp_bytes(act_min), highs = edgec_dsp_bytes(act_max);
    int32_t c = 0;
    for (; c + 8 <= channels; c += 8) {
        const int8_t *p = window + c;
        uint32_t max0 = 0x80808080u, max1 = 0x80808080u;
        for (int32_t r = 0; r < rows; ++r, p += row_stride) {
            const int8_t *q = p;
            for (int32_t k = 0; k < cols; ++k, q += channels) {
                max0 = max_s8x4(max0, load_s8x4(q));
                max1 = max_s8x4(max1, load_s8x4(q + 4));
            }
        }
        max0 = edgec_dsp_clamp_s8x4(max0, lows, highs);
        max1 = edgec_dsp_clamp_s8x4(max1, lows, highs);
        memcpy(out + c, &max0, sizeof(max0));
        memcpy(out + c + 4, &max1, sizeof(max1));
    }
    for (; c + 4 <= channels; c += 4) {
        const int8_t *p = window + c;
        uint32_t max = 0x80808080u;
        for (int32_t r = 0; r < rows; ++r, p += row_stride) {
            const int8_t *q = p;
            for (int32_t k = 0; k < cols; ++k, q += channels) {
                max = max_s8x4(max, load_s8x4(q));
            }
        }
        max = edgec_dsp_clamp_s8x4(max, lows, highs);
        memcpy(out + c, &max, sizeof(max));
    }
    for (; c < channels; ++c) {
        out[c] = edgec_clamp_to_s8(window_max(window + c, rows, cols, row_stride, channels), act_min, act_max);
    }
}
#else
static void window_max_channels(const int8_t *window, int32_t rows, int32_t cols, int32_t row_stride, int32_t channels,
                                int32_t act_min, int32_t act_max, int8_t *out)
{
    for (int32_t c = 0; c < channels; ++c) {
        out[c] = edgec_clamp_to_s8(window_max(window + c, rows, cols, row_stride, channels), act_min, act_max);
    }
}
#endif

edgec_status edgec_maxpool_s8(const edgec_pool2d_desc *desc, const int8_t *input, int8_t *output)
{
    int32_t n, oy, ox;
    int32_t in_h, in_w, channels, out_h, out_w, row_stride;

    if (!edgec_pool_args_valid(desc, input, output)) {
        return EDGEC_ARG_ERROR;
    }
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
                int32_t x0, x1;
                const int8_t *window;
                edgec_pool_window(ox, desc->stride_w, desc->pad_left, desc->filter_w, in_w, &x0, &x1);
                window = image + y0 * row_stride + x0 * channels;
                window_max_channels(window, y1 - y0, x1 - x0, row_stride, channels, act_min, act_max, output);
                output += channels;
            }
        }
    }
    return EDGEC_OK;
}
