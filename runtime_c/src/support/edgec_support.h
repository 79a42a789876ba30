/*
 * edgec_support.h -- helpers shared by the kernels (internal, header-only, static inline).
 * Code generation copies this header next to only the kernel sources a model uses, so it must
 * stay self-contained: it includes <stdint.h>, the public edgec_nn.h and, on Arm cores with the
 * DSP extension or Helium, the compiler's own arm_acle.h / arm_mve.h; nothing else, and it has no
 * companion .c file.
 *
 * The fixed-point part mirrors edgec/numerics.py exactly. Written without undefined behaviour:
 * shifts of negative values use the implementation-defined arithmetic right shift every Arm and
 * host compiler provides, and left shifts that may wrap go through uint32_t.
 */
#ifndef EDGEC_SUPPORT_H
#define EDGEC_SUPPORT_H

#include <stdint.h>

#include "edgec_nn.h"

/* Tensor dimensions in NHWC order (the convolution kernels' internal view). */
typedef struct {
    int32_t n;
    int32_t h;
    int32_t w;
    int32_t c;
} edgec_dims;

/* Per-output-channel requantization: arrays of C_out entries (in flash). */
typedef struct {
    const int32_t *multiplier;
    const int32_t *shift;
} edgec_per_channel_quant;

#define EDGEC_MAX(a, b) ((a) > (b) ? (a) : (b))
#define EDGEC_MIN(a, b) ((a) < (b) ? (a) : (b))

/* Keeps a register-heavy loop out of its caller, whose frame would otherwise hold the loop's
 * spills for the whole call (stack is RAM). Only a hint: other compilers may inline anyway. */
#if defined(__GNUC__)
#define EDGEC_NOINLINE __attribute__((noinline))
#else
#define EDGEC_NOINLINE
#endif

/* Keeps GCC from reordering the functions so marked against each other: they are emitted in the
 * order they are defined (the layout a direct-mapped instruction cache sees). clang keeps its own
 * order. */
#if defined(__GNUC__) && !defined(__clang__)
#define EDGEC_NO_REORDER __attribute__((no_reorder))
#else
#define EDGEC_NO_REORDER
#endif

/*
 * 1 where the DSP assembly routines may run: they read and write words and halfwords of int8
 * data at any alignment (LDR, STR, STRH), which Cortex-M allows unless the build forbids it.
 * -mno-unaligned-access (for memory or a CCR.UNALIGN_TRP setting that faults on unaligned access;
 * also clang's bare-metal default) leaves __ARM_FEATURE_UNALIGNED undefined, and then their C
 * forms run, which read through memcpy (byte loads where unaligned access is not allowed).
 * Decided at compile time: a default build's instructions are unchanged. The Helium routines
 * need no switch: they move int8 data with byte-element VLDRB/VSTRB and load words only from
 * int32 arrays and their own aligned structures.
 */
#if defined(__ARM_FEATURE_UNALIGNED)
#define EDGEC_UNALIGNED_ASM 1
#else
#define EDGEC_UNALIGNED_ASM 0
#endif

/* (a * m + 2^30) >> 31 on the 64-bit product, truncated to int32. */
static inline int32_t edgec_doubling_high_mult_no_sat(int32_t a, int32_t m)
{
    const int64_t product = (int64_t)a * (int64_t)m + ((int64_t)1 << 30);
    return (int32_t)(product >> 31);
}

/* Shift right by `exponent` (0..31), rounding half away from zero. */
static inline int32_t edgec_divide_by_power_of_two(int32_t x, int32_t exponent)
{
    const int32_t mask = (int32_t)((1u << exponent) - 1u);
    const int32_t remainder = x & mask;
    int32_t result = x >> exponent;
    const int32_t threshold = (mask >> 1) + (result < 0 ? 1 : 0);
    if (remainder > threshold) {
        result += 1;
    }
    return result;
}

/* x * 2^left saturated to int32 (0 <= left <= 31): what VQSHL computes. */
static inline int32_t edgec_saturating_left_shift(int32_t x, int32_t left)
{
    if (x > (INT32_MAX >> left)) {
        return INT32_MAX;
    }
    if (x < (INT32_MIN >> left)) {
        return INT32_MIN;
    }
    return (int32_t)((uint32_t)x << left);
}

/* arm_nn_requantize, double-rounding mode, the left shift saturating: CMSIS-NN's int32
 * x * (1 << left) overflows (undefined) for a large effective scale; saturating gives the value
 * the real arithmetic saturates to and equals CMSIS-NN wherever CMSIS-NN is defined. */
static inline int32_t edgec_requantize(int32_t x, int32_t multiplier, int32_t shift)
{
    if (shift > 0) {
        return edgec_doubling_high_mult_no_sat(edgec_saturating_left_shift(x, shift), multiplier);
    }
    return edgec_divide_by_power_of_two(edgec_doubling_high_mult_no_sat(x, multiplier), -shift);
}

/* A recurrent layer's sizes the kernels index in int32: at most 65535 features, and the sequence
 * and weight offsets (4 gate blocks) within INT32_MAX. */
static inline int edgec_recurrent_shape_valid(int32_t batches, int32_t time_steps, int32_t input_size,
                                              int32_t hidden_size)
{
    const int64_t widest = EDGEC_MAX(input_size, hidden_size);
    return batches >= 1 && time_steps >= 1 && input_size >= 1 && hidden_size >= 1 && input_size <= 65535 &&
           hidden_size <= 65535 && (int64_t)batches * time_steps * widest <= INT32_MAX &&
           (int64_t)4 * hidden_size * widest <= INT32_MAX;
}

static inline int8_t edgec_clamp_to_s8(int32_t x, int32_t act_min, int32_t act_max)
{
    x = EDGEC_MAX(x, act_min);
    x = EDGEC_MIN(x, act_max);
    return (int8_t)x;
}

/* ---- Output stage --------------------------------------------------------------------------- */

/*
 * y = clamp(r + offset, act_min, act_max), computed as clamp(r, act_min - offset,
 * act_max - offset) + offset: the same result, but the int32 addition cannot overflow even when
 * r, a requantized value, is near INT32_MIN/MAX. Make one per call with edgec_output_stage_make.
 */
typedef struct {
    int32_t lo;     /* act_min - offset */
    int32_t hi;     /* act_max - offset */
    int32_t offset; /* the output zero point */
} edgec_output_stage;

static inline edgec_output_stage edgec_output_stage_make(int32_t offset, int32_t act_min, int32_t act_max)
{
    edgec_output_stage stage;
    stage.lo = act_min - offset;
    stage.hi = act_max - offset;
    stage.offset = offset;
    return stage;
}

static inline int8_t edgec_output_s8(edgec_output_stage stage, int32_t r)
{
    r = EDGEC_MAX(r, stage.lo);
    r = EDGEC_MIN(r, stage.hi);
    return (int8_t)(r + stage.offset);
}

/* requantize, then the output stage: the last step of conv, depthwise, fully connected and add. */
static inline int8_t edgec_requantize_s8(int32_t acc, int32_t multiplier, int32_t shift, edgec_output_stage stage)
{
    return edgec_output_s8(stage, edgec_requantize(acc, multiplier, shift));
}

/* ---- Argument checks ------------------------------------------------------------------------ */

/* act_min..act_max is a non-empty int8 range. */
static inline int edgec_act_range_valid(int32_t act_min, int32_t act_max)
{
    return act_min >= INT8_MIN && act_max <= INT8_MAX && act_min <= act_max;
}

/* The shifts edgec_requantize handles without undefined behaviour (QuantizeMultiplier: -31..30). */
static inline int edgec_shift_valid(int32_t shift)
{
    return shift >= -31 && shift <= 31;
}

/* Every one of `count` shifts is valid: per-channel requantization reads them all. */
static inline int edgec_shifts_valid(const int32_t *shift, int32_t count)
{
    for (int32_t i = 0; i < count; i++) {
        if (!edgec_shift_valid(shift[i])) {
            return 0;
        }
    }
    return 1;
}

/* -input_zero_point and output_zero_point of int8 tensors: |x + input_offset| <= 255 keeps every
 * product with an int8 weight within 128 * 255, and the output stage's act_min - offset within
 * int32. */
static inline int edgec_offsets_valid(int32_t input_offset, int32_t output_offset)
{
    return input_offset >= -INT8_MAX && input_offset <= -INT8_MIN && output_offset >= INT8_MIN &&
           output_offset <= INT8_MAX;
}

/* Positive dimensions whose element count fits int32, so that every index into the tensor does. */
static inline int edgec_dims_valid(const edgec_dims *d)
{
    return d->n > 0 && d->h > 0 && d->w > 0 && d->c > 0 && (int64_t)d->n * d->h * d->w * d->c <= INT32_MAX;
}

/* p is on a 4-byte boundary, as LDRD, LDM and vector word loads of packed constants or scratch
 * need it. */
static inline int edgec_word_aligned(const void *p)
{
    return ((uintptr_t)p & 3u) == 0;
}

/*
 * The convolution kernels' view of their descriptor (edgec_conv_desc, edgec_depthwise_conv_desc):
 * the scalars the loops read, the three tensors' dims and the requantization arrays. Each entry
 * point unpacks its descriptor into one on its stack (EDGEC_CONV_LAYER_OF,
 * edgec_depthwise_layer_of); the kernels below it take the pieces.
 */
typedef struct {
    int32_t input_offset;
    int32_t output_offset;
    int32_t stride_h;
    int32_t stride_w;
    int32_t pad_top;
    int32_t pad_left;
    int32_t dilation_h;
    int32_t dilation_w;
    int32_t groups;  /* conv: C_in and C_out are divisible by groups; depthwise: 1 (unused) */
    int32_t ch_mult; /* depthwise: C_out = C_in * ch_mult; conv: 1 (unused) */
    int32_t act_min;
    int32_t act_max;
} edgec_conv_params;

typedef struct {
    edgec_conv_params params;
    edgec_per_channel_quant quant;
    edgec_dims input_dims;
    edgec_dims filter_dims; /* conv: [C_out, KH, KW, C_in/groups]; depthwise: [1, KH, KW, C_out] */
    edgec_dims output_dims;
} edgec_conv_layer;

static inline edgec_conv_params edgec_conv_params_of(int32_t input_offset, int32_t output_offset, int32_t stride_h,
                                                     int32_t stride_w, int32_t pad_top, int32_t pad_left,
                                                     int32_t dilation_h, int32_t dilation_w, int32_t act_min,
                                                     int32_t act_max)
{
    edgec_conv_params p;
    p.input_offset = input_offset;
    p.output_offset = output_offset;
    p.stride_h = stride_h;
    p.stride_w = stride_w;
    p.pad_top = pad_top;
    p.pad_left = pad_left;
    p.dilation_h = dilation_h;
    p.dilation_w = dilation_w;
    p.groups = 1;
    p.ch_mult = 1;
    p.act_min = act_min;
    p.act_max = act_max;
    return p;
}

static inline edgec_dims edgec_dims_of(int32_t n, int32_t h, int32_t w, int32_t c)
{
    edgec_dims d;
    d.n = n;
    d.h = h;
    d.w = w;
    d.c = c;
    return d;
}

/* A conv descriptor's layer (d not NULL). groups < 1 leaves the filter's C 0 (invalid dims), so the
 * kernel's checks refuse it without dividing by it. Wide: multiplier and shift as edgec_conv_desc's. */
#define EDGEC_CONV_LAYER_OF(d, layer)                                                                               \
    do {                                                                                                            \
        (layer).params =                                                                                            \
            edgec_conv_params_of((d)->input_offset, (d)->output_offset, (d)->stride_h, (d)->stride_w, (d)->pad_top, \
                                 (d)->pad_left, (d)->dilation_h, (d)->dilation_w, (d)->act_min, (d)->act_max);      \
        (layer).params.groups = (d)->groups;                                                                        \
        (layer).quant.multiplier = (d)->multiplier;                                                                 \
        (layer).quant.shift = (d)->shift;                                                                           \
        (layer).input_dims = edgec_dims_of((d)->batches, (d)->input_h, (d)->input_w, (d)->input_c);                 \
        (layer).filter_dims = edgec_dims_of((d)->output_c, (d)->kernel_h, (d)->kernel_w,                            \
                                            (d)->groups >= 1 ? (d)->input_c / (d)->groups : 0);                     \
        (layer).output_dims = edgec_dims_of((d)->batches, (d)->output_h, (d)->output_w, (d)->output_c);             \
    } while (0)

/* Unpacks a conv descriptor (NULL: EDGEC_ARG_ERROR) and runs `kernel` on its layer with `filter`
 * and `bias` (the descriptor's, or the wide one's), then the kernel's own further arguments. */
#define EDGEC_CONV_ENTRY(desc, kernel, filter, bias, input, output, ...)                                               \
    do {                                                                                                               \
        edgec_conv_layer l;                                                                                            \
        if ((desc) == NULL) {                                                                                          \
            return EDGEC_ARG_ERROR;                                                                                    \
        }                                                                                                              \
        EDGEC_CONV_LAYER_OF(desc, l);                                                                                  \
        return kernel(&l.params, &l.quant, &l.input_dims, input, &l.filter_dims, filter, bias, &l.output_dims, output, \
                      __VA_ARGS__);                                                                                    \
    } while (0)

/* A depthwise descriptor's layer (d not NULL); output_c = input_c * ch_mult, or 0 (invalid dims)
 * when that product leaves int32 or ch_mult < 1. */
static inline edgec_conv_layer edgec_depthwise_layer_of(const edgec_depthwise_conv_desc *d)
{
    const int64_t out_c = (int64_t)d->input_c * d->ch_mult;
    const int32_t c = d->ch_mult >= 1 && out_c <= INT32_MAX ? (int32_t)out_c : 0;
    edgec_conv_layer layer;
    layer.params = edgec_conv_params_of(d->input_offset, d->output_offset, d->stride_h, d->stride_w, d->pad_top,
                                        d->pad_left, d->dilation_h, d->dilation_w, d->act_min, d->act_max);
    layer.params.ch_mult = d->ch_mult;
    layer.quant.multiplier = d->multiplier;
    layer.quant.shift = d->shift;
    layer.input_dims = edgec_dims_of(d->batches, d->input_h, d->input_w, d->input_c);
    layer.filter_dims = edgec_dims_of(1, d->kernel_h, d->kernel_w, c);
    layer.output_dims = edgec_dims_of(d->batches, d->output_h, d->output_w, c);
    return layer;
}

/*
 * The checks every convolution kernel (conv, 1x1, depthwise) starts with: no NULL pointer,
 * positive input, filter and output dimensions whose element counts fit int32, one batch size,
 * stride >= 1, int8 zero points, an int8 activation range and a valid shift per output channel.
 * Each kernel then checks its filter and window (edgec_conv_window_valid or stricter).
 */
static inline int edgec_conv_args_valid(const edgec_conv_params *params, const edgec_per_channel_quant *quant,
                                        const edgec_dims *input_dims, const int8_t *input,
                                        const edgec_dims *filter_dims, const int8_t *filter,
                                        const edgec_dims *output_dims, const int8_t *output)
{
    if (!params || !quant || !quant->multiplier || !quant->shift || !input_dims || !input || !filter_dims || !filter ||
        !output_dims || !output) {
        return 0;
    }
    return edgec_dims_valid(input_dims) && edgec_dims_valid(filter_dims) && edgec_dims_valid(output_dims) &&
           output_dims->n == input_dims->n && params->stride_h >= 1 && params->stride_w >= 1 &&
           edgec_offsets_valid(params->input_offset, params->output_offset) &&
           edgec_act_range_valid(params->act_min, params->act_max) && edgec_shifts_valid(quant->shift, output_dims->c);
}

/*
 * One spatial axis of a convolution window whose index arithmetic fits int32: the kernels form
 * o * stride - pad + k * dilation for every output o and tap k, and edgec_conv_taps the sums of
 * in_size, pad, stride and dilation. Computed in 64 bits because the arguments are untrusted.
 */
static inline int edgec_conv_axis_valid(int32_t in_size, int32_t out_size, int32_t kernel, int32_t stride, int32_t pad,
                                        int32_t dilation)
{
    const int64_t span = (int64_t)(out_size - 1) * stride + (int64_t)(kernel - 1) * dilation + 1;
    return span <= INT32_MAX && (int64_t)in_size + pad + stride + dilation <= INT32_MAX;
}

/* A general convolution window: dilation >= 1, padding >= 0, index arithmetic within int32. */
static inline int edgec_conv_window_valid(const edgec_conv_params *params, const edgec_dims *input_dims,
                                          const edgec_dims *filter_dims, const edgec_dims *output_dims)
{
    return params->dilation_h >= 1 && params->dilation_w >= 1 && params->pad_top >= 0 && params->pad_left >= 0 &&
           edgec_conv_axis_valid(input_dims->h, output_dims->h, filter_dims->h, params->stride_h, params->pad_top,
                                 params->dilation_h) &&
           edgec_conv_axis_valid(input_dims->w, output_dims->w, filter_dims->w, params->stride_w, params->pad_left,
                                 params->dilation_w);
}

/* ---- int4 weights (CMSIS-NN's packing: element i in byte i / 2, low nibble first) ----------- */

/* The low and high nibble of a packed byte, sign-extended (no shift of a negative value). */
static inline int32_t edgec_s4_low(int8_t b)
{
    return (int32_t)(((uint32_t)(uint8_t)b & 0xFu) ^ 8u) - 8;
}

static inline int32_t edgec_s4_high(int8_t b)
{
    return (int32_t)(((uint32_t)(uint8_t)b >> 4) ^ 8u) - 8;
}

/* Element i of a packed int4 stream. */
static inline int32_t edgec_s4_at(const int8_t *packed, int32_t i)
{
    const int8_t b = packed[i >> 1];
    return (i & 1) ? edgec_s4_high(b) : edgec_s4_low(b);
}

/* acc + sum_{k < count} packed[start + k] * (x[k] + offset), modulo 2^32 (the int32 wrap of the
 * golden): a run starting at an odd element takes its first weight from a high nibble. */
static inline uint32_t edgec_s4_dot(const int8_t *packed, int32_t start, const int8_t *x, int32_t count, int32_t offset,
                                    uint32_t acc)
{
    const int8_t *w = packed + (start >> 1);
    int32_t k = 0;
    if ((start & 1) && count > 0) {
        acc += (uint32_t)(edgec_s4_high(*w++) * ((int32_t)x[0] + offset));
        k = 1;
    }
    for (; k + 1 < count; k += 2) {
        const int8_t b = *w++;
        acc += (uint32_t)(edgec_s4_low(b) * ((int32_t)x[k] + offset));
        acc += (uint32_t)(edgec_s4_high(b) * ((int32_t)x[k + 1] + offset));
    }
    if (k < count) {
        acc += (uint32_t)(edgec_s4_low(*w) * ((int32_t)x[k] + offset));
    }
    return acc;
}

/* The int8 output stage's arguments of an int4 kernel are valid (edgec_nn.h, int4 section). */
static inline int edgec_s4_output_valid(int32_t input_offset, int32_t output_offset, int32_t act_min, int32_t act_max,
                                        const int32_t *shift, int32_t count)
{
    return edgec_offsets_valid(input_offset, output_offset) && edgec_act_range_valid(act_min, act_max) &&
           edgec_shifts_valid(shift, count);
}

/* ---- Convolution windows -------------------------------------------------------------------- */

/*
 * The taps of the window at output index o along one axis: tap k reads input coordinate
 * base + k * dilation, and the taps in [first, last) are the ones inside [0, in_size). The range
 * is empty (first == last) when no tap is in bounds. Computing it once per output pixel spares
 * the inner loops a bounds test per tap.
 */
typedef struct {
    int32_t base;
    int32_t first;
    int32_t last;
} edgec_tap_range;

static inline edgec_tap_range edgec_conv_taps(int32_t o, int32_t stride, int32_t pad, int32_t dilation, int32_t kernel,
                                              int32_t in_size)
{
    edgec_tap_range taps;
    int32_t lo = 0;
    int32_t hi = 0;
    taps.base = o * stride - pad;
    if (taps.base < 0) {
        lo = (-taps.base + dilation - 1) / dilation; /* ceil(-base / dilation) */
    }
    if (taps.base < in_size) {
        hi = (in_size - taps.base + dilation - 1) / dilation; /* ceil((in_size - base) / dilation) */
    }
    hi = EDGEC_MIN(hi, kernel);
    taps.first = lo;
    taps.last = EDGEC_MAX(lo, hi);
    return taps;
}

/* ---- Pooling -------------------------------------------------------------------------------- */

/*
 * One spatial axis of a pooling window. Every output window must overlap the input (a window
 * made only of padding has no maximum or average), and the furthest window end must fit int32 so
 * the index arithmetic in the kernel cannot overflow. Windows move monotonically, so checking the
 * first and the last is enough. Computed in 64 bits because the arguments are untrusted.
 */
static inline int edgec_pool_axis_valid(int32_t in_size, int32_t out_size, int32_t filter, int32_t stride, int32_t pad)
{
    int64_t last_origin;
    if (in_size < 1 || out_size < 1 || filter < 1 || stride < 1 || pad < 0 || pad >= filter) {
        return 0;
    }
    last_origin = (int64_t)(out_size - 1) * stride - pad;
    return last_origin < in_size && last_origin + filter <= INT32_MAX;
}

/* The checks shared by max and average pooling. */
static inline int edgec_pool_args_valid(const edgec_pool2d_desc *desc, const int8_t *input, const int8_t *output)
{
    if (!desc || !input || !output) {
        return 0;
    }
    if (desc->batches < 1 || desc->channels < 1 ||
        (int64_t)desc->batches * desc->input_h * desc->input_w * desc->channels > INT32_MAX ||
        (int64_t)desc->batches * desc->output_h * desc->output_w * desc->channels > INT32_MAX) {
        return 0;
    }
    return edgec_act_range_valid(desc->act_min, desc->act_max) &&
           edgec_pool_axis_valid(desc->input_h, desc->output_h, desc->filter_h, desc->stride_h, desc->pad_top) &&
           edgec_pool_axis_valid(desc->input_w, desc->output_w, desc->filter_w, desc->stride_w, desc->pad_left);
}

/* In-bounds input range [*start, *end) of the window at output index o along one axis. */
static inline void edgec_pool_window(int32_t o, int32_t stride, int32_t pad, int32_t filter, int32_t in_size,
                                     int32_t *start, int32_t *end)
{
    const int32_t origin = o * stride - pad;
    *start = EDGEC_MAX(origin, 0);
    *end = EDGEC_MIN(origin + filter, in_size);
}

/* ---- Arm DSP extension (Cortex-M4/M7/M33/M55): SMLAD on SXTB16-widened pairs --------------- */
#if defined(__ARM_FEATURE_DSP)
#include <arm_acle.h>

/*
 * Bytes 1 and 3 of x, sign-extended into the two int16 halves of the result: SXTB16 with ROR #8.
 * With __sxtb16(x) (bytes 0 and 2) it widens four int8 in two instructions; GCC 12's arm_acle.h
 * has no __ror to express the rotated form.
 */
static inline int32_t edgec_sxtb16_ror8(int32_t x)
{
    int32_t result;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(result) : "r"(x));
    return result;
}

/* Four int8 (x0..x3, little-endian in `four`) as the int16 pairs (x0, x2) and (x1, x3) the
 * SMLAD/SMLAxy kernels read, stored at dst (word-aligned) with one STRD (GCC would copy the pair
 * through the stack). */
static inline void edgec_dsp_store_widened(int8_t *dst, int32_t four)
{
    const int32_t even = __sxtb16(four);
    const int32_t odd = edgec_sxtb16_ror8(four);
    __asm__("strd %1, %2, [%3]" : "=m"(*(int8_t(*)[8])dst) : "r"(even), "r"(odd), "r"(dst));
}

/* The two words at *p (word-aligned), then *p += 8: one LDRD, which GCC 12 does not form from two
 * unaligned-capable word loads. */
static inline void edgec_dsp_load_2words(const int8_t **p, int32_t *first, int32_t *second)
{
    __asm__ volatile("ldrd %0, %1, [%2], #8" : "=r"(*first), "=r"(*second), "+r"(*p) : : "memory");
}

/*
 * The short form of requantize-and-add-offset, for a channel whose multiplier is at least 2^30
 * and whose shift is -2..-24 (QuantizeMultiplier gives 2^30 <= m < 2^31; conv, fully connected
 * and add outputs shift right by 2 to 24 bits): 6 instructions instead of about 30.
 *
 * With t = x*m + 2^30 and r = -shift, requantize is round-half-away-from-zero of floor(t / 2^31)
 * / 2^r, which is floor((t + 2^(30+r) - [t < 0]*2^31) / 2^(31+r)); adding the output offset
 * adds offset*2^(31+r). As m >= 2^30, t < 0 exactly when x < 0, except for x = -1 with m = 2^30:
 * there t = 0 and the correction cannot change the result (0 <= 2^(30+r) - 2^31 < 2^(31+r)).
 * So one SMLAL of x*m onto a 64-bit constant (high word round_high, minus 1 if x < 0; low word
 * 0x40000000, plus 2^31 if x < 0) and an arithmetic shift of the high word by r - 1 give
 * requantize(x) + offset exactly: the 64-bit sum cannot overflow, and its high word stays within
 * int32 (|x*m| / 2^32 < 2^30 and |round_high| <= 2^30 + 2^22).
 */
typedef struct {
    int32_t multiplier;
    int32_t round_high; /* (1 + 2 * offset) * 2^(r-2) */
    int32_t shift;      /* r - 1 */
} edgec_dsp_requant;

static inline int edgec_dsp_requant_short(int32_t multiplier, int32_t shift)
{
    return multiplier >= (1 << 30) && shift <= -2 && shift >= -24;
}

/* 1 if each of the `count` (multiplier, shift) pairs admits the short requantization. */
static inline int edgec_dsp_requant_all_short(const int32_t *multiplier, const int32_t *shift, int32_t count)
{
    for (int32_t i = 0; i < count; i++) {
        if (!edgec_dsp_requant_short(multiplier[i], shift[i])) {
            return 0;
        }
    }
    return 1;
}

/* 1 + 2 * offset: what edgec_dsp_requant_make scales into round_high, once per call. */
static inline int32_t edgec_dsp_round_base(int32_t offset)
{
    return 1 + 2 * offset;
}

/* Only for (multiplier, shift) that edgec_dsp_requant_short accepts. */
static inline edgec_dsp_requant edgec_dsp_requant_make(int32_t multiplier, int32_t shift, int32_t round_base)
{
    edgec_dsp_requant q;
    q.multiplier = multiplier;
    q.shift = ~shift; /* -shift - 1 */
    q.round_high = (int32_t)((uint32_t)round_base << (q.shift - 1));
    return q;
}

/* requantize(x, multiplier, shift) + offset, for an edgec_dsp_requant. */
static inline int32_t edgec_dsp_requantize(int32_t x, edgec_dsp_requant q)
{
    uint32_t low = ((uint32_t)x & 0x80000000u) | 0x40000000u;
    int32_t high = q.round_high + (x >> 31);
    __asm__("smlal %0, %1, %2, %3" : "+r"(low), "+r"(high) : "r"(x), "r"(q.multiplier));
    return high >> q.shift;
}

/* edgec_dsp_requantize saturated to int8 (SSAT): ready for edgec_dsp_pack_s8x4, before the
 * activation clamp. */
static inline int32_t edgec_dsp_requantize_ssat8(int32_t x, edgec_dsp_requant q)
{
    return __ssat(edgec_dsp_requantize(x, q), 8);
}

/*
 * The short form extended to shift -1 (edgec_s4_requantize_short's arithmetic), which layers with
 * int4 weights (scales 16 times int8's) often have: the constant (1 + 2 * offset) * 2^(30 + r),
 * R = (1 + 2 * offset) << (r - 1), goes into the high word as R >> 1 and into bit 31 of the low
 * word as R's lowest bit (set only for r = 1). The low word's start, 2^30 + that bit, is kept
 * per channel: an ADDS of it onto x's sign bit carries it into the high word with the ADC that
 * adds x's sign there, so the sequence is edgec_dsp_requantize's with ADDS/ADC for ORR/ADD.
 */
typedef struct {
    int32_t multiplier;
    int32_t round_high; /* R >> 1 */
    int32_t shift;      /* r - 1 */
    uint32_t low;       /* 2^30 + (R & 1) * 2^31 */
} edgec_dsp_requant_wide;

static inline int edgec_dsp_requant_wide_ok(int32_t multiplier, int32_t shift)
{
    return multiplier >= (1 << 30) && shift <= -1 && shift >= -24;
}

/* 1 if each of the `count` (multiplier, shift) pairs admits the wide short requantization. */
static inline int edgec_dsp_requant_all_wide(const int32_t *multiplier, const int32_t *shift, int32_t count)
{
    for (int32_t i = 0; i < count; i++) {
        if (!edgec_dsp_requant_wide_ok(multiplier[i], shift[i])) {
            return 0;
        }
    }
    return 1;
}

/* Only for (multiplier, shift) that edgec_dsp_requant_wide_ok accepts. */
static inline edgec_dsp_requant_wide edgec_dsp_requant_wide_make(int32_t multiplier, int32_t shift, int32_t round_base)
{
    edgec_dsp_requant_wide q;
    q.multiplier = multiplier;
    q.shift = ~shift; /* -shift - 1 */
    const uint32_t r = (uint32_t)round_base << q.shift;
    q.round_high = (int32_t)r >> 1;
    q.low = 0x40000000u | r << 31;
    return q;
}

/* requantize(x, multiplier, shift) + offset, saturated to int8, for an edgec_dsp_requant_wide. */
static inline int32_t edgec_dsp_requantize_wide_ssat8(int32_t x, edgec_dsp_requant_wide q)
{
    uint32_t low = ((uint32_t)x & 0x80000000u) + q.low;
    int32_t high = q.round_high + (x >> 31) + (low < q.low); /* the carry */
    __asm__("smlal %0, %1, %2, %3" : "+r"(low), "+r"(high) : "r"(x), "r"(q.multiplier));
    return __ssat(high >> q.shift, 8);
}

/* Four int8 in one word, bytes in order (three BFI): each y must already be in [-128, 127]. */
static inline uint32_t edgec_dsp_pack_s8x4(int32_t y0, int32_t y1, int32_t y2, int32_t y3)
{
    uint32_t word = (uint32_t)y0;
    __asm__("bfi %0, %1, #8, #8\n\tbfi %0, %2, #16, #8\n\tbfi %0, %3, #24, #8"
            : "+r"(word)
            : "r"(y1), "r"(y2), "r"(y3));
    return word;
}

/*
 * The fused activation on four packed int8: bytewise clamp to [act_min, act_max] (SSUB8 sets
 * the GE flags per byte, SEL picks by them). lows/highs hold act_min/act_max in every byte.
 */
static inline uint32_t edgec_dsp_clamp_s8x4(uint32_t y, uint32_t lows, uint32_t highs)
{
    uint32_t difference;
    __asm__("ssub8 %1, %0, %2\n\tsel %0, %0, %2\n\tssub8 %1, %0, %3\n\tsel %0, %3, %0"
            : "+r"(y), "=&r"(difference)
            : "r"(lows), "r"(highs)
            : "cc");
    return y;
}

/* act_min or act_max in every byte of a word, for edgec_dsp_clamp_s8x4. */
static inline uint32_t edgec_dsp_bytes(int32_t value)
{
    return (uint8_t)value * 0x01010101u;
}

#endif /* __ARM_FEATURE_DSP */

/* ---- Helium (MVE, Cortex-M55): four requantizations at once --------------------------------- */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
#include <arm_mve.h>

/*
 * edgec_requantize on four lanes, bit-exact: VQRDMULH is doubling_high_mult_no_sat (it saturates
 * only for INT32_MIN * INT32_MIN, and multipliers are never negative). VRSHL rounds half up, so
 * negative values are first moved down by one when there is a right shift, which makes the result
 * round half away from zero (saturating that step cannot change the shifted result).
 */
static inline int32x4_t edgec_mve_requantize(int32x4_t x, int32x4_t multiplier, int32x4_t shift)
{
    const int32x4_t zero = vdupq_n_s32(0);
    const int32x4_t left = vmaxq_s32(shift, zero);
    const int32x4_t minus_right = vminq_s32(shift, zero);
    const int32x4_t high = vqrdmulhq_s32(vqshlq_s32(x, left), multiplier);
    const int32x4_t fixup = vshrq_n_s32(vandq_s32(high, minus_right), 31);
    return vrshlq_s32(vqaddq_s32(high, fixup), minus_right);
}

/* edgec_output_s8 on four lanes (clamp first, then add the offset: nothing can overflow). */
static inline int32x4_t edgec_mve_output(int32x4_t r, edgec_output_stage stage)
{
    r = vmaxq_s32(r, vdupq_n_s32(stage.lo));
    r = vminq_s32(r, vdupq_n_s32(stage.hi));
    return vaddq_n_s32(r, stage.offset);
}
#endif /* __ARM_FEATURE_MVE */

/* ---- recurrent cells: the int16 gates of the LSTM and GRU (edgec_recurrent_s8.c, edgec_lstm_s16.c) ---- */

#define EDGEC_LSTM_SIGMOID 0
#define EDGEC_LSTM_TANH 1

/* Sums of a requantized value (any int32) and another are formed in 64 bits, then saturated:
 * int32 addition could overflow (undefined) where CMSIS-NN adds in int32. */
static inline int16_t edgec_sat16(int64_t x)
{
    return (int16_t)EDGEC_MIN(EDGEC_MAX(x, INT16_MIN), INT16_MAX);
}

/* arm_nn_activation_s16: sigmoid or tanh of x * 2^left_shift read as Q3.12, in Q0.15
 * (edgec.ops.recurrent.activation_s16). */
static inline int16_t edgec_activation_s16(int32_t x, int32_t left_shift, int function, const uint16_t *table)
{
    const int32_t multiplier = left_shift < 0 ? 3 : 3 * (1 << left_shift);
    const int32_t right = left_shift < 0 ? -left_shift : 0;
    const int32_t rounding = right > 0 ? (1 << (right - 1)) : 0;
    const int32_t v = (x * multiplier + rounding) >> right;
    const uint32_t a = (uint32_t)(v > 0 ? v : -v);
    const uint32_t bits = function == EDGEC_LSTM_SIGMOID ? 9u : 8u;
    const uint32_t u = a >> bits;
    uint32_t result;
    if (u >= 255u) {
        result = function == EDGEC_LSTM_SIGMOID ? (0x7FFFu << 10) : (0xFFFFu << 8);
    } else {
        const uint32_t ua = table[u];
        const uint32_t ub = table[u + 1u];
        result = (ua << bits) + (a & ((1u << bits) - 1u)) * (ub - ua);
    }
    if (function == EDGEC_LSTM_SIGMOID) {
        result = v >= 0 ? result + (1u << 9) : (1u << 25) - result + (1u << 9) - 1u;
        result >>= 10;
    } else {
        result = v >= 0 ? (result - (1u << 23)) + (1u << 7) : ((1u << 23) - result) + (1u << 7) - 1u;
        result >>= 8;
    }
    return (int16_t)(result & 0xFFFFu);
}

/* ---- int16 activations (16x8): int64 accumulators, requantize_s64 ---------------------------- */

#define EDGEC_S64_REQUANTIZE_LIMIT ((int64_t)1 << 47)

/* CMSIS-NN REDUCE_MULTIPLIER: the Q31 multiplier rounded to Q15 (0x7FFF from 0x7FFF0000 up). */
static inline int32_t edgec_reduce_multiplier(int32_t multiplier)
{
    return multiplier < 0x7FFF0000 ? (multiplier + (1 << 15)) >> 16 : 0x7FFF;
}

/* acc + bias saturated to [-2^47, 2^47), exact for any bias and |acc| < 2^62
 * (numerics.add_bias_s64): clipping the bias to +-2^62 first keeps the sum within int64 and
 * cannot change a saturated sum. */
static inline int64_t edgec_add_bias_s64(int64_t acc, int64_t bias)
{
    const int64_t bias_limit = (int64_t)1 << 62;
    int64_t sum = EDGEC_MIN(EDGEC_MAX(bias, -bias_limit), bias_limit) + acc;
    sum = EDGEC_MAX(sum, -EDGEC_S64_REQUANTIZE_LIMIT);
    return EDGEC_MIN(sum, EDGEC_S64_REQUANTIZE_LIMIT - 1);
}

/* arm_nn_requantize_s64 (numerics.requantize_s64) for x in [-2^47, 2^47), 0 <= reduced <= 2^15,
 * shift in [-31, 7]: the product fits int64; the result is clamped straight to the int16
 * activation range (which equals saturating to int32 first). */
static inline int16_t edgec_requantize_s64_clamp(int64_t x, int32_t reduced, int32_t shift, int32_t act_min,
                                                 int32_t act_max)
{
    const int64_t high = (x * reduced) >> (14 - shift);
    const int64_t result = (high + 1) >> 1;
    return (int16_t)EDGEC_MIN(EDGEC_MAX(result, (int64_t)act_min), (int64_t)act_max);
}

/* The 16x8 output stage of channel c: bias (may be NULL), requantize_s64, clamp. */
static inline int16_t edgec_output_s16(int64_t acc, const int64_t *bias, const int32_t *multiplier,
                                       const int32_t *shift, int32_t c, int32_t act_min, int32_t act_max)
{
    const int64_t x = edgec_add_bias_s64(acc, bias ? bias[c] : 0);
    return edgec_requantize_s64_clamp(x, edgec_reduce_multiplier(multiplier[c]), shift[c], act_min, act_max);
}

/* An int16 activation range (non-empty) and `count` (multiplier >= 0, shift in [-31, 7]) pairs,
 * as TFLite's int64 MultiplyByQuantizedMultiplier requires them. */
static inline int edgec_s16_output_valid(const int32_t *multiplier, const int32_t *shift, int32_t count,
                                         int32_t act_min, int32_t act_max)
{
    if (act_min < INT16_MIN || act_max > INT16_MAX || act_min > act_max) {
        return 0;
    }
    for (int32_t i = 0; i < count; i++) {
        if (multiplier[i] < 0 || shift[i] < -31 || shift[i] > 7) {
            return 0;
        }
    }
    return 1;
}

/*
 * TFLite LUTLookup (int16): 513-entry table, index 256 + (x >> 7), linear interpolation on the
 * low 7 bits; slope and result wrap to int16 as TFLite's int16_t locals do (never for tables whose
 * neighbours differ by less than 2^15).
 */
static inline int16_t edgec_lut_lookup_s16(int16_t x, const int16_t *table)
{
    const int32_t index = 256 + (x >> 7);
    const int32_t offset = x & 0x7F;
    const int32_t slope = (int16_t)(uint16_t)((uint32_t)table[index + 1] - (uint32_t)table[index]);
    const int32_t delta = (slope * offset + 64) >> 7;
    return (int16_t)(uint16_t)((uint32_t)table[index] + (uint32_t)delta);
}

#if defined(__ARM_FEATURE_DSP)
/*
 * The DSP order of int16 operands: every full group of four (x0, x1, x2, x3) is stored as
 * (x0, x2, x1, x3), so one word of four int8 weights widened by SXTB16 into (w0, w2) and
 * (w1, w3) meets its inputs with two SMLALD; a tail of fewer than four stays in order.
 * edgec_s16_dsp_reorder puts `count` int16 at x (word-aligned) into that order in place: per group
 * one LDRD, a PKHBT and a PKHTB, one STRD.
 */
static inline void edgec_s16_dsp_reorder(int16_t *x, int32_t count)
{
    int8_t *p = (int8_t *)x;
    for (int32_t k = 0; k + 4 <= count; k += 4) {
        int32_t x01;
        int32_t x23;
        const int8_t *q = p;
        edgec_dsp_load_2words(&q, &x01, &x23);
        const uint32_t x02 = ((uint32_t)x01 & 0xFFFFu) | ((uint32_t)x23 << 16);
        const uint32_t x13 = ((uint32_t)x01 >> 16) | ((uint32_t)x23 & 0xFFFF0000u);
        __asm__("strd %1, %2, [%3]" : "=m"(*(int8_t(*)[8])p) : "r"(x02), "r"(x13), "r"(p));
        p += 8;
    }
}

/* Four int8 weights at w (any alignment: the core reads unaligned words unless the build forbids
 * it) as one word. */
static inline int32_t edgec_s16_dsp_load_weights(const int8_t *w)
{
    int32_t four;
#if EDGEC_UNALIGNED_ASM
    __asm__("ldr %0, %1" : "=r"(four) : "m"(*(const int8_t(*)[4])w));
#else
    four = (int32_t)((uint32_t)(uint8_t)w[0] | (uint32_t)(uint8_t)w[1] << 8 | (uint32_t)(uint8_t)w[2] << 16 |
                     (uint32_t)(uint8_t)w[3] << 24);
#endif
    return four;
}

/* acc[r] += sum_k x[k] * w_r[k] over k < count for the rows w_0 = w and w_1 = w + row_step, x
 * in the DSP order (word-aligned): each LDRD of inputs feeds four SMLALD, exact in int64. */
static inline void edgec_s16_dsp_dot2(const int16_t *x, const int8_t *w, int32_t row_step, int32_t count,
                                      int64_t acc[2])
{
    int64_t acc0 = 0;
    int64_t acc1 = 0;
    const int8_t *xp = (const int8_t *)x;
    int32_t k = 0;
    for (; k + 4 <= count; k += 4) {
        int32_t x02;
        int32_t x13;
        const int32_t w0 = edgec_s16_dsp_load_weights(w + k);
        const int32_t w1 = edgec_s16_dsp_load_weights(w + row_step + k);
        edgec_dsp_load_2words(&xp, &x02, &x13);
        acc0 = __smlald(x02, __sxtb16(w0), acc0);
        acc0 = __smlald(x13, edgec_sxtb16_ror8(w0), acc0);
        acc1 = __smlald(x02, __sxtb16(w1), acc1);
        acc1 = __smlald(x13, edgec_sxtb16_ror8(w1), acc1);
    }
    for (; k < count; k++) {
        acc0 += (int32_t)x[k] * w[k];
        acc1 += (int32_t)x[k] * w[row_step + k];
    }
    acc[0] = acc0;
    acc[1] = acc1;
}

/* One row: acc += sum_k x[k] * w[k], as edgec_s16_dsp_dot2. */
static inline int64_t edgec_s16_dsp_dot(const int16_t *x, const int8_t *w, int32_t count)
{
    int64_t acc = 0;
    const int8_t *xp = (const int8_t *)x;
    int32_t k = 0;
    for (; k + 4 <= count; k += 4) {
        int32_t x02;
        int32_t x13;
        const int32_t four = edgec_s16_dsp_load_weights(w + k);
        edgec_dsp_load_2words(&xp, &x02, &x13);
        acc = __smlald(x02, __sxtb16(four), acc);
        acc = __smlald(x13, edgec_sxtb16_ror8(four), acc);
    }
    for (; k < count; k++) {
        acc += (int32_t)x[k] * w[k];
    }
    return acc;
}

/*
 * Every output row o < rows of a 16x8 layer from one column x (already in the DSP order):
 * out[o * out_step] = edgec_output_s16(x . w[o * count ...]), two rows at a time.
 */
static inline void edgec_s16_dsp_rows(const int16_t *x, const int8_t *w, int32_t count, int32_t first_row, int32_t rows,
                                      const int64_t *bias, const int32_t *multiplier, const int32_t *shift,
                                      int32_t act_min, int32_t act_max, int16_t *out)
{
    int32_t r = 0;
    for (; r + 2 <= rows; r += 2) {
        int64_t acc[2];
        const int32_t o = first_row + r;
        edgec_s16_dsp_dot2(x, w + o * count, count, count, acc);
        out[r] = edgec_output_s16(acc[0], bias, multiplier, shift, o, act_min, act_max);
        out[r + 1] = edgec_output_s16(acc[1], bias, multiplier, shift, o + 1, act_min, act_max);
    }
    if (r < rows) {
        const int32_t o = first_row + r;
        const int64_t acc = edgec_s16_dsp_dot(x, w + o * count, count);
        out[r] = edgec_output_s16(acc, bias, multiplier, shift, o, act_min, act_max);
    }
}
#endif /* __ARM_FEATURE_DSP */

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
/*
 * Helium form of the 16x8 dot products: eight int16 inputs (VLDRH) meet eight int8 weights
 * widened to 16-bit lanes by the load (VLDRB.S16), and VMLADAVA adds the eight products to a
 * 32-bit sum. A product is at most 2^22 in magnitude, so a block of EDGEC_S16_MVE_BLOCK (256)
 * products sums exactly in int32 (|sum| <= 2^30); each block's sum is then added to the int64
 * total. Every sum is exact, so the result equals the golden's bit for bit whatever the order.
 * (VMLALDAVA would accumulate in 64 bits directly, but four 64-bit accumulators and five
 * pointers do not fit the core registers: the compiler spills them every step.) The main steps
 * are unpredicated; the last partial group of eight is predicated (VCTP16), its inactive lanes
 * loading nothing and reading as zero, so no byte past a row or the input is read.
 */
#define EDGEC_S16_MVE_BLOCK 256

/* sum[r] = x[k] * w_r[k] summed over k < count (exact for count <= 511) for the four rows
 * w_r = w + r * row_step: each load of eight inputs feeds four rows. */
static inline void edgec_s16_mve_block4(const int16_t *x, const int8_t *w, int32_t row_step, int32_t count,
                                        int32_t sum[4])
{
    const int8_t *w0 = w;
    const int8_t *w1 = w + row_step;
    const int8_t *w2 = w + 2 * row_step;
    const int8_t *w3 = w + 3 * row_step;
    int32_t s0 = 0;
    int32_t s1 = 0;
    int32_t s2 = 0;
    int32_t s3 = 0;
    int32_t k = count;
#if defined(__OPTIMIZE__)
    /* The full steps in assembly: GCC's own loop reloads and re-derives the row pointers from the
     * stack every step (19 instructions for these 10); an unoptimised build keeps the C loop. */
    if (k >= 8) {
        /* VMLADAVA takes an even accumulator register (the sums are pinned to r4, r6, r8, r10) and
         * the widening VLDRB a low base register (constraint "l"). */
        register int32_t a0 __asm__("r4") = s0;
        register int32_t a1 __asm__("r6") = s1;
        register int32_t a2 __asm__("r8") = s2;
        register int32_t a3 __asm__("r10") = s3;
        int32_t steps = k / 8;
        k -= 8 * steps;
        __asm__("1:\n\t"
                "vldrh.16 q0, [%[x]], #16\n\t"
                "vldrb.s16 q1, [%[w0]], #8\n\t"
                "vmladava.s16 %[s0], q0, q1\n\t"
                "vldrb.s16 q2, [%[w1]], #8\n\t"
                "vmladava.s16 %[s1], q0, q2\n\t"
                "vldrb.s16 q1, [%[w2]], #8\n\t"
                "vmladava.s16 %[s2], q0, q1\n\t"
                "vldrb.s16 q2, [%[w3]], #8\n\t"
                "vmladava.s16 %[s3], q0, q2\n\t"
                "subs %[steps], %[steps], #1\n\t"
                "bne 1b"
                : [x] "+r"(x), [w0] "+l"(w0), [w1] "+l"(w1), [w2] "+l"(w2), [w3] "+l"(w3), [s0] "+r"(a0), [s1] "+r"(a1),
                  [s2] "+r"(a2), [s3] "+r"(a3), [steps] "+r"(steps)
                :
                : "q0", "q1", "q2", "memory", "cc");
        s0 = a0;
        s1 = a1;
        s2 = a2;
        s3 = a3;
    }
#else
    for (; k >= 8; k -= 8) {
        const int16x8_t xv = vldrhq_s16(x);
        s0 = vmladavaq_s16(s0, xv, vldrbq_s16(w0));
        s1 = vmladavaq_s16(s1, xv, vldrbq_s16(w1));
        s2 = vmladavaq_s16(s2, xv, vldrbq_s16(w2));
        s3 = vmladavaq_s16(s3, xv, vldrbq_s16(w3));
        x += 8;
        w0 += 8;
        w1 += 8;
        w2 += 8;
        w3 += 8;
    }
#endif
    if (k > 0) {
        const mve_pred16_t p = vctp16q((uint32_t)k);
        const int16x8_t xv = vldrhq_z_s16(x, p);
        s0 = vmladavaq_s16(s0, xv, vldrbq_z_s16(w0, p));
        s1 = vmladavaq_s16(s1, xv, vldrbq_z_s16(w1, p));
        s2 = vmladavaq_s16(s2, xv, vldrbq_z_s16(w2, p));
        s3 = vmladavaq_s16(s3, xv, vldrbq_z_s16(w3, p));
    }
    sum[0] = s0;
    sum[1] = s1;
    sum[2] = s2;
    sum[3] = s3;
}

/* One row, as edgec_s16_mve_block4. */
static inline int32_t edgec_s16_mve_block(const int16_t *x, const int8_t *w, int32_t count)
{
    int32_t sum = 0;
    int32_t k = count;
    for (; k >= 8; k -= 8) {
        sum = vmladavaq_s16(sum, vldrhq_s16(x), vldrbq_s16(w));
        x += 8;
        w += 8;
    }
    if (k > 0) {
        const mve_pred16_t p = vctp16q((uint32_t)k);
        sum = vmladavaq_s16(sum, vldrhq_z_s16(x, p), vldrbq_z_s16(w, p));
    }
    return sum;
}

/* acc[r] = sum_k x[k] * w_r[k] over k < count for the four rows w_r = w + r * count. */
static inline void edgec_s16_mve_dot4(const int16_t *x, const int8_t *w, int32_t count, int64_t acc[4])
{
    acc[0] = acc[1] = acc[2] = acc[3] = 0;
    for (int32_t k = 0; k < count; k += EDGEC_S16_MVE_BLOCK) {
        int32_t sum[4];
        edgec_s16_mve_block4(x + k, w + k, count, EDGEC_MIN(count - k, EDGEC_S16_MVE_BLOCK), sum);
        acc[0] += sum[0];
        acc[1] += sum[1];
        acc[2] += sum[2];
        acc[3] += sum[3];
    }
}

/* One row: sum_k x[k] * w[k]. */
static inline int64_t edgec_s16_mve_dot(const int16_t *x, const int8_t *w, int32_t count)
{
    int64_t acc = 0;
    for (int32_t k = 0; k < count; k += EDGEC_S16_MVE_BLOCK) {
        acc += edgec_s16_mve_block(x + k, w + k, EDGEC_MIN(count - k, EDGEC_S16_MVE_BLOCK));
    }
    return acc;
}

/*
 * Every output row o < rows of a 16x8 layer from one column x (in order, any int16 alignment):
 * out[r] = edgec_output_s16(x . w[(first_row + r) * count ...]), four rows at a time.
 */
static inline void edgec_s16_mve_rows(const int16_t *x, const int8_t *w, int32_t count, int32_t first_row, int32_t rows,
                                      const int64_t *bias, const int32_t *multiplier, const int32_t *shift,
                                      int32_t act_min, int32_t act_max, int16_t *out)
{
    int32_t r = 0;
    for (; r + 4 <= rows; r += 4) {
        int64_t acc[4];
        const int32_t o = first_row + r;
        edgec_s16_mve_dot4(x, w + o * count, count, acc);
        for (int32_t i = 0; i < 4; i++) {
            out[r + i] = edgec_output_s16(acc[i], bias, multiplier, shift, o + i, act_min, act_max);
        }
    }
    for (; r < rows; r++) {
        const int32_t o = first_row + r;
        out[r] =
            edgec_output_s16(edgec_s16_mve_dot(x, w + o * count, count), bias, multiplier, shift, o, act_min, act_max);
    }
}

/*
 * The 16x8 output stage of four channels in 32-bit lanes, for 32-bit sums. With
 * s = 15 - shift[c] and offset = bias * reduced + 2^(s - 1), edgec_output_s16 of a 32-bit sum is
 * clamp((acc * reduced + offset) >> s) when |bias| <= 2^47 - 2^31 (acc + bias then never reaches
 * edgec_add_bias_s64's saturation, and rounding (x * reduced) >> (s - 1) up by one then halving
 * is adding 2^(s - 1) before one shift). The 64-bit acc * reduced + offset is formed as a high and
 * a low word (VMULH, VMUL, an add with carry) and shifted by s (8 to 46) as a pair: the low word
 * right by s (VSHL by -s: 0 from 32 on), the high word left by 32 - s (right for s > 32); when
 * every result fits int32 (checked for every 32-bit acc) the pair's low word is the result. A
 * stage with a lane where either bound fails (`vector` 0) is for edgec_output_s16 channel by
 * channel.
 */
typedef struct {
    int32x4_t reduced;
    int32x4_t left;  /* 32 - s: the high word's shift */
    int32x4_t right; /* -s: the low word's (logical) shift */
    uint32x4_t offset_lo;
    int32x4_t offset_hi;
    int vector;
} edgec_s16_mve_stage;

/* The stage of channels c, c + step, c + 2 * step, c + 3 * step. */
static inline edgec_s16_mve_stage edgec_s16_mve_stage_of(const int64_t *bias, const int32_t *multiplier,
                                                         const int32_t *shift, int32_t c, int32_t step)
{
    const int64_t bias_limit = ((int64_t)1 << 47) - ((int64_t)1 << 31);
    int32_t reduced[4], left[4], right[4], offset_hi[4];
    uint32_t offset_lo[4];
    edgec_s16_mve_stage stage;
    stage.vector = 1;
    for (int32_t i = 0; i < 4; i++) {
        const int32_t channel = c + step * i;
        const int64_t b = bias ? bias[channel] : 0;
        const int32_t s = 15 - shift[channel];
        reduced[i] = edgec_reduce_multiplier(multiplier[channel]);
        const int exact = b >= -bias_limit && b <= bias_limit;
        const int64_t offset = (exact ? b * reduced[i] : 0) + ((int64_t)1 << (s - 1));
        const int64_t bound = ((int64_t)reduced[i] << 31) + (offset < 0 ? -offset : offset);
        stage.vector &= exact && (bound >> s) < INT32_MAX;
        left[i] = 32 - s;
        right[i] = -s;
        offset_lo[i] = (uint32_t)offset;
        offset_hi[i] = (int32_t)(offset >> 32);
    }
    stage.reduced = vldrwq_s32(reduced);
    stage.left = vldrwq_s32(left);
    stage.right = vldrwq_s32(right);
    stage.offset_lo = vldrwq_u32(offset_lo);
    stage.offset_hi = vldrwq_s32(offset_hi);
    return stage;
}

/* The outputs of four 32-bit sums through a `vector` stage, clamped to [act_min, act_max]. */
static inline int32x4_t edgec_s16_mve_requantize(int32x4_t acc, const edgec_s16_mve_stage *stage, int32_t act_min,
                                                 int32_t act_max)
{
    const uint32x4_t lo = vreinterpretq_u32_s32(vmulq_s32(acc, stage->reduced));
    const uint32x4_t lo_sum = vaddq_u32(lo, stage->offset_lo);
    int32x4_t hi_sum = vaddq_s32(vmulhq_s32(acc, stage->reduced), stage->offset_hi);
    hi_sum = vaddq_m_n_s32(hi_sum, hi_sum, 1, vcmphiq_u32(lo, lo_sum)); /* the low words' carry */
    const int32x4_t result =
        vorrq_s32(vreinterpretq_s32_u32(vshlq_u32(lo_sum, stage->right)), vshlq_s32(hi_sum, stage->left));
    return vminq_s32(vmaxq_s32(result, vdupq_n_s32(act_min)), vdupq_n_s32(act_max));
}

/* A row length K at most this has 32-bit sums exact (511 * 2^22 < 2^31). */
#define EDGEC_S16_MVE_INT32_TERMS 511

#endif /* __ARM_FEATURE_MVE */

#endif /* EDGEC_SUPPORT_H */
