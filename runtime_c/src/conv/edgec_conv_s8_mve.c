/*
 * edgec_conv_s8_mve -- the int8 convolution on cores with Helium (MVE). Golden kernel:
 * edgec.ops.conv.conv2d_s8; the portable reference is edgec_conv_s8.c, whose header comment
 * describes the packed filter and folded bias.
 */
#include "edgec_nn.h"

/* The three-row direct-read routines are one asm statement longer than the 4095 characters C99
 * promises a string literal; the assembler takes any length, GCC does not count asm strings, and
 * clang's -pedantic does. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Woverlength-strings"
#endif

/* ==== Helium: 4 channels x 2 pixels per VMLADAVA micro-kernel step ============================ */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)

#include "edgec_conv_s8_packed.h"

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

/* The block routines (the variants' list below says what each serves). */
#define MVE_BLOCKS_VARIANT(name, groups, output) \
    static void name(mve_block_run *run)         \
    {                                            \
        MVE_BLOCKS_4X2(groups, output);          \
    }
MVE_BLOCKS_VARIANT(mve_blocks_4x2_odd, MVE_GROUPS_ODD, MVE_OUTPUT)
MVE_BLOCKS_VARIANT(mve_blocks_4x2_even, MVE_GROUPS_EVEN, MVE_OUTPUT)
MVE_BLOCKS_VARIANT(mve_blocks_4x2_odd_right, MVE_GROUPS_ODD, MVE_OUTPUT_RIGHT)
MVE_BLOCKS_VARIANT(mve_blocks_4x2_even_right, MVE_GROUPS_EVEN, MVE_OUTPUT_RIGHT)
MVE_BLOCKS_VARIANT(mve_blocks_4x2_odd_strict, MVE_GROUPS_ODD, MVE_OUTPUT_STRICT)
MVE_BLOCKS_VARIANT(mve_blocks_4x2_even_strict, MVE_GROUPS_EVEN, MVE_OUTPUT_STRICT)
MVE_BLOCKS_VARIANT(mve_blocks_4x2_odd_strict_quads, MVE_GROUPS_ODD_QUADS, MVE_OUTPUT_STRICT)
MVE_BLOCKS_VARIANT(mve_blocks_4x2_even_strict_quads, MVE_GROUPS_EVEN_QUADS, MVE_OUTPUT_STRICT)

/*
 * Direct reads: a run of pixel pairs whose receptive fields lie inside the input and need no
 * im2col copy. Each field is `runs` (1 or 3) runs of run_groups * 16 bytes, `skip` bytes apart
 * after each run's end (row_step - run_len): a window's rows of KW * C_in bytes when that is a
 * multiple of 16, or a 1x1 stride-1 layer's pixel (C_in bytes, read on to whole groups: the
 * filter is zero there). Pixel b's field is a fixed distance after pixel a's, and each pair's
 * fields pair_step bytes after the previous pair's. The blocks are mve_blocks_4x2's (4 channels,
 * biases, output stage on one vector per pixel); after a pair's last block the assembly resets
 * the filter and the per-channel pointers and moves on to the next pair itself.
 */
typedef struct {
    const int8_t *row_a;        /*  0: this pair's fields */
    const int8_t *row_b;        /*  4 */
    int32_t pairs_per_run;      /*  8: group pairs per run after its odd group; 1 or 3 groups, 3 runs: skip */
    int32_t skip;               /* 12: from a run's end to the next run */
    const int32_t *multiplier;  /* 16 */
    const int32_t *shift;       /* 20 */
    int8_t *out_a;              /* 24 */
    int8_t *out_b;              /* 28 */
    int32_t blocks;             /* 32: >= 1 */
    int32_t offset;             /* 36 */
    const int32_t *bias;        /* 40: the next block's */
    int32_t pairs;              /* 44: pixel pairs left, >= 1 */
    int32x4_t lo;               /* 48: act_min - offset in every lane */
    int32x4_t hi;               /* 64: act_max - offset */
    const int8_t *filter0;      /* 80: what a pair starts from */
    const int32_t *bias0;       /* 84 */
    const int32_t *multiplier0; /* 88 */
    const int32_t *shift0;      /* 92 */
    int32_t blocks0;            /* 96 */
    int32_t pair_step;          /* 100: from one pair's fields to the next's */
    int32_t out_c;              /* 104 */
    int32_t copy_bytes;         /* 108: copied from src to row_a at each pair's start, or 0 */
    const int8_t *src;          /* 112 */
    int32_t src_step;           /* 116 */
} mve_direct_run;

typedef char mve_direct_run_layout[offsetof(mve_direct_run, skip) == 12 && offsetof(mve_direct_run, pairs) == 44 &&
                                           offsetof(mve_direct_run, lo) == 48 &&
                                           offsetof(mve_direct_run, filter0) == 80 &&
                                           offsetof(mve_direct_run, src) == 112
                                       ? 1
                                       : -1];

/* The runs of a block: each one mve_blocks_4x2's groups (MVE_GROUPS_ODD/_EVEN, r9 = the run's
 * group pairs after its odd group), which leave r5 at the run's end and r3 16 bytes past it (the
 * preloaded next group: the driver keeps that read inside the input); then both move on by skip. */
#define MVE_DIRECT_SKIP \
    "ldr r9, [%[run], #12]\n\tadd r5, r5, r9\n\tsub r9, r9, #16\n\tadd r3, r3, r9\n\tldr r9, [%[run], #8]\n\t"
#define MVE_DIRECT_RUNS3(groups) groups MVE_DIRECT_SKIP groups MVE_DIRECT_SKIP groups
/* one group per run counts nothing: r9 holds skip itself */
#define MVE_DIRECT_SKIP_SINGLE "add r5, r5, r9\n\tadd r3, r3, r9\n\tsub r3, r3, #16\n\t"
#define MVE_DIRECT_RUNS3_SINGLE MVE_GROUP MVE_DIRECT_SKIP_SINGLE MVE_GROUP MVE_DIRECT_SKIP_SINGLE MVE_GROUP
/* ... and so do three (a 3x3 window over 16 channels): one group, then one pair, unrolled */
#define MVE_DIRECT_TRIPLE MVE_GROUP MVE_PAIR_BODY("")
#define MVE_DIRECT_RUNS3_TRIPLE \
    MVE_DIRECT_TRIPLE MVE_DIRECT_SKIP_SINGLE MVE_DIRECT_TRIPLE MVE_DIRECT_SKIP_SINGLE MVE_DIRECT_TRIPLE

/* mve_blocks_4x2's block loop over a run of pixel pairs: after a pair's last block, the next
 * pair's fields, outputs, and the filter and per-channel pointers from their start. */
#define MVE_DIRECT_4X2(runs, output)                                                                               \
    __asm__ volatile("vldrw.u32 q6, [%[run], #48]\n\t"                                                             \
                     "vldrw.u32 q7, [%[run], #64]\n\t"                                                             \
                     "ldr r1, [%[run], #80]\n"                                                                     \
                     "5:\n\t"                                                                                      \
                     "ldr r0, [%[run], #108]\n\t"                                                                  \
                     "ldr r2, [%[run], #112]\n\t"                                                                  \
                     "ldr r3, [%[run]]\n\t"                                                                        \
                     "wlstp.8 lr, r0, 6f\n"                                                                        \
                     "7:\n\t"                                                                                      \
                     "vldrb.u8 q0, [r2], #16\n\t"                                                                  \
                     "vstrb.8 q0, [r3], #16\n\t"                                                                   \
                     "letp lr, 7b\n"                                                                               \
                     "6:\n"                                                                                        \
                     "2:\n\t"                                                                                      \
                     "ldr r9, [%[run], #40]\n\t"                                                                   \
                     "ldm r9, {r8, r10, r12, lr}\n\t"                                                              \
                     "ldm r9!, {r0, r2, r4, r6}\n\t"                                                               \
                     "str r9, [%[run], #40]\n\t"                                                                   \
                     "ldm %[run], {r3, r5, r9}\n\t" runs "vmov q0[2], q0[0], r0, r4\n\t"                           \
                     "vmov q0[3], q0[1], r2, r6\n\t"                                                               \
                     "add r9, %[run], #16\n\t"                                                                     \
                     "ldm r9, {r0, r2, r3, r4, r5, r6}\n\t"                                                        \
                     "vldrw.u32 q2, [r0], #16\n\t"                                                                 \
                     "vmov q1[2], q1[0], r8, r12\n\t"                                                              \
                     "vldrw.u32 q3, [r2], #16\n\t"                                                                 \
                     "vmov q1[3], q1[1], r10, lr\n\t" output "subs r5, r5, #1\n\t"                                 \
                     "stm r9, {r0, r2, r3, r4, r5}\n\t"                                                            \
                     "bne 2b\n\t"                                                                                  \
                     "ldr r0, [%[run], #44]\n\t"                                                                   \
                     "subs r0, r0, #1\n\t"                                                                         \
                     "beq 9f\n\t"                                                                                  \
                     "str r0, [%[run], #44]\n\t"                                                                   \
                     "add r0, %[run], #80\n\t"                                                                     \
                     "ldm r0, {r0, r1, r2, r3, r6, r8, r9}\n\t"                                                    \
                     "ldrd r10, r12, [%[run], #112]\n\t"                                                           \
                     "add r10, r10, r12\n\t"                                                                       \
                     "str r10, [%[run], #112]\n\t"                                                                 \
                     "ldrd r10, r12, [%[run]]\n\t"                                                                 \
                     "ldrd r4, r5, [%[run], #24]\n\t"                                                              \
                     "add r10, r10, r8\n\t"                                                                        \
                     "add r12, r12, r8\n\t"                                                                        \
                     "add r4, r4, r9\n\t"                                                                          \
                     "add r5, r5, r9\n\t"                                                                          \
                     "strd r10, r12, [%[run]]\n\t"                                                                 \
                     "str r1, [%[run], #40]\n\t"                                                                   \
                     "add r8, %[run], #16\n\t"                                                                     \
                     "stm r8, {r2, r3, r4, r5, r6}\n\t"                                                            \
                     "mov r1, r0\n\t"                                                                              \
                     "b 5b\n"                                                                                      \
                     "9:"                                                                                          \
                     :                                                                                             \
                     : [run] "r"(run)                                                                              \
                     : "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r8", "r9", "r10", "r12", "lr", "q0", "q1", "q2", \
                       "q3", "q4", "q5", "q6", "q7", "memory", "cc")

#define MVE_DIRECT_VARIANT(name, runs, output) \
    static void name(mve_direct_run *run)      \
    {                                          \
        MVE_DIRECT_4X2(runs, output);          \
    }
MVE_DIRECT_VARIANT(mve_direct_4x2_odd_strict, MVE_GROUPS_ODD, MVE_OUTPUT_STRICT)
MVE_DIRECT_VARIANT(mve_direct_4x2_even_strict, MVE_GROUPS_EVEN, MVE_OUTPUT_STRICT)
MVE_DIRECT_VARIANT(mve_direct_4x2_odd_runs3_strict, MVE_DIRECT_RUNS3(MVE_GROUPS_ODD), MVE_OUTPUT_STRICT)
MVE_DIRECT_VARIANT(mve_direct_4x2_even_runs3_strict, MVE_DIRECT_RUNS3(MVE_GROUPS_EVEN), MVE_OUTPUT_STRICT)
/* one group per run (a 16-channel pixel, a padded stem row): no group pairs to count */
MVE_DIRECT_VARIANT(mve_direct_4x2_single_strict, MVE_GROUP, MVE_OUTPUT_STRICT)
MVE_DIRECT_VARIANT(mve_direct_4x2_single_runs3_strict, MVE_DIRECT_RUNS3_SINGLE, MVE_OUTPUT_STRICT)
MVE_DIRECT_VARIANT(mve_direct_4x2_triple_runs3_strict, MVE_DIRECT_RUNS3_TRIPLE, MVE_OUTPUT_STRICT)
MVE_DIRECT_VARIANT(mve_direct_4x2_even_strict_quads, MVE_GROUPS_EVEN_QUADS, MVE_OUTPUT_STRICT)
MVE_DIRECT_VARIANT(mve_direct_4x2_even_runs3_strict_quads, MVE_DIRECT_RUNS3(MVE_GROUPS_EVEN_QUADS), MVE_OUTPUT_STRICT)
#endif

/*
 * The variants, in one place. A layer runs at most one block routine and one direct-read routine,
 * both fixed by its shape and shifts (mve_conv and mve_direct_setup choose them by these ids;
 * edgec.ops.conv.mve_routines makes the same choice at compile time): the generated code names
 * them to edgec_conv_s8_mve_with, so a model links only the routines its layers run, while
 * edgec_conv_s8_mve takes them all. An unoptimised build has no assembly: its routines are ids.
 */
enum {
    /* blocks (mve_blocks_4x2_*): every full block of 4 channels of an im2col'd pixel pair, by the
     * groups of 16 taps per block (odd: one group first, then pairs) and the output stage */
    MVE_BLOCKS_ODD,               /* some shift > 0: the saturating left shift first */
    MVE_BLOCKS_EVEN,              /* likewise */
    MVE_BLOCKS_ODD_RIGHT,         /* every shift <= 0: five instructions fewer per block */
    MVE_BLOCKS_EVEN_RIGHT,        /* likewise */
    MVE_BLOCKS_ODD_STRICT,        /* every shift < 0: two fewer again */
    MVE_BLOCKS_EVEN_STRICT,       /* likewise */
    MVE_BLOCKS_ODD_STRICT_QUADS,  /* ... and at least two group pairs: two pairs per iteration */
    MVE_BLOCKS_EVEN_STRICT_QUADS, /* likewise */
    /* direct reads (mve_direct_4x2_*, every shift < 0): fields read in place, by the runs per
     * field (1: a 1xK window or a 1x1 stride-1 layer's pixel; 3: a 3x3 window's rows) and the
     * groups of 16 taps per run */
    MVE_DIRECT_ODD,              /* one run of an odd number of groups (3 or more) */
    MVE_DIRECT_EVEN,             /* one run of 2 groups */
    MVE_DIRECT_ODD_RUNS3,        /* 3 runs of an odd number of groups (5 or more) */
    MVE_DIRECT_EVEN_RUNS3,       /* 3 runs of 2 groups */
    MVE_DIRECT_SINGLE,           /* one run of one group (a 16-channel pixel): no pairs to count */
    MVE_DIRECT_SINGLE_RUNS3,     /* 3 runs of one group (16-tap or padded stem rows) */
    MVE_DIRECT_TRIPLE_RUNS3,     /* 3 runs of 3 groups (a 3x3 window over 16 channels), unrolled */
    MVE_DIRECT_EVEN_QUADS,       /* one run of 4, 6, ... groups: two pairs per iteration */
    MVE_DIRECT_EVEN_RUNS3_QUADS, /* 3 runs of 4, 6, ... groups: likewise */
    MVE_ROUTINES,
    MVE_EVERY /* not a routine: every one, from `every` (edgec_conv_s8_mve) */
};

struct edgec_conv_mve_routine {
    int32_t id;
#if defined(__OPTIMIZE__)
    void (*blocks)(mve_block_run *run);  /* a block routine's */
    void (*direct)(mve_direct_run *run); /* a direct-read routine's */
#endif
    const edgec_conv_mve_routine *const *every; /* MVE_EVERY's: the routines by id */
};

#if defined(__OPTIMIZE__)
#define MVE_ROUTINE(id, blocks, direct, every) \
    {                                          \
        id, blocks, direct, every              \
    }
#else
#define MVE_ROUTINE(id, blocks, direct, every) \
    {                                          \
        id, every                              \
    }
#endif
#define MVE_BLOCKS(id, routine) MVE_ROUTINE(id, routine, NULL, NULL)
#define MVE_DIRECT(id, routine) MVE_ROUTINE(id, NULL, routine, NULL)

const edgec_conv_mve_routine edgec_conv_mve_blocks_odd = MVE_BLOCKS(MVE_BLOCKS_ODD, mve_blocks_4x2_odd);
const edgec_conv_mve_routine edgec_conv_mve_blocks_even = MVE_BLOCKS(MVE_BLOCKS_EVEN, mve_blocks_4x2_even);
const edgec_conv_mve_routine edgec_conv_mve_blocks_odd_right =
    MVE_BLOCKS(MVE_BLOCKS_ODD_RIGHT, mve_blocks_4x2_odd_right);
const edgec_conv_mve_routine edgec_conv_mve_blocks_even_right =
    MVE_BLOCKS(MVE_BLOCKS_EVEN_RIGHT, mve_blocks_4x2_even_right);
const edgec_conv_mve_routine edgec_conv_mve_blocks_odd_strict =
    MVE_BLOCKS(MVE_BLOCKS_ODD_STRICT, mve_blocks_4x2_odd_strict);
const edgec_conv_mve_routine edgec_conv_mve_blocks_even_strict =
    MVE_BLOCKS(MVE_BLOCKS_EVEN_STRICT, mve_blocks_4x2_even_strict);
const edgec_conv_mve_routine edgec_conv_mve_blocks_odd_strict_quads =
    MVE_BLOCKS(MVE_BLOCKS_ODD_STRICT_QUADS, mve_blocks_4x2_odd_strict_quads);
const edgec_conv_mve_routine edgec_conv_mve_blocks_even_strict_quads =
    MVE_BLOCKS(MVE_BLOCKS_EVEN_STRICT_QUADS, mve_blocks_4x2_even_strict_quads);
const edgec_conv_mve_routine edgec_conv_mve_direct_odd = MVE_DIRECT(MVE_DIRECT_ODD, mve_direct_4x2_odd_strict);
const edgec_conv_mve_routine edgec_conv_mve_direct_even = MVE_DIRECT(MVE_DIRECT_EVEN, mve_direct_4x2_even_strict);
const edgec_conv_mve_routine edgec_conv_mve_direct_odd_runs3 =
    MVE_DIRECT(MVE_DIRECT_ODD_RUNS3, mve_direct_4x2_odd_runs3_strict);
const edgec_conv_mve_routine edgec_conv_mve_direct_even_runs3 =
    MVE_DIRECT(MVE_DIRECT_EVEN_RUNS3, mve_direct_4x2_even_runs3_strict);
const edgec_conv_mve_routine edgec_conv_mve_direct_single = MVE_DIRECT(MVE_DIRECT_SINGLE, mve_direct_4x2_single_strict);
const edgec_conv_mve_routine edgec_conv_mve_direct_single_runs3 =
    MVE_DIRECT(MVE_DIRECT_SINGLE_RUNS3, mve_direct_4x2_single_runs3_strict);
const edgec_conv_mve_routine edgec_conv_mve_direct_triple_runs3 =
    MVE_DIRECT(MVE_DIRECT_TRIPLE_RUNS3, mve_direct_4x2_triple_runs3_strict);
const edgec_conv_mve_routine edgec_conv_mve_direct_even_quads =
    MVE_DIRECT(MVE_DIRECT_EVEN_QUADS, mve_direct_4x2_even_strict_quads);
const edgec_conv_mve_routine edgec_conv_mve_direct_even_runs3_quads =
    MVE_DIRECT(MVE_DIRECT_EVEN_RUNS3_QUADS, mve_direct_4x2_even_runs3_strict_quads);

#if defined(__OPTIMIZE__)
/* The routine `id` if `named` is it or every routine, else NULL (the caller named another). */
static const edgec_conv_mve_routine *mve_routine(const edgec_conv_mve_routine *named, int32_t id)
{
    if (named == NULL) {
        return NULL;
    }
    return named->id == MVE_EVERY ? named->every[id] : named->id == id ? named : NULL;
}
#endif

/*
 * A 3x3 window whose rows are 8 to 15 bytes (KW * C_in: an RGB or two-channel stem) over a C_out
 * that is a multiple of 4 has each row padded to 16 taps in the packed filter
 * (edgec.ops.conv.mve_padded_runs: the same rule), so that a field inside the input is three
 * 16-byte reads, whatever follows each row (the filter is zero there). The im2col copies of such
 * a layer place the rows 16 bytes apart. (Other C_out would pay the padding without the reads.)
 */
static int mve_padded_runs(const conv_window *win, int32_t out_c)
{
    return win->k_h == 3 && win->run_len >= 8 && win->run_len < 16 && out_c % 4 == 0;
}

/* im2col_row with the window's sizes held in locals: copy_run's assembly clobbers memory, so
 * read through `win` they would be reloaded for every filter row. */
static void mve_im2col_row(int8_t *row, const conv_window *win, pixel_cursor px, int padded)
{
    const int8_t *src = window_inside(win, px);
    const int32_t run_len = win->run_len;
    if (src == NULL) {
        im2col_pixel(row, &int8_row, win, px);
        if (padded) { /* the rows from run_len bytes apart to 16, the last first */
            copy_run(row + 32, row + 2 * run_len, run_len);
            copy_run(row + 16, row + run_len, run_len); /* one 16-byte load, then the store */
        }
        return;
    }
    const int32_t k_h = win->k_h;
    const int32_t dst_step = padded ? 16 : run_len;
    const int32_t row_step = win->row_step;
    for (int32_t ky = 0; ky < k_h; ky++, row += dst_step, src += row_step) {
        copy_run(row, src, run_len);
    }
}

#if defined(__OPTIMIZE__)
/* How a layer's fields can be read in place (mve_direct_4x2), fixed per layer; runs == 0: never. */
typedef struct {
    int32_t runs;       /* 1 or 3 */
    int contiguous;     /* a 1x1 stride-1 unpadded layer: pixel p's field at input + p * C_in, which
                           the assembly copies, a pair (2 * C_in bytes) at a time, into scratch */
    int32_t b_step;     /* from pixel a's field to pixel b's */
    uintptr_t in_end;   /* the input's end: no read may pass it */
    uintptr_t out_end;  /* the output's end */
    int32_t field_span; /* from pixel a's field start to the end of the pair's reads */
    int32_t ahead;      /* output pixels stored while a pair's fields are read: 2, or 0 if copied */
} mve_direct_layer;

static mve_direct_layer mve_direct_layer_make(const conv_window *win, const edgec_dims *input_dims,
                                              const edgec_dims *output_dims, const int8_t *output)
{
    const edgec_conv_params *p = win->params;
    const int32_t c_in = input_dims->c;
    mve_direct_layer d;
    d.contiguous = win->k_h == 1 && win->k_w == 1 && p->stride_h == 1 && p->stride_w == 1 && p->pad_top == 0 &&
                   p->pad_left == 0 && output_dims->h == input_dims->h && output_dims->w == input_dims->w;
    d.runs = 0;
    if (output_dims->c % 4 == 0) {
        if (d.contiguous) {
            d.runs = 1;
        } else if ((win->run_len % 16 == 0 || mve_padded_runs(win, output_dims->c)) &&
                   (win->k_h == 1 || win->k_h == 3) && win->inside_x.last > 0) {
            d.runs = win->k_h;
        }
    }
    d.b_step = d.contiguous ? c_in : p->stride_w * c_in;
    d.ahead = d.contiguous ? 0 : 2;
    d.in_end = (uintptr_t)(win->input + input_dims->n * input_dims->h * win->in_row_len);
    d.out_end = (uintptr_t)(output + output_dims->n * output_dims->h * output_dims->w * output_dims->c);
    /* pixel a reads 16 bytes past its last run, pixel b up to its last run's end; a copy 2 * C_in */
    const int32_t run_reads = mve_padded_runs(win, output_dims->c) ? 16 : win->run_len;
    d.field_span = d.contiguous ? 2 * c_in : (win->k_h - 1) * win->row_step + run_reads + EDGEC_MAX(16, d.b_step);
    return d;
}

/* px moved on by n pixels */
static void pixel_skip(pixel_cursor *px, int32_t n, const edgec_dims *output_dims)
{
    const int32_t ox = px->ox + n;
    const int32_t oy = px->oy + ox / output_dims->w;
    px->ox = ox % output_dims->w;
    px->b += oy / output_dims->h;
    px->oy = oy % output_dims->h;
}

/*
 * How many pixel pairs from pixel p (at px, its field at *field) mve_direct_4x2 may run: both
 * pixels of each inside the input (in one output row, unless the layer is contiguous), no read
 * past the input's end, and -- when the output overlaps the input (in place) -- no output byte
 * stored over input a pair still reads (pair j's reads start at its first field byte, and the
 * output ahead of it ends d->ahead pixels after the pair's first; both grow linearly with j, so
 * the first and last pair decide).
 */
static int32_t mve_direct_pairs(const mve_direct_layer *d, const conv_window *win, pixel_cursor px, int32_t p,
                                int32_t pixels, const int8_t *output, int32_t out_c, const int8_t **field)
{
    int32_t n;
    const int8_t *start;
    if (d->contiguous) {
        n = (pixels - p) / 2;
        start = win->input + p * win->run_len;
    } else {
        start = window_inside(win, px);
        n = start == NULL ? 0 : (win->inside_x.last - px.ox) / 2;
    }
    const int32_t pair_step = 2 * d->b_step;
    while (n > 0 && (uintptr_t)(start + (n - 1) * pair_step) + d->field_span > d->in_end) {
        n--;
    }
    const uintptr_t out0 = (uintptr_t)(output + p * out_c);
    const uintptr_t in0 = (uintptr_t)win->input;
    if (n > 0 && !(d->out_end <= in0 || out0 >= d->in_end)) {
        const int32_t last = n - 1;
        if (out0 + (uintptr_t)d->ahead * out_c > (uintptr_t)start ||
            out0 + (uintptr_t)(2 * last + d->ahead) * out_c > (uintptr_t)(start + last * pair_step)) {
            n = 0;
        }
    }
    *field = start;
    return n;
}

/* A layer's direct-read state (runs == 0: none); out of line, so that a layer without keeps
 * mve_conv's pair loop as it was. */
typedef struct {
    int32_t runs;
    mve_direct_layer layer;
    mve_direct_run run;
    void (*blocks)(mve_direct_run *);
    const conv_window *win;
    const edgec_dims *output_dims;
    int8_t *output;
    int8_t *scratch_row; /* where a contiguous layer's pairs are copied */
    pixel_cursor px;     /* mve_direct_step's pixel after the pairs it ran */
} mve_direct_state;

static EDGEC_NOINLINE int mve_direct_setup(mve_direct_state *st, const conv_window *win, const edgec_dims *input_dims,
                                           const edgec_dims *output_dims, int8_t *output,
                                           const edgec_per_channel_quant *quant, const int8_t *packed_filter,
                                           const int32_t *folded_bias, const mve_block_run *blocks, int8_t *scratch_row,
                                           const edgec_conv_mve_routine *named)
{
    const mve_direct_layer d = mve_direct_layer_make(win, input_dims, output_dims, output);
    const int32_t k = win->k_h * win->run_len;
    const int32_t run_reads = mve_padded_runs(win, output_dims->c) ? 16 : win->run_len;
    const int32_t run_groups = d.contiguous ? (k + 15) / 16 : run_reads / 16;
    const int quads = run_groups / 2 >= 2 && run_groups % 2 == 0;
    const int single = run_groups == 1;
    const int32_t id = d.runs == 3 ? (single                ? MVE_DIRECT_SINGLE_RUNS3
                                      : run_groups == 3     ? MVE_DIRECT_TRIPLE_RUNS3
                                      : quads               ? MVE_DIRECT_EVEN_RUNS3_QUADS
                                      : run_groups % 2 != 0 ? MVE_DIRECT_ODD_RUNS3
                                                            : MVE_DIRECT_EVEN_RUNS3)
                                   : (single                ? MVE_DIRECT_SINGLE
                                      : quads               ? MVE_DIRECT_EVEN_QUADS
                                      : run_groups % 2 != 0 ? MVE_DIRECT_ODD
                                                            : MVE_DIRECT_EVEN);
    const edgec_conv_mve_routine *const routine = mve_routine(named, id);
    if (d.runs != 0 && routine == NULL) { /* the caller named another direct-read routine, or none */
        return 0;
    }
    st->runs = d.runs;
    st->layer = d;
    st->blocks = routine != NULL ? routine->direct : NULL;
    st->win = win;
    st->output_dims = output_dims;
    st->output = output;
    st->scratch_row = scratch_row;
    mve_direct_run *r = &st->run;
    r->pairs_per_run = (single || run_groups == 3) && d.runs == 3 ? win->row_step - run_reads : run_groups / 2;
    r->offset = blocks->offset;
    r->skip = win->row_step - run_reads;
    r->lo = blocks->lo;
    r->hi = blocks->hi;
    r->filter0 = packed_filter;
    r->bias0 = folded_bias;
    r->multiplier0 = quant->multiplier;
    r->shift0 = quant->shift;
    r->blocks0 = output_dims->c / 4;
    r->pair_step = d.contiguous ? 0 : 2 * d.b_step;
    r->out_c = output_dims->c;
    r->copy_bytes = d.contiguous ? 2 * input_dims->c : 0;
    r->src_step = 2 * d.b_step;
    return 1;
}

/* The pixel pairs from pixel p (at px) run by direct reads, if any: the pixels done (0: none,
 * the caller copies the pair), st->px the pixel after them. */
static EDGEC_NOINLINE int32_t mve_direct_step(mve_direct_state *st, pixel_cursor px, int32_t p, int32_t pixels)
{
    const int32_t out_c = st->output_dims->c;
    const int8_t *field;
    const int32_t n = mve_direct_pairs(&st->layer, st->win, px, p, pixels, st->output, out_c, &field);
    if (n == 0) {
        /* a 1x1 layer's stretch runs from here to its end: none now, none later */
        st->runs = st->layer.contiguous ? 0 : st->runs;
        return 0;
    }
    mve_direct_run *r = &st->run;
    r->row_a = st->layer.contiguous ? st->scratch_row : field;
    r->row_b = r->row_a + st->layer.b_step;
    r->src = field;
    r->bias = r->bias0;
    r->multiplier = r->multiplier0;
    r->shift = r->shift0;
    r->out_a = st->output + p * out_c;
    r->out_b = r->out_a + out_c;
    r->blocks = r->blocks0;
    r->pairs = n;
    st->blocks(r);
    pixel_skip(&px, 2 * n, st->output_dims);
    st->px = px;
    return 2 * n;
}
#endif

static edgec_status mve_conv(const edgec_conv_params *params, const edgec_per_channel_quant *quant,
                             const edgec_dims *input_dims, const int8_t *input, const edgec_dims *filter_dims,
                             const int8_t *packed_filter, const int32_t *folded_bias, const edgec_dims *output_dims,
                             int8_t *output, int8_t *scratch, const edgec_conv_mve_routine *blocks_named,
                             const edgec_conv_mve_routine *direct_named)
{
    if (!packed_conv_args_valid(params, quant, input_dims, input, filter_dims, packed_filter, folded_bias, output_dims,
                                output, scratch)) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t k = filter_dims->h * filter_dims->w * filter_dims->c;
    const conv_window win = conv_window_make(params, input_dims, input, filter_dims, output_dims);
    const int padded = mve_padded_runs(&win, output_dims->c);
    const int32_t groups = padded ? 3 : (k + 15) / 16;
    const int32_t row_len = 16 * groups;
    const int32_t out_c = output_dims->c;
    const int32_t pixels = output_dims->n * output_dims->h * output_dims->w;
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
    const int odd = groups % 2 != 0;
    const int32_t blocks_id = quads                 ? (odd ? MVE_BLOCKS_ODD_STRICT_QUADS : MVE_BLOCKS_EVEN_STRICT_QUADS)
                              : strict_right_shifts ? (odd ? MVE_BLOCKS_ODD_STRICT : MVE_BLOCKS_EVEN_STRICT)
                              : right_shifts_only   ? (odd ? MVE_BLOCKS_ODD_RIGHT : MVE_BLOCKS_EVEN_RIGHT)
                                                    : (odd ? MVE_BLOCKS_ODD : MVE_BLOCKS_EVEN);
    const edgec_conv_mve_routine *const blocks = mve_routine(blocks_named, blocks_id);
    if (out_c >= 4 && blocks == NULL) { /* the caller named another block routine */
        return EDGEC_ARG_ERROR;
    }
    void (*const blocks_4x2)(mve_block_run *) = blocks != NULL ? blocks->blocks : NULL;
    mve_direct_state direct;
    direct.runs = 0;
    if (out_c >= 4 && pixels >= 2 && strict_right_shifts && /* a shift >= 0 keeps the copies */
        !mve_direct_setup(&direct, &win, input_dims, output_dims, output, quant, packed_filter, folded_bias, &run,
                          row_a, direct_named)) {
        return EDGEC_ARG_ERROR;
    }
#else
    (void)blocks_named;
    (void)direct_named;
#endif

    const int32_t taps = padded ? 0 : k;       /* the padded rows' gaps: the filter is zero there too */
    fill_run(row_a + taps, 0, row_len - taps); /* the filter is zero there */
    fill_run(row_b + taps, 0, row_len - taps);
    for (int32_t p = 0; p < pixels; p += 2) {
#if defined(__OPTIMIZE__)
        if (direct.runs != 0) {
            const int32_t done = mve_direct_step(&direct, px, p, pixels);
            if (done > 0) {
                px = direct.px;
                p += done - 2;
                continue;
            }
        }
#endif
        const int has_b = p + 1 < pixels;
        int8_t *out_a = output + p * out_c;
        mve_im2col_row(row_a, &win, px, padded);
        pixel_next(&px, output_dims);
        if (has_b) {
            mve_im2col_row(row_b, &win, px, padded);
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

edgec_status edgec_conv_s8_mve_with(const edgec_conv_desc *desc, const edgec_conv_mve_routine *blocks,
                                    const edgec_conv_mve_routine *direct, const int8_t *input, int8_t *output,
                                    int8_t *scratch)
{
    EDGEC_CONV_ENTRY(desc, mve_conv, desc->filter, desc->bias, input, output, scratch, blocks, direct);
}

/* Every routine: only a program that calls this links them all. */
edgec_status edgec_conv_s8_mve(const edgec_conv_desc *desc, const int8_t *input, int8_t *output, int8_t *scratch)
{
    static const edgec_conv_mve_routine *const table[MVE_ROUTINES] = {
        [MVE_BLOCKS_ODD] = &edgec_conv_mve_blocks_odd,
        [MVE_BLOCKS_EVEN] = &edgec_conv_mve_blocks_even,
        [MVE_BLOCKS_ODD_RIGHT] = &edgec_conv_mve_blocks_odd_right,
        [MVE_BLOCKS_EVEN_RIGHT] = &edgec_conv_mve_blocks_even_right,
        [MVE_BLOCKS_ODD_STRICT] = &edgec_conv_mve_blocks_odd_strict,
        [MVE_BLOCKS_EVEN_STRICT] = &edgec_conv_mve_blocks_even_strict,
        [MVE_BLOCKS_ODD_STRICT_QUADS] = &edgec_conv_mve_blocks_odd_strict_quads,
        [MVE_BLOCKS_EVEN_STRICT_QUADS] = &edgec_conv_mve_blocks_even_strict_quads,
        [MVE_DIRECT_ODD] = &edgec_conv_mve_direct_odd,
        [MVE_DIRECT_EVEN] = &edgec_conv_mve_direct_even,
        [MVE_DIRECT_ODD_RUNS3] = &edgec_conv_mve_direct_odd_runs3,
        [MVE_DIRECT_EVEN_RUNS3] = &edgec_conv_mve_direct_even_runs3,
        [MVE_DIRECT_SINGLE] = &edgec_conv_mve_direct_single,
        [MVE_DIRECT_SINGLE_RUNS3] = &edgec_conv_mve_direct_single_runs3,
        [MVE_DIRECT_TRIPLE_RUNS3] = &edgec_conv_mve_direct_triple_runs3,
        [MVE_DIRECT_EVEN_QUADS] = &edgec_conv_mve_direct_even_quads,
        [MVE_DIRECT_EVEN_RUNS3_QUADS] = &edgec_conv_mve_direct_even_runs3_quads,
    };
    static const edgec_conv_mve_routine every = MVE_ROUTINE(MVE_EVERY, NULL, NULL, table);
    return edgec_conv_s8_mve_with(desc, &every, &every, input, output, scratch);
}

#endif /* __ARM_FEATURE_MVE */
