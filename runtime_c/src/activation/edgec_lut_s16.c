/*
 * edgec_lut_s16.c -- int16 -> int16 table lookup with linear interpolation (TFLite LUTLookup over
 * a 513-entry LUTPopulate<int16_t> table: int16 LOGISTIC, TANH, GELU...); golden:
 * edgec.ops.int16.lut_s16.
 */
#include "../support/edgec_support.h"

edgec_status edgec_lut_s16(const edgec_lut_s16_desc *desc, const int16_t *input, int16_t *output)
{
    if (!desc || !desc->table || !input || !output || desc->size < 1) {
        return EDGEC_ARG_ERROR;
    }
    for (int32_t i = 0; i < desc->size; i++) {
        output[i] = edgec_lut_lookup_s16(input[i], desc->table);
    }
    return EDGEC_OK;
}
