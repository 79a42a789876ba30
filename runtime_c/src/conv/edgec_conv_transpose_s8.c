/*
 * edgec_conv_transpose_s8 -- int8 transposed 2-D convolution, gathered per output pixel.
 * Golden kernel: edgec.ops.conv_transpose.conv_transpose2d_s8 (TFLite TransposeConv arithmetic).
 *
 * Along an axis, input pixel i and tap k reach output o = i * stride - pad + k * dilation. So the
 * taps that reach o are those with k * dilation == o + pad (mod stride): the output's phase
 * r = (o + pad) mod stride fixes them (phase_taps), and tap j of the phase reads input
 * i = origin - j * in_step with origin = (o + pad - first * dilation) / stride, exact. The
 * kernels walk the output phase by phase (r_h, then r_w), where every pixel uses the same filter
 * rows, laid out per phase at compile time; an output pixel is then one dot product per channel
 * over its phase's taps, those whose input pixel lies inside the image (gather_range).
 *
 * Sums are uint32 (wrapping, no undefined behaviour), as TFLite's int32 scatter buffer wraps:
 * each output element's terms are the same, only their order differs, and addition modulo 2^32
 * does not depend on the order. The _dsp/_mve paths fold the input offset into a per-phase bias
 * and read taps outside the image as the input zero point, which then adds nothing (modulo 2^32:
 * w * (zp + input_offset) = 0), exactly as edgec_conv_s8_dsp/_mve do.
 *
 * edgec_conv_transpose_s4 (int4 weights, edgec.ops.int4's packing of the portable kernel's phase
 * rows) is the portable kernel reading each weight's nibble where it lies in flash: its filter
 * needs no RAM at all. Unpacking a whole phase would cost up to C_out * K_phase bytes of scratch
 * (the whole filter at stride 1), and the walk (pixel, then channel) reads each row once per
 * pixel, so unpacking a row per pixel costs what the nibble reads cost (edgec_s4_dot: a byte, two
 * weights). edgec_conv_transpose_s4_dsp (groups 1) reads each phase row, zero-padded to whole
 * words of 8 weights, unpacked in registers by edgec_s4.h's masks against two pixels' columns.
 */
#include "edgec_nn.h"
#include "../support/edgec_s4.h"
#include "../support/edgec_support.h"

#include <string.h>

/* ---- Geometry -------------------------------------------------------------------------------- */

/* One axis's phase r: its taps first, first + step, ... (count of them, ascending), consecutive
 * ones in_step input pixels apart (step = stride / gcd, in_step = dilation / gcd). */
typedef struct {
    int32_t first;
    int32_t count;
    int32_t in_step;
    int32_t start; /* the first output of the phase: o >= 0 with (o + pad) % stride == r */
} phase_taps;

static phase_taps phase_taps_make(int32_t r, int32_t kernel, int32_t stride, int32_t dilation, int32_t pad)
{
    phase_taps t;
    int32_t step = 1;
    while ((int64_t)step * dilation % stride != 0) {
        step++;
    }
    t.in_step = (int32_t)((int64_t)step * dilation / stride);
    t.first = 0;
    t.count = 0;
    for (int32_t k = 0; k < kernel && k < step; k++) {
        if ((int64_t)k * dilation % stride == r) {
            t.first = k;
            t.count = (kernel - 1 - k) / step + 1;
            break;
        }
    }
    t.start = ((r - pad % stride) % stride + stride) % stride;
    return t;
}

/* The taps j in [first, last) of a phase whose input pixel origin - j * in_step is inside
 * [0, in_size). */
typedef struct {
    int32_t origin;
    int32_t first;
    int32_t last;
} gather_range;

static inline gather_range gather_range_make(int32_t o, const phase_taps *t, int32_t stride, int32_t dilation,
                                             int32_t pad, int32_t in_size)
{
    gather_range g;
    g.origin = (o + pad - t->first * dilation) / stride;
    g.first = g.origin >= in_size ? (g.origin - in_size) / t->in_step + 1 : 0;
    g.last = g.origin < 0 ? 0 : EDGEC_MIN(t->count, g.origin / t->in_step + 1);
    g.last = EDGEC_MAX(g.first, g.last);
    return g;
}

/* One axis: PyTorch's output size, with every uncropped position inside int32. */
static int axis_valid(int32_t in, int32_t out, int32_t kernel, int32_t stride, int32_t pad, int32_t output_padding,
                      int32_t dilation)
{
    if (in < 1 || out < 1 || kernel < 1 || stride < 1 || dilation < 1 || pad < 0 || output_padding < 0 ||
        output_padding >= EDGEC_MAX(stride, dilation)) {
        return 0;
    }
    const int64_t full = (int64_t)(in - 1) * stride + (int64_t)dilation * (kernel - 1) + output_padding + 1;
    return full <= INT32_MAX && full - 2 * (int64_t)pad == out;
}

static int desc_valid(const edgec_conv_transpose_desc *d, const int8_t *input, const int8_t *output)
{
    if (d == NULL || input == NULL || output == NULL || d->filter == NULL || d->multiplier == NULL ||
        d->shift == NULL) {
        return 0;
    }
    if (d->batches < 1 || d->input_c < 1 || d->output_c < 1 || d->groups < 1 || d->input_c % d->groups != 0 ||
        d->output_c % d->groups != 0 || d->input_offset < -INT8_MAX || d->input_offset > -INT8_MIN ||
        d->output_offset < INT8_MIN || d->output_offset > INT8_MAX || !edgec_act_range_valid(d->act_min, d->act_max) ||
        !axis_valid(d->input_h, d->output_h, d->kernel_h, d->stride_h, d->pad_h, d->output_padding_h, d->dilation_h) ||
        !axis_valid(d->input_w, d->output_w, d->kernel_w, d->stride_w, d->pad_w, d->output_padding_w, d->dilation_w)) {
        return 0;
    }
    for (int32_t c = 0; c < d->output_c; c++) {
        if (d->multiplier[c] < 0 || !edgec_shift_valid(d->shift[c])) {
            return 0;
        }
    }
    return 1;
}

/* A phase (r_h, r_w): its taps along both axes and its filter rows' length. */
typedef struct {
    phase_taps th;
    phase_taps tw;
    int32_t k; /* taps_h * taps_w * C_in/groups */
} phase;

static phase phase_make(const edgec_conv_transpose_desc *d, int32_t r_h, int32_t r_w)
{
    phase p;
    p.th = phase_taps_make(r_h, d->kernel_h, d->stride_h, d->dilation_h, d->pad_h);
    p.tw = phase_taps_make(r_w, d->kernel_w, d->stride_w, d->dilation_w, d->pad_w);
    p.k = p.th.count * p.tw.count * (d->input_c / d->groups);
    return p;
}

/* An output pixel of a phase; pixel_next walks the phase's pixels (batch, row, column). */
typedef struct {
    int32_t b;
    int32_t oy;
    int32_t ox;
} pixel;

static void pixel_next(pixel *px, const edgec_conv_transpose_desc *d, const phase *p)
{
    px->ox += d->stride_w;
    if (px->ox >= d->output_w) {
        px->ox = p->tw.start;
        px->oy += d->stride_h;
        if (px->oy >= d->output_h) {
            px->oy = p->th.start;
            px->b++;
        }
    }
}

static int32_t phase_pixels(const edgec_conv_transpose_desc *d, const phase *p)
{
    const int32_t rows = p->th.start < d->output_h ? (d->output_h - 1 - p->th.start) / d->stride_h + 1 : 0;
    const int32_t cols = p->tw.start < d->output_w ? (d->output_w - 1 - p->tw.start) / d->stride_w + 1 : 0;
    return d->batches * rows * cols;
}

static int8_t *output_pixel(const edgec_conv_transpose_desc *d, int8_t *output, pixel px)
{
    return output + ((px.b * d->output_h + px.oy) * d->output_w + px.ox) * d->output_c;
}

/* ---- Portable C ------------------------------------------------------------------------------ */

/* acc + sum_ic (x[ic] + input_offset) * w[ic] over n int8 weights. */
static inline uint32_t dot_s8(const int8_t *x, const int8_t *w, int32_t n, int32_t input_offset, uint32_t acc)
{
    for (int32_t ic = 0; ic < n; ic++) {
        acc += (uint32_t)(((int32_t)x[ic] + input_offset) * (int32_t)w[ic]);
    }
    return acc;
}

/* The portable kernel over int8 (bits 8) or packed int4 (bits 4) phase rows: the same walk, the
 * filter element of (phase, co, tap, ic) at the same flat index in either. */
static edgec_status conv_transpose_portable(const edgec_conv_transpose_desc *d, const int8_t *input, int8_t *output,
                                            int bits)
{
    if (!desc_valid(d, input, output)) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t cin_g = d->input_c / d->groups;
    const int32_t cout_g = d->output_c / d->groups;
    const int32_t in_row_len = d->input_w * d->input_c;
    const edgec_output_stage stage = edgec_output_stage_make(d->output_offset, d->act_min, d->act_max);
    int32_t phase_start = 0; /* the phase's first filter element */

    for (int32_t r_h = 0; r_h < d->stride_h; r_h++) {
        for (int32_t r_w = 0; r_w < d->stride_w; r_w++) {
            const phase p = phase_make(d, r_h, r_w);
            pixel px = { 0, p.th.start, p.tw.start };
            for (int32_t n = phase_pixels(d, &p); n > 0; n--, pixel_next(&px, d, &p)) {
                const gather_range gy =
                    gather_range_make(px.oy, &p.th, d->stride_h, d->dilation_h, d->pad_h, d->input_h);
                const gather_range gx =
                    gather_range_make(px.ox, &p.tw, d->stride_w, d->dilation_w, d->pad_w, d->input_w);
                const int8_t *in_batch = input + px.b * d->input_h * in_row_len;
                int8_t *out = output_pixel(d, output, px);
                for (int32_t co = 0; co < d->output_c; co++) {
                    const int8_t *in_group = in_batch + (co / cout_g) * cin_g;
                    const int32_t row = phase_start + co * p.k;
                    uint32_t acc = d->bias != NULL ? (uint32_t)d->bias[co] : 0u;
                    /* Pointers are formed for in-bounds taps only. */
                    for (int32_t jh = gy.first; jh < gy.last; jh++) {
                        const int8_t *in_y = in_group + (gy.origin - jh * p.th.in_step) * in_row_len;
                        for (int32_t jw = gx.first; jw < gx.last; jw++) {
                            const int8_t *in_tap = in_y + (gx.origin - jw * p.tw.in_step) * d->input_c;
                            const int32_t tap = row + (jh * p.tw.count + jw) * cin_g;
                            acc = bits == 4 ? edgec_s4_dot(d->filter, tap, in_tap, cin_g, d->input_offset, acc)
                                            : dot_s8(in_tap, d->filter + tap, cin_g, d->input_offset, acc);
                        }
                    }
                    out[co] = edgec_requantize_s8((int32_t)acc, d->multiplier[co], d->shift[co], stage);
                }
            }
            phase_start += d->output_c * p.k;
        }
    }
    return EDGEC_OK;
}

edgec_status edgec_conv_transpose_s8(const edgec_conv_transpose_desc *desc, const int8_t *input, int8_t *output)
{
    return conv_transpose_portable(desc, input, output, 8);
}

edgec_status edgec_conv_transpose_s4(const edgec_conv_transpose_desc *desc, const int8_t *input, int8_t *output)
{
    return conv_transpose_portable(desc, input, output, 4);
}

/* ==== Packed paths: Arm DSP extension and Helium ============================================= */
#if defined(__ARM_FEATURE_DSP) || (defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))

static int packed_desc_valid(const edgec_conv_transpose_desc *d, const int8_t *input, const int8_t *output,
                             const int8_t *scratch)
{
    return desc_valid(d, input, output) && d->groups == 1 && d->bias != NULL && scratch != NULL &&
           edgec_word_aligned(d->filter) && edgec_word_aligned(d->bias) && edgec_word_aligned(scratch);
}

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
/* n bytes copied / set 16 at a time, the last vector predicated: the runs are one tap's C_in
 * bytes, where a library call would cost more than the copy. */
static inline void copy_bytes(int8_t *dst, const int8_t *src, int32_t n)
{
    for (int32_t i = 0; i < n; i += 16) {
        const mve_pred16_t lanes = vctp8q((uint32_t)(n - i));
        vstrbq_p_s8(dst + i, vldrbq_z_s8(src + i, lanes), lanes);
    }
}

static inline void fill_bytes(int8_t *dst, int8_t value, int32_t n)
{
    const int8x16_t values = vdupq_n_s8(value);
    for (int32_t i = 0; i < n; i += 16) {
        vstrbq_p_s8(dst + i, values, vctp8q((uint32_t)(n - i)));
    }
}
#else
static inline void copy_bytes(int8_t *dst, const int8_t *src, int32_t n)
{
    memcpy(dst, src, (size_t)n);
}

static inline void fill_bytes(int8_t *dst, int8_t value, int32_t n)
{
    memset(dst, value, (size_t)n);
}
#endif

/*
 * Output pixel px's gathered input, K_phase int8 in the filter's (jh, jw, ic) order, into row;
 * taps outside the image read the input zero point (the folded bias expects it), and row's bytes
 * from K_phase to padded_k are zero (the filter is zero there).
 */
static void gather_row(int8_t *row, const edgec_conv_transpose_desc *d, const phase *p, const int8_t *input, pixel px,
                       int32_t padded_k)
{
    const gather_range gy = gather_range_make(px.oy, &p->th, d->stride_h, d->dilation_h, d->pad_h, d->input_h);
    const gather_range gx = gather_range_make(px.ox, &p->tw, d->stride_w, d->dilation_w, d->pad_w, d->input_w);
    const int32_t c = d->input_c;
    const int32_t run = p->tw.count * c; /* one tap row's bytes */
    const int8_t zero_point = (int8_t)-d->input_offset;
    const int8_t *in_batch = input + px.b * d->input_h * d->input_w * c;
    int8_t *dst = row;
    for (int32_t jh = 0; jh < p->th.count; jh++, dst += run) {
        if (jh < gy.first || jh >= gy.last) {
            fill_bytes(dst, zero_point, run);
            continue;
        }
        const int8_t *in_y = in_batch + (gy.origin - jh * p->th.in_step) * d->input_w * c;
        for (int32_t jw = 0; jw < p->tw.count; jw++) {
            if (jw < gx.first || jw >= gx.last) {
                fill_bytes(dst + jw * c, zero_point, c);
            } else {
                copy_bytes(dst + jw * c, in_y + (gx.origin - jw * p->tw.in_step) * c, c);
            }
        }
    }
    fill_bytes(row + p->k, 0, padded_k - p->k);
}

#endif /* packed paths */

/* ==== Arm DSP extension: 2 channels x 2 pixels per SMLAD step ================================= */
#if defined(__ARM_FEATURE_DSP)

/* A gathered row (padded_k int8, a multiple of 4) widened for SMLAD into its pixel's slot of the
 * columns: group g's taps (x0..x3) as the int16 pairs (x0, x2), (x1, x3) at cols + 16 * g, the
 * other pixel's at cols + 16 * g + 8 (the order SXTB16 widens the filter in). */
static void dsp_widen_row(int8_t *cols, const int8_t *row, int32_t padded_k)
{
    for (int32_t i = 0; i < padded_k; i += 4, cols += 16) {
        int32_t x;
        memcpy(&x, row + i, 4);
        edgec_dsp_store_widened(cols, x);
    }
}

/*
 * A channel pair at a pixel pair: s[0], s[1] channel 0 at pixels a, b; s[2], s[3] channel 1.
 * Per group of 4 taps the pair's 8 filter bytes are widened once for both pixels: 16 MACs in 3
 * LDRD, 4 SXTB16 and 8 SMLAD. SMLAD wraps modulo 2^32 like the golden int32 accumulator.
 */
static void dsp_mac_2x2(const int8_t *filter, const int8_t *cols, int32_t groups, int32_t s[4])
{
    int32_t s0 = s[0], s1 = s[1], s2 = s[2], s3 = s[3];
    for (; groups > 0; groups--) {
        int32_t w0, w1, a_even, a_odd, b_even, b_odd;
        edgec_dsp_load_2words(&filter, &w0, &w1);
        edgec_dsp_load_2words(&cols, &a_even, &a_odd);
        edgec_dsp_load_2words(&cols, &b_even, &b_odd);
        const int32_t w0_even = __sxtb16(w0);
        const int32_t w0_odd = edgec_sxtb16_ror8(w0);
        const int32_t w1_even = __sxtb16(w1);
        const int32_t w1_odd = edgec_sxtb16_ror8(w1);
        s0 = __smlad(w0_odd, a_odd, __smlad(w0_even, a_even, s0));
        s1 = __smlad(w0_odd, b_odd, __smlad(w0_even, b_even, s1));
        s2 = __smlad(w1_odd, a_odd, __smlad(w1_even, a_even, s2));
        s3 = __smlad(w1_odd, b_odd, __smlad(w1_even, b_even, s3));
    }
    s[0] = s0;
    s[1] = s1;
    s[2] = s2;
    s[3] = s3;
}

/*
 * Output gy of a widened gathered input, when C_in is a multiple of 4 (every tap's run starts on
 * a group of 4): straight from the input into pixel slot `cols` (dsp_widen_row's layout), taps
 * outside the image as the zero point's pairs. K_phase is then a multiple of 4: no tail.
 */
static void dsp_gather_columns(int8_t *cols, const edgec_conv_transpose_desc *d, const phase *p, const int8_t *input,
                               pixel px)
{
    const gather_range gy = gather_range_make(px.oy, &p->th, d->stride_h, d->dilation_h, d->pad_h, d->input_h);
    const gather_range gx = gather_range_make(px.ox, &p->tw, d->stride_w, d->dilation_w, d->pad_w, d->input_w);
    const int32_t c = d->input_c;
    const int32_t zero_pairs = (int32_t)((uint16_t)(int16_t)-d->input_offset * 0x00010001u);
    const int8_t *in_batch = input + px.b * d->input_h * d->input_w * c;
    for (int32_t jh = 0; jh < p->th.count; jh++) {
        const int inside_y = jh >= gy.first && jh < gy.last;
        const int8_t *in_y = inside_y ? in_batch + (gy.origin - jh * p->th.in_step) * d->input_w * c : input;
        for (int32_t jw = 0; jw < p->tw.count; jw++) {
            if (inside_y && jw >= gx.first && jw < gx.last) {
                const int8_t *src = in_y + (gx.origin - jw * p->tw.in_step) * c;
                for (int32_t i = 0; i < c; i += 4, cols += 16) {
                    int32_t x;
                    memcpy(&x, src + i, 4);
                    edgec_dsp_store_widened(cols, x);
                }
            } else {
                for (int32_t i = 0; i < c; i += 4, cols += 16) {
                    memcpy(cols, &zero_pairs, 4);
                    memcpy(cols + 4, &zero_pairs, 4);
                }
            }
        }
    }
}

/* One pixel's gathered input widened into its slot of the columns (see dsp_widen_row). */
static void dsp_gather(int8_t *cols, int8_t *row, const edgec_conv_transpose_desc *d, const phase *p,
                       const int8_t *input, pixel px, int32_t padded_k)
{
    if (d->input_c % 4 == 0) {
        dsp_gather_columns(cols, d, p, input, px);
        return;
    }
    gather_row(row, d, p, input, px, padded_k);
    dsp_widen_row(cols, row, padded_k);
}

/* Output y of channel c at pixels a and b from their sums: the short requantization (made once
 * for both pixels) when every channel admits it, else the general one. */
static inline void dsp_store_channel(int32_t sum_a, int32_t sum_b, const edgec_conv_transpose_desc *d, int32_t c,
                                     int short_form, int32_t round_base, edgec_output_stage stage, int8_t *out_a,
                                     int8_t *out_b)
{
    const int32_t m = d->multiplier[c];
    const int32_t shift = d->shift[c];
    if (short_form) {
        const edgec_dsp_requant q = edgec_dsp_requant_make(m, shift, round_base);
        const int32_t y_b = edgec_dsp_requantize(sum_b, q);
        const int32_t y_a = edgec_dsp_requantize(sum_a, q);
        out_b[c] = (int8_t)EDGEC_MIN(EDGEC_MAX(y_b, d->act_min), d->act_max);
        out_a[c] = (int8_t)EDGEC_MIN(EDGEC_MAX(y_a, d->act_min), d->act_max);
    } else {
        out_b[c] = edgec_requantize_s8(sum_b, m, shift, stage);
        out_a[c] = edgec_requantize_s8(sum_a, m, shift, stage);
    }
}

edgec_status edgec_conv_transpose_s8_dsp(const edgec_conv_transpose_desc *desc, const int8_t *input, int8_t *output,
                                         int8_t *scratch)
{
    if (!packed_desc_valid(desc, input, output, scratch)) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_conv_transpose_desc *d = desc;
    const int32_t out_c = d->output_c;
    const int32_t rows = (out_c + 1) / 2 * 2;
    const int short_form = edgec_dsp_requant_all_short(d->multiplier, d->shift, out_c);
    const int32_t round_base = edgec_dsp_round_base(d->output_offset);
    const edgec_output_stage stage = edgec_output_stage_make(d->output_offset, d->act_min, d->act_max);
    const int8_t *phase_filter = d->filter;
    const int32_t *phase_bias = d->bias;

    for (int32_t r_h = 0; r_h < d->stride_h; r_h++) {
        for (int32_t r_w = 0; r_w < d->stride_w; r_w++) {
            const phase p = phase_make(d, r_h, r_w);
            const int32_t padded_k = (p.k + 3) / 4 * 4;
            int8_t *row = scratch;             /* padded_k int8 */
            int8_t *cols = scratch + padded_k; /* 4 * padded_k: two pixels' int16 columns */
            pixel px = { 0, p.th.start, p.tw.start };
            for (int32_t n = phase_pixels(d, &p); n > 0; n -= 2) {
                const pixel px_a = px;
                pixel px_b = px; /* a lone last pixel is its own pixel b */
                pixel_next(&px, d, &p);
                if (n > 1) {
                    px_b = px;
                    pixel_next(&px, d, &p);
                }
                int8_t *out_a = output_pixel(d, output, px_a);
                int8_t *out_b = output_pixel(d, output, px_b);
                dsp_gather(cols, row, d, &p, input, px_a, padded_k);
                dsp_gather(cols + 8, row, d, &p, input, px_b, padded_k);
                for (int32_t c = 0; c < out_c; c += 2) {
                    int32_t s[4] = { phase_bias[c], phase_bias[c], phase_bias[c + 1], phase_bias[c + 1] };
                    dsp_mac_2x2(phase_filter + c * padded_k, cols, padded_k / 4, s);
                    dsp_store_channel(s[0], s[1], d, c, short_form, round_base, stage, out_a, out_b);
                    if (c + 1 < out_c) {
                        dsp_store_channel(s[2], s[3], d, c + 1, short_form, round_base, stage, out_a, out_b);
                    }
                }
            }
            phase_filter += rows * padded_k;
            phase_bias += rows;
        }
    }
    return EDGEC_OK;
}

/* ---- int4 weights on the DSP extension ------------------------------------------------------ */

/*
 * Channel row w (packed int4, 8 weights a word) against two pixels' widened columns: per word,
 * edgec_s4.h's unpacking (nibble k of halfword h, weight k + 4h, shifted left by 4 * (3 - k) and
 * masked with 0xF000F000: (4096 w_k, 4096 w_{k+4})) once for both pixels, each pair one SMLAD with
 * the column's (x_k, x_{k+4}) + input offset: 16 MACs in a load, 4 AND, 8 pair loads and 8 SMLAD.
 * The sums are 4096 times the dot products, exact over EDGEC_S4_DSP_CHUNK taps (256 * 8 * 255 *
 * 4096 < 2^31); each chunk's >> 12 is added to acc, wrapping like the golden's int32.
 */
static void s4_dsp_mac_2px(const int8_t *w, const int32_t *cols_a, const int32_t *cols_b, int32_t blocks,
                           uint32_t acc[2])
{
    while (blocks > 0) {
        const int32_t chunk = EDGEC_MIN(blocks, EDGEC_S4_DSP_CHUNK / 8);
        int32_t sa = 0, sb = 0;
        for (int32_t g = 0; g < chunk; g++, w += 4, cols_a += 4, cols_b += 4) {
            uint32_t word;
            memcpy(&word, w, 4);
            const int32_t w0 = (int32_t)((word << 12) & 0xF000F000u);
            const int32_t w1 = (int32_t)((word << 8) & 0xF000F000u);
            const int32_t w2 = (int32_t)((word << 4) & 0xF000F000u);
            const int32_t w3 = (int32_t)(word & 0xF000F000u);
            sa = __smlad(w0, cols_a[0], sa);
            sb = __smlad(w0, cols_b[0], sb);
            sa = __smlad(w1, cols_a[1], sa);
            sb = __smlad(w1, cols_b[1], sb);
            sa = __smlad(w2, cols_a[2], sa);
            sb = __smlad(w2, cols_b[2], sb);
            sa = __smlad(w3, cols_a[3], sa);
            sb = __smlad(w3, cols_b[3], sb);
        }
        acc[0] += (uint32_t)(sa >> 12);
        acc[1] += (uint32_t)(sb >> 12);
        blocks -= chunk;
    }
}

/* One pixel's gathered input (zero point outside the image, zeros past K) widened with the input
 * offset into `cols`: per block of 8 taps the pairs (x0, x4) .. (x3, x7) (edgec_s4_dsp_widen_block). */
static void s4_dsp_gather(int32_t *cols, int8_t *row, const edgec_conv_transpose_desc *d, const phase *p,
                          const int8_t *input, pixel px, int32_t padded_k)
{
    gather_row(row, d, p, input, px, padded_k);
    for (int32_t g = 0; g < padded_k / 8; g++) {
        edgec_s4_dsp_widen_block(row + 8 * g, edgec_s4_dsp_offsets(d->input_offset), cols + 4 * g, 1);
    }
}

edgec_status edgec_conv_transpose_s4_dsp(const edgec_conv_transpose_desc *desc, const int8_t *input, int8_t *output,
                                         int8_t *scratch)
{
    if (!desc_valid(desc, input, output) || desc->groups != 1 || scratch == NULL || !edgec_word_aligned(scratch)) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_conv_transpose_desc *d = desc;
    const int short_form = edgec_dsp_requant_all_short(d->multiplier, d->shift, d->output_c);
    const int32_t round_base = edgec_dsp_round_base(d->output_offset);
    const edgec_output_stage stage = edgec_output_stage_make(d->output_offset, d->act_min, d->act_max);
    const int8_t *phase_filter = d->filter;

    for (int32_t r_h = 0; r_h < d->stride_h; r_h++) {
        for (int32_t r_w = 0; r_w < d->stride_w; r_w++) {
            const phase p = phase_make(d, r_h, r_w);
            const int32_t padded_k = (p.k + 7) / 8 * 8;
            const int32_t row_bytes = padded_k / 2;
            int8_t *row = scratch;                                     /* padded_k int8 */
            int32_t *cols_a = (int32_t *)(void *)(scratch + padded_k); /* padded_k / 2 words a pixel */
            int32_t *cols_b = cols_a + padded_k / 2;
            pixel px = { 0, p.th.start, p.tw.start };
            for (int32_t n = phase_pixels(d, &p); n > 0; n -= 2) {
                int8_t *out_a = output_pixel(d, output, px);
                int8_t *out_b = out_a; /* a lone last pixel is its own pixel b */
                s4_dsp_gather(cols_a, row, d, &p, input, px, padded_k);
                pixel_next(&px, d, &p);
                if (n > 1) {
                    out_b = output_pixel(d, output, px);
                    s4_dsp_gather(cols_b, row, d, &p, input, px, padded_k);
                    pixel_next(&px, d, &p);
                }
                const int32_t *cols_of_b = n > 1 ? cols_b : cols_a;
                for (int32_t c = 0; c < d->output_c; c++) {
                    const uint32_t bias = d->bias != NULL ? (uint32_t)d->bias[c] : 0u;
                    uint32_t acc[2] = { bias, bias };
                    s4_dsp_mac_2px(phase_filter + c * row_bytes, cols_a, cols_of_b, padded_k / 8, acc);
                    dsp_store_channel((int32_t)acc[0], (int32_t)acc[1], d, c, short_form, round_base, stage, out_a,
                                      out_b);
                }
            }
            phase_filter += d->output_c * row_bytes;
        }
    }
    return EDGEC_OK;
}

#endif /* __ARM_FEATURE_DSP */

/* ==== Helium: 4 channels x 2 pixels per VMLADAVA step ======================================== */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)

/*
 * A block of 4 channels at a pixel pair: per group of 16 taps, the block's 64 filter bytes and
 * the two rows' 16 bytes are loaded once each, 128 MACs in 6 loads and 8 VMLADAVA (wrapping
 * modulo 2^32). bias holds the block's 4 folded biases; sums_a/sums_b get the pixels' sums.
 */
static void mve_mac_4x2(const int8_t *filter, const int8_t *row_a, const int8_t *row_b, int32_t groups,
                        const int32_t *bias, int32_t sums_a[4], int32_t sums_b[4])
{
    int32_t a0 = bias[0], a1 = bias[1], a2 = bias[2], a3 = bias[3];
    int32_t b0 = a0, b1 = a1, b2 = a2, b3 = a3;
    for (; groups > 0; groups--, row_a += 16, row_b += 16, filter += 64) {
        const int8x16_t xa = vldrbq_s8(row_a);
        const int8x16_t xb = vldrbq_s8(row_b);
        int8x16_t w = vldrbq_s8(filter);
        a0 = vmladavaq_s8(a0, w, xa);
        b0 = vmladavaq_s8(b0, w, xb);
        w = vldrbq_s8(filter + 16);
        a1 = vmladavaq_s8(a1, w, xa);
        b1 = vmladavaq_s8(b1, w, xb);
        w = vldrbq_s8(filter + 32);
        a2 = vmladavaq_s8(a2, w, xa);
        b2 = vmladavaq_s8(b2, w, xb);
        w = vldrbq_s8(filter + 48);
        a3 = vmladavaq_s8(a3, w, xa);
        b3 = vmladavaq_s8(b3, w, xb);
    }
    sums_a[0] = a0;
    sums_a[1] = a1;
    sums_a[2] = a2;
    sums_a[3] = a3;
    sums_b[0] = b0;
    sums_b[1] = b1;
    sums_b[2] = b2;
    sums_b[3] = b3;
}

/* Channels c .. c + 3 (those below C_out) of one pixel from its sums, four lanes at once. */
static inline void mve_store(int8_t *out, const int32_t sums[4], const edgec_conv_transpose_desc *d, int32_t c,
                             edgec_output_stage stage)
{
    const mve_pred16_t lanes = vctp32q((uint32_t)(d->output_c - c));
    const int32x4_t m = vldrwq_z_s32(d->multiplier + c, lanes);
    const int32x4_t shift = vldrwq_z_s32(d->shift + c, lanes);
    const int32x4_t y = edgec_mve_output(edgec_mve_requantize(vldrwq_s32(sums), m, shift), stage);
    vstrbq_p_s32(out + c, y, lanes);
}

edgec_status edgec_conv_transpose_s8_mve(const edgec_conv_transpose_desc *desc, const int8_t *input, int8_t *output,
                                         int8_t *scratch)
{
    if (!packed_desc_valid(desc, input, output, scratch)) {
        return EDGEC_ARG_ERROR;
    }
    const edgec_conv_transpose_desc *d = desc;
    const int32_t out_c = d->output_c;
    const int32_t rows = (out_c + 3) / 4 * 4;
    const edgec_output_stage stage = edgec_output_stage_make(d->output_offset, d->act_min, d->act_max);
    const int8_t *phase_filter = d->filter;
    const int32_t *phase_bias = d->bias;

    for (int32_t r_h = 0; r_h < d->stride_h; r_h++) {
        for (int32_t r_w = 0; r_w < d->stride_w; r_w++) {
            const phase p = phase_make(d, r_h, r_w);
            const int32_t padded_k = (p.k + 15) / 16 * 16;
            int8_t *row_a = scratch;
            int8_t *row_b = scratch + padded_k;
            pixel px = { 0, p.th.start, p.tw.start };
            for (int32_t n = phase_pixels(d, &p); n > 0; n -= 2) {
                int8_t *out_a = output_pixel(d, output, px);
                gather_row(row_a, d, &p, input, px, padded_k);
                pixel_next(&px, d, &p);
                int8_t *out_b = NULL;
                if (n > 1) {
                    out_b = output_pixel(d, output, px);
                    gather_row(row_b, d, &p, input, px, padded_k);
                    pixel_next(&px, d, &p);
                }
                for (int32_t c = 0; c < out_c; c += 4) {
                    int32_t sums_a[4], sums_b[4];
                    mve_mac_4x2(phase_filter + c * padded_k, row_a, out_b != NULL ? row_b : row_a, padded_k / 16,
                                phase_bias + c, sums_a, sums_b);
                    mve_store(out_a, sums_a, d, c, stage);
                    if (out_b != NULL) {
                        mve_store(out_b, sums_b, d, c, stage);
                    }
                }
            }
            phase_filter += rows * padded_k;
            phase_bias += rows;
        }
    }
    return EDGEC_OK;
}

#endif /* __ARM_FEATURE_MVE */
