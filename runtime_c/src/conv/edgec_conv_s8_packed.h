/*
 * edgec_conv_s8_packed.h -- private to the packed int8 convolutions (edgec_conv_s8_dsp.c,
 * edgec_conv_s8_mve.c): their shared argument checks and im2col, which copies one output pixel's
 * receptive field, in filter order, into scratch.
 */
#ifndef EDGEC_CONV_S8_PACKED_H
#define EDGEC_CONV_S8_PACKED_H

#include "edgec_nn.h"
#include "../support/edgec_support.h"

#include <stddef.h>
#include <string.h>

/* ==== Packed paths: Arm DSP extension and Helium ============================================= */
#if defined(__ARM_FEATURE_DSP) || (defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))

/* Out of line, as it was when the portable path shared it: inlined into dsp_conv it moves that
 * function's register allocation and costs a few instructions per output channel. */
static EDGEC_NOINLINE int conv_args_valid(const edgec_conv_params *params, const edgec_per_channel_quant *quant,
                                          const edgec_dims *input_dims, const int8_t *input,
                                          const edgec_dims *filter_dims, const int8_t *filter,
                                          const edgec_dims *output_dims, const int8_t *output)
{
    return edgec_conv_args_valid(params, quant, input_dims, input, filter_dims, filter, output_dims, output);
}

/*
 * The packed paths' constraints on top of the portable ones: one group (grouped convolutions stay
 * on edgec_conv_s8), a folded bias, a word-aligned filter, bias and scratch (LDRD, LDM and vector
 * loads), and at most EDGEC_CONV_S8_PACKED_MAX_K taps per output channel, so that the scratch
 * and filter offsets (up to 28 bytes a group of 4 taps) fit int32. (edgec_conv_args_valid's int8
 * zero points matter here too: padding taps read the input zero point.)
 */
static int packed_conv_args_valid(const edgec_conv_params *params, const edgec_per_channel_quant *quant,
                                  const edgec_dims *input_dims, const int8_t *input, const edgec_dims *filter_dims,
                                  const int8_t *filter, const int32_t *bias, const edgec_dims *output_dims,
                                  const int8_t *output, const int8_t *scratch)
{
    return conv_args_valid(params, quant, input_dims, input, filter_dims, filter, output_dims, output) &&
           edgec_conv_window_valid(params, input_dims, filter_dims, output_dims) && params->groups == 1 &&
           filter_dims->c == input_dims->c && filter_dims->n == output_dims->c &&
           (int64_t)filter_dims->h * filter_dims->w * filter_dims->c <= EDGEC_CONV_S8_PACKED_MAX_K && bias != NULL &&
           scratch != NULL && edgec_word_aligned(filter) && edgec_word_aligned(bias) && edgec_word_aligned(scratch);
}

/* ---- im2col: one output pixel's receptive field, in filter order ------------------------- */

/* The output positions along one axis whose window lies inside the input: [first, last). */
typedef struct {
    int32_t first;
    int32_t last;
} inside_range;

static inside_range inside_positions(int32_t out_size, int32_t stride, int32_t pad, int32_t dilation, int32_t kernel,
                                     int32_t in_size)
{
    /* o * stride - pad >= 0 and o * stride - pad + (kernel - 1) * dilation <= in_size - 1 */
    const int32_t span_end = in_size - 1 + pad - (kernel - 1) * dilation;
    inside_range range;
    range.first = (pad + stride - 1) / stride;
    range.last = span_end < 0 ? 0 : EDGEC_MIN(out_size, span_end / stride + 1);
    return range;
}

/* What im2col needs to know about the layer. */
typedef struct {
    const edgec_conv_params *params;
    const edgec_dims *input_dims;
    const int8_t *input;
    int32_t k_h;
    int32_t k_w;
    int32_t in_row_len; /* W * C_in: bytes of an input row */
    int32_t run_len;    /* KW * C_in: bytes of a filter row's receptive field */
    int32_t row_step;   /* dilation_h * in_row_len: from one filter row's run to the next */
    inside_range inside_y;
    inside_range inside_x; /* empty unless dilation_w is 1, so that a filter row reads one run */
    int8_t pad_value;      /* the input zero point: what taps outside the input read */
} conv_window;

static conv_window conv_window_make(const edgec_conv_params *params, const edgec_dims *input_dims, const int8_t *input,
                                    const edgec_dims *filter_dims, const edgec_dims *output_dims)
{
    conv_window win;
    win.params = params;
    win.input_dims = input_dims;
    win.input = input;
    win.k_h = filter_dims->h;
    win.k_w = filter_dims->w;
    win.in_row_len = input_dims->w * input_dims->c;
    win.run_len = filter_dims->w * input_dims->c;
    win.row_step = params->dilation_h * win.in_row_len;
    win.inside_y = inside_positions(output_dims->h, params->stride_h, params->pad_top, params->dilation_h,
                                    filter_dims->h, input_dims->h);
    win.inside_x = inside_positions(output_dims->w, params->stride_w, params->pad_left, params->dilation_w,
                                    filter_dims->w, input_dims->w);
    if (params->dilation_w != 1) {
        win.inside_x.last = 0;
    }
    win.pad_value = (int8_t)-params->input_offset;
    return win;
}

/* An output pixel; pixel_next walks them in NHWC order. */
typedef struct {
    int32_t b;
    int32_t oy;
    int32_t ox;
} pixel_cursor;

static void pixel_next(pixel_cursor *px, const edgec_dims *output_dims)
{
    if (++px->ox == output_dims->w) {
        px->ox = 0;
        if (++px->oy == output_dims->h) {
            px->oy = 0;
            ++px->b;
        }
    }
}

/*
 * Where im2col writes the receptive field: `copy` stores n input bytes, `fill` n padding bytes,
 * and receptive-field byte k lands at dst + k * scale. The int8 row (scale 1) serves every path;
 * the DSP path also writes its int16 columns directly (scale 4, see dsp_widen).
 */
typedef struct {
    void (*copy)(int8_t *dst, const int8_t *src, int32_t n);
    void (*fill)(int8_t *dst, int8_t value, int32_t n);
    int32_t scale;
} im2col_sink;

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
/* n bytes from src to dst, 16 at a time in a tail-predicated low-overhead loop (its last vector
 * predicated by the loop itself; a cached loop end costs nothing, so every run after the first
 * pays only for its loads and stores). */
static inline void copy_run(int8_t *dst, const int8_t *src, int32_t n)
{
    __asm__ volatile("wlstp.8 lr, %[n], 2f\n"
                     "1:\n\t"
                     "vldrb.u8 q0, [%[src]], #16\n\t"
                     "vstrb.8 q0, [%[dst]], #16\n\t"
                     "letp lr, 1b\n"
                     "2:"
                     : [dst] "+r"(dst), [src] "+r"(src)
                     : [n] "r"(n)
                     : "lr", "q0", "memory");
}

/* n bytes of value, the same way */
static void fill_run(int8_t *dst, int8_t value, int32_t n)
{
    __asm__ volatile("vdup.8 q0, %[value]\n\t"
                     "wlstp.8 lr, %[n], 2f\n"
                     "1:\n\t"
                     "vstrb.8 q0, [%[dst]], #16\n\t"
                     "letp lr, 1b\n"
                     "2:"
                     : [dst] "+r"(dst)
                     : [n] "r"(n), [value] "r"((int32_t)value)
                     : "lr", "q0", "memory");
}
#else
/*
 * n bytes from src to dst, a word at a time (every core with the DSP extension loads and stores
 * unaligned words). The runs are short -- C_in or KW*C_in bytes, 9 for an RGB 3x3 stem -- where a
 * library memcpy call would cost more than the copy.
 */
static inline void copy_run(int8_t *dst, const int8_t *src, int32_t n)
{
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint32_t word;
        memcpy(&word, src + i, 4);
        memcpy(dst + i, &word, 4);
    }
    for (; i < n; i++) {
        dst[i] = src[i];
    }
}

static void fill_run(int8_t *dst, int8_t value, int32_t n)
{
    const uint32_t word = (uint8_t)value * 0x01010101u;
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        memcpy(dst + i, &word, 4);
    }
    for (; i < n; i++) {
        dst[i] = value;
    }
}
#endif

static const im2col_sink int8_row = { copy_run, fill_run, 1 };

/*
 * The first byte of output pixel px's receptive field if its window lies inside the input: then
 * the field is KH runs of run_len bytes, row_step apart, and needs no padding. Else NULL.
 */
static inline const int8_t *window_inside(const conv_window *win, pixel_cursor px)
{
    if (px.oy < win->inside_y.first || px.oy >= win->inside_y.last || px.ox < win->inside_x.first ||
        px.ox >= win->inside_x.last) {
        return NULL;
    }
    const edgec_conv_params *p = win->params;
    const int32_t iy = (px.b * win->input_dims->h + px.oy * p->stride_h - p->pad_top);
    const int32_t ix = px.ox * p->stride_w - p->pad_left;
    return win->input + iy * win->in_row_len + ix * win->input_dims->c;
}

/*
 * The receptive field of output pixel px, KH*KW*C_in bytes in filter (OHWI) order, into `sink`.
 * Taps outside the input read the input zero point: with the input offset folded into the bias
 * they then add nothing, exactly as the golden kernel's zero padding of (x - zero point).
 */
static void im2col_pixel(int8_t *dst, const im2col_sink *sink, const conv_window *win, pixel_cursor px)
{
    const edgec_conv_params *p = win->params;
    const edgec_dims *in = win->input_dims;
    const edgec_tap_range ty = edgec_conv_taps(px.oy, p->stride_h, p->pad_top, p->dilation_h, win->k_h, in->h);
    const edgec_tap_range tx = edgec_conv_taps(px.ox, p->stride_w, p->pad_left, p->dilation_w, win->k_w, in->w);
    /* edgec_conv_taps may put an empty range past the last tap. */
    const int32_t first = EDGEC_MIN(tx.first, win->k_w);
    const int32_t last = EDGEC_MIN(tx.last, win->k_w);
    const int8_t *in_batch = win->input + px.b * in->h * win->in_row_len;
    const int32_t step = win->run_len * sink->scale;

    for (int32_t ky = 0; ky < win->k_h; ky++, dst += step) {
        if (ky < ty.first || ky >= ty.last || first == last) {
            sink->fill(dst, win->pad_value, win->run_len);
            continue;
        }
        const int8_t *in_y = in_batch + (ty.base + ky * p->dilation_h) * win->in_row_len;
        if (first > 0) {
            sink->fill(dst, win->pad_value, first * in->c);
        }
        if (p->dilation_w == 1) {
            sink->copy(dst + first * in->c * sink->scale, in_y + (tx.base + first) * in->c, (last - first) * in->c);
        } else {
            for (int32_t kx = first; kx < last; kx++) {
                sink->copy(dst + kx * in->c * sink->scale, in_y + (tx.base + kx * p->dilation_w) * in->c, in->c);
            }
        }
        if (last < win->k_w) {
            sink->fill(dst + last * in->c * sink->scale, win->pad_value, (win->k_w - last) * in->c);
        }
    }
}

#endif /* packed paths */

#endif /* EDGEC_CONV_S8_PACKED_H */
