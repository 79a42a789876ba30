/*
 * edgec_depthwise_conv_s8 -- int8 depthwise convolution with channel multiplier, portable C path,
 * and edgec_depthwise_conv_s8_in_place, the same layer written over its own input.
 * Golden kernel: edgec.ops.depthwise.depthwise_conv2d_s8. Arithmetic: docs/numerics.md.
 *
 * Output channel oc = ic * ch_mult + m reads input channel ic only. Loop order: output pixel,
 * input channel, multiplier, then the in-bounds taps (range computed once per output pixel, so
 * there is no per-tap bounds test). Output writes stay sequential in NHWC order.
 *
 * In place (ch_mult 1): channel c of the output overlaps only channel c of the input when the two
 * tensors start a multiple of C bytes apart, because element (p, c) of either sits at p*C + c.
 * So the kernel computes a few channels at a time (EDGEC_DEPTHWISE_IN_PLACE_CHANNELS, sharing
 * each pixel's tap ranges), for every output pixel, into scratch, and only then stores them: what
 * it overwrites are those input channels, which no later channel reads.
 *
 * int32 accumulator as in CMSIS-NN: KH*KW * 32640 + |bias| < 2^31 for any realistic layer.
 */
#include "edgec_nn.h"
#include "../support/edgec_support.h"

#include <stddef.h>

/*
 * What every output value of one layer needs, fixed for the whole call. The scalars the inner
 * loops use are copied out of params and the struct is passed by value: int8 stores may alias
 * anything, so values read through a pointer would be reloaded after every output byte.
 */
typedef struct {
    const edgec_conv_params *params;
    const edgec_per_channel_quant *quant;
    const int8_t *filter;
    const int32_t *bias;
    int32_t input_offset;
    int32_t dilation_h;
    int32_t dilation_w;
    int32_t in_h;
    int32_t in_w;
    int32_t in_c;
    int32_t k_h;
    int32_t k_w;
    int32_t out_c;
    int32_t in_row_len;     /* W * C_in */
    int32_t filter_row_len; /* KW * C_out: the filter is [KH][KW][C_out] */
    edgec_output_stage stage;
} depthwise_layer;

/* This kernel's own constraints: a general window and a [KH][KW][C_in * ch_mult] filter. */
static int depthwise_layout_valid(const edgec_conv_params *params, const edgec_dims *input_dims,
                                  const edgec_dims *filter_dims, const edgec_dims *output_dims)
{
    return edgec_conv_window_valid(params, filter_dims) && params->ch_mult >= 1 &&
           filter_dims->n == 1 && filter_dims->c == input_dims->c * params->ch_mult &&
           output_dims->c == filter_dims->c;
}

static depthwise_layer depthwise_layer_make(const edgec_conv_params *params,
                                            const edgec_per_channel_quant *quant,
                                            const edgec_dims *input_dims,
                                            const edgec_dims *filter_dims, const int8_t *filter,
                                            const int32_t *bias, const edgec_dims *output_dims)
{
    depthwise_layer layer;
    layer.params = params;
    layer.quant = quant;
    layer.filter = filter;
    layer.bias = bias;
    layer.input_offset = params->input_offset;
    layer.dilation_h = params->dilation_h;
    layer.dilation_w = params->dilation_w;
    layer.in_h = input_dims->h;
    layer.in_w = input_dims->w;
    layer.in_c = input_dims->c;
    layer.k_h = filter_dims->h;
    layer.k_w = filter_dims->w;
    layer.out_c = output_dims->c;
    layer.in_row_len = input_dims->w * input_dims->c;
    layer.filter_row_len = filter_dims->w * output_dims->c;
    layer.stage = edgec_output_stage_make(params->output_offset, params->act_min, params->act_max);
    return layer;
}

/*
 * Output channel oc (reading input channel ic) at the output pixel whose in-bounds taps are
 * ty x tx, from one batch's input. Pointers are formed for in-bounds taps only.
 */
static int8_t depthwise_value(const depthwise_layer layer, const int8_t *in_batch,
                              edgec_tap_range ty, edgec_tap_range tx, int32_t ic, int32_t oc)
{
    int32_t acc = layer.bias != NULL ? layer.bias[oc] : 0;
    for (int32_t ky = ty.first; ky < ty.last; ky++) {
        const int32_t iy = ty.base + ky * layer.dilation_h;
        const int8_t *in_y = in_batch + iy * layer.in_row_len + ic;
        const int8_t *w_y = layer.filter + ky * layer.filter_row_len + oc;
        for (int32_t kx = tx.first; kx < tx.last; kx++) {
            const int32_t ix = tx.base + kx * layer.dilation_w;
            acc += ((int32_t)in_y[ix * layer.in_c] + layer.input_offset) *
                   (int32_t)w_y[kx * layer.out_c];
        }
    }
    return edgec_requantize_s8(acc, layer.quant->multiplier[oc], layer.quant->shift[oc],
                               layer.stage);
}

static edgec_tap_range row_taps(const depthwise_layer layer, int32_t oy)
{
    const edgec_conv_params *p = layer.params;
    return edgec_conv_taps(oy, p->stride_h, p->pad_top, p->dilation_h, layer.k_h, layer.in_h);
}

static edgec_tap_range column_taps(const depthwise_layer layer, int32_t ox)
{
    const edgec_conv_params *p = layer.params;
    return edgec_conv_taps(ox, p->stride_w, p->pad_left, p->dilation_w, layer.k_w, layer.in_w);
}

edgec_status edgec_depthwise_conv_s8(const edgec_conv_params *params,
                                     const edgec_per_channel_quant *quant,
                                     const edgec_dims *input_dims, const int8_t *input,
                                     const edgec_dims *filter_dims, const int8_t *filter,
                                     const int32_t *bias, const edgec_dims *output_dims,
                                     int8_t *output, int8_t *scratch)
{
    (void)scratch; /* the portable path needs none */
    if (!edgec_conv_args_valid(params, quant, input_dims, input, filter_dims, filter, output_dims,
                               output) ||
        !depthwise_layout_valid(params, input_dims, filter_dims, output_dims)) {
        return EDGEC_ARG_ERROR;
    }
    const depthwise_layer layer =
        depthwise_layer_make(params, quant, input_dims, filter_dims, filter, bias, output_dims);
    int8_t *out = output;

    for (int32_t b = 0; b < output_dims->n; b++) {
        const int8_t *in_batch = input + b * layer.in_h * layer.in_w * layer.in_c;
        for (int32_t oy = 0; oy < output_dims->h; oy++) {
            const edgec_tap_range ty = row_taps(layer, oy);
            for (int32_t ox = 0; ox < output_dims->w; ox++) {
                const edgec_tap_range tx = column_taps(layer, ox);
                for (int32_t ic = 0; ic < layer.in_c; ic++) {
                    for (int32_t m = 0; m < params->ch_mult; m++) {
                        const int32_t oc = ic * params->ch_mult + m;
                        *out++ = depthwise_value(layer, in_batch, ty, tx, ic, oc);
                    }
                }
            }
        }
    }
    return EDGEC_OK;
}

/*
 * Channels first .. first + count - 1 of every output pixel (all batches), pixel by pixel in NHWC
 * order, into `planes` ([pixels][count]).
 */
static void depthwise_channels(const depthwise_layer layer, const edgec_dims *output_dims,
                               const int8_t *input, int32_t first, int32_t count, int8_t *planes)
{
    for (int32_t b = 0; b < output_dims->n; b++) {
        const int8_t *in_batch = input + b * layer.in_h * layer.in_w * layer.in_c;
        for (int32_t oy = 0; oy < output_dims->h; oy++) {
            const edgec_tap_range ty = row_taps(layer, oy);
            for (int32_t ox = 0; ox < output_dims->w; ox++) {
                const edgec_tap_range tx = column_taps(layer, ox);
                for (int32_t c = first; c < first + count; c++) {
                    *planes++ = depthwise_value(layer, in_batch, ty, tx, c, c);
                }
            }
        }
    }
}

edgec_status edgec_depthwise_conv_s8_in_place(const edgec_conv_params *params,
                                              const edgec_per_channel_quant *quant,
                                              const edgec_dims *input_dims, const int8_t *input,
                                              const edgec_dims *filter_dims, const int8_t *filter,
                                              const int32_t *bias, const edgec_dims *output_dims,
                                              int8_t *output, int8_t *scratch)
{
    if (!edgec_conv_args_valid(params, quant, input_dims, input, filter_dims, filter, output_dims,
                               output) ||
        !depthwise_layout_valid(params, input_dims, filter_dims, output_dims) ||
        params->ch_mult != 1 || scratch == NULL) {
        return EDGEC_ARG_ERROR;
    }
    const depthwise_layer layer =
        depthwise_layer_make(params, quant, input_dims, filter_dims, filter, bias, output_dims);
    const int32_t pixels = output_dims->n * output_dims->h * output_dims->w;

    for (int32_t first = 0; first < layer.out_c; first += EDGEC_DEPTHWISE_IN_PLACE_CHANNELS) {
        const int32_t count = EDGEC_MIN(EDGEC_DEPTHWISE_IN_PLACE_CHANNELS, layer.out_c - first);
        /* Every read of these input channels happens here, before any of their bytes is stored. */
        depthwise_channels(layer, output_dims, input, first, count, scratch);
        for (int32_t p = 0; p < pixels; p++) {
            for (int32_t k = 0; k < count; k++) {
                output[p * layer.out_c + first + k] = scratch[p * count + k];
            }
        }
    }
    return EDGEC_OK;
}
