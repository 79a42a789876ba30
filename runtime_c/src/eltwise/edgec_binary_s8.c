/*
 * edgec_binary_s8.c -- int8 elementwise binary ops with NumPy broadcasting (add, sub, mul,
 * minimum, maximum) and PReLU: the portable C99 path (the reference) and, on Arm cores with the
 * DSP extension or Helium, edgec_binary_s8_dsp/_mve.
 *
 * The descriptor's layout (edgec_nn.h) is walked as rows: the innermost dimension is one row of
 * dims[num_dims-1] contiguous output bytes, read from each input at a fixed step (its innermost
 * stride, 0 when broadcast); the outer dimensions only move the rows' starting offsets. The
 * arithmetic is TFLite's reference int8 ADD, SUB, MUL, MINIMUM/MAXIMUM and PRELU.
 * Golden: edgec.ops.binary.binary_s8 and prelu_s8 (descriptors from binary_desc, prelu_desc).
 */
#include <stddef.h>
#include <string.h>

#include "edgec_nn.h"
#include "../support/edgec_support.h"

/* (x + offset) is within [-255, 255]; 255 * 2^23 still fits int32, so 23 is the largest safe
 * left shift of an add/sub operand. */
#define BINARY_MAX_LEFT_SHIFT 23

/* ==== Layout ================================================================================= */

/* No more than INT32_MAX output elements, and no input read beyond INT32_MAX elements from its
 * start, so every index and offset below fits int32. */
static int layout_valid(int32_t num_dims, const int32_t *dims, const int32_t *strides1,
                        const int32_t *strides2)
{
    int64_t size = 1;
    int64_t last1 = 0;
    int64_t last2 = 0;
    if (num_dims < 1 || num_dims > EDGEC_BINARY_MAX_DIMS) {
        return 0;
    }
    for (int32_t d = 0; d < num_dims; d++) {
        if (dims[d] < 1 || strides1[d] < 0 || strides2[d] < 0) {
            return 0;
        }
        size *= dims[d];
        last1 += (int64_t)(dims[d] - 1) * strides1[d];
        last2 += (int64_t)(dims[d] - 1) * strides2[d];
        if (size > INT32_MAX || last1 > INT32_MAX || last2 > INT32_MAX) {
            return 0;
        }
    }
    return 1;
}

/* Where the rows start: the index of the current row along each outer dimension and the two
 * inputs' offsets there. */
typedef struct {
    int32_t index[EDGEC_BINARY_MAX_DIMS];
    int32_t offset1;
    int32_t offset2;
} row_walk;

/* Move to the next row (odometer order over dims[0 .. outer-1], the last fastest). The offsets
 * stay within the inputs' validated extents. */
static void next_row(row_walk *walk, int32_t outer, const int32_t *dims, const int32_t *strides1,
                     const int32_t *strides2)
{
    for (int32_t d = outer - 1; d >= 0; d--) {
        if (walk->index[d] + 1 < dims[d]) {
            walk->index[d]++;
            walk->offset1 += strides1[d];
            walk->offset2 += strides2[d];
            return;
        }
        walk->offset1 -= (dims[d] - 1) * strides1[d];
        walk->offset2 -= (dims[d] - 1) * strides2[d];
        walk->index[d] = 0;
    }
}

/* ==== The binary ops ========================================================================= */

/* What a row needs, computed once per call. */
typedef struct {
    const edgec_binary_desc *desc; /* edgec_binary_s8 */
    const edgec_prelu_desc *prelu; /* edgec_prelu_s8 */
    edgec_output_stage stage;
    int32_t scale; /* 2^left_shift */
#if defined(__ARM_FEATURE_DSP)
    edgec_dsp_requant requant; /* MUL's output requantization, when it admits the short form */
#endif
} binary_ctx;

/* One row: out[i] = op(in1[i * step1], in2[i * step2]) for i < n. Every row function reads
 * element i of both inputs (or, packed, elements i..i+k) before it writes output element i (i..i+k),
 * so the output may be an unbroadcast input exactly. */
typedef void (*binary_row_fn)(const binary_ctx *ctx, const int8_t *in1, int32_t step1,
                              const int8_t *in2, int32_t step2, int8_t *out, int32_t n);

static int binary_desc_valid(const edgec_binary_desc *d)
{
    return d->op >= EDGEC_BINARY_ADD && d->op <= EDGEC_BINARY_MAXIMUM &&
           layout_valid(d->num_dims, d->dims, d->strides1, d->strides2) &&
           d->input1_offset >= -127 && d->input1_offset <= 128 && d->input2_offset >= -127 &&
           d->input2_offset <= 128 && d->output_offset >= -128 && d->output_offset <= 127 &&
           d->left_shift >= 0 && d->left_shift <= BINARY_MAX_LEFT_SHIFT &&
           d->input1_multiplier >= 0 && d->input2_multiplier >= 0 && d->output_multiplier >= 0 &&
           edgec_shift_valid(d->input1_shift) && edgec_shift_valid(d->input2_shift) &&
           edgec_shift_valid(d->output_shift) && edgec_act_range_valid(d->act_min, d->act_max);
}

/* An add/sub operand on the common grid: requantize((x + offset) * 2^left_shift, m, shift).
 * Multiplying by scale instead of `<<`: left-shifting a negative value is UB in C99. */
static inline int32_t rescaled(int32_t x, int32_t offset, int32_t scale, int32_t multiplier,
                               int32_t shift)
{
    return edgec_requantize((x + offset) * scale, multiplier, shift);
}

static void add_row(const binary_ctx *ctx, const int8_t *in1, int32_t step1, const int8_t *in2,
                    int32_t step2, int8_t *out, int32_t n)
{
    const edgec_binary_desc *d = ctx->desc;
    for (int32_t i = 0; i < n; i++) {
        const int32_t a = rescaled(in1[i * step1], d->input1_offset, ctx->scale,
                                   d->input1_multiplier, d->input1_shift);
        const int32_t b = rescaled(in2[i * step2], d->input2_offset, ctx->scale,
                                   d->input2_multiplier, d->input2_shift);
        /* through uint32_t: a + b may exceed int32 with arbitrary multipliers, which the golden
         * models as a two's-complement wrap */
        const int32_t sum = (int32_t)((uint32_t)a + (uint32_t)b);
        out[i] = edgec_requantize_s8(sum, d->output_multiplier, d->output_shift, ctx->stage);
    }
}

static void sub_row(const binary_ctx *ctx, const int8_t *in1, int32_t step1, const int8_t *in2,
                    int32_t step2, int8_t *out, int32_t n)
{
    const edgec_binary_desc *d = ctx->desc;
    for (int32_t i = 0; i < n; i++) {
        const int32_t a = rescaled(in1[i * step1], d->input1_offset, ctx->scale,
                                   d->input1_multiplier, d->input1_shift);
        const int32_t b = rescaled(in2[i * step2], d->input2_offset, ctx->scale,
                                   d->input2_multiplier, d->input2_shift);
        const int32_t difference = (int32_t)((uint32_t)a - (uint32_t)b);
        out[i] = edgec_requantize_s8(difference, d->output_multiplier, d->output_shift, ctx->stage);
    }
}

/* (x1 + o1) * (x2 + o2) is within 255 * 255: no overflow. */
static void mul_row(const binary_ctx *ctx, const int8_t *in1, int32_t step1, const int8_t *in2,
                    int32_t step2, int8_t *out, int32_t n)
{
    const edgec_binary_desc *d = ctx->desc;
    for (int32_t i = 0; i < n; i++) {
        const int32_t product = (in1[i * step1] + d->input1_offset) * (in2[i * step2] + d->input2_offset);
        out[i] = edgec_requantize_s8(product, d->output_multiplier, d->output_shift, ctx->stage);
    }
}

static void minimum_row(const binary_ctx *ctx, const int8_t *in1, int32_t step1,
                        const int8_t *in2, int32_t step2, int8_t *out, int32_t n)
{
    const edgec_binary_desc *d = ctx->desc;
    for (int32_t i = 0; i < n; i++) {
        out[i] = edgec_clamp_to_s8(EDGEC_MIN(in1[i * step1], in2[i * step2]), d->act_min, d->act_max);
    }
}

static void maximum_row(const binary_ctx *ctx, const int8_t *in1, int32_t step1,
                        const int8_t *in2, int32_t step2, int8_t *out, int32_t n)
{
    const edgec_binary_desc *d = ctx->desc;
    for (int32_t i = 0; i < n; i++) {
        out[i] = edgec_clamp_to_s8(EDGEC_MAX(in1[i * step1], in2[i * step2]), d->act_min, d->act_max);
    }
}

static binary_row_fn portable_row(int32_t op)
{
    static const binary_row_fn rows[] = {add_row, sub_row, mul_row, minimum_row, maximum_row};
    return rows[op];
}

static binary_ctx binary_ctx_make(const edgec_binary_desc *desc)
{
    binary_ctx ctx;
    ctx.desc = desc;
    ctx.prelu = NULL;
    ctx.stage = edgec_output_stage_make(desc->output_offset, desc->act_min, desc->act_max);
    ctx.scale = (int32_t)1 << desc->left_shift;
#if defined(__ARM_FEATURE_DSP)
    ctx.requant.multiplier = 0;
    ctx.requant.round_high = 0;
    ctx.requant.shift = 0;
    if (edgec_dsp_requant_short(desc->output_multiplier, desc->output_shift)) {
        ctx.requant = edgec_dsp_requant_make(desc->output_multiplier, desc->output_shift,
                                             edgec_dsp_round_base(desc->output_offset));
    }
#endif
    return ctx;
}

/* Every row of a layout through `row`. */
static void binary_rows(const binary_ctx *ctx, binary_row_fn row, int32_t num_dims,
                        const int32_t *dims, const int32_t *strides1, const int32_t *strides2,
                        const int8_t *input1, const int8_t *input2, int8_t *output)
{
    const int32_t outer = num_dims - 1;
    const int32_t n = dims[outer];
    int32_t rows = 1;
    row_walk walk;
    memset(&walk, 0, sizeof(walk));
    for (int32_t k = 0; k < outer; k++) {
        rows *= dims[k];
    }
    for (int32_t r = 0; r < rows; r++) {
        row(ctx, input1 + walk.offset1, strides1[outer], input2 + walk.offset2, strides2[outer],
            output, n);
        output += n;
        next_row(&walk, outer, dims, strides1, strides2);
    }
}

/* binary_rows over a binary descriptor's layout. */
static void binary_desc_rows(const binary_ctx *ctx, binary_row_fn row, const int8_t *input1,
                             const int8_t *input2, int8_t *output)
{
    const edgec_binary_desc *d = ctx->desc;
    binary_rows(ctx, row, d->num_dims, d->dims, d->strides1, d->strides2, input1, input2, output);
}

static int binary_args_valid(const edgec_binary_desc *desc, const int8_t *input1,
                             const int8_t *input2, const int8_t *output)
{
    return desc != NULL && input1 != NULL && input2 != NULL && output != NULL &&
           binary_desc_valid(desc);
}

edgec_status edgec_binary_s8(const edgec_binary_desc *desc, const int8_t *input1,
                             const int8_t *input2, int8_t *output)
{
    if (!binary_args_valid(desc, input1, input2, output)) {
        return EDGEC_ARG_ERROR;
    }
    const binary_ctx ctx = binary_ctx_make(desc);
    binary_desc_rows(&ctx, portable_row(desc->op), input1, input2, output);
    return EDGEC_OK;
}

/* ==== PReLU ================================================================================== */

static int prelu_desc_valid(const edgec_prelu_desc *d)
{
    return layout_valid(d->num_dims, d->dims, d->input_strides, d->alpha_strides) &&
           d->input_offset >= -127 && d->input_offset <= 128 && d->alpha_offset >= -127 &&
           d->alpha_offset <= 128 && d->output_offset >= -128 && d->output_offset <= 127 &&
           d->identity_multiplier >= 0 && d->alpha_multiplier >= 0 &&
           edgec_shift_valid(d->identity_shift) && edgec_shift_valid(d->alpha_shift) &&
           edgec_act_range_valid(d->act_min, d->act_max);
}

/* One row of PReLU, a binary_row_fn (input as input1, alpha as input2). v * (alpha + offset)
 * is within 255 * 255. */
static void prelu_row(const binary_ctx *ctx, const int8_t *input, int32_t input_step,
                      const int8_t *alpha, int32_t alpha_step, int8_t *out, int32_t n)
{
    const edgec_prelu_desc *d = ctx->prelu;
    for (int32_t i = 0; i < n; i++) {
        const int32_t v = input[i * input_step] + d->input_offset;
        const int32_t r = v >= 0 ? edgec_requantize(v, d->identity_multiplier, d->identity_shift)
                                 : edgec_requantize(v * (alpha[i * alpha_step] + d->alpha_offset),
                                                    d->alpha_multiplier, d->alpha_shift);
        out[i] = edgec_output_s8(ctx->stage, r);
    }
}

edgec_status edgec_prelu_s8(const edgec_prelu_desc *desc, const int8_t *input,
                            const int8_t *alpha, int8_t *output)
{
    if (desc == NULL || input == NULL || alpha == NULL || output == NULL || !prelu_desc_valid(desc)) {
        return EDGEC_ARG_ERROR;
    }
    binary_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.prelu = desc;
    ctx.stage = edgec_output_stage_make(desc->output_offset, desc->act_min, desc->act_max);
    binary_rows(&ctx, prelu_row, desc->num_dims, desc->dims, desc->input_strides,
                desc->alpha_strides, input, alpha, output);
    return EDGEC_OK;
}
