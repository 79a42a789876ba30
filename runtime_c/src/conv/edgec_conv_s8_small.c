/*
 * edgec_conv_s8_small.c -- convolutions with a small receptive field (K = kernel_h * kernel_w *
 * input_c taps, at most 28): the first convolution of an image model (1-3 input channels) and
 * pointwise layers of 4-16 channels, on cores without the packed kernels (Cortex-M0+, M3), where
 * the generic portable kernel walks every window with run-time bounds (16.5 instructions per MAC
 * on MobileNet's 3x3x3 stem on a Cortex-M3). Each variant has its window (kernel_h, kernel_w,
 * input_c) as compile-time constants (SMALL_CONV_VARIANT below: one function per window shape, the
 * linker keeps only those a model calls), so im2col and the tap loop unroll completely. Per step
 * SMALL_PIXELS output pixels' fields are widened to int16 pairs once, then each channel pair runs
 * over them with 8 accumulators. Golden: edgec.ops.conv.conv2d_s8 (groups 1, dilation 1).
 * Design and figures: docs/specialised-kernels.md.
 */
#include <string.h>

#include "../support/edgec_support.h"

/* The longest receptive field, K rounded up to a multiple of 4, of the variants below. */
#define SMALL_K4_MAX 28

#if defined(__GNUC__)
#define SMALL_INLINE inline __attribute__((always_inline))
#else
#define SMALL_INLINE inline
#endif

/* SXTB16 and SMLAD in C: the layers these kernels serve run on cores without the DSP extension. */
static inline int32_t small_sxtb16(int32_t x)
{
    const uint32_t u = (uint32_t)x;
    return (int32_t)(((uint32_t)(uint16_t)(int16_t)(int8_t)(u & 0xFFu)) |
                     ((uint32_t)(uint16_t)(int16_t)(int8_t)((u >> 16) & 0xFFu) << 16));
}

static inline int32_t small_sxtb16_ror8(int32_t x)
{
    const uint32_t u = (uint32_t)x;
    return small_sxtb16((int32_t)((u >> 8) | (u << 24)));
}

/* acc + a.lo * b.lo + a.hi * b.hi, wrapping modulo 2^32 like SMLAD (which sets Q, never saturates). */
static inline int32_t small_smlad(int32_t a, int32_t b, int32_t acc)
{
    const int32_t lo = (int32_t)(int16_t)((uint32_t)a & 0xFFFFu) * (int32_t)(int16_t)((uint32_t)b & 0xFFFFu);
    const int32_t hi = (int32_t)(int16_t)((uint32_t)a >> 16) * (int32_t)(int16_t)((uint32_t)b >> 16);
    return (int32_t)((uint32_t)acc + (uint32_t)lo + (uint32_t)hi);
}

/* The channel table's r - 1 of every channel: the short requantization's shifts (1..23). */
static int small_table_valid(const int32_t *table, int32_t output_c)
{
    for (int32_t c = 0; c < output_c; c++) {
        const int32_t r1 = table[8 * (c / 2) + 6 + c % 2];
        if (r1 < 1 || r1 > 23) {
            return 0;
        }
    }
    return 1;
}

static int small_desc_valid(const edgec_conv_small_desc *d, const int8_t *input, const int8_t *output, int32_t k_h,
                            int32_t k_w, int32_t c_in)
{
    if (!d || !input || !output || !d->filter || !d->channel_table) {
        return 0;
    }
    if (d->kernel_h != k_h || d->kernel_w != k_w || d->input_c != c_in || d->batches < 1 || d->input_h < 1 ||
        d->input_w < 1 || d->output_h < 1 || d->output_w < 1 || d->output_c < 1 || d->stride_h < 1 || d->stride_w < 1 ||
        d->pad_top < 0 || d->pad_left < 0) {
        return 0;
    }
    if ((int64_t)d->batches * d->input_h * d->input_w * d->input_c > INT32_MAX ||
        (int64_t)d->batches * d->output_h * d->output_w * d->output_c > INT32_MAX) {
        return 0;
    }
    return edgec_conv_axis_valid(d->input_h, d->output_h, k_h, d->stride_h, d->pad_top, 1) &&
           edgec_conv_axis_valid(d->input_w, d->output_w, k_w, d->stride_w, d->pad_left, 1) &&
           d->input_offset >= -127 && d->input_offset <= 128 && edgec_act_range_valid(d->act_min, d->act_max) &&
           small_table_valid(d->channel_table, d->output_c);
}

/* The output pixel a step computes, and where its receptive field starts. */
typedef struct {
    int32_t b;
    int32_t oy;
    int32_t ox;
} small_pixel;

static void small_pixel_next(small_pixel *px, const edgec_conv_small_desc *d)
{
    if (++px->ox == d->output_w) {
        px->ox = 0;
        if (++px->oy == d->output_h) {
            px->oy = 0;
            ++px->b;
        }
    }
}

/*
 * The receptive field of output pixel px (k_h * k_w * c_in bytes in OHWI order) into `row`; taps
 * outside the input read the input zero point (the input offset is folded into the bias, so they
 * add nothing). Inside the input, a filter row's taps are one run of k_w * c_in bytes.
 */
static SMALL_INLINE void small_im2col(int8_t *row, const edgec_conv_small_desc *d, const int8_t *input, small_pixel px,
                                      int32_t k_h, int32_t k_w, int32_t c_in)
{
    const int32_t in_row = d->input_w * c_in;
    const int32_t iy0 = px.oy * d->stride_h - d->pad_top;
    const int32_t ix0 = px.ox * d->stride_w - d->pad_left;
    const int8_t *image = input + px.b * d->input_h * in_row;
    if (iy0 >= 0 && iy0 + k_h <= d->input_h && ix0 >= 0 && ix0 + k_w <= d->input_w) {
        const int8_t *src = image + iy0 * in_row + ix0 * c_in;
        for (int32_t ky = 0; ky < k_h; ky++) {
            memcpy(row + ky * k_w * c_in, src + ky * in_row, (size_t)(k_w * c_in));
        }
        return;
    }
    const int8_t pad = (int8_t)-d->input_offset;
    for (int32_t ky = 0; ky < k_h; ky++) {
        const int32_t iy = iy0 + ky;
        for (int32_t kx = 0; kx < k_w; kx++) {
            const int32_t ix = ix0 + kx;
            int8_t *dst = row + (ky * k_w + kx) * c_in;
            if (iy >= 0 && iy < d->input_h && ix >= 0 && ix < d->input_w) {
                memcpy(dst, image + iy * in_row + ix * c_in, (size_t)c_in);
            } else {
                memset(dst, pad, (size_t)c_in);
            }
        }
    }
}

/* The int8 field widened for SMLAD: each group of 4 taps (x0..x3) as the pairs (x0, x2), (x1, x3),
 * the order the descriptor's filter holds its int16 taps in. */
static SMALL_INLINE void small_widen(int32_t *col, const int8_t *row, int32_t k4)
{
    for (int32_t g = 0; g < k4 / 4; g++) {
        int32_t x;
        memcpy(&x, row + 4 * g, 4);
        col[2 * g] = small_sxtb16(x);
        col[2 * g + 1] = small_sxtb16_ror8(x);
    }
}

#if defined(__GNUC__) && !defined(__clang__)
#define SMALL_UNROLL _Pragma("GCC unroll 16")
#else
#define SMALL_UNROLL
#endif

/*
 * The short requantization (edgec_dsp_requantize, see edgec_support.h) from a channel table's
 * multiplier m, round_high and r1 = r - 1, saturated to int8 and clamped: requantize(x) + offset
 * exactly, for the channels it admits (the unit chooses this kernel only when all do).
 */
static SMALL_INLINE int32_t small_requant(int32_t x, int32_t m, int32_t round_high, int32_t r1, int32_t lo, int32_t hi)
{
    const uint32_t low = ((uint32_t)x & 0x80000000u) | 0x40000000u;
    const int32_t high = round_high + (x >> 31);
    const uint64_t sum = (((uint64_t)(uint32_t)high << 32) | low) + (uint64_t)((int64_t)x * m);
    int32_t y = (int32_t)(uint32_t)(sum >> 32) >> r1;
    y = EDGEC_MIN(EDGEC_MAX(y, INT8_MIN), INT8_MAX);
    y = y < lo ? lo : y;
    return y > hi ? hi : y;
}

/* Output pixels per step: their widened fields stay on the stack while every channel is computed. */
#define SMALL_PIXELS 4

/* The step's outputs of one channel: the short requantization with the channel table's constants
 * of that channel, t[2] (multiplier), t[4] (round_high), t[6] (r - 1). */
static SMALL_INLINE void small_store(int32_t a0, int32_t a1, int32_t a2, int32_t a3, const int32_t *t,
                                     int8_t *const out[SMALL_PIXELS], int32_t c, int32_t lo, int32_t hi)
{
    const int32_t m = t[2], round_high = t[4], r1 = t[6];
    out[0][c] = (int8_t)small_requant(a0, m, round_high, r1, lo, hi);
    out[1][c] = (int8_t)small_requant(a1, m, round_high, r1, lo, hi);
    out[2][c] = (int8_t)small_requant(a2, m, round_high, r1, lo, hi);
    out[3][c] = (int8_t)small_requant(a3, m, round_high, r1, lo, hi);
}

/*
 * Output channels c and c + 1 of the step's pixels: their filter rows (k4 / 2 words each, a zero
 * row after an odd last channel) against each pixel's widened field, 8 accumulators; t points at
 * the pair's 8 channel-table words (biases, multipliers, round_high, r - 1).
 */
static SMALL_INLINE void small_pair(int32_t cols[SMALL_PIXELS][SMALL_K4_MAX / 2], const int16_t *filter,
                                    const int32_t *t, int8_t *const out[SMALL_PIXELS], int32_t c, int has_c1,
                                    int32_t k4, int32_t lo, int32_t hi)
{
    int32_t a0 = t[0], a1 = a0, a2 = a0, a3 = a0;
    int32_t b0 = t[1], b1 = b0, b2 = b0, b3 = b0;
    SMALL_UNROLL
    for (int32_t j = 0; j < k4 / 2; j++) {
        int32_t w, v, x;
        memcpy(&w, filter + 2 * j, 4);
        memcpy(&v, filter + k4 + 2 * j, 4);
        x = cols[0][j];
        a0 = small_smlad(w, x, a0);
        b0 = small_smlad(v, x, b0);
        x = cols[1][j];
        a1 = small_smlad(w, x, a1);
        b1 = small_smlad(v, x, b1);
        x = cols[2][j];
        a2 = small_smlad(w, x, a2);
        b2 = small_smlad(v, x, b2);
        x = cols[3][j];
        a3 = small_smlad(w, x, a3);
        b3 = small_smlad(v, x, b3);
    }
    small_store(a0, a1, a2, a3, t, out, c, lo, hi);
    if (has_c1) {
        small_store(b0, b1, b2, b3, t + 1, out, c + 1, lo, hi);
    }
}

/* Every step of the layer: SMALL_PIXELS output pixels' fields widened, then all their channels. */
static SMALL_INLINE void small_steps(const edgec_conv_small_desc *d, const int8_t *input, int8_t *output, int32_t k_h,
                                     int32_t k_w, int32_t c_in)
{
    const int32_t k4 = (k_h * k_w * c_in + 3) / 4 * 4;
    int8_t row[SMALL_K4_MAX];
    int32_t cols[SMALL_PIXELS][SMALL_K4_MAX / 2];
    memset(row, 0, sizeof(row)); /* the taps past K: the filter is zero there */
    const int32_t pixels = d->batches * d->output_h * d->output_w;
    const int32_t out_c = d->output_c, lo = d->act_min, hi = d->act_max;
    const int pointwise = k_h == 1 && k_w == 1 && c_in % 4 == 0 && d->stride_h == 1 && d->stride_w == 1 &&
                          d->pad_top == 0 && d->pad_left == 0 && d->input_h == d->output_h && d->input_w == d->output_w;
    small_pixel px = { 0, 0, 0 };
    for (int32_t p = 0; p < pixels; p += SMALL_PIXELS) {
        int8_t *out[SMALL_PIXELS];
        for (int32_t i = 0; i < SMALL_PIXELS; i++) {
            /* A short last step repeats its last pixel: the same bytes stored twice. */
            const int32_t q = EDGEC_MIN(p + i, pixels - 1);
            out[i] = output + q * out_c;
            if (pointwise) {
                small_widen(cols[i], input + q * c_in, k4);
            } else {
                small_im2col(row, d, input, px, k_h, k_w, c_in);
                small_widen(cols[i], row, k4);
                if (p + i + 1 < pixels) {
                    small_pixel_next(&px, d);
                }
            }
        }
        const int16_t *filter = d->filter;
        const int32_t *t = d->channel_table;
        for (int32_t c = 0; c < out_c; c += 2, filter += 2 * k4, t += 8) {
            small_pair(cols, filter, t, out, c, c + 1 < out_c, k4, lo, hi);
        }
    }
}

/* The kernel for one window shape (inlined into each variant with its constants). */
static SMALL_INLINE edgec_status small_conv(const edgec_conv_small_desc *d, const int8_t *input, int8_t *output,
                                            int32_t k_h, int32_t k_w, int32_t c_in)
{
    if (!small_desc_valid(d, input, output, k_h, k_w, c_in)) {
        return EDGEC_ARG_ERROR;
    }
    small_steps(d, input, output, k_h, k_w, c_in);
    return EDGEC_OK;
}

/* One variant: edgec_conv_s8_small_<k_h>x<k_w>x<c_in> (edgec.ops.conv_small.WINDOWS lists them). */
#define SMALL_CONV_VARIANT(k_h, k_w, c_in)                                                                          \
    edgec_status edgec_conv_s8_small_##k_h##x##k_w##x##c_in(const edgec_conv_small_desc *desc, const int8_t *input, \
                                                            int8_t *output)                                         \
    {                                                                                                               \
        return small_conv(desc, input, output, k_h, k_w, c_in);                                                     \
    }

SMALL_CONV_VARIANT(3, 3, 1)
SMALL_CONV_VARIANT(3, 3, 2)
SMALL_CONV_VARIANT(3, 3, 3)
SMALL_CONV_VARIANT(1, 1, 4)
SMALL_CONV_VARIANT(1, 1, 8)
SMALL_CONV_VARIANT(1, 1, 12)
SMALL_CONV_VARIANT(1, 1, 16)
