/*
 * edgec_embedding_s8.c -- nn.Embedding: rows of an int8 table picked by int32 token ids, each id
 * clamped to the table (a defined result for any id). Golden: edgec.ops.embedding.embedding_s8.
 */
#include <stddef.h>
#include <string.h>

#include "edgec_nn.h"

edgec_status edgec_embedding_s8(const edgec_embedding_desc *desc, const int32_t *ids, int8_t *output)
{
    int32_t i;

    if (desc == NULL || ids == NULL || output == NULL || desc->table == NULL || desc->count < 1 || desc->rows < 1 ||
        desc->dim < 1 || desc->count > INT32_MAX / desc->dim || desc->rows > INT32_MAX / desc->dim) {
        return EDGEC_ARG_ERROR;
    }
    for (i = 0; i < desc->count; ++i) {
        int32_t row = ids[i] < 0 ? 0 : (ids[i] >= desc->rows ? desc->rows - 1 : ids[i]);
        memcpy(output + i * desc->dim, desc->table + row * desc->dim, (size_t)desc->dim);
    }
    return EDGEC_OK;
}
