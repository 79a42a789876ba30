/*
 * edgec_depthwise_conv_s8 -- int8 depthwise convolution with channel multiplier, portable C path.
 * Golden kernel: edgec.ops.depthwise.depthwise_conv2d_s8. Arithmetic: docs/numerics.md.
 *
 * Output channel oc = ic * ch_mult + m reads input channel ic only. Loop order: output pixel,
 * input channel, multiplier, then the in-bounds taps (range computed once per output pixel, so
 * there is no per-tap bounds test). Output writes stay sequential in NHWC order.
 *
 * int32 accumulator as in CMSIS-NN: KH*KW * 32640 + |bias| < 2^31 for any realistic layer.
 */
#include "edgec_nn.h"
#include "../support/edgec_support.h"

#include <stddef.h>

/*
 * Kernel taps k in [*first, *last) whose input coordinate base + k * dilation lies in [0, size).
 * Returns an empty range (first == last) when no tap is in bounds.
 */
static void valid_tap_range(int32_t base, int32_t size, int32_t dilation, int32_t kernel,
                            int32_t *first, int32_t *last)
{
    int32_t lo = 0;
    int32_t hi = 0;
    if (base < 0) {
        lo = (-base + dilation - 1) / dilation; /* ceil(-base / dilation) */
    }
    if (base < size) {
        hi = (size - base + dilation - 1) / dilation; /* ceil((size - base) / dilation) */
    }
    hi = EDGEC_MIN(hi, kernel);
    *first = lo;
    *last = EDGEC_MAX(lo, hi);
}

static int dims_positive(const edgec_dims *d)
{
    return d->n > 0 && d->h > 0 && d->w > 0 && d->c > 0;
}

static edgec_status check_args(const edgec_conv_params *params,
                               const edgec_per_channel_quant *quant,
                               const edgec_dims *input_dims, const int8_t *input,
                               const edgec_dims *filter_dims, const int8_t *filter,
                               const edgec_dims *output_dims, const int8_t *output)
{
    if (params == NULL || quant == NULL || quant->multiplier == NULL || quant->shift == NULL ||
        input_dims == NULL || input == NULL || filter_dims == NULL || filter == NULL ||
        output_dims == NULL || output == NULL) {
        return EDGEC_ARG_ERROR;
    }
    if (!dims_positive(input_dims) || !dims_positive(filter_dims) ||
        !dims_positive(output_dims)) {
        return EDGEC_ARG_ERROR;
    }
    if (params->stride_h < 1 || params->stride_w < 1 || params->dilation_h < 1 ||
        params->dilation_w < 1 || params->pad_top < 0 || params->pad_left < 0 ||
        params->ch_mult < 1) {
        return EDGEC_ARG_ERROR;
    }
    if (filter_dims->n != 1 || filter_dims->c != input_dims->c * params->ch_mult ||
        output_dims->c != filter_dims->c || output_dims->n != input_dims->n) {
        return EDGEC_ARG_ERROR;
    }
    if (params->act_min < INT8_MIN || params->act_max > INT8_MAX ||
        params->act_min > params->act_max) {
        return EDGEC_ARG_ERROR;
    }
    return EDGEC_OK;
}

edgec_status edgec_depthwise_conv_s8(const edgec_conv_params *params,
                                     const edgec_per_channel_quant *quant,
                                     const edgec_dims *input_dims, const int8_t *input,
                                     const edgec_dims *filter_dims, const int8_t *filter,
                                     const int32_t *bias, const edgec_dims *output_dims,
                                     int8_t *output, int8_t *scratch)
{
    (void)scratch; /* the portable path needs none */
    if (check_args(params, quant, input_dims, input, filter_dims, filter, output_dims, output) !=
        EDGEC_OK) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t ch_mult = params->ch_mult;
    const int32_t out_c = output_dims->c;
    const int32_t input_offset = params->input_offset;
    const int32_t output_offset = params->output_offset;
    /* Clamp before adding the output offset: same as clamp(y + offset), without int32 overflow. */
    const int32_t lo = params->act_min - output_offset;
    const int32_t hi = params->act_max - output_offset;
    const int32_t in_row_len = in_w * in_c;
    const int32_t filter_row_len = k_w * out_c; /* filter is [KH][KW][C_out] */
    int8_t *out = output;

    for (int32_t b = 0; b < output_dims->n; b++) {
        const int8_t *in_batch = input + b * in_h * in_row_len;
        for (int32_t oy = 0; oy < output_dims->h; oy++) {
            const int32_t base_y = oy * params->stride_h - params->pad_top;
            int32_t ky0;
            int32_t ky1;
            valid_tap_range(base_y, in_h, params->dilation_h, k_h, &ky0, &ky1);
            for (int32_t ox = 0; ox < output_dims->w; ox++) {
                const int32_t base_x = ox * params->stride_w - params->pad_left;
                int32_t kx0;
                int32_t kx1;
                valid_tap_range(base_x, in_w, params->dilation_w, k_w, &kx0, &kx1);
                for (int32_t ic = 0; ic < in_c; ic++) {
                    for (int32_t m = 0; m < ch_mult; m++) {
                        const int32_t oc = ic * ch_mult + m;
                        int32_t acc = bias != NULL ? bias[oc] : 0;
                        /* Pointers are formed for in-bounds taps only. */
                        for (int32_t ky = ky0; ky < ky1; ky++) {
                            const int32_t iy = base_y + ky * params->dilation_h;
                            const int8_t *in_y = in_batch + iy * in_row_len + ic;
                            const int8_t *w_y = filter + ky * filter_row_len + oc;
                            for (int32_t kx = kx0; kx < kx1; kx++) {
                                const int32_t ix = base_x + kx * params->dilation_w;
                                acc += ((int32_t)in_y[ix * in_c] + input_offset) *
                                       (int32_t)w_y[kx * out_c];
                            }
                        }
                        acc = edgec_requantize(acc, quant->multiplier[oc], quant->shift[oc]);
                        acc = EDGEC_MIN(EDGEC_MAX(acc, lo), hi);
                        *out++ = (int8_t)(acc + output_offset);
                    }
                }
            }
        }
    }
    return EDGEC_OK;
}
