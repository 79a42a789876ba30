/*
 * edgec_depthwise_conv_s8_packed's groups on cores with Helium (MVE): an entry is a pixel's four
 * int8 channels, a tap one VLDRB.S32 with the lanes as channels; where a 3x3 layer allows, 8 or
 * 16 channels a pass in int16 lanes over a cache of its own (the octet path, below). Golden
 * kernel: edgec.ops.depthwise.depthwise_conv2d_s8; the driver (edgec_depthwise_conv_s8_packed.c)
 * describes the row cache.
 */
#include "edgec_nn.h"

/* Some assembly routines below are one asm statement longer than the 4095 characters C99 promises
 * a string literal; the assembler takes any length, GCC does not count asm strings, and clang's
 * -pedantic does. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Woverlength-strings"
#endif

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)

#define EDGEC_DEPTHWISE_PACKED_GROUP_CODE
#include "edgec_depthwise_conv_s8_packed.h"

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

#if defined(__OPTIMIZE__)
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

#if defined(__OPTIMIZE__)
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

/* One group of 4 channels, all batches: the rows of the 3x3 paths above, else group_rows. */
static EDGEC_NOINLINE void group_outputs(const packed_layer *layer, int32_t batches, int32_t first, int8_t *out,
                                         int32_t pixel_step)
{
    packed_group g;
    group_begin(&g, layer, first);
    for (int32_t b = 0; b < batches; b++) {
#if defined(__OPTIMIZE__)
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

#if defined(__OPTIMIZE__)
/*
 * Eight channels at a time (an octet: two groups), where a layer is a 3x3 undilated window at
 * stride_w 1 or 2 and the octet shifts right only: the lanes are int16 (VLDRB.S16 of 8 channels),
 * VMULLB/VMULLT multiply the even and the odd channels into int32 products, so a tap of 8
 * channels is one entry load, two multiplies and two adds where the 4-channel path takes two
 * loads, two VMULs and two VADDs. The output stage runs edgec_mve_requantize's right-shift steps
 * on the even and odd sums, then narrows them with saturation into the channels' int16 lanes
 * (VQMOVNB/VQMOVNT) and clamps there: a sum beyond int16 saturates to a value beyond every
 * bound, so the clamped byte is the golden's.
 *
 * A pass takes two octets where it can (16 channels): the row cache's entries hold 16 channels,
 * so one fill, one call and one turn of the row ring serve both. The cache is row-major: a ring
 * of three cached rows of [padded_w][16] entries, so a pixel's three filter rows are three
 * pointers and the next pixel's entries 16 * stride_w bytes on (no phases: the taps are in
 * filter order). It takes four times the 4-channel cache (EDGEC_DEPTHWISE_PACKED_CACHED_GROUPS).
 */
#define OCTET_ENTRY 16
typedef struct {
    int32_t w[9][2];          /* 0: the taps [ky][kx], 8 int8 channels each */
    int32_t unused[2];        /* 72 */
    int32x4_t bias[2];        /* 80: channels 0, 2, 4, 6; 96: 1, 3, 5, 7 */
    int32x4_t multiplier[2];  /* 112, 128 */
    int32x4_t minus_right[2]; /* 144, 160: the shifts (all <= 0) */
    int16x8_t lo;             /* 176: the output stage's bounds as int16 lanes */
    int16x8_t hi;             /* 192 */
} octet_group;
typedef char octet_layout[offsetof(octet_group, bias) == 80 && offsetof(octet_group, multiplier) == 112 &&
                                  offsetof(octet_group, minus_right) == 144 && offsetof(octet_group, lo) == 176 &&
                                  offsetof(octet_group, hi) == 192 && sizeof(octet_group) == 208
                              ? 1
                              : -1];

/* What an octet row routine reads (layout checked below: the routine reloads x and out). */
typedef struct {
    const octet_group *g; /* the pass's octets, 208 bytes apart */
    int8_t *x[3];         /* the cached rows of filter rows 0, 1, 2, from the row's first window */
    int8_t *out;
    int32_t out_step;
    int32_t pairs; /* >= 0 */
    int32_t odd;   /* one more pixel after the pairs */
    int32_t offset;
    const octet_group *last; /* the pass's last octet */
    int32_t x_back;          /* from the entries after a row's pairs to the next octet's first */
    int32_t out_back;        /* from the output after a row's pairs to the next octet's first */
} octet_row;
typedef char octet_row_layout[offsetof(octet_row, x) == 4 && offsetof(octet_row, out) == 16 &&
                                      offsetof(octet_row, pairs) == 24 && offsetof(octet_row, odd) == 28 &&
                                      offsetof(octet_row, last) == 36 && offsetof(octet_row, x_back) == 40 &&
                                      offsetof(octet_row, out_back) == 44
                                  ? 1
                                  : -1];

/* Tap (row x, column offset o) of a pixel pair (the second pixel's entry at ob) with weights W
 * (q4 or q7): sums in q0/q1 (first pixel, even/odd channels) and q2/q3, the entry in q5, the
 * products in q6; `next` loads the next tap's weights into the other weight register. Every
 * instruction follows one of another class (beat overlap). */
#define OCT_PAIR_TAP(x, o, ob, W, next)                                                        \
    "vldrb.s16 q5, [%[" x "], #" o "]\n\tvmullb.s16 q6, q5, " W "\n\tvadd.i32 q0, q0, q6\n\t"  \
    "vmullt.s16 q6, q5, " W "\n\tvldrb.s16 q5, [%[" x "], #" ob "]\n\tvadd.i32 q1, q1, q6\n\t" \
    "vmullb.s16 q6, q5, " W "\n\tvadd.i32 q2, q2, q6\n\tvmullt.s16 q6, q5, " W "\n\t" next "vadd.i32 q3, q3, q6\n\t"
#define OCT_ONE_TAP(x, o, W, next)                                                            \
    "vldrb.s16 q5, [%[" x "], #" o "]\n\tvmullb.s16 q6, q5, " W "\n\tvadd.i32 q0, q0, q6\n\t" \
    "vmullt.s16 q6, q5, " W "\n\t" next "vadd.i32 q1, q1, q6\n\t"
#define OCT_W(reg, off) "vldrb.s16 " reg ", [%[k], #" off "]\n\t"
/* A pair's first tap: the products are the sums (the bias is added after the last tap). */
#define OCT_PAIR_TAP_FIRST(x, o, ob, W, next)                                                      \
    "vldrb.s16 q5, [%[" x "], #" o "]\n\tvmullb.s16 q0, q5, " W "\n\tvmullt.s16 q1, q5, " W "\n\t" \
    "vldrb.s16 q5, [%[" x "], #" ob "]\n\tvmullb.s16 q2, q5, " W "\n\t" next "vmullt.s16 q3, q5, " W "\n\t"
/* The start of a pair's output stage: the bias added to its sums (the first tap wrote them),
 * the multipliers loaded (q4: even channels, q7: odd) and applied to the first pixel's even sums
 * and the second's, each instruction next to one of another class. */
#define OCT_PAIR_HEAD                                                                   \
    "vldrw.u32 q4, [%[k], #80]\n\tvadd.i32 q0, q0, q4\n\tvldrw.u32 q7, [%[k], #96]\n\t" \
    "vadd.i32 q2, q2, q4\n\tvldrw.u32 q4, [%[k], #112]\n\tvadd.i32 q1, q1, q7\n\t"      \
    "vqrdmulh.s32 q0, q0, q4\n\tvadd.i32 q3, q3, q7\n\tvldrw.u32 q7, [%[k], #128]\n\t"  \
    "vqrdmulh.s32 q2, q2, q4\n\t"
/* Stride 2: the nine taps of a pair, the second pixel's columns two entries on. */
#define OCT_PAIR_TAPS_S2                                        \
    OCT_PAIR_TAP_FIRST("x0", "0", "32", "q4", OCT_W("q7", "8")) \
    OCT_PAIR_TAP("x0", "16", "48", "q7", OCT_W("q4", "16"))     \
    OCT_PAIR_TAP("x0", "32", "64", "q4", OCT_W("q7", "24"))     \
    OCT_PAIR_TAP("x1", "0", "32", "q7", OCT_W("q4", "32"))      \
    OCT_PAIR_TAP("x1", "16", "48", "q4", OCT_W("q7", "40"))     \
    OCT_PAIR_TAP("x1", "32", "64", "q7", OCT_W("q4", "48"))     \
    OCT_PAIR_TAP("x2", "0", "32", "q4", OCT_W("q7", "56"))      \
    OCT_PAIR_TAP("x2", "16", "48", "q7", OCT_W("q4", "64")) OCT_PAIR_TAP("x2", "32", "64", "q4", "")
/* Stride 1: the pair's windows share two columns, so a filter row is four entry loads (X0..X3)
 * and three weight loads: the first pixel takes X0..X2, the second X1..X3. OCT_MAC adds the
 * products of the entry (q5) and W to the sums lo/hi, `between` issuing before the last add. */
#define OCT_MAC(lo, hi, W, between)                                                                                  \
    "vmullb.s16 q6, q5, " W "\n\tvadd.i32 " lo ", " lo ", q6\n\tvmullt.s16 q6, q5, " W "\n\t" between "vadd.i32 " hi \
    ", " hi ", q6\n\t"
#define OCT_X(x, o) "vldrb.s16 q5, [%[" x "], #" o "]\n\t"
/* OCT_MAC for a pair's first products: they are the sums */
#define OCT_MAC_FIRST(lo, hi, W, between) "vmullb.s16 " lo ", q5, " W "\n\tvmullt.s16 " hi ", q5, " W "\n\t" between
/* filter row x with w0 in Wa: w1 (at w1) into Wb, w2 (at w2) into Wa, then `next` */
#define OCT_SHARED_ROW(x, Wa, Wb, w1, w2, next) \
    OCT_X(x, "0")                               \
    OCT_MAC("q0", "q1", Wa, OCT_X(x, "16"))     \
    OCT_MAC("q2", "q3", Wa, OCT_W(Wb, w1))      \
    OCT_MAC("q0", "q1", Wb, OCT_X(x, "32"))     \
    OCT_MAC("q2", "q3", Wb, OCT_W(Wa, w2)) OCT_MAC("q0", "q1", Wa, OCT_X(x, "48")) OCT_MAC("q2", "q3", Wa, next)
#define OCT_PAIR_TAPS_S1                               \
    OCT_X("x0", "0")                                   \
    OCT_MAC_FIRST("q0", "q1", "q4", OCT_X("x0", "16")) \
    OCT_MAC_FIRST("q2", "q3", "q4", OCT_W("q7", "8"))  \
    OCT_MAC("q0", "q1", "q7", OCT_X("x0", "32"))       \
    OCT_MAC("q2", "q3", "q7", OCT_W("q4", "16"))       \
    OCT_MAC("q0", "q1", "q4", OCT_X("x0", "48"))       \
    OCT_MAC("q2", "q3", "q4", OCT_W("q7", "24"))       \
    OCT_SHARED_ROW("x1", "q7", "q4", "32", "40", OCT_W("q4", "48")) OCT_SHARED_ROW("x2", "q4", "q7", "56", "64", "")
#define OCT_ONE_TAPS                                 \
    OCT_ONE_TAP("x0", "0", "q4", OCT_W("q7", "8"))   \
    OCT_ONE_TAP("x0", "16", "q7", OCT_W("q4", "16")) \
    OCT_ONE_TAP("x0", "32", "q4", OCT_W("q7", "24")) \
    OCT_ONE_TAP("x1", "0", "q7", OCT_W("q4", "32"))  \
    OCT_ONE_TAP("x1", "16", "q4", OCT_W("q7", "40")) \
    OCT_ONE_TAP("x1", "32", "q7", OCT_W("q4", "48")) \
    OCT_ONE_TAP("x2", "0", "q4", OCT_W("q7", "56"))  \
    OCT_ONE_TAP("x2", "16", "q7", OCT_W("q4", "64")) OCT_ONE_TAP("x2", "32", "q4", "")
/* the rounding fixup and right shift of sums q by the shifts s (edgec_mve_requantize), in q6 */
#define OCT_FIX(q, s)                                                                 \
    "vand q6, " q ", " s "\n\tvshr.s32 q6, q6, #31\n\tvqadd.s32 " q ", " q ", q6\n\t" \
    "vrshl.s32 " q ", " q ", " s "\n\t"
/* The output stage of the pair q0/q1, q2/q3 where every shift is < 0 (the fixup's AND with the
 * shift keeps just the sign bit) and the bounds are the int8 range: saturating narrowings to
 * int16, the offset added with saturation, to int8 (a value beyond int16 stays beyond the bounds
 * at each step), each pixel's bytes in the bottom of its 16-bit lanes. The fixups interleave with
 * the multiplies and loads: fewer vector instructions follow one of their own class. */
#define OCT_PAIR_OUTPUT_FULL                                                                                 \
    OCT_PAIR_HEAD                                                                                            \
    "vshr.s32 q6, q0, #31\n\tvqrdmulh.s32 q1, q1, q7\n\tvqadd.s32 q0, q0, q6\n\t"                            \
    "vqrdmulh.s32 q3, q3, q7\n\tvldrw.u32 q4, [%[k], #144]\n\tvshr.s32 q6, q2, #31\n\t"                      \
    "vldrw.u32 q7, [%[k], #160]\n\tvrshl.s32 q0, q0, q4\n\tvqadd.s32 q2, q2, q6\n\tvshr.s32 q6, q1, #31\n\t" \
    "vrshl.s32 q2, q2, q4\n\tvqadd.s32 q1, q1, q6\n\tvshr.s32 q6, q3, #31\n\tvrshl.s32 q1, q1, q7\n\t"       \
    "vqadd.s32 q3, q3, q6\n\tvqmovnb.s32 q5, q0\n\tvrshl.s32 q3, q3, q7\n\tvqmovnt.s32 q5, q1\n\t"           \
    "vqmovnb.s32 q6, q2\n\tvqadd.s16 q5, q5, %[offset]\n\tvqmovnt.s32 q6, q3\n\tvqmovnb.s16 q4, q5\n\t"      \
    "vqadd.s16 q6, q6, %[offset]\n\tvstrb.16 q4, [%[out]]\n\tvqmovnb.s16 q7, q6\n\t"                         \
    "add %[out], %[out], %[out_step]\n\tvstrb.16 q7, [%[out]]\n\tadd %[out], %[out], %[out_step]\n\t"
#define OCT_ONE_OUTPUT_FULL                                                                                     \
    "vldrw.u32 q4, [%[k], #112]\n\tvqrdmulh.s32 q0, q0, q4\n\tvldrw.u32 q7, [%[k], #128]\n\t"                   \
    "vshr.s32 q6, q0, #31\n\tvqrdmulh.s32 q1, q1, q7\n\tvqadd.s32 q0, q0, q6\n\tvldrw.u32 q4, [%[k], #144]\n\t" \
    "vshr.s32 q6, q1, #31\n\tvldrw.u32 q7, [%[k], #160]\n\tvrshl.s32 q0, q0, q4\n\tvqadd.s32 q1, q1, q6\n\t"    \
    "vrshl.s32 q1, q1, q7\n\tvqmovnb.s32 q5, q0\n\tvqmovnt.s32 q5, q1\n\tvqadd.s16 q5, q5, %[offset]\n\t"       \
    "vqmovnb.s16 q4, q5\n\tvstrb.16 q4, [%[out]]\n\t"
/* The general output stage (any shift <= 0, any bounds): edgec_mve_requantize's right-shift
 * steps, saturating narrowings into the channels' int16 lanes, the clamp there, the offset. */
#define OCT_PAIR_OUTPUT                                                                                               \
    OCT_PAIR_HEAD "vqrdmulh.s32 q1, q1, q7\n\tvldrw.u32 q4, [%[k], #144]\n\t"                                         \
                  "vqrdmulh.s32 q3, q3, q7\n\tvldrw.u32 q7, [%[k], #160]\n\t" OCT_FIX("q0", "q4") OCT_FIX("q2", "q4") \
                      OCT_FIX("q1", "q7")                                                                             \
                          OCT_FIX("q3", "q7") "vqmovnb.s32 q5, q0\n\tvqmovnt.s32 q5, q1\n\t"                          \
                                              "vldrw.u32 q4, [%[k], #176]\n\t"                                        \
                                              "vqmovnb.s32 q6, q2\n\tvqmovnt.s32 q6, q3\n\t"                          \
                                              "vldrw.u32 q7, [%[k], #192]\n\t"                                        \
                                              "vmax.s16 q5, q5, q4\n\tvmax.s16 q6, q6, q4\n\t"                        \
                                              "vmin.s16 q5, q5, q7\n\tvmin.s16 q6, q6, q7\n\t"                        \
                                              "vadd.i16 q5, q5, %[offset]\n\tvstrb.16 q5, [%[out]]\n\t"               \
                                              "add %[out], %[out], %[out_step]\n\t"                                   \
                                              "vadd.i16 q6, q6, %[offset]\n\tvstrb.16 q6, [%[out]]\n\t"               \
                                              "add %[out], %[out], %[out_step]\n\t"
#define OCT_ONE_OUTPUT                                                                                            \
    "vldrw.u32 q4, [%[k], #112]\n\tvqrdmulh.s32 q0, q0, q4\n\tvldrw.u32 q7, [%[k], #128]\n\t"                     \
    "vqrdmulh.s32 q1, q1, q7\n\tvldrw.u32 q4, [%[k], #144]\n\tvldrw.u32 q7, [%[k], #160]\n\t" OCT_FIX("q0", "q4") \
        OCT_FIX("q1", "q7") "vqmovnb.s32 q5, q0\n\tvqmovnt.s32 q5, q1\n\t"                                        \
                            "vldrw.u32 q4, [%[k], #176]\n\tvmax.s16 q5, q5, q4\n\t"                               \
                            "vldrw.u32 q7, [%[k], #192]\n\tvmin.s16 q5, q5, q7\n\t"                               \
                            "vadd.i16 q5, q5, %[offset]\n\tvstrb.16 q5, [%[out]]\n\t"

/* A row of a pass: per octet, its pixel pairs (the windows `advance` bytes on per pair), then
 * one more pixel when `odd`; then the next octet from the row's start, 8 channels on (the
 * pointers stepped back by x_back and out_back). */
#define OCTET_ROW(name, TAPS, advance, PAIR_OUTPUT, ONE_OUTPUT)                                            \
    static EDGEC_NOINLINE void name(const octet_row *row)                                                  \
    {                                                                                                      \
        const int8_t *x0 = row->x[0];                                                                      \
        const int8_t *x1 = row->x[1];                                                                      \
        const int8_t *x2 = row->x[2];                                                                      \
        int8_t *out = row->out;                                                                            \
        const octet_group *k = row->g;                                                                     \
        __asm__ volatile("4:\n\t"                                                                          \
                         "ldr lr, [%[row], #24]\n\t" /* pairs */ "wls lr, lr, 2f\n"                        \
                         "1:\n\t" OCT_W("q4", "0") TAPS PAIR_OUTPUT                                        \
                         "add %[x0], %[x0], #" advance "\n\t"                                              \
                         "add %[x1], %[x1], #" advance "\n\t"                                              \
                         "add %[x2], %[x2], #" advance "\n\t"                                              \
                         "le lr, 1b\n"                                                                     \
                         "2:\n\t"                                                                          \
                         "ldr lr, [%[row], #28]\n\t" /* odd */ "cmp lr, #0\n\t"                            \
                         "beq 3f\n\t"                                                                      \
                         "vldrw.u32 q0, [%[k], #80]\n\t" OCT_W(                                            \
                             "q4", "0") "vldrw.u32 q1, [%[k], #96]\n\t" OCT_ONE_TAPS ONE_OUTPUT "3:\n\t"   \
                                        "ldr lr, [%[row], #36]\n\t" /* last */ "cmp %[k], lr\n\t"          \
                                        "beq 5f\n\t"                                                       \
                                        "ldr lr, [%[row], #40]\n\t" /* x_back */                           \
                                        "sub %[x0], %[x0], lr\n\tsub %[x1], %[x1], lr\n\t"                 \
                                        "sub %[x2], %[x2], lr\n\tldr lr, [%[row], #44]\n\t" /* out_back */ \
                                        "sub %[out], %[out], lr\n\t"                                       \
                                        "add %[k], %[k], #208\n\t"                                         \
                                        "b 4b\n"                                                           \
                                        "5:"                                                               \
                         : [x0] "+l"(x0), [x1] "+l"(x1), [x2] "+l"(x2), [out] "+l"(out), [k] "+l"(k)       \
                         : [row] "r"(row), [out_step] "r"(row->out_step), [offset] "r"(row->offset)        \
                         : "lr", "q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "memory", "cc");          \
    }
OCTET_ROW(octet_row_s1, OCT_PAIR_TAPS_S1, "32", OCT_PAIR_OUTPUT, OCT_ONE_OUTPUT)
OCTET_ROW(octet_row_s1_full, OCT_PAIR_TAPS_S1, "32", OCT_PAIR_OUTPUT_FULL, OCT_ONE_OUTPUT_FULL)
OCTET_ROW(octet_row_s2, OCT_PAIR_TAPS_S2, "64", OCT_PAIR_OUTPUT, OCT_ONE_OUTPUT)
OCTET_ROW(octet_row_s2_full, OCT_PAIR_TAPS_S2, "64", OCT_PAIR_OUTPUT_FULL, OCT_ONE_OUTPUT_FULL)

/* The octet path takes channels first .. first + 7 of this layer (first a multiple of 8): its
 * window, straight into the output (not staged), and no left shift among the eight. */
static int octet_takes(const packed_layer *layer, int32_t first, int32_t pixel_step)
{
    if (!layer->unrolled || layer->stride_w > 2 || pixel_step != layer->c || first + 8 > layer->c) {
        return 0;
    }
    const int32x4x2_t shift = vld2q_s32(layer->quant->shift + first);
    return vmaxvq_s32(INT32_MIN, vmaxq_s32(shift.val[0], shift.val[1])) <= 0;
}

/* An octet's constants: the taps of its two 4-channel groups side by side (VST2 interleaves
 * their words), the per-channel values split into even and odd channels (VLD2); whether every
 * shift is < 0. */
static int octet_make(octet_group *g, const packed_layer *layer, int32_t first)
{
    const int8_t *taps = layer->filter + first * 9; /* groups first / 4 and first / 4 + 1 */
    for (int32_t t = 0; t < 8; t += 4) {
        const int32x4x2_t words = { { vreinterpretq_s32_s8(vldrbq_s8(taps + 4 * t)),
                                      vreinterpretq_s32_s8(vldrbq_s8(taps + 36 + 4 * t)) } };
        vst2q_s32(g->w[t], words);
    }
    memcpy(&g->w[8][0], taps + 32, 4);
    memcpy(&g->w[8][1], taps + 68, 4);
    const int32x4x2_t bias = vld2q_s32(layer->bias + first);
    const int32x4x2_t multiplier = vld2q_s32(layer->quant->multiplier + first);
    const int32x4x2_t shift = vld2q_s32(layer->quant->shift + first);
    for (int32_t h = 0; h < 2; h++) {
        g->bias[h] = bias.val[h];
        g->multiplier[h] = multiplier.val[h];
        g->minus_right[h] = shift.val[h];
    }
    g->lo = vdupq_n_s16((int16_t)layer->stage.lo);
    g->hi = vdupq_n_s16((int16_t)layer->stage.hi);
    return vmaxvq_s32(INT32_MIN, vmaxq_s32(shift.val[0], shift.val[1])) < 0;
}

/* The pad value in the padding columns of the three cached rows: octet_fill writes the others. */
static void octet_pad(const packed_layer *layer)
{
    const int8x16_t pad = vdupq_n_s8(layer->pad);
    const int32_t row_bytes = layer->padded_w * OCTET_ENTRY;
    const int32_t image_start = layer->image_start;
    const int32_t image_end = layer->image_end;
    for (int8_t *row = layer->cache; row < layer->cache + 3 * row_bytes; row += row_bytes) {
        for (int32_t j = 0; j < image_start; j++) {
            vstrbq_s8(row + OCTET_ENTRY * j, pad);
        }
        for (int32_t j = image_end; j < layer->padded_w; j++) {
            vstrbq_s8(row + OCTET_ENTRY * j, pad);
        }
    }
}

/* n entries at dst: a row's pixels from src (c bytes apart; 8 * octets channels each), or the
 * pad value where src is NULL (above and below the image). */
static inline void octet_fill(int8_t *dst, const int8_t *src, int32_t n, int32_t c, int32_t octets, int8_t pad)
{
    if (src == NULL) {
        const int8x16_t pads = vdupq_n_s8(pad);
        for (int32_t k = 0; k < n; k++) {
            vstrbq_s8(dst + OCTET_ENTRY * k, pads);
        }
        return;
    }
    if (octets == 2) {
        for (int32_t k = 0; k < n; k++, src += c) {
            vstrbq_s8(dst + OCTET_ENTRY * k, vldrbq_s8(src));
        }
        return;
    }
    for (int32_t k = 0; k < n; k++, src += c) { /* past the octet: not the input's to read */
        vstrbq_s16(dst + OCTET_ENTRY * k, vldrbq_s16(src));
    }
}

/* The image row of padded row r (`image` is row 0's first pixel), NULL above and below it. */
static inline const int8_t *octet_source(const packed_layer *layer, const int8_t *image, int32_t r)
{
    const int32_t iy = r - layer->pad_top;
    return iy >= 0 && iy < layer->in_h ? image + iy * layer->in_w * layer->c : NULL;
}

/* Every output row of one batch of a pass. The three cached rows are a ring of slots, row.x[i]
 * that of padded row top + i: moving down stride_h rows turns it by stride_h and brings in the
 * rows not cached yet (no division per row; at stride 1 one row). */
static void octet_rows(octet_row *row, const packed_layer *layer, void (*run)(const octet_row *), const int8_t *image)
{
    const int32_t n = layer->image_end - layer->image_start; /* n > 0: column image_start is pixel 0 */
    const int32_t columns = layer->image_start * OCTET_ENTRY;
    const int32_t c = layer->c;
    const int32_t octets = (int32_t)(row->last - row->g) + 1;
    const int8_t pad = layer->pad;
    const int32_t stride_h = layer->stride_h;
    const int32_t out_h = layer->out_h;
    const int32_t out_row = layer->out_w * c;
    for (int32_t i = 0; i < 3; i++) {
        octet_fill(row->x[i] + columns, octet_source(layer, image, i), n, c, octets, pad);
    }
    run(row);
    if (stride_h == 1) { /* input row iy = oy + 2 - pad_top, `at` bytes into the image */
        const int32_t in_h = layer->in_h;
        const int32_t in_row = layer->in_w * c;
        for (int32_t oy = 1, iy = 3 - layer->pad_top, at = iy * in_row; oy < out_h; oy++, iy++, at += in_row) {
            int8_t *const x0 = row->x[0];
            row->x[0] = row->x[1];
            row->x[1] = row->x[2];
            row->x[2] = x0;
            octet_fill(x0 + columns, iy >= 0 && iy < in_h ? image + at : NULL, n, c, octets, pad);
            row->out += out_row;
            run(row);
        }
        return;
    }
    const int32_t fresh = EDGEC_MIN(stride_h, 3);
    for (int32_t oy = 1, top = stride_h; oy < out_h; oy++, top += stride_h) {
        int8_t *const x0 = row->x[0];
        if (stride_h % 3 == 1) {
            row->x[0] = row->x[1];
            row->x[1] = row->x[2];
            row->x[2] = x0;
        } else if (stride_h % 3 == 2) {
            row->x[0] = row->x[2];
            row->x[2] = row->x[1];
            row->x[1] = x0;
        }
        for (int32_t i = 3 - fresh; i < 3; i++) {
            octet_fill(row->x[i] + columns, octet_source(layer, image, top + i), n, c, octets, pad);
        }
        row->out += out_row;
        run(row);
    }
}

/* Channels first .. first + 8 * octets - 1, every batch, into out (pixels C bytes apart). */
static EDGEC_NOINLINE void octet_outputs(const packed_layer *layer, int32_t batches, int32_t first, int32_t octets,
                                         int8_t *out)
{
    octet_group g[2];
    int strict = 1;
    for (int32_t o = 0; o < octets; o++) {
        strict = octet_make(&g[o], layer, first + 8 * o) && strict;
    }
    const int full = strict && layer->stage.lo + layer->stage.offset == INT8_MIN &&
                     layer->stage.hi + layer->stage.offset == INT8_MAX; /* the bounds clamp nothing */
    void (*const run)(const octet_row *) =
        layer->stride_w == 1 ? (full ? octet_row_s1_full : octet_row_s1) : (full ? octet_row_s2_full : octet_row_s2);
    octet_pad(layer);
    const int32_t image_bytes = layer->in_h * layer->in_w * layer->c;
    const int32_t out_bytes = layer->out_h * layer->out_w * layer->c;
    const int32_t row_bytes = layer->padded_w * OCTET_ENTRY;
    for (int32_t b = 0; b < batches; b++) {
        octet_row row = { g,
                          { layer->cache, layer->cache + row_bytes, layer->cache + 2 * row_bytes },
                          out + b * out_bytes,
                          layer->c,
                          layer->out_w / 2,
                          layer->out_w % 2,
                          layer->stage.offset,
                          g + octets - 1,
                          layer->out_w / 2 * 2 * OCTET_ENTRY * layer->stride_w - 8,
                          layer->out_w / 2 * 2 * layer->c - 8 };
        octet_rows(&row, layer, run, layer->input + b * image_bytes + first);
    }
}
#endif

/* Channels first .. first + 3. Where their octet takes the octet path, the octet's first group
 * runs it, with the next octet too when that one also takes it and this one starts a 16-channel
 * pass (first a multiple of 16); the group after that has nothing left to do. Else the
 * 4-channel path. */
void edgec_depthwise_packed_group_outputs(const packed_layer *layer, int32_t batches, int32_t first, int8_t *out,
                                          int32_t pixel_step)
{
#if defined(__OPTIMIZE__)
    const int32_t octet = first - first % 8;
    if (octet_takes(layer, octet, pixel_step)) {
        if (first != octet || (octet % 16 == 8 && octet_takes(layer, octet - 8, pixel_step))) {
            return; /* done with its octet, or with the octet before it */
        }
        const int32_t octets = octet % 16 == 0 && octet_takes(layer, octet + 8, pixel_step) ? 2 : 1;
        octet_outputs(layer, batches, octet, octets, out);
        return;
    }
#endif
    group_outputs(layer, batches, first, out, pixel_step);
}

#endif
