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
 * (depthwise_four_channels) keeps its accumulators in registers, unrolls the interior 3x3 window
 * and, where the core has the DSP extension (M4/M7/M33/M55), does each tap's four channels with
 * one word load each of input and filter and four SMLAxy; with Helium (M55) the four channels
 * are one vector's lanes instead. Other groups take the general loop.
 *
 * int32 accumulator as in CMSIS-NN: KH*KW * 32640 + |bias| < 2^31 for any realistic layer.
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

static void depthwise_groups(const depthwise_layer layer, const edgec_dims *output_dims,
                             const int8_t *input, int8_t *output, int8_t *staging);

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
    if (params->ch_mult == 1) {
        depthwise_groups(layer, output_dims, input, output, NULL);
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
 * order, into `out`, whose pixels are `pixel_step` bytes apart: count for the in-place kernel's
 * scratch planes ([pixels][count]), C for the output itself (out = output + first).
 */
static void depthwise_channels(const depthwise_layer layer, const edgec_dims *output_dims,
                               const int8_t *input, int32_t first, int32_t count, int8_t *out,
                               int32_t pixel_step)
{
    for (int32_t b = 0; b < output_dims->n; b++) {
        const int8_t *in_batch = input + b * layer.in_h * layer.in_w * layer.in_c;
        for (int32_t oy = 0; oy < output_dims->h; oy++) {
            const edgec_tap_range ty = row_taps(layer, oy);
            for (int32_t ox = 0; ox < output_dims->w; ox++) {
                const edgec_tap_range tx = column_taps(layer, ox);
                for (int32_t c = 0; c < count; c++) {
                    out[c] = depthwise_value(layer, in_batch, ty, tx, first + c, first + c);
                }
                out += pixel_step;
            }
        }
    }
}

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
/*
 * depthwise_channels for exactly four channels, the in-place kernel's usual group, on Helium: the
 * four channels are the four int32 lanes of one vector (VLDRB.S32 widens each tap's four input
 * and four filter bytes, a VMUL and a VADD accumulate them), requantized and narrowed together.
 * Indices are only formed for in-bounds taps.
 */
static void depthwise_four_channels(const depthwise_layer layer, const edgec_dims *output_dims,
                                    const int8_t *input, int32_t first, int8_t *out,
                                    int32_t pixel_step)
{
    const int32_t c = layer.in_c; /* == out_c: ch_mult is 1 */
    const int32_t in_step_x = layer.dilation_w * c;
    const int32_t in_step_y = layer.dilation_h * layer.in_row_len;
    const int32_t offset = layer.input_offset;
    const int32x4_t multiplier = vldrwq_s32(layer.quant->multiplier + first);
    const int32x4_t shift = vldrwq_s32(layer.quant->shift + first);
    const int32x4_t bias = layer.bias != NULL ? vldrwq_s32(layer.bias + first) : vdupq_n_s32(0);

    for (int32_t b = 0; b < output_dims->n; b++) {
        const int8_t *in_batch = input + b * layer.in_h * layer.in_w * c + first;
        for (int32_t oy = 0; oy < output_dims->h; oy++) {
            const edgec_tap_range ty = row_taps(layer, oy);
            for (int32_t ox = 0; ox < output_dims->w; ox++) {
                const edgec_tap_range tx = column_taps(layer, ox);
                int32x4_t acc = bias;
                if (ty.first < ty.last && tx.first < tx.last) {
                    /* First in-bounds tap of the window, in the input and in the filter. */
                    const int8_t *in = in_batch +
                                       (ty.base + ty.first * layer.dilation_h) * layer.in_row_len +
                                       (tx.base + tx.first * layer.dilation_w) * c;
                    const int8_t *w = layer.filter + ty.first * layer.filter_row_len +
                                      tx.first * c + first;
                    const int32_t taps_x = tx.last - tx.first;
                    for (int32_t ky = ty.first; ky < ty.last; ky++) {
                        int32_t i = 0;
                        int32_t j = 0;
                        for (int32_t kx = 0; kx < taps_x; kx++) {
                            acc = vaddq_s32(acc, vmulq_s32(vaddq_n_s32(vldrbq_s32(in + i), offset),
                                                           vldrbq_s32(w + j)));
                            i += in_step_x;
                            j += c;
                        }
                        if (ky + 1 < ty.last) {
                            in += in_step_y;
                            w += layer.filter_row_len;
                        }
                    }
                }
                vstrbq_s32(out, edgec_mve_output(edgec_mve_requantize(acc, multiplier, shift),
                                                 layer.stage));
                out += pixel_step;
            }
        }
    }
}

#elif defined(__ARM_FEATURE_DSP)
/* add + bytes 1 and 3 of x sign-extended, per int16 half: SXTAB16 with ROR #8 (GCC 12's
 * arm_acle.h cannot express the rotation). */
static inline int32_t sxtab16_ror8(int32_t add, int32_t x)
{
    int32_t result;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(result) : "r"(add), "r"(x));
    return result;
}

/* The input offset in both int16 halves (bit pattern of offset + offset * 2^16), for tap_four. */
static inline int32_t tap_offset_make(int32_t input_offset)
{
    return (int32_t)(((uint32_t)input_offset & 0xFFFFu) * 0x10001u);
}

/*
 * One tap of four adjacent channels, acc_k += (in[k] + offset) * w[k]: one word each of input and
 * filter; SXTAB16 widens channels 0/2 and 1/3 with the offset added in each int16 half ([-255,
 * 255] fits), and SMLAxy multiplies one half pair into each channel.
 */
static inline void tap_four(const int8_t *in, const int8_t *w, int32_t offset_pair, int32_t *a0,
                            int32_t *a1, int32_t *a2, int32_t *a3)
{
    int32_t xs;
    int32_t ws;
    memcpy(&xs, in, sizeof xs);
    memcpy(&ws, w, sizeof ws);
    const int32_t x02 = __sxtab16(offset_pair, xs);
    const int32_t x13 = sxtab16_ror8(offset_pair, xs);
    const int32_t w02 = __sxtb16(ws);
    const int32_t w13 = edgec_sxtb16_ror8(ws);
    *a0 = __smlabb(x02, w02, *a0);
    *a2 = __smlatt(x02, w02, *a2);
    *a1 = __smlabb(x13, w13, *a1);
    *a3 = __smlatt(x13, w13, *a3);
}

/*
 * The four outputs of one pixel by the short requantization (all four channels admit it), each
 * saturated to int8, then clamped to the activation bytewise and stored as one word. Not inlined:
 * the tap loop around it needs the registers.
 */
static __attribute__((noinline)) void dsp_output_four(const int32_t sums[4],
                                                      const edgec_dsp_requant q[4], uint32_t lows,
                                                      uint32_t highs, int8_t *dst)
{
    const uint32_t packed = edgec_dsp_pack_s8x4(__ssat(edgec_dsp_requantize(sums[0], q[0]), 8),
                                                __ssat(edgec_dsp_requantize(sums[1], q[1]), 8),
                                                __ssat(edgec_dsp_requantize(sums[2], q[2]), 8),
                                                __ssat(edgec_dsp_requantize(sums[3], q[3]), 8));
    const uint32_t clamped = edgec_dsp_clamp_s8x4(packed, lows, highs);
    memcpy(dst, &clamped, sizeof clamped);
}

#else
static inline int32_t tap_offset_make(int32_t input_offset)
{
    return input_offset;
}

/* One tap of four adjacent channels: acc_k += (in[k] + offset) * w[k]. */
static inline void tap_four(const int8_t *in, const int8_t *w, int32_t offset, int32_t *a0,
                            int32_t *a1, int32_t *a2, int32_t *a3)
{
    *a0 += ((int32_t)in[0] + offset) * (int32_t)w[0];
    *a1 += ((int32_t)in[1] + offset) * (int32_t)w[1];
    *a2 += ((int32_t)in[2] + offset) * (int32_t)w[2];
    *a3 += ((int32_t)in[3] + offset) * (int32_t)w[3];
}
#endif

#if !(defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))
/*
 * depthwise_channels for exactly four channels, the in-place kernel's usual group: the four
 * accumulators stay in registers over the taps, the four requantization constants are read once
 * per layer, and taps are walked by index steps instead of recomputing each tap's address. The
 * four channels are adjacent in both input and filter, so one tap costs four neighbouring loads.
 * Indices are only formed for in-bounds taps (no pointer is stepped past the buffer).
 */
static void depthwise_four_channels(const depthwise_layer layer, const edgec_dims *output_dims,
                                    const int8_t *input, int32_t first, int8_t *out,
                                    int32_t pixel_step)
{
    const int32_t tap_offset = tap_offset_make(layer.input_offset);
    const int32_t c = layer.in_c; /* == out_c: ch_mult is 1 */
    const int32_t in_step_x = layer.dilation_w * c;
    const int32_t in_step_y = layer.dilation_h * layer.in_row_len;
    const int full_3x3 = layer.k_h == 3 && layer.k_w == 3;
    const int32_t *mult = layer.quant->multiplier + first;
    const int32_t *shift = layer.quant->shift + first;
    const int32_t m0 = mult[0], m1 = mult[1], m2 = mult[2], m3 = mult[3];
    const int32_t s0 = shift[0], s1 = shift[1], s2 = shift[2], s3 = shift[3];
#if defined(__ARM_FEATURE_DSP)
    const int short_requant = edgec_dsp_requant_short(m0, s0) && edgec_dsp_requant_short(m1, s1) &&
                              edgec_dsp_requant_short(m2, s2) && edgec_dsp_requant_short(m3, s3);
    edgec_dsp_requant q[4];
    if (short_requant) {
        for (int32_t k = 0; k < 4; k++) {
            q[k] = edgec_dsp_requant_make(mult[k], shift[k], layer.stage.offset);
        }
    }
    const uint32_t lows = edgec_dsp_bytes(layer.stage.lo + layer.stage.offset);
    const uint32_t highs = edgec_dsp_bytes(layer.stage.hi + layer.stage.offset);
#endif
    const int32_t b0 = layer.bias != NULL ? layer.bias[first] : 0;
    const int32_t b1 = layer.bias != NULL ? layer.bias[first + 1] : 0;
    const int32_t b2 = layer.bias != NULL ? layer.bias[first + 2] : 0;
    const int32_t b3 = layer.bias != NULL ? layer.bias[first + 3] : 0;

    for (int32_t b = 0; b < output_dims->n; b++) {
        const int8_t *in_batch = input + b * layer.in_h * layer.in_w * c + first;
        for (int32_t oy = 0; oy < output_dims->h; oy++) {
            const edgec_tap_range ty = row_taps(layer, oy);
            for (int32_t ox = 0; ox < output_dims->w; ox++) {
                const edgec_tap_range tx = column_taps(layer, ox);
                int32_t a0 = b0, a1 = b1, a2 = b2, a3 = b3;
                if (full_3x3 && ty.first == 0 && ty.last == 3 && tx.first == 0 && tx.last == 3) {
                    /* The common interior case, unrolled: no tap loop or index bookkeeping. */
                    const int8_t *in = in_batch + ty.base * layer.in_row_len + tx.base * c;
                    const int8_t *w = layer.filter + first;
                    for (int32_t ky = 0; ky < 3; ky++) {
                        tap_four(in, w, tap_offset, &a0, &a1, &a2, &a3);
                        tap_four(in + in_step_x, w + c, tap_offset, &a0, &a1, &a2, &a3);
                        tap_four(in + 2 * in_step_x, w + 2 * c, tap_offset, &a0, &a1, &a2, &a3);
                        if (ky < 2) {
                            in += in_step_y;
                            w += layer.filter_row_len;
                        }
                    }
                } else if (ty.first < ty.last && tx.first < tx.last) {
                    /* First in-bounds tap of the window, in the input and in the filter. */
                    const int8_t *in = in_batch +
                                       (ty.base + ty.first * layer.dilation_h) * layer.in_row_len +
                                       (tx.base + tx.first * layer.dilation_w) * c;
                    const int8_t *w = layer.filter + ty.first * layer.filter_row_len +
                                      tx.first * c + first;
                    const int32_t taps_x = tx.last - tx.first;
                    for (int32_t ky = ty.first; ky < ty.last; ky++) {
                        int32_t i = 0;
                        int32_t j = 0;
                        for (int32_t kx = 0; kx < taps_x; kx++) {
                            tap_four(in + i, w + j, tap_offset, &a0, &a1, &a2, &a3);
                            i += in_step_x;
                            j += c;
                        }
                        if (ky + 1 < ty.last) {
                            in += in_step_y;
                            w += layer.filter_row_len;
                        }
                    }
                }
#if defined(__ARM_FEATURE_DSP)
                if (short_requant) {
                    const int32_t sums[4] = {a0, a1, a2, a3};
                    dsp_output_four(sums, q, lows, highs, out);
                    out += pixel_step;
                    continue;
                }
#endif
                out[0] = edgec_requantize_s8(a0, m0, s0, layer.stage);
                out[1] = edgec_requantize_s8(a1, m1, s1, layer.stage);
                out[2] = edgec_requantize_s8(a2, m2, s2, layer.stage);
                out[3] = edgec_requantize_s8(a3, m3, s3, layer.stage);
                out += pixel_step;
            }
        }
    }
}

#endif

/*
 * A ch_mult 1 layer, EDGEC_DEPTHWISE_IN_PLACE_CHANNELS channels at a time (groups of four take
 * depthwise_four_channels). Without `staging` each group goes straight into the output; with it
 * (in place) into staging first, then into the output: every read of a group's input channels
 * happens before any of their bytes is stored.
 */
static void depthwise_groups(const depthwise_layer layer, const edgec_dims *output_dims,
                             const int8_t *input, int8_t *output, int8_t *staging)
{
    const int32_t pixels = output_dims->n * output_dims->h * output_dims->w;

    for (int32_t first = 0; first < layer.out_c; first += EDGEC_DEPTHWISE_IN_PLACE_CHANNELS) {
        const int32_t count = EDGEC_MIN(EDGEC_DEPTHWISE_IN_PLACE_CHANNELS, layer.out_c - first);
        int8_t *const out = staging != NULL ? staging : output + first;
        const int32_t pixel_step = staging != NULL ? count : layer.out_c;
        if (count == 4) {
            depthwise_four_channels(layer, output_dims, input, first, out, pixel_step);
        } else {
            depthwise_channels(layer, output_dims, input, first, count, out, pixel_step);
        }
        if (staging != NULL && count == 4) {
            for (int32_t p = 0; p < pixels; p++) {
                /* A fixed-size memcpy: one (unaligned-capable) word load and store. */
                memcpy(output + p * layer.out_c + first, staging + 4 * p, 4);
            }
        } else if (staging != NULL) {
            for (int32_t p = 0; p < pixels; p++) {
                memcpy(output + p * layer.out_c + first, staging + p * count, (size_t)count);
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
    depthwise_groups(layer, output_dims, input, output, scratch);
    return EDGEC_OK;
}
