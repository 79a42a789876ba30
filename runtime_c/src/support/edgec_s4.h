/*
 * edgec_s4.h -- the dot products of the int4-weight kernels' DSP and Helium paths, shared by
 * edgec_fully_connected_s4.c and edgec_conv_s4.c (included from runtime/src/support in every
 * build, like edgec_support.h): rows of CMSIS-NN's packed int4 filter (element
 * i in byte i / 2, low nibble first; each row starts on a byte: an even row length) against one
 * input column, then bias, per-channel requantization and the output stage.
 *
 * Both paths multiply a power-of-two multiple of w, which unpacking leaves sign-correct in place
 * of shifting it down: the DSP path 4096 * w (a nibble moved to the top of a halfword by one
 * shifted AND, two weights per AND), the Helium path 16 * w (a byte's high nibble masked with
 * 0xF0, its low one shifted left by 4). The sums are that multiple of the dot products, exact
 * while they stay within int32 (see each path), then shifted right. (The depthwise kernel unpacks
 * its filter for the int8 packed one: edgec_depthwise_conv_s4.c.)
 */
#ifndef EDGEC_S4_H
#define EDGEC_S4_H

#include <stddef.h>
#include <string.h>

#include "edgec_support.h"

/* What every row of one call shares. */
typedef struct {
    const int8_t *filter;      /* the first row's packed weights */
    int32_t count;             /* weights per row (even) */
    const int8_t *x;           /* the input column, int8 (the DSP path's tail reads it) */
    int32_t input_offset;      /* added to x on the DSP path; folded into the bias on Helium */
    const int32_t *bias;       /* the first row's (may be NULL on the DSP path) */
    const int32_t *multiplier; /* the first row's */
    const int32_t *shift;      /* the first row's */
    edgec_output_stage stage;
} edgec_s4_rows;

/* ---- Arm DSP extension: four SMLAD per packed word (eight weights), three rows at a time ------ */
#if defined(__ARM_FEATURE_DSP)

/*
 * A packed word holds eight weights, nibble k of halfword h being weight k + 4h. Shifted left by
 * 4 * (3 - k) and masked with 0xF000F000, it leaves (4096 w_k, 4096 w_{k+4}) in its halfwords:
 * one AND (the mask in a register, the shift in the operand) unpacks two weights, one SMLAD
 * multiplies them by the input pair (x_k, x_{k+4}). The sums are 4096 times the dot products,
 * exact in int32 over at most EDGEC_S4_DSP_CHUNK inputs (|sum w x| <= 256 * 8 * 255 < 2^19); longer
 * rows add up their chunks' sums >> 12.
 */
#define EDGEC_S4_DSP_CHUNK 256

/* One block of 8 inputs plus the offsets (in both halfwords) as the int16 pairs (x0, x4),
 * (x1, x5), (x2, x6), (x3, x7), words `stride` apart at out: SXTAB16 widens two inputs and adds
 * the offset to both, PKHBT / PKHTB pair them. */
static inline void edgec_s4_dsp_widen_block(const int8_t *x, uint32_t offsets, int32_t *out, int32_t stride)
{
    uint32_t lo, hi;
    int32_t x02, x13, x46, x57, p04, p15, p26, p37;
    memcpy(&lo, x, 4);
    memcpy(&hi, x + 4, 4);
    __asm__("sxtab16 %0, %4, %5\n\tsxtab16 %1, %4, %5, ror #8\n\t"
            "sxtab16 %2, %4, %6\n\tsxtab16 %3, %4, %6, ror #8"
            : "=&r"(x02), "=&r"(x13), "=&r"(x46), "=&r"(x57)
            : "r"(offsets), "r"(lo), "r"(hi));
    __asm__("pkhbt %0, %4, %6, lsl #16\n\tpkhbt %1, %5, %7, lsl #16\n\t"
            "pkhtb %2, %6, %4, asr #16\n\tpkhtb %3, %7, %5, asr #16"
            : "=&r"(p04), "=&r"(p15), "=&r"(p26), "=&r"(p37)
            : "r"(x02), "r"(x13), "r"(x46), "r"(x57));
    out[0] = p04;
    out[stride] = p15;
    out[2 * stride] = p26;
    out[3 * stride] = p37;
}

static inline uint32_t edgec_s4_dsp_offsets(int32_t offset)
{
    return ((uint32_t)offset & 0xFFFFu) * 0x10001u;
}

/* The input column's whole blocks of 8, plus input_offset, in the pair order above: 16 bytes per
 * block at `widened` (word-aligned). */
static inline void edgec_s4_dsp_widen(const int8_t *x, int32_t blocks, int32_t offset, int16_t *widened)
{
    int32_t *out = (int32_t *)(void *)widened;
    for (int32_t b = 0; b < blocks; b++) {
        edgec_s4_dsp_widen_block(x + 8 * b, edgec_s4_dsp_offsets(offset), out + 4 * b, 1);
    }
}

/* Two columns' whole blocks so, interleaved word by word (a's pair, b's pair): 32 bytes per block,
 * for edgec_s4_dsp_pairs. */
static inline void edgec_s4_dsp_widen2(const int8_t *a, const int8_t *b, int32_t blocks, int32_t offset,
                                       int16_t *widened)
{
    int32_t *out = (int32_t *)(void *)widened;
    for (int32_t k = 0; k < blocks; k++) {
        edgec_s4_dsp_widen_block(a + 8 * k, edgec_s4_dsp_offsets(offset), out + 8 * k, 2);
        edgec_s4_dsp_widen_block(b + 8 * k, edgec_s4_dsp_offsets(offset), out + 8 * k + 1, 2);
    }
}

/*
 * requantize(x, multiplier, shift) + offset for multiplier >= 2^30 and shift -1..-24
 * (edgec_dsp_requant_all_wide): the int8 DSP kernels' short form (edgec_dsp_requantize, whose
 * derivation holds for every r = -shift >= 1) with its constant (1 + 2 * offset) * 2^(30 + r)
 * split over both words of the 64-bit sum, so that r = 1 -- which int4 layers, their weight scales
 * 16 times int8's, often have -- is included: R = round_base << (r - 1), the high word R >> 1, bit
 * 31 of the low word R's lowest bit. One ADDS/ADC more than edgec_dsp_requantize.
 */
static inline int32_t edgec_s4_requantize_short(int32_t x, int32_t multiplier, int32_t shift, int32_t round_base)
{
    const int32_t q = -shift - 1;
    const int32_t r = (int32_t)((uint32_t)round_base << q);
    uint32_t low = ((uint32_t)x & 0x80000000u) | 0x40000000u;
    int32_t high = (r >> 1) + (x >> 31);
    const uint32_t half = (uint32_t)r << 31;
    low += half;
    high += low < half; /* the carry */
    __asm__("smlal %0, %1, %2, %3" : "+r"(low), "+r"(high) : "r"(x), "r"(multiplier));
    return high >> q;
}

/* The per-call fields of edgec_s4_dsp_triples and _pairs, by offset (a naked function takes no operands). */
typedef struct {
    const int16_t *widened;     /*  0: the column's whole blocks ... */
    const int16_t *widened_end; /*  4: ... and their end (at most EDGEC_S4_DSP_CHUNK inputs) */
    const int8_t *row;          /*  8: the next three rows' first (advanced) */
    int32_t row_bytes;          /* 12: 4 * the blocks: no tail */
    const int32_t *bias;        /* 16: the next rows' (advanced) */
    const int32_t *multiplier;  /* 20: ... */
    const int32_t *shift;       /* 24: ... */
    int32_t round_base;         /* 28: edgec_dsp_round_base of the output offset */
    int32_t act_min;            /* 32 */
    int32_t act_max;            /* 36 */
    int8_t *out;                /* 40: the next rows' outputs (advanced) */
    int8_t *out_end;            /* 44: past the last whole three's (pairs: two's) */
    int32_t out_step;           /* 48: pairs: from column a's outputs to column b's */
    int32_t clamp;              /* 52: [act_min, act_max] narrower than int8's */
} edgec_s4_dsp_run;

typedef char edgec_s4_dsp_run_layout
    [offsetof(edgec_s4_dsp_run, round_base) == 28 && offsetof(edgec_s4_dsp_run, clamp) == 52 ? 1 : -1];

/* 1 when the output stage's clamp is narrower than int8's (the saturation). */
static inline int32_t edgec_s4_dsp_clamps(const edgec_output_stage *stage)
{
    return stage->lo + stage->offset > -128 || stage->hi + stage->offset < 127;
}

#if EDGEC_UNALIGNED_ASM
/* The word at `at` of a row (r8) against the block's four input pairs (r4..r7), into `acc`: the
 * mask 0xF000F000 in r12, r9 scratch. */
#define EDGEC_S4_DSP_ROW(at, acc)                                    \
    "ldr r8, " at "\n\t"                                             \
    "and r9, r12, r8, lsl #12\n\tsmlad " acc ", r9, r4, " acc "\n\t" \
    "and r9, r12, r8, lsl #8\n\tsmlad " acc ", r9, r5, " acc "\n\t"  \
    "and r9, r12, r8, lsl #4\n\tsmlad " acc ", r9, r6, " acc "\n\t"  \
    "and r9, r12, r8\n\tsmlad " acc ", r9, r7, " acc "\n\t"
#define EDGEC_S4_DSP_BLOCK                                                                                          \
    "ldm r0!, {r4, r5, r6, r7}\n\t" EDGEC_S4_DSP_ROW("[r1, r2, lsl #1]", "r11") EDGEC_S4_DSP_ROW("[r1, r2]", "r10") \
        EDGEC_S4_DSP_ROW("[r1], #4", "lr")

/*
 * sums[0..2]: 4096 * the dot products of the widened blocks [widened, widened_end) (at most
 * EDGEC_S4_DSP_CHUNK inputs) with the rows at row, row + row_step and row + 2 * row_step. A block
 * is an LDM of the four input pairs, then per row a load, four AND and four SMLAD: 28 instructions
 * per 24 MACs; two blocks per loop iteration (an odd count enters at the second). A naked
 * function: all 14 registers are its own at every optimisation level.
 */
static __attribute__((naked, noinline, unused)) void
edgec_s4_dsp_dot3(const int16_t *widened __attribute__((unused)), const int8_t *row __attribute__((unused)),
                  int32_t row_step __attribute__((unused)), const int16_t *widened_end __attribute__((unused)),
                  int32_t sums[3] __attribute__((unused)))
{
    __asm__ volatile(".syntax unified\n\t"
                     "push {r4-r11, lr}\n\t"
                     "mov r12, #0xF000F000\n\t"
                     "movs r10, #0\n\t"
                     "movs r11, #0\n\t"
                     "movs lr, #0\n\t"
                     "subs r8, r3, r0\n\t"
                     "tst r8, #16\n\t"
                     "bne 2f\n"
                     "1:\n\t" EDGEC_S4_DSP_BLOCK "2:\n\t" EDGEC_S4_DSP_BLOCK "cmp r0, r3\n\t"
                     "bne 1b\n\t"
                     "ldr r0, [sp, #36]\n\t"
                     "str lr, [r0]\n\t"
                     "strd r10, r11, [r0, #4]\n\t"
                     "pop {r4-r11, pc}\n\t");
}

/* edgec_s4_requantize_short of row sums (shifted right by 12, their bias added before), saturated
 * to int8: EDGEC_S4_DSP_ROW_QUANT loads the row's multiplier (r4) and shift (r5: r - 1) at byte
 * `at` of the arrays at r3 and r1 and makes R = round base (r2) << (r - 1) (r6); then
 * EDGEC_S4_DSP_REQUANT per sum of that row (r7, r8 scratch). EDGEC_S4_DSP_CLAMP clamps to
 * [act_min, act_max] (registers lo, hi); the routines skip it when the range is int8's (run->clamp 0). */
#define EDGEC_S4_DSP_ROW_QUANT(at) "ldr r4, [r3, #" at "]\n\tldr r5, [r1, #" at "]\n\tmvn r5, r5\n\tlsl r6, r2, r5\n\t"
#define EDGEC_S4_DSP_REQUANT(acc)                                                                            \
    "and r7, " acc ", #0x80000000\n\torr r7, r7, #0x40000000\n\tadds r7, r7, r6, lsl #31\n\t"                \
    "asr r8, r6, #1\n\tadc r8, r8, " acc ", asr #31\n\tsmlal r7, r8, " acc ", r4\n\tasr " acc ", r8, r5\n\t" \
    "ssat " acc ", #8, " acc "\n\t"
#define EDGEC_S4_DSP_CLAMP(acc, lo, hi)                                                                                \
    "cmp " acc ", " lo "\n\tit lt\n\tmovlt " acc ", " lo "\n\tcmp " acc ", " hi "\n\tit gt\n\tmovgt " acc ", " hi "\n" \
    "\t"

/*
 * Every whole three of rows of one call, output stage included (edgec_s4_dsp_dot3's loop, then
 * per row: the sum >> 12 plus its bias, the short requantization, the clamp, a byte store): for
 * a column of at most EDGEC_S4_DSP_CHUNK inputs without a tail, channels that all admit the
 * short requantization, and a bias. The run (r0 on entry) is kept at [sp].
 */
static __attribute__((naked, noinline, unused)) void edgec_s4_dsp_triples(edgec_s4_dsp_run *run __attribute__((unused)))
{
    __asm__ volatile(".syntax unified\n\t"
                     "push {r0, r4-r11, lr}\n"
                     "1:\n\t"
                     "ldr r12, [sp]\n\t"
                     "ldrd r0, r3, [r12, #0]\n\t"
                     "ldrd r1, r2, [r12, #8]\n\t"
                     "mov r12, #0xF000F000\n\t"
                     "movs r10, #0\n\t"
                     "movs r11, #0\n\t"
                     "movs lr, #0\n\t"
                     "subs r8, r3, r0\n\t"
                     "tst r8, #16\n\t"
                     "bne 3f\n"
                     "2:\n\t" EDGEC_S4_DSP_BLOCK "3:\n\t" EDGEC_S4_DSP_BLOCK "cmp r0, r3\n\t"
                     "bne 2b\n\t"
                     "ldr r0, [sp]\n\t"
                     "add r1, r1, r2, lsl #1\n\t" /* r1 had passed row 0: now row 3 */
                     "str r1, [r0, #8]\n\t"
                     "ldr r2, [r0, #16]\n\t"
                     "ldr r4, [r2], #4\n\tadd lr, r4, lr, asr #12\n\t"
                     "ldr r4, [r2], #4\n\tadd r10, r4, r10, asr #12\n\t"
                     "ldr r4, [r2], #4\n\tadd r11, r4, r11, asr #12\n\t"
                     "str r2, [r0, #16]\n\t"
                     "ldrd r3, r1, [r0, #20]\n\t"
                     "ldr r2, [r0, #28]\n\t"
                     "ldrd r9, r12, [r0, #32]\n\t"
                     "mov r0, r10\n\t"
                     "mov r10, r12\n\t" /* act_max in r10, row 1's sum in r0 */
                     EDGEC_S4_DSP_ROW_QUANT("0") EDGEC_S4_DSP_REQUANT("lr") EDGEC_S4_DSP_ROW_QUANT("4")
                         EDGEC_S4_DSP_REQUANT("r0") EDGEC_S4_DSP_ROW_QUANT("8")
                             EDGEC_S4_DSP_REQUANT("r11") "ldr r12, [sp]\n\t"
                                                         "ldr r4, [r12, #52]\n\t"
                                                         "cbz r4, 4f\n\t" EDGEC_S4_DSP_CLAMP("lr", "r9", "r10")
                                                             EDGEC_S4_DSP_CLAMP("r0", "r9", "r10") EDGEC_S4_DSP_CLAMP(
                                                                 "r11", "r9", "r10") "4:\n\t"
                                                                                     "adds r3, r3, #12\n\t"
                                                                                     "adds r1, r1, #12\n\t"
                                                                                     "strd r3, r1, [r12, #20]\n\t"
                                                                                     "ldr r4, [r12, #40]\n\t"
                                                                                     "strb lr, [r4]\n\t"
                                                                                     "strb r0, [r4, #1]\n\t"
                                                                                     "strb r11, [r4, #2]\n\t"
                                                                                     "adds r4, r4, #3\n\t"
                                                                                     "str r4, [r12, #40]\n\t"
                                                                                     "ldr r5, [r12, #44]\n\t"
                                                                                     "cmp r4, r5\n\t"
                                                                                     "bne 1b\n\t"
                                                                                     "pop {r0, r4-r11, pc}\n\t");
}

/* One nibble position (the shift) of a block: the two columns' input pairs (an LDRD) against the
 * two rows' words (r4, r5), into r9 (row 0, column a), r10 (row 0, b), r11 (row 1, a), lr (row 1,
 * b). r6..r8 scratch, the mask in r12. */
#define EDGEC_S4_DSP_PAIR(shift)                                                     \
    "ldrd r7, r8, [r0], #8\n\t"                                                      \
    "and r6, r12, r4" shift "\n\tsmlad r9, r6, r7, r9\n\tsmlad r10, r6, r8, r10\n\t" \
    "and r6, r12, r5" shift "\n\tsmlad r11, r6, r7, r11\n\tsmlad lr, r6, r8, lr\n\t"
#define EDGEC_S4_DSP_BLOCK2                                                                                 \
    "ldr r5, [r1, r2]\n\tldr r4, [r1], #4\n\t" EDGEC_S4_DSP_PAIR(", lsl #12") EDGEC_S4_DSP_PAIR(", lsl #8") \
        EDGEC_S4_DSP_PAIR(", lsl #4") EDGEC_S4_DSP_PAIR("")

/*
 * The body of edgec_s4_dsp_pairs and _alternate: `next_row` moves r1 (past row 0's blocks; r2 the
 * row step, r0 the run) to the next two rows; `param` is the step of the bias, multiplier and
 * shift arrays from one row to the next (one or two channels), `out` that of the outputs.
 */
#define EDGEC_S4_DSP_PAIRS(next_row, param, param2, out, out2)                                                  \
    ".syntax unified\n\t"                                                                                       \
    "push {r0, r4-r11, lr}\n"                                                                                   \
    "1:\n\t"                                                                                                    \
    "ldr r12, [sp]\n\t"                                                                                         \
    "ldrd r0, r3, [r12, #0]\n\t"                                                                                \
    "ldrd r1, r2, [r12, #8]\n\t"                                                                                \
    "mov r12, #0xF000F000\n\t"                                                                                  \
    "movs r9, #0\n\t"                                                                                           \
    "movs r10, #0\n\t"                                                                                          \
    "movs r11, #0\n\t"                                                                                          \
    "movs lr, #0\n\t"                                                                                           \
    "subs r8, r3, r0\n\t"                                                                                       \
    "tst r8, #32\n\t"                                                                                           \
    "bne 3f\n"                                                                                                  \
    "2:\n\t" EDGEC_S4_DSP_BLOCK2 "3:\n\t" EDGEC_S4_DSP_BLOCK2 "cmp r0, r3\n\t"                                  \
    "bne 2b\n\t"                                                                                                \
    "ldr r0, [sp]\n\t" next_row "str r1, [r0, #8]\n\t"                                                          \
    "ldr r2, [r0, #16]\n\t"                                                                                     \
    "ldr r4, [r2], #" param "\n\tadd r9, r4, r9, asr #12\n\tadd r10, r4, r10, asr #12\n\t"                      \
    "ldr r4, [r2], #" param "\n\tadd r11, r4, r11, asr #12\n\tadd lr, r4, lr, asr #12\n\t"                      \
    "str r2, [r0, #16]\n\t"                                                                                     \
    "ldrd r3, r1, [r0, #20]\n\t"                                                                                \
    "ldr r2, [r0, #28]\n\t"                                                                                     \
    "ldr r12, [r0, #36]\n\t"                                                                                    \
    "ldr r0, [r0, #32]\n\t" EDGEC_S4_DSP_ROW_QUANT("0") EDGEC_S4_DSP_REQUANT("r9") EDGEC_S4_DSP_REQUANT("r10")  \
        EDGEC_S4_DSP_ROW_QUANT(param) EDGEC_S4_DSP_REQUANT("r11") EDGEC_S4_DSP_REQUANT(                         \
            "lr") "ldr r4, [sp]\n\t"                                                                            \
                  "ldr r4, [r4, #52]\n\t"                                                                       \
                  "cbz r4, 4f\n\t" EDGEC_S4_DSP_CLAMP("r9", "r0", "r12") EDGEC_S4_DSP_CLAMP("r10", "r0", "r12") \
                      EDGEC_S4_DSP_CLAMP("r11", "r0", "r12")                                                    \
                          EDGEC_S4_DSP_CLAMP("lr", "r0", "r12") "4:\n\t"                                        \
                                                                "ldr r0, [sp]\n\t"                              \
                                                                "adds r3, r3, #" param2 "\n\t"                  \
                                                                "adds r1, r1, #" param2 "\n\t"                  \
                                                                "strd r3, r1, [r0, #20]\n\t"                    \
                                                                "ldr r4, [r0, #40]\n\t"                         \
                                                                "ldr r5, [r0, #48]\n\t"                         \
                                                                "strb r9, [r4]\n\t"                             \
                                                                "strb r11, [r4, #" out "]\n\t"                  \
                                                                "adds r6, r4, r5\n\t"                           \
                                                                "strb r10, [r6]\n\t"                            \
                                                                "strb lr, [r6, #" out "]\n\t"                   \
                                                                "adds r4, r4, #" out2 "\n\t"                    \
                                                                "str r4, [r0, #40]\n\t"                         \
                                                                "ldr r5, [r0, #44]\n\t"                         \
                                                                "cmp r4, r5\n\t"                                \
                                                                "bne 1b\n\t"                                    \
                                                                "pop {r0, r4-r11, pc}\n\t"

/*
 * Every whole two of rows against two columns (edgec_s4_dsp_widen2) of one call, output stage
 * included, under edgec_s4_dsp_triples' conditions: each weight word is unpacked once for both
 * columns, so a block is 2 loads, 4 LDRD, 8 AND and 16 SMLAD for 32 MACs; two blocks per loop
 * iteration. Row r's outputs go to out[r] (column a) and out[out_step + r] (column b). The run
 * (r0 on entry) is kept at [sp].
 */
static __attribute__((naked, noinline, unused)) void edgec_s4_dsp_pairs(edgec_s4_dsp_run *run __attribute__((unused)))
{
    /* r1 had passed row 0 (row_bytes, its step): now row 2 */
    __asm__ volatile(EDGEC_S4_DSP_PAIRS("add r1, r1, r2\n\t", "4", "8", "1", "2"));
}

/*
 * edgec_s4_dsp_pairs over every other row of an odd-K convolution (one parity, conv_s4_dsp_odd):
 * rows row_bytes (K) apart, each read over the blocks (past its own bytes), their bias,
 * multiplier, shift and outputs every other one: a pass's rows r and r + 2 go to out[0], out[2]
 * (column a) and out[out_step], out[out_step + 2] (b); out_end past the last pass's out[0] + 4.
 */
static __attribute__((naked, noinline, unused)) void edgec_s4_dsp_pairs_alternate(edgec_s4_dsp_run *run
                                                                                  __attribute__((unused)))
{
    __asm__ volatile(EDGEC_S4_DSP_PAIRS("ldr r1, [r0, #8]\n\tadd r1, r1, r2, lsl #1\n\t", "8", "16", "2", "4"));
}
#undef EDGEC_S4_DSP_PAIRS
#undef EDGEC_S4_DSP_PAIR
#undef EDGEC_S4_DSP_BLOCK2
#undef EDGEC_S4_DSP_ROW_QUANT
#undef EDGEC_S4_DSP_REQUANT
#undef EDGEC_S4_DSP_CLAMP
#undef EDGEC_S4_DSP_ROW
#undef EDGEC_S4_DSP_BLOCK
#else
/* The C form (a build without unaligned access: the rows' words are read byte by byte). */
static inline int32_t edgec_s4_dsp_smlad8(uint32_t w, const int32_t x[4], int32_t acc)
{
    acc = __smlad((int32_t)((w << 12) & 0xF000F000u), x[0], acc);
    acc = __smlad((int32_t)((w << 8) & 0xF000F000u), x[1], acc);
    acc = __smlad((int32_t)((w << 4) & 0xF000F000u), x[2], acc);
    return __smlad((int32_t)(w & 0xF000F000u), x[3], acc);
}

static inline void edgec_s4_dsp_dot3(const int16_t *widened, const int8_t *row, int32_t row_step,
                                     const int16_t *widened_end, int32_t sums[3])
{
    int32_t acc0 = 0;
    int32_t acc1 = 0;
    int32_t acc2 = 0;
    for (; widened < widened_end; widened += 8, row += 4) {
        int32_t x[4];
        memcpy(x, widened, sizeof(x));
        acc0 = edgec_s4_dsp_smlad8((uint32_t)edgec_s16_dsp_load_weights(row), x, acc0);
        acc1 = edgec_s4_dsp_smlad8((uint32_t)edgec_s16_dsp_load_weights(row + row_step), x, acc1);
        acc2 = edgec_s4_dsp_smlad8((uint32_t)edgec_s16_dsp_load_weights(row + 2 * row_step), x, acc2);
    }
    sums[0] = acc0;
    sums[1] = acc1;
    sums[2] = acc2;
}
#endif

/* acc + the weights past the whole blocks of row r (from element `from`) times the input there. */
static inline uint32_t edgec_s4_tail(const edgec_s4_rows *a, int32_t r, int32_t from, uint32_t acc)
{
    return edgec_s4_dot(a->filter, r * a->count + from, a->x + from, a->count - from, a->input_offset, acc);
}

/* The output stage of channel c for its accumulated sum (bias and tail included). */
static inline int8_t edgec_s4_dsp_output(const edgec_s4_rows *a, int32_t c, uint32_t sum, int short_requant,
                                         int32_t round_base)
{
    if (short_requant) {
        const int32_t v = __ssat(edgec_s4_requantize_short((int32_t)sum, a->multiplier[c], a->shift[c], round_base), 8);
        return (int8_t)EDGEC_MIN(EDGEC_MAX(v, a->stage.lo + a->stage.offset), a->stage.hi + a->stage.offset);
    }
    return edgec_requantize_s8((int32_t)sum, a->multiplier[c], a->shift[c], a->stage);
}

#if EDGEC_UNALIGNED_ASM
/* The run of edgec_s4_dsp_triples / _pairs over `a`'s rows from its first: the widened blocks
 * [widened, end), outputs at out up to out + rows (whole threes / twos), column b's out_step after. */
static inline edgec_s4_dsp_run edgec_s4_dsp_run_make(const edgec_s4_rows *a, const int16_t *widened, const int16_t *end,
                                                     int32_t round_base, int8_t *out, int32_t rows, int32_t out_step)
{
    edgec_s4_dsp_run run;
    run.widened = widened;
    run.widened_end = end;
    run.row = a->filter;
    run.row_bytes = a->count / 2;
    run.bias = a->bias;
    run.multiplier = a->multiplier;
    run.shift = a->shift;
    run.round_base = round_base;
    run.act_min = a->stage.lo + a->stage.offset;
    run.act_max = a->stage.hi + a->stage.offset;
    run.out = out;
    run.out_end = out + rows;
    run.out_step = out_step;
    run.clamp = edgec_s4_dsp_clamps(&a->stage);
    return run;
}
#endif

/* The dot products of three rows (row_step apart) with the widened blocks, chunk by chunk. */
static EDGEC_NOINLINE void edgec_s4_dsp_chunks(const int16_t *widened, const int8_t *row, int32_t row_step,
                                               int32_t blocks, uint32_t acc[3])
{
    acc[0] = acc[1] = acc[2] = 0u;
    for (int32_t k = 0; k < blocks; k += EDGEC_S4_DSP_CHUNK / 8) {
        const int32_t n = EDGEC_MIN(EDGEC_S4_DSP_CHUNK / 8, blocks - k);
        int32_t sums[3];
        edgec_s4_dsp_dot3(widened + 8 * k, row + 4 * k, row_step, widened + 8 * (k + n), sums);
        acc[0] += (uint32_t)(sums[0] >> 12);
        acc[1] += (uint32_t)(sums[1] >> 12);
        acc[2] += (uint32_t)(sums[2] >> 12);
    }
}

/*
 * out[r] for the `rows` rows of `a`, `widened` holding the column's count / 8 whole blocks
 * (edgec_s4_dsp_widen); a tail of count % 8 runs the portable loop. short_requant: every row's
 * multiplier and shift admit edgec_s4_requantize_short (round_base: edgec_dsp_round_base).
 */
static inline void edgec_s4_dsp_rows(const edgec_s4_rows *a, const int16_t *widened, int32_t rows, int short_requant,
                                     int32_t round_base, int8_t *out)
{
    const int32_t blocks = a->count / 8;
    const int32_t row_bytes = a->count / 2;
    const int one_chunk = blocks <= EDGEC_S4_DSP_CHUNK / 8;
    const int tail = 8 * blocks < a->count;
    int32_t o = 0;
#if EDGEC_UNALIGNED_ASM
    if (one_chunk && !tail && short_requant && a->bias && rows >= 3) {
        edgec_s4_dsp_run run =
            edgec_s4_dsp_run_make(a, widened, widened + 8 * blocks, round_base, out, rows / 3 * 3, 0);
        edgec_s4_dsp_triples(&run);
        o = rows / 3 * 3;
    }
#endif
    while (o < rows) {
        /* Three rows per pass, all of them real: a last two start one row early (sums[1], sums[2]),
         * a last one (or the first of only two) is read three times. */
        int32_t valid = EDGEC_MIN(3, rows - o);
        valid = valid == 2 && o == 0 ? 1 : valid;
        const int32_t first = valid == 2 ? 1 : 0;
        const int8_t *row = a->filter + (o - first) * row_bytes;
        const int32_t step = valid == 1 ? 0 : row_bytes;
        uint32_t acc[3];
        if (one_chunk) {
            int32_t sums[3];
            edgec_s4_dsp_dot3(widened, row, step, widened + 8 * blocks, sums);
            acc[0] = (uint32_t)(sums[0] >> 12);
            acc[1] = (uint32_t)(sums[1] >> 12);
            acc[2] = (uint32_t)(sums[2] >> 12);
        } else {
            edgec_s4_dsp_chunks(widened, row, step, blocks, acc);
        }
        for (int32_t r = 0; r < valid; r++, o++) {
            uint32_t sum = (a->bias ? (uint32_t)a->bias[o] : 0u) + acc[first + r];
            if (tail) {
                sum = edgec_s4_tail(a, o, 8 * blocks, sum);
            }
            out[o] = edgec_s4_dsp_output(a, o, sum, short_requant, round_base);
        }
    }
}

/* 1 where edgec_s4_dsp_rows2 runs: the assembly routines' conditions (edgec_s4_dsp_triples). */
static inline int edgec_s4_dsp_rows2_fit(const edgec_s4_rows *a, int32_t rows, int short_requant)
{
    return EDGEC_UNALIGNED_ASM && a->count % 8 == 0 && a->count <= EDGEC_S4_DSP_CHUNK && short_requant &&
           a->bias != NULL && rows >= 2;
}

/*
 * out_a[r] and out_b[r] for the `rows` rows of `a` against the columns xa and xb (a->x unused),
 * `widened` their scratch (4 * count bytes, word-aligned): two rows at a time by
 * edgec_s4_dsp_pairs, an odd last row by the portable loop. Only where edgec_s4_dsp_rows2_fit.
 */
static inline void edgec_s4_dsp_rows2(const edgec_s4_rows *a, const int8_t *xa, const int8_t *xb, int16_t *widened,
                                      int32_t rows, int32_t round_base, int8_t *out_a, int8_t *out_b)
{
#if EDGEC_UNALIGNED_ASM
    const int32_t blocks = a->count / 8;
    edgec_s4_dsp_widen2(xa, xb, blocks, a->input_offset, widened);
    edgec_s4_dsp_run run = edgec_s4_dsp_run_make(a, widened, widened + 16 * blocks, round_base, out_a, rows / 2 * 2,
                                                 (int32_t)(out_b - out_a));
    edgec_s4_dsp_pairs(&run);
    if (rows % 2 != 0) {
        const int32_t r = rows - 1;
        const uint32_t bias = (uint32_t)a->bias[r];
        out_a[r] = edgec_s4_dsp_output(a, r, edgec_s4_dot(a->filter, r * a->count, xa, a->count, a->input_offset, bias),
                                       1, round_base);
        out_b[r] = edgec_s4_dsp_output(a, r, edgec_s4_dot(a->filter, r * a->count, xb, a->count, a->input_offset, bias),
                                       1, round_base);
    }
#else
    (void)a, (void)xa, (void)xb, (void)widened, (void)rows, (void)round_base, (void)out_a, (void)out_b;
#endif
}

#endif /* __ARM_FEATURE_DSP */

/* ---- Helium: VMLADAVA on 16 packed bytes (32 weights) per row ---------------------------------- */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)

/* Bytes of the deinterleaved column of `count` inputs (edgec_s4_mve_deinterleave). */
#define EDGEC_S4_MVE_COLUMN_BYTES(count) (32 * (((count) + 31) / 32))

/*
 * The input column (int8, no offset: Helium's bias has the offset folded in) in blocks of 32:
 * the 16 even-indexed inputs, then the 16 odd-indexed ones (VLD20/VLD21), zero past `count`. A
 * row's 16 packed bytes of a block shifted left by 4 give 16 * its even weights, masked with 0xF0
 * 16 * its odd.
 */
static inline void edgec_s4_mve_deinterleave(const int8_t *x, int32_t count, int8_t *column)
{
    int32_t k = 0;
    for (; k + 32 <= count; k += 32, column += 32) {
        const int8x16x2_t pairs = vld2q_s8(x + k);
        vstrbq_s8(column, pairs.val[0]);
        vstrbq_s8(column + 16, pairs.val[1]);
    }
    if (k < count) { /* the last partial block, through a zero-padded copy */
        int8_t last[32];
        vstrbq_s8(last, vdupq_n_s8(0));
        vstrbq_s8(last + 16, vdupq_n_s8(0));
        memcpy(last, x + k, (size_t)(count - k));
        const int8x16x2_t pairs = vld2q_s8(last);
        vstrbq_s8(column, pairs.val[0]);
        vstrbq_s8(column + 16, pairs.val[1]);
    }
}

/* One block of 32 inputs (even, odd) against the 16 packed bytes w of a row, into s. */
#define EDGEC_S4_MVE_ROW(s, w)                             \
    do {                                                   \
        (s) = vmladavaq_s8((s), vshlq_n_s8((w), 4), even); \
        (s) = vmladavaq_s8((s), vandq_s8((w), mask), odd); \
    } while (0)

/*
 * The four rows at row, row + row_step, ... (rows past `valid` repeat the first): 16 * their dot
 * products with the deinterleaved column. Per block of 32 inputs: two column loads, then per row
 * one load, VSHL, VAND and two VMLADAVA; a last block of fewer than 16 bytes a row is read
 * predicated.
 */
static inline int32x4_t edgec_s4_mve_dot4(const int8_t *column, const int8_t *row, int32_t row_bytes, int32_t valid)
{
    const int8_t *w0 = row;
    const int8_t *w1 = valid > 1 ? row + row_bytes : row;
    const int8_t *w2 = valid > 2 ? row + 2 * row_bytes : row;
    const int8_t *w3 = valid > 3 ? row + 3 * row_bytes : row;
    const int8x16_t mask = vdupq_n_s8((int8_t)0xF0);
    int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int32_t n = row_bytes / 16; n > 0; n--) {
        const int8x16_t even = vldrbq_s8(column);
        const int8x16_t odd = vldrbq_s8(column + 16);
        column += 32;
        EDGEC_S4_MVE_ROW(s0, vldrbq_s8(w0));
        EDGEC_S4_MVE_ROW(s1, vldrbq_s8(w1));
        EDGEC_S4_MVE_ROW(s2, vldrbq_s8(w2));
        EDGEC_S4_MVE_ROW(s3, vldrbq_s8(w3));
        w0 += 16;
        w1 += 16;
        w2 += 16;
        w3 += 16;
    }
    if (row_bytes % 16 != 0) {
        const mve_pred16_t p = vctp8q((uint32_t)(row_bytes % 16));
        const int8x16_t even = vldrbq_s8(column);
        const int8x16_t odd = vldrbq_s8(column + 16);
        EDGEC_S4_MVE_ROW(s0, vldrbq_z_s8(w0, p));
        EDGEC_S4_MVE_ROW(s1, vldrbq_z_s8(w1, p));
        EDGEC_S4_MVE_ROW(s2, vldrbq_z_s8(w2, p));
        EDGEC_S4_MVE_ROW(s3, vldrbq_z_s8(w3, p));
    }
    int32x4_t sums = vdupq_n_s32(s0);
    sums = vsetq_lane_s32(s1, sums, 1);
    sums = vsetq_lane_s32(s2, sums, 2);
    return vsetq_lane_s32(s3, sums, 3);
}
#undef EDGEC_S4_MVE_ROW

/* out[r] for the `rows` rows of `a` (a->bias: the folded bias, required), four at a time. */
static inline void edgec_s4_mve_rows(const edgec_s4_rows *a, const int8_t *column, int32_t rows, int8_t *out)
{
    const int32_t row_bytes = a->count / 2;
    for (int32_t o = 0; o < rows; o += 4) {
        const mve_pred16_t lanes = vctp32q((uint32_t)(rows - o));
        const int32x4_t sums = edgec_s4_mve_dot4(column, a->filter + o * row_bytes, row_bytes, rows - o);
        int32x4_t acc = vaddq_s32(vshrq_n_s32(sums, 4), vldrwq_z_s32(a->bias + o, lanes));
        acc = edgec_mve_requantize(acc, vldrwq_z_s32(a->multiplier + o, lanes), vldrwq_z_s32(a->shift + o, lanes));
        vstrbq_p_s32(out + o, edgec_mve_output(acc, a->stage), lanes);
    }
}

/*
 * Two columns' blocks of 32 inputs interleaved for edgec_s4_mve_dot4x2: per block, column a's 16
 * even inputs, its 16 odd, then column b's (64 bytes). `padded`: both columns readable up to
 * EDGEC_S4_MVE_COLUMN_BYTES(count) (a partial last block read whole; the bytes past count meet
 * only zero weights, edgec_s4_mve_dot4x2 loading the rows' last bytes predicated); else it is
 * copied, zero-padded.
 */
static inline void edgec_s4_mve_deinterleave2(const int8_t *xa, const int8_t *xb, int32_t count, int padded,
                                              int8_t *columns)
{
    for (int32_t k = 0; k < count; k += 32, columns += 64) {
        if (padded || k + 32 <= count) {
            const int8x16x2_t a = vld2q_s8(xa + k);
            const int8x16x2_t b = vld2q_s8(xb + k);
            vstrbq_s8(columns, a.val[0]);
            vstrbq_s8(columns + 16, a.val[1]);
            vstrbq_s8(columns + 32, b.val[0]);
            vstrbq_s8(columns + 48, b.val[1]);
        } else {
            edgec_s4_mve_deinterleave(xa + k, count - k, columns);
            edgec_s4_mve_deinterleave(xb + k, count - k, columns + 32);
        }
    }
}

/* What edgec_s4_mve_dot4x2 reads, by offset (a naked function takes no operands). */
typedef struct {
    const int8_t *columns; /*  0: edgec_s4_mve_deinterleave2's blocks */
    const int8_t *w[4];    /*  4: the first group's four rows (advanced) */
    int32_t skip;          /* 20: from a row's end of whole blocks to its next group's start */
    int32_t blocks;        /* 24: whole blocks of 16 packed bytes a row */
    int32_t tail;          /* 28: packed bytes past them, 0..15 */
    int32_t *sums_end;     /* 32: past the last group's sums */
    int32_t *sums;         /* 36: per group rows 0..3 against column a, then b: 8 words (advanced) */
} edgec_s4_mve_dot_run;

typedef char edgec_s4_mve_dot_run_layout[offsetof(edgec_s4_mve_dot_run, skip) == 20 &&
                                                 offsetof(edgec_s4_mve_dot_run, sums_end) == 32 &&
                                                 offsetof(edgec_s4_mve_dot_run, sums) == 36
                                             ? 1
                                             : -1];

/* One row (the packed bytes in q4) against the block's columns (a: q0 even, q1 odd; b: q2, q3),
 * into sa and sb: VSHL #4 leaves 16 * the even weights, VAND 0xF0 (q7) 16 * the odd ones. */
#define EDGEC_S4_MVE_UNPACK_MAC(sa, sb, mac)                                                                       \
    "vshl.i8 q5, q4, #4\n\tvand q6, q4, q7\n\t" mac " " sa ", q5, q0\n\tvmladava.s8 " sa ", q6, q1\n\t" mac " " sb \
    ", q5, q2\n\tvmladava.s8 " sb ", q6, q3\n\t"
#define EDGEC_S4_MVE_COLUMNS \
    "vldrb.u8 q0, [r1], #16\n\tvldrb.u8 q1, [r1], #16\n\tvldrb.u8 q2, [r1], #16\n\tvldrb.u8 q3, [r1], #16\n\t"
/* The four rows; mac: VMLADAVA, or VMLADAV (no accumulation) in a first block, which so sets the sums. */
#define EDGEC_S4_MVE_ROWS(load, mac)                                                                         \
    load("r3") EDGEC_S4_MVE_UNPACK_MAC("r0", "r8", mac) load("r5") EDGEC_S4_MVE_UNPACK_MAC("r2", "r10", mac) \
        load("r7") EDGEC_S4_MVE_UNPACK_MAC("r4", "r12", mac) load("r9") EDGEC_S4_MVE_UNPACK_MAC("r6", "lr", mac)
#define EDGEC_S4_MVE_LOAD(w) "vldrb.u8 q4, [" w "], #16\n\t"
#define EDGEC_S4_MVE_LOAD_TAIL(w) "vpst\n\tvldrbt.u8 q4, [" w "]\n\t" /* the first `tail` bytes, zeros after */

/* A group's whole blocks (r11: the run on entry, then the count): the first one sets the sums
 * (VMLADAV), the others add; `none`: the test for no whole block, whose sums start at 0 (label 5;
 * only a row with a partial block can have none). */
#define EDGEC_S4_MVE_BLOCKS(none)                                                                   \
    "ldr r1, [r11]\n\tldr r11, [r11, #24]\n\t" none EDGEC_S4_MVE_COLUMNS EDGEC_S4_MVE_ROWS(         \
        EDGEC_S4_MVE_LOAD, "vmladav.s8") "subs r11, r11, #1\n\tbeq 3f\n2:\n\t" EDGEC_S4_MVE_COLUMNS \
    EDGEC_S4_MVE_ROWS(EDGEC_S4_MVE_LOAD, "vmladava.s8") "subs r11, r11, #1\n\tbne 2b\n3:\n\t"
/* A row's last partial block: its `tail` bytes loaded predicated (VCTP), zeros after. */
#define EDGEC_S4_MVE_TAIL                                                                                 \
    "ldr r11, [sp, #64]\n\tldr r11, [r11, #28]\n\tvctp.8 r11\n\t" EDGEC_S4_MVE_COLUMNS EDGEC_S4_MVE_ROWS( \
        EDGEC_S4_MVE_LOAD_TAIL, "vmladava.s8")
/* The group's sums stored, the rows moved on to the next group; r11 the run again. */
#define EDGEC_S4_MVE_GROUP_END                                                                                  \
    "ldr r11, [sp, #64]\n\tldr r1, [r11, #36]\n\tstm r1!, {r0, r2, r4, r6, r8, r10, r12, lr}\n\tstr r1, [r11, " \
    "#36]\n\t"                                                                                                  \
    "ldr r0, [r11, #20]\n\tadd r3, r3, r0\n\tadd r5, r5, r0\n\tadd r7, r7, r0\n\tadd r9, r9, r0\n\t"            \
    "ldr r0, [r11, #32]\n\tcmp r1, r0\n\tbne 1b\n\t"
#define EDGEC_S4_MVE_ZERO                                                                                              \
    "movs r0, #0\n\tmovs r2, #0\n\tmovs r4, #0\n\tmovs r6, #0\n\tmov r8, #0\n\tmov r10, #0\n\tmov r12, #0\n\tmov lr, " \
    "#0\n\t"
#define EDGEC_S4_MVE_DOT4X2(none, tail)                                                                                \
    __asm__ volatile(".syntax unified\n\tpush {r0, r4-r11, lr}\n\tvpush {d8-d15}\n\tadd r1, r0, #4\n\t"                \
                     "ldm r1, {r3, r5, r7, r9}\n\tvmov.i8 q7, #0xf0\n\tmov r11, r0\n1:\n\t" EDGEC_S4_MVE_BLOCKS(none)  \
                         tail EDGEC_S4_MVE_GROUP_END "vpop {d8-d15}\n\tpop {r0, r4-r11, pc}\n5:\n\t" EDGEC_S4_MVE_ZERO \
                                                     "b 3b\n\t")

/*
 * 16 * the dot products of four rows (w[0..3], r3/r5/r7/r9) with two columns, for each group of
 * four rows until sums_end: per block of 32 inputs the four column vectors, then per row a load,
 * VSHL, VAND and four VMLADAVA (34 instructions per 256 MACs); _tail: then a row's last partial
 * block, its bytes loaded predicated (the weights past it zero, whatever the columns hold there).
 * VMLADAVA accumulates into even registers only: the eight sums live in r0, r2, ..., r12, lr and
 * are stored in that order, the pointers and the count in odd ones. Naked functions: all 14
 * registers are theirs at every optimisation level (q4-q7 saved: callee-saved by the AAPCS). Sums
 * stay exact in int32: |16 * w x| <= 16 * 8 * 128 per input, over at most
 * EDGEC_FULLY_CONNECTED_S4_DSP_MAX_INPUT inputs.
 */
static __attribute__((naked, noinline, unused)) void edgec_s4_mve_dot4x2(edgec_s4_mve_dot_run *run
                                                                         __attribute__((unused)))
{
    EDGEC_S4_MVE_DOT4X2("", "");
}

static __attribute__((naked, noinline, unused)) void edgec_s4_mve_dot4x2_tail(edgec_s4_mve_dot_run *run
                                                                              __attribute__((unused)))
{
    EDGEC_S4_MVE_DOT4X2("cmp r11, #0\n\tbeq 5f\n\t", EDGEC_S4_MVE_TAIL);
}
#undef EDGEC_S4_MVE_BLOCKS
#undef EDGEC_S4_MVE_TAIL
#undef EDGEC_S4_MVE_GROUP_END
#undef EDGEC_S4_MVE_ZERO
#undef EDGEC_S4_MVE_DOT4X2
#undef EDGEC_S4_MVE_UNPACK_MAC
#undef EDGEC_S4_MVE_COLUMNS
#undef EDGEC_S4_MVE_ROWS
#undef EDGEC_S4_MVE_LOAD
#undef EDGEC_S4_MVE_LOAD_TAIL

/* Groups of four rows per edgec_s4_mve_dot4x2 call: their sums wait on the stack (512 bytes). */
#define EDGEC_S4_MVE_GROUPS 16

/* edgec_mve_requantize for shifts that are all negative: no left shift, and the rounding fixup's
 * AND with the shift keeps just the sign bit. */
static inline int32x4_t edgec_s4_mve_requantize_right(int32x4_t x, int32x4_t multiplier, int32x4_t shift)
{
    const int32x4_t high = vqrdmulhq_s32(x, multiplier);
    return vrshlq_s32(vqaddq_s32(high, vshrq_n_s32(high, 31)), shift);
}

/* Row o's four outputs of both columns from their sums (16 * the dot products, a's then b's). */
#define EDGEC_S4_MVE_OUTPUT2(load, store, requantize)                                                     \
    do {                                                                                                  \
        const int32x4_t bias = load(a->bias + o);                                                         \
        const int32x4_t m = load(a->multiplier + o);                                                      \
        const int32x4_t shift = load(a->shift + o);                                                       \
        const int32x4_t ya = requantize(vaddq_s32(vshrq_n_s32(vldrwq_s32(sums), 4), bias), m, shift);     \
        const int32x4_t yb = requantize(vaddq_s32(vshrq_n_s32(vldrwq_s32(sums + 4), 4), bias), m, shift); \
        store(out_a + o, edgec_mve_output(ya, a->stage));                                                 \
        store(out_b + o, edgec_mve_output(yb, a->stage));                                                 \
    } while (0)
#define EDGEC_S4_MVE_LOAD_LANES(at) vldrwq_z_s32((at), lanes)
#define EDGEC_S4_MVE_STORE_LANES(at, v) vstrbq_p_s32((at), (v), lanes)

/* Rows first .. first + 4 * count - 1's outputs from their sums; with fewer than four rows in all,
 * rows 0 .. rows - 1 (right: every shift negative). */
static inline void edgec_s4_mve_outputs2(const edgec_s4_rows *a, const int32_t *sums, int32_t first, int32_t count,
                                         int32_t rows, int right, int8_t *out_a, int8_t *out_b)
{
    if (rows < 4) {
        const int32_t o = 0;
        const mve_pred16_t lanes = vctp32q((uint32_t)rows);
        EDGEC_S4_MVE_OUTPUT2(EDGEC_S4_MVE_LOAD_LANES, EDGEC_S4_MVE_STORE_LANES, edgec_mve_requantize);
        return;
    }
    const int32_t end = first + 4 * count;
    if (right) {
        for (int32_t o = first; o < end; o += 4, sums += 8) {
            EDGEC_S4_MVE_OUTPUT2(vldrwq_s32, vstrbq_s32, edgec_s4_mve_requantize_right);
        }
    } else {
        for (int32_t o = first; o < end; o += 4, sums += 8) {
            EDGEC_S4_MVE_OUTPUT2(vldrwq_s32, vstrbq_s32, edgec_mve_requantize);
        }
    }
}
#undef EDGEC_S4_MVE_OUTPUT2
#undef EDGEC_S4_MVE_LOAD_LANES
#undef EDGEC_S4_MVE_STORE_LANES

/* 1 when every one of the `count` shifts is negative (edgec_s4_mve_requantize_right). */
static inline int edgec_s4_mve_right_shifts(const int32_t *shift, int32_t count)
{
    for (int32_t i = 0; i < count; i++) {
        if (shift[i] >= 0) {
            return 0;
        }
    }
    return 1;
}

/*
 * edgec_s4_mve_outputs2 for rows two apart in `a` (an odd-K layer's rows of one parity, whose
 * parameters and outputs are every other one): set row o is a's row 2 o, its bias, multiplier
 * and shift gathered and its outputs scattered two apart.
 */
static inline void edgec_s4_mve_outputs2_alternate(const edgec_s4_rows *a, const int32_t *sums, int32_t first,
                                                   int32_t count, int32_t rows, int8_t *out_a, int8_t *out_b)
{
    const uint32x4_t alternate = vidupq_n_u32(0, 2);
    const mve_pred16_t lanes = vctp32q((uint32_t)EDGEC_MIN(rows, 4));
    const int32_t start = rows < 4 ? 0 : first;
    const int32_t end = rows < 4 ? 4 : first + 4 * count;
    for (int32_t o = start; o < end; o += 4, sums += 8) {
        const int32x4_t bias = vldrwq_gather_shifted_offset_z_s32(a->bias + 2 * o, alternate, lanes);
        const int32x4_t m = vldrwq_gather_shifted_offset_z_s32(a->multiplier + 2 * o, alternate, lanes);
        const int32x4_t shift = vldrwq_gather_shifted_offset_z_s32(a->shift + 2 * o, alternate, lanes);
        const int32x4_t ya = edgec_mve_requantize(vaddq_s32(vshrq_n_s32(vldrwq_s32(sums), 4), bias), m, shift);
        const int32x4_t yb = edgec_mve_requantize(vaddq_s32(vshrq_n_s32(vldrwq_s32(sums + 4), 4), bias), m, shift);
        vstrbq_scatter_offset_p_s32(out_a + 2 * o, alternate, edgec_mve_output(ya, a->stage), lanes);
        vstrbq_scatter_offset_p_s32(out_b + 2 * o, alternate, edgec_mve_output(yb, a->stage), lanes);
    }
}

/* How edgec_s4_mve_rows2_set's rows lie: `bytes` packed bytes a row read, `step` bytes from one
 * row's start to the next's; `alternate`: the rows are every other one of `a` (outputs, bias,
 * multiplier and shift two apart: edgec_s4_mve_outputs2_alternate). */
typedef struct {
    int32_t bytes;
    int32_t step;
    int alternate;
} edgec_s4_mve_row_set;

/*
 * `rows` rows laid out as `set` says (the first at a->filter) against two columns at once
 * (`columns`: edgec_s4_mve_deinterleave2's), into out_a and out_b (right: edgec_s4_mve_right_shifts
 * of every row), by edgec_s4_mve_dot4x2: each row's packed bytes are loaded and unpacked once for
 * both columns. Groups of four rows; a last partial group is the last four rows (the ones before
 * it recomputed, the same bytes stored again), or, with fewer than four rows in all, row 0 ..
 * rows - 1 with the last one repeated. Always inlined: with `set` constant, each caller compiles
 * only its own output stage.
 */
static inline __attribute__((always_inline)) void edgec_s4_mve_rows2_set(const edgec_s4_rows *a,
                                                                         edgec_s4_mve_row_set set,
                                                                         const int8_t *columns, int32_t rows, int right,
                                                                         int8_t *out_a, int8_t *out_b)
{
    int32_t sums[8 * EDGEC_S4_MVE_GROUPS];
    edgec_s4_mve_dot_run run;
    run.columns = columns;
    run.blocks = set.bytes / 16;
    run.tail = set.bytes % 16;
    run.skip = 4 * set.step - 16 * run.blocks;
    for (int32_t o = 0; o < rows;) {
        const int32_t first = rows - o < 4 ? EDGEC_MAX(rows - 4, 0) : o;
        const int32_t count = EDGEC_MIN(EDGEC_S4_MVE_GROUPS, EDGEC_MAX((rows - first) / 4, 1));
        for (int32_t i = 0; i < 4; i++) {
            run.w[i] = a->filter + (first + EDGEC_MIN(i, rows - 1)) * set.step;
        }
        run.sums = sums;
        run.sums_end = sums + 8 * count;
        if (run.tail != 0) {
            edgec_s4_mve_dot4x2_tail(&run);
        } else {
            edgec_s4_mve_dot4x2(&run);
        }
        if (set.alternate) {
            edgec_s4_mve_outputs2_alternate(a, sums, first, count, rows, out_a, out_b);
        } else {
            edgec_s4_mve_outputs2(a, sums, first, count, rows, right, out_a, out_b);
        }
        o = first + 4 * count;
    }
}

/* edgec_s4_mve_rows2_set over a's `rows` rows of a->count (even) weights, one after the other. */
static inline void edgec_s4_mve_rows2(const edgec_s4_rows *a, const int8_t *columns, int32_t rows, int right,
                                      int8_t *out_a, int8_t *out_b)
{
    const edgec_s4_mve_row_set set = { a->count / 2, a->count / 2, 0 };
    edgec_s4_mve_rows2_set(a, set, columns, rows, right, out_a, out_b);
}

#endif /* __ARM_FEATURE_MVE */

#endif /* EDGEC_S4_H */
