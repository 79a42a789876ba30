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
