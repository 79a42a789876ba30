/*
 * edgec_fully_connected_s8.c -- int8 fully connected layer: the portable C99 path (the reference)
 * and, on Arm cores with the DSP extension or Helium, edgec_fully_connected_s8_dsp (_dsp_wide:
 * its filter widened to int16, for --opt speed) and _mve, which read a filter re-laid at compile
 * time (edgec.ops.kernel_layout) and a bias with the input offset folded in.
 *
 * acc[o] = bias[o] + sum_j w[o][j] * (x[j] + input_offset)
 * y[o]   = clamp(requantize(acc[o], m, s) + output_offset, act_min, act_max)
 *
 * Accumulation is done in uint32_t: products are bounded (|w * (x + off)| <= 128 * 255), but a long
 * row plus an int32 bias could overflow a signed accumulator, which is undefined behaviour in C.
 * Unsigned arithmetic wraps modulo 2^32 instead, which is exactly the int32 wrap the golden
 * kernel (edgec.ops.linear.fully_connected_s8) models, and compiles to the same MLA instructions.
 */
#include <stddef.h>
#include <string.h>

#include "edgec_nn.h"
#include "../support/edgec_support.h"

static int fc_args_valid(const edgec_fully_connected_s8_desc *desc, const int8_t *input, const int8_t *output)
{
    if (desc == NULL || desc->multiplier == NULL || desc->shift == NULL || input == NULL || desc->filter == NULL ||
        output == NULL) {
        return 0;
    }
    const int32_t batches = desc->batches, input_size = desc->input_size, output_size = desc->output_size;
    /* Every index into the input, filter and output fits int32. */
    if (batches < 1 || input_size < 1 || output_size < 1 || (int64_t)batches * input_size > INT32_MAX ||
        (int64_t)batches * output_size > INT32_MAX || (int64_t)output_size * input_size > INT32_MAX) {
        return 0;
    }
    /* The offset ranges keep x + input_offset and the products far from int32 overflow. */
    if (!edgec_offsets_valid(desc->input_offset, desc->output_offset)) {
        return 0;
    }
    if (!edgec_act_range_valid(desc->act_min, desc->act_max)) {
        return 0;
    }
    return edgec_shifts_valid(desc->shift, desc->per_channel ? output_size : 1);
}

/*
 * Two dot products against the same input row at once: each (x + offset) is loaded and offset
 * once and used twice, which roughly halves the loads per MAC on a core without a data cache.
 */
static void fc_dot2(const int8_t *x, const int8_t *w0, const int8_t *w1, int32_t n, int32_t input_offset,
                    uint32_t *acc0, uint32_t *acc1)
{
    uint32_t sum0 = *acc0;
    uint32_t sum1 = *acc1;
    const int8_t *const x_end = x + n;
    while (x < x_end) {
        const int32_t xv = (int32_t)*x++ + input_offset;
        sum0 += (uint32_t)((int32_t)*w0++ * xv);
        sum1 += (uint32_t)((int32_t)*w1++ * xv);
    }
    *acc0 = sum0;
    *acc1 = sum1;
}

static uint32_t fc_dot1(const int8_t *x, const int8_t *w, int32_t n, int32_t input_offset, uint32_t acc)
{
    const int8_t *const x_end = x + n;
    while (x < x_end) {
        const int32_t xv = (int32_t)*x++ + input_offset;
        acc += (uint32_t)((int32_t)*w++ * xv);
    }
    return acc;
}

edgec_status edgec_fully_connected_s8(const edgec_fully_connected_s8_desc *desc, const int8_t *input, int8_t *output)
{
    int32_t b;
    int32_t input_offset, quant_step;
    edgec_output_stage stage;

    if (!fc_args_valid(desc, input, output)) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t batches = desc->batches, input_size = desc->input_size, output_size = desc->output_size;
    const int8_t *const filter = desc->filter;
    const int32_t *const bias = desc->bias;
    input_offset = desc->input_offset;
    stage = edgec_output_stage_make(desc->output_offset, desc->act_min, desc->act_max);
    /* Per-tensor quantization reads entry 0 for every output: a stride of 0 avoids a branch. */
    quant_step = desc->per_channel ? 1 : 0;

    /* (int32_t)acc below, modular -> int32: implementation-defined two's complement wrap on every
     * supported compiler. */
    for (b = 0; b < batches; ++b) {
        const int8_t *const x = input + b * input_size;
        const int8_t *w = filter;
        const int32_t *mult = desc->multiplier;
        const int32_t *shift = desc->shift;
        int8_t *y = output + b * output_size;
        int32_t o = 0;

        for (; o + 1 < output_size; o += 2) {
            uint32_t acc0 = bias ? (uint32_t)bias[o] : 0u;
            uint32_t acc1 = bias ? (uint32_t)bias[o + 1] : 0u;
            fc_dot2(x, w, w + input_size, input_size, input_offset, &acc0, &acc1);
            w += 2 * input_size;
            *y++ = edgec_requantize_s8((int32_t)acc0, *mult, *shift, stage);
            mult += quant_step;
            shift += quant_step;
            *y++ = edgec_requantize_s8((int32_t)acc1, *mult, *shift, stage);
            mult += quant_step;
            shift += quant_step;
        }
        if (o < output_size) {
            const uint32_t acc = fc_dot1(x, w, input_size, input_offset, bias ? (uint32_t)bias[o] : 0u);
            *y = edgec_requantize_s8((int32_t)acc, *mult, *shift, stage);
        }
    }
    return EDGEC_OK;
}

/* ==== Packed paths: Arm DSP extension and Helium ============================================= */
#if defined(__ARM_FEATURE_DSP) || (defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))

/* The packed paths' arguments: fc_args_valid's, plus a folded bias and a word-aligned filter. */
static int packed_fc_args_valid(const edgec_fully_connected_s8_desc *desc, const int8_t *input, const int8_t *output)
{
    return fc_args_valid(desc, input, output) && desc->bias != NULL && edgec_word_aligned(desc->filter);
}

#endif /* packed paths */

/* ==== Arm DSP extension: 6 outputs per SMLAD micro-kernel step (wide filter: 4) ============== */
#if defined(__ARM_FEATURE_DSP)

/* The assembly routines below are one asm statement longer than the 4095 characters C99 promises
 * a string literal; the assembler takes any length, GCC does not count asm strings, and clang's
 * -pedantic does. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Woverlength-strings"
#endif

/* One step of dsp_mac_rows: 4 inputs, widened here, against the block's `rows` rows of 4 filter
 * bytes (2, 4 or 6), or (wide) of 4 rows of 8 bytes, their taps already widened; wide with rows 2,
 * the first two of the 4 only (a last block of 1 or 2 outputs: the others are zero). */
static inline void dsp_mac_group(const int8_t **filter, int32_t x, int32_t sums[6], int wide, int rows)
{
    const int32_t x_even = __sxtb16(x);
    const int32_t x_odd = edgec_sxtb16_ror8(x);
    int32_t w0, w1, w2, w3;
    if (wide) { /* unrolled by hand: a loop over sums[] keeps them in memory */
        edgec_dsp_load_2words(filter, &w0, &w1);
        sums[0] = __smlad(w1, x_odd, __smlad(w0, x_even, sums[0]));
        edgec_dsp_load_2words(filter, &w0, &w1);
        sums[1] = __smlad(w1, x_odd, __smlad(w0, x_even, sums[1]));
        if (rows == 2) {
            *filter += 16;
            return;
        }
        edgec_dsp_load_2words(filter, &w0, &w1);
        sums[2] = __smlad(w1, x_odd, __smlad(w0, x_even, sums[2]));
        edgec_dsp_load_2words(filter, &w0, &w1);
        sums[3] = __smlad(w1, x_odd, __smlad(w0, x_even, sums[3]));
        return;
    }
    edgec_dsp_load_2words(filter, &w0, &w1);
    sums[0] = __smlad(__sxtb16(w0), x_even, sums[0]);
    sums[0] = __smlad(edgec_sxtb16_ror8(w0), x_odd, sums[0]);
    sums[1] = __smlad(__sxtb16(w1), x_even, sums[1]);
    sums[1] = __smlad(edgec_sxtb16_ror8(w1), x_odd, sums[1]);
    if (rows == 2) {
        return;
    }
    edgec_dsp_load_2words(filter, &w2, &w3);
    sums[2] = __smlad(__sxtb16(w2), x_even, sums[2]);
    sums[2] = __smlad(edgec_sxtb16_ror8(w2), x_odd, sums[2]);
    sums[3] = __smlad(__sxtb16(w3), x_even, sums[3]);
    sums[3] = __smlad(edgec_sxtb16_ror8(w3), x_odd, sums[3]);
    if (rows == 6) {
        edgec_dsp_load_2words(filter, &w0, &w1);
        sums[4] = __smlad(__sxtb16(w0), x_even, sums[4]);
        sums[4] = __smlad(edgec_sxtb16_ror8(w0), x_odd, sums[4]);
        sums[5] = __smlad(__sxtb16(w1), x_even, sums[5]);
        sums[5] = __smlad(edgec_sxtb16_ror8(w1), x_odd, sums[5]);
    }
}

/*
 * The C micro-kernel: a block's dot products with the input row. Per group of 4 inputs, the
 * input word and the block's 16 filter bytes (4 per output) are widened with SXTB16 (pairs
 * (x0, x2) and (x1, x3) on both sides) and multiplied: 16 MACs in 3 loads, 10 SXTB16 and 8
 * SMLAD; a wide filter, its taps widened at compile time: 5 loads, 2 SXTB16 and 8 SMLAD. A last
 * partial group reads only the input bytes there are (the filter is zero past them). SMLAD wraps
 * modulo 2^32, as the golden kernel's int32 accumulator. rows 2: sums[0..1] only; rows 4:
 * sums[0..3]; rows 6: all.
 */
static inline void dsp_mac_rows(const int8_t *filter, const int8_t *x, int32_t n, int32_t sums[6], int wide, int rows)
{
    int32_t s[6] = { sums[0], sums[1], sums[2], sums[3], sums[4], sums[5] };
    const int8_t *const full_end = x + (n & ~3);
    while (x < full_end) {
        int32_t group;
#if EDGEC_UNALIGNED_ASM
        __asm__ volatile("ldr %0, [%1], #4" : "=r"(group), "+r"(x) : : "memory");
#else
        memcpy(&group, x, 4);
        x += 4;
#endif
        dsp_mac_group(&filter, group, s, wide, rows);
    }
    if ((n & 3) != 0) {
        uint32_t group = 0;
        for (int32_t j = (n & 3) - 1; j >= 0; j--) { /* little-endian: input j is byte j */
            group = group << 8 | (uint8_t)x[j];
        }
        dsp_mac_group(&filter, (int32_t)group, s, wide, rows);
    }
    sums[0] = s[0];
    sums[1] = s[1];
    sums[2] = s[2];
    sums[3] = s[3];
    sums[4] = s[4];
    sums[5] = s[5];
}

/* dsp_mac_rows for each filter form and block: int8 blocks of 6, 4 or 2 rows; wide blocks of 4
 * rows, all or the first 2. Not inlined: GCC then keeps the loop's values in registers instead of
 * spilling the caller's. */
typedef void (*dsp_fc_micro_kernel)(const int8_t *filter, const int8_t *x, int32_t n, int32_t sums[6]);

static EDGEC_NOINLINE void dsp_mac_6x1_int8(const int8_t *filter, const int8_t *x, int32_t n, int32_t sums[6])
{
    dsp_mac_rows(filter, x, n, sums, 0, 6);
}

static EDGEC_NOINLINE void dsp_mac_4x1_int8(const int8_t *filter, const int8_t *x, int32_t n, int32_t sums[6])
{
    dsp_mac_rows(filter, x, n, sums, 0, 4);
}

static EDGEC_NOINLINE void dsp_mac_4x1_wide(const int8_t *filter, const int8_t *x, int32_t n, int32_t sums[6])
{
    dsp_mac_rows(filter, x, n, sums, 1, 4);
}

static EDGEC_NOINLINE void dsp_mac_2x1_int8(const int8_t *filter, const int8_t *x, int32_t n, int32_t sums[6])
{
    dsp_mac_rows(filter, x, n, sums, 0, 2);
}

static EDGEC_NOINLINE void dsp_mac_2x1_wide(const int8_t *filter, const int8_t *x, int32_t n, int32_t sums[6])
{
    dsp_mac_rows(filter, x, n, sums, 1, 2);
}

/*
 * The whole blocks of one input row when every output takes the short requantization: one
 * assembly routine runs them all -- biases, dot products, requantization, clamp and the block's
 * stores. int8 filter (dsp_fc_blocks_int8), blocks of 6 outputs: the dot product loop keeps the
 * six sums, the input word widened once (x_even, x_odd) and 3 filter words in registers; a group
 * of 4 inputs is the input word and 3 filter words in one pipelined run of loads (a load single
 * after a load single issues in 1 cycle, Cortex-M4 TRM 3.3.2), 3 more in a second, 14 SXTB16 and
 * 12 SMLAD: 24 MACs in 35 cycles by the timing model, against 16 in 24 in blocks of 4 (the
 * input's widening and the output stage's set-up shared by 6 outputs; no register is left to
 * hold more filter words). Wide filter (dsp_fc_blocks_wide), blocks of 4: 5 loads, an LDM of 4,
 * 2 SXTB16 and 8 SMLAD. Four groups per loop iteration (entered at the copy that leaves a whole
 * number of iterations). Written as naked functions, so that all 14 registers are theirs at
 * every optimisation level.
 */
typedef struct {
    const int8_t *x;           /*  0: the input row */
    const int8_t *x_end;       /*  4: past its last whole group of 4 */
    const int8_t *filter;      /*  8: the next block's (advanced) */
    const int32_t *bias;       /* 12: the next block's folded biases (advanced) */
    const int32_t *multiplier; /* 16: the next block's multipliers (advanced by quant_step) */
    const int32_t *shift;      /* 20: ... and shifts */
    int32_t quant_step;        /* 24: bytes from a block's multipliers to the next's: 4 * rows or 0 */
    int32_t round_base;        /* 28: edgec_dsp_round_base of the output offset */
    uint32_t lows;             /* 32: act_min in every byte */
    uint32_t highs;            /* 36: act_max in every byte */
    int8_t *y;                 /* 40: the next block's outputs (advanced) */
    int8_t *y_end;             /* 44: past the last whole block's */
    int32_t tail;              /* 48: the input's last n % 4 bytes, zero-extended to a word */
    int32_t has_tail;          /* 52: n % 4 != 0 */
} dsp_fc_run;

typedef char dsp_fc_run_layout[offsetof(dsp_fc_run, quant_step) == 24 && offsetof(dsp_fc_run, y) == 40 &&
                                       offsetof(dsp_fc_run, has_tail) == 52
                                   ? 1
                                   : -1];

// clang-format off
/* One row of a 6-row group: the filter word in `w` against x_even (r10) and x_odd (r11) into
 * `sum`; lr is scratch. */
#define DSP_FC6_ROW(sum, w)                                                                        \
    "sxtb16 lr, " w ", ror #8\n\t"                                                                 \
    "sxtb16 " w ", " w "\n\t"                                                                      \
    "smlad " sum ", " w ", r10, " sum "\n\t"                                                       \
    "smlad " sum ", lr, r11, " sum "\n\t"
/* One group of 4 inputs against the block's 6 rows: `xload` puts the input word in r10, or (with
 * `widen` empty) the input already widened, (x0, x2) in r10 and (x1, x3) in r11; the sums are
 * r4..r9, the filter pointer r1; r0, r3, r12 and lr are scratch. `endload` may load a word into
 * lr (pipelined after the filter loads) and set the flags; the group leaves them. */
#define DSP_FC6_GROUP(xload, widen, endload)                                                       \
    xload "\n\t"                                                                                   \
    "ldr r0, [r1], #4\n\t"                                                                         \
    "ldr r3, [r1], #4\n\t"                                                                         \
    "ldr r12, [r1], #4\n\t"                                                                        \
    endload                                                                                        \
    widen                                                                                          \
    DSP_FC6_ROW("r4", "r0") DSP_FC6_ROW("r5", "r3") DSP_FC6_ROW("r6", "r12")                       \
    "ldr r0, [r1], #4\n\t"                                                                         \
    "ldr r3, [r1], #4\n\t"                                                                         \
    "ldr r12, [r1], #4\n\t"                                                                        \
    DSP_FC6_ROW("r7", "r0") DSP_FC6_ROW("r8", "r3") DSP_FC6_ROW("r9", "r12")
#define DSP_FC_WIDEN_X "sxtb16 r11, r10, ror #8\n\tsxtb16 r10, r10\n\t"
/* edgec_dsp_requantize_ssat8 of the sum in `acc`, its multiplier and shift at byte `at` of the
 * block's arrays (r2, r3); r10 holds the round base, r1, r11, r12 and lr are scratch. */
#define DSP_FC6_REQUANT(acc, at)                                                                   \
    "ldr r11, [r2, #" at "]\n\t"                                                                   \
    "ldr r1, [r3, #" at "]\n\t"                                                                    \
    "mvn r1, r1\n\t"                                                                               \
    "sub r12, r1, #1\n\t"                                                                          \
    "lsl r12, r10, r12\n\t"                                                                        \
    "and lr, " acc ", #0x80000000\n\t"                                                             \
    "orr lr, lr, #0x40000000\n\t"                                                                  \
    "add r12, r12, " acc ", asr #31\n\t"                                                           \
    "smlal lr, r12, " acc ", r11\n\t"                                                              \
    "asr " acc ", r12, r1\n\t"                                                                     \
    "ssat " acc ", #8, " acc "\n\t"
/* The clamp of 4 packed bytes in `word` to the run's lows (r10) and highs (r11); r12 scratch. */
#define DSP_FC_CLAMP4(word)                                                                        \
    "ssub8 r12, " word ", r10\n\t"                                                                 \
    "sel " word ", " word ", r10\n\t"                                                              \
    "ssub8 r12, " word ", r11\n\t"                                                                 \
    "sel " word ", r11, " word "\n\t"

/* The last partial group of an input row (has_tail), widened here. */
#define DSP_FC6_TAIL                                                                               \
    "ldr r0, [sp]\n\t"                                                                             \
    "ldr r3, [r0, #52]\n\t"                                                                        \
    "cmp r3, #0\n\t"                                                                               \
    "beq 5f\n\t"                                                                                   \
    DSP_FC6_GROUP("ldr r10, [r0, #48]", DSP_FC_WIDEN_X, "")
/* The 6-row routine, over `mask` + 4 bytes of input a loop iteration (16: int8, widened here; 32:
 * widened by the caller, the last partial group included: `tail` empty, and never no whole group:
 * `empty`, which skips the loop when the flags say so, empty); r0 holds the run on entry, kept at
 * [sp], its x_end at [sp, #4]. */
#define DSP_FC6_BLOCKS(xload, widen, mask, half, empty, tail)                                      \
    __asm__ volatile(                                                                              \
        ".syntax unified\n\t"                                                                      \
        "ldr r3, [r0, #4]\n\t"                                                                     \
        "push {r0, r3, r4-r11, lr}\n"                                                              \
        "1:\n\t" /* r0: the run, on entry and at the end of each block */                         \
        "ldr r2, [r0, #0]\n\t" /* four loads in one pipelined run: 5 cycles, two LDRD take 6 */  \
        "ldr r3, [r0, #4]\n\t"                                                                     \
        "ldr r1, [r0, #8]\n\t"                                                                     \
        "ldr r12, [r0, #12]\n\t"                                                                   \
        "ldm r12!, {r4, r5, r6, r7, r8, r9}\n\t"                                                   \
        "str r12, [r0, #12]\n\t"                                                                   \
        "sub r12, r3, r2\n\t"                                                                      \
        empty                                                                                      \
        "ands r12, r12, #" mask "\n\t"                                                             \
        "beq 2f\n\t"                                                                               \
        "cmp r12, #" half "\n\t"                                                                   \
        "beq 7f\n\t"                                                                               \
        "bhi 6f\n\t"                                                                               \
        "b 3f\n\t"                                                                                 \
        ".p2align 2\n"                                                                             \
        "2:\n\t"                                                                                   \
        DSP_FC6_GROUP(xload, widen, "")                                                            \
        "6:\n\t"                                                                                   \
        DSP_FC6_GROUP(xload, widen, "")                                                            \
        "7:\n\t"                                                                                   \
        DSP_FC6_GROUP(xload, widen, "")                                                            \
        "3:\n\t"                                                                                   \
        DSP_FC6_GROUP(xload, widen, "ldr lr, [sp, #4]\n\tcmp r2, lr\n\t")                          \
        "bne 2b\n"                                                                                 \
        "4:\n\t"                                                                                   \
        tail                                                                                       \
        "5:\n\t"                                                                                   \
        "ldr r0, [sp]\n\t"                                                                         \
        "str r1, [r0, #8]\n\t"                                                                     \
        "ldr r2, [r0, #16]\n\t"                                                                    \
        "ldr r3, [r0, #20]\n\t"                                                                    \
        "ldr r10, [r0, #28]\n\t"                                                                   \
        DSP_FC6_REQUANT("r4", "0") DSP_FC6_REQUANT("r5", "4") DSP_FC6_REQUANT("r6", "8")           \
        DSP_FC6_REQUANT("r7", "12") DSP_FC6_REQUANT("r8", "16") DSP_FC6_REQUANT("r9", "20")        \
        "bfi r4, r5, #8, #8\n\t"                                                                   \
        "bfi r4, r6, #16, #8\n\t"                                                                  \
        "bfi r4, r7, #24, #8\n\t"                                                                  \
        "bfi r8, r9, #8, #8\n\t"                                                                   \
        "ldr r10, [r0, #32]\n\t" /* lows, highs, quant_step, y, y_end: one pipelined run */       \
        "ldr r11, [r0, #36]\n\t"                                                                   \
        "ldr r12, [r0, #24]\n\t"                                                                   \
        "ldr lr, [r0, #40]\n\t"                                                                    \
        "ldr r1, [r0, #44]\n\t"                                                                    \
        "add r2, r2, r12\n\t"                                                                      \
        "add r3, r3, r12\n\t"                                                                      \
        "strd r2, r3, [r0, #16]\n\t"                                                               \
        DSP_FC_CLAMP4("r4") DSP_FC_CLAMP4("r8")                                                    \
        "str r4, [lr], #4\n\t"                                                                     \
        "strh r8, [lr], #2\n\t"                                                                    \
        "str lr, [r0, #40]\n\t"                                                                    \
        "cmp lr, r1\n\t"                                                                           \
        "bne 1b\n\t"                                                                               \
        "pop {r0, r3, r4-r11, pc}\n\t")

#if EDGEC_UNALIGNED_ASM
static __attribute__((naked, noinline)) void dsp_fc_blocks_int8(dsp_fc_run *run __attribute__((unused)))
{
    DSP_FC6_BLOCKS("ldr r10, [r2], #4", DSP_FC_WIDEN_X, "12", "8", "cmp r12, #0\n\tbeq 4f\n\t", DSP_FC6_TAIL);
}

/* ... its input already widened (x0, x2), (x1, x3) a group, the last partial group included. */
static __attribute__((naked, noinline)) void dsp_fc_blocks_int8_widened_x(dsp_fc_run *run __attribute__((unused)))
{
    DSP_FC6_BLOCKS("ldr r10, [r2], #4\n\tldr r11, [r2], #4", "", "24", "16", "", "");
}
#endif

/* One group of 4 inputs against a wide block's 4 rows (each row's taps already widened, (w0, w2)
 * then (w1, w3)): `xload` puts the input word in r8; the sums are r4..r7, the filter pointer r1;
 * r9..r12 and lr are scratch. */
#define DSP_FC_GROUP_WIDE(xload)                                                                   \
    xload "\n\t"                                                                                   \
    "ldr r10, [r1], #4\n\t"                                                                        \
    "ldr r11, [r1], #4\n\t"                                                                        \
    "ldr r12, [r1], #4\n\t"                                                                        \
    "ldr lr, [r1], #4\n\t"                                                                         \
    "sxtb16 r9, r8, ror #8\n\t"                                                                    \
    "sxtb16 r8, r8\n\t"                                                                            \
    "smlad r4, r10, r8, r4\n\t"                                                                    \
    "smlad r4, r11, r9, r4\n\t"                                                                    \
    "smlad r5, r12, r8, r5\n\t"                                                                    \
    "smlad r5, lr, r9, r5\n\t"                                                                     \
    "ldm r1!, {r10, r11, r12, lr}\n\t"                                                             \
    "smlad r6, r10, r8, r6\n\t"                                                                    \
    "smlad r6, r11, r9, r6\n\t"                                                                    \
    "smlad r7, r12, r8, r7\n\t"                                                                    \
    "smlad r7, lr, r9, r7\n\t"
/* edgec_dsp_requantize_ssat8 of the sum in `acc`, its multiplier and shift at byte `at` of the
 * block's arrays (r2, r3); r10 holds the round base, r8, r9, r11, r12 and lr are scratch. */
#define DSP_FC_REQUANT(acc, at)                                                                    \
    "ldr r8, [r2, #" at "]\n\t"                                                                    \
    "ldr r9, [r3, #" at "]\n\t"                                                                    \
    "mvn r9, r9\n\t"                                                                               \
    "sub r11, r9, #1\n\t"                                                                          \
    "lsl r11, r10, r11\n\t"                                                                        \
    "and r12, " acc ", #0x80000000\n\t"                                                            \
    "orr r12, r12, #0x40000000\n\t"                                                                \
    "add lr, r11, " acc ", asr #31\n\t"                                                            \
    "smlal r12, lr, " acc ", r8\n\t"                                                               \
    "asr " acc ", lr, r9\n\t"                                                                      \
    "ssat " acc ", #8, " acc "\n\t"

#if EDGEC_UNALIGNED_ASM
/* The wide 4-row routine; r0 holds the run on entry, kept at [sp]. */
static __attribute__((naked, noinline)) void dsp_fc_blocks_wide(dsp_fc_run *run __attribute__((unused)))
{
    __asm__ volatile(
        ".syntax unified\n\t"
        "push {r0, r4-r11, lr}\n"
        "1:\n\t"
        "ldr r0, [sp]\n\t"
        "ldrd r2, r3, [r0, #0]\n\t"
        "ldrd r1, r8, [r0, #8]\n\t"
        "ldm r8!, {r4, r5, r6, r7}\n\t"
        "str r8, [r0, #12]\n\t"
        "subs r9, r3, r2\n\t"
        "beq 4f\n\t"
        "ands r9, r9, #12\n\t"
        "beq 2f\n\t"
        "cmp r9, #8\n\t"
        "beq 7f\n\t"
        "bhi 6f\n\t"
        "b 3f\n\t"
        ".p2align 2\n"
        "2:\n\t"
        DSP_FC_GROUP_WIDE("ldr r8, [r2], #4")
        "6:\n\t"
        DSP_FC_GROUP_WIDE("ldr r8, [r2], #4")
        "7:\n\t"
        DSP_FC_GROUP_WIDE("ldr r8, [r2], #4")
        "3:\n\t"
        DSP_FC_GROUP_WIDE("ldr r8, [r2], #4")
        "cmp r2, r3\n\t"
        "bne 2b\n"
        "4:\n\t"
        "ldr r0, [sp]\n\t"
        "ldr r3, [r0, #52]\n\t"
        "cmp r3, #0\n\t"
        "beq 5f\n\t"
        DSP_FC_GROUP_WIDE("ldr r8, [r0, #48]")
        "5:\n\t"
        "ldr r0, [sp]\n\t"
        "str r1, [r0, #8]\n\t"
        "ldrd r2, r3, [r0, #16]\n\t"
        "ldr r10, [r0, #28]\n\t"
        DSP_FC_REQUANT("r4", "0") DSP_FC_REQUANT("r5", "4") DSP_FC_REQUANT("r6", "8") DSP_FC_REQUANT("r7", "12")
        "bfi r4, r5, #8, #8\n\t"
        "bfi r4, r6, #16, #8\n\t"
        "bfi r4, r7, #24, #8\n\t"
        "ldrd r10, r11, [r0, #32]\n\t"
        DSP_FC_CLAMP4("r4")
        "ldr r12, [r0, #24]\n\t"
        "add r2, r2, r12\n\t"
        "add r3, r3, r12\n\t"
        "strd r2, r3, [r0, #16]\n\t"
        "ldrd r8, r9, [r0, #40]\n\t"
        "str r4, [r8], #4\n\t"
        "str r8, [r0, #40]\n\t"
        "cmp r8, r9\n\t"
        "bne 1b\n\t"
        "pop {r0, r4-r11, pc}\n\t");
}
// clang-format on

/* Inputs up to which the int8 routine's input row is widened once, on the stack (8 bytes a group of
 * 4 inputs, twice the row: at most 512 B, so that a model's invoke stack stays under 1 KiB: at 1,024
 * inputs the AD autoencoder's took 1,644 B), when it has 8 whole blocks or more: dsp_fc_blocks_int8_widened_x then
 * loads a group's input as two words in the filter's pipelined run of loads instead of one and two
 * SXTB16 (34 estimated cycles a group instead of 35) and needs no last partial group per block;
 * widening costs about 7 cycles a group, so fewer blocks would not repay it. */
#define DSP_FC_WIDENED_X_MAX 256

static EDGEC_NOINLINE void dsp_fc_blocks_widening_x(dsp_fc_run *run, int32_t input_size)
{
    int32_t pairs[2 * ((input_size + 3) / 4)]; /* sized to the row: the stack holds only what it needs */
    const int8_t *const x = run->x;
    int32_t g = 0;
    for (; g < input_size / 4; g++) {
        int32_t word;
        memcpy(&word, x + 4 * g, 4);
        pairs[2 * g] = __sxtb16(word);
        pairs[2 * g + 1] = edgec_sxtb16_ror8(word);
    }
    if ((input_size & 3) != 0) {
        pairs[2 * g] = __sxtb16(run->tail);
        pairs[2 * g + 1] = edgec_sxtb16_ror8(run->tail);
        g++;
    }
    run->x = (const int8_t *)pairs;
    run->x_end = (const int8_t *)(pairs + 2 * g);
    run->has_tail = 0;
    dsp_fc_blocks_int8_widened_x(run);
}

/* Runs the whole blocks of input row x through dsp_fc_blocks_int8 (blocks of 6; its input widened
 * first up to DSP_FC_WIDENED_X_MAX) or _wide (of 4); returns their outputs' count. `run` holds the
 * per-call fields. */
static int32_t dsp_fc_whole_blocks(dsp_fc_run *run, const int8_t *x, int32_t input_size, int32_t whole,
                                   const int8_t *packed_filter, const int32_t *folded_bias, const int32_t *multiplier,
                                   const int32_t *shift, int8_t *y, int wide)
{
    uint32_t tail = 0;
    for (int32_t j = input_size - 1; j >= (input_size & ~3); j--) { /* little-endian: byte j % 4 */
        tail = tail << 8 | (uint8_t)x[j];
    }
    run->x = x;
    run->x_end = x + (input_size & ~3);
    run->filter = packed_filter;
    run->bias = folded_bias;
    run->multiplier = multiplier;
    run->shift = shift;
    run->y = y;
    run->y_end = y + whole;
    run->tail = (int32_t)tail;
    run->has_tail = (input_size & 3) != 0;
    if (wide) {
        dsp_fc_blocks_wide(run);
    } else if (input_size <= DSP_FC_WIDENED_X_MAX && whole >= 48) {
        dsp_fc_blocks_widening_x(run, input_size);
    } else {
        dsp_fc_blocks_int8(run);
    }
    return whole;
}
#endif

/* requantize(acc) + offset of output o by the short form, saturated to int8. */
static inline int32_t dsp_fc_output_short(int32_t acc, const edgec_fully_connected_s8_desc *desc, int32_t quant_index,
                                          int32_t round_base)
{
    const edgec_dsp_requant q =
        edgec_dsp_requant_make(desc->multiplier[quant_index], desc->shift[quant_index], round_base);
    return edgec_dsp_requantize_ssat8(acc, q);
}

/*
 * The output stage of a block of up to 6 outputs, `valid` of them real. quant_step 0: one
 * (multiplier, shift) for all outputs. short_requant: every pair admits the short form. Not
 * inlined, for the same reason as dsp_mac_rows.
 */
static __attribute__((noinline)) void dsp_fc_output_block(const int32_t sums[6], int32_t valid,
                                                          const edgec_fully_connected_s8_desc *desc, int32_t quant_step,
                                                          int32_t o, int short_requant, edgec_output_stage stage,
                                                          int8_t *y)
{
    if (short_requant && valid == 4) {
        const int32_t round_base = edgec_dsp_round_base(stage.offset);
        const uint32_t packed =
            edgec_dsp_pack_s8x4(dsp_fc_output_short(sums[0], desc, o * quant_step, round_base),
                                dsp_fc_output_short(sums[1], desc, (o + 1) * quant_step, round_base),
                                dsp_fc_output_short(sums[2], desc, (o + 2) * quant_step, round_base),
                                dsp_fc_output_short(sums[3], desc, (o + 3) * quant_step, round_base));
        const uint32_t clamped = edgec_dsp_clamp_s8x4(packed, edgec_dsp_bytes(stage.lo + stage.offset),
                                                      edgec_dsp_bytes(stage.hi + stage.offset));
        memcpy(y + o, &clamped, 4);
        return;
    }
    for (int32_t i = 0; i < valid; i++) {
        const int32_t q = (o + i) * quant_step;
        y[o + i] = edgec_requantize_s8(sums[i], desc->multiplier[q], desc->shift[q], stage);
    }
}

/* The rows of the filter's block starting at output o: whole blocks of `block_rows`, then (int8,
 * blocks of 6) a last block of the rest laid out as 2, 4 or 6 rows (wide: 4). */
static int32_t dsp_fc_block_rows(int32_t o, int32_t output_size, int32_t block_rows)
{
    const int32_t rest = output_size - o;
    return rest >= block_rows || block_rows == 4 ? block_rows : (rest + 1) / 2 * 2;
}

/* edgec_fully_connected_s8_dsp and _wide: packed_filter holds int8 taps in blocks of 6 rows, or
 * with `wide` int16 taps in blocks of 4. */
static edgec_status dsp_fc(const edgec_fully_connected_s8_desc *desc, const int8_t *input, int8_t *output, int wide)
{
    if (!packed_fc_args_valid(desc, input, output)) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t batches = desc->batches, input_size = desc->input_size, output_size = desc->output_size;
    const int8_t *const packed_filter = desc->filter;
    const int32_t *const folded_bias = desc->bias;
    const int32_t row_bytes = (wide ? 8 : 4) * ((input_size + 3) / 4); /* a filter row's, laid out */
    const int32_t block_rows = wide ? 4 : 6;
    const int32_t quant_step = desc->per_channel ? 1 : 0;
    const int short_requant =
        edgec_dsp_requant_all_short(desc->multiplier, desc->shift, desc->per_channel ? output_size : 1);
    const edgec_output_stage stage = edgec_output_stage_make(desc->output_offset, desc->act_min, desc->act_max);

    /* The assembly routine's per-call fields; per-tensor quantization repeats the one multiplier
     * and shift for the outputs of a block (quant_step 0). */
#if EDGEC_UNALIGNED_ASM
    dsp_fc_run run;
    int32_t m6[6], s6[6];
    for (int32_t i = 0; i < 6; i++) {
        m6[i] = desc->multiplier[0];
        s6[i] = desc->shift[0];
    }
    run.quant_step = desc->per_channel ? 4 * block_rows : 0;
    run.round_base = edgec_dsp_round_base(stage.offset);
    run.lows = edgec_dsp_bytes(stage.lo + stage.offset);
    run.highs = edgec_dsp_bytes(stage.hi + stage.offset);
#endif

    for (int32_t b = 0; b < batches; b++) {
        const int8_t *filter = packed_filter;
        int32_t o = 0;
#if EDGEC_UNALIGNED_ASM
        if (short_requant && output_size >= block_rows) {
            o = dsp_fc_whole_blocks(&run, input + b * input_size, input_size, output_size / block_rows * block_rows,
                                    packed_filter, folded_bias, desc->per_channel ? desc->multiplier : m6,
                                    desc->per_channel ? desc->shift : s6, output + b * output_size, wide);
            filter += row_bytes * o;
        }
#endif
        while (o < output_size) {
            const int32_t rows = dsp_fc_block_rows(o, output_size, block_rows);
            const int32_t valid = EDGEC_MIN(rows, output_size - o); /* the rest are zero rows */
            int32_t sums[6] = { 0, 0, 0, 0, 0, 0 };
            memcpy(sums, folded_bias + o, (size_t)valid * sizeof(int32_t));
            const dsp_fc_micro_kernel mac = wide        ? (valid <= 2 ? dsp_mac_2x1_wide : dsp_mac_4x1_wide)
                                            : rows == 6 ? dsp_mac_6x1_int8
                                            : rows == 4 ? dsp_mac_4x1_int8
                                                        : dsp_mac_2x1_int8;
            mac(filter, input + b * input_size, input_size, sums);
            dsp_fc_output_block(sums, valid, desc, quant_step, o, short_requant, stage, output + b * output_size);
            o += rows;
            filter += row_bytes * rows;
        }
    }
    return EDGEC_OK;
}

edgec_status edgec_fully_connected_s8_dsp(const edgec_fully_connected_s8_desc *desc, const int8_t *input,
                                          int8_t *output)
{
    return dsp_fc(desc, input, output, 0);
}

edgec_status edgec_fully_connected_s8_dsp_wide(const edgec_fully_connected_s8_desc *desc, const int8_t *input,
                                               int8_t *output)
{
    return dsp_fc(desc, input, output, 1);
}

#endif /* __ARM_FEATURE_DSP */

/* ==== Helium: 4 outputs per VMLADAVA micro-kernel step ======================================= */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)

/*
 * The micro-kernel: four outputs' dot products with the input. Per group of 16 inputs, the
 * block's 64 filter bytes (16 per output) are each loaded once: 64 MACs in 5 loads and 4
 * VMLADAVA. The last partial group reads the input predicated (zeros past its end; the filter
 * is zero there). The sums wrap modulo 2^32, as the golden kernel's int32 accumulator.
 */
static int32x4_t mve_mac_4x1(const int8_t *filter, const int8_t *x, int32_t n)
{
    int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int32_t i = 0; i < n; i += 16, filter += 64) {
        const int8x16_t xv = vldrbq_z_s8(x + i, vctp8q((uint32_t)(n - i)));
        s0 = vmladavaq_s8(s0, vldrbq_s8(filter), xv);
        s1 = vmladavaq_s8(s1, vldrbq_s8(filter + 16), xv);
        s2 = vmladavaq_s8(s2, vldrbq_s8(filter + 32), xv);
        s3 = vmladavaq_s8(s3, vldrbq_s8(filter + 48), xv);
    }
    int32x4_t sums = vdupq_n_s32(s0);
    sums = vsetq_lane_s32(s1, sums, 1);
    sums = vsetq_lane_s32(s2, sums, 2);
    return vsetq_lane_s32(s3, sums, 3);
}

edgec_status edgec_fully_connected_s8_mve(const edgec_fully_connected_s8_desc *desc, const int8_t *input,
                                          int8_t *output)
{
    if (!packed_fc_args_valid(desc, input, output)) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t batches = desc->batches, input_size = desc->input_size, output_size = desc->output_size;
    const int8_t *const packed_filter = desc->filter;
    const int32_t *const folded_bias = desc->bias;
    const int32_t block_bytes = 64 * ((input_size + 15) / 16);
    const edgec_output_stage stage = edgec_output_stage_make(desc->output_offset, desc->act_min, desc->act_max);
    int32x4_t m = vdupq_n_s32(desc->multiplier[0]);
    int32x4_t shift = vdupq_n_s32(desc->shift[0]);

    for (int32_t b = 0; b < batches; b++) {
        const int8_t *filter = packed_filter;
        int8_t *y = output + b * output_size;
        for (int32_t o = 0; o < output_size; o += 4, filter += block_bytes) {
            const mve_pred16_t lanes = vctp32q((uint32_t)(output_size - o));
            if (desc->per_channel) {
                m = vldrwq_z_s32(desc->multiplier + o, lanes);
                shift = vldrwq_z_s32(desc->shift + o, lanes);
            }
            int32x4_t acc = vaddq_s32(mve_mac_4x1(filter, input + b * input_size, input_size),
                                      vldrwq_z_s32(folded_bias + o, lanes));
            acc = edgec_mve_output(edgec_mve_requantize(acc, m, shift), stage);
            vstrbq_p_s32(y + o, acc, lanes);
        }
    }
    return EDGEC_OK;
}

#endif /* __ARM_FEATURE_MVE */
