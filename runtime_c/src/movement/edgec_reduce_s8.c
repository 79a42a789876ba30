/*
 * edgec_reduce_s8.c -- int8 reductions over any set of axes: max and min of the raw values, and
 * TFLite Micro's int8 SUM / MEAN (tensorflow/lite/micro/kernels/reduce_common.cc ->
 * reference_ops::QuantizedMeanOrSum in tensorflow/lite/kernels/internal/reference/reduce.h):
 *   y = clamp(MultiplyByQuantizedMultiplier(sum - zp_in * n, multiplier, shift) + zp_out)
 * where a mean's multiplier and shift already include the 1/n (edgec.ops.movement.reduce_desc
 * computes them as TFLite does). The sum is exact in int32 (n <= 2^23), as TFLite's int32
 * accumulator is then. Golden: edgec.ops.movement.reduce_s8.
 *
 * Each output walks its reduced loops (an odometer over the outer ones, a tight loop over the
 * innermost); outputs follow the kept loops in order, so the output is written sequentially.
 */
#include <stddef.h>

#include "edgec_nn.h"
#include "../support/edgec_support.h"

#define MAX_REDUCED (1 << 23)

/* The loops are valid: 0..EDGEC_MAX_DIMS of them, dims >= 1, strides >= 0, every offset (and
 * dims * stride) inside int32; *count gets the product of the dims. */
static int loops_valid(int32_t rank, const int32_t *dims, const int32_t *strides, int64_t *count, int64_t *reach)
{
    if (rank < 0 || rank > EDGEC_MAX_DIMS) {
        return 0;
    }
    *count = 1;
    for (int32_t k = 0; k < rank; ++k) {
        if (dims[k] < 1 || strides[k] < 0 || (int64_t)dims[k] * strides[k] > INT32_MAX) {
            return 0;
        }
        *count *= dims[k];
        *reach += (int64_t)(dims[k] - 1) * strides[k];
        if (*count > INT32_MAX || *reach > INT32_MAX) {
            return 0;
        }
    }
    return 1;
}

static int32_t sum_run(const int8_t *p, int32_t n, int32_t stride, int32_t acc)
{
    for (int32_t k = 0, at = 0; k < n; ++k, at += stride) {
        acc += p[at];
    }
    return acc;
}

static int32_t max_run(const int8_t *p, int32_t n, int32_t stride, int32_t best)
{
    for (int32_t k = 0, at = 0; k < n; ++k, at += stride) {
        best = p[at] > best ? p[at] : best;
    }
    return best;
}

static int32_t min_run(const int8_t *p, int32_t n, int32_t stride, int32_t best)
{
    for (int32_t k = 0, at = 0; k < n; ++k, at += stride) {
        best = p[at] < best ? p[at] : best;
    }
    return best;
}

/* The sum, max or min of the elements the reduced loops reach from p. */
static int32_t reduce_one(const edgec_reduce_desc *desc, const int8_t *p)
{
    int32_t index[EDGEC_MAX_DIMS] = { 0 };
    const int32_t rank = desc->reduced_rank;
    const int32_t n = rank > 0 ? desc->reduced_dims[rank - 1] : 1;
    const int32_t stride = rank > 0 ? desc->reduced_strides[rank - 1] : 0;
    int32_t acc = desc->op == EDGEC_REDUCE_SUM ? 0 : (desc->op == EDGEC_REDUCE_MAX ? INT8_MIN : INT8_MAX);
    int32_t off = 0;
    for (;;) {
        int32_t k;
        switch (desc->op) {
            case EDGEC_REDUCE_SUM: acc = sum_run(p + off, n, stride, acc); break;
            case EDGEC_REDUCE_MAX: acc = max_run(p + off, n, stride, acc); break;
            default: acc = min_run(p + off, n, stride, acc); break;
        }
        for (k = rank - 2; k >= 0; --k) {
            if (++index[k] < desc->reduced_dims[k]) {
                off += desc->reduced_strides[k];
                break;
            }
            index[k] = 0;
            off -= (desc->reduced_dims[k] - 1) * desc->reduced_strides[k];
        }
        if (k < 0) {
            return acc;
        }
    }
}

edgec_status edgec_reduce_s8(const edgec_reduce_desc *desc, const int8_t *input, int8_t *output)
{
    int32_t index[EDGEC_MAX_DIMS] = { 0 };
    int64_t outputs, reduced, reach = 0;
    int32_t off = 0;
    edgec_output_stage stage;

    if (desc == NULL || input == NULL || output == NULL ||
        (desc->op != EDGEC_REDUCE_MAX && desc->op != EDGEC_REDUCE_MIN && desc->op != EDGEC_REDUCE_SUM) ||
        !loops_valid(desc->kept_rank, desc->kept_dims, desc->kept_strides, &outputs, &reach) ||
        !loops_valid(desc->reduced_rank, desc->reduced_dims, desc->reduced_strides, &reduced, &reach) ||
        reduced > MAX_REDUCED || !edgec_shift_valid(desc->shift) || desc->multiplier < 0 ||
        !edgec_act_range_valid(desc->act_min, desc->act_max)) {
        return EDGEC_ARG_ERROR;
    }
    stage = edgec_output_stage_make(desc->output_offset, desc->act_min, desc->act_max);
    for (int64_t o = 0; o < outputs; ++o) {
        int32_t k;
        const int32_t value = reduce_one(desc, input + off);
        if (desc->op == EDGEC_REDUCE_SUM) {
            /* |sum| and |sum_offset| are at most 128 * 2^23 when sum_offset comes from reduce_desc;
             * any other sum_offset wraps like TFLite's int32 subtraction would. */
            const int32_t shifted = (int32_t)((uint32_t)value + (uint32_t)desc->sum_offset);
            output[o] = edgec_requantize_s8(shifted, desc->multiplier, desc->shift, stage);
        } else {
            output[o] = edgec_clamp_to_s8(value, desc->act_min, desc->act_max);
        }
        for (k = desc->kept_rank - 1; k >= 0; --k) {
            if (++index[k] < desc->kept_dims[k]) {
                off += desc->kept_strides[k];
                break;
            }
            index[k] = 0;
            off -= (desc->kept_dims[k] - 1) * desc->kept_strides[k];
        }
    }
    return EDGEC_OK;
}
