/*
 * edgec_binary_s8.c -- int8 elementwise binary ops with NumPy broadcasting (add, sub, mul,
 * minimum, maximum) and PReLU: the portable C99 path, the reference of the packed variants
 * edgec_binary_s8_dsp.c (Arm DSP extension) and edgec_binary_s8_mve.c (Helium). The layout walk
 * and the portable plane functions they share are in edgec_binary_s8_plane.h.
 * Golden: edgec.ops.binary.binary_s8 and prelu_s8 (descriptors from binary_desc, prelu_desc).
 */
#include "edgec_binary_s8_plane.h"

edgec_status edgec_binary_s8(const edgec_binary_desc *desc, const int8_t *input1, const int8_t *input2, int8_t *output)
{
    if (!binary_args_valid(desc, input1, input2, output)) {
        return EDGEC_ARG_ERROR;
    }
    const binary_ctx ctx = binary_ctx_make(desc);
    binary_desc_planes(&ctx, portable_plane(desc->op), input1, input2, output);
    return EDGEC_OK;
}

/* ==== PReLU ================================================================================== */

static int prelu_desc_valid(const edgec_prelu_desc *d)
{
    return layout_valid(d->num_dims, d->dims, d->input_strides, d->alpha_strides) && d->input_offset >= -127 &&
           d->input_offset <= 128 && d->alpha_offset >= -127 && d->alpha_offset <= 128 && d->output_offset >= -128 &&
           d->output_offset <= 127 && d->identity_multiplier >= 0 && d->alpha_multiplier >= 0 &&
           edgec_shift_valid(d->identity_shift) && edgec_shift_valid(d->alpha_shift) &&
           edgec_act_range_valid(d->act_min, d->act_max);
}

/* PReLU of one input value: v * (alpha + offset) is within 255 * 255. */
static inline int8_t prelu_value(const edgec_prelu_desc *d, edgec_output_stage stage, int32_t x, int32_t alpha)
{
    const int32_t v = x + d->input_offset;
    const int32_t r = v >= 0 ? edgec_requantize(v, d->identity_multiplier, d->identity_shift)
                             : edgec_requantize(v * (alpha + d->alpha_offset), d->alpha_multiplier, d->alpha_shift);
    return edgec_output_s8(stage, r);
}

/* One row of PReLU, a binary_row_fn (input as input1, alpha as input2). */
static inline void prelu_row(const binary_ctx *ctx, const int8_t *input, int32_t input_step, const int8_t *alpha,
                             int32_t alpha_step, int8_t *out, int32_t n)
{
    const edgec_prelu_desc d = *ctx->prelu; /* in registers: stores through out may alias it */
    const edgec_output_stage stage = ctx->stage;
    for (int32_t i = 0; i < n; i++) {
        out[i] = prelu_value(&d, stage, input[i * input_step], alpha[i * alpha_step]);
    }
}

/*
 * The table path: PReLU of an int8 input under one alpha is a function of the input byte, so a
 * 256-entry table (built with prelu_value, hence bit-exact by construction) replaces the
 * requantizations. Its non-negative part (v >= 0) does not depend on alpha and is built once;
 * the negative part once per distinct alpha. It pays when the plane has more elements than the
 * table entries it computes; each element then costs a load, a table load and a store.
 */
typedef struct {
    int8_t entry[256]; /* entry[x + 128] */
    int32_t negatives; /* entries 0 .. negatives-1 are the v < 0 inputs */
} prelu_table;

/* entry[k] for k in [from, to) under `alpha` (inlined: the hot loop of the table path's set-up). */
static inline void prelu_table_fill(prelu_table *t, const edgec_prelu_desc *d, edgec_output_stage stage, int32_t alpha,
                                    int32_t from, int32_t to)
{
    for (int32_t k = from; k < to; k++) {
        t->entry[k] = prelu_value(d, stage, k - 128, alpha);
    }
}

static int32_t prelu_negatives(const edgec_prelu_desc *d)
{
    return EDGEC_MIN(EDGEC_MAX(-d->input_offset + 128, 0), 256);
}

/* out[r * out_step] = table[in[r * in_step]] for r < rows, four at a time. */
static void prelu_table_apply(const int8_t *table, const int8_t *in, int32_t in_step, int8_t *out, int32_t out_step,
                              int32_t rows)
{
    const int8_t *const t = table + 128;
    int32_t r = 0;
    for (; r + 4 <= rows; r += 4) {
        const int32_t x0 = in[0], x1 = in[in_step], x2 = in[2 * in_step], x3 = in[3 * in_step];
        out[0] = t[x0];
        out[out_step] = t[x1];
        out[2 * out_step] = t[x2];
        out[3 * out_step] = t[x3];
        in += 4 * in_step;
        out += 4 * out_step;
    }
    for (; r < rows; r++) {
        *out = t[*in];
        in += in_step;
        out += out_step;
    }
}

/* Whether a plane's elements outnumber the table entries it would compute. */
static int prelu_table_pays(const edgec_prelu_desc *d, const binary_plane *p)
{
    const int64_t negatives = prelu_negatives(d);
    const int64_t alphas = p->step2 != 0 ? p->n : 1;
    return (int64_t)p->rows * p->n > (256 - negatives) + negatives * alphas;
}

/* A plane whose per-alpha tables do not pay but whose elements outnumber the alpha-independent
 * half (v >= 0) several times over: that half from the table, the negative inputs computed. */
static void prelu_half_table_rows(const binary_ctx *ctx, const binary_plane *p, const prelu_table *t,
                                  const int8_t *input, const int8_t *alpha, int8_t *out)
{
    const edgec_prelu_desc d = *ctx->prelu;
    const int32_t first_identity = t->negatives - 128; /* inputs from here up have v >= 0 */
    for (int32_t r = 0; r < p->rows; r++) {
        const int8_t *in = input + r * p->outer1;
        const int8_t *a = alpha + r * p->outer2;
        int8_t *o = out + r * p->n;
        for (int32_t i = 0; i < p->n; i++) {
            const int32_t x = in[i * p->step1];
            o[i] = x >= first_identity ? t->entry[x + 128] : prelu_value(&d, ctx->stage, x, a[i * p->step2]);
        }
    }
}

/* Whether the v >= 0 half of the table pays on its own (4x its entries: about half the inputs
 * of a plane are non-negative, and a table entry costs about what an element does). */
static int prelu_half_table_pays(const edgec_prelu_desc *d, const binary_plane *p)
{
    return (int64_t)p->rows * p->n >= 4 * (int64_t)(256 - prelu_negatives(d));
}

/* Reads each element before writing the same position (in place when input is output). */
static void prelu_plane(const binary_ctx *ctx, const binary_plane *p, const int8_t *input, const int8_t *alpha,
                        int8_t *out)
{
    const edgec_prelu_desc d = *ctx->prelu;
    const int whole = p->outer2 == 0 && prelu_table_pays(&d, p);
    if (!whole && !prelu_half_table_pays(&d, p)) { /* a small plane: element by element */
        plane_rows(ctx, p, input, alpha, out, prelu_row);
        return;
    }
    prelu_table t;
    t.negatives = prelu_negatives(&d);
    prelu_table_fill(&t, &d, ctx->stage, 0, t.negatives, 256); /* v >= 0: alpha is not used */
    if (!whole) {
        prelu_half_table_rows(ctx, p, &t, input, alpha, out);
        return;
    }
    if (p->step2 == 0) { /* one alpha for the plane: row after row */
        prelu_table_fill(&t, &d, ctx->stage, alpha[0], 0, t.negatives);
        for (int32_t r = 0; r < p->rows; r++) {
            prelu_table_apply(t.entry, input + r * p->outer1, p->step1, out + r * p->n, 1, p->n);
        }
        return;
    }
    for (int32_t i = 0; i < p->n; i++) { /* one alpha per column (channel): column after column */
        prelu_table_fill(&t, &d, ctx->stage, alpha[i * p->step2], 0, t.negatives);
        prelu_table_apply(t.entry, input + i * p->step1, p->outer1, out + i, p->n, p->rows);
    }
}

edgec_status edgec_prelu_s8(const edgec_prelu_desc *desc, const int8_t *input, const int8_t *alpha, int8_t *output)
{
    if (desc == NULL || input == NULL || alpha == NULL || output == NULL || !prelu_desc_valid(desc)) {
        return EDGEC_ARG_ERROR;
    }
    binary_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.prelu = desc;
    ctx.stage = edgec_output_stage_make(desc->output_offset, desc->act_min, desc->act_max);
    binary_planes(&ctx, prelu_plane, desc->num_dims, desc->dims, desc->input_strides, desc->alpha_strides, input, alpha,
                  output);
    return EDGEC_OK;
}

/* ==== PReLU through tables made at compile time ============================================== */

/* A plane of the lookup path: `tables` is the plane's first alpha's table (at its entry for input
 * 0), the plane's alpha steps scaled to whole tables by the caller. Reads each element before
 * writing the same position. */
static void prelu_lookup_plane(const binary_ctx *ctx, const binary_plane *p, const int8_t *input, const int8_t *tables,
                               int8_t *out)
{
    (void)ctx;
    if (p->outer2 == 0) { /* one table per column (channel) or for the plane: column after column */
        for (int32_t i = 0; i < p->n; i++) {
            prelu_table_apply(tables + i * p->step2 - 128, input + i * p->step1, p->outer1, out + i, p->n, p->rows);
        }
        return;
    }
    for (int32_t r = 0; r < p->rows; r++) {
        const int8_t *in = input + r * p->outer1;
        const int8_t *t = tables + r * p->outer2;
        int8_t *o = out + r * p->n;
        for (int32_t i = 0; i < p->n; i++) {
            o[i] = t[i * p->step2 + in[i * p->step1]];
        }
    }
}

edgec_status edgec_prelu_s8_lookup(const edgec_prelu_desc *desc, const int8_t *tables, const int8_t *input,
                                   int8_t *output)
{
    int32_t table_strides[EDGEC_BINARY_MAX_DIMS];
    int64_t last_table = 0;
    if (desc == NULL || tables == NULL || input == NULL || output == NULL || !prelu_desc_valid(desc)) {
        return EDGEC_ARG_ERROR;
    }
    for (int32_t d = 0; d < desc->num_dims; d++) { /* every table offset fits int32 */
        last_table += (int64_t)(desc->dims[d] - 1) * desc->alpha_strides[d];
        if (last_table >= INT32_MAX / 256 - 1) {
            return EDGEC_ARG_ERROR;
        }
        /* a dimension of one is never stepped along: its stride may be anything */
        table_strides[d] = desc->dims[d] > 1 ? desc->alpha_strides[d] * 256 : 0;
    }
    binary_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.prelu = desc;
    binary_planes(&ctx, prelu_lookup_plane, desc->num_dims, desc->dims, desc->input_strides, table_strides, input,
                  tables + 128, output);
    return EDGEC_OK;
}
