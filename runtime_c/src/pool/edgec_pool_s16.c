/*
 * edgec_pool_s16.c -- int16 max and average pooling, NHWC, following CMSIS-NN arm_max_pool_s16 /
 * arm_avgpool_s16 (Source/PoolingFunctions/) and TFLite reference_integer_ops MaxPool /
 * AveragePool for int16, the average with PyTorch's divisors as edgec_avg_pool2d_s8; goldens:
 * edgec.ops.int16.max_pool_s16 / avg_pool_s16.
 */
#include "../support/edgec_support.h"

static int pool_s16_valid(const edgec_pool_s16_desc *d, const int16_t *input, const int16_t *output)
{
    if (!d || !input || !output || d->batches < 1 || d->channels < 1) {
        return 0;
    }
    if ((int64_t)d->batches * d->input_h * d->input_w * d->channels > INT32_MAX ||
        (int64_t)d->batches * d->output_h * d->output_w * d->channels > INT32_MAX ||
        (int64_t)d->filter_h * d->filter_w > INT32_MAX) {
        return 0;
    }
    return edgec_pool_axis_valid(d->input_h, d->output_h, d->filter_h, d->stride_h, d->pad_top) &&
           edgec_pool_axis_valid(d->input_w, d->output_w, d->filter_w, d->stride_w, d->pad_left) &&
           d->count_include_pad >= 0 && d->count_include_pad <= 1 && d->divisor_override >= 0 &&
           d->divisor_override <= EDGEC_AVG_POOL2D_MAX_DIVISOR && d->act_min >= INT16_MIN && d->act_max <= INT16_MAX &&
           d->act_min <= d->act_max;
}

/* PyTorch's count_include_pad extent along one axis: the window clipped to the padded input. */
static int32_t padded_extent(int32_t o, int32_t stride, int32_t pad, int32_t filter, int32_t in_size)
{
    const int32_t start = o * stride - pad;
    return EDGEC_MIN(start + filter, in_size + pad) - start;
}

/* max (is_max) or the rounded average of every output element. */
static void pool_s16(const edgec_pool_s16_desc *d, const int16_t *input, int16_t *output, int is_max)
{
    for (int32_t n = 0; n < d->batches; n++) {
        const int16_t *image = input + n * d->input_h * d->input_w * d->channels;
        for (int32_t oy = 0; oy < d->output_h; oy++) {
            int32_t y0;
            int32_t y1;
            edgec_pool_window(oy, d->stride_h, d->pad_top, d->filter_h, d->input_h, &y0, &y1);
            for (int32_t ox = 0; ox < d->output_w; ox++) {
                int32_t x0;
                int32_t x1;
                edgec_pool_window(ox, d->stride_w, d->pad_left, d->filter_w, d->input_w, &x0, &x1);
                int64_t divisor = (int64_t)(y1 - y0) * (x1 - x0);
                if (d->divisor_override > 0) {
                    divisor = d->divisor_override;
                } else if (d->count_include_pad) {
                    divisor = (int64_t)padded_extent(oy, d->stride_h, d->pad_top, d->filter_h, d->input_h) *
                              padded_extent(ox, d->stride_w, d->pad_left, d->filter_w, d->input_w);
                }
                for (int32_t c = 0; c < d->channels; c++) {
                    int64_t sum = 0;
                    int32_t best = INT16_MIN;
                    for (int32_t iy = y0; iy < y1; iy++) {
                        const int16_t *row = image + (iy * d->input_w) * d->channels + c;
                        for (int32_t ix = x0; ix < x1; ix++) {
                            const int32_t v = row[ix * d->channels];
                            sum += v;
                            best = EDGEC_MAX(best, v);
                        }
                    }
                    int64_t y = best;
                    if (!is_max) {
                        /* round half away from zero, then C's truncating division */
                        y = (sum > 0 ? sum + divisor / 2 : sum - divisor / 2) / divisor;
                    }
                    y = EDGEC_MIN(EDGEC_MAX(y, (int64_t)d->act_min), (int64_t)d->act_max);
                    *output++ = (int16_t)y;
                }
            }
        }
    }
}

edgec_status edgec_max_pool_s16(const edgec_pool_s16_desc *desc, const int16_t *input, int16_t *output)
{
    if (!pool_s16_valid(desc, input, output)) {
        return EDGEC_ARG_ERROR;
    }
    pool_s16(desc, input, output, 1);
    return EDGEC_OK;
}

edgec_status edgec_avg_pool_s16(const edgec_pool_s16_desc *desc, const int16_t *input, int16_t *output)
{
    if (!pool_s16_valid(desc, input, output)) {
        return EDGEC_ARG_ERROR;
    }
    pool_s16(desc, input, output, 0);
    return EDGEC_OK;
}
