/*
 * edgec_add_s8.c -- int8 elementwise add with independent qparams: the portable C99 path (the
 * reference) and, on Arm cores with the DSP extension or Helium, edgec_add_s8_dsp/_mve.
 *
 * TFLite/CMSIS-NN scheme: both inputs are rescaled onto a common fixed-point grid with
 * left_shift (20) bits of headroom, added, then requantized to the output scale:
 *   a = requantize((x1 + off1) << left_shift, m1, s1)
 *   b = requantize((x2 + off2) << left_shift, m2, s2)
 *   y = clamp(requantize(a + b, mo, so) + output_offset, act_min, act_max)
 * Golden: edgec.ops.eltwise.add_s8 (the descriptor from edgec.ops.eltwise.add_desc).
 */
#include <stddef.h>
#include <string.h>

#include "edgec_nn.h"
#include "../support/edgec_support.h"

/* (x + off) is within [-255, 255]; 255 << 23 still fits int32, so 23 is the largest safe shift. */
#define ADD_MAX_LEFT_SHIFT 23

static int add_params_valid(const edgec_add_s8_desc *p)
{
    return p->input1_offset >= -127 && p->input1_offset <= 128 && p->input2_offset >= -127 && p->input2_offset <= 128 &&
           p->output_offset >= -128 && p->output_offset <= 127 && p->left_shift >= 0 &&
           p->left_shift <= ADD_MAX_LEFT_SHIFT && edgec_shift_valid(p->input1_shift) &&
           edgec_shift_valid(p->input2_shift) && edgec_shift_valid(p->output_shift) &&
           edgec_act_range_valid(p->act_min, p->act_max);
}

/*
 * Element loop. Each iteration reads input1[i] and input2[i] before writing output[i], so the
 * output may alias either input exactly (no `restrict` anywhere on purpose).
 */
edgec_status edgec_add_s8(const edgec_add_s8_desc *desc, const int8_t *input1, const int8_t *input2, int8_t *output)
{
    int32_t i;
    int32_t scale;
    edgec_output_stage stage;

    if (desc == NULL || input1 == NULL || input2 == NULL || output == NULL || desc->size < 0 ||
        !add_params_valid(desc)) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t size = desc->size;
    /* Multiplying by 2^left_shift instead of `<<`: left-shifting a negative value is UB in C99. */
    scale = (int32_t)1 << desc->left_shift;
    stage = edgec_output_stage_make(desc->output_offset, desc->act_min, desc->act_max);

    for (i = 0; i < size; ++i) {
        const int32_t x1 = ((int32_t)input1[i] + desc->input1_offset) * scale;
        const int32_t x2 = ((int32_t)input2[i] + desc->input2_offset) * scale;
        const int32_t a = edgec_requantize(x1, desc->input1_multiplier, desc->input1_shift);
        const int32_t b = edgec_requantize(x2, desc->input2_multiplier, desc->input2_shift);
        /* Sum through uint32_t: with arbitrary multipliers a + b may exceed int32, and the
         * golden models that as a two's-complement wrap rather than undefined behaviour. */
        const int32_t sum = (int32_t)((uint32_t)a + (uint32_t)b);
        output[i] = edgec_requantize_s8(sum, desc->output_multiplier, desc->output_shift, stage);
    }
    return EDGEC_OK;
}

/* ==== Packed paths: Arm DSP extension and Helium ============================================= */
#if defined(__ARM_FEATURE_DSP) || (defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))

/*
 * Each input takes only 256 values, so its rescaled form (a or b above) is looked up: two tables
 * of 256 int32 in scratch, indexed by the input byte as uint8, built once per call. Per element
 * there remain two loads, an add and the output requantization.
 */
#define ADD_TABLE_ENTRIES 256

static int add_args_valid(const edgec_add_s8_desc *desc, const int8_t *input1, const int8_t *input2,
                          const int8_t *output, const int8_t *scratch)
{
    return desc != NULL && input1 != NULL && input2 != NULL && output != NULL && desc->size >= 0 &&
           add_params_valid(desc) && scratch != NULL && edgec_word_aligned(scratch);
}

/* The rescaled input, requantize((x + offset) * 2^left_shift, multiplier, shift), of x = (int8)u. */
static int32_t add_rescaled(int32_t u, int32_t offset, int32_t left_shift, int32_t multiplier, int32_t shift)
{
    const int32_t x = (int32_t)(int8_t)(uint8_t)u;
    return edgec_requantize((x + offset) * ((int32_t)1 << left_shift), multiplier, shift);
}

#endif /* packed paths */

/* ==== Arm DSP extension ====================================================================== */
#if defined(__ARM_FEATURE_DSP)

static void dsp_add_table(int8_t *table, int32_t offset, int32_t left_shift, int32_t multiplier, int32_t shift)
{
    for (int32_t u = 0; u < ADD_TABLE_ENTRIES; u++) {
        const int32_t value = add_rescaled(u, offset, left_shift, multiplier, shift);
        memcpy(table + 4 * u, &value, 4);
    }
}

/* a + b of element i, wrapped to int32 like the golden kernel. The inputs are read as uint8,
 * the tables' index. */
static inline int32_t dsp_add_sum(const int8_t *tables, const uint8_t *input1, const uint8_t *input2, int32_t i)
{
    int32_t a, b;
    memcpy(&a, tables + 4 * input1[i], 4);
    memcpy(&b, tables + 4 * (ADD_TABLE_ENTRIES + input2[i]), 4);
    return (int32_t)((uint32_t)a + (uint32_t)b);
}

static inline int32_t dsp_add_short_one(const int8_t *tables, const uint8_t *input1, const uint8_t *input2, int32_t i,
                                        edgec_dsp_requant q)
{
    return edgec_dsp_requantize_ssat8(dsp_add_sum(tables, input1, input2, i), q);
}

#if EDGEC_UNALIGNED_ASM
/*
 * The whole words of dsp_add_short in one assembly loop with every constant in a register (GCC
 * kept the output pointer and the clamp bytes on the stack): per element two byte loads, two
 * table loads in one pipelined run, the add and the short requantization; per word the clamp
 * and one store, after all four elements are read (the output may alias an input). The fields:
 */
typedef struct {
    const uint8_t *input1;    /*  0 */
    const uint8_t *input2;    /*  4 */
    int8_t *output;           /*  8 */
    const int8_t *output_end; /* 12: past the last whole word */
    const int8_t *table1;     /* 16 */
    const int8_t *table2;     /* 20 */
    edgec_dsp_requant q;      /* 24: multiplier, round_high, shift */
    uint32_t lows;            /* 36: act_min in every byte */
    uint32_t highs;           /* 40: act_max in every byte */
} dsp_add_run;

typedef char dsp_add_run_layout[offsetof(dsp_add_run, q) == 24 && offsetof(dsp_add_run, highs) == 40 &&
                                        sizeof(edgec_dsp_requant) == 12 &&
                                        offsetof(edgec_dsp_requant, round_high) == 4 &&
                                        offsetof(edgec_dsp_requant, shift) == 8
                                    ? 1
                                    : -1];

// clang-format off
/* Element k of the word: its requantized sum, saturated to int8, into `dst` (r10: the word's first;
 * then r12, inserted at byte k by `insert`). r0/r1 the inputs, r3/r4 the tables, r5..r7 the
 * requantization (multiplier, round_high, shift). */
#define DSP_ADD_ELEMENT(k, dst, insert)                                                            \
    "ldrb r11, [r0, #" #k "]\n\t"                                                                  \
    "ldrb r12, [r1, #" #k "]\n\t"                                                                  \
    "ldr r11, [r3, r11, lsl #2]\n\t"                                                               \
    "ldr r12, [r4, r12, lsl #2]\n\t"                                                               \
    "add r11, r11, r12\n\t"                                                                        \
    "and lr, r11, #0x80000000\n\t"                                                                 \
    "orr lr, lr, #0x40000000\n\t"                                                                  \
    "add r12, r6, r11, asr #31\n\t"                                                                \
    "smlal lr, r12, r11, r5\n\t"                                                                   \
    "asr r12, r12, r7\n\t"                                                                         \
    "ssat " dst ", #8, r12\n\t" insert

static __attribute__((naked, noinline)) void dsp_add_words(dsp_add_run *run __attribute__((unused)))
{
    __asm__ volatile(
        ".syntax unified\n\t"
        "ldr r1, [r0, #12]\n\t"
        "push {r0, r1, r4-r11, lr}\n\t"
        "ldrd r3, r4, [r0, #16]\n\t"
        "add r12, r0, #24\n\t"
        "ldm r12, {r5, r6, r7, r8, r9}\n\t"
        "ldrd r1, r2, [r0, #4]\n\t"
        "ldr r0, [r0, #0]\n\t"
        ".p2align 2\n"
        "1:\n\t"
        DSP_ADD_ELEMENT(0, "r10", "")
        DSP_ADD_ELEMENT(1, "r12", "bfi r10, r12, #8, #8\n\t")
        DSP_ADD_ELEMENT(2, "r12", "bfi r10, r12, #16, #8\n\t")
        DSP_ADD_ELEMENT(3, "r12", "bfi r10, r12, #24, #8\n\t")
        "adds r0, r0, #4\n\t"
        "adds r1, r1, #4\n\t"
        "ssub8 r12, r10, r8\n\t"
        "sel r10, r10, r8\n\t"
        "ssub8 r12, r10, r9\n\t"
        "sel r10, r9, r10\n\t"
        "str r10, [r2], #4\n\t"
        "ldr lr, [sp, #4]\n\t"
        "cmp r2, lr\n\t"
        "bne 1b\n\t"
        "pop {r0, r1, r4-r11, pc}\n\t");
}
// clang-format on
#endif

/* The elements through the short requantization, four per word. */
static void dsp_add_short(const int8_t *tables, const uint8_t *input1, const uint8_t *input2, int8_t *output,
                          int32_t size, edgec_dsp_requant q, edgec_output_stage stage)
{
    const int32_t act_min = stage.lo + stage.offset;
    const int32_t act_max = stage.hi + stage.offset;
    const uint32_t lows = edgec_dsp_bytes(act_min);
    const uint32_t highs = edgec_dsp_bytes(act_max);
    int32_t i = 0;
#if EDGEC_UNALIGNED_ASM
    if (size >= 4) {
        i = size / 4 * 4;
        dsp_add_run run = {
            input1, input2, output, output + i, tables, tables + 4 * ADD_TABLE_ENTRIES, q, lows, highs
        };
        dsp_add_words(&run);
    }
#endif
    for (; i + 4 <= size; i += 4) {
        const uint32_t packed = edgec_dsp_pack_s8x4(
            dsp_add_short_one(tables, input1, input2, i, q), dsp_add_short_one(tables, input1, input2, i + 1, q),
            dsp_add_short_one(tables, input1, input2, i + 2, q), dsp_add_short_one(tables, input1, input2, i + 3, q));
        const uint32_t clamped = edgec_dsp_clamp_s8x4(packed, lows, highs);
        memcpy(output + i, &clamped, 4); /* after reading all four: output may alias an input */
    }
    for (; i < size; i++) {
        const int32_t y = dsp_add_short_one(tables, input1, input2, i, q);
        output[i] = (int8_t)EDGEC_MIN(EDGEC_MAX(y, act_min), act_max);
    }
}

edgec_status edgec_add_s8_dsp(const edgec_add_s8_desc *desc, const int8_t *input1, const int8_t *input2, int8_t *output,
                              int8_t *scratch)
{
    if (!add_args_valid(desc, input1, input2, output, scratch)) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t size = desc->size;
    const edgec_output_stage stage = edgec_output_stage_make(desc->output_offset, desc->act_min, desc->act_max);
    dsp_add_table(scratch, desc->input1_offset, desc->left_shift, desc->input1_multiplier, desc->input1_shift);
    dsp_add_table(scratch + 4 * ADD_TABLE_ENTRIES, desc->input2_offset, desc->left_shift, desc->input2_multiplier,
                  desc->input2_shift);
    const uint8_t *bytes1 = (const uint8_t *)input1;
    const uint8_t *bytes2 = (const uint8_t *)input2;
    if (edgec_dsp_requant_short(desc->output_multiplier, desc->output_shift)) {
        dsp_add_short(scratch, bytes1, bytes2, output, size,
                      edgec_dsp_requant_make(desc->output_multiplier, desc->output_shift,
                                             edgec_dsp_round_base(desc->output_offset)),
                      stage);
        return EDGEC_OK;
    }
    for (int32_t i = 0; i < size; i++) {
        output[i] = edgec_requantize_s8(dsp_add_sum(scratch, bytes1, bytes2, i), desc->output_multiplier,
                                        desc->output_shift, stage);
    }
    return EDGEC_OK;
}

#endif /* __ARM_FEATURE_DSP */

/* ==== Helium: four elements per step, the tables read by gather loads ======================== */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)

/* The table of one input, four entries per step (edgec_mve_requantize on (x + offset) << shift). */
static void mve_add_table(int32_t *table, int32_t offset, int32_t left_shift, int32_t multiplier, int32_t shift)
{
    const int32x4_t m = vdupq_n_s32(multiplier);
    const int32x4_t sh = vdupq_n_s32(shift);
    for (int32_t u = 0; u < ADD_TABLE_ENTRIES; u += 4) {
        /* x = (int8)u for u, u+1, u+2, u+3: the byte sign-extended by a shift pair */
        const int32x4_t bytes = vreinterpretq_s32_u32(vidupq_n_u32((uint32_t)u, 1));
        const int32x4_t x = vshrq_n_s32(vshlq_n_s32(bytes, 24), 24);
        const int32x4_t scaled = vshlq_r_s32(vaddq_n_s32(x, offset), left_shift);
        vstrwq_s32(table + u, edgec_mve_requantize(scaled, m, sh));
    }
}

/* The assembly needs registers that an unoptimised build keeps for its frame. */
#if defined(__OPTIMIZE__)
/*
 * n >= 1 blocks of eight elements when the output shift is strictly right (no left shift, and
 * the rounding fixup of edgec_mve_requantize is the sign of the product: its minus_right lanes
 * all have the sign bit set). The two groups of four interleave so that the second group's
 * loads and gathers issue between the first group's other vector operations. Group A: bytes
 * q0/q1, entries q2/q3; group B: bytes q0/q1 again, entries q4/q5; bounds in q6/q7. Each group's
 * four bytes are read before its four outputs are written, and the second group's before the
 * first's are: the output may alias an input exactly.
 */
static EDGEC_NOINLINE void mve_add_right_shift(const int32_t *table1, const int32_t *table2, const int8_t *input1,
                                               const int8_t *input2, int8_t *output, int32_t n, int32_t multiplier,
                                               int32_t shift, const int32_t *bounds, int32_t offset)
{
    __asm__ volatile("vldrw.u32 q6, [%[bounds]]\n\t"
                     "vldrw.u32 q7, [%[bounds], #16]\n\t"
                     "dls lr, %[n]\n"
                     "1:\n\t"
                     "vldrb.u32 q0, [%[in1]], #4\n\t"
                     "vldrb.u32 q1, [%[in2]], #4\n\t"
                     "vldrw.u32 q2, [%[t1], q0, uxtw #2]\n\t"
                     "vldrw.u32 q3, [%[t2], q1, uxtw #2]\n\t"
                     "vldrb.u32 q0, [%[in1]], #4\n\t"
                     "vadd.i32 q2, q2, q3\n\t"
                     "vldrb.u32 q1, [%[in2]], #4\n\t"
                     "vqrdmulh.s32 q2, q2, %[m]\n\t"
                     "vldrw.u32 q4, [%[t1], q0, uxtw #2]\n\t"
                     "vshr.s32 q3, q2, #31\n\t"
                     "vldrw.u32 q5, [%[t2], q1, uxtw #2]\n\t"
                     "vqadd.s32 q2, q2, q3\n\t"
                     "vadd.i32 q4, q4, q5\n\t"
                     "vqrdmulh.s32 q4, q4, %[m]\n\t"
                     "vrshl.s32 q2, %[shift]\n\t"
                     "vshr.s32 q5, q4, #31\n\t"
                     "vmax.s32 q2, q2, q6\n\t"
                     "vqadd.s32 q4, q4, q5\n\t"
                     "vmin.s32 q2, q2, q7\n\t"
                     "vrshl.s32 q4, %[shift]\n\t"
                     "vadd.i32 q2, q2, %[offset]\n\t"
                     "vstrb.32 q2, [%[out]], #4\n\t"
                     "vmax.s32 q4, q4, q6\n\t"
                     "vmin.s32 q4, q4, q7\n\t"
                     "vadd.i32 q4, q4, %[offset]\n\t"
                     "vstrb.32 q4, [%[out]], #4\n\t"
                     "le lr, 1b"
                     : [in1] "+l"(input1), [in2] "+l"(input2), [out] "+l"(output)
                     : [t1] "r"(table1), [t2] "r"(table2), [n] "r"(n), [m] "r"(multiplier), [shift] "r"(shift),
                       [bounds] "r"(bounds), [offset] "r"(offset)
                     : "lr", "q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "memory");
}
#endif

edgec_status edgec_add_s8_mve(const edgec_add_s8_desc *desc, const int8_t *input1, const int8_t *input2, int8_t *output,
                              int8_t *scratch)
{
    if (!add_args_valid(desc, input1, input2, output, scratch)) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t size = desc->size;
    /* The tables are int32 objects in the arena's scratch, written and read only by vector
     * loads and stores. */
    int32_t *table1 = (int32_t *)(void *)scratch;
    int32_t *table2 = table1 + ADD_TABLE_ENTRIES;
    const edgec_output_stage stage = edgec_output_stage_make(desc->output_offset, desc->act_min, desc->act_max);
    const int32x4_t m = vdupq_n_s32(desc->output_multiplier);
    const int32x4_t sh = vdupq_n_s32(desc->output_shift);

    mve_add_table(table1, desc->input1_offset, desc->left_shift, desc->input1_multiplier, desc->input1_shift);
    mve_add_table(table2, desc->input2_offset, desc->left_shift, desc->input2_multiplier, desc->input2_shift);
    int32_t i = 0;
#if defined(__OPTIMIZE__)
    if (desc->output_shift < 0 && size >= 8) {
        const int32_t bounds[8] = { stage.lo, stage.lo, stage.lo, stage.lo, stage.hi, stage.hi, stage.hi, stage.hi };
        i = size / 8 * 8;
        mve_add_right_shift(table1, table2, input1, input2, output, size / 8, desc->output_multiplier,
                            desc->output_shift, bounds, stage.offset);
    }
#endif
    for (; i < size; i += 4) {
        const mve_pred16_t lanes = vctp32q((uint32_t)(size - i));
        const uint32x4_t u1 = vldrbq_z_u32((const uint8_t *)input1 + i, lanes);
        const uint32x4_t u2 = vldrbq_z_u32((const uint8_t *)input2 + i, lanes);
        const int32x4_t sum =
            vaddq_s32(vldrwq_gather_shifted_offset_s32(table1, u1), vldrwq_gather_shifted_offset_s32(table2, u2));
        vstrbq_p_s32(output + i, edgec_mve_output(edgec_mve_requantize(sum, m, sh), stage), lanes);
    }
    return EDGEC_OK;
}

#endif /* __ARM_FEATURE_MVE */
