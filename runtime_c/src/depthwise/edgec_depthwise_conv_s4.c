/*
 * edgec_depthwise_conv_s4.c -- depthwise convolution (NHWC, channel multiplier) with int4 weights
 * (packed two per byte, low nibble first) and int8 activations: CMSIS-NN
 * arm_depthwise_conv_s4's packing and arithmetic (Source/ConvolutionFunctions/
 * arm_depthwise_conv_s4.c) with per-channel requantization; golden:
 * edgec.ops.int4.depthwise_conv_s4. The DSP path (edgec_depthwise_conv_s4_dsp) runs channel
 * multiplier 1 with a channel count divisible by 4, four channels at a time; the Helium one
 * (edgec_depthwise_conv_s4_mve) with an even channel count, eight at a time.
 */
#include <string.h>

#include "../support/edgec_s4.h"

static int depthwise_conv_s4_valid(const edgec_depthwise_conv_s4_desc *d, const int8_t *input, const int8_t *output)
{
    if (!d || !input || !output || !d->filter || !d->multiplier || !d->shift) {
        return 0;
    }
    if (d->batches < 1 || d->input_h < 1 || d->input_w < 1 || d->input_c < 1 || d->output_h < 1 || d->output_w < 1 ||
        d->ch_mult < 1 || d->kernel_h < 1 || d->kernel_w < 1 || d->stride_h < 1 || d->stride_w < 1 ||
        d->dilation_h < 1 || d->dilation_w < 1 || d->pad_top < 0 || d->pad_left < 0) {
        return 0;
    }
    const int64_t output_c = (int64_t)d->input_c * d->ch_mult;
    if ((int64_t)d->batches * d->input_h * d->input_w * d->input_c > INT32_MAX ||
        (int64_t)d->batches * d->output_h * d->output_w * output_c > INT32_MAX ||
        (int64_t)d->kernel_h * d->kernel_w * output_c > INT32_MAX) {
        return 0;
    }
    return edgec_conv_axis_valid(d->input_h, d->output_h, d->kernel_h, d->stride_h, d->pad_top, d->dilation_h) &&
           edgec_conv_axis_valid(d->input_w, d->output_w, d->kernel_w, d->stride_w, d->pad_left, d->dilation_w) &&
           edgec_s4_output_valid(d->input_offset, d->output_offset, d->act_min, d->act_max, d->shift,
                                 (int32_t)output_c);
}

edgec_status edgec_depthwise_conv_s4(const edgec_depthwise_conv_s4_desc *desc, const int8_t *input, int8_t *output)
{
    if (!depthwise_conv_s4_valid(desc, input, output)) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_depthwise_conv_s4_desc d = *desc;
    const edgec_output_stage stage = edgec_output_stage_make(d.output_offset, d.act_min, d.act_max);
    const int32_t output_c = d.input_c * d.ch_mult;
    for (int32_t n = 0; n < d.batches; n++) {
        for (int32_t oy = 0; oy < d.output_h; oy++) {
            const edgec_tap_range ty = edgec_conv_taps(oy, d.stride_h, d.pad_top, d.dilation_h, d.kernel_h, d.input_h);
            for (int32_t ox = 0; ox < d.output_w; ox++) {
                const edgec_tap_range tx =
                    edgec_conv_taps(ox, d.stride_w, d.pad_left, d.dilation_w, d.kernel_w, d.input_w);
                int8_t *out = output + ((n * d.output_h + oy) * d.output_w + ox) * output_c;
                for (int32_t o = 0; o < output_c; o++) {
                    const int32_t c = o / d.ch_mult;
                    uint32_t acc = d.bias ? (uint32_t)d.bias[o] : 0u;
                    for (int32_t ky = ty.first; ky < ty.last; ky++) {
                        const int32_t iy = ty.base + ky * d.dilation_h;
                        for (int32_t kx = tx.first; kx < tx.last; kx++) {
                            const int32_t ix = tx.base + kx * d.dilation_w;
                            const int32_t x = input[((n * d.input_h + iy) * d.input_w + ix) * d.input_c + c];
                            const int32_t w = edgec_s4_at(d.filter, (ky * d.kernel_w + kx) * output_c + o);
                            acc += (uint32_t)(w * (x + d.input_offset));
                        }
                    }
                    out[o] = edgec_requantize_s8((int32_t)acc, d.multiplier[o], d.shift[o], stage);
                }
            }
        }
    }
    return EDGEC_OK;
}

#if defined(__ARM_FEATURE_DSP)
/* acc[0..3] += 4096 * w * (x + offset) for four channels of one tap: x4 their inputs, w4 their
 * packed weights (a halfword, four nibbles). SXTAB16 widens and offsets the inputs in pairs
 * (x0, x2), (x1, x3); each nibble shifted to bits 12..15 of a bottom halfword is 4096 * w, which
 * SMLABB / SMLABT multiply by the pair's bottom / top input. */
static inline void depthwise_s4_dsp_tap(uint32_t x4, uint32_t w4, uint32_t offsets, int32_t *a0, int32_t *a1,
                                        int32_t *a2, int32_t *a3)
{
    int32_t x02, x13;
    __asm__("sxtab16 %0, %2, %3\n\tsxtab16 %1, %2, %3, ror #8" : "=&r"(x02), "=&r"(x13) : "r"(offsets), "r"(x4));
    *a0 = __smlabb((int32_t)(w4 << 12), x02, *a0);
    *a1 = __smlabb((int32_t)((w4 << 8) & 0xF000u), x13, *a1);
    *a2 = __smlabt((int32_t)((w4 << 4) & 0xF000u), x02, *a2);
    *a3 = __smlabt((int32_t)(w4 & 0xF000u), x13, *a3);
}

/* out[c + i] for the four sums (4096 times the dot products): bias, requantization, output stage. */
static inline void depthwise_s4_dsp_output(const edgec_depthwise_conv_s4_desc *d, const int32_t acc[4], int32_t c,
                                           int short_requant, int32_t round_base, edgec_output_stage stage, int8_t *out)
{
    for (int32_t i = 0; i < 4; i++) {
        const uint32_t sum = (d->bias ? (uint32_t)d->bias[c + i] : 0u) + (uint32_t)(acc[i] >> 12);
        if (short_requant) {
            const int32_t v =
                __ssat(edgec_s4_requantize_short((int32_t)sum, d->multiplier[c + i], d->shift[c + i], round_base), 8);
            out[c + i] = (int8_t)EDGEC_MIN(EDGEC_MAX(v, d->act_min), d->act_max);
        } else {
            out[c + i] = edgec_requantize_s8((int32_t)sum, d->multiplier[c + i], d->shift[c + i], stage);
        }
    }
}

/*
 * The DSP extension: channel multiplier 1, input_c divisible by 4, at most 16 taps (else
 * EDGEC_ARG_ERROR). Per output pixel, four channels at a time: per tap in the input, a word of
 * inputs and a halfword of packed weights, two SXTAB16, four shifts or masks and four
 * SMLABB/SMLABT (sums 4096 times the dot products, exact in int32 within 16 taps); then the short
 * requantization (edgec_s4_requantize_short) when every channel admits it.
 */
edgec_status edgec_depthwise_conv_s4_dsp(const edgec_depthwise_conv_s4_desc *desc, const int8_t *input, int8_t *output)
{
    if (!depthwise_conv_s4_valid(desc, input, output) || desc->ch_mult != 1 || desc->input_c % 4 != 0 ||
        desc->kernel_h * desc->kernel_w > 16) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_depthwise_conv_s4_desc d = *desc;
    const edgec_output_stage stage = edgec_output_stage_make(d.output_offset, d.act_min, d.act_max);
    const int short_requant = edgec_s4_requant_short(d.multiplier, d.shift, d.input_c);
    const int32_t round_base = edgec_dsp_round_base(d.output_offset);
    const uint32_t offsets = edgec_s4_dsp_offsets(d.input_offset);
    const int32_t channels = d.input_c;
    int8_t *out = output;
    for (int32_t n = 0; n < d.batches; n++) {
        const int8_t *image = input + n * d.input_h * d.input_w * channels;
        for (int32_t oy = 0; oy < d.output_h; oy++) {
            const edgec_tap_range ty = edgec_conv_taps(oy, d.stride_h, d.pad_top, d.dilation_h, d.kernel_h, d.input_h);
            for (int32_t ox = 0; ox < d.output_w; ox++, out += channels) {
                const edgec_tap_range tx =
                    edgec_conv_taps(ox, d.stride_w, d.pad_left, d.dilation_w, d.kernel_w, d.input_w);
                for (int32_t c = 0; c < channels; c += 4) {
                    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
                    for (int32_t ky = ty.first; ky < ty.last; ky++) {
                        const int8_t *x = image + (ty.base + ky * d.dilation_h) * d.input_w * channels + c +
                                          (tx.base + tx.first * d.dilation_w) * channels;
                        const int8_t *w = d.filter + ((ky * d.kernel_w + tx.first) * channels + c) / 2;
                        for (int32_t kx = tx.first; kx < tx.last; kx++) {
                            uint32_t x4;
                            uint16_t w4;
                            memcpy(&x4, x, 4);
                            memcpy(&w4, w, 2);
                            depthwise_s4_dsp_tap(x4, w4, offsets, &a0, &a1, &a2, &a3);
                            x += d.dilation_w * channels;
                            w += channels / 2;
                        }
                    }
                    const int32_t acc[4] = { a0, a1, a2, a3 };
                    depthwise_s4_dsp_output(&d, acc, c, short_requant, round_base, stage, out);
                }
            }
        }
    }
    return EDGEC_OK;
}
#endif /* __ARM_FEATURE_DSP */

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
/* Eight channels' packed weights of one tap (c even) as int16 lanes: a gather reads each byte into
 * two lanes (sign-extended: 16 * w_odd + w_even's nibble), shifts leave w_even in the even lanes,
 * w_odd in the odd ones. */
static inline int16x8_t depthwise_s4_mve_weights(const int8_t *packed, mve_pred16_t p, int full)
{
    const uint16x8_t bytes = vshrq_n_u16(vidupq_n_u16(0, 1), 1); /* 0, 0, 1, 1, 2, 2, 3, 3 */
    const int16x8_t up = vreinterpretq_s16_u16(vcreateq_u16(0x0000000C0000000Cull, 0x0000000C0000000Cull));
    const int16x8_t down = vreinterpretq_s16_u16(vcreateq_u16(0xFFFCFFF4FFFCFFF4ull, 0xFFFCFFF4FFFCFFF4ull));
    const int16x8_t raw = full ? vldrbq_gather_offset_s16(packed, bytes) : vldrbq_gather_offset_z_s16(packed, bytes, p);
    return vshlq_s16(vshlq_s16(raw, up), down);
}

/* The int16 sums of eight channels (c..c + 7, `p` their lanes; `full`: all eight, no predication)
 * of one pixel over its taps. */
static inline int16x8_t depthwise_s4_mve_sums(const edgec_depthwise_conv_s4_desc *d, const int8_t *image,
                                              edgec_tap_range ty, edgec_tap_range tx, int32_t c, mve_pred16_t p,
                                              int full)
{
    const int32_t channels = d->input_c;
    int16x8_t acc = vdupq_n_s16(0);
    for (int32_t ky = ty.first; ky < ty.last; ky++) {
        const int8_t *x =
            image + ((ty.base + ky * d->dilation_h) * d->input_w + tx.base + tx.first * d->dilation_w) * channels + c;
        const int8_t *w = d->filter + ((ky * d->kernel_w + tx.first) * channels + c) / 2;
        for (int32_t kx = tx.first; kx < tx.last; kx++) {
            const int16x8_t xs = vaddq_n_s16(full ? vldrbq_s16(x) : vldrbq_z_s16(x, p), (int16_t)d->input_offset);
            acc = vaddq_s16(acc, vmulq_s16(depthwise_s4_mve_weights(w, p, full), xs));
            x += d->dilation_w * channels;
            w += channels / 2;
        }
    }
    return acc;
}

/*
 * Helium: channel multiplier 1, an even input_c, at most 16 taps (else EDGEC_ARG_ERROR). Per
 * output pixel, eight channels at a time: per tap in the input, a widening load of their inputs
 * plus the offset, a gather of their four packed bytes unpacked by two shifts, VMUL and VADD into
 * int16 lanes -- exact: |sum| <= 16 * 8 * 255 < 2^15 --, stored; then up to
 * DEPTHWISE_S4_MVE_CHUNK channels' sums widened back four at a time, with their bias,
 * requantization and output stage read as contiguous vectors.
 */
#define DEPTHWISE_S4_MVE_CHUNK 64
edgec_status edgec_depthwise_conv_s4_mve(const edgec_depthwise_conv_s4_desc *desc, const int8_t *input, int8_t *output)
{
    if (!depthwise_conv_s4_valid(desc, input, output) || desc->ch_mult != 1 || desc->input_c % 2 != 0 ||
        desc->kernel_h * desc->kernel_w > 16) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_depthwise_conv_s4_desc d = *desc;
    const edgec_output_stage stage = edgec_output_stage_make(d.output_offset, d.act_min, d.act_max);
    const int32_t channels = d.input_c;
    int16_t sums[DEPTHWISE_S4_MVE_CHUNK];
    int8_t *out = output;
    for (int32_t n = 0; n < d.batches; n++) {
        const int8_t *image = input + n * d.input_h * d.input_w * channels;
        for (int32_t oy = 0; oy < d.output_h; oy++) {
            const edgec_tap_range ty = edgec_conv_taps(oy, d.stride_h, d.pad_top, d.dilation_h, d.kernel_h, d.input_h);
            for (int32_t ox = 0; ox < d.output_w; ox++, out += channels) {
                const edgec_tap_range tx =
                    edgec_conv_taps(ox, d.stride_w, d.pad_left, d.dilation_w, d.kernel_w, d.input_w);
                for (int32_t chunk = 0; chunk < channels; chunk += DEPTHWISE_S4_MVE_CHUNK) {
                    const int32_t count = EDGEC_MIN(DEPTHWISE_S4_MVE_CHUNK, channels - chunk);
                    for (int32_t c = 0; c < count; c += 8) {
                        const mve_pred16_t p = vctp16q((uint32_t)(count - c));
                        const int16x8_t block = count - c >= 8
                                                    ? depthwise_s4_mve_sums(&d, image, ty, tx, chunk + c, p, 1)
                                                    : depthwise_s4_mve_sums(&d, image, ty, tx, chunk + c, p, 0);
                        vstrhq_p_s16(sums + c, block, p);
                    }
                    for (int32_t c = 0; c < count; c += 4) {
                        const int32_t at = chunk + c;
                        const mve_pred16_t p = vctp32q((uint32_t)(count - c));
                        int32x4_t acc = vldrhq_z_s32(sums + c, p);
                        if (d.bias) {
                            acc = vaddq_s32(acc, vldrwq_z_s32(d.bias + at, p));
                        }
                        acc = edgec_mve_requantize(acc, vldrwq_z_s32(d.multiplier + at, p),
                                                   vldrwq_z_s32(d.shift + at, p));
                        vstrbq_p_s32(out + at, edgec_mve_output(acc, stage), p);
                    }
                }
            }
        }
    }
    return EDGEC_OK;
}
#endif /* __ARM_FEATURE_MVE */
