/*
 * edgec_depthwise_conv_s8_packed -- int8 depthwise convolution (ch_mult 1) over a cache of padded
 * input rows, from a filter and bias edgec lays out at compile time; and _in_place, the same layer
 * written over its own input. Golden kernel: edgec.ops.depthwise.depthwise_conv2d_s8.
 *
 * Why a row cache: a window that overhangs the image has its own tap ranges, and handling those
 * per pixel cost more than the taps themselves -- and border pixels are nearly half of a 25x5 or
 * 6x6 layer. So the kernel takes 4 channels at a time and keeps in scratch the KH input rows one
 * output row reads, padded left and right (and rows above or below the image) with the input zero
 * point. A padded tap then adds w * zp, which the folded bias (bias - zp * the sum of the
 * channel's taps) takes away again: every pixel is the same KH x KW taps of x * w, with no offset
 * add and no bounds test, and the sums equal the golden int32 accumulator modulo 2^32.
 *
 * The cache is column-major: for each padded column, its KH rows' entries side by side, so a 3x3
 * pixel's nine taps are nine consecutive entries (one pointer, no per-row pointers to keep). With
 * dilation_h 1 padded row r lives in slot r mod KH, so moving down one output row at stride 1
 * copies one new row per group; the filter taps are kept in each of the KH slot orders (phases).
 *
 * An entry holds the group's 4 channels of one pixel: with the DSP extension (M4/M7/M33) widened
 * to int16 pairs, channels 0/2 then 1/3, so a tap is one LDRD and four SMLAxy; with Helium (M55)
 * the 4 int8, one VLDRB.S32 per tap with the lanes as channels (3x3 layers take 8 or 16 channels
 * a pass there where they can: _mve.c); else the 4 int8.
 *
 * The entry points, the argument checks and the layer record are here; a group's constants, taps
 * and rows are per ISA, in the one of edgec_depthwise_conv_s8_packed_mve.c, _dsp.c and
 * _portable.c that the build's -mcpu selects (the others compile to nothing), sharing the row
 * cache code of edgec_depthwise_conv_s8_packed.h.
 */
#include "edgec_depthwise_conv_s8_packed.h"

/* ---- Entry points --------------------------------------------------------------------------- */

static int packed_args_valid(const edgec_conv_params *params, const edgec_per_channel_quant *quant,
                             const edgec_dims *input_dims, const int8_t *input, const edgec_dims *filter_dims,
                             const int8_t *packed_filter, const int32_t *folded_bias, const edgec_dims *output_dims,
                             const int8_t *output, const int8_t *scratch)
{
    return edgec_conv_args_valid(params, quant, input_dims, input, filter_dims, packed_filter, output_dims, output) &&
           edgec_conv_window_valid(params, input_dims, filter_dims, output_dims) && params->ch_mult == 1 &&
           filter_dims->n == 1 && filter_dims->c == input_dims->c && output_dims->c == input_dims->c &&
           filter_dims->h <= EDGEC_DEPTHWISE_PACKED_MAX_K &&
           (int64_t)filter_dims->h * (int64_t)EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES *
                   EDGEC_DEPTHWISE_PACKED_CACHED_GROUPS *
                   EDGEC_DEPTHWISE_PACKED_ROW_PIXELS(output_dims->w, params->stride_w, filter_dims->w,
                                                     params->dilation_w) <=
               INT32_MAX && /* the row cache's size: the row itself fits (window check) */
           folded_bias != NULL &&
           scratch != NULL && edgec_word_aligned(packed_filter) && edgec_word_aligned(folded_bias) &&
           edgec_word_aligned(scratch);
}

static packed_layer packed_layer_make(const edgec_conv_params *params, const edgec_per_channel_quant *quant,
                                      const edgec_dims *input_dims, const int8_t *input, const edgec_dims *filter_dims,
                                      const int8_t *packed_filter, const int32_t *folded_bias,
                                      const edgec_dims *output_dims, int8_t *scratch)
{
    packed_layer layer;
    layer.quant = quant;
    layer.filter = packed_filter;
    layer.bias = folded_bias;
    layer.input = input;
    layer.in_h = input_dims->h;
    layer.in_w = input_dims->w;
    layer.c = input_dims->c;
    layer.k_h = filter_dims->h;
    layer.k_w = filter_dims->w;
    layer.out_h = output_dims->h;
    layer.out_w = output_dims->w;
    layer.stride_h = params->stride_h;
    layer.stride_w = params->stride_w;
    layer.dilation_h = params->dilation_h;
    layer.dilation_w = params->dilation_w;
    layer.pad_top = params->pad_top;
    layer.pad_left = params->pad_left;
    layer.padded_w =
        EDGEC_DEPTHWISE_PACKED_ROW_PIXELS(output_dims->w, params->stride_w, filter_dims->w, params->dilation_w);
    layer.column_bytes = filter_dims->h * (int32_t)EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES;
    layer.unrolled = filter_dims->h == 3 && filter_dims->w == 3 && params->dilation_h == 1 && params->dilation_w == 1;
    layer.pad = (int8_t)(-params->input_offset);
    layer.pad_four = (uint8_t)layer.pad * 0x01010101u;
    layer.image_start = EDGEC_MIN(layer.pad_left, layer.padded_w);
    layer.image_end = EDGEC_MIN(layer.pad_left + layer.in_w, layer.padded_w);
    layer.stage = edgec_output_stage_make(params->output_offset, params->act_min, params->act_max);
    layer.cache = scratch;
    return layer;
}

/* Every group straight into the output, or with `staged` into scratch after the cache first
 * (its input channels are read until its last row), then into the output. The layer is unpacked
 * here, in the frame the groups run under, and not in the entry points (their tail calls add no
 * stack). */
static EDGEC_NOINLINE edgec_status packed_depthwise(const edgec_depthwise_conv_desc *desc, const int8_t *input,
                                                    int8_t *output, int8_t *scratch, int staged)
{
    if (desc == NULL) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_conv_layer l = edgec_depthwise_layer_of(desc);
    const edgec_conv_params *params = &l.params;
    const edgec_per_channel_quant *quant = &l.quant;
    const edgec_dims *input_dims = &l.input_dims;
    const edgec_dims *filter_dims = &l.filter_dims;
    const edgec_dims *output_dims = &l.output_dims;
    const int8_t *packed_filter = desc->filter;
    const int32_t *folded_bias = desc->bias;
    if (!packed_args_valid(params, quant, input_dims, input, filter_dims, packed_filter, folded_bias, output_dims,
                           output, scratch)) {
        return EDGEC_ARG_ERROR;
    }
    const packed_layer layer = packed_layer_make(params, quant, input_dims, input, filter_dims, packed_filter,
                                                 folded_bias, output_dims, scratch);
    const int32_t pixels = output_dims->n * output_dims->h * output_dims->w;
    int8_t *staging = scratch + EDGEC_DEPTHWISE_PACKED_SCRATCH_BYTES(filter_dims->h, layer.padded_w);
    for (int32_t first = 0; first < layer.c; first += GROUP) {
        const int32_t count = EDGEC_MIN(GROUP, layer.c - first);
        if (!staged) {
            edgec_depthwise_packed_group_outputs(&layer, output_dims->n, first, output + first, layer.c);
            continue;
        }
        edgec_depthwise_packed_group_outputs(&layer, output_dims->n, first, staging, count);
        for (int32_t p = 0; p < pixels; p++) {
            if (count == GROUP) {
                memcpy(output + p * layer.c + first, staging + GROUP * p, GROUP); /* one word */
            } else {
                memcpy(output + p * layer.c + first, staging + p * count, (size_t)count);
            }
        }
    }
    return EDGEC_OK;
}

edgec_status edgec_depthwise_conv_s8_packed(const edgec_depthwise_conv_desc *desc, const int8_t *input, int8_t *output,
                                            int8_t *scratch)
{
    return packed_depthwise(desc, input, output, scratch, 0);
}

edgec_status edgec_depthwise_conv_s8_packed_in_place(const edgec_depthwise_conv_desc *desc, const int8_t *input,
                                                     int8_t *output, int8_t *scratch)
{
    return packed_depthwise(desc, input, output, scratch, 1);
}
