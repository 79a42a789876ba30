/*
 * edgec_binary_s8_plane.h -- private to the int8 binary ops (edgec_binary_s8.c and its DSP and
 * Helium variants, edgec_binary_s8_dsp.c and edgec_binary_s8_mve.c): the walk of a descriptor's
 * layout as planes (PReLU's too), the descriptor checks and the portable plane functions every
 * entry point falls back on (edgec_binary_s8_packed.h adds what the packed variants share).
 *
 * The descriptor's layout (edgec_nn.h) is walked as planes of its innermost two dimensions: a
 * plane is `rows` rows of n contiguous output bytes, each row read from each input at a fixed
 * step (its innermost stride, 0 when broadcast) from a start that moves by a fixed stride per
 * row; the outer dimensions only move the planes' starting offsets. One call of a plane function
 * covers the whole of the common layouts (same shape, per-channel, scalar operands), so its
 * set-up is paid once. The arithmetic is TFLite's reference int8 ADD, SUB, MUL, MINIMUM/MAXIMUM
 * and PRELU.
 */
#ifndef EDGEC_BINARY_S8_PLANE_H
#define EDGEC_BINARY_S8_PLANE_H

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
static int layout_valid(int32_t num_dims, const int32_t *dims, const int32_t *strides1, const int32_t *strides2)
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

/* Where the planes start: the index of the current plane along each outer dimension and the two
 * inputs' offsets there. */
typedef struct {
    int32_t index[EDGEC_BINARY_MAX_DIMS];
    int32_t offset1;
    int32_t offset2;
} plane_walk;

/* Move to the next plane (odometer order over dims[0 .. outer-1], the last fastest). The offsets
 * stay within the inputs' validated extents. */
static void next_plane(plane_walk *walk, int32_t outer, const int32_t *dims, const int32_t *strides1,
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

/* What every plane of a call needs, computed once. */
typedef struct {
    const edgec_binary_desc *desc; /* edgec_binary_s8 */
    const edgec_prelu_desc *prelu; /* edgec_prelu_s8 */
    edgec_output_stage stage;
    int32_t scale; /* 2^left_shift */
} binary_ctx;

/* A plane of the layout: out[r * n + i] = op(in1[r * outer1 + i * step1],
 * in2[r * outer2 + i * step2]) for r < rows, i < n. */
typedef struct {
    int32_t rows;
    int32_t n;
    int32_t outer1;
    int32_t outer2;
    int32_t step1;
    int32_t step2;
} binary_plane;

/* Computes a plane. Every plane function reads element i of a row of both inputs (or, packed,
 * elements i..i+k) before it writes output element i (i..i+k), row after row, so the output
 * may be an unbroadcast input exactly. */
typedef void (*binary_plane_fn)(const binary_ctx *ctx, const binary_plane *plane, const int8_t *in1, const int8_t *in2,
                                int8_t *out);

/* One row of a plane: out[i] = op(in1[i * step1], in2[i * step2]) for i < n. */
typedef void (*binary_row_fn)(const binary_ctx *ctx, const int8_t *in1, int32_t step1, const int8_t *in2, int32_t step2,
                              int8_t *out, int32_t n);

/* A plane as rows of `row` (a constant where this is inlined). The offsets r * outer stay within
 * the inputs' validated extents. */
static inline void plane_rows(const binary_ctx *ctx, const binary_plane *p, const int8_t *in1, const int8_t *in2,
                              int8_t *out, binary_row_fn row)
{
    for (int32_t r = 0; r < p->rows; r++) {
        row(ctx, in1 + r * p->outer1, p->step1, in2 + r * p->outer2, p->step2, out + r * p->n, p->n);
    }
}

static EDGEC_NOINLINE int binary_desc_valid(const edgec_binary_desc *d)
{
    return d->op >= EDGEC_BINARY_ADD && d->op <= EDGEC_BINARY_MAXIMUM &&
           layout_valid(d->num_dims, d->dims, d->strides1, d->strides2) && d->input1_offset >= -127 &&
           d->input1_offset <= 128 && d->input2_offset >= -127 && d->input2_offset <= 128 && d->output_offset >= -128 &&
           d->output_offset <= 127 && d->left_shift >= 0 && d->left_shift <= BINARY_MAX_LEFT_SHIFT &&
           d->input1_multiplier >= 0 && d->input2_multiplier >= 0 && d->output_multiplier >= 0 &&
           edgec_shift_valid(d->input1_shift) && edgec_shift_valid(d->input2_shift) &&
           edgec_shift_valid(d->output_shift) && edgec_act_range_valid(d->act_min, d->act_max);
}

/* An add/sub operand on the common grid: requantize((x + offset) * 2^left_shift, m, shift).
 * Multiplying by scale instead of `<<`: left-shifting a negative value is UB in C99. */
static inline int32_t rescaled(int32_t x, int32_t offset, int32_t scale, int32_t multiplier, int32_t shift)
{
    return edgec_requantize((x + offset) * scale, multiplier, shift);
}

static inline void add_row(const binary_ctx *ctx, const int8_t *in1, int32_t step1, const int8_t *in2, int32_t step2,
                           int8_t *out, int32_t n)
{
    const edgec_binary_desc d = *ctx->desc; /* in registers: stores through out may alias *desc */
    const edgec_output_stage stage = ctx->stage;
    const int32_t scale = ctx->scale;
    for (int32_t i = 0; i < n; i++) {
        const int32_t a = rescaled(in1[i * step1], d.input1_offset, scale, d.input1_multiplier, d.input1_shift);
        const int32_t b = rescaled(in2[i * step2], d.input2_offset, scale, d.input2_multiplier, d.input2_shift);
        /* through uint32_t: a + b may exceed int32 with arbitrary multipliers, which the golden
         * models as a two's-complement wrap */
        const int32_t sum = (int32_t)((uint32_t)a + (uint32_t)b);
        out[i] = edgec_requantize_s8(sum, d.output_multiplier, d.output_shift, stage);
    }
}

static inline void sub_row(const binary_ctx *ctx, const int8_t *in1, int32_t step1, const int8_t *in2, int32_t step2,
                           int8_t *out, int32_t n)
{
    const edgec_binary_desc d = *ctx->desc; /* in registers: stores through out may alias *desc */
    const edgec_output_stage stage = ctx->stage;
    const int32_t scale = ctx->scale;
    for (int32_t i = 0; i < n; i++) {
        const int32_t a = rescaled(in1[i * step1], d.input1_offset, scale, d.input1_multiplier, d.input1_shift);
        const int32_t b = rescaled(in2[i * step2], d.input2_offset, scale, d.input2_multiplier, d.input2_shift);
        const int32_t difference = (int32_t)((uint32_t)a - (uint32_t)b);
        out[i] = edgec_requantize_s8(difference, d.output_multiplier, d.output_shift, stage);
    }
}

/* (x1 + o1) * (x2 + o2) is within 255 * 255: no overflow. */
static inline void mul_row(const binary_ctx *ctx, const int8_t *in1, int32_t step1, const int8_t *in2, int32_t step2,
                           int8_t *out, int32_t n)
{
    const edgec_binary_desc d = *ctx->desc; /* in registers: stores through out may alias *desc */
    const edgec_output_stage stage = ctx->stage;
    for (int32_t i = 0; i < n; i++) {
        const int32_t product = (in1[i * step1] + d.input1_offset) * (in2[i * step2] + d.input2_offset);
        out[i] = edgec_requantize_s8(product, d.output_multiplier, d.output_shift, stage);
    }
}

static inline void minimum_row(const binary_ctx *ctx, const int8_t *in1, int32_t step1, const int8_t *in2,
                               int32_t step2, int8_t *out, int32_t n)
{
    const edgec_binary_desc d = *ctx->desc; /* in registers: stores through out may alias *desc */
    for (int32_t i = 0; i < n; i++) {
        out[i] = edgec_clamp_to_s8(EDGEC_MIN(in1[i * step1], in2[i * step2]), d.act_min, d.act_max);
    }
}

static inline void maximum_row(const binary_ctx *ctx, const int8_t *in1, int32_t step1, const int8_t *in2,
                               int32_t step2, int8_t *out, int32_t n)
{
    const edgec_binary_desc d = *ctx->desc; /* in registers: stores through out may alias *desc */
    for (int32_t i = 0; i < n; i++) {
        out[i] = edgec_clamp_to_s8(EDGEC_MAX(in1[i * step1], in2[i * step2]), d.act_min, d.act_max);
    }
}

static void add_plane(const binary_ctx *ctx, const binary_plane *p, const int8_t *in1, const int8_t *in2, int8_t *out)
{
    plane_rows(ctx, p, in1, in2, out, add_row);
}

static void sub_plane(const binary_ctx *ctx, const binary_plane *p, const int8_t *in1, const int8_t *in2, int8_t *out)
{
    plane_rows(ctx, p, in1, in2, out, sub_row);
}

static void mul_plane(const binary_ctx *ctx, const binary_plane *p, const int8_t *in1, const int8_t *in2, int8_t *out)
{
    plane_rows(ctx, p, in1, in2, out, mul_row);
}

static void minimum_plane(const binary_ctx *ctx, const binary_plane *p, const int8_t *in1, const int8_t *in2,
                          int8_t *out)
{
    plane_rows(ctx, p, in1, in2, out, minimum_row);
}

static void maximum_plane(const binary_ctx *ctx, const binary_plane *p, const int8_t *in1, const int8_t *in2,
                          int8_t *out)
{
    plane_rows(ctx, p, in1, in2, out, maximum_row);
}

static binary_plane_fn portable_plane(int32_t op)
{
    static const binary_plane_fn planes[] = { add_plane, sub_plane, mul_plane, minimum_plane, maximum_plane };
    return planes[op];
}

static binary_ctx binary_ctx_make(const edgec_binary_desc *desc)
{
    binary_ctx ctx;
    ctx.desc = desc;
    ctx.prelu = NULL;
    ctx.stage = edgec_output_stage_make(desc->output_offset, desc->act_min, desc->act_max);
    ctx.scale = (int32_t)1 << desc->left_shift;
    return ctx;
}

/* The plane of a layout's innermost two dimensions (one row for a single dimension). */
static binary_plane layout_plane(int32_t num_dims, const int32_t *dims, const int32_t *strides1,
                                 const int32_t *strides2)
{
    const int32_t inner = num_dims - 1;
    binary_plane p;
    p.n = dims[inner];
    p.step1 = strides1[inner];
    p.step2 = strides2[inner];
    p.rows = inner > 0 ? dims[inner - 1] : 1;
    p.outer1 = inner > 0 ? strides1[inner - 1] : 0;
    p.outer2 = inner > 0 ? strides2[inner - 1] : 0;
    return p;
}

/* Every plane of a layout through `plane_fn`. */
static EDGEC_NOINLINE void binary_planes(const binary_ctx *ctx, binary_plane_fn plane_fn, int32_t num_dims,
                                         const int32_t *dims, const int32_t *strides1, const int32_t *strides2,
                                         const int8_t *input1, const int8_t *input2, int8_t *output)
{
    const binary_plane plane = layout_plane(num_dims, dims, strides1, strides2);
    const int32_t outer = EDGEC_MAX(num_dims - 2, 0);
    const int32_t plane_size = plane.rows * plane.n;
    int32_t planes = 1;
    plane_walk walk;
    memset(&walk, 0, sizeof(walk));
    for (int32_t k = 0; k < outer; k++) {
        planes *= dims[k];
    }
    for (int32_t q = 0; q < planes; q++) {
        plane_fn(ctx, &plane, input1 + walk.offset1, input2 + walk.offset2, output);
        output += plane_size;
        next_plane(&walk, outer, dims, strides1, strides2);
    }
}

/* binary_planes over a binary descriptor's layout. */
static void binary_desc_planes(const binary_ctx *ctx, binary_plane_fn plane_fn, const int8_t *input1,
                               const int8_t *input2, int8_t *output)
{
    const edgec_binary_desc *d = ctx->desc;
    binary_planes(ctx, plane_fn, d->num_dims, d->dims, d->strides1, d->strides2, input1, input2, output);
}

static int binary_args_valid(const edgec_binary_desc *desc, const int8_t *input1, const int8_t *input2,
                             const int8_t *output)
{
    return desc != NULL && input1 != NULL && input2 != NULL && output != NULL && binary_desc_valid(desc);
}

#endif /* EDGEC_BINARY_S8_PLANE_H */
