/*
 * edgec_clamp_s8.c -- standalone int8 clamp, in place (portable C99 path).
 *
 * Used only when an activation cannot be fused into the producer's act_min/act_max (e.g. it
 * follows a graph input or a view). Golden: edgec.ops.eltwise.clamp_s8.
 */
#include <stddef.h>

#include "edgec_nn.h"
#include "../support/edgec_support.h"

edgec_status edgec_clamp_s8(const edgec_clamp_s8_desc *desc, int8_t *data)
{
    int8_t *end;
    int8_t lo, hi;

    if (desc == NULL || data == NULL || desc->size < 0 || !edgec_act_range_valid(desc->act_min, desc->act_max)) {
        return EDGEC_ARG_ERROR;
    }
    end = data + desc->size;
    lo = (int8_t)desc->act_min;
    hi = (int8_t)desc->act_max;
    for (; data < end; ++data) {
        const int8_t v = *data;
        *data = v < lo ? lo : (v > hi ? hi : v);
    }
    return EDGEC_OK;
}
