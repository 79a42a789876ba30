/*
 * edgec_maxpool_s8.c -- int8 max pooling (portable C99 path).
 *
 * Each output is the maximum of the taps that fall inside the input (padding never wins), then
 * clamped to act_min..act_max. Input and output share qparams. Golden: edgec.ops.pool.max_pool2d_s8.
 */
#include "edgec_nn.h"
#include "../support/edgec_support.h"

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

edgec_status edgec_maxpool_s8(const edgec_pool_params *params, const edgec_dims *input_dims,
                              const int8_t *input, const edgec_dims *output_dims, int8_t *output)
{
    int32_t n, oy, ox, c;
    int32_t in_h, in_w, channels, out_h, out_w, row_stride;

    if (!edgec_pool_args_valid(params, input_dims, input, output_dims, output)) {
        return EDGEC_ARG_ERROR;
    }
    in_h = input_dims->h;
    in_w = input_dims->w;
    channels = input_dims->c;
    out_h = output_dims->h;
    out_w = output_dims->w;
    row_stride = in_w * channels;

    /* Outputs are produced in NHWC memory order, so `output` is written sequentially. */
    for (n = 0; n < input_dims->n; ++n) {
        const int8_t *const image = input + n * in_h * row_stride;
        for (oy = 0; oy < out_h; ++oy) {
            int32_t y0, y1;
            edgec_pool_window(oy, params->stride_h, params->pad_top, params->filter_h, in_h, &y0, &y1);
            for (ox = 0; ox < out_w; ++ox) {
                int32_t x0, x1;
                const int8_t *window;
                edgec_pool_window(ox, params->stride_w, params->pad_left, params->filter_w, in_w, &x0, &x1);
                window = image + y0 * row_stride + x0 * channels;
                for (c = 0; c < channels; ++c) {
                    const int32_t max = window_max(window + c, y1 - y0, x1 - x0, row_stride, channels);
                    *output++ = edgec_clamp_to_s8(max, params->act_min, params->act_max);
                }
            }
        }
    }
    return EDGEC_OK;
}
