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

/* One [rows x cols] product: lhs rows contiguous, rhs read through its two strides. */
static void matmul_one(const edgec_batch_matmul_desc *d, const int8_t *lhs, const int8_t *rhs, int8_t *out)
{
    const edgec_output_stage stage = edgec_output_stage_make(d->output_offset, d->act_min, d->act_max);
    int32_t m, n, k;
    for (m = 0; m < d->rows; m++) {
        const int8_t *row = lhs + (ptrdiff_t)m * d->depth;
        for (n = 0; n < d->cols; n++) {
            const int8_t *col = rhs + (ptrdiff_t)n * d->rhs_col_stride;
            uint32_t acc = 0;
            for (k = 0; k < d->depth; k++) {
                const int32_t a = (int32_t)row[k] + d->lhs_offset;
                const int32_t b = (int32_t)col[(ptrdiff_t)k * d->rhs_depth_stride] + d->rhs_offset;
                acc += (uint32_t)(a * b);
            }
            *out++ = edgec_output_s8(stage, edgec_requantize((int32_t)acc, d->multiplier, d->shift));
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
