/*
 * edgec_batch_matmul_s8.c -- int8 x int8 -> int8 matrix products with broadcast batch dimensions
 * (TFLite Micro's int8 BATCH_MATMUL arithmetic; golden: edgec.ops.matmul.batch_matmul_s8).
 *
 * acc = sum_k (lhs[m][k] + lhs_offset) * (rhs[k][n] + rhs_offset), accumulated in uint32_t (the
 * int32 wrap the golden models; |product| <= 255 * 255, so it never wraps below 2^16 terms), then
 * out = clamp(requantize(acc, multiplier, shift) + output_offset, act_min, act_max).
 *
 * Every path computes two rows by two columns at a time (each operand value loaded and offset once
 * for two products). On cores with the DSP extension the depth runs four at a time through SMLAD
 * on SXTAB16-widened pairs (the offsets added by the widening itself); with Helium, a right
 * operand contiguous along the depth (q @ k^T) runs sixteen at a time through VMLADAVA, the
 * offsets applied once per dot product from the operand sums:
 *   sum (a + oa)(b + ob) = sum ab + ob sum a + oa sum b + depth oa ob   (mod 2^32, as the golden).
 */
#include <stddef.h>
#include <string.h>

#include "edgec_nn.h"
#include "../support/edgec_support.h"

static int batch_matmul_desc_valid(const edgec_batch_matmul_desc *d)
{
    int64_t lhs_span, rhs_span, batches = 1;
    int32_t i;
    if (d->batch_rank < 0 || d->batch_rank > EDGEC_MATMUL_MAX_BATCH_DIMS || d->rows < 1 || d->cols < 1 ||
        d->depth < 1 || d->rhs_depth_stride < 0 || d->rhs_col_stride < 0) {
        return 0;
    }
    lhs_span = (int64_t)d->rows * d->depth;
    rhs_span = (int64_t)(d->depth - 1) * d->rhs_depth_stride + (int64_t)(d->cols - 1) * d->rhs_col_stride + 1;
    for (i = 0; i < d->batch_rank; i++) {
        if (d->batch_dims[i] < 1 || d->lhs_batch_strides[i] < 0 || d->rhs_batch_strides[i] < 0) {
            return 0;
        }
        batches *= d->batch_dims[i];
        lhs_span += (int64_t)(d->batch_dims[i] - 1) * d->lhs_batch_strides[i];
        rhs_span += (int64_t)(d->batch_dims[i] - 1) * d->rhs_batch_strides[i];
        if (batches > INT32_MAX || lhs_span > INT32_MAX || rhs_span > INT32_MAX) {
            return 0;
        }
    }
    if (batches * d->rows * d->cols > INT32_MAX) {
        return 0;
    }
    return d->lhs_offset >= -INT8_MAX && d->lhs_offset <= -INT8_MIN && d->rhs_offset >= -INT8_MAX &&
           d->rhs_offset <= -INT8_MIN && d->output_offset >= INT8_MIN && d->output_offset <= INT8_MAX &&
           edgec_shift_valid(d->shift) && d->multiplier >= 0 && edgec_act_range_valid(d->act_min, d->act_max);
}

#if defined(__ARM_FEATURE_DSP)
#include <arm_acle.h>
#endif
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
#include <arm_mve.h>
#define MATMUL_MVE 1
#else
#define MATMUL_MVE 0
#endif

/* Dot products of lhs rows r0, r1 with rhs columns c0, c1 over the depth: each operand value is
 * loaded and offset once for two products (2 x 2 register block; pointers may alias when the
 * caller has one row or one column left, then the duplicate sums are simply not stored). */
static void dot_2x2_portable(const edgec_batch_matmul_desc *d, const int8_t *r0, const int8_t *r1, const int8_t *c0,
                             const int8_t *c1, uint32_t acc[4])
{
    const ptrdiff_t step = d->rhs_depth_stride;
    const int32_t lhs_offset = d->lhs_offset, rhs_offset = d->rhs_offset;
    uint32_t s00 = 0, s01 = 0, s10 = 0, s11 = 0;
    int32_t k;
    for (k = 0; k < d->depth; k++) {
        const int32_t a0 = (int32_t)r0[k] + lhs_offset;
        const int32_t a1 = (int32_t)r1[k] + lhs_offset;
        const int32_t b0 = (int32_t)*c0 + rhs_offset;
        const int32_t b1 = (int32_t)*c1 + rhs_offset;
        c0 += step;
        c1 += step;
        s00 += (uint32_t)(a0 * b0);
        s01 += (uint32_t)(a0 * b1);
        s10 += (uint32_t)(a1 * b0);
        s11 += (uint32_t)(a1 * b1);
    }
    acc[0] = s00;
    acc[1] = s01;
    acc[2] = s10;
    acc[3] = s11;
}

/* requantize + output stage of one accumulator: DSP cores take the 6-instruction short form
 * (edgec_dsp_requantize) where the multiplier and shift allow it, as the other kernels do. */
typedef struct {
    edgec_output_stage stage;
    int32_t multiplier;
    int32_t shift;
#if defined(__ARM_FEATURE_DSP)
    int short_form;
    edgec_dsp_requant q;
#endif
} matmul_output;

static matmul_output matmul_output_make(const edgec_batch_matmul_desc *d)
{
    matmul_output o;
    o.stage = edgec_output_stage_make(d->output_offset, d->act_min, d->act_max);
    o.multiplier = d->multiplier;
    o.shift = d->shift;
#if defined(__ARM_FEATURE_DSP)
    o.short_form = edgec_dsp_requant_short(d->multiplier, d->shift);
    if (o.short_form) {
        o.q = edgec_dsp_requant_make(d->multiplier, d->shift, edgec_dsp_round_base(d->output_offset));
    }
#endif
    return o;
}

static inline int8_t matmul_output_s8(const matmul_output *o, uint32_t acc)
{
#if defined(__ARM_FEATURE_DSP)
    if (o->short_form) {
        const int32_t y = edgec_dsp_requantize((int32_t)acc, o->q); /* offset included */
        return (int8_t)EDGEC_MIN(EDGEC_MAX(y, o->stage.lo + o->stage.offset), o->stage.hi + o->stage.offset);
    }
#endif
    return edgec_output_s8(o->stage, edgec_requantize((int32_t)acc, o->multiplier, o->shift));
}

#if defined(__ARM_FEATURE_DSP) && !MATMUL_MVE

/* Bytes 1 and 3 of x sign-extended and added to the int16 halves of pair: SXTAB16 with ROR #8
 * (GCC 12's arm_acle.h has no __ror to express the rotation). */
static inline int32_t matmul_sxtab16_ror8(int32_t pair, int32_t x)
{
    int32_t result;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(result) : "r"(pair), "r"(x));
    return result;
}

static inline int32_t load_s8x4(const int8_t *p)
{
    int32_t word;
    memcpy(&word, p, sizeof(word)); /* one LDR: Armv7E-M and v8-M load unaligned words */
    return word;
}

/* The remaining depth (< 4 steps) of one row against two columns, one step at a time. */
static inline void dot_1x2_tail(const edgec_batch_matmul_desc *d, const int8_t *r, const int8_t *r_end,
                                const int8_t *c0, const int8_t *c1, ptrdiff_t step, uint32_t *s0, uint32_t *s1)
{
    while (r < r_end) {
        const int32_t a = (int32_t)*r++ + d->lhs_offset;
        *s0 += (uint32_t)(a * ((int32_t)*c0 + d->rhs_offset));
        *s1 += (uint32_t)(a * ((int32_t)*c1 + d->rhs_offset));
        c0 += step;
        c1 += step;
    }
}

/*
 * One row against two columns contiguous along the depth, with SMLAD four depth steps at a time:
 * |a + oa|, |b + ob| <= 255 fit the int16 halves (SXTAB16 adds the offsets while widening), and
 * SMLAD's accumulation wraps modulo 2^32 like the portable uint32 sums.
 */
static inline void dot_1x2_dsp(const edgec_batch_matmul_desc *d, const int8_t *r, const int8_t *c0, const int8_t *c1,
                               uint32_t *acc0, uint32_t *acc1)
{
    const int32_t lhs_pair = (int32_t)((uint32_t)(uint16_t)d->lhs_offset * 0x10001u);
    const int32_t rhs_pair = (int32_t)((uint32_t)(uint16_t)d->rhs_offset * 0x10001u);
    const int8_t *const r_end = r + d->depth;
    const int8_t *const quads_end = r + (d->depth & ~3);
    int32_t s0 = 0, s1 = 0;
    uint32_t t0, t1;
    while (r < quads_end) {
        const int32_t w = load_s8x4(r), v0 = load_s8x4(c0), v1 = load_s8x4(c1);
        const int32_t ae = __sxtab16(lhs_pair, w), ao = matmul_sxtab16_ror8(lhs_pair, w);
        r += 4;
        c0 += 4;
        c1 += 4;
        s0 = __smlad(ao, matmul_sxtab16_ror8(rhs_pair, v0), __smlad(ae, __sxtab16(rhs_pair, v0), s0));
        s1 = __smlad(ao, matmul_sxtab16_ror8(rhs_pair, v1), __smlad(ae, __sxtab16(rhs_pair, v1), s1));
    }
    t0 = (uint32_t)s0;
    t1 = (uint32_t)s1;
    dot_1x2_tail(d, r, r_end, c0, c1, 1, &t0, &t1);
    *acc0 = t0;
    *acc1 = t1;
}

/* One [rows x cols] product with a right operand contiguous along the depth on a DSP core: each
 * row against two columns at a time, the loops in one function so that their set-up is paid once
 * per product (a head's depth is often 16). */
static void matmul_one_dsp(const edgec_batch_matmul_desc *d, const matmul_output *o, const int8_t *lhs,
                           const int8_t *rhs, int8_t *out)
{
    int32_t m, n;
    for (m = 0; m < d->rows; m++) {
        const int8_t *row = lhs + (ptrdiff_t)m * d->depth;
        for (n = 0; n < d->cols; n += 2) {
            const int8_t *c0 = rhs + (ptrdiff_t)n * d->rhs_col_stride;
            const int two_cols = n + 1 < d->cols;
            uint32_t acc0, acc1;
            dot_1x2_dsp(d, row, c0, two_cols ? c0 + d->rhs_col_stride : c0, &acc0, &acc1);
            *out++ = matmul_output_s8(o, acc0);
            if (two_cols) {
                *out++ = matmul_output_s8(o, acc1);
            }
        }
    }
}
#endif /* __ARM_FEATURE_DSP && !MATMUL_MVE */

#if MATMUL_MVE
/* dot_2x2 for a right operand contiguous along the depth: raw products and operand sums sixteen
 * lanes at a time (tail-predicated), the offsets applied once at the end (exact modulo 2^32). */
static void dot_2x2_mve(const edgec_batch_matmul_desc *d, const int8_t *r0, const int8_t *r1, const int8_t *c0,
                        const int8_t *c1, uint32_t acc[4])
{
    int32_t p00 = 0, p01 = 0, p10 = 0, p11 = 0, sa0 = 0, sa1 = 0, sb0 = 0, sb1 = 0;
    int32_t k;
    uint32_t oa = (uint32_t)d->lhs_offset, ob = (uint32_t)d->rhs_offset, base;
    for (k = 0; k < d->depth; k += 16) {
        const mve_pred16_t lanes = vctp8q((uint32_t)(d->depth - k));
        const int8x16_t a0 = vldrbq_z_s8(r0 + k, lanes), a1 = vldrbq_z_s8(r1 + k, lanes);
        const int8x16_t b0 = vldrbq_z_s8(c0 + k, lanes), b1 = vldrbq_z_s8(c1 + k, lanes);
        p00 = vmladavaq_s8(p00, a0, b0);
        p01 = vmladavaq_s8(p01, a0, b1);
        p10 = vmladavaq_s8(p10, a1, b0);
        p11 = vmladavaq_s8(p11, a1, b1);
        sa0 = vaddvaq_s8(sa0, a0);
        sa1 = vaddvaq_s8(sa1, a1);
        sb0 = vaddvaq_s8(sb0, b0);
        sb1 = vaddvaq_s8(sb1, b1);
    }
    base = (uint32_t)d->depth * oa * ob;
    acc[0] = (uint32_t)p00 + ob * (uint32_t)sa0 + oa * (uint32_t)sb0 + base;
    acc[1] = (uint32_t)p01 + ob * (uint32_t)sa0 + oa * (uint32_t)sb1 + base;
    acc[2] = (uint32_t)p10 + ob * (uint32_t)sa1 + oa * (uint32_t)sb0 + base;
    acc[3] = (uint32_t)p11 + ob * (uint32_t)sa1 + oa * (uint32_t)sb1 + base;
}
#endif

/* The fastest dot_2x2 this core has for the operand layout. */
static void dot_2x2(const edgec_batch_matmul_desc *d, const int8_t *r0, const int8_t *r1, const int8_t *c0,
                    const int8_t *c1, uint32_t acc[4])
{
#if MATMUL_MVE
    if (d->rhs_depth_stride == 1) {
        dot_2x2_mve(d, r0, r1, c0, c1, acc);
        return;
    }
#endif
    dot_2x2_portable(d, r0, r1, c0, c1, acc);
}

/* One [rows x cols] product: lhs rows contiguous, rhs read through its two strides, two rows by
 * two columns at a time. */
static void matmul_one(const edgec_batch_matmul_desc *d, const int8_t *lhs, const int8_t *rhs, int8_t *out)
{
    const matmul_output o = matmul_output_make(d);
    int32_t m, n;
#if defined(__ARM_FEATURE_DSP) && !MATMUL_MVE
    if (d->rhs_depth_stride == 1) {
        matmul_one_dsp(d, &o, lhs, rhs, out);
        return;
    }
#endif
    for (m = 0; m < d->rows; m += 2) {
        const int two_rows = m + 1 < d->rows;
        const int8_t *r0 = lhs + (ptrdiff_t)m * d->depth;
        const int8_t *r1 = two_rows ? r0 + d->depth : r0;
        int8_t *o0 = out + (ptrdiff_t)m * d->cols;
        for (n = 0; n < d->cols; n += 2) {
            const int two_cols = n + 1 < d->cols;
            const int8_t *c0 = rhs + (ptrdiff_t)n * d->rhs_col_stride;
            const int8_t *c1 = two_cols ? c0 + d->rhs_col_stride : c0;
            uint32_t acc[4];
            dot_2x2(d, r0, r1, c0, c1, acc);
            o0[n] = matmul_output_s8(&o, acc[0]);
            if (two_cols) {
                o0[n + 1] = matmul_output_s8(&o, acc[1]);
            }
            if (two_rows) {
                o0[d->cols + n] = matmul_output_s8(&o, acc[2]);
                if (two_cols) {
                    o0[d->cols + n + 1] = matmul_output_s8(&o, acc[3]);
                }
            }
        }
    }
}

edgec_status edgec_batch_matmul_s8(const edgec_batch_matmul_desc *desc, const int8_t *lhs, const int8_t *rhs,
                                   int8_t *output)
{
    int32_t index[EDGEC_MATMUL_MAX_BATCH_DIMS] = { 0 };
    ptrdiff_t lhs_at = 0, rhs_at = 0;
    const ptrdiff_t out_step = (ptrdiff_t)desc->rows * desc->cols;
    int32_t level;
    if (desc == NULL || lhs == NULL || rhs == NULL || output == NULL || !batch_matmul_desc_valid(desc)) {
        return EDGEC_ARG_ERROR;
    }
    for (;;) {
        matmul_one(desc, lhs + lhs_at, rhs + rhs_at, output);
        output += out_step;
        /* Odometer over the batch dimensions, innermost last. */
        for (level = desc->batch_rank - 1; level >= 0; level--) {
            lhs_at += desc->lhs_batch_strides[level];
            rhs_at += desc->rhs_batch_strides[level];
            if (++index[level] < desc->batch_dims[level]) {
                break;
            }
            lhs_at -= (ptrdiff_t)desc->lhs_batch_strides[level] * desc->batch_dims[level];
            rhs_at -= (ptrdiff_t)desc->rhs_batch_strides[level] * desc->batch_dims[level];
            index[level] = 0;
        }
        if (level < 0) {
            return EDGEC_OK;
        }
    }
}
