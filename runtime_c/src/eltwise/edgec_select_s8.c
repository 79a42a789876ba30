/*
 * edgec_select_s8.c -- torch.where / masked_fill on a comparison, int8: output = condition ? a : b
 * elementwise with NumPy broadcasting, the bytes of a or b moved unchanged. The portable C99
 * path, for every core.
 *
 * The descriptor's layout (edgec_nn.h) is walked row by row: a row is the innermost dimension,
 * read from each operand at its innermost stride; the outer dimensions move each operand's row
 * start (an odometer over integer offsets, so an unread x2 never becomes a pointer).
 * Golden: edgec.ops.select.select_s8 (descriptor from select_desc).
 */
#include <stddef.h>

#include "edgec_nn.h"

#define SELECT_OPERANDS 4 /* x1, x2, a, b: the order of strides[] below */

/* No more than INT32_MAX output elements, and no operand read beyond INT32_MAX elements from its
 * start, so every index and offset below fits int32. `used` operands only (x2 unread with a table). */
static int layout_valid(const edgec_select_desc *d, const int32_t *const strides[SELECT_OPERANDS], int32_t used)
{
    int64_t size = 1;
    int64_t last[SELECT_OPERANDS] = { 0, 0, 0, 0 };
    if (d->num_dims < 1 || d->num_dims > EDGEC_SELECT_MAX_DIMS) {
        return 0;
    }
    for (int32_t k = 0; k < d->num_dims; k++) {
        if (d->dims[k] < 1) {
            return 0;
        }
        size *= d->dims[k];
        if (size > INT32_MAX) {
            return 0;
        }
        for (int32_t j = 0; j < SELECT_OPERANDS; j++) {
            if (!(used & (1 << j))) {
                continue;
            }
            if (strides[j][k] < 0) {
                return 0;
            }
            last[j] += (int64_t)(d->dims[k] - 1) * strides[j][k];
            if (last[j] > INT32_MAX) {
                return 0;
            }
        }
    }
    return 1;
}

/* One row through the table: out[i] = table[x1[i * s1] + 128] ? a[i * sa] : b[i * sb]. Element i
 * of every operand is read before out[i] is written, so out may be an unbroadcast operand. */
static void table_row(const int8_t *table, const int8_t *x1, int32_t s1, const int8_t *a, int32_t sa, const int8_t *b,
                      int32_t sb, int8_t *out, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        out[i] = table[x1[i * s1] + 128] ? a[i * sa] : b[i * sb];
    }
}

/* One row of `x1 OP x2 ? a : b` (OP a constant where this is expanded). */
#define COMPARE_ROW(OP)                                              \
    for (int32_t i = 0; i < n; i++) {                                \
        out[i] = (x1[i * s1] OP x2[i * s2]) ? a[i * sa] : b[i * sb]; \
    }

/* One row by the raw comparison, s[] the innermost strides of x1, x2, a, b; in place as table_row. */
static void compare_row(int32_t cmp, const int8_t *x1, const int8_t *x2, const int8_t *a, const int8_t *b,
                        const int32_t s[SELECT_OPERANDS], int8_t *out, int32_t n)
{
    /* In registers: stores through out may alias s[]. */
    const int32_t s1 = s[0];
    const int32_t s2 = s[1];
    const int32_t sa = s[2];
    const int32_t sb = s[3];
    switch (cmp) {
        case EDGEC_SELECT_GT: COMPARE_ROW(>) break;
        case EDGEC_SELECT_GE: COMPARE_ROW(>=) break;
        case EDGEC_SELECT_LT: COMPARE_ROW(<) break;
        case EDGEC_SELECT_LE: COMPARE_ROW(<=) break;
        case EDGEC_SELECT_EQ: COMPARE_ROW(==) break;
        default: /* EDGEC_SELECT_NE, the only code left after validation */ COMPARE_ROW(!=) break;
    }
}

edgec_status edgec_select_s8(const edgec_select_desc *desc, const int8_t *x1, const int8_t *x2, const int8_t *a,
                             const int8_t *b, int8_t *output)
{
    if (desc == NULL || x1 == NULL || a == NULL || b == NULL || output == NULL || (desc->table == NULL && x2 == NULL)) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t *const strides[SELECT_OPERANDS] = { desc->x1_strides, desc->x2_strides, desc->a_strides,
                                                      desc->b_strides };
    const int32_t used = desc->table != NULL ? 0xD : 0xF; /* bit j: operand j is read */
    if (desc->cmp < EDGEC_SELECT_GT || desc->cmp > EDGEC_SELECT_NE || !layout_valid(desc, strides, used)) {
        return EDGEC_ARG_ERROR;
    }
    const int32_t inner = desc->num_dims - 1;
    const int32_t n = desc->dims[inner];
    int32_t rows = 1;
    for (int32_t k = 0; k < inner; k++) {
        rows *= desc->dims[k];
    }
    /* Per dimension and operand: its stride and its wrap (dims - 1) * stride, 0 for an operand not
     * read, so the odometer below moves all four offsets without tests. */
    int32_t stride[EDGEC_SELECT_MAX_DIMS][SELECT_OPERANDS];
    int32_t back[EDGEC_SELECT_MAX_DIMS][SELECT_OPERANDS];
    for (int32_t k = 0; k <= inner; k++) {
        for (int32_t j = 0; j < SELECT_OPERANDS; j++) {
            stride[k][j] = (used & (1 << j)) ? strides[j][k] : 0;
            back[k][j] = (desc->dims[k] - 1) * stride[k][j];
        }
    }
    int32_t offset[SELECT_OPERANDS] = { 0, 0, 0, 0 };
    int32_t index[EDGEC_SELECT_MAX_DIMS] = { 0 };
    for (int32_t r = 0; r < rows; r++) {
        int8_t *out = output + r * n;
        if (desc->table != NULL) {
            table_row(desc->table, x1 + offset[0], stride[inner][0], a + offset[2], stride[inner][2], b + offset[3],
                      stride[inner][3], out, n);
        } else {
            compare_row(desc->cmp, x1 + offset[0], x2 + offset[1], a + offset[2], b + offset[3], stride[inner], out, n);
        }
        /* The next row: odometer order over the outer dimensions, the last fastest. */
        for (int32_t k = inner - 1; k >= 0; k--) {
            if (++index[k] < desc->dims[k]) {
                for (int32_t j = 0; j < SELECT_OPERANDS; j++) {
                    offset[j] += stride[k][j];
                }
                break;
            }
            index[k] = 0;
            for (int32_t j = 0; j < SELECT_OPERANDS; j++) {
                offset[j] -= back[k][j];
            }
        }
    }
    return EDGEC_OK;
}
