/*
 * edgec_resize_bilinear_s8.c -- int8 bilinear resize (NHWC), TFLite's RESIZE_BILINEAR integer path
 * (tensorflow/lite/kernels/internal/reference/resize_bilinear.h, ResizeBilinearInteger, built
 * without TFLITE_SINGLE_ROUNDING) bit for bit.
 *
 * TFLite sums four int64 products per element; here the same sum is taken as a vertical blend of
 * each column pair, then a horizontal one: (a*wy0 + b*wy1)*wx0 + (c*wy0 + d*wy1)*wx1. Integer
 * arithmetic is exact and |v| <= 128 * 3072 * 3072 < 2^31 for fractions in -1024..1024, so int32
 * gives TFLite's value. The positions (TFLite's ComputeInterpolationValuesInteger) come as tables
 * from edgec.ops.movement.bilinear_axis_table. Golden: edgec.ops.movement.resize_bilinear_s8.
 */
#include <stddef.h>

#include "edgec_nn.h"
#include "../support/edgec_support.h"

#define ONE 1024       /* 1.0 in TFLite's 10-bit positions */
#define HALF (1 << 19) /* 0.5 of the 20-bit product */

/* Every (lower, upper, fraction) triple indexes the input, and its fraction lies in 0..ONE, or in
 * -ONE..ONE with lower == upper (TFLite's first half-pixel positions): the blend of a pair is then
 * a convex combination or the one value times ONE, so results stay inside int8 with no clamp. */
static int table_valid(const int16_t *table, int32_t count, int32_t in_size)
{
    for (int32_t i = 0; i < 3 * count; i += 3) {
        const int32_t lower = table[i];
        const int32_t upper = table[i + 1];
        const int32_t fraction = table[i + 2];
        if (lower < 0 || lower >= in_size || upper < 0 || upper >= in_size || fraction < -ONE || fraction > ONE ||
            (fraction < 0 && lower != upper)) {
            return 0;
        }
    }
    return 1;
}

/* TFLite's rounding of the 20-bit sum, (v + (v > 0 ? HALF : -HALF)) / 2^20 with C's truncating
 * division, as one floor shift: for v <= 0 the truncation is a ceiling, floor((v - HALF + 2^20 - 1)
 * / 2^20) = (v + HALF - 1) >> 20. */
static inline int8_t round_20(int32_t v)
{
    return (int8_t)((v + HALF - (v <= 0 ? 1 : 0)) >> 20);
}

edgec_status edgec_resize_bilinear_s8(const edgec_resize_bilinear_desc *desc, const int8_t *input, int8_t *output)
{
    int32_t channels, row_bytes;

    if (desc == NULL || input == NULL || output == NULL || desc->y_table == NULL || desc->x_table == NULL ||
        desc->batches < 1 || desc->input_h < 1 || desc->input_w < 1 || desc->channels < 1 || desc->output_h < 1 ||
        desc->output_w < 1 || (int64_t)desc->batches * desc->input_h * desc->input_w * desc->channels > INT32_MAX ||
        (int64_t)desc->batches * desc->output_h * desc->output_w * desc->channels > INT32_MAX ||
        !table_valid(desc->y_table, desc->output_h, desc->input_h) ||
        !table_valid(desc->x_table, desc->output_w, desc->input_w)) {
        return EDGEC_ARG_ERROR;
    }
    channels = desc->channels;
    row_bytes = desc->input_w * channels;
    for (int32_t b = 0; b < desc->batches; ++b) {
        const int8_t *const image = input + b * desc->input_h * row_bytes;
        const int16_t *y = desc->y_table;
        for (int32_t oy = 0; oy < desc->output_h; ++oy, y += 3) {
            const int8_t *const top = image + y[0] * row_bytes;
            const int8_t *const bottom = image + y[1] * row_bytes;
            const int32_t wy1 = y[2];
            const int32_t wy0 = ONE - wy1;
            const int16_t *x = desc->x_table;
            for (int32_t ox = 0; ox < desc->output_w; ++ox, x += 3) {
                const int32_t left = x[0] * channels;
                const int32_t right = x[1] * channels;
                const int32_t wx1 = x[2];
                const int32_t wx0 = ONE - wx1;
                for (int32_t ch = 0; ch < channels; ++ch) {
                    const int32_t l = top[left + ch] * wy0 + bottom[left + ch] * wy1;
                    const int32_t r = top[right + ch] * wy0 + bottom[right + ch] * wy1;
                    output[ch] = round_20(l * wx0 + r * wx1);
                }
                output += channels;
            }
        }
    }
    return EDGEC_OK;
}
