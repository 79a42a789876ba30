/*
 * edgec_conv_s8 -- generic int8 2-D convolution.
 * Golden kernel: edgec.ops.conv.conv2d_s8. Arithmetic: docs/numerics.md.
 *
 * edgec_conv_s8 is the portable C path and the reference. On Arm cores with the DSP extension
 * (edgec_conv_s8_dsp, and _dsp_wide with its filter widened to int16 for --opt speed) or Helium
 * (edgec_conv_s8_mve) the same file also holds a path that reads its filter re-laid at compile
 * time (edgec.ops.kernel_layout) and its bias with the input offset folded in, so that the inner
 * loops carry no offset arithmetic; their hottest loops are inline assembly in optimised builds.
 *
 * Portable loop order: output pixel, then output channel, then the in-bounds taps, then the input
 * channels of the group (innermost, contiguous in both the NHWC input and the OHWI filter).
 * The in-bounds tap range is computed once per output pixel instead of testing every tap.
 *
 * The accumulator is 32 bits, as in CMSIS-NN: |w * (x + input_offset)| <= 128 * 255. It is summed
 * in uint32_t, so a sum past int32 (possible only when |bias| + KH*KW*C_in/groups * 32640 >= 2^31,
 * which edgec refuses at compile time) wraps modulo 2^32 like the golden kernel instead of being
 * undefined behaviour; the SMLAD and VMLADAVA paths wrap the same way.
 */
#include "edgec_nn.h"
#include "../support/edgec_support.h"

#include <stddef.h>
#include <string.h>

/* This kernel's own constraints: a general window and a grouped OHWI filter (C_in and C_out
 * divisible by groups). */
static int conv_layout_valid(const edgec_conv_params *params, const edgec_dims *input_dims,
                             const edgec_dims *filter_dims, const edgec_dims *output_dims)
{
    return edgec_conv_window_valid(params, input_dims, filter_dims, output_dims) && params->groups >= 1 &&
           input_dims->c % params->groups == 0 && output_dims->c % params->groups == 0 &&
           filter_dims->c * params->groups == input_dims->c && filter_dims->n == output_dims->c;
}

/* Unpacks a conv descriptor (NULL: EDGEC_ARG_ERROR) and runs `kernel` on its layer with `filter`
 * and `bias` (the descriptor's, or the wide one's), then the kernel's own further arguments. */
#define CONV_ENTRY(desc, kernel, filter, bias, input, output, ...)                                                     \
    do {                                                                                                               \
        edgec_conv_layer l;                                                                                            \
        if ((desc) == NULL) {                                                                                          \
            return EDGEC_ARG_ERROR;                                                                                    \
        }                                                                                                              \
        EDGEC_CONV_LAYER_OF(desc, l);                                                                                  \
        return kernel(&l.params, &l.quant, &l.input_dims, input, &l.filter_dims, filter, bias, &l.output_dims, output, \
                      __VA_ARGS__);                                                                                    \
    } while (0)

static edgec_status conv_s8(const edgec_conv_params *params, const edgec_per_channel_quant *quant,
                            const edgec_dims *input_dims, const int8_t *input, const edgec_dims *filter_dims,
                            const int8_t *filter, const int32_t *bias, const edgec_dims *output_dims, int8_t *output,
                            int8_t *scratch)
{
    (void)scratch; /* the portable path needs none */
    if (!edgec_conv_args_valid(params, quant, input_dims, input, filter_dims, filter, output_dims, output) ||
        !conv_layout_valid(params, input_dims, filter_dims, output_dims)) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t cin_g = filter_dims->c;
    const int32_t out_c = output_dims->c;
    const int32_t cout_g = out_c / params->groups;
    const int32_t input_offset = params->input_offset;
    const edgec_output_stage stage = edgec_output_stage_make(params->output_offset, params->act_min, params->act_max);
    const int32_t in_row_len = in_w * in_c;
    const int32_t filter_len = k_h * k_w * cin_g; /* one output channel's filter */
    int8_t *out = output;

    for (int32_t b = 0; b < output_dims->n; b++) {
        const int8_t *in_batch = input + b * in_h * in_row_len;
        for (int32_t oy = 0; oy < output_dims->h; oy++) {
            const edgec_tap_range ty =
                edgec_conv_taps(oy, params->stride_h, params->pad_top, params->dilation_h, k_h, in_h);
            for (int32_t ox = 0; ox < output_dims->w; ox++) {
                const edgec_tap_range tx =
                    edgec_conv_taps(ox, params->stride_w, params->pad_left, params->dilation_w, k_w, in_w);
                for (int32_t oc = 0; oc < out_c; oc++) {
                    /* This channel's group of input channels, and its OHWI filter. */
                    const int8_t *in_group = in_batch + (oc / cout_g) * cin_g;
                    const int8_t *w_oc = filter + oc * filter_len;
                    uint32_t acc = bias != NULL ? (uint32_t)bias[oc] : 0u;
                    /* Pointers are formed for in-bounds taps only (no out-of-array arithmetic). */
                    for (int32_t ky = ty.first; ky < ty.last; ky++) {
                        const int32_t iy = ty.base + ky * params->dilation_h;
                        const int8_t *in_y = in_group + iy * in_row_len;
                        const int8_t *w_y = w_oc + ky * k_w * cin_g;
                        for (int32_t kx = tx.first; kx < tx.last; kx++) {
                            const int32_t ix = tx.base + kx * params->dilation_w;
                            const int8_t *in_tap = in_y + ix * in_c;
                            const int8_t *w_tap = w_y + kx * cin_g;
                            for (int32_t ic = 0; ic < cin_g; ic++) {
                                acc += (uint32_t)(((int32_t)in_tap[ic] + input_offset) * (int32_t)w_tap[ic]);
                            }
                        }
                    }
                    *out++ = edgec_requantize_s8((int32_t)acc, quant->multiplier[oc], quant->shift[oc], stage);
                }
            }
        }
    }
    return EDGEC_OK;
}

edgec_status edgec_conv_s8(const edgec_conv_desc *desc, const int8_t *input, int8_t *output)
{
    CONV_ENTRY(desc, conv_s8, desc->filter, desc->bias, input, output, NULL);
}

/* ==== Packed paths: Arm DSP extension and Helium ============================================= */
#if defined(__ARM_FEATURE_DSP) || (defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))

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
    return edgec_conv_args_valid(params, quant, input_dims, input, filter_dims, filter, output_dims, output) &&
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

/* The receptive field of output pixel px as an int8 row. */
static void im2col_row(int8_t *row, const conv_window *win, pixel_cursor px)
{
    const int8_t *src = window_inside(win, px);
    if (src == NULL) {
        im2col_pixel(row, &int8_row, win, px);
        return;
    }
    for (int32_t ky = 0; ky < win->k_h; ky++, row += win->run_len, src += win->row_step) {
        copy_run(row, src, win->run_len);
    }
}

#endif /* packed paths */

/* ==== Arm DSP extension: 2 channels x 3 pixels per SMLAD micro-kernel step ==================== */
#if defined(__ARM_FEATURE_DSP)

/* Output pixels per micro-kernel step. Their receptive fields, widened to int16, interleave per
 * group of 4 taps: 8 bytes a pixel (the pairs (x0, x2) and (x1, x3)), DSP_COLUMN_BYTES a group. */
#define DSP_PIXELS 3
#define DSP_COLUMN_BYTES (8 * DSP_PIXELS)

/*
 * The receptive field widened to int16 for SMLAD: each group of 4 int8 (x0..x3) becomes the pairs
 * (x0, x2) and (x1, x3) -- the order SXTB16 widens the filter in, so the pairs line up -- at the
 * start of every DSP_COLUMN_BYTES bytes: the columns of the step's pixels interleave per group.
 * Two word stores (1 cycle each on the M4) rather than one STRD (3).
 */
/* Keeps dsp_widen and dsp_conv_pixels inside dsp_conv's loop now that dsp_pointwise_steps calls
 * them too (out of line, the stem conv of MobileNet took 3% more instructions). */
#if defined(__GNUC__)
#define DSP_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define DSP_ALWAYS_INLINE inline
#endif

static DSP_ALWAYS_INLINE void dsp_widen(int8_t *cols, const int8_t *src, int32_t n)
{
    for (int32_t i = 0; i < n; i += 4, cols += DSP_COLUMN_BYTES) {
        int32_t x;
        memcpy(&x, src + i, 4);
        const int32_t even = __sxtb16(x);
        const int32_t odd = edgec_sxtb16_ror8(x);
        memcpy(cols, &even, 4);
        memcpy(cols + 4, &odd, 4);
    }
}

static void dsp_fill_widened(int8_t *cols, int8_t value, int32_t n)
{
    const int32_t pair = (int32_t)((uint16_t)value * 0x00010001u);
    for (int32_t i = 0; i < n; i += 4, cols += DSP_COLUMN_BYTES) {
        memcpy(cols, &pair, 4);
        memcpy(cols + 4, &pair, 4);
    }
}

/* Three runs of n bytes, row_step apart, one after the other into row. */
static DSP_ALWAYS_INLINE void dsp_copy_runs3(int8_t *row, const int8_t *src, int32_t row_step, int32_t n)
{
    memcpy(row, src, (size_t)n);
    memcpy(row + n, src + row_step, (size_t)n);
    memcpy(row + 2 * n, src + 2 * row_step, (size_t)n);
}

/*
 * The receptive field of output pixel px of a first convolution (3x3, C_in 1-3: run_len 3, 6 or
 * 9) as an int8 row: inside the input three runs copied at constant sizes (im2col_row copies runs
 * of run-time length; on MobileNet's RGB stem that was a fifth of the layer), else im2col_row.
 */
static DSP_ALWAYS_INLINE void dsp_stem_row(int8_t *row, const conv_window *win, pixel_cursor px)
{
    const int8_t *src = window_inside(win, px);
    if (src == NULL) {
        im2col_row(row, win, px);
    } else if (win->run_len == 9) {
        dsp_copy_runs3(row, src, win->row_step, 9);
    } else if (win->run_len == 6) {
        dsp_copy_runs3(row, src, win->row_step, 6);
    } else {
        dsp_copy_runs3(row, src, win->row_step, 3);
    }
}

/* im2col straight into a column: when C_in is a multiple of 4, every run starts on a group. */
static const im2col_sink dsp_column = { dsp_widen, dsp_fill_widened, DSP_COLUMN_BYTES / 4 };

static void dsp_im2col_column(int8_t *cols, const conv_window *win, pixel_cursor px)
{
    const int8_t *src = window_inside(win, px);
    if (src == NULL) {
        im2col_pixel(cols, &dsp_column, win, px);
        return;
    }
    for (int32_t ky = 0; ky < win->k_h; ky++, cols += (DSP_COLUMN_BYTES / 4) * win->run_len, src += win->row_step) {
        dsp_widen(cols, src, win->run_len);
    }
}

/* One SMLAD step of the micro-kernel (see dsp_mac_2x3); sums are channel 0 at pixels a, b, c,
 * then channel 1's. A wide filter holds the taps already widened: two words per channel. */
static inline void dsp_mac_2x3_group(const int8_t **filter, const int8_t **cols, int32_t sums[6], int wide)
{
    int32_t w0_even, w0_odd, w1_even, w1_odd;
    if (wide) {
        edgec_dsp_load_2words(filter, &w0_even, &w0_odd);
        edgec_dsp_load_2words(filter, &w1_even, &w1_odd);
    } else {
        int32_t w0, w1;
        edgec_dsp_load_2words(filter, &w0, &w1);
        w0_even = __sxtb16(w0);
        w0_odd = edgec_sxtb16_ror8(w0);
        w1_even = __sxtb16(w1);
        w1_odd = edgec_sxtb16_ror8(w1);
    }
    for (int32_t px = 0; px < DSP_PIXELS; px++) {
        int32_t even, odd;
        edgec_dsp_load_2words(cols, &even, &odd);
        sums[px] = __smlad(w0_odd, odd, __smlad(w0_even, even, sums[px]));
        sums[DSP_PIXELS + px] = __smlad(w1_odd, odd, __smlad(w1_even, even, sums[DSP_PIXELS + px]));
    }
}

/* The micro-kernel in C: a channel pair at the step's pixels. SMLAD wraps modulo 2^32 like the
 * golden int32 accumulator. */
static void dsp_mac_2x3(const int8_t *filter, const int8_t *cols, int32_t groups, int32_t sums[6], int wide)
{
    for (; groups > 0; --groups) {
        dsp_mac_2x3_group(&filter, &cols, sums, wide);
    }
}

/*
 * What dsp_blocks_2x3 reads and advances: every channel pair of the step's pixels whose channels
 * all take the short requantization, in one assembly routine -- per pair the biases, the
 * micro-kernel over the groups, the short requantization, one packed clamp per 4 values and a
 * halfword store per pixel. Per group of 4 taps the pair's 8 filter bytes are widened once
 * (4 SXTB16) and multiplied with the 3 pixels' columns: 24 MACs in 4 loads in one pipelined run
 * (Cortex-M4 TRM 3.3.2: a load after a load single issues in 1 cycle) and 2 LDM, and 12 SMLAD;
 * wide, the taps loaded already widened: 6 loads, 2 LDM and 12 SMLAD. Four groups per loop
 * iteration, entered at the copy that leaves a whole number of iterations. Naked functions, so
 * all 14 registers are the routine's at every optimisation level.
 */
typedef struct {
    const int8_t *cols;        /*  0 */
    const int8_t *cols_end;    /*  4 */
    const int8_t *filter;      /*  8: the next pair's */
    const int32_t *bias;       /* 12: the next pair's biases, or (wide) its 8 channel-table words */
    const int32_t *multiplier; /* 16: the next pair's (not wide) */
    const int32_t *shift;      /* 20 */
    int8_t *out;               /* 24: pixel a's next channel pair */
    int32_t pixel_b;           /* 28: bytes from pixel a to pixel b */
    int32_t pixel_c;           /* 32: ... to pixel c */
    uint32_t lows;             /* 36: act_min in every byte */
    uint32_t highs;            /* 40: act_max in every byte */
    int32_t round_base;        /* 44: edgec_dsp_round_base of the output offset */
    int8_t *out_end;           /* 48: past pixel a's last channel pair */
    int32_t entry;             /* 52: groups % 4 */
} dsp_block_run;

typedef char dsp_block_run_layout[offsetof(dsp_block_run, out) == 24 && offsetof(dsp_block_run, lows) == 36 &&
                                          offsetof(dsp_block_run, entry) == 52
                                      ? 1
                                      : -1];

/* One group: the pair's filter words (r8 channel 0, r10 channel 1) widened into r8/r9 and
 * r10/r11, each pixel's widened column loaded in turn into r12/lr; sums r2..r4 channel 0 at
 * pixels a, b, c, r5..r7 channel 1; cols r0, filter r1. */
#define DSP_GROUP_2X3                                                                                                 \
    "ldr r8, [r1], #4\n\tldr r10, [r1], #4\n\tldr r12, [r0], #4\n\tldr lr, [r0], #4\n\t"                              \
    "sxtb16 r9, r8, ror #8\n\tsxtb16 r8, r8\n\tsxtb16 r11, r10, ror #8\n\tsxtb16 r10, r10\n\t" DSP_PIXEL_MACS(        \
        "r2", "r5") "ldm r0!, {r12, lr}\n\t" DSP_PIXEL_MACS("r3", "r6") "ldm r0!, {r12, lr}\n\t" DSP_PIXEL_MACS("r4", \
                                                                                                                "r7")
/* ... of a wide filter: each channel's taps loaded already widened. */
#define DSP_GROUP_2X3_WIDE                                                                                          \
    "ldr r8, [r1], #4\n\tldr r9, [r1], #4\n\tldr r10, [r1], #4\n\tldr r11, [r1], #4\n\t"                            \
    "ldr r12, [r0], #4\n\tldr lr, [r0], #4\n\t" DSP_PIXEL_MACS("r2", "r5") "ldm r0!, {r12, lr}\n\t" DSP_PIXEL_MACS( \
        "r3", "r6") "ldm r0!, {r12, lr}\n\t" DSP_PIXEL_MACS("r4", "r7")
#define DSP_PIXEL_MACS(c0, c1)                                          \
    "smlad " c0 ", r8, r12, " c0 "\n\tsmlad " c0 ", r9, lr, " c0 "\n\t" \
    "smlad " c1 ", r10, r12, " c1 "\n\tsmlad " c1 ", r11, lr, " c1 "\n\t"

/* edgec_dsp_requantize_ssat8 of acc: multiplier r8, r - 1 in r9, round_high r10; r11, lr scratch. */
#define DSP_REQUANT(acc)                                                                              \
    "and r11, " acc ", #0x80000000\n\torr r11, r11, #0x40000000\n\tadd lr, r10, " acc ", asr #31\n\t" \
    "smlal r11, lr, " acc ", r8\n\tasr " acc ", lr, r9\n\tssat " acc ", #8, " acc "\n\t"

/* A pair's biases into every pixel's sums (r12 holds the run): from the bias array, advanced ... */
#define DSP_BIASES                                                          \
    "ldr r8, [r12, #12]\n\tldrd r2, r5, [r8], #8\n\tstr r8, [r12, #12]\n\t" \
    "mov r3, r2\n\tmov r4, r2\n\tmov r6, r5\n\tmov r7, r5\n\t"
/* ... or from the channel table (edgec_conv_s8_dsp_wide), advanced with the output constants. */
#define DSP_TABLE_BIASES                          \
    "ldr r8, [r12, #12]\n\tldrd r2, r5, [r8]\n\t" \
    "mov r3, r2\n\tmov r4, r2\n\tmov r6, r5\n\tmov r7, r5\n\t"
/* After the taps, the requantization of both channels (r12 holds the run): the multiplier and
 * shift arrays and the round base ... */
#define DSP_REQUANT_PAIR                                                                                               \
    "ldr r0, [r12, #16]\n\tldr r1, [r12, #20]\n\tldr r11, [r12, #44]\n\t"                                              \
    "ldr r8, [r0], #4\n\tldr r9, [r1], #4\n\tmvn r9, r9\n\tsub r10, r9, #1\n\tlsl r10, r11, r10\n\t" DSP_REQUANT("r2") \
        DSP_REQUANT("r3")                                                                                              \
            DSP_REQUANT("r4") "ldr r11, [r12, #44]\n\t"                                                                \
                              "ldr r8, [r0], #4\n\tldr r9, [r1], #4\n\tmvn r9, r9\n\tsub r10, r9, #1\n\tlsl r10, "     \
                              "r11, r10\n\t" DSP_REQUANT("r5") DSP_REQUANT("r6") DSP_REQUANT(                          \
                                  "r7") "str r0, [r12, #16]\n\tstr r1, [r12, #20]\n\t" /* 1 cycle each; STRD 3 */
/* ... or the channel table's (multipliers at words 2-3, round_high 4-5, r - 1 6-7). */
#define DSP_TABLE_REQUANT_PAIR                                                                                 \
    "ldr r0, [r12, #12]\n\t"                                                                                   \
    "ldr r8, [r0, #8]\n\tldr r10, [r0, #16]\n\tldr r9, [r0, #24]\n\t" DSP_REQUANT("r2") DSP_REQUANT("r3")      \
        DSP_REQUANT("r4") "ldr r8, [r0, #12]\n\tldr r10, [r0, #20]\n\tldr r9, [r0, #28]\n\t" DSP_REQUANT("r5") \
            DSP_REQUANT("r6") DSP_REQUANT("r7") "add r0, r0, #32\n\tstr r0, [r12, #12]\n\t"

/* The routine for one group form; r0 holds the run on entry, kept at [sp, #4] under cols_end. */
#define DSP_BLOCKS_2X3(group, biases, requant)                                                                    \
    __asm__ volatile(".syntax unified\n\t"                                                                        \
                     "push {r0, r4-r11, lr}\n\t"                                                                  \
                     "ldr r8, [r0, #4]\n\t"                                                                       \
                     "push {r8}\n\t"                                                                              \
                     "ldr r12, [sp, #4]\n" /* the run: r12 keeps it from the output stage on */                   \
                     "1:\n\t"                                                                                     \
                     "ldr r0, [r12, #0]\n\t"                                                                      \
                     "ldr r1, [r12, #8]\n\t" biases "ldr r8, [r12, #52]\n\t"                                      \
                     "cmp r8, #2\n\t"                                                                             \
                     "beq 7f\n\t"                                                                                 \
                     "bhi 6f\n\t"                                                                                 \
                     "cmp r8, #1\n\t"                                                                             \
                     "beq 3f\n\t"                                                                                 \
                     ".p2align 2\n"                                                                               \
                     "2:\n\t" group "6:\n\t" group "7:\n\t" group "3:\n\t" group "ldr r8, [sp]\n\t"               \
                     "cmp r0, r8\n\t"                                                                             \
                     "bne 2b\n\t"                                                                                 \
                     "ldr r12, [sp, #4]\n\t"                                                                      \
                     "str r1, [r12, #8]\n\t" requant                                                              \
                     "bfi r2, r5, #8, #8\n\tbfi r2, r3, #16, #8\n\tbfi r2, r6, #24, #8\n\tbfi r4, r7, #8, #8\n\t" \
                     "ldrd r8, r9, [r12, #36]\n\t"                                                                \
                     "ssub8 lr, r2, r8\n\tsel r2, r2, r8\n\tssub8 lr, r2, r9\n\tsel r2, r9, r2\n\t"               \
                     "ssub8 lr, r4, r8\n\tsel r4, r4, r8\n\tssub8 lr, r4, r9\n\tsel r4, r9, r4\n\t"               \
                     "ldrd r8, r9, [r12, #24]\n\t"                                                                \
                     "ldr r10, [r12, #32]\n\t"                                                                    \
                     "ldr lr, [r12, #48]\n\t" /* pipelined behind the load before */                              \
                     "strh r2, [r8]\n\t"                                                                          \
                     "lsr r2, r2, #16\n\t"                                                                        \
                     "strh r2, [r8, r9]\n\t"                                                                      \
                     "strh r4, [r8, r10]\n\t"                                                                     \
                     "add r8, r8, #2\n\t"                                                                         \
                     "str r8, [r12, #24]\n\t"                                                                     \
                     "cmp r8, lr\n\t"                                                                             \
                     "bne 1b\n\t"                                                                                 \
                     "add sp, sp, #4\n\t"                                                                         \
                     "pop {r0, r4-r11, pc}\n\t")

#if EDGEC_UNALIGNED_ASM
static __attribute__((naked, noinline)) void dsp_blocks_2x3(dsp_block_run *run __attribute__((unused)))
{
    DSP_BLOCKS_2X3(DSP_GROUP_2X3, DSP_BIASES, DSP_REQUANT_PAIR);
}

static __attribute__((naked, noinline)) void dsp_blocks_2x3_wide(dsp_block_run *run __attribute__((unused)))
{
    DSP_BLOCKS_2X3(DSP_GROUP_2X3_WIDE, DSP_TABLE_BIASES, DSP_TABLE_REQUANT_PAIR);
}
#endif

/* What the output stage of a step needs besides the sums. */
typedef struct {
    const edgec_per_channel_quant *quant;
    edgec_output_stage stage;
    int short_requant;  /* every channel admits the short requantization */
    int wide;           /* the filter's taps are widened to int16 pairs (edgec_conv_s8_dsp_wide) */
    dsp_block_run *run; /* its per-call fields set */
} dsp_output;

/* The general output stage: any (multiplier, shift); channel c alone when has_c1 is 0; out[px]
 * NULL: pixel px is a repeat of an earlier one (a short last step). */
static void dsp_store_2x3(const int32_t sums[6], const dsp_output *o, int32_t c, int has_c1,
                          int8_t *const out[DSP_PIXELS])
{
    for (int32_t i = 0; i < 1 + has_c1; i++) {
        const int32_t m = o->quant->multiplier[c + i];
        const int32_t shift = o->quant->shift[c + i];
        for (int32_t px = 0; px < DSP_PIXELS; px++) {
            if (out[px] != NULL) {
                out[px][c + i] = edgec_requantize_s8(sums[DSP_PIXELS * i + px], m, shift, o->stage);
            }
        }
    }
}

/* Every output channel of a step's pixels (out[0] pixel a; out[1], out[2] NULL: a repeat). */
static DSP_ALWAYS_INLINE void dsp_conv_pixels(const int8_t *cols, int32_t groups, const int8_t *filter,
                                              const int32_t *bias, const dsp_output *o, int32_t out_c,
                                              int8_t *const out[DSP_PIXELS])
{
    int32_t c = 0;
#if EDGEC_UNALIGNED_ASM
    if (o->short_requant && out_c >= 2) {
        dsp_block_run *run = o->run;
        run->filter = filter;
        run->bias = bias;
        run->multiplier = o->quant->multiplier;
        run->shift = o->quant->shift;
        run->out = out[0];
        /* A repeated pixel stores the same bytes twice. */
        run->pixel_b = out[1] != NULL ? (int32_t)(out[1] - out[0]) : 0;
        run->pixel_c = out[2] != NULL ? (int32_t)(out[2] - out[0]) : run->pixel_b;
        run->out_end = out[0] + out_c / 2 * 2;
        (o->wide ? dsp_blocks_2x3_wide : dsp_blocks_2x3)(run);
        c = out_c / 2 * 2;
        filter += (o->wide ? 8 : 4) * groups * c;
    }
#endif
    for (; c < out_c; c += 2, filter += (o->wide ? 16 : 8) * groups) {
        const int has_c1 = c + 1 < out_c; /* an odd last channel pairs with a zero filter row */
        const int32_t *pair_bias = o->wide ? bias + 4 * c : bias + c; /* the table: 8 words a pair */
        int32_t sums[2 * DSP_PIXELS];
        for (int32_t px = 0; px < DSP_PIXELS; px++) {
            sums[px] = pair_bias[0];
            sums[DSP_PIXELS + px] = has_c1 ? pair_bias[1] : 0;
        }
        dsp_mac_2x3(filter, cols, groups, sums, o->wide);
        dsp_store_2x3(sums, o, c, has_c1, out);
    }
}

/* The steps of a pointwise layer (1x1, stride 1, unpadded, C_in = k a multiple of 4): output
 * pixel p reads input pixel p, no window walk; a short last step repeats its last pixel like
 * dsp_conv's loop. Not inlined: dsp_conv's general loop keeps its registers. */
static EDGEC_NOINLINE void dsp_pointwise_steps(int8_t *cols, const int8_t *input, int32_t k, int32_t groups,
                                               const int8_t *packed_filter, const int32_t *folded_bias,
                                               const dsp_output *o, int32_t out_c, int8_t *output, int32_t pixels)
{
    for (int32_t p = 0; p < pixels; p += DSP_PIXELS) {
        int8_t *out[DSP_PIXELS];
        for (int32_t column = 0; column < DSP_PIXELS; column++) {
            out[column] = p + column < pixels ? output + (p + column) * out_c : NULL;
            dsp_widen(cols + 8 * column, input + EDGEC_MIN(p + column, pixels - 1) * k, k);
        }
        dsp_conv_pixels(cols, groups, packed_filter, folded_bias, o, out_c, out);
    }
}

/* The steps of a first convolution (3x3, C_in 1-3, dilation 1): each field through dsp_stem_row
 * and the int8 row, then widened; a short last step repeats its last pixel like dsp_conv's loop.
 * Not inlined, for the reason dsp_pointwise_steps is not. */
static EDGEC_NOINLINE void dsp_stem_steps(int8_t *cols, int8_t *row, const conv_window *win, int32_t groups,
                                          const int8_t *packed_filter, const int32_t *folded_bias, const dsp_output *o,
                                          const edgec_dims *output_dims, int8_t *output)
{
    const int32_t out_c = output_dims->c;
    const int32_t pixels = output_dims->n * output_dims->h * output_dims->w;
    pixel_cursor px = { 0, 0, 0 };
    for (int32_t p = 0; p < pixels; p += DSP_PIXELS) {
        int8_t *out[DSP_PIXELS];
        for (int32_t column = 0; column < DSP_PIXELS; column++) {
            const int real = p + column < pixels;
            if (column > 0 && real) {
                pixel_next(&px, output_dims);
            }
            out[column] = real ? output + (p + column) * out_c : NULL;
            dsp_stem_row(row, win, px);
            dsp_widen(cols + 8 * column, row, 4 * groups);
        }
        pixel_next(&px, output_dims);
        dsp_conv_pixels(cols, groups, packed_filter, folded_bias, o, out_c, out);
    }
}

/* edgec_conv_s8_dsp (narrow) and _wide (wide_desc): packed_filter holds int8 taps and folded_bias
 * the biases, or with `wide` int16 taps and the channel table. The layer is unpacked here, in the
 * frame the pixels run under, not in the entry points (no stack of their own). */
static edgec_status dsp_conv(const edgec_conv_desc *narrow, const edgec_conv_dsp_wide_desc *wide_desc,
                             const int8_t *input, int8_t *output, int8_t *scratch)
{
    edgec_conv_layer l;
    const int8_t *packed_filter;
    const int32_t *folded_bias;
    const int wide = wide_desc != NULL;
    if (narrow != NULL) {
        EDGEC_CONV_LAYER_OF(narrow, l);
        packed_filter = narrow->filter;
        folded_bias = narrow->bias;
    } else if (wide_desc != NULL) {
        EDGEC_CONV_LAYER_OF(wide_desc, l);
        packed_filter = (const int8_t *)(const void *)wide_desc->wide_filter;
        folded_bias = wide_desc->channel_table;
    } else {
        return EDGEC_ARG_ERROR;
    }
    const edgec_conv_params *params = &l.params;
    const edgec_per_channel_quant *quant = &l.quant;
    const edgec_dims *input_dims = &l.input_dims;
    const edgec_dims *filter_dims = &l.filter_dims;
    const edgec_dims *output_dims = &l.output_dims;
    if (!packed_conv_args_valid(params, quant, input_dims, input, filter_dims, packed_filter, folded_bias, output_dims,
                                output, scratch)) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t k = filter_dims->h * filter_dims->w * filter_dims->c;
    const int32_t groups = (k + 3) / 4;
    const int32_t out_c = output_dims->c;
    const int32_t pixels = output_dims->n * output_dims->h * output_dims->w;
    const conv_window win = conv_window_make(params, input_dims, input, filter_dims, output_dims);
    dsp_output o;
    o.quant = quant;
    o.stage = edgec_output_stage_make(params->output_offset, params->act_min, params->act_max);
    o.short_requant = edgec_dsp_requant_all_short(quant->multiplier, quant->shift, out_c);
    o.wide = wide;
    /* Scratch: the step's int16 columns, interleaved per group; when C_in is not a multiple of 4
     * the receptive fields go through an int8 row after them, else straight into the columns. */
    const int direct = filter_dims->c % 4 == 0;
    int8_t *cols = scratch;
    int8_t *row = cols + DSP_COLUMN_BYTES * groups;
    pixel_cursor px = { 0, 0, 0 };
    dsp_block_run run;
    run.lows = edgec_dsp_bytes(params->act_min);
    run.highs = edgec_dsp_bytes(params->act_max);
    run.cols = cols;
    run.cols_end = cols + DSP_COLUMN_BYTES * groups;
    run.entry = groups & 3;
    run.round_base = edgec_dsp_round_base(params->output_offset);
    o.run = &run;

    if (direct && filter_dims->h == 1 && filter_dims->w == 1 && params->stride_h == 1 && params->stride_w == 1 &&
        params->pad_top == 0 && params->pad_left == 0 && input_dims->h == output_dims->h &&
        input_dims->w == output_dims->w) {
        dsp_pointwise_steps(cols, input, k, groups, packed_filter, folded_bias, &o, out_c, output, pixels);
        return EDGEC_OK;
    }
    if (!direct) {
        fill_run(row + k, 0, 4 * groups - k); /* the filter is zero there: any value does */
        if (filter_dims->h == 3 && filter_dims->w == 3 && filter_dims->c <= 3 && params->dilation_w == 1) {
            dsp_stem_steps(cols, row, &win, groups, packed_filter, folded_bias, &o, output_dims, output);
            return EDGEC_OK;
        }
    }
    for (int32_t p = 0; p < pixels; p += DSP_PIXELS) {
        int8_t *out[DSP_PIXELS];
        for (int32_t column = 0; column < DSP_PIXELS; column++) {
            /* A short last step repeats its last pixel in the remaining columns. */
            const int real = p + column < pixels;
            if (column > 0 && real) {
                pixel_next(&px, output_dims);
            }
            out[column] = real ? output + (p + column) * out_c : NULL;
            if (direct) {
                dsp_im2col_column(cols + 8 * column, &win, px);
            } else {
                im2col_row(row, &win, px);
                dsp_widen(cols + 8 * column, row, 4 * groups);
            }
        }
        pixel_next(&px, output_dims);
        dsp_conv_pixels(cols, groups, packed_filter, folded_bias, &o, out_c, out);
    }
    return EDGEC_OK;
}

edgec_status edgec_conv_s8_dsp(const edgec_conv_desc *desc, const int8_t *input, int8_t *output, int8_t *scratch)
{
    return desc == NULL ? EDGEC_ARG_ERROR : dsp_conv(desc, NULL, input, output, scratch);
}

edgec_status edgec_conv_s8_dsp_wide(const edgec_conv_dsp_wide_desc *desc, const int8_t *input, int8_t *output,
                                    int8_t *scratch)
{
    return desc == NULL ? EDGEC_ARG_ERROR : dsp_conv(NULL, desc, input, output, scratch);
}

#endif /* __ARM_FEATURE_DSP */

/* ==== Helium: 4 channels x 2 pixels per VMLADAVA micro-kernel step ============================ */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)

/*
 * The micro-kernel: a block of 4 channels at a pixel pair. Per group of 16 taps, the block's 64
 * filter bytes (16 per channel) and the two receptive fields' 16 bytes are loaded once each:
 * 128 MACs in 6 loads and 8 VMLADAVA. sums[0..3] hold the block's biases on entry; on return
 * sums[i] is channel i of pixel a, sums[4 + i] of pixel b, wrapped modulo 2^32 like the golden
 * int32 accumulator. mve_blocks_4x2 runs it, in assembly, for every full block of an optimised
 * build; this C form the rest.
 */
static void mve_mac_4x2(const int8_t *filter, const int8_t *row_a, const int8_t *row_b, int32_t groups, int32_t sums[8])
{
    for (int32_t i = 0; i < 4; i++) {
        sums[4 + i] = sums[i];
    }
    do {
        const int8x16_t xa = vldrbq_s8(row_a);
        const int8x16_t xb = vldrbq_s8(row_b);
        for (int32_t i = 0; i < 4; i++, filter += 16) {
            const int8x16_t w = vldrbq_s8(filter);
            sums[i] = vmladavaq_s8(sums[i], w, xa);
            sums[4 + i] = vmladavaq_s8(sums[4 + i], w, xb);
        }
        row_a += 16;
        row_b += 16;
    } while (--groups > 0);
}

/*
 * Channels c .. c + count - 1 (count <= 4) of a pixel pair from mve_mac_4x2's sums, one at a
 * time (pixel b, out_c bytes after a, only when has_b): the last block of a C_out that is not a
 * multiple of 4, and every block of an unoptimised build.
 */
static void mve_store_block(const int32_t sums[8], int32_t c, int32_t count, int has_b,
                            const edgec_per_channel_quant *quant, edgec_output_stage stage, int8_t *out_a,
                            int32_t out_c)
{
    for (int32_t i = 0; i < count; i++) {
        const int32_t m = quant->multiplier[c + i];
        const int32_t shift = quant->shift[c + i];
        out_a[c + i] = edgec_requantize_s8(sums[i], m, shift, stage);
        if (has_b) {
            out_a[out_c + c + i] = edgec_requantize_s8(sums[4 + i], m, shift, stage);
        }
    }
}

/* The assembly needs registers that an unoptimised build keeps for its frame. */
#if defined(__OPTIMIZE__)
/* What the mve_blocks_4x2 functions read and advance; their assembly addresses the fields by
 * offset and loads the runs of them it needs with one LDM (register order = field order). */
typedef struct {
    const int8_t *row_a;       /*  0 */
    const int8_t *row_b;       /*  4 */
    const int32_t *bias;       /*  8: the next block's */
    int32_t pairs;             /* 12: group pairs per block after the odd group, if any */
    const int32_t *multiplier; /* 16 */
    const int32_t *shift;      /* 20 */
    int8_t *out_a;             /* 24 */
    int8_t *out_b;             /* 28 */
    int32_t blocks;            /* 32: >= 1 */
    int32_t offset;            /* 36 */
    const int8_t *filter;      /* 40: the next block's */
    int32_t unused;            /* 44 */
    int32x4_t lo;              /* 48: act_min - offset in every lane */
    int32x4_t hi;              /* 64: act_max - offset */
} mve_block_run;

typedef char mve_block_run_layout[offsetof(mve_block_run, multiplier) == 16 && offsetof(mve_block_run, filter) == 40 &&
                                          offsetof(mve_block_run, lo) == 48
                                      ? 1
                                      : -1];

/* One group of 16 taps on its own: xa/xb in q0/q1, the four filter rows through q2/q3; each load
 * placed between two VMLADAVA (Helium overlaps instructions of different kinds). Its last load
 * is the next group's xa into q0, which MVE_GROUP_PAIRS expects there: past a block's last group
 * it reads the 16 bytes after row a, which are still scratch (row b's). */
#define MVE_GROUP                                                                     \
    "vldrb.u8 q0, [r3], #16\n\tvldrb.u8 q2, [r1], #16\n\tvmladava.s8 r0, q2, q0\n\t"  \
    "vldrb.u8 q1, [r5], #16\n\tvmladava.s8 r8, q2, q1\n\tvldrb.u8 q3, [r1], #16\n\t"  \
    "vmladava.s8 r2, q3, q0\n\tvldrb.u8 q2, [r1], #16\n\tvmladava.s8 r10, q3, q1\n\t" \
    "vldrb.u8 q3, [r1], #16\n\tvmladava.s8 r4, q2, q0\n\tvmladava.s8 r12, q2, q1\n\t" \
    "vmladava.s8 r6, q3, q0\n\tvldrb.u8 q0, [r3], #16\n\tvmladava.s8 lr, q3, q1\n\t"

/* Two groups per iteration (r9 counts them down), the first's xa already in q0, the second's
 * rows (q4, q5) and first filter row issued among the first's last VMLADAVA, and the next
 * iteration's xa loaded into q0 between two VMLADAVA (as in MVE_GROUP, past the last group it
 * reads row b's first bytes). */
#define MVE_PAIR_BODY(count)                                                          \
    "vldrb.u8 q2, [r1], #16\n\tvmladava.s8 r0, q2, q0\n\t"                            \
    "vldrb.u8 q1, [r5], #16\n\tvmladava.s8 r8, q2, q1\n\tvldrb.u8 q3, [r1], #16\n\t"  \
    "vmladava.s8 r2, q3, q0\n\tvldrb.u8 q2, [r1], #16\n\tvmladava.s8 r10, q3, q1\n\t" \
    "vldrb.u8 q3, [r1], #16\n\tvmladava.s8 r4, q2, q0\n\tvldrb.u8 q4, [r3], #16\n\t"  \
    "vmladava.s8 r12, q2, q1\n\tvldrb.u8 q2, [r1], #16\n\tvmladava.s8 r6, q3, q0\n\t" \
    "vldrb.u8 q5, [r5], #16\n\tvmladava.s8 lr, q3, q1\n\tvldrb.u8 q0, [r3], #16\n\t"  \
    "vmladava.s8 r0, q2, q4\n\tvldrb.u8 q1, [r1], #16\n\tvmladava.s8 r8, q2, q5\n\t"  \
    "vldrb.u8 q2, [r1], #16\n\tvmladava.s8 r2, q1, q4\n\tvldrb.u8 q3, [r1], #16\n\t"  \
    "vmladava.s8 r10, q1, q5\n\tvmladava.s8 r4, q2, q4\n\t" count                     \
    "vmladava.s8 r12, q2, q5\n\tvmladava.s8 r6, q3, q4\n\tvmladava.s8 lr, q3, q5\n\t"
#define MVE_GROUP_PAIRS "1:\n\t" MVE_PAIR_BODY("subs r9, r9, #1\n\t") "bne 1b\n"
/* The pairs two per iteration (a taken branch costs more than the count), for r9 >= 2: an odd
 * count enters at the second. */
#define MVE_GROUP_QUADS                             \
    "lsrs r9, r9, #1\n\tadc r9, r9, #0\n\tbcs 4f\n" \
    "1:\n\t" MVE_PAIR_BODY("") "4:\n\t" MVE_PAIR_BODY("subs r9, r9, #1\n\t") "bne 1b\n"

/* Odd groups per block: one group first, then the pairs (none for a single group). */
#define MVE_GROUPS_ODD MVE_GROUP "cmp r9, #0\n\tbeq 3f\n" MVE_GROUP_PAIRS "3:\n\t"
#define MVE_GROUPS_EVEN "vldrb.u8 q0, [r3], #16\n\t" MVE_GROUP_PAIRS
#define MVE_GROUPS_ODD_QUADS MVE_GROUP MVE_GROUP_QUADS
#define MVE_GROUPS_EVEN_QUADS "vldrb.u8 q0, [r3], #16\n\t" MVE_GROUP_QUADS

/* edgec_mve_requantize then edgec_mve_output of the block's sums, pixel a in q0, pixel b in q1
 * (multiplier q2, shift q3, bounds q6/q7, offset r6; q4/q5 scratch), then the stores. Pixel b's
 * sums move into q1 between the constants' loads, and the two pixels' steps alternate so that
 * the multiplies and stores issue between the other vector operations (Helium overlaps
 * instructions of different kinds). _RIGHT: every shift <= 0, so the shift is its own right
 * part and there is no left shift; _STRICT: every shift < 0, so the rounding fixup's AND with
 * the shift keeps just the sign bit (a shift right by 31 alone). */
#define MVE_OUTPUT_HEAD                                                         \
    "vqrdmulh.s32 q0, q0, q2\n\tvand q4, q0, q3\n\tvqrdmulh.s32 q1, q1, q2\n\t" \
    "vshr.s32 q4, q4, #31\n\tvand q5, q1, q3\n\tvqadd.s32 q0, q0, q4\n\tvshr.s32 q5, q5, #31\n\t"
#define MVE_OUTPUT_HEAD_STRICT                                                       \
    "vqrdmulh.s32 q0, q0, q2\n\tvshr.s32 q4, q0, #31\n\tvqrdmulh.s32 q1, q1, q2\n\t" \
    "vshr.s32 q5, q1, #31\n\tvqadd.s32 q0, q0, q4\n\t"
#define MVE_OUTPUT_TAIL                                                       \
    "vrshl.s32 q0, q0, q3\n\tvqadd.s32 q1, q1, q5\n\tvmax.s32 q0, q0, q6\n\t" \
    "vrshl.s32 q1, q1, q3\n\tvmin.s32 q0, q0, q7\n\tvmax.s32 q1, q1, q6\n\t"  \
    "vadd.i32 q0, q0, r6\n\tvmin.s32 q1, q1, q7\n\tvstrb.32 q0, [r3], #4\n\t" \
    "vadd.i32 q1, q1, r6\n\tvstrb.32 q1, [r4], #4\n\t"
#define MVE_OUTPUT_RIGHT MVE_OUTPUT_HEAD MVE_OUTPUT_TAIL
#define MVE_OUTPUT_STRICT MVE_OUTPUT_HEAD_STRICT MVE_OUTPUT_TAIL
/* the general form: q3 = min(shift, 0) and q5 = max(shift, 0), the saturating left shift first */
#define MVE_OUTPUT                                                      \
    "vmov.i32 q4, #0\n\tvmax.s32 q5, q3, q4\n\tvmin.s32 q3, q3, q4\n\t" \
    "vqshl.s32 q0, q0, q5\n\tvqshl.s32 q1, q1, q5\n\t" MVE_OUTPUT_RIGHT

/*
 * Every full block of 4 channels of a pixel pair: the biases, the groups (mve_mac_4x2's loop),
 * then the output stage on one vector per pixel (lane = channel), in one assembly loop over the
 * blocks -- in C, GCC spilled the loop's pointers and reloaded the stage's constants per block.
 * The filter pointer stays in r1, the others are advanced in the run (r7, which may be the frame
 * pointer, is left alone). groups: MVE_GROUPS_ODD/_EVEN; output: MVE_OUTPUT/_RIGHT.
 */
#define MVE_BLOCKS_4X2(groups, output)                                                                             \
    __asm__ volatile("vldrw.u32 q6, [%[run], #48]\n\t"                                                             \
                     "vldrw.u32 q7, [%[run], #64]\n\t"                                                             \
                     "ldr r1, [%[run], #40]\n"                                                                     \
                     "2:\n\t"                                                                                      \
                     "ldm %[run], {r3, r5, r9}\n\t"                                                                \
                     "ldm r9, {r8, r10, r12, lr}\n\t"                                                              \
                     "ldm r9!, {r0, r2, r4, r6}\n\t"                                                               \
                     "str r9, [%[run], #8]\n\t"                                                                    \
                     "ldr r9, [%[run], #12]\n\t" groups "vmov q0[2], q0[0], r0, r4\n\t"                            \
                     "vmov q0[3], q0[1], r2, r6\n\t"                                                               \
                     "add r9, %[run], #16\n\t"                                                                     \
                     "ldm r9, {r0, r2, r3, r4, r5, r6}\n\t"                                                        \
                     "vldrw.u32 q2, [r0], #16\n\t"                                                                 \
                     "vmov q1[2], q1[0], r8, r12\n\t"                                                              \
                     "vldrw.u32 q3, [r2], #16\n\t"                                                                 \
                     "vmov q1[3], q1[1], r10, lr\n\t" output "subs r5, r5, #1\n\t"                                 \
                     "stm r9, {r0, r2, r3, r4, r5}\n\t"                                                            \
                     "bne 2b"                                                                                      \
                     :                                                                                             \
                     : [run] "r"(run)                                                                              \
                     : "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r8", "r9", "r10", "r12", "lr", "q0", "q1", "q2", \
                       "q3", "q4", "q5", "q6", "q7", "memory", "cc")

static void mve_blocks_4x2_odd(mve_block_run *run)
{
    MVE_BLOCKS_4X2(MVE_GROUPS_ODD, MVE_OUTPUT);
}

static void mve_blocks_4x2_even(mve_block_run *run)
{
    MVE_BLOCKS_4X2(MVE_GROUPS_EVEN, MVE_OUTPUT);
}

/* The same for a layer whose shifts are all <= 0: five instructions fewer per block. */
static void mve_blocks_4x2_odd_right(mve_block_run *run)
{
    MVE_BLOCKS_4X2(MVE_GROUPS_ODD, MVE_OUTPUT_RIGHT);
}

static void mve_blocks_4x2_even_right(mve_block_run *run)
{
    MVE_BLOCKS_4X2(MVE_GROUPS_EVEN, MVE_OUTPUT_RIGHT);
}

/* ... and for one whose shifts are all < 0: two instructions fewer again. */
static void mve_blocks_4x2_odd_strict(mve_block_run *run)
{
    MVE_BLOCKS_4X2(MVE_GROUPS_ODD, MVE_OUTPUT_STRICT);
}

static void mve_blocks_4x2_even_strict(mve_block_run *run)
{
    MVE_BLOCKS_4X2(MVE_GROUPS_EVEN, MVE_OUTPUT_STRICT);
}

/* ... with at least two group pairs per block: two per iteration. */
static void mve_blocks_4x2_odd_strict_quads(mve_block_run *run)
{
    MVE_BLOCKS_4X2(MVE_GROUPS_ODD_QUADS, MVE_OUTPUT_STRICT);
}

static void mve_blocks_4x2_even_strict_quads(mve_block_run *run)
{
    MVE_BLOCKS_4X2(MVE_GROUPS_EVEN_QUADS, MVE_OUTPUT_STRICT);
}
#endif

/* im2col_row with the window's sizes held in locals: copy_run's assembly clobbers memory, so
 * read through `win` they would be reloaded for every filter row. */
static void mve_im2col_row(int8_t *row, const conv_window *win, pixel_cursor px)
{
    const int8_t *src = window_inside(win, px);
    if (src == NULL) {
        im2col_pixel(row, &int8_row, win, px);
        return;
    }
    const int32_t k_h = win->k_h;
    const int32_t run_len = win->run_len;
    const int32_t row_step = win->row_step;
    for (int32_t ky = 0; ky < k_h; ky++, row += run_len, src += row_step) {
        copy_run(row, src, run_len);
    }
}

static edgec_status mve_conv(const edgec_conv_params *params, const edgec_per_channel_quant *quant,
                             const edgec_dims *input_dims, const int8_t *input, const edgec_dims *filter_dims,
                             const int8_t *packed_filter, const int32_t *folded_bias, const edgec_dims *output_dims,
                             int8_t *output, int8_t *scratch)
{
    if (!packed_conv_args_valid(params, quant, input_dims, input, filter_dims, packed_filter, folded_bias, output_dims,
                                output, scratch)) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t k = filter_dims->h * filter_dims->w * filter_dims->c;
    const int32_t groups = (k + 15) / 16;
    const int32_t row_len = 16 * groups;
    const int32_t out_c = output_dims->c;
    const int32_t pixels = output_dims->n * output_dims->h * output_dims->w;
    const conv_window win = conv_window_make(params, input_dims, input, filter_dims, output_dims);
    const edgec_output_stage stage = edgec_output_stage_make(params->output_offset, params->act_min, params->act_max);
    int8_t *row_a = scratch; /* two receptive fields of row_len int8 */
    int8_t *row_b = scratch + row_len;
    pixel_cursor px = { 0, 0, 0 };
#if defined(__OPTIMIZE__)
    mve_block_run run;
    run.lo = vdupq_n_s32(stage.lo);
    run.hi = vdupq_n_s32(stage.hi);
    run.pairs = groups / 2;
    run.offset = stage.offset;
    run.unused = 0;
    int right_shifts_only = 1;
    int strict_right_shifts = 1;
    for (int32_t c = 0; c < out_c; c++) {
        right_shifts_only &= quant->shift[c] <= 0;
        strict_right_shifts &= quant->shift[c] < 0;
    }
    const int quads = strict_right_shifts && groups / 2 >= 2;
    void (*const blocks_4x2)(mve_block_run *) =
        quads             ? (groups % 2 != 0 ? mve_blocks_4x2_odd_strict_quads : mve_blocks_4x2_even_strict_quads)
        : groups % 2 != 0 ? (strict_right_shifts ? mve_blocks_4x2_odd_strict
                             : right_shifts_only ? mve_blocks_4x2_odd_right
                                                 : mve_blocks_4x2_odd)
                          : (strict_right_shifts ? mve_blocks_4x2_even_strict
                             : right_shifts_only ? mve_blocks_4x2_even_right
                                                 : mve_blocks_4x2_even);
#endif

    fill_run(row_a + k, 0, row_len - k); /* the filter is zero there */
    fill_run(row_b + k, 0, row_len - k);
    for (int32_t p = 0; p < pixels; p += 2) {
        const int has_b = p + 1 < pixels;
        int8_t *out_a = output + p * out_c;
        mve_im2col_row(row_a, &win, px);
        pixel_next(&px, output_dims);
        if (has_b) {
            mve_im2col_row(row_b, &win, px);
            pixel_next(&px, output_dims);
        }
        int32_t c = 0;
#if defined(__OPTIMIZE__)
        if (out_c >= 4) {
            /* A lone last pixel is its own pixel b: the same bytes stored twice. */
            run.filter = packed_filter;
            run.bias = folded_bias;
            run.multiplier = quant->multiplier;
            run.shift = quant->shift;
            run.out_a = out_a;
            run.out_b = has_b ? out_a + out_c : out_a;
            run.row_a = row_a;
            run.row_b = has_b ? row_b : row_a;
            run.blocks = out_c / 4;
            blocks_4x2(&run);
            c = out_c / 4 * 4;
        }
#endif
        for (; c < out_c; c += 4) { /* the filter's rows past C_out are zero */
            int32_t sums[8];
            memcpy(sums, folded_bias + c, 4 * sizeof(int32_t)); /* zero-padded to the block */
            mve_mac_4x2(packed_filter + 16 * groups * c, row_a, has_b ? row_b : row_a, groups, sums);
            mve_store_block(sums, c, EDGEC_MIN(4, out_c - c), has_b, quant, stage, out_a, out_c);
        }
    }
    return EDGEC_OK;
}

edgec_status edgec_conv_s8_mve(const edgec_conv_desc *desc, const int8_t *input, int8_t *output, int8_t *scratch)
{
    CONV_ENTRY(desc, mve_conv, desc->filter, desc->bias, input, output, scratch);
}

#endif /* __ARM_FEATURE_MVE */
