/*
 * edgec_depthwise_conv_s8 -- int8 depthwise convolution with channel multiplier, portable C path,
 * and edgec_depthwise_conv_s8_in_place, the same layer written over its own input.
 * Golden kernel: edgec.ops.depthwise.depthwise_conv2d_s8. Arithmetic: docs/numerics.md.
 *
 * Output channel oc = ic * ch_mult + m reads input channel ic only. With ch_mult > 1 the loop
 * order is output pixel, input channel, multiplier, then the in-bounds taps (range computed once
 * per output pixel, so there is no per-tap bounds test).
 *
 * With ch_mult 1 (the usual layer) both kernels compute a few channels at a time
 * (EDGEC_DEPTHWISE_IN_PLACE_CHANNELS, sharing each pixel's tap ranges) for every output pixel.
 * In place, channel c of the output overlaps only channel c of the input when the two tensors
 * start a multiple of C bytes apart, because element (p, c) of either sits at p*C + c; so each
 * group goes into scratch first and only then into the output: what it overwrites are those
 * input channels, which no later channel reads. A full group of four
 * (depthwise_four_channels) keeps its accumulators in registers and runs the interior of a 3x3
 * window without tap ranges. Other groups take the general loop. (On cores with the DSP
 * extension or Helium edgec runs ch_mult-1 layers on edgec_depthwise_conv_s8_packed instead.)
 *
 * 32-bit accumulators as in CMSIS-NN, summed in uint32_t: a sum past int32 (possible only when
 * |bias| + KH*KW * 32640 >= 2^31, which edgec refuses at compile time) wraps modulo 2^32 like the
 * golden kernel instead of being undefined behaviour.
 */
#include "edgec_nn.h"
#include "../support/edgec_support.h"

#include <stddef.h>
#include <string.h>

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
    return edgec_conv_window_valid(params, input_dims, filter_dims, output_dims) && params->ch_mult >= 1 &&
           filter_dims->n == 1 && filter_dims->c == input_dims->c * params->ch_mult && output_dims->c == filter_dims->c;
}

static depthwise_layer depthwise_layer_make(const edgec_conv_params *params, const edgec_per_channel_quant *quant,
                                            const edgec_dims *input_dims, const edgec_dims *filter_dims,
                                            const int8_t *filter, const int32_t *bias, const edgec_dims *output_dims)
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
static int8_t depthwise_value(const depthwise_layer *layer, const int8_t *in_batch, edgec_tap_range ty,
                              edgec_tap_range tx, int32_t ic, int32_t oc)
{
    uint32_t acc = layer->bias != NULL ? (uint32_t)layer->bias[oc] : 0u;
    for (int32_t ky = ty.first; ky < ty.last; ky++) {
        const int32_t iy = ty.base + ky * layer->dilation_h;
        const int8_t *in_y = in_batch + iy * layer->in_row_len + ic;
        const int8_t *w_y = layer->filter + ky * layer->filter_row_len + oc;
        for (int32_t kx = tx.first; kx < tx.last; kx++) {
            const int32_t ix = tx.base + kx * layer->dilation_w;
            acc +=
                (uint32_t)(((int32_t)in_y[ix * layer->in_c] + layer->input_offset) * (int32_t)w_y[kx * layer->out_c]);
        }
    }
    return edgec_requantize_s8((int32_t)acc, layer->quant->multiplier[oc], layer->quant->shift[oc], layer->stage);
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

/* A 3x3 filter: the four-channel groups run their rows' inside columns unrolled. */
static int is_3x3(const depthwise_layer *layer)
{
    return layer->k_h == 3 && layer->k_w == 3;
}

/* Filter tap (ky, kx) of channel `first` (ch_mult 1: the filter is [KH][KW][C]). */
static const int8_t *filter_tap(const depthwise_layer *layer, int32_t ky, int32_t kx, int32_t first)
{
    return layer->filter + ky * layer->filter_row_len + kx * layer->in_c + first;
}

static void depthwise_groups(const depthwise_layer *layer, const edgec_dims *output_dims, const int8_t *input,
                             int8_t *output, int8_t *staging);

static edgec_status depthwise_conv(const edgec_conv_params *params, const edgec_per_channel_quant *quant,
                                   const edgec_dims *input_dims, const int8_t *input, const edgec_dims *filter_dims,
                                   const int8_t *filter, const int32_t *bias, const edgec_dims *output_dims,
                                   int8_t *output, int8_t *scratch)
{
    (void)scratch; /* the portable path needs none */
    if (!edgec_conv_args_valid(params, quant, input_dims, input, filter_dims, filter, output_dims, output) ||
        !depthwise_layout_valid(params, input_dims, filter_dims, output_dims)) {
        return EDGEC_ARG_ERROR;
    }
    const depthwise_layer layer =
        depthwise_layer_make(params, quant, input_dims, filter_dims, filter, bias, output_dims);
    if (params->ch_mult == 1) {
        depthwise_groups(&layer, output_dims, input, output, NULL);
        return EDGEC_OK;
    }
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
                        *out++ = depthwise_value(&layer, in_batch, ty, tx, ic, oc);
                    }
                }
            }
        }
    }
    return EDGEC_OK;
}

/*
 * Channels first .. first + count - 1 of every output pixel (all batches), pixel by pixel in NHWC
 * order, into `out`, whose pixels are `pixel_step` bytes apart: count for the in-place kernel's
 * scratch planes ([pixels][count]), C for the output itself (out = output + first).
 */
static void depthwise_channels(const depthwise_layer *layer, const edgec_dims *output_dims, const int8_t *input,
                               int32_t first, int32_t count, int8_t *out, int32_t pixel_step)
{
    for (int32_t b = 0; b < output_dims->n; b++) {
        const int8_t *in_batch = input + b * layer->in_h * layer->in_w * layer->in_c;
        for (int32_t oy = 0; oy < output_dims->h; oy++) {
            const edgec_tap_range ty = row_taps(*layer, oy);
            for (int32_t ox = 0; ox < output_dims->w; ox++) {
                const edgec_tap_range tx = column_taps(*layer, ox);
                for (int32_t c = 0; c < count; c++) {
                    out[c] = depthwise_value(layer, in_batch, ty, tx, first + c, first + c);
                }
                out += pixel_step;
            }
        }
    }
}

/* ---- Groups of four channels ---------------------------------------------------------------
 * A four_group holds what one group's pixels need; four_pixel computes one pixel from its
 * in-bounds taps (any window), and four_inside_run a run of pixels whose 3x3 window lies wholly
 * inside the input (no tap ranges); depthwise_four_channels walks the pixels.
 */
typedef struct {
    const depthwise_layer *layer;
    int32_t first;     /* the group's first channel */
    int32_t in_step_x; /* input bytes between horizontally adjacent taps */
    int32_t in_step_y; /* ... and vertically adjacent ones */
    uint32_t bias[4];
} four_group;

/* One tap of four adjacent channels: acc_k += (in[k] + offset) * w[k], modulo 2^32. */
static inline void tap_four(const int8_t *in, const int8_t *w, int32_t offset, uint32_t *a0, uint32_t *a1, uint32_t *a2,
                            uint32_t *a3)
{
    *a0 += (uint32_t)(((int32_t)in[0] + offset) * (int32_t)w[0]);
    *a1 += (uint32_t)(((int32_t)in[1] + offset) * (int32_t)w[1]);
    *a2 += (uint32_t)(((int32_t)in[2] + offset) * (int32_t)w[2]);
    *a3 += (uint32_t)(((int32_t)in[3] + offset) * (int32_t)w[3]);
}

static void four_group_make(four_group *g)
{
    for (int32_t k = 0; k < 4; k++) {
        g->bias[k] = g->layer->bias != NULL ? (uint32_t)g->layer->bias[g->first + k] : 0u;
    }
}

static inline void store_four(const four_group *g, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, int8_t *out)
{
    const int32_t *mult = g->layer->quant->multiplier + g->first;
    const int32_t *shift = g->layer->quant->shift + g->first;
    out[0] = edgec_requantize_s8((int32_t)a0, mult[0], shift[0], g->layer->stage);
    out[1] = edgec_requantize_s8((int32_t)a1, mult[1], shift[1], g->layer->stage);
    out[2] = edgec_requantize_s8((int32_t)a2, mult[2], shift[2], g->layer->stage);
    out[3] = edgec_requantize_s8((int32_t)a3, mult[3], shift[3], g->layer->stage);
}

/* One pixel's taps_y x taps_x taps from `in` and `w` (its first in-bounds tap), then its outputs. */
static inline void four_taps_store(const four_group *g, const int8_t *in, const int8_t *w, int32_t taps_y,
                                   int32_t taps_x, int8_t *out)
{
    const int32_t offset = g->layer->input_offset;
    uint32_t a0 = g->bias[0], a1 = g->bias[1], a2 = g->bias[2], a3 = g->bias[3];
    for (int32_t ky = 0; ky < taps_y; ky++) {
        int32_t i = 0;
        int32_t j = 0;
        for (int32_t kx = 0; kx < taps_x; kx++) {
            tap_four(in + i, w + j, offset, &a0, &a1, &a2, &a3);
            i += g->in_step_x;
            j += g->layer->in_c;
        }
        if (ky + 1 < taps_y) {
            in += g->in_step_y;
            w += g->layer->filter_row_len;
        }
    }
    store_four(g, a0, a1, a2, a3, out);
}

static EDGEC_NOINLINE void four_pixel(const four_group *g, const int8_t *in, const int8_t *w, int32_t taps_y,
                                      int32_t taps_x, int8_t *out)
{
    four_taps_store(g, in, w, taps_y, taps_x, out);
}

/* The general loop, inlined here: a call per pixel would cost more than its taps save. */
static EDGEC_NOINLINE void four_inside_run(const four_group *g, const int8_t *in, int32_t count, int32_t in_step,
                                           int8_t *out, int32_t out_step)
{
    const int8_t *w = filter_tap(g->layer, 0, 0, g->first);
    for (int32_t p = 0; p < count; p++, in += in_step, out += out_step) {
        four_taps_store(g, in, w, 3, 3, out);
    }
}

/* The output columns [*lo, *hi) whose 3x3 window lies wholly inside the input's width. */
static void inside_columns(const depthwise_layer *layer, int32_t out_w, int32_t *lo, int32_t *hi)
{
    *lo = 0;
    while (*lo < out_w && column_taps(*layer, *lo).first != 0) {
        ++*lo;
    }
    *hi = *lo;
    while (*hi < out_w && column_taps(*layer, *hi).first == 0 && column_taps(*layer, *hi).last == 3) {
        ++*hi;
    }
}

/*
 * depthwise_channels for exactly four channels, the usual group: each output row's inside columns
 * (a 3x3 window wholly inside the input) go to four_inside_run in one call, every other pixel to
 * four_pixel with its in-bounds taps. Indices are only formed for in-bounds taps (no pointer is
 * stepped past the buffer).
 */
static void depthwise_four_channels(const depthwise_layer *layer, const edgec_dims *output_dims, const int8_t *input,
                                    int32_t first, int8_t *out, int32_t pixel_step)
{
    four_group g;
    g.layer = layer;
    g.first = first;
    g.in_step_x = layer->dilation_w * layer->in_c;
    g.in_step_y = layer->dilation_h * layer->in_row_len;
    four_group_make(&g);
    const int inside_runs = is_3x3(layer);
    int32_t lo = 0;
    int32_t hi = 0;
    if (inside_runs) {
        inside_columns(layer, output_dims->w, &lo, &hi);
    }
    const int32_t in_step = layer->params->stride_w * layer->in_c;

    for (int32_t b = 0; b < output_dims->n; b++) {
        const int8_t *in_batch = input + b * layer->in_h * layer->in_w * layer->in_c + first;
        for (int32_t oy = 0; oy < output_dims->h; oy++) {
            const edgec_tap_range ty = row_taps(*layer, oy);
            const int inside_row = inside_runs && ty.first == 0 && ty.last == 3;
            for (int32_t ox = 0; ox < output_dims->w; ox++) {
                if (inside_row && ox == lo && lo < hi) {
                    const int8_t *in =
                        in_batch + ty.base * layer->in_row_len + column_taps(*layer, lo).base * layer->in_c;
                    four_inside_run(&g, in, hi - lo, in_step, out, pixel_step);
                    out += (hi - lo) * pixel_step;
                    ox = hi - 1;
                    continue;
                }
                const edgec_tap_range tx = column_taps(*layer, ox);
                if (ty.first < ty.last && tx.first < tx.last) {
                    /* First in-bounds tap of the window, in the input and in the filter. */
                    const int8_t *in = in_batch + (ty.base + ty.first * layer->dilation_h) * layer->in_row_len +
                                       (tx.base + tx.first * layer->dilation_w) * layer->in_c;
                    four_pixel(&g, in, filter_tap(layer, ty.first, tx.first, first), ty.last - ty.first,
                               tx.last - tx.first, out);
                } else {
                    four_pixel(&g, NULL, NULL, 0, 0, out);
                }
                out += pixel_step;
            }
        }
    }
}

/*
 * A ch_mult 1 layer, EDGEC_DEPTHWISE_IN_PLACE_CHANNELS channels at a time (groups of four take
 * depthwise_four_channels). Without `staging` each group goes straight into the output; with it
 * (in place) into staging first, then into the output: every read of a group's input channels
 * happens before any of their bytes is stored.
 */
static void depthwise_groups(const depthwise_layer *layer, const edgec_dims *output_dims, const int8_t *input,
                             int8_t *output, int8_t *staging)
{
    const int32_t pixels = output_dims->n * output_dims->h * output_dims->w;

    for (int32_t first = 0; first < layer->out_c; first += EDGEC_DEPTHWISE_IN_PLACE_CHANNELS) {
        const int32_t count = EDGEC_MIN(EDGEC_DEPTHWISE_IN_PLACE_CHANNELS, layer->out_c - first);
        int8_t *const out = staging != NULL ? staging : output + first;
        const int32_t pixel_step = staging != NULL ? count : layer->out_c;
        if (count == 4) {
            depthwise_four_channels(layer, output_dims, input, first, out, pixel_step);
        } else {
            depthwise_channels(layer, output_dims, input, first, count, out, pixel_step);
        }
        if (staging != NULL && count == 4) {
            for (int32_t p = 0; p < pixels; p++) {
                /* A fixed-size memcpy: one (unaligned-capable) word load and store. */
                memcpy(output + p * layer->out_c + first, staging + 4 * p, 4);
            }
        } else if (staging != NULL) {
            for (int32_t p = 0; p < pixels; p++) {
                memcpy(output + p * layer->out_c + first, staging + p * count, (size_t)count);
            }
        }
    }
}

static edgec_status depthwise_in_place(const edgec_conv_params *params, const edgec_per_channel_quant *quant,
                                       const edgec_dims *input_dims, const int8_t *input, const edgec_dims *filter_dims,
                                       const int8_t *filter, const int32_t *bias, const edgec_dims *output_dims,
                                       int8_t *output, int8_t *scratch)
{
    if (!edgec_conv_args_valid(params, quant, input_dims, input, filter_dims, filter, output_dims, output) ||
        !depthwise_layout_valid(params, input_dims, filter_dims, output_dims) || params->ch_mult != 1 ||
        scratch == NULL) {
        return EDGEC_ARG_ERROR;
    }
    const depthwise_layer layer =
        depthwise_layer_make(params, quant, input_dims, filter_dims, filter, bias, output_dims);
    depthwise_groups(&layer, output_dims, input, output, scratch);
    return EDGEC_OK;
}

edgec_status edgec_depthwise_conv_s8(const edgec_depthwise_conv_desc *desc, const int8_t *input, int8_t *output)
{
    if (desc == NULL) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_conv_layer l = edgec_depthwise_layer_of(desc);
    return depthwise_conv(&l.params, &l.quant, &l.input_dims, input, &l.filter_dims, desc->filter, desc->bias,
                          &l.output_dims, output, NULL);
}

edgec_status edgec_depthwise_conv_s8_in_place(const edgec_depthwise_conv_desc *desc, const int8_t *input,
                                              int8_t *output, int8_t *scratch)
{
    if (desc == NULL) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_conv_layer l = edgec_depthwise_layer_of(desc);
    return depthwise_in_place(&l.params, &l.quant, &l.input_dims, input, &l.filter_dims, desc->filter, desc->bias,
                              &l.output_dims, output, scratch);
}
