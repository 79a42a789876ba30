/*
 * edgec_depthwise_conv_s8_packed's groups on cores with the Arm DSP extension (M4, M7, M33): an
 * entry is a pixel's four channels widened to int16 pairs (0/2, then 1/3), a tap one LDRD and four
 * SMLAxy. Golden kernel: edgec.ops.depthwise.depthwise_conv2d_s8; the driver
 * (edgec_depthwise_conv_s8_packed.c) describes the row cache.
 */
#include "edgec_nn.h"

/* Some assembly routines below are one asm statement longer than the 4095 characters C99 promises
 * a string literal; the assembler takes any length, GCC does not count asm strings, and clang's
 * -pedantic does. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Woverlength-strings"
#endif

#if defined(__ARM_FEATURE_DSP) && !(defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))

#define EDGEC_DEPTHWISE_PACKED_GROUP_CODE
#include "edgec_depthwise_conv_s8_packed.h"
#include "edgec_depthwise_conv_s8_packed_dsp.h"

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
        edgec_dsp_pack_s8x4(edgec_dsp_requantize_ssat8(a0, g->rq.q[0]), edgec_dsp_requantize_ssat8(a1, g->rq.q[1]),
                            edgec_dsp_requantize_ssat8(a2, g->rq.q[2]), edgec_dsp_requantize_ssat8(a3, g->rq.q[3]));
    const uint32_t clamped = edgec_dsp_clamp_s8x4(packed, g->lows, g->highs);
    memcpy(out, &clamped, sizeof clamped);
}

static void group_make(packed_group *g)
{
    const packed_layer *layer = g->layer;
    memcpy(g->bias, layer->bias + g->first, sizeof g->bias);
    const int32_t *mult = layer->quant->multiplier + g->first;
    const int32_t *shift = layer->quant->shift + g->first;
    g->short_requant = g->count == GROUP && edgec_dsp_requant_all_short(mult, shift, GROUP);
    for (int32_t k = 0; g->short_requant && k < GROUP; k++) {
        g->rq.q[k] = edgec_dsp_requant_make(mult[k], shift[k], edgec_dsp_round_base(layer->stage.offset));
    }
    /* its constants are made after group_begin: an out-of-line call taking g here cost GCC's
     * unrolling of group_phases (23 instructions a group) */
    g->wide_requant = g->count == GROUP && !g->short_requant && edgec_dsp_requant_all_wide(mult, shift, GROUP);
    g->lows = edgec_dsp_bytes(layer->stage.lo + layer->stage.offset);
    g->highs = edgec_dsp_bytes(layer->stage.hi + layer->stage.offset);
}

static inline void group_store(const packed_group *g, int32_t a0, int32_t a1, int32_t a2, int32_t a3, int8_t *out)
{
    if (g->short_requant) {
        dsp_store_four(g, a0, a1, a2, a3, out);
        return;
    }
    if (g->wide_requant) {
        edgec_depthwise_packed_store_four_wide(g, a0, a1, a2, a3, out);
        return;
    }
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
#if defined(__OPTIMIZE__) && EDGEC_UNALIGNED_ASM
/* A row of 3x3 undilated pixels of a full group with the short requantization, in assembly;
 * defined after dsp_group_rows_3x3, which it follows in the code (see there). */
static void dsp_row_3x3(const packed_group *g, const int32_t (*w)[2], const int8_t *x, int8_t *out, dsp_row *row);

typedef char dsp_requant_layout[sizeof(edgec_dsp_requant) == 12 && offsetof(edgec_dsp_requant, round_high) == 4 &&
                                        offsetof(edgec_dsp_requant, shift) == 8 &&
                                        sizeof(edgec_dsp_requant_wide) == 16 &&
                                        offsetof(edgec_dsp_requant_wide, round_high) == 4 &&
                                        offsetof(edgec_dsp_requant_wide, shift) == 8 &&
                                        offsetof(edgec_dsp_requant_wide, low) == 12 &&
                                        offsetof(packed_group, highs) == offsetof(packed_group, lows) + 4
                                    ? 1
                                    : -1];
#endif

static EDGEC_NOINLINE void group_row_3x3(const packed_group *g, int32_t p, int8_t *out, int32_t out_step)
{
    const int32_t entry = (int32_t)EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES;
    const int32_t step = 3 * entry * g->layer->stride_w;
    const int8_t *x = g->layer->cache;
#if defined(__OPTIMIZE__) && EDGEC_UNALIGNED_ASM
    if (g->short_requant) { /* a full group */
        dsp_row row = { out_step, step - 9 * entry, g->layer->out_w };
        dsp_row_3x3(g, g->w[p], x, out, &row);
        return;
    }
#endif
    for (int32_t ox = 0; ox < g->layer->out_w; ox++, x += step, out += out_step) {
        int32_t a0 = g->bias[0], a1 = g->bias[1], a2 = g->bias[2], a3 = g->bias[3];
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
        group_store(g, a0, a1, a2, a3, out);
    }
}

#if defined(__OPTIMIZE__) && EDGEC_UNALIGNED_ASM
/* Pixel pairs of a row (dsp_pairs_3x3_step24/48 after group_outputs, so that the code before
 * keeps its place in the instruction cache: dsp_row_3x3 and group_outputs' row loop as before). */
static dsp_pairs_fn dsp_pairs_for(const packed_layer *layer);
static void dsp_row_3x3_paired(dsp_pairs_fn pairs, const packed_group *g, const int32_t (*w)[2], const int8_t *x,
                               int8_t *out, dsp_row *row);

/* One output row in phase p: by the pair routine if the layer has one, else by dsp_row_3x3. */
static inline void dsp_run_row(const packed_group *g, dsp_rows *rows, int32_t p, int8_t *out)
{
    rows->row.pixels = g->layer->out_w;
    if (rows->pairs != NULL) {
        dsp_row_3x3_paired(rows->pairs, g, g->w[p], g->layer->cache, out, &rows->row);
    } else {
        dsp_row_3x3(g, g->w[p], g->layer->cache, out, &rows->row);
    }
}

/*
 * Every row of batch b of a full group with a 3x3 undilated window and the short requantization
 * (dsp_rows_3x3 with dsp_run_row). Emitted first and followed by dsp_row_3x3 (EDGEC_NO_REORDER),
 * then by dsp_bring_row, whose lines past the first KiB are this routine's setup: in a 1 KiB
 * direct-mapped instruction cache (the M4 flash accelerator as modelled) no line of the row loops
 * evicts another, wherever the object lands (GCC's own order, moved by any change to the file, can
 * put this routine onto dsp_row_3x3's lines: +2 to +5 % estimated cycles a DS-CNN int8 layer).
 */
EDGEC_NO_REORDER static EDGEC_NOINLINE void dsp_group_rows_3x3(const packed_group *g, int32_t b, int8_t *out,
                                                               int32_t pixel_step, dsp_pairs_fn pairs)
{
    dsp_rows_3x3(g, b, out, pixel_step, pairs, dsp_run_row);
}

/* edgec_dsp_requantize_ssat8 of sum `a` by the edgec_dsp_requant at operand q (its shift at qs). */
#define DSP_ROW_REQUANT(a, q, qs)                                                                \
    "ldrd r8, r9, [%[g], %[" q "]]\n\tldr r10, [%[g], %[" qs "]]\n\t"                            \
    "and r12, " a ", #0x80000000\n\torr r12, r12, #0x40000000\n\tadd r9, r9, " a ", asr #31\n\t" \
    "smlal r12, r9, " a ", r8\n\tasr " a ", r9, r10\n\tssat " a ", #8, " a "\n\t"

/*
 * A row of 3x3 undilated pixels of a full group with the short requantization, in assembly (an
 * optimised build's: the unoptimised one keeps r7 for its frame): per pixel the folded biases,
 * the nine taps of group_row_3x3 (4 loads of the entry and the weights, four SMLAxy), then
 * dsp_store_four's requantization, packing, clamp and store -- GCC spilled the accumulators
 * around a call to it.
 */
EDGEC_NO_REORDER static void dsp_row_3x3(const packed_group *g, const int32_t (*w)[2], const int8_t *x, int8_t *out,
                                         dsp_row *row)
{
    __asm__ volatile(DSP_ROW_COUNT_START
                     ".p2align 2\n" /* the loop's first LDRD is 32-bit: at 2 mod 4 each taken BNE costs a cycle more */
                     "1:\n\t" DSP_ROW_TAPS DSP_ROW_REQUANT("r0", "q0", "q0s") DSP_ROW_REQUANT("r1", "q1", "q1s")
                         DSP_ROW_REQUANT("r2", "q2", "q2s") DSP_ROW_REQUANT("r3", "q3", "q3s") DSP_ROW_STORE
                     : [x] "+r"(x), [out] "+r"(out)
                     : [w] "r"(w), [g] "r"(g), [row] "r"(row), [bias] "i"(offsetof(packed_group, bias)),
                       [bias2] "i"(offsetof(packed_group, bias) + 8), [q0] "i"(offsetof(packed_group, rq.q)),
                       [q0s] "i"(offsetof(packed_group, rq.q) + 8), [q1] "i"(offsetof(packed_group, rq.q) + 12),
                       [q1s] "i"(offsetof(packed_group, rq.q) + 20), [q2] "i"(offsetof(packed_group, rq.q) + 24),
                       [q2s] "i"(offsetof(packed_group, rq.q) + 32), [q3] "i"(offsetof(packed_group, rq.q) + 36),
                       [q3s] "i"(offsetof(packed_group, rq.q) + 44), [lows] "i"(offsetof(packed_group, lows))
                     : "r0", "r1", "r2", "r3", "r8", "r9", "r10", DSP_ROW_COUNTER "r12", "memory", "cc");
}

#endif

void edgec_depthwise_packed_group_outputs(const packed_layer *layer, int32_t batches, int32_t first, int8_t *out,
                                          int32_t pixel_step)
{
    packed_group g;
    group_begin(&g, layer, first);
    if (g.wide_requant) {
        edgec_depthwise_packed_wide_make(&g);
    }
    for (int32_t b = 0; b < batches; b++) {
#if defined(__OPTIMIZE__) && EDGEC_UNALIGNED_ASM
        if (layer->unrolled && g.short_requant) {
            int8_t *batch_out = out + b * layer->out_h * layer->out_w * pixel_step;
            const dsp_pairs_fn pairs = dsp_pairs_for(layer);
            dsp_group_rows_3x3(&g, b, batch_out, pixel_step, pairs);
            continue;
        }
        if (layer->unrolled && g.wide_requant) {
            edgec_depthwise_packed_wide_rows_3x3(&g, b, out + b * layer->out_h * layer->out_w * pixel_step, pixel_step);
            continue;
        }
#endif
        out = group_rows(&g, b, out, pixel_step);
    }
}

#if defined(__OPTIMIZE__) && EDGEC_UNALIGNED_ASM
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
#define DSP_GROUP_LOWS 100
typedef char dsp_pair_group_layout[offsetof(packed_group, bias) == DSP_GROUP_BIAS &&
                                           offsetof(packed_group, rq.q) == DSP_GROUP_Q &&
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

/* The pair routine for a layer's 3x3 rows, or NULL (stride above 2, or a short row): the pair
 * routine's 880 bytes of code and dsp_row_3x3's do not fit the M4 flash accelerator's 1 KiB
 * instruction cache together, and on a short odd row, which takes both, refetching them costs
 * more than the pairs save (DS-CNN's 5-pixel rows at 5 wait states: +20K estimated cycles a
 * layer); rows of DSP_PAIRED_ROW_PIXELS or more, or an even number of pixels from 4 (the pair
 * routine alone: MobileNet's 6-pixel rows, -3 % a layer), take it. An Armv8-M core (M33) pairs
 * every row of 4 pixels or more: its parts cache instructions in kilobytes (the STM32U575's
 * ICACHE: 8 KiB), so both routines stay cached. */
#if defined(__ARM_ARCH_8M_MAIN__)
#define DSP_PAIRED_ROW_PIXELS 4
#else
#define DSP_PAIRED_ROW_PIXELS 8
#endif
static dsp_pairs_fn dsp_pairs_for(const packed_layer *layer)
{
    const int32_t pixels = layer->out_w;
    if (pixels < 4 || (pixels < DSP_PAIRED_ROW_PIXELS && pixels % 2 != 0)) {
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

#endif

#endif
