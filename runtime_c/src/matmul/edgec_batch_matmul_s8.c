/*
 * edgec_batch_matmul_s8.c -- int8 x int8 -> int8 matrix products with broadcast batch dimensions
 * (TFLite Micro's int8 BATCH_MATMUL arithmetic; golden: edgec.ops.matmul.batch_matmul_s8).
 *
 * acc = sum_k (lhs[m][k] + lhs_offset) * (rhs[k][n] + rhs_offset), accumulated in uint32_t (the
 * int32 wrap the golden models; |product| <= 255 * 255, so it never wraps below 2^16 terms), then
 * out = clamp(requantize(acc, multiplier, shift) + output_offset, act_min, act_max).
 */
#include <stddef.h>

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

/* Dot products of lhs rows r0, r1 with rhs columns c0, c1 over the depth: each operand value is
 * loaded and offset once for two products (2 x 2 register block; pointers may alias when the
 * caller has one row or one column left, then the duplicate sums are simply not stored). */
static void dot_2x2(const edgec_batch_matmul_desc *d, const int8_t *r0, const int8_t *r1, const int8_t *c0,
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

/* One [rows x cols] product: lhs rows contiguous, rhs read through its two strides, two rows by
 * two columns at a time. */
static void matmul_one(const edgec_batch_matmul_desc *d, const int8_t *lhs, const int8_t *rhs, int8_t *out)
{
    const edgec_output_stage stage = edgec_output_stage_make(d->output_offset, d->act_min, d->act_max);
    int32_t m, n;
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
            o0[n] = edgec_output_s8(stage, edgec_requantize((int32_t)acc[0], d->multiplier, d->shift));
            if (two_cols) {
                o0[n + 1] = edgec_output_s8(stage, edgec_requantize((int32_t)acc[1], d->multiplier, d->shift));
            }
            if (two_rows) {
                o0[d->cols + n] = edgec_output_s8(stage, edgec_requantize((int32_t)acc[2], d->multiplier, d->shift));
                if (two_cols) {
                    o0[d->cols + n + 1] =
                        edgec_output_s8(stage, edgec_requantize((int32_t)acc[3], d->multiplier, d->shift));
                }
            }
        }
    }
}

edgec_status edgec_batch_matmul_s8(const edgec_batch_matmul_desc *desc, const int8_t *lhs, const int8_t *rhs,
                                   int8_t *output)
{
    int32_t index[EDGEC_MATMUL_MAX_BATCH_DIMS] = {0};
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
