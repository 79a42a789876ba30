/*
 * edgec_conv_s8_dsp, edgec_conv_s8_dsp_wide -- the int8 convolution on cores with the Arm DSP
 * extension (SMLAD). Golden kernel: edgec.ops.conv.conv2d_s8; the portable reference is
 * edgec_conv_s8.c, whose header comment describes the packed filter and folded bias.
 */
#include "edgec_nn.h"

/* ==== Arm DSP extension: 2 channels x 3 pixels per SMLAD micro-kernel step ==================== */
#if defined(__ARM_FEATURE_DSP)

#include "edgec_conv_s8_packed.h"

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

/* One group: its 4 bytes widened into the pair of words at cols. */
static DSP_ALWAYS_INLINE void dsp_widen_group(int8_t *cols, int32_t x)
{
    const int32_t even = __sxtb16(x);
    const int32_t odd = edgec_sxtb16_ror8(x);
    memcpy(cols, &even, 4);
    memcpy(cols + 4, &odd, 4);
}

static DSP_ALWAYS_INLINE void dsp_widen(int8_t *cols, const int8_t *src, int32_t n)
{
    for (int32_t i = 0; i < n; i += 4, cols += DSP_COLUMN_BYTES) {
        int32_t x;
        memcpy(&x, src + i, 4);
        dsp_widen_group(cols, x);
    }
}

/* dsp_widen four groups a loop iteration: their loads pipeline (Cortex-M4 TRM 3.3.2) and the
 * loop's compare and branch are paid once per 16 bytes (on ResNet-8's 3x3 layers the one-group
 * loop took 11 cycles a group, estimated, a tenth of the layer). For the general path's runs of
 * KW * C_in bytes; the pointwise and stem paths' short runs keep dsp_widen (the extra test cost
 * MobileNet's 8-channel pointwise layer 3 %). */
static DSP_ALWAYS_INLINE void dsp_widen_run(int8_t *cols, const int8_t *src, int32_t n)
{
    int32_t i = 0;
    for (; i + 16 <= n; i += 16, cols += 4 * DSP_COLUMN_BYTES) {
        int32_t x0, x1, x2, x3;
        memcpy(&x0, src + i, 4);
        memcpy(&x1, src + i + 4, 4);
        memcpy(&x2, src + i + 8, 4);
        memcpy(&x3, src + i + 12, 4);
        dsp_widen_group(cols, x0);
        dsp_widen_group(cols + DSP_COLUMN_BYTES, x1);
        dsp_widen_group(cols + 2 * DSP_COLUMN_BYTES, x2);
        dsp_widen_group(cols + 3 * DSP_COLUMN_BYTES, x3);
    }
    dsp_widen(cols, src + i, n - i);
}

/* dsp_widen of an RGB stem's 27 taps (7 groups), unrolled: the loads pipeline and the loop's
 * compare and branch go (a fifth of a field's widening and copy on MobileNet's stem). */
static DSP_ALWAYS_INLINE void dsp_widen_28(int8_t *cols, const int8_t *src)
{
    int32_t x0, x1, x2, x3, x4, x5, x6;
    memcpy(&x0, src, 4);
    memcpy(&x1, src + 4, 4);
    memcpy(&x2, src + 8, 4);
    memcpy(&x3, src + 12, 4);
    memcpy(&x4, src + 16, 4);
    memcpy(&x5, src + 20, 4);
    memcpy(&x6, src + 24, 4);
    dsp_widen_group(cols, x0);
    dsp_widen_group(cols + DSP_COLUMN_BYTES, x1);
    dsp_widen_group(cols + 2 * DSP_COLUMN_BYTES, x2);
    dsp_widen_group(cols + 3 * DSP_COLUMN_BYTES, x3);
    dsp_widen_group(cols + 4 * DSP_COLUMN_BYTES, x4);
    dsp_widen_group(cols + 5 * DSP_COLUMN_BYTES, x5);
    dsp_widen_group(cols + 6 * DSP_COLUMN_BYTES, x6);
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
        dsp_widen_run(cols, src, win->run_len);
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
 * micro-kernel over the groups, the short requantization, the clamp (packed, 4 values at once,
 * when the layer has one) and a halfword store per pixel. Per group of 4 taps the pair's 8 filter bytes are widened once
 * (4 SXTB16) and multiplied with the 3 pixels' columns: 24 MACs in 4 loads in one pipelined run
 * (Cortex-M4 TRM 3.3.2: a load after a load single issues in 1 cycle) and 2 LDM, and 12 SMLAD;
 * wide, the taps loaded already widened: 6 loads, 2 LDM and 12 SMLAD. DSP_UNROLL groups per
 * loop iteration, entered at the copy that leaves a whole number of iterations. Naked functions,
 * so all 14 registers are the routine's at every optimisation level.
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
    int32_t entry;             /* 52: copies of the group a pair skips: (-groups) mod DSP_UNROLL */
    int32_t clamp;             /* 56: 0 when act_min is -128 and act_max 127 */
} dsp_block_run;

typedef char dsp_block_run_layout[offsetof(dsp_block_run, out) == 24 && offsetof(dsp_block_run, lows) == 36 &&
                                          offsetof(dsp_block_run, entry) == 52 && offsetof(dsp_block_run, clamp) == 56
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

/* Copies of the group per loop iteration: the loop's load, compare and taken branch (6 cycles) are
 * paid once per DSP_UNROLL groups. Eight rather than four: -2 % estimated cycles on the reference
 * models' convolutions for ~320 B more of each routine (its hot part, ~0.9 KB, still fits the
 * STM32L4R5's 1 KB instruction cache). */
#define DSP_UNROLL 8
#define DSP_GROUPS_AFTER_FIRST(group) ".rept 7\n\t" group ".endr\n\t" /* one copy of the text: C99's 4095 */

/* A pair's three halfwords (r2, r3, r4: pixel a's, b's, c's) stored, the output advanced, and the
 * next pair's step taken unless it was the last (r12 holds the run). */
#define DSP_STORE_PAIR                                                                                 \
    "ldr r8, [r12, #24]\n\t"                                                                           \
    "ldr r9, [r12, #28]\n\t"                                                                           \
    "ldr r10, [r12, #32]\n\t"                                                                          \
    "ldr lr, [r12, #48]\n\t" /* four loads in one pipelined run: 5 cycles (LDRD and two LDR took 6) */ \
    "strh r3, [r8, r9]\n\t"  /* 1 cycle behind a load single, else 2 (register offset) */              \
    "strh r2, [r8]\n\t"                                                                                \
    "strh r4, [r8, r10]\n\t"                                                                           \
    "add r8, r8, #2\n\t"                                                                               \
    "str r8, [r12, #24]\n\t"                                                                           \
    "cmp r8, lr\n\t"                                                                                   \
    "bne 1b\n\t"                                                                                       \
    "add sp, sp, #8\n\t"                                                                               \
    "pop {r0, r4-r11, pc}\n\t"

/*
 * The routine for one group form; r0 holds the run on entry, kept at [sp, #8] under cols_end and
 * the entry address: the copy of the group a pair starts at (run->entry copies skipped, so that
 * whole iterations remain), computed once per call from the distance between the first two
 * copies, and taken with one load into pc (3 cycles; the compare-and-branch chain it replaces took
 * 5-7). Without a clamp (act_min -128 and act_max 127: SSAT already saturated) each pixel's two
 * bytes are packed by one BFI; else by four BFI into two words for the packed clamp.
 */
#define DSP_BLOCKS_2X3(group, biases, requant)                                                                  \
    __asm__ volatile(                                                                                           \
        ".syntax unified\n\t"                                                                                   \
        "push {r0, r4-r11, lr}\n\t"                                                                             \
        "ldr r8, [r0, #4]\n\t"                                                                                  \
        "ldr r9, [r0, #52]\n\t"                                                                                 \
        "adr r10, 2f\n\t"                                                                                       \
        "adr r11, 3f\n\t"                                                                                       \
        "sub r11, r11, r10\n\t"                                                                                 \
        "mla r9, r9, r11, r10\n\t"                                                                              \
        "orr r9, r9, #1\n\t" /* Thumb */                                                                        \
        "push {r8, r9}\n\t"                                                                                     \
        "mov r12, r0\n" /* the run: r12 keeps it from the output stage on */                                    \
        "1:\n\t" biases "ldr r0, [r12, #0]\n\t"                                                                 \
        "ldr r1, [r12, #8]\n\t"                                                                                 \
        "ldr pc, [sp, #4]\n\t"                                                                                  \
        ".p2align 2\n"                                                                                          \
        "2:\n\t" group "3:\n\t" DSP_GROUPS_AFTER_FIRST(                                                         \
            group) "ldr r8, [sp]\n\t"                                                                           \
                   "cmp r0, r8\n\t"                                                                             \
                   "bne 2b\n\t"                                                                                 \
                   "ldr r12, [sp, #8]\n\t"                                                                      \
                   "str r1, [r12, #8]\n\t" requant "ldr r0, [r12, #56]\n\t"                                     \
                   "cbnz r0, 8f\n\t"                                                                            \
                   "bfi r2, r5, #8, #8\n\tbfi r3, r6, #8, #8\n\tbfi r4, r7, #8, #8\n\t" DSP_STORE_PAIR "8:\n\t" \
                   "bfi r2, r5, #8, #8\n\tbfi r2, r3, #16, #8\n\tbfi r2, r6, #24, #8\n\tbfi r4, r7, #8, #8\n\t" \
                   "ldrd r8, r9, [r12, #36]\n\t"                                                                \
                   "ssub8 lr, r2, r8\n\tsel r2, r2, r8\n\tssub8 lr, r2, r9\n\tsel r2, r9, r2\n\t"               \
                   "ssub8 lr, r4, r8\n\tsel r4, r4, r8\n\tssub8 lr, r4, r9\n\tsel r4, r9, r4\n\t"               \
                   "lsr r3, r2, #16\n\t" DSP_STORE_PAIR)

/* One of the two routines below. The entry points pass theirs down, so that a program links only
 * the routine of the entry point it calls (each is about 1.1 KB). */
typedef void (*dsp_blocks_fn)(dsp_block_run *run);

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
    int short_requant;    /* every channel admits the short requantization */
    int wide;             /* the filter's taps are widened to int16 pairs (edgec_conv_s8_dsp_wide) */
    dsp_blocks_fn blocks; /* dsp_blocks_2x3 or _wide, as `wide`; NULL without the assembly */
    dsp_block_run *run;   /* its per-call fields set */
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
    if (o->short_requant && out_c >= 2 && o->blocks != NULL) {
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
        o->blocks(run);
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
            const int8_t *pixel = input + EDGEC_MIN(p + column, pixels - 1) * k;
            if (k >= 16) {
                dsp_widen_run(cols + 8 * column, pixel, k);
            } else {
                dsp_widen(cols + 8 * column, pixel, k);
            }
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
            if (groups == 7) {
                dsp_widen_28(cols + 8 * column, row);
            } else {
                dsp_widen(cols + 8 * column, row, 4 * groups);
            }
        }
        pixel_next(&px, output_dims);
        dsp_conv_pixels(cols, groups, packed_filter, folded_bias, o, out_c, out);
    }
}

/*
 * Pointwise layers of 8 input channels (edgec_conv_s8_dsp_wide_1x1x8): at 8 taps an output of
 * the 2x3 pair routine is mostly its output stage and the pair's set-up (VWW's 8 -> 16 layer at
 * 48x48: 29 estimated cycles an output at 0 wait states). Here one channel at a time runs over a
 * band of up to DSP_PW8_BAND pixels with its 4 widened filter words and its 4 channel-table words
 * (bias, multiplier, round_high, r - 1) held in registers the whole band: per output two words of
 * the band, 4 SXTB16, 4 SMLAD (the first adds the bias), the short requantization, a byte store.
 * The band is the input's bytes copied into scratch first, so the layer keeps the generic
 * kernel's in-place offsets (a band is read whole before any of its pixels is written). Only
 * without a clamp (act_min -128, act_max 127) and with every channel's short requantization; else
 * the generic path.
 */
#define DSP_PW8_BAND (EDGEC_CONV_S8_DSP_WIDE_1X1X8_SCRATCH_BYTES / 8)
#define DSP_PW8_UNROLL 6 /* copies of the pixel code per loop iteration */

typedef struct {
    const int8_t *band;    /*  0: the band's pixels, 8 bytes each */
    int8_t *out;           /*  4: the next channel at the band's first pixel */
    const int16_t *filter; /*  8: the next channel's taps: groups at +0 and +16 (a pair is 32 bytes) */
    const int32_t *table;  /* 12: the next channel's bias; multiplier, round_high, r - 1 at +8, +16, +24 */
    int8_t *out_end;       /* 16: past the band's first pixel (output_c even) */
    int32_t stride;        /* 20: output_c */
    int32_t skip;          /* 24: copies of the pixel code the first iteration skips */
    const int8_t *end;     /* 28: past the band's last pixel */
} dsp_pw8_run;

typedef char dsp_pw8_run_layout[offsetof(dsp_pw8_run, out_end) == 16 && offsetof(dsp_pw8_run, end) == 28 ? 1 : -1];

#if EDGEC_UNALIGNED_ASM
/* One output: the band's pixel (r0, advanced) widened and multiplied with the taps r2..r5 onto the
 * bias r6; requantized with multiplier r7, round_high r8, r - 1 r9 (as DSP_REQUANT); stored at r1,
 * which advances by the stride lr. r10 the sum, r11/r12 scratch. */
#define DSP_PW8_PIXEL                                                                                 \
    "ldm r0!, {r11, r12}\n\tsxtb16 r10, r11\n\tsmlad r10, r2, r10, r6\n\tsxtb16 r11, r11, ror #8\n\t" \
    "smlad r10, r3, r11, r10\n\tsxtb16 r11, r12\n\tsmlad r10, r4, r11, r10\n\t"                       \
    "sxtb16 r12, r12, ror #8\n\tsmlad r10, r5, r12, r10\n\t"                                          \
    "and r11, r10, #0x80000000\n\torr r11, r11, #0x40000000\n\tadd r12, r8, r10, asr #31\n\t"         \
    "smlal r11, r12, r10, r7\n\tasr r10, r12, r9\n\tssat r10, #8, r10\n\t"                            \
    "strb r10, [r1]\n\tadd.w r1, r1, lr\n\t"

/* Every channel of a band: per channel its constants loaded, then the pixel code entered at the
 * copy that leaves a whole number of iterations (its address computed once per call, taken by
 * one load into pc), then the next channel's filter and table: +8/+4 into an odd channel, +24/+28
 * into the next pair (the parity of the channels left: output_c is even). Naked: all 14
 * registers are the routine's at every optimisation level. */
static __attribute__((naked, noinline)) void dsp_pw8_band(dsp_pw8_run *run __attribute__((unused)))
{
    __asm__ volatile(".syntax unified\n\t"
                     "push {r4-r11, lr}\n\t"
                     "ldr r1, [r0, #24]\n\t"
                     "adr r2, 2f\n\t"
                     "adr r3, 3f\n\t"
                     "sub r3, r3, r2\n\t"
                     "mla r1, r1, r3, r2\n\t"
                     "orr r1, r1, #1\n\t" /* Thumb */
                     "ldr r2, [r0, #28]\n\t"
                     "push {r0, r1, r2}\n" /* the run at [sp], the entry at [sp, #4], the band's end at [sp, #8] */
                     "1:\n\t"
                     "ldr r12, [sp]\n\t"
                     "ldm r12, {r0, r1, r10, r11}\n\t"
                     "ldr r2, [r10]\n\t"
                     "ldr r3, [r10, #4]\n\t"
                     "ldr r4, [r10, #16]\n\t"
                     "ldr r5, [r10, #20]\n\t"
                     "ldr r6, [r11]\n\t"
                     "ldr r7, [r11, #8]\n\t"
                     "ldr r8, [r11, #16]\n\t"
                     "ldr r9, [r11, #24]\n\t"
                     "ldr lr, [r12, #20]\n\t"
                     "ldr pc, [sp, #4]\n\t"
                     ".p2align 2\n"
                     "2:\n\t" DSP_PW8_PIXEL "3:\n\t"
                     ".rept 5\n\t" DSP_PW8_PIXEL ".endr\n\t"
                     "ldr r12, [sp, #8]\n\t"
                     "cmp r0, r12\n\t"
                     "bne 2b\n\t"
                     "ldr r12, [sp]\n\t"
                     "ldm r12, {r0-r4}\n\t" /* r1 out, r2 filter, r3 table, r4 out_end */
                     "adds r1, r1, #1\n\t"
                     "subs r0, r4, r1\n\t"
                     "lsls r0, r0, #31\n\t" /* ne: the next channel is odd */
                     "ite eq\n\t"
                     "addeq r2, r2, #24\n\t"
                     "addne r2, r2, #8\n\t"
                     "ite eq\n\t"
                     "addeq r3, r3, #28\n\t"
                     "addne r3, r3, #4\n\t"
                     "str r1, [r12, #4]\n\t"
                     "str r2, [r12, #8]\n\t"
                     "str r3, [r12, #12]\n\t"
                     "cmp r1, r4\n\t"
                     "bne 1b\n\t"
                     "add sp, sp, #12\n\t"
                     "pop {r4-r11, pc}\n\t");
}

#endif

/* One dsp_conv for both entry points, not a copy specialised to each routine (GCC's IPA-CP would
 * clone it for the constant `blocks`: 2.4 KB more). */
#if defined(__GNUC__) && !defined(__clang__)
#define DSP_NOCLONE __attribute__((noinline, noclone))
#else
#define DSP_NOCLONE EDGEC_NOINLINE
#endif

/* edgec_conv_s8_dsp (narrow) and _wide (wide_desc): packed_filter holds int8 taps and folded_bias
 * the biases, or with `wide` int16 taps and the channel table. The layer is unpacked here, in the
 * frame the pixels run under, not in the entry points (no stack of their own). */
static DSP_NOCLONE edgec_status dsp_conv(const edgec_conv_desc *narrow, const edgec_conv_dsp_wide_desc *wide_desc,
                                         dsp_blocks_fn blocks, const int8_t *input, int8_t *output, int8_t *scratch)
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
    o.blocks = blocks;
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
    run.entry = (DSP_UNROLL - groups % DSP_UNROLL) % DSP_UNROLL;
    run.clamp = params->act_min > INT8_MIN || params->act_max < INT8_MAX;
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

#if EDGEC_UNALIGNED_ASM
#define DSP_BLOCKS(routine) routine
#else
#define DSP_BLOCKS(routine) NULL
#endif

edgec_status edgec_conv_s8_dsp(const edgec_conv_desc *desc, const int8_t *input, int8_t *output, int8_t *scratch)
{
    return desc == NULL ? EDGEC_ARG_ERROR : dsp_conv(desc, NULL, DSP_BLOCKS(dsp_blocks_2x3), input, output, scratch);
}

edgec_status edgec_conv_s8_dsp_wide(const edgec_conv_dsp_wide_desc *desc, const int8_t *input, int8_t *output,
                                    int8_t *scratch)
{
    return desc == NULL ? EDGEC_ARG_ERROR
                        : dsp_conv(NULL, desc, DSP_BLOCKS(dsp_blocks_2x3_wide), input, output, scratch);
}

#if EDGEC_UNALIGNED_ASM
/* The bands of a pointwise layer of 8 input channels: each band's input copied into scratch, then
 * every channel of its pixels (dsp_pw8_band). Not inlined, for the reason dsp_pointwise_steps is
 * not. */
static EDGEC_NOINLINE void dsp_pw8_bands(int8_t *band, const int8_t *input, const int8_t *filter, const int32_t *table,
                                         int32_t out_c, int8_t *output, int32_t pixels)
{
    dsp_pw8_run run;
    run.band = band;
    run.stride = out_c;
    for (int32_t p = 0; p < pixels; p += DSP_PW8_BAND) {
        const int32_t n = EDGEC_MIN(DSP_PW8_BAND, pixels - p);
        memcpy(band, input + 8 * p, (size_t)(8 * n));
        run.out = output + p * out_c;
        run.out_end = run.out + out_c;
        run.filter = (const int16_t *)(const void *)filter;
        run.table = table;
        run.skip = (DSP_PW8_UNROLL - n % DSP_PW8_UNROLL) % DSP_PW8_UNROLL;
        run.end = band + 8 * n;
        dsp_pw8_band(&run);
    }
}

/* Whether edgec_conv_s8_dsp_wide_1x1x8's bands take the layer: a valid 1x1, stride-1, unpadded
 * layer of 8 input channels whose output is its input's size, an even output count, no clamp and
 * every channel's short requantization. Flattened: with a second call left, GCC would take
 * packed_conv_args_valid out of dsp_conv (3 more instructions a channel on every other layer). */
#if defined(__GNUC__) && !defined(__clang__)
#define DSP_FLATTEN __attribute__((flatten))
#else
#define DSP_FLATTEN
#endif
DSP_FLATTEN
static int dsp_pw8_takes(const edgec_conv_dsp_wide_desc *desc, const int8_t *input, const int8_t *output,
                         const int8_t *scratch)
{
    edgec_conv_layer l;
    EDGEC_CONV_LAYER_OF(desc, l);
    const edgec_conv_params *p = &l.params;
    return packed_conv_args_valid(p, &l.quant, &l.input_dims, input, &l.filter_dims,
                                  (const int8_t *)(const void *)desc->wide_filter, desc->channel_table, &l.output_dims,
                                  output, scratch) &&
           l.filter_dims.h == 1 && l.filter_dims.w == 1 && l.filter_dims.c == 8 && p->stride_h == 1 &&
           p->stride_w == 1 && p->pad_top == 0 && p->pad_left == 0 && l.input_dims.h == l.output_dims.h &&
           l.input_dims.w == l.output_dims.w && l.output_dims.c % 2 == 0 && p->act_min == INT8_MIN &&
           p->act_max == INT8_MAX && edgec_dsp_requant_all_short(l.quant.multiplier, l.quant.shift, l.output_dims.c);
}
#endif

/* edgec_conv_s8_dsp_wide with the band routine for a pointwise layer of 8 input channels (a
 * separate entry point: programs without such a layer do not link it). */
edgec_status edgec_conv_s8_dsp_wide_1x1x8(const edgec_conv_dsp_wide_desc *desc, const int8_t *input, int8_t *output,
                                          int8_t *scratch)
{
#if EDGEC_UNALIGNED_ASM
    if (desc != NULL && dsp_pw8_takes(desc, input, output, scratch)) {
        dsp_pw8_bands(scratch, input, (const int8_t *)(const void *)desc->wide_filter, desc->channel_table,
                      desc->output_c, output, desc->batches * desc->input_h * desc->input_w);
        return EDGEC_OK;
    }
#endif
    return edgec_conv_s8_dsp_wide(desc, input, output, scratch);
}

#endif /* __ARM_FEATURE_DSP */
