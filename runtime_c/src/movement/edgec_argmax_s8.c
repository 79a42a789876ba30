/*
 * edgec_argmax_s8.c -- the index of the largest int8 value along one axis (torch.argmax(x, dim)),
 * as int32, the first one where several are equal. Golden: edgec.ops.argmax.argmax_s8.
 */
#include <stddef.h>

#include "edgec_nn.h"

edgec_status edgec_argmax_s8(const edgec_argmax_desc *desc, const int8_t *input, int32_t *output)
{
    int32_t o;

    if (desc == NULL || input == NULL || output == NULL || desc->outer < 1 || desc->axis_size < 1 || desc->inner < 1 ||
        desc->inner > INT32_MAX / desc->axis_size || desc->outer > INT32_MAX / (desc->axis_size * desc->inner)) {
        return EDGEC_ARG_ERROR;
    }
    for (o = 0; o < desc->outer; ++o) {
        const int8_t *block = input + o * desc->axis_size * desc->inner;
        int32_t i;
        for (i = 0; i < desc->inner; ++i) {
            int32_t best = 0;
            int32_t a;
            for (a = 1; a < desc->axis_size; ++a) {
                if (block[a * desc->inner + i] > block[best * desc->inner + i]) {
                    best = a;
                }
            }
            output[o * desc->inner + i] = best;
        }
    }
    return EDGEC_OK;
}

/* 1 if (value a at index ia) comes before (value b at index ib) in topk's order: the better value
 * first (larger, or smaller with largest 0), equal values in index order. */
static int topk_before(int32_t a, int32_t ia, int32_t b, int32_t ib, int32_t largest)
{
    if (a != b) {
        return largest ? a > b : a < b;
    }
    return ia < ib;
}

edgec_status edgec_topk_s8(const edgec_topk_desc *desc, const int8_t *input, int8_t *values, int32_t *indices)
{
    int32_t o;

    if (desc == NULL || input == NULL || (values == NULL && indices == NULL) || desc->outer < 1 ||
        desc->axis_size < 1 || desc->inner < 1 || desc->k < 1 || desc->k > desc->axis_size ||
        (desc->largest != 0 && desc->largest != 1) || desc->inner > INT32_MAX / desc->axis_size ||
        desc->outer > INT32_MAX / (desc->axis_size * desc->inner)) {
        return EDGEC_ARG_ERROR;
    }
    /* The j-th output is the best element that comes after the (j-1)-th in topk's order: k passes
     * over the axis, no scratch (k and the axis are small where topk is an output). */
    for (o = 0; o < desc->outer; ++o) {
        const int8_t *block = input + o * desc->axis_size * desc->inner;
        int32_t i;
        for (i = 0; i < desc->inner; ++i) {
            int32_t previous = -1;
            int32_t j;
            for (j = 0; j < desc->k; ++j) {
                int32_t best = -1;
                int32_t a;
                for (a = 0; a < desc->axis_size; ++a) {
                    int32_t value = block[a * desc->inner + i];
                    if (previous >= 0 &&
                        !topk_before(block[previous * desc->inner + i], previous, value, a, desc->largest)) {
                        continue; /* already taken */
                    }
                    if (best < 0 || topk_before(value, a, block[best * desc->inner + i], best, desc->largest)) {
                        best = a;
                    }
                }
                previous = best;
                if (values != NULL) {
                    values[(o * desc->k + j) * desc->inner + i] = block[best * desc->inner + i];
                }
                if (indices != NULL) {
                    indices[(o * desc->k + j) * desc->inner + i] = best;
                }
            }
        }
    }
    return EDGEC_OK;
}
