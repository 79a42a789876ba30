/*
 * edgec_depthwise_conv_s8_packed's groups with the wide short requantization
 * (edgec_dsp_requant_wide: every channel's shift -1 to -24, one of them -1, as int4 layers have)
 * on cores with the Arm DSP extension: edgec_depthwise_conv_s8_packed_dsp.c's store and 3x3 row
 * with that requantization. Golden kernel: edgec.ops.depthwise.depthwise_conv2d_s8.
 */
#include "edgec_nn.h"

#if defined(__clang__)
#pragma clang diagnostic ignored "-Woverlength-strings" /* see edgec_depthwise_conv_s8_packed_dsp.c */
#endif

#if defined(__ARM_FEATURE_DSP) && !(defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))

#include "edgec_depthwise_conv_s8_packed_dsp.h"

void edgec_depthwise_packed_wide_make(packed_group *g)
{
    const int32_t *mult = g->layer->quant->multiplier + g->first;
    const int32_t *shift = g->layer->quant->shift + g->first;
    for (int32_t k = 0; k < GROUP; k++) {
        g->rq.wide[k] = edgec_dsp_requant_wide_make(mult[k], shift[k], edgec_dsp_round_base(g->layer->stage.offset));
    }
}

void edgec_depthwise_packed_store_four_wide(const packed_group *g, int32_t a0, int32_t a1, int32_t a2, int32_t a3,
                                            int8_t *out)
{
    const uint32_t packed = edgec_dsp_pack_s8x4(
        edgec_dsp_requantize_wide_ssat8(a0, g->rq.wide[0]), edgec_dsp_requantize_wide_ssat8(a1, g->rq.wide[1]),
        edgec_dsp_requantize_wide_ssat8(a2, g->rq.wide[2]), edgec_dsp_requantize_wide_ssat8(a3, g->rq.wide[3]));
    const uint32_t clamped = edgec_dsp_clamp_s8x4(packed, g->lows, g->highs);
    memcpy(out, &clamped, sizeof clamped);
}

#if defined(__OPTIMIZE__) && EDGEC_UNALIGNED_ASM
/* edgec_dsp_requantize_wide_ssat8 of sum `a` by the edgec_dsp_requant_wide at operand q (its low
 * word at ql, its shift at qs): the low word's start is loaded first, so that r10 holds x's sign
 * bit and then the shift (no register is left for a fourth constant). */
#define DSP_ROW_REQUANT_WIDE(a, q, ql, qs)                                                \
    "ldrd r8, r9, [%[g], %[" q "]]\n\tldr r12, [%[g], %[" ql "]]\n\t"                     \
    "and r10, " a ", #0x80000000\n\tadds r12, r12, r10\n\tadc r9, r9, " a ", asr #31\n\t" \
    "smlal r12, r9, " a ", r8\n\tldr r10, [%[g], %[" qs "]]\n\tasr " a ", r9, r10\n\tssat " a ", #8, " a "\n\t"

/* dsp_row_3x3 by the wide short requantization: one instruction more per channel, the load of
 * the fourth constant. */
static void dsp_row_3x3_wide(const packed_group *g, const int32_t (*w)[2], const int8_t *x, int8_t *out, dsp_row *row)
{
#define DSP_QW(k, field) (offsetof(packed_group, rq.wide) + (k) * sizeof(edgec_dsp_requant_wide) + (field))
    __asm__ volatile(
        DSP_ROW_COUNT_START ".p2align 2\n"
                            "1:\n\t" DSP_ROW_TAPS DSP_ROW_REQUANT_WIDE("r0", "q0", "q0l", "q0s")
                                DSP_ROW_REQUANT_WIDE("r1", "q1", "q1l", "q1s")
                                    DSP_ROW_REQUANT_WIDE("r2", "q2", "q2l", "q2s")
                                        DSP_ROW_REQUANT_WIDE("r3", "q3", "q3l", "q3s") DSP_ROW_STORE
        : [x] "+r"(x), [out] "+r"(out)
        : [w] "r"(w), [g] "r"(g), [row] "r"(row), [bias] "i"(offsetof(packed_group, bias)),
          [bias2] "i"(offsetof(packed_group, bias) + 8), [q0] "i"(DSP_QW(0, 0)), [q0s] "i"(DSP_QW(0, 8)),
          [q0l] "i"(DSP_QW(0, 12)), [q1] "i"(DSP_QW(1, 0)), [q1s] "i"(DSP_QW(1, 8)), [q1l] "i"(DSP_QW(1, 12)),
          [q2] "i"(DSP_QW(2, 0)), [q2s] "i"(DSP_QW(2, 8)), [q2l] "i"(DSP_QW(2, 12)), [q3] "i"(DSP_QW(3, 0)),
          [q3s] "i"(DSP_QW(3, 8)), [q3l] "i"(DSP_QW(3, 12)), [lows] "i"(offsetof(packed_group, lows))
        : "r0", "r1", "r2", "r3", "r8", "r9", "r10", DSP_ROW_COUNTER "r12", "memory", "cc");
#undef DSP_QW
}

static void dsp_run_row_wide(const packed_group *g, dsp_rows *rows, int32_t p, int8_t *out)
{
    rows->row.pixels = g->layer->out_w;
    dsp_row_3x3_wide(g, g->w[p], g->layer->cache, out, &rows->row);
}

void edgec_depthwise_packed_wide_rows_3x3(const packed_group *g, int32_t b, int8_t *out, int32_t pixel_step)
{
    dsp_rows_3x3(g, b, out, pixel_step, NULL, dsp_run_row_wide);
}

#endif

#endif
