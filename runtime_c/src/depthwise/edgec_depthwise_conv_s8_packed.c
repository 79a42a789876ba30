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
 * the 4 int8, one VLDRB.S32 per tap with the lanes as channels; else the 4 int8.
 */
#include "edgec_nn.h"
#include "../support/edgec_support.h"

#include <stddef.h>
#include <string.h>

/* Some assembly routines below are one asm statement longer than the 4095 characters C99 promises
 * a string literal; the assembler takes any length, GCC does not count asm strings, and clang's
 * -pedantic does. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Woverlength-strings"
#endif

#define GROUP 4  /* channels per pass */
#define PHASES 3 /* slot orders of a 3x3 window's rows */

/* What every pass needs, fixed for the call. */
typedef struct {
    const edgec_per_channel_quant *quant;
    const int8_t *filter; /* [groups][KH*KW][4] */
    const int32_t *bias;  /* [groups * 4] */
    const int8_t *input;
    int32_t in_h;
    int32_t in_w;
    int32_t c;
    int32_t k_h;
    int32_t k_w;
    int32_t out_h;
    int32_t out_w;
    int32_t stride_h;
    int32_t stride_w;
    int32_t dilation_h;
    int32_t dilation_w;
    int32_t pad_top;
    int32_t pad_left;
    int32_t padded_w;    /* cached columns */
    int32_t image_start; /* the cached columns that hold image pixels: [image_start, image_end) */
    int32_t image_end;
    int32_t column_bytes; /* KH entries */
    int unrolled;         /* a 3x3 undilated window: group_row_3x3 */
    int8_t pad;           /* the input zero point */
    uint32_t pad_four;    /* ... in each byte */
    edgec_output_stage stage;
    int8_t *cache; /* [padded_w][KH] entries */
} packed_layer;

/* One pass: channels first .. first + count - 1 (count <= 4; the filter and bias are zero-padded
 * to 4 channels), with its constants read once. */
typedef struct {
    const packed_layer *layer;
    int32_t first;
    int32_t count;
    const int8_t *taps; /* the group's KH*KW taps of 4 bytes, [KH][KW] */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
    /* From multiplier to bias in the order the 3x3 rows' assembly reads them (mve_pixels_3x3). */
    int32x4_t multiplier;
    int32x4_t left;        /* max(shift, 0) */
    int32x4_t minus_right; /* min(shift, 0) */
    int32x4_t lo;          /* the output stage's bounds, in every lane */
    int32x4_t hi;
    int32x4_t bias;
    int32x4_t shift;
    int right_shifts_only;   /* no channel's shift is positive: the 3x3 rows take pixel pairs */
    int strict_right_shifts; /* every channel's shift is negative */
#else
    int32_t bias[4];
#if defined(__ARM_FEATURE_DSP)
    int short_requant; /* all four channels admit the short requantization */
    edgec_dsp_requant q[4];
    uint32_t lows;
    uint32_t highs;
#endif
#endif
#if EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES == 8
    int32_t w[PHASES][9][2]; /* 3x3 taps widened like the entries (0/2, 1/3), cache order [kx][slot] */
#else
    int8_t w[PHASES][9][4]; /* 3x3 taps in cache order: [kx][slot] */
#endif
} packed_group;

/* Phase p's slot s holds filter row (s - p) mod 3: phase 0's slot (s - p) mod 3, so phases 1 and 2
 * are phase 0's entries permuted (no division per tap). */
static const int8_t phase_source_slot[PHASES][3] = { { 0, 1, 2 }, { 2, 0, 1 }, { 1, 2, 0 } };

/* ---- Per ISA: an entry, the group's constants, one output pixel ------------------------------ */

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)

static inline void cache_entry(int8_t *dst, uint32_t four)
{
    memcpy(dst, &four, 4);
}

static void group_make(packed_group *g)
{
    const packed_layer *layer = g->layer;
    int32_t mult[4] = { 1 << 30, 1 << 30, 1 << 30, 1 << 30 }; /* unused lanes: any valid pair */
    int32_t shift[4] = { 0, 0, 0, 0 };
    memcpy(mult, layer->quant->multiplier + g->first, 4 * (size_t)g->count);
    memcpy(shift, layer->quant->shift + g->first, 4 * (size_t)g->count);
    const int32x4_t zero = vdupq_n_s32(0);
    g->multiplier = vldrwq_s32(mult);
    g->shift = vldrwq_s32(shift);
    g->left = vmaxq_s32(g->shift, zero);
    g->minus_right = vminq_s32(g->shift, zero);
    g->lo = vdupq_n_s32(layer->stage.lo);
    g->hi = vdupq_n_s32(layer->stage.hi);
    g->bias = vldrwq_s32(layer->bias + g->first);
    g->right_shifts_only = shift[0] <= 0 && shift[1] <= 0 && shift[2] <= 0 && shift[3] <= 0;
    g->strict_right_shifts = shift[0] < 0 && shift[1] < 0 && shift[2] < 0 && shift[3] < 0;
}

static inline void group_store(const packed_group *g, int32x4_t acc, int8_t *out)
{
    const int32x4_t y = edgec_mve_output(edgec_mve_requantize(acc, g->multiplier, g->shift), g->layer->stage);
    if (g->count == GROUP) {
        vstrbq_s32(out, y);
    } else {
        vstrbq_p_s32(out, y, vctp32q((uint32_t)g->count));
    }
}

/* The output pixel whose window starts at cached column `at`, filter row ky in slot slots[ky]. */
static void group_pixel(const packed_group *g, const int32_t *slots, int32_t at, int8_t *out)
{
    const packed_layer *layer = g->layer;
    const int8_t *w = g->taps;
    int32x4_t acc = g->bias;
    for (int32_t ky = 0; ky < layer->k_h; ky++) {
        const int8_t *x = layer->cache + at * layer->column_bytes + 4 * slots[ky];
        for (int32_t kx = 0; kx < layer->k_w; kx++, w += 4, x += layer->dilation_w * layer->column_bytes) {
            acc = vaddq_s32(acc, vmulq_s32(vldrbq_s32(x), vldrbq_s32(w)));
        }
    }
    group_store(g, acc, out);
}

/* The assembly needs registers that an unoptimised build keeps for its frame. */
#if defined(__OPTIMIZE__)
/*
 * The rows of a full group in assembly: GCC spills the output stage's constants and reloads them
 * per pixel (each store may alias them). A tap is VLDRB.S32 of the entry and the weights, VMUL
 * and VADD; the output stage is edgec_mve_requantize then edgec_mve_output, step for step, with
 * the constants held in registers, read through one pointer to the group's multiplier .. bias
 * (layout checked below). VLDRB.S32 and VSTRB.32 address through low registers only ("l").
 */
#define MVE_TAP(t)                                                       \
    "vldrb.s32 q1, [%[x], #" #t "]\n\tvldrb.s32 q2, [%[w], #" #t "]\n\t" \
    "vmul.i32 q1, q1, q2\n\tvadd.i32 q0, q0, q1\n\t"
typedef char mve_group_layout[offsetof(packed_group, left) - offsetof(packed_group, multiplier) == 16 &&
                                      offsetof(packed_group, bias) - offsetof(packed_group, multiplier) == 80
                                  ? 1
                                  : -1];

/* one pixel's sums in q0: the bias (80 bytes after the multiplier), then the nine taps */
#define MVE_PIXEL                                                                                                    \
    "vldrw.u32 q0, [%[k], #80]\n\t" MVE_TAP(0) MVE_TAP(4) MVE_TAP(8) MVE_TAP(12) MVE_TAP(16) MVE_TAP(20) MVE_TAP(24) \
        MVE_TAP(28) MVE_TAP(32)
#define MVE_TAP_PAIR(t)                                                               \
    "vldrb.s32 q3, [%[w], #" #t "]\n\t"                                               \
    "vldrb.s32 q2, [%[x], #" #t "]\n\tvmul.i32 q2, q2, q3\n\tvadd.i32 q0, q0, q2\n\t" \
    "vldrb.s32 q2, [%[x2], #" #t "]\n\tvmul.i32 q2, q2, q3\n\tvadd.i32 q1, q1, q2\n\t"
/* requantize q (multiplier q4, minus right shift q5; no left shift), clamp to q6..q7, offset */
#define MVE_RIGHT_SHIFT_OUTPUT(q)                                                               \
    "vqrdmulh.s32 " q ", " q ", q4\n\tvand q2, " q ", q5\n\tvshr.s32 q2, q2, #31\n\t"           \
    "vqadd.s32 " q ", " q ", q2\n\tvrshl.s32 " q ", " q ", q5\n\tvmax.s32 " q ", " q ", q6\n\t" \
    "vmin.s32 " q ", " q ", q7\n\tvadd.i32 " q ", " q ", %[offset]\n\t"

/* n >= 1 pixels, one at a time. */
static EDGEC_NOINLINE void mve_pixels_3x3(const int32x4_t *constants, const int8_t *x, const int8_t *w, int32_t n,
                                          int32_t step, int8_t *out, int32_t out_step, int32_t offset)
{
    __asm__ volatile(
        "vldrw.u32 q4, [%[k]]\n\t"
        "vldrw.u32 q3, [%[k], #16]\n\t"
        "vldrw.u32 q5, [%[k], #32]\n\t"
        "vldrw.u32 q6, [%[k], #48]\n\t"
        "vldrw.u32 q7, [%[k], #64]\n\t"
        "dls lr, %[n]\n"
        "1:\n\t" MVE_PIXEL "vqshl.s32 q0, q0, q3\n\t" /* the saturating left shift (q3), then as without one */
        MVE_RIGHT_SHIFT_OUTPUT("q0") "vstrb.32 q0, [%[out]]\n\t"
                                     "add %[x], %[x], %[step]\n\t"
                                     "add %[out], %[out], %[out_step]\n\t"
                                     "le lr, 1b"
        : [x] "+l"(x), [out] "+l"(out)
        : [w] "l"(w), [k] "r"(constants), [n] "r"(n), [step] "r"(step), [out_step] "r"(out_step), [offset] "r"(offset)
        : "lr", "q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "memory");
}

/* The output stage of MVE_RIGHT_SHIFT_OUTPUT on the pixel pair q0/q1 with each constant loaded
 * from the group where it is first needed (into q2/q3: no callee-saved register to save per row,
 * and each load issues between two vector operations of another kind), each pixel stored as
 * soon as it is done. */
#define MVE_RIGHT_SHIFT_OUTPUT_PAIR                                                               \
    "vldrw.u32 q2, [%[k]]\n\tvqrdmulh.s32 q0, q0, q2\n\tvqrdmulh.s32 q1, q1, q2\n\t"              \
    "vldrw.u32 q3, [%[k], #32]\n\tvand q2, q0, q3\n\tvshr.s32 q2, q2, #31\n\t"                    \
    "vqadd.s32 q0, q0, q2\n\tvand q2, q1, q3\n\tvshr.s32 q2, q2, #31\n\tvqadd.s32 q1, q1, q2\n\t" \
    "vrshl.s32 q0, q0, q3\n\tvrshl.s32 q1, q1, q3\n\tvldrw.u32 q2, [%[k], #48]\n\t"               \
    "vmax.s32 q0, q0, q2\n\tvmax.s32 q1, q1, q2\n\tvldrw.u32 q3, [%[k], #64]\n\t"                 \
    "vmin.s32 q0, q0, q3\n\tvmin.s32 q1, q1, q3\n\tvadd.i32 q0, q0, %[offset]\n\t"                \
    "vstrb.32 q0, [%[out]]\n\tvadd.i32 q1, q1, %[offset]\n\tvstrb.32 q1, [%[out2]]\n\t"
/* the same on the lone pixel q0 */
#define MVE_RIGHT_SHIFT_OUTPUT_ONE                                                                \
    "vldrw.u32 q2, [%[k]]\n\tvqrdmulh.s32 q0, q0, q2\n\tvldrw.u32 q3, [%[k], #32]\n\t"            \
    "vand q2, q0, q3\n\tvshr.s32 q2, q2, #31\n\tvqadd.s32 q0, q0, q2\n\tvrshl.s32 q0, q0, q3\n\t" \
    "vldrw.u32 q2, [%[k], #48]\n\tvmax.s32 q0, q0, q2\n\tvldrw.u32 q3, [%[k], #64]\n\t"           \
    "vmin.s32 q0, q0, q3\n\tvadd.i32 q0, q0, %[offset]\n\tvstrb.32 q0, [%[out]]\n\t"

/* What mve_pixel_pairs_3x3 reads: fixed for a group but for the row's phase and output. */
typedef struct {
    const int32x4_t *constants; /* the group's multiplier .. bias (mve_group_layout) */
    const int8_t *x;            /* the row's first window in the cache */
    const int8_t *w;            /* the phase's taps */
    int8_t *out;
    int32_t step; /* cache bytes from one window to the next */
    int32_t out_step;
    int32_t pairs; /* >= 0 */
    int32_t odd;   /* one more pixel after the pairs */
    int32_t offset;
} mve_row;

/* For a group without left shifts: a row's pixel pairs, each weight load serving both pixels,
 * then one more pixel when `odd`. Only q0..q3 (caller-saved: no VPUSH per row). */
static EDGEC_NOINLINE void mve_pixel_pairs_3x3(const mve_row *row)
{
    const int8_t *x = row->x;
    const int8_t *x2 = x + row->step;
    int8_t *out = row->out;
    int8_t *out2 = out + row->out_step;
    __asm__ volatile("wls lr, %[n], 2f\n"
                     "1:\n\t"
                     "vldrw.u32 q0, [%[k], #80]\n\t"
                     "vldrw.u32 q1, [%[k], #80]\n\t" MVE_TAP_PAIR(0) MVE_TAP_PAIR(4) MVE_TAP_PAIR(8) MVE_TAP_PAIR(12)
                         MVE_TAP_PAIR(16) MVE_TAP_PAIR(20) MVE_TAP_PAIR(24) MVE_TAP_PAIR(28) MVE_TAP_PAIR(32)
                             MVE_RIGHT_SHIFT_OUTPUT_PAIR "add %[x], %[x], %[step2]\n\t"
                                                         "add %[x2], %[x2], %[step2]\n\t"
                                                         "add %[out], %[out], %[out_step2]\n\t"
                                                         "add %[out2], %[out2], %[out_step2]\n\t"
                                                         "le lr, 1b\n"
                                                         "2:\n\t"
                                                         "cmp %[odd], #0\n\t"
                                                         "beq 3f\n\t" MVE_PIXEL MVE_RIGHT_SHIFT_OUTPUT_ONE "3:"
                     : [x] "+l"(x), [x2] "+l"(x2), [out] "+l"(out), [out2] "+l"(out2)
                     : [w] "l"(row->w), [k] "r"(row->constants), [n] "r"(row->pairs), [odd] "r"(row->odd),
                       [step2] "r"(2 * row->step), [out_step2] "r"(2 * row->out_step), [offset] "r"(row->offset)
                     : "lr", "q0", "q1", "q2", "q3", "memory", "cc");
}

/*
 * Five pixels per weight load (stride 1, the five windows 12 bytes apart): accumulators q0..q4,
 * the taps' weights alternating between q5 and q7 (the next tap's loaded between a VMUL and a
 * VADD, so every load issues next to an instruction of another class), the entry in q6. Tap 0
 * adds the bias (q7) to its products. The output stage requantizes all five (multiplier q5,
 * minus right shift q7), then clamps to q5..q7 (lo, hi), adds the offset and stores each.
 */
#define MVE_FIVE_PIXEL(q, w, off) \
    "vldrb.s32 q6, [%[x], #" off "]\n\tvmul.i32 q6, q6, " w "\n\tvadd.i32 " q ", " q ", q6\n\t"
#define MVE_FIVE_TAP(w, next, o0, o1, o2, o3, o4)                                                                 \
    "vldrb.s32 q6, [%[x], #" o0 "]\n\tvmul.i32 q6, q6, " w "\n\t" next                                            \
    "vadd.i32 q0, q0, q6\n\t" MVE_FIVE_PIXEL("q1", w, o1) MVE_FIVE_PIXEL("q2", w, o2) MVE_FIVE_PIXEL("q3", w, o3) \
        MVE_FIVE_PIXEL("q4", w, o4)
#define MVE_FIVE_FIRST(q, off) "vldrb.s32 q6, [%[x], #" off "]\n\tvmul.i32 q6, q6, q5\n\tvadd.i32 " q ", q6, q7\n\t"
#define MVE_FIVE_FIX(q) \
    "vand q6, " q ", q7\n\tvshr.s32 q6, q6, #31\n\tvqadd.s32 " q ", " q ", q6\n\tvrshl.s32 " q ", " q ", q7\n\t"
/* every shift < 0: the fixup's AND with the shift keeps just the sign bit */
#define MVE_FIVE_FIX_STRICT(q) "vshr.s32 q6, " q ", #31\n\tvqadd.s32 " q ", " q ", q6\n\tvrshl.s32 " q ", " q ", q7\n\t"
#define MVE_FIVE_CLAMP(q) "vmax.s32 " q ", " q ", q5\n\tvmin.s32 " q ", " q ", q7\n\t"
#define MVE_FIVE_STORE(q) "vstrb.32 " q ", [%[out]]\n\t"
#define MVE_FIVE_NEXT_OUT "add %[out], %[out], %[out_step]\n\t"

/* the five pixels' sums, then their multiplies with pixel 0's fixup among them */
#define MVE_FIVE_MACS                                                                                                \
    "vldrw.u32 q7, [%[k], #80]\n\t"                                                                                  \
    "vldrb.s32 q5, [%[w]]\n\t" MVE_FIVE_FIRST("q0", "0") MVE_FIVE_FIRST("q1", "12") MVE_FIVE_FIRST("q2", "24")       \
        MVE_FIVE_FIRST("q3", "36") MVE_FIVE_FIRST("q4", "48") "vldrb.s32 q7, [%[w], #4]\n\t" MVE_FIVE_TAP(           \
            "q7", "vldrb.s32 q5, [%[w], #8]\n\t", "4", "16", "28", "40",                                             \
            "52") MVE_FIVE_TAP("q5", "vldrb.s32 q7, [%[w], #12]\n\t", "8", "20", "32", "44", "56")                   \
            MVE_FIVE_TAP("q7", "vldrb.s32 q5, [%[w], #16]\n\t", "12", "24", "36", "48", "60")                        \
                MVE_FIVE_TAP("q5", "vldrb.s32 q7, [%[w], #20]\n\t", "16", "28", "40", "52", "64")                    \
                    MVE_FIVE_TAP("q7", "vldrb.s32 q5, [%[w], #24]\n\t", "20", "32", "44", "56", "68")                \
                        MVE_FIVE_TAP("q5", "vldrb.s32 q7, [%[w], #28]\n\t", "24", "36", "48", "60", "72")            \
                            MVE_FIVE_TAP("q7", "vldrb.s32 q5, [%[w], #32]\n\t", "28", "40", "52", "64", "76")        \
                                MVE_FIVE_TAP("q5", "", "32", "44", "56", "68", "80") "vldrw.u32 q5, [%[k]]\n\t"      \
                                                                                     "vqrdmulh.s32 q0, q0, q5\n\t"   \
                                                                                     "vldrw.u32 q7, [%[k], #32]\n\t" \
                                                                                     "vqrdmulh.s32 q1, q1, q5\n\t"
#define MVE_FIVE_REQUANTIZE       \
    MVE_FIVE_MACS                 \
    "vand q6, q0, q7\n\t"         \
    "vqrdmulh.s32 q2, q2, q5\n\t" \
    "vshr.s32 q6, q6, #31\n\t"    \
    "vqrdmulh.s32 q3, q3, q5\n\t" \
    "vqadd.s32 q0, q0, q6\n\t"    \
    "vqrdmulh.s32 q4, q4, q5\n\t" \
    "vrshl.s32 q0, q0, q7\n\t"    \
    "vldrw.u32 q5, [%[k], #48]\n\t" MVE_FIVE_FIX("q1") MVE_FIVE_FIX("q2") MVE_FIVE_FIX("q3") MVE_FIVE_FIX("q4")
#define MVE_FIVE_REQUANTIZE_STRICT                                                                         \
    MVE_FIVE_MACS                                                                                          \
    "vshr.s32 q6, q0, #31\n\t"                                                                             \
    "vqrdmulh.s32 q2, q2, q5\n\t"                                                                          \
    "vqadd.s32 q0, q0, q6\n\t"                                                                             \
    "vqrdmulh.s32 q3, q3, q5\n\t"                                                                          \
    "vrshl.s32 q0, q0, q7\n\t"                                                                             \
    "vqrdmulh.s32 q4, q4, q5\n\t"                                                                          \
    "vshr.s32 q6, q1, #31\n\t"                                                                             \
    "vldrw.u32 q5, [%[k], #48]\n\t"                                                                        \
    "vqadd.s32 q1, q1, q6\n\tvrshl.s32 q1, q1, q7\n\t" MVE_FIVE_FIX_STRICT("q2") MVE_FIVE_FIX_STRICT("q3") \
        MVE_FIVE_FIX_STRICT("q4")

/* n >= 1 blocks of five pixels of a group without left shifts at stride 1. */
#define MVE_FIVES(requantize)                                                                                          \
    __asm__ volatile(                                                                                                  \
        "dls lr, %[n]\n"                                                                                               \
        "1:\n\t" requantize "vldrw.u32 q7, [%[k], #64]\n\t" MVE_FIVE_CLAMP(                                            \
            "q0") "vadd.i32 q0, q0, %[offset]\n\t"                                                                     \
                  "vmax.s32 q1, q1, q5\n\t" MVE_FIVE_STORE(                                                            \
                      "q0") "vmin.s32 q1, q1, q7\n\t" MVE_FIVE_NEXT_OUT "vadd.i32 q1, q1, %[offset]\n\t"               \
                            "vmax.s32 q2, q2, q5\n\t" MVE_FIVE_STORE(                                                  \
                                "q1") "vmin.s32 q2, q2, q7\n\t" MVE_FIVE_NEXT_OUT "vadd.i32 q2, q2, %[offset]\n\t"     \
                                      "vmax.s32 q3, q3, q5\n\t" MVE_FIVE_STORE(                                        \
                                          "q2") "vmin.s32 q3, q3, q7\n\t" MVE_FIVE_NEXT_OUT                            \
                                                "vadd.i32 q3, q3, %[offset]\n\t"                                       \
                                                "vmax.s32 q4, q4, q5\n\t" MVE_FIVE_STORE(                              \
                                                    "q3") "vmin.s32 q4, q4, q7\n\t" MVE_FIVE_NEXT_OUT                  \
                                                          "vadd.i32 q4, q4, %[offset]\n\t" MVE_FIVE_STORE(             \
                                                              "q4") "add %[x], %[x], #60\n\t" MVE_FIVE_NEXT_OUT        \
                                                                    "le lr, 1b"                                        \
        : [x] "+l"(x), [out] "+l"(out)                                                                                 \
        :                                                                                                              \
        [w] "l"(row->w), [k] "r"(row->constants), [n] "r"(n), [out_step] "r"(row->out_step), [offset] "r"(row->offset) \
        : "lr", "q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "memory")

static EDGEC_NOINLINE void mve_pixel_fives_3x3(const mve_row *row, int32_t n)
{
    const int8_t *x = row->x;
    int8_t *out = row->out;
    MVE_FIVES(MVE_FIVE_REQUANTIZE);
}

/* The same when every channel's shift is < 0. */
static EDGEC_NOINLINE void mve_pixel_fives_3x3_strict(const mve_row *row, int32_t n)
{
    const int8_t *x = row->x;
    int8_t *out = row->out;
    MVE_FIVES(MVE_FIVE_REQUANTIZE_STRICT);
}

/* A stride-1 row of a group without left shifts: blocks of five pixels, then pairs and one. */
static void mve_row_3x3(const mve_row *row, int32_t out_w, int strict_right_shifts)
{
    const int32_t fives = out_w / 5;
    if (fives > 0) {
        if (strict_right_shifts) {
            mve_pixel_fives_3x3_strict(row, fives);
        } else {
            mve_pixel_fives_3x3(row, fives);
        }
    }
    const int32_t rest = out_w - 5 * fives;
    if (rest > 0) {
        const mve_row tail = { row->constants, row->x + 5 * fives * row->step,
                               row->w,         row->out + 5 * fives * row->out_step,
                               row->step,      row->out_step,
                               rest / 2,       rest % 2,
                               row->offset };
        mve_pixel_pairs_3x3(&tail);
    }
}

/* A row of 3x3 undilated pixels of a full group: by pixel pairs when no channel shifts left. */
static void row_3x3_full(const packed_group *g, const int8_t *x, const int8_t *w, int8_t *out, int32_t out_step)
{
    const int32_t offset = g->layer->stage.offset;
    const int32x4_t *constants = &g->multiplier; /* .. bias: see mve_group_layout */
    const int32_t step = 12 * g->layer->stride_w;
    const int32_t out_w = g->layer->out_w;
    if (g->right_shifts_only) {
        const mve_row row = { constants, x, w, out, step, out_step, out_w / 2, out_w % 2, offset };
        mve_pixel_pairs_3x3(&row);
    } else {
        mve_pixels_3x3(constants, x, w, out_w, step, out, out_step, offset);
    }
}

#endif

/* A row of 3x3 undilated pixels in phase p: nine consecutive entries each, a VLDRB.S32, VMUL
 * and VADD per tap. */
static EDGEC_NOINLINE void group_row_3x3(const packed_group *g, int32_t p, int8_t *out, int32_t out_step)
{
    const int8_t *x = g->layer->cache;
    const int32_t step = 12 * g->layer->stride_w;
    const int8_t *w = g->w[p][0];
#if defined(__OPTIMIZE__)
    if (g->count == GROUP) {
        row_3x3_full(g, x, w, out, out_step);
        return;
    }
#endif
    for (int32_t ox = 0; ox < g->layer->out_w; ox++, x += step, out += out_step) {
        int32x4_t acc = g->bias;
        for (int32_t t = 0; t < 9; t++) {
            acc = vaddq_s32(acc, vmulq_s32(vldrbq_s32(x + 4 * t), vldrbq_s32(w + 4 * t)));
        }
        group_store(g, acc, out);
    }
}

#else /* DSP and portable: four int32 accumulators */

#if defined(__ARM_FEATURE_DSP)
/* The four channels widened to int16 pairs (0/2, then 1/3). */
static inline void cache_entry(int8_t *dst, uint32_t four)
{
    edgec_dsp_store_widened(dst, (int32_t)four);
}

/* acc_k += x_k * w_k for the four channels, x and w as int16 pairs (0/2, 1/3); x is the entry at
 * *x, and *x steps to the next one (one LDRD with writeback). */
static inline void tap_four(const int8_t **x, int32_t w02, int32_t w13, int32_t *a0, int32_t *a1, int32_t *a2,
                            int32_t *a3)
{
    int32_t x02;
    int32_t x13;
    __asm__("ldrd %0, %1, [%2], #8" : "=r"(x02), "=r"(x13), "+r"(*x) : "m"(*(const int8_t(*)[8]) * x));
    *a0 = __smlabb(x02, w02, *a0);
    *a2 = __smlatt(x02, w02, *a2);
    *a1 = __smlabb(x13, w13, *a1);
    *a3 = __smlatt(x13, w13, *a3);
}

static void tap_four_int8(const int8_t *x, const int8_t *w, int32_t *a0, int32_t *a1, int32_t *a2, int32_t *a3)
{
    int32_t ws;
    memcpy(&ws, w, 4);
    tap_four(&x, __sxtb16(ws), edgec_sxtb16_ror8(ws), a0, a1, a2, a3);
}

/*
 * The four outputs by the short requantization, each saturated to int8, clamped to the activation
 * bytewise and stored as one word. Not inlined: the tap loop around it needs the registers.
 */
static EDGEC_NOINLINE void dsp_store_four(const packed_group *g, int32_t a0, int32_t a1, int32_t a2, int32_t a3,
                                          int8_t *out)
{
    const uint32_t packed =
        edgec_dsp_pack_s8x4(edgec_dsp_requantize_ssat8(a0, g->q[0]), edgec_dsp_requantize_ssat8(a1, g->q[1]),
                            edgec_dsp_requantize_ssat8(a2, g->q[2]), edgec_dsp_requantize_ssat8(a3, g->q[3]));
    const uint32_t clamped = edgec_dsp_clamp_s8x4(packed, g->lows, g->highs);
    memcpy(out, &clamped, sizeof clamped);
}
#else
static inline void cache_entry(int8_t *dst, uint32_t four)
{
    memcpy(dst, &four, 4);
}

/* acc += x * w, wrapping like SMLAxy: the folded bias may take a sum past int32 and back. */
static inline void mac_wrapping(int32_t *acc, int8_t x, int8_t w)
{
    *acc = (int32_t)((uint32_t)*acc + (uint32_t)((int32_t)x * (int32_t)w));
}

static inline void tap_four_int8(const int8_t *x, const int8_t *w, int32_t *a0, int32_t *a1, int32_t *a2, int32_t *a3)
{
    mac_wrapping(a0, x[0], w[0]);
    mac_wrapping(a1, x[1], w[1]);
    mac_wrapping(a2, x[2], w[2]);
    mac_wrapping(a3, x[3], w[3]);
}
#endif

static void group_make(packed_group *g)
{
    const packed_layer *layer = g->layer;
    memcpy(g->bias, layer->bias + g->first, sizeof g->bias);
#if defined(__ARM_FEATURE_DSP)
    const int32_t *mult = layer->quant->multiplier + g->first;
    const int32_t *shift = layer->quant->shift + g->first;
    g->short_requant = g->count == GROUP && edgec_dsp_requant_all_short(mult, shift, GROUP);
    for (int32_t k = 0; g->short_requant && k < GROUP; k++) {
        g->q[k] = edgec_dsp_requant_make(mult[k], shift[k], edgec_dsp_round_base(layer->stage.offset));
    }
    g->lows = edgec_dsp_bytes(layer->stage.lo + layer->stage.offset);
    g->highs = edgec_dsp_bytes(layer->stage.hi + layer->stage.offset);
#endif
}

static inline void group_store(const packed_group *g, int32_t a0, int32_t a1, int32_t a2, int32_t a3, int8_t *out)
{
#if defined(__ARM_FEATURE_DSP)
    if (g->short_requant) {
        dsp_store_four(g, a0, a1, a2, a3, out);
        return;
    }
#endif
    const int32_t sums[4] = { a0, a1, a2, a3 };
    const int32_t *mult = g->layer->quant->multiplier + g->first;
    const int32_t *shift = g->layer->quant->shift + g->first;
    for (int32_t k = 0; k < g->count; k++) {
        out[k] = edgec_requantize_s8(sums[k], mult[k], shift[k], g->layer->stage);
    }
}

static void group_pixel(const packed_group *g, const int32_t *slots, int32_t at, int8_t *out)
{
    const packed_layer *layer = g->layer;
    const int32_t entry = (int32_t)EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES;
    const int8_t *w = g->taps;
    int32_t a0 = g->bias[0], a1 = g->bias[1], a2 = g->bias[2], a3 = g->bias[3];
    for (int32_t ky = 0; ky < layer->k_h; ky++) {
        const int8_t *x = layer->cache + at * layer->column_bytes + entry * slots[ky];
        for (int32_t kx = 0; kx < layer->k_w; kx++, w += 4, x += layer->dilation_w * layer->column_bytes) {
            tap_four_int8(x, w, &a0, &a1, &a2, &a3);
        }
    }
    group_store(g, a0, a1, a2, a3, out);
}

/* A row of 3x3 undilated pixels in phase p: nine consecutive entries each. */
#if defined(__ARM_FEATURE_DSP) && defined(__OPTIMIZE__) && EDGEC_UNALIGNED_ASM
/* What dsp_row_3x3's assembly reads per row besides the group. */
typedef struct {
    int32_t out_step;
    int32_t x_advance; /* from the entry after a pixel's ninth to the next pixel's first */
    int32_t pixels;    /* >= 1; counted down */
} dsp_row;

/* A tap: its entry and weights by 4 loads in one run (pipelined: 5 cycles; 2 LDRD take 6). */
#define DSP_TAP(t)                                                                                           \
    "ldr r8, [%[x]], #4\n\tldr r9, [%[x]], #4\n\tldr r10, [%[w], #" #t "]\n\tldr r12, [%[w], #" #t "+4]\n\t" \
    "smlabb r0, r8, r10, r0\n\tsmlatt r2, r8, r10, r2\n\t"                                                   \
    "smlabb r1, r9, r12, r1\n\tsmlatt r3, r9, r12, r3\n\t"

/*
 * A row of 3x3 undilated pixels of a full group with the short requantization, in assembly (an
 * optimised build's: the unoptimised one keeps r7 for its frame): per pixel the folded biases,
 * the nine taps of group_row_3x3 (4 loads of the entry and the weights, four SMLAxy), then
 * dsp_store_four's requantization, packing, clamp and store -- GCC spilled the accumulators
 * around a call to it.
 */
static void dsp_row_3x3(const packed_group *g, const int32_t (*w)[2], const int8_t *x, int8_t *out, dsp_row *row)
{
    __asm__ volatile(".p2align 2\n" /* the loop's first LDRD is 32-bit: at 2 mod 4 each taken BNE costs a cycle more */
                     "1:\n\t"
                     "ldrd r0, r1, [%[g], %[bias]]\n\t"
                     "ldrd r2, r3, [%[g], %[bias2]]\n\t" DSP_TAP(0) DSP_TAP(8) DSP_TAP(16) DSP_TAP(24) DSP_TAP(32)
                         DSP_TAP(40) DSP_TAP(48) DSP_TAP(56) DSP_TAP(
                             64) "ldrd r8, r9, [%[g], %[q0]]\n\tldr r10, [%[g], %[q0s]]\n\t"
                                 "and r12, r0, #0x80000000\n\torr r12, r12, #0x40000000\n\tadd r9, r9, r0, asr #31\n\t"
                                 "smlal r12, r9, r0, r8\n\tasr r0, r9, r10\n\tssat r0, #8, r0\n\t"
                                 "ldrd r8, r9, [%[g], %[q1]]\n\tldr r10, [%[g], %[q1s]]\n\t"
                                 "and r12, r1, #0x80000000\n\torr r12, r12, #0x40000000\n\tadd r9, r9, r1, asr #31\n\t"
                                 "smlal r12, r9, r1, r8\n\tasr r1, r9, r10\n\tssat r1, #8, r1\n\t"
                                 "ldrd r8, r9, [%[g], %[q2]]\n\tldr r10, [%[g], %[q2s]]\n\t"
                                 "and r12, r2, #0x80000000\n\torr r12, r12, #0x40000000\n\tadd r9, r9, r2, asr #31\n\t"
                                 "smlal r12, r9, r2, r8\n\tasr r2, r9, r10\n\tssat r2, #8, r2\n\t"
                                 "ldrd r8, r9, [%[g], %[q3]]\n\tldr r10, [%[g], %[q3s]]\n\t"
                                 "and r12, r3, #0x80000000\n\torr r12, r12, #0x40000000\n\tadd r9, r9, r3, asr #31\n\t"
                                 "smlal r12, r9, r3, r8\n\tasr r3, r9, r10\n\tssat r3, #8, r3\n\t"
                                 "bfi r0, r1, #8, #8\n\tbfi r0, r2, #16, #8\n\tbfi r0, r3, #24, #8\n\t"
                                 "ldrd r8, r9, [%[g], %[lows]]\n\t"
                                 "ssub8 r10, r0, r8\n\tsel r0, r0, r8\n\tssub8 r10, r0, r9\n\tsel r0, r9, r0\n\t"
                                 "str r0, [%[out]]\n\t"
                                 "ldrd r8, r9, [%[row]]\n\t"
                                 "add %[out], %[out], r8\n\t"
                                 "add %[x], %[x], r9\n\t"
                                 "ldr r8, [%[row], #8]\n\t"
                                 "subs r8, r8, #1\n\t"
                                 "str r8, [%[row], #8]\n\t"
                                 "bne 1b"
                     : [x] "+r"(x), [out] "+r"(out)
                     : [w] "r"(w), [g] "r"(g), [row] "r"(row), [bias] "i"(offsetof(packed_group, bias)),
                       [bias2] "i"(offsetof(packed_group, bias) + 8), [q0] "i"(offsetof(packed_group, q)),
                       [q0s] "i"(offsetof(packed_group, q) + 8), [q1] "i"(offsetof(packed_group, q) + 12),
                       [q1s] "i"(offsetof(packed_group, q) + 20), [q2] "i"(offsetof(packed_group, q) + 24),
                       [q2s] "i"(offsetof(packed_group, q) + 32), [q3] "i"(offsetof(packed_group, q) + 36),
                       [q3s] "i"(offsetof(packed_group, q) + 44), [lows] "i"(offsetof(packed_group, lows))
                     : "r0", "r1", "r2", "r3", "r8", "r9", "r10", "r12", "memory", "cc");
}

typedef char dsp_requant_layout[sizeof(edgec_dsp_requant) == 12 && offsetof(edgec_dsp_requant, round_high) == 4 &&
                                        offsetof(edgec_dsp_requant, shift) == 8 &&
                                        offsetof(packed_group, highs) == offsetof(packed_group, lows) + 4
                                    ? 1
                                    : -1];
#endif

static EDGEC_NOINLINE void group_row_3x3(const packed_group *g, int32_t p, int8_t *out, int32_t out_step)
{
    const int32_t entry = (int32_t)EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES;
    const int32_t step = 3 * entry * g->layer->stride_w;
    const int8_t *x = g->layer->cache;
#if defined(__ARM_FEATURE_DSP) && defined(__OPTIMIZE__) && EDGEC_UNALIGNED_ASM
    if (g->short_requant) { /* a full group */
        dsp_row row = { out_step, step - 9 * entry, g->layer->out_w };
        dsp_row_3x3(g, g->w[p], x, out, &row);
        return;
    }
#endif
    for (int32_t ox = 0; ox < g->layer->out_w; ox++, x += step, out += out_step) {
        int32_t a0 = g->bias[0], a1 = g->bias[1], a2 = g->bias[2], a3 = g->bias[3];
#if defined(__ARM_FEATURE_DSP)
        const int32_t(*w)[2] = g->w[p];
        const int8_t *tap = x; /* the nine taps unrolled: GCC -O2 keeps the loop */
        tap_four(&tap, w[0][0], w[0][1], &a0, &a1, &a2, &a3);
        tap_four(&tap, w[1][0], w[1][1], &a0, &a1, &a2, &a3);
        tap_four(&tap, w[2][0], w[2][1], &a0, &a1, &a2, &a3);
        tap_four(&tap, w[3][0], w[3][1], &a0, &a1, &a2, &a3);
        tap_four(&tap, w[4][0], w[4][1], &a0, &a1, &a2, &a3);
        tap_four(&tap, w[5][0], w[5][1], &a0, &a1, &a2, &a3);
        tap_four(&tap, w[6][0], w[6][1], &a0, &a1, &a2, &a3);
        tap_four(&tap, w[7][0], w[7][1], &a0, &a1, &a2, &a3);
        tap_four(&tap, w[8][0], w[8][1], &a0, &a1, &a2, &a3);
#else
        for (int32_t t = 0; t < 9; t++) {
            tap_four_int8(x + entry * t, g->w[p][t], &a0, &a1, &a2, &a3);
        }
#endif
        group_store(g, a0, a1, a2, a3, out);
    }
}
#endif

/* The 3x3 taps in each phase's cache order (widened where the entries are). */
static void group_phases(packed_group *g)
{
    for (int32_t t = 0; t < 9; t++) { /* phase 0: cache order [kx][slot], slot s = filter row s */
        const int8_t *tap = g->taps + 4 * ((t % 3) * 3 + t / 3);
#if EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES == 8
        int32_t ws;
        memcpy(&ws, tap, 4);
        g->w[0][t][0] = __sxtb16(ws);
        g->w[0][t][1] = edgec_sxtb16_ror8(ws);
#else
        memcpy(g->w[0][t], tap, 4);
#endif
    }
    for (int32_t p = 1; p < PHASES; p++) {
        for (int32_t kx = 0; kx < 3; kx++) {
            for (int32_t s = 0; s < 3; s++) {
                memcpy(g->w[p][kx * 3 + s], g->w[0][kx * 3 + phase_source_slot[p][s]], sizeof g->w[0][0]);
            }
        }
    }
}

/* ---- The row cache -------------------------------------------------------------------------- */

/* The padding columns' entries the pad value, once per group: they keep it, and fill_row writes
 * the image columns of every row it brings in (the pad value too, above and below the image). */
static void cache_pad(const packed_layer *layer)
{
    const int32_t entry = (int32_t)EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES;
    int8_t *dst = layer->cache;
    for (int32_t j = 0; j < layer->image_start * layer->k_h; j++, dst += entry) { /* left */
        cache_entry(dst, layer->pad_four);
    }
    dst = layer->cache + layer->image_end * layer->column_bytes;
    for (int32_t j = layer->image_end * layer->k_h; j < layer->padded_w * layer->k_h; j++, dst += entry) {
        cache_entry(dst, layer->pad_four); /* right */
    }
}

/* n image columns of a full group: four channels from src (pixels c bytes apart) per entry. */
static inline void fill_image_columns(int8_t *dst, const int8_t *src, int32_t n, int32_t c, int32_t step)
{
    for (int32_t k = 0; k < n; k++, dst += step) {
        uint32_t four;
        memcpy(&four, src + k * c, 4);
        cache_entry(dst, four);
    }
}

/* The image columns of padded row r (input row r - pad_top) of batch b into cache slot `slot`:
 * the group's channels (the pad byte past its last one), or the pad value above and below the
 * image. */
static void fill_row(const packed_group *g, int32_t b, int32_t r, int32_t slot)
{
    const packed_layer *layer = g->layer;
    const int32_t step = layer->column_bytes;
    const int32_t iy = r - layer->pad_top;
    const int32_t n = layer->image_end - layer->image_start;
    int8_t *dst = layer->cache + layer->image_start * step + slot * (int32_t)EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES;
    if (iy < 0 || iy >= layer->in_h) {
        for (int32_t k = 0; k < n; k++, dst += step) {
            cache_entry(dst, layer->pad_four);
        }
        return;
    }
    if (n <= 0) {
        return;
    }
    const int32_t c = layer->c;
    const int8_t *src =
        layer->input + ((b * layer->in_h + iy) * layer->in_w + layer->image_start - layer->pad_left) * c + g->first;
    if (g->count == GROUP) { /* a fixed-size copy is one load, a variable one a call */
        fill_image_columns(dst, src, n, c, step);
        return;
    }
    uint32_t four = layer->pad_four; /* past the group's last channel: the pad byte */
    for (int32_t k = 0; k < n; k++, dst += step) {
        memcpy(&four, src + k * c, (size_t)g->count);
        cache_entry(dst, four);
    }
}

/*
 * Brings the rows output row oy reads into the cache; slots[ky] = the slot of filter row ky.
 * Undilated, padded row r stays in slot r mod KH until overwritten: rows below `*cached` are
 * there already. Dilated, every row is copied into slot ky.
 */
static void cache_rows(const packed_group *g, int32_t b, int32_t oy, int32_t *cached, int32_t *slots)
{
    const packed_layer *layer = g->layer;
    const int32_t k_h = layer->k_h;
    const int32_t first = oy * layer->stride_h;
    if (layer->dilation_h != 1) {
        for (int32_t ky = 0; ky < k_h; ky++) {
            slots[ky] = ky;
            fill_row(g, b, first + ky * layer->dilation_h, ky);
        }
        return;
    }
    for (int32_t r = EDGEC_MAX(first, *cached); r < first + k_h; r++) {
        fill_row(g, b, r, r % k_h);
    }
    *cached = first + k_h;
    int32_t slot = first % k_h;
    for (int32_t ky = 0; ky < k_h; ky++) {
        slots[ky] = slot;
        slot = slot + 1 == k_h ? 0 : slot + 1;
    }
}

#if defined(__ARM_FEATURE_DSP) && defined(__OPTIMIZE__) && EDGEC_UNALIGNED_ASM && \
    !(defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))
/* Pixel pairs of a row (dsp_pairs_3x3_step24/48 after group_outputs, so that the code before
 * keeps its place in the instruction cache: dsp_row_3x3 and group_outputs' row loop as before). */
typedef struct dsp_pair_run dsp_pair_run;
typedef void (*dsp_pairs_fn)(dsp_pair_run *run);
static dsp_pairs_fn dsp_pairs_for(const packed_layer *layer);
static void dsp_row_3x3_paired(dsp_pairs_fn pairs, const packed_group *g, const int32_t (*w)[2], const int8_t *x,
                               int8_t *out, dsp_row *row);
static void dsp_group_rows_3x3_paired(const packed_group *g, int32_t b, int8_t *out, int32_t pixel_step,
                                      dsp_pairs_fn pairs);

#if defined(__GNUC__)
#define DSP_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define DSP_ALWAYS_INLINE inline
#endif

/*
 * Every row of batch b of a full group with a 3x3 undilated window and the short requantization:
 * cache_rows and group_row_3x3 with their bookkeeping cut to the bone (filter row 0 in slot
 * first mod 3, so that is the phase), as a DS-CNN-sized row of 5 pixels spent as much on it as on
 * two of its pixels. `pairs` (dsp_pairs_for) NULL: every row by dsp_row_3x3. Inlined into group_outputs for that
 * case, so that rows without pairs run the same code as before the pairs existed, and into
 * dsp_group_rows_3x3_paired for the other.
 */
static DSP_ALWAYS_INLINE void dsp_group_rows_3x3(const packed_group *g, int32_t b, int8_t *out, int32_t pixel_step,
                                                 dsp_pairs_fn pairs)
{
    const packed_layer *layer = g->layer;
    const int32_t entry = (int32_t)EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES;
    const int32_t row_bytes = layer->out_w * pixel_step;
    const int32_t n = layer->image_end - layer->image_start;
    int8_t *columns = layer->cache + layer->image_start * layer->column_bytes;
    dsp_row row;
    row.out_step = pixel_step;
    row.x_advance = 3 * entry * layer->stride_w - 9 * entry;
    int32_t cached = 0;
    for (int32_t oy = 0; oy < layer->out_h; oy++) {
        const int32_t first = oy * layer->stride_h;
        for (int32_t r = EDGEC_MAX(first, cached); r < first + 3; r++) {
            const int32_t iy = r - layer->pad_top;
            if (iy < 0 || iy >= layer->in_h || n <= 0) {
                fill_row(g, b, r, r % 3); /* the pad value, above or below the image */
                continue;
            }
            /* an image row: n > 0 means image_start == pad_left, so column image_start is pixel 0 */
            fill_image_columns(columns + (r % 3) * entry,
                               layer->input + (b * layer->in_h + iy) * layer->in_w * layer->c + g->first, n, layer->c,
                               layer->column_bytes);
        }
        cached = first + 3;
        row.pixels = layer->out_w;
        if (pairs != NULL) {
            dsp_row_3x3_paired(pairs, g, g->w[first % 3], layer->cache, out + oy * row_bytes, &row);
        } else {
            dsp_row_3x3(g, g->w[first % 3], layer->cache, out + oy * row_bytes, &row);
        }
    }
}
#endif

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1) && defined(__OPTIMIZE__)
/*
 * Every row of batch b of a full group with a 3x3 undilated window: cache_rows and
 * group_row_3x3 with their bookkeeping cut to the bone (filter row 0 in slot first mod 3, so that
 * is the phase), as for a 25x5 layer they cost more than the row's five pixels.
 */
static void mve_group_rows_3x3(const packed_group *g, int32_t b, int8_t *out, int32_t pixel_step)
{
    const packed_layer *layer = g->layer;
    const int32_t row_bytes = layer->out_w * pixel_step;
    const int32_t n = layer->image_end - layer->image_start;
    int8_t *columns = layer->cache + layer->image_start * layer->column_bytes;
    /* an image row: n > 0 means image_start == pad_left, so column image_start is pixel 0 */
    const int8_t *image = layer->input + b * layer->in_h * layer->in_w * layer->c + g->first;
    const int32_t in_row = layer->in_w * layer->c;
    const int32_t out_w = layer->out_w;
    mve_row row = { &g->multiplier, layer->cache, g->w[0][0],         out, 12 * layer->stride_w, pixel_step,
                    out_w / 2,      out_w % 2,    layer->stage.offset };
    int32_t cached = 0;
    for (int32_t oy = 0, first = 0; oy < layer->out_h; oy++, first += layer->stride_h) {
        for (int32_t r = EDGEC_MAX(first, cached); r < first + 3; r++) {
            const int32_t iy = r - layer->pad_top;
            if (iy < 0 || iy >= layer->in_h || n <= 0) {
                fill_row(g, b, r, r % 3); /* the pad value, above or below the image */
                continue;
            }
            fill_image_columns(columns + (r % 3) * 4, image + iy * in_row, n, layer->c, layer->column_bytes);
        }
        cached = first + 3;
        if (!g->right_shifts_only) {
            row_3x3_full(g, layer->cache, g->w[first % 3][0], out, pixel_step);
        } else {
            row.w = g->w[first % 3][0];
            row.out = out;
            if (layer->stride_w == 1) {
                mve_row_3x3(&row, out_w, g->strict_right_shifts);
            } else {
                mve_pixel_pairs_3x3(&row);
            }
        }
        out += row_bytes;
    }
}
#endif

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1) && defined(__OPTIMIZE__)
/*
 * mve_group_rows_3x3 for a layer at stride 1 whose output rows are whole blocks of five pixels
 * (a 25x5 layer) and a group without left shifts: each output row oy brings in one new padded
 * row oy + 2, whose slot and filter phase cycle through 0, 1, 2 without divisions, then runs
 * its blocks.
 */
static void mve_group_rows_fives(const packed_group *g, int32_t b, int8_t *out, int32_t pixel_step)
{
    const packed_layer *layer = g->layer;
    const int32_t row_bytes = layer->out_w * pixel_step;
    const int32_t n = layer->image_end - layer->image_start;
    int8_t *columns = layer->cache + layer->image_start * layer->column_bytes;
    const int8_t *image = layer->input + b * layer->in_h * layer->in_w * layer->c + g->first;
    const int32_t in_row = layer->in_w * layer->c;
    const int32_t fives = layer->out_w / 5;
    void (*const run_fives)(const mve_row *, int32_t) =
        g->strict_right_shifts ? mve_pixel_fives_3x3_strict : mve_pixel_fives_3x3;
    mve_row row = { &g->multiplier, layer->cache, g->w[0][0], out, 12, pixel_step, 0, 0, layer->stage.offset };
    fill_row(g, b, 0, 0);
    fill_row(g, b, 1, 1);
    int32_t slot = 2;  /* of padded row oy + 2 */
    int32_t phase = 0; /* oy mod 3 */
    for (int32_t oy = 0; oy < layer->out_h; oy++) {
        const int32_t iy = oy + 2 - layer->pad_top;
        if (iy >= 0 && iy < layer->in_h && n > 0) {
            fill_image_columns(columns + 4 * slot, image + iy * in_row, n, layer->c, 12);
        } else {
            fill_row(g, b, oy + 2, slot);
        }
        row.w = g->w[phase][0];
        row.out = out;
        run_fives(&row, fives);
        out += row_bytes;
        slot = slot == 2 ? 0 : slot + 1;
        phase = phase == 2 ? 0 : phase + 1;
    }
}
#endif

/* One batch's output rows of a group, through the row cache; returns the output after them. Apart
 * from group_outputs so that its cache slots are on the stack only on this path, not under the
 * DSP/Helium row routines group_outputs calls instead (the deepest stack of a model's invoke). */
static EDGEC_NOINLINE int8_t *group_rows(const packed_group *g, int32_t b, int8_t *out, int32_t pixel_step)
{
    const packed_layer *layer = g->layer;
    int32_t slots[EDGEC_DEPTHWISE_PACKED_MAX_K];
    int32_t cached = 0;
    for (int32_t oy = 0; oy < layer->out_h; oy++) {
        cache_rows(g, b, oy, &cached, slots);
        if (layer->unrolled) {
            group_row_3x3(g, slots[0], out, pixel_step);
            out += layer->out_w * pixel_step;
            continue;
        }
        for (int32_t ox = 0; ox < layer->out_w; ox++, out += pixel_step) {
            group_pixel(g, slots, ox * layer->stride_w, out);
        }
    }
    return out;
}

/* All output pixels of one group, in NHWC order, into `out` (pixels `pixel_step` bytes apart). */
static void group_outputs(const packed_layer *layer, int32_t batches, int32_t first, int8_t *out, int32_t pixel_step)
{
    packed_group g;
    g.layer = layer;
    g.first = first;
    g.count = EDGEC_MIN(GROUP, layer->c - first);
    g.taps = layer->filter + first * layer->k_h * layer->k_w;
    group_make(&g);
    if (layer->unrolled) {
        group_phases(&g);
    }
    cache_pad(layer);

    for (int32_t b = 0; b < batches; b++) {
#if defined(__ARM_FEATURE_DSP) && defined(__OPTIMIZE__) && EDGEC_UNALIGNED_ASM && \
    !(defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))
        if (layer->unrolled && g.short_requant) {
            int8_t *batch_out = out + b * layer->out_h * layer->out_w * pixel_step;
            const dsp_pairs_fn pairs = dsp_pairs_for(layer);
            dsp_group_rows_3x3_paired(&g, b, batch_out, pixel_step, pairs);
            continue;
        }
#endif
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1) && defined(__OPTIMIZE__)
        if (layer->unrolled && g.count == GROUP && g.right_shifts_only && layer->stride_h == 1 &&
            layer->stride_w == 1 && layer->out_w % 5 == 0) {
            mve_group_rows_fives(&g, b, out + b * layer->out_h * layer->out_w * pixel_step, pixel_step);
            continue;
        }
        if (layer->unrolled && g.count == GROUP) {
            mve_group_rows_3x3(&g, b, out + b * layer->out_h * layer->out_w * pixel_step, pixel_step);
            continue;
        }
#endif
        out = group_rows(&g, b, out, pixel_step);
    }
}

#if defined(__ARM_FEATURE_DSP) && defined(__OPTIMIZE__) && EDGEC_UNALIGNED_ASM && \
    !(defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))
/*
 * Pixel pairs of a 3x3 row: the second pixel's entries lie `step` bytes past the first's, and
 * both take each tap's weights from one pair of loads (the first pixel's four SMLAxy, then the
 * second's) and each channel's requantization constants from one LDRD + LDR. A naked routine, so
 * all 14 registers are its own: r0..r3 the first pixel's sums, r4..r7 the second's, r8 the entry
 * pointer, r9 the weights, r10/r11 a tap's weights, r12/lr its entry. The fields it reads:
 */
struct dsp_pair_run {
    const int8_t *x;       /*  0: the pair's first entry (advanced) */
    const int32_t (*w)[2]; /*  4: the phase's taps */
    int8_t *out;           /*  8: the pair's first output (advanced) */
    int32_t out_step;      /* 12 */
    int32_t x_advance;     /* 16: from a pair's first entry to the next pair's: 2 * step */
    int32_t pairs;         /* 20: >= 1; counted down */
    const packed_group *g; /* 24 */
};

typedef char dsp_pair_run_layout[offsetof(dsp_pair_run, x_advance) == 16 && offsetof(dsp_pair_run, g) == 24 ? 1 : -1];

/* packed_group's fields the routine reads, by offset (a naked function takes no operands). */
#define DSP_GROUP_BIAS 16
#define DSP_GROUP_Q 36
#define DSP_GROUP_LOWS 84
typedef char dsp_pair_group_layout[offsetof(packed_group, bias) == DSP_GROUP_BIAS &&
                                           offsetof(packed_group, q) == DSP_GROUP_Q &&
                                           offsetof(packed_group, lows) == DSP_GROUP_LOWS
                                       ? 1
                                       : -1];

#define DSP_STR(x) #x
#define DSP_XSTR(x) DSP_STR(x)

/* Tap t of both pixels, the second's entry `step` bytes on. */
#define DSP_PAIR_TAP(t, step)                                                   \
    "ldr r10, [r9, #" #t "]\n\tldr r11, [r9, #" #t "+4]\n\t"                    \
    "ldr r12, [r8, #" #t "]\n\tldr lr, [r8, #" #t "+4]\n\t"                     \
    "smlabb r0, r12, r10, r0\n\tsmlatt r2, r12, r10, r2\n\t"                    \
    "smlabb r1, lr, r11, r1\n\tsmlatt r3, lr, r11, r3\n\t"                      \
    "ldr r12, [r8, #" #step "+" #t "]\n\tldr lr, [r8, #" #step "+" #t "+4]\n\t" \
    "smlabb r4, r12, r10, r4\n\tsmlatt r6, r12, r10, r6\n\t"                    \
    "smlabb r5, lr, r11, r5\n\tsmlatt r7, lr, r11, r7\n\t"

/* Channel k's short requantization of both pixels' sums a and b (lr = the group; dsp_row_3x3's
 * arithmetic: r8 multiplier, r9 round_high, r10 shift). */
#define DSP_PAIR_REQUANT(a, b, q)                                                                 \
    "ldrd r8, r9, [lr, #" q "]\n\tldr r10, [lr, #" q "+8]\n\t"                                    \
    "and r12, " a ", #0x80000000\n\torr r12, r12, #0x40000000\n\tadd r11, r9, " a ", asr #31\n\t" \
    "smlal r12, r11, " a ", r8\n\tasr " a ", r11, r10\n\tssat " a ", #8, " a "\n\t"               \
    "and r12, " b ", #0x80000000\n\torr r12, r12, #0x40000000\n\tadd r11, r9, " b ", asr #31\n\t" \
    "smlal r12, r11, " b ", r8\n\tasr " b ", r11, r10\n\tssat " b ", #8, " b "\n\t"

#define DSP_PAIRS_3X3(step)                                                                                                                   \
    __asm__ volatile(                                                                                                                         \
        "push {r0, r4-r11, lr}\n"                                                                                                             \
        "1:\n\t"                                                                                                                              \
        "ldr lr, [sp]\n\t"                                                                                                                    \
        "ldr r10, [lr, #24]\n\t"                                                                                                              \
        "ldrd r8, r9, [lr, #0]\n\t"                                                                                                           \
        "ldrd r0, r1, [r10, #" DSP_XSTR(                                                                                                      \
            DSP_GROUP_BIAS) "]\n\t"                                                                                                           \
                            "ldrd r2, r3, [r10, #" DSP_XSTR(                                                                                  \
                                DSP_GROUP_BIAS) "+8]\n\t"                                                                                     \
                                                "mov r4, r0\n\tmov r5, r1\n\tmov r6, r2\n\tmov r7, "                                          \
                                                "r3\n\t" DSP_PAIR_TAP(0, step) DSP_PAIR_TAP(8, step) DSP_PAIR_TAP(                            \
                                                    16, step) DSP_PAIR_TAP(24,                                                                \
                                                                           step) DSP_PAIR_TAP(32,                                             \
                                                                                              step) DSP_PAIR_TAP(40,                          \
                                                                                                                 step)                        \
                                                    DSP_PAIR_TAP(48, step) DSP_PAIR_TAP(56, step) DSP_PAIR_TAP(                               \
                                                        64,                                                                                   \
                                                        step) "ldr lr, [sp]\n\t"                                                              \
                                                              "ldr r12, [lr, #16]\n\t"                                                        \
                                                              "add r8, r8, r12\n\t"                                                           \
                                                              "str r8, [lr, #0]\n\t"                                                          \
                                                              "ldr lr, [lr, #24]\n\t" DSP_PAIR_REQUANT(                                       \
                                                                  "r0", "r4",                                                                 \
                                                                  DSP_XSTR(                                                                   \
                                                                      DSP_GROUP_Q)) DSP_PAIR_REQUANT("r1", "r5",                              \
                                                                                                     DSP_XSTR(                                \
                                                                                                         DSP_GROUP_Q) "+12")                  \
                                                                  DSP_PAIR_REQUANT("r2", "r6", DSP_XSTR(DSP_GROUP_Q) "+24") DSP_PAIR_REQUANT( \
                                                                      "r3", "r7",                                                             \
                                                                      DSP_XSTR(                                                               \
                                                                          DSP_GROUP_Q) "+36") "bfi r0, r1, #8, "                              \
                                                                                              "#8\n\tbfi r0, r2, "                            \
                                                                                              "#16, #8\n\tbfi r0, "                           \
                                                                                              "r3, #24, #8\n\t"                               \
                                                                                              "bfi r4, r5, #8, "                              \
                                                                                              "#8\n\tbfi r4, r6, "                            \
                                                                                              "#16, #8\n\tbfi r4, "                           \
                                                                                              "r7, #24, #8\n\t"                               \
                                                                                              "ldrd r8, r9, [lr, "                            \
                                                                                              "#" DSP_XSTR(                                   \
                                                                                                  DSP_GROUP_LOWS) "]"                         \
                                                                                                                  "\n"                        \
                                                                                                                  "\t"                        \
                                                                                                                  "ss"                        \
                                                                                                                  "ub"                        \
                                                                                                                  "8 "                        \
                                                                                                                  "r1"                        \
                                                                                                                  "0,"                        \
                                                                                                                  " r"                        \
                                                                                                                  "0,"                        \
                                                                                                                  " r"                        \
                                                                                                                  "8"                         \
                                                                                                                  "\n"                        \
                                                                                                                  "\t"                        \
                                                                                                                  "se"                        \
                                                                                                                  "l "                        \
                                                                                                                  "r0"                        \
                                                                                                                  ", "                        \
                                                                                                                  "r0"                        \
                                                                                                                  ", "                        \
                                                                                                                  "r8"                        \
                                                                                                                  "\n"                        \
                                                                                                                  "\t"                        \
                                                                                                                  "ss"                        \
                                                                                                                  "ub"                        \
                                                                                                                  "8 "                        \
                                                                                                                  "r1"                        \
                                                                                                                  "0,"                        \
                                                                                                                  " r"                        \
                                                                                                                  "0,"                        \
                                                                                                                  " r"                        \
                                                                                                                  "9"                         \
                                                                                                                  "\n"                        \
                                                                                                                  "\t"                        \
                                                                                                                  "se"                        \
                                                                                                                  "l "                        \
                                                                                                                  "r0"                        \
                                                                                                                  ", "                        \
                                                                                                                  "r9"                        \
                                                                                                                  ", "                        \
                                                                                                                  "r0"                        \
                                                                                                                  "\n"                        \
                                                                                                                  "\t"                        \
                                                                                                                  "ss"                        \
                                                                                                                  "ub"                        \
                                                                                                                  "8 "                        \
                                                                                                                  "r1"                        \
                                                                                                                  "0,"                        \
                                                                                                                  " r"                        \
                                                                                                                  "4,"                        \
                                                                                                                  " r"                        \
                                                                                                                  "8"                         \
                                                                                                                  "\n"                        \
                                                                                                                  "\t"                        \
                                                                                                                  "se"                        \
                                                                                                                  "l "                        \
                                                                                                                  "r4"                        \
                                                                                                                  ", "                        \
                                                                                                                  "r4"                        \
                                                                                                                  ", "                        \
                                                                                                                  "r8"                        \
                                                                                                                  "\n"                        \
                                                                                                                  "\t"                        \
                                                                                                                  "ss"                        \
                                                                                                                  "ub"                        \
                                                                                                                  "8 "                        \
                                                                                                                  "r1"                        \
                                                                                                                  "0,"                        \
                                                                                                                  " r"                        \
                                                                                                                  "4,"                        \
                                                                                                                  " r"                        \
                                                                                                                  "9"                         \
                                                                                                                  "\n"                        \
                                                                                                                  "\t"                        \
                                                                                                                  "se"                        \
                                                                                                                  "l "                        \
                                                                                                                  "r4"                        \
                                                                                                                  ", "                        \
                                                                                                                  "r9"                        \
                                                                                                                  ", "                        \
                                                                                                                  "r4"                        \
                                                                                                                  "\n"                        \
                                                                                                                  "\t"                        \
                                                                                                                  "ld"                        \
                                                                                                                  "r "                        \
                                                                                                                  "lr"                        \
                                                                                                                  ", "                        \
                                                                                                                  "[s"                        \
                                                                                                                  "p]"                        \
                                                                                                                  "\n"                        \
                                                                                                                  "\t"                        \
                                                                                                                  "ld"                        \
                                                                                                                  "rd"                        \
                                                                                                                  " r"                        \
                                                                                                                  "8,"                        \
                                                                                                                  " r"                        \
                                                                                                                  "9,"                        \
                                                                                                                  " ["                        \
                                                                                                                  "lr"                        \
                                                                                                                  ", "                        \
                                                                                                                  "#8"                        \
                                                                                                                  "]"                         \
                                                                                                                  "\n"                        \
                                                                                                                  "\t"                        \
                                                                                                                  "st"                        \
                                                                                                                  "r "                        \
                                                                                                                  "r0"                        \
                                                                                                                  ", "                        \
                                                                                                                  "[r"                        \
                                                                                                                  "8]"                        \
                                                                                                                  "\n"                        \
                                                                                                                  "\t"                        \
                                                                                                                  "st"                        \
                                                                                                                  "r "                        \
                                                                                                                  "r4"                        \
                                                                                                                  ", "                        \
                                                                                                                  "[r"                        \
                                                                                                                  "8,"                        \
                                                                                                                  " r"                        \
                                                                                                                  "9]"                        \
                                                                                                                  "\n"                        \
                                                                                                                  "\t"                        \
                                                                                                                  "ad"                        \
                                                                                                                  "d "                        \
                                                                                                                  "r8"                        \
                                                                                                                  ", "                        \
                                                                                                                  "r8"                        \
                                                                                                                  ", "                        \
                                                                                                                  "r9"                        \
                                                                                                                  ", "                        \
                                                                                                                  "ls"                        \
                                                                                                                  "l "                        \
                                                                                                                  "#1"                        \
                                                                                                                  "\n"                        \
                                                                                                                  "\t"                        \
                                                                                                                  "ld"                        \
                                                                                                                  "r "                        \
                                                                                                                  "r1"                        \
                                                                                                                  "0,"                        \
                                                                                                                  " ["                        \
                                                                                                                  "lr"                        \
                                                                                                                  ", "                        \
                                                                                                                  "#2"                        \
                                                                                                                  "0]"                        \
                                                                                                                  "\n"                        \
                                                                                                                  "\t"                        \
                                                                                                                  "st"                        \
                                                                                                                  "r "                        \
                                                                                                                  "r8"                        \
                                                                                                                  ", "                        \
                                                                                                                  "[l"                        \
                                                                                                                  "r,"                        \
                                                                                                                  " #"                        \
                                                                                                                  "8]"                        \
                                                                                                                  "\n"                        \
                                                                                                                  "\t"                        \
                                                                                                                  "su"                        \
                                                                                                                  "bs"                        \
                                                                                                                  " r"                        \
                                                                                                                  "10"                        \
                                                                                                                  ", "                        \
                                                                                                                  "r1"                        \
                                                                                                                  "0,"                        \
                                                                                                                  " #"                        \
                                                                                                                  "1"                         \
                                                                                                                  "\n"                        \
                                                                                                                  "\t"                        \
                                                                                                                  "st"                        \
                                                                                                                  "r "                        \
                                                                                                                  "r1"                        \
                                                                                                                  "0,"                        \
                                                                                                                  " ["                        \
                                                                                                                  "lr"                        \
                                                                                                                  ", "                        \
                                                                                                                  "#2"                        \
                                                                                                                  "0]"                        \
                                                                                                                  "\n"                        \
                                                                                                                  "\t"                        \
                                                                                                                  "bn"                        \
                                                                                                                  "e "                        \
                                                                                                                  "1b"                        \
                                                                                                                  "\n"                        \
                                                                                                                  "\t"                        \
                                                                                                                  "po"                        \
                                                                                                                  "p "                        \
                                                                                                                  "{r"                        \
                                                                                                                  "0,"                        \
                                                                                                                  " r"                        \
                                                                                                                  "4-"                        \
                                                                                                                  "r1"                        \
                                                                                                                  "1,"                        \
                                                                                                                  " p"                        \
                                                                                                                  "c}"                        \
                                                                                                                  "\n"                        \
                                                                                                                  "\t")

static __attribute__((naked, noinline)) void dsp_pairs_3x3_step24(dsp_pair_run *run __attribute__((unused)))
{
    DSP_PAIRS_3X3(24);
}

static __attribute__((naked, noinline)) void dsp_pairs_3x3_step48(dsp_pair_run *run __attribute__((unused)))
{
    DSP_PAIRS_3X3(48);
}

/* The pair routine for a layer's 3x3 rows, or NULL (stride above 2, or rows shorter than
 * DSP_PAIRED_ROW_PIXELS): the pair routine's 880 bytes of code and dsp_row_3x3's do not fit the M4
 * flash accelerator's 1 KiB instruction cache together, and on a short row refetching them cost
 * more than the pairs save (MobileNet's 6-pixel rows at 5 wait states: +2K cycles a layer; its 12-
 * to 48-pixel rows: -3% to -10%). */
#define DSP_PAIRED_ROW_PIXELS 8
static dsp_pairs_fn dsp_pairs_for(const packed_layer *layer)
{
    if (layer->out_w < DSP_PAIRED_ROW_PIXELS) {
        return NULL;
    }
    return layer->stride_w == 1 ? dsp_pairs_3x3_step24 : layer->stride_w == 2 ? dsp_pairs_3x3_step48 : NULL;
}

/* dsp_row_3x3's row of >= 2 pixels by `pairs`, then the odd last pixel alone. */
static EDGEC_NOINLINE void dsp_row_3x3_paired(dsp_pairs_fn pairs, const packed_group *g, const int32_t (*w)[2],
                                              const int8_t *x, int8_t *out, dsp_row *row)
{
    const int32_t step = row->x_advance + 9 * (int32_t)EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES;
    dsp_pair_run run = { x, w, out, row->out_step, 2 * step, row->pixels / 2, g };
    pairs(&run);
    if (row->pixels & 1) {
        row->pixels = 1;
        dsp_row_3x3(g, w, run.x, run.out, row);
    }
}

static EDGEC_NOINLINE void dsp_group_rows_3x3_paired(const packed_group *g, int32_t b, int8_t *out, int32_t pixel_step,
                                                     dsp_pairs_fn pairs)
{
    dsp_group_rows_3x3(g, b, out, pixel_step, pairs);
}
#endif

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
            group_outputs(&layer, output_dims->n, first, output + first, layer.c);
            continue;
        }
        group_outputs(&layer, output_dims->n, first, staging, count);
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
