/*
 * edgec_binary_s8.c -- int8 elementwise binary ops with NumPy broadcasting (add, sub, mul,
 * minimum, maximum) and PReLU: the portable C99 path (the reference) and, on Arm cores with the
 * DSP extension or Helium, edgec_binary_s8_dsp/_mve.
 *
 * The descriptor's layout (edgec_nn.h) is walked as planes of its innermost two dimensions: a
 * plane is `rows` rows of n contiguous output bytes, each row read from each input at a fixed
 * step (its innermost stride, 0 when broadcast) from a start that moves by a fixed stride per
 * row; the outer dimensions only move the planes' starting offsets. One call of a plane function
 * covers the whole of the common layouts (same shape, per-channel, scalar operands), so its
 * set-up is paid once. The arithmetic is TFLite's reference int8 ADD, SUB, MUL, MINIMUM/MAXIMUM
 * and PRELU.
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

static int binary_desc_valid(const edgec_binary_desc *d)
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
static void binary_planes(const binary_ctx *ctx, binary_plane_fn plane_fn, int32_t num_dims, const int32_t *dims,
                          const int32_t *strides1, const int32_t *strides2, const int8_t *input1, const int8_t *input2,
                          int8_t *output)
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

edgec_status edgec_binary_s8(const edgec_binary_desc *desc, const int8_t *input1, const int8_t *input2, int8_t *output)
{
    if (!binary_args_valid(desc, input1, input2, output)) {
        return EDGEC_ARG_ERROR;
    }
    const binary_ctx ctx = binary_ctx_make(desc);
    binary_desc_planes(&ctx, portable_plane(desc->op), input1, input2, output);
    return EDGEC_OK;
}

/* ==== The ISA entry points ================================================================== */
#if defined(__ARM_FEATURE_DSP) || (defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))

/* A row loop written once and specialised by constant flags (a single-value operand, clamping,
 * add or subtract): it must be inlined for the flags to fold, which GCC's size heuristics do not
 * always do. Only the Arm builds, by GCC or Arm's clang, compile these paths. */
#define BINARY_ALWAYS_INLINE inline __attribute__((always_inline))

/* The innermost strides the packed planes take: both inputs contiguous, or one of them a single
 * value per row (NHWC per-channel planes, scalar operands, per-pixel operands). */
static int unit_steps(int32_t step1, int32_t step2)
{
    return (step1 == 1 && (step2 == 0 || step2 == 1)) || (step1 == 0 && step2 == 1);
}

/* The plane function of an ISA entry point: `packed` where it applies, else the portable one. */
static binary_plane_fn isa_plane(const edgec_binary_desc *d, binary_plane_fn packed)
{
    const int32_t inner = d->num_dims - 1;
    return packed != NULL && unit_steps(d->strides1[inner], d->strides2[inner]) ? packed : portable_plane(d->op);
}

/*
 * A plane of a commutative op (MUL, MINIMUM, MAXIMUM) on unit steps seen from its operand with
 * step 1, `vector`; the other operand has step 1 too or is one value per row (other_step 0).
 * Row r starts at vector + r * vector_outer, other + r * other_outer, out + r * n.
 */
typedef struct {
    const int8_t *vector;
    const int8_t *other;
    int32_t vector_outer;
    int32_t other_outer;
    int32_t other_step;
    int32_t vector_offset; /* the op's input offset of each */
    int32_t other_offset;
} commuted_plane;

static commuted_plane commute(const binary_ctx *ctx, const binary_plane *p, const int8_t *in1, const int8_t *in2)
{
    const int swap = p->step1 == 0;
    commuted_plane c;
    c.vector = swap ? in2 : in1;
    c.other = swap ? in1 : in2;
    c.vector_outer = swap ? p->outer2 : p->outer1;
    c.other_outer = swap ? p->outer1 : p->outer2;
    c.other_step = swap ? p->step1 : p->step2;
    c.vector_offset = swap ? ctx->desc->input2_offset : ctx->desc->input1_offset;
    c.other_offset = swap ? ctx->desc->input1_offset : ctx->desc->input2_offset;
    return c;
}

#endif

/* ---- Arm DSP extension ---------------------------------------------------------------------- */
#if defined(__ARM_FEATURE_DSP)

/* v in both int16 halves of a word. */
static inline int32_t dsp_pair(int32_t v)
{
    return (int32_t)((uint32_t)(uint16_t)v * 0x10001u);
}

/* Bytes 1 and 3 of x sign-extended and added to the int16 halves of pair: SXTAB16 with ROR #8
 * (GCC 12's arm_acle.h has no __ror to express the rotation). */
static inline int32_t dsp_sxtab16_ror8(int32_t pair, int32_t x)
{
    int32_t result;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(result) : "r"(pair), "r"(x));
    return result;
}

/* The products of the bottom and of the top int16 halves: SMULBB and SMULTT (GCC 12's
 * arm_acle.h has neither, and from plain C it widens a loop-invariant operand's top half first,
 * spending an extra ASR and MUL). */
static inline int32_t dsp_mul_bottoms(int32_t a, int32_t b)
{
    int32_t result;
    __asm__("smulbb %0, %1, %2" : "=r"(result) : "r"(a), "r"(b));
    return result;
}

static inline int32_t dsp_mul_tops(int32_t a, int32_t b)
{
    int32_t result;
    __asm__("smultt %0, %1, %2" : "=r"(result) : "r"(a), "r"(b));
    return result;
}

/*
 * MUL's requantization plus output offset on the DSP extension, for output_shift -1..-24 and any
 * multiplier >= 0, from the doubled product d = 2 * p (|p| <= 255 * 255, so d fits):
 *  - (2 p m + 2^31) >> 32 = (p m + 2^30) >> 31 is doubling_high_mult_no_sat(p, m) exactly; call
 *    it h (|h| <= |p| as m < 2^31). SMMLAR(d, m, bias) gives h + bias in one instruction;
 *  - divide_by_power_of_two(h, r), r = -shift >= 1, rounds half away from zero, which is
 *    floor((h + 2^(r-1) - [h < 0]) / 2^r); adding offset * 2^r inside adds the output offset:
 *    y = (h + bias - [h < 0]) >> r with bias = 2^(r-1) + offset * 2^r;
 *  - [h < 0] may be read as [d < 0] (d >> 31 = -1): they differ only when p < 0 and h = 0, and
 *    then (bias - 1) >> r = bias >> r = offset, as 0 <= 2^(r-1) - 1 < 2^(r-1) < 2^r.
 * For r <= 24 and |offset| <= 128, |bias| <= 2^31 - 2^23, so no sum overflows. Four
 * instructions after the product: SMMLAR, ADD (of d ASR #31), ASR, SSAT.
 */
static inline int dsp_mul_requant_fits(int32_t shift)
{
    return shift >= -24 && shift <= -1;
}

static inline int32_t dsp_smmlar(int32_t a, int32_t b, int32_t accumulator)
{
    int32_t result;
    __asm__("smmlar %0, %1, %2, %3" : "=r"(result) : "r"(a), "r"(b), "r"(accumulator));
    return result;
}

/* What the DSP MUL rows keep in registers. */
typedef struct {
    int32_t multiplier;
    int32_t bias;        /* 2^(r-1) + output_offset * 2^r */
    int32_t right;       /* r = -output_shift */
    uint32_t lows;       /* act_min in every byte */
    uint32_t highs;      /* act_max in every byte */
    int32_t vector_pair; /* the vector operand's offset in both halves */
    int32_t other_pair;  /* the other operand's offset in both halves */
} dsp_mul_consts;

/* requantize(p) + output_offset saturated to int8, from d = 2 * p (see above). */
static inline int32_t dsp_mul_output(int32_t doubled_product, const dsp_mul_consts *c)
{
    const int32_t biased = dsp_smmlar(doubled_product, c->multiplier, c->bias);
    return __ssat((biased + (doubled_product >> 31)) >> c->right, 8);
}

/* Four MUL outputs, packed, clamped unless `clamp` is 0 (act range the whole of int8; a constant
 * where this is inlined), from (x + offset) of elements 0..3 of the vector operand and twice that
 * of the other as int16 pairs: even = (element 0, element 2), odd = (element 1, element 3). The
 * products fit SMULBB/SMULTT (|x + offset| <= 255). */
static inline uint32_t dsp_mul_four(int32_t a_even, int32_t a_odd, int32_t b2_even, int32_t b2_odd,
                                    const dsp_mul_consts *c, int clamp)
{
    const int32_t y0 = dsp_mul_output(dsp_mul_bottoms(a_even, b2_even), c);
    const int32_t y1 = dsp_mul_output(dsp_mul_bottoms(a_odd, b2_odd), c);
    const int32_t y2 = dsp_mul_output(dsp_mul_tops(a_even, b2_even), c);
    const int32_t y3 = dsp_mul_output(dsp_mul_tops(a_odd, b2_odd), c);
    const uint32_t packed = edgec_dsp_pack_s8x4(y0, y1, y2, y3);
    return clamp ? edgec_dsp_clamp_s8x4(packed, c->lows, c->highs) : packed;
}

/* One MUL row, four elements per step (other_step, 0 or 1, and clamp are constants where this
 * is inlined), the last n % 4 one by one. */
static BINARY_ALWAYS_INLINE void dsp_mul_row(const int8_t *vector, const int8_t *other, int32_t other_step, int8_t *out,
                                             int32_t n, const dsp_mul_consts *c, int clamp, int32_t vector_offset,
                                             int32_t other_offset, int32_t act_min, int32_t act_max)
{
    const int32_t single2 = dsp_pair(2 * (other[0] + other_offset));
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        int32_t x1, x2;
        uint32_t y;
        memcpy(&x1, vector + i, 4);
        const int32_t a_even = __sxtab16(c->vector_pair, x1);
        const int32_t a_odd = dsp_sxtab16_ror8(c->vector_pair, x1);
        if (other_step == 0) {
            y = dsp_mul_four(a_even, a_odd, single2, single2, c, clamp);
        } else {
            memcpy(&x2, other + i, 4);
            const int32_t b_even = __sxtab16(c->other_pair, x2);
            const int32_t b_odd = dsp_sxtab16_ror8(c->other_pair, x2);
            y = dsp_mul_four(a_even, a_odd, __sadd16(b_even, b_even), __sadd16(b_odd, b_odd), c, clamp);
        }
        memcpy(out + i, &y, 4); /* after reading: out may be the vector operand */
    }
    for (; i < n; i++) {
        const int32_t product = (vector[i] + vector_offset) * (other[i * other_step] + other_offset);
        out[i] = (int8_t)EDGEC_MIN(EDGEC_MAX(dsp_mul_output(2 * product, c), act_min), act_max);
    }
}

/* The rows of a MUL plane (other_step and clamp constants where this is inlined). */
static BINARY_ALWAYS_INLINE void dsp_mul_rows(const commuted_plane *m, const binary_plane *p, int8_t *out,
                                              const dsp_mul_consts *c, int32_t other_step, int clamp,
                                              const edgec_binary_desc *d)
{
    for (int32_t r = 0; r < p->rows; r++) {
        dsp_mul_row(m->vector + r * m->vector_outer, m->other + r * m->other_outer, other_step, out + r * p->n, p->n, c,
                    clamp, m->vector_offset, m->other_offset, d->act_min, d->act_max);
    }
}

/*
 * MUL plane on unit steps with output_shift -1..-24: both operands widened with their offsets by
 * SXTAB16 (the other one doubled by SADD16), products by SMULBB/SMULTT, then dsp_mul_output.
 */
static void dsp_mul_plane(const binary_ctx *ctx, const binary_plane *p, const int8_t *in1, const int8_t *in2,
                          int8_t *out)
{
    const edgec_binary_desc *d = ctx->desc;
    const commuted_plane m = commute(ctx, p, in1, in2);
    const int clamp = d->act_min > INT8_MIN || d->act_max < INT8_MAX;
    dsp_mul_consts c;
    c.multiplier = d->output_multiplier;
    c.right = -d->output_shift;
    c.bias = (int32_t)((1u << (c.right - 1)) + (uint32_t)d->output_offset * (1u << c.right));
    c.lows = edgec_dsp_bytes(d->act_min);
    c.highs = edgec_dsp_bytes(d->act_max);
    c.vector_pair = dsp_pair(m.vector_offset);
    c.other_pair = dsp_pair(m.other_offset);
    if (m.other_step == 0) {
        if (clamp) {
            dsp_mul_rows(&m, p, out, &c, 0, 1, d);
        } else {
            dsp_mul_rows(&m, p, out, &c, 0, 0, d);
        }
    } else if (clamp) {
        dsp_mul_rows(&m, p, out, &c, 1, 1, d);
    } else {
        dsp_mul_rows(&m, p, out, &c, 1, 0, d);
    }
}

/* Bytewise maximum (maximum != 0) or minimum of four int8: SSUB8 sets GE where a >= b, SEL picks. */
static inline uint32_t dsp_select4(uint32_t a, uint32_t b, int maximum)
{
    uint32_t result, difference;
    if (maximum) {
        __asm__("ssub8 %1, %2, %3\n\tsel %0, %2, %3" : "=r"(result), "=&r"(difference) : "r"(a), "r"(b) : "cc");
    } else {
        __asm__("ssub8 %1, %2, %3\n\tsel %0, %3, %2" : "=r"(result), "=&r"(difference) : "r"(a), "r"(b) : "cc");
    }
    return result;
}

/* MINIMUM/MAXIMUM plane on unit steps, four bytes per step (a single-value operand in every byte
 * of its word). */
static BINARY_ALWAYS_INLINE void dsp_select_plane(const binary_ctx *ctx, const binary_plane *p, const int8_t *in1,
                                                  const int8_t *in2, int8_t *out, int maximum)
{
    const edgec_binary_desc *d = ctx->desc;
    const commuted_plane m = commute(ctx, p, in1, in2);
    const uint32_t lows = edgec_dsp_bytes(d->act_min);
    const uint32_t highs = edgec_dsp_bytes(d->act_max);
    const int32_t n = p->n;
    for (int32_t r = 0; r < p->rows; r++) {
        const int8_t *vector = m.vector + r * m.vector_outer;
        const int8_t *other = m.other + r * m.other_outer;
        int8_t *row = out + r * n;
        uint32_t b = edgec_dsp_bytes(other[0]);
        int32_t i = 0;
        for (; i + 4 <= n; i += 4) {
            uint32_t a;
            memcpy(&a, vector + i, 4);
            if (m.other_step != 0) {
                memcpy(&b, other + i, 4);
            }
            const uint32_t y = edgec_dsp_clamp_s8x4(dsp_select4(a, b, maximum), lows, highs);
            memcpy(row + i, &y, 4);
        }
        for (; i < n; i++) {
            const int32_t x = vector[i];
            const int32_t y = other[i * m.other_step];
            row[i] = edgec_clamp_to_s8(maximum ? EDGEC_MAX(x, y) : EDGEC_MIN(x, y), d->act_min, d->act_max);
        }
    }
}

static void dsp_minimum_plane(const binary_ctx *ctx, const binary_plane *p, const int8_t *in1, const int8_t *in2,
                              int8_t *out)
{
    dsp_select_plane(ctx, p, in1, in2, out, 0);
}

static void dsp_maximum_plane(const binary_ctx *ctx, const binary_plane *p, const int8_t *in1, const int8_t *in2,
                              int8_t *out)
{
    dsp_select_plane(ctx, p, in1, in2, out, 1);
}

edgec_status edgec_binary_s8_dsp(const edgec_binary_desc *desc, const int8_t *input1, const int8_t *input2,
                                 int8_t *output)
{
    if (!binary_args_valid(desc, input1, input2, output)) {
        return EDGEC_ARG_ERROR;
    }
    const binary_ctx ctx = binary_ctx_make(desc);
    binary_plane_fn packed = NULL;
    if (desc->op == EDGEC_BINARY_MUL && dsp_mul_requant_fits(desc->output_shift)) {
        packed = dsp_mul_plane;
    } else if (desc->op == EDGEC_BINARY_MINIMUM) {
        packed = dsp_minimum_plane;
    } else if (desc->op == EDGEC_BINARY_MAXIMUM) {
        packed = dsp_maximum_plane;
    }
    binary_desc_planes(&ctx, isa_plane(desc, packed), input1, input2, output);
    return EDGEC_OK;
}

#endif /* __ARM_FEATURE_DSP */

/* ---- Helium --------------------------------------------------------------------------------- */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)

/*
 * requantize (edgec_requantize) on four lanes with the multiplier and shift in core registers,
 * bit-exact: VQRDMULH is doubling_high_mult_no_sat for multipliers >= 0. Left (shift >= 0):
 * VQSHL, which saturates like the portable edgec_saturating_left_shift, then VQRDMULH. Right (shift <= -1): VRSHL
 * by shift rounds half up, so negative lanes are first moved down by one, which makes it round
 * half away from zero (edgec_mve_requantize's fixup; saturating that step cannot change the
 * shifted result).
 */
static inline int32x4_t mve_requantize_left(int32x4_t x, int32_t multiplier, int32_t shift)
{
    return vqrdmulhq_n_s32(vqshlq_r_s32(x, shift), multiplier);
}

static inline int32x4_t mve_requantize_right(int32x4_t x, int32_t multiplier, int32_t shift)
{
    const int32x4_t high = vqrdmulhq_n_s32(x, multiplier);
    return vrshlq_n_s32(vqaddq_s32(high, vshrq_n_s32(high, 31)), shift);
}

/* requantize by mve_requantize_left or _right (`left`: a constant where this is inlined). */
static inline int32x4_t mve_requantize(int32x4_t x, int32_t multiplier, int32_t shift, int left)
{
    return left ? mve_requantize_left(x, multiplier, shift) : mve_requantize_right(x, multiplier, shift);
}

/* What the Helium MUL rows keep in registers. */
typedef struct {
    int32_t multiplier;
    int32_t shift;
    int16x8_t lo; /* act_min - output_offset */
    int16x8_t hi; /* act_max - output_offset */
    int16_t offset;
    int16_t vector_offset;
    int16_t other_offset;
} mve_mul_consts;

/*
 * Eight MUL outputs from (x + offset) of both operands in int16 lanes: the even and the odd
 * lanes' int32 products (VMULLB/VMULLT) requantized, narrowed back into their lanes with
 * saturation (harmless: the clamp bounds are within [-255, 255]), clamped, offset added.
 */
static inline int16x8_t mve_mul_eight(int16x8_t a, int16x8_t b, const mve_mul_consts *c, int left)
{
    const int32x4_t even = mve_requantize(vmullbq_int_s16(a, b), c->multiplier, c->shift, left);
    const int32x4_t odd = mve_requantize(vmulltq_int_s16(a, b), c->multiplier, c->shift, left);
    int16x8_t r = vqmovntq_s32(vqmovnbq_s32(vuninitializedq_s16(), even), odd);
    r = vminq_s16(vmaxq_s16(r, c->lo), c->hi);
    return vaddq_n_s16(r, c->offset);
}

/* One MUL row: whole steps of eight unpredicated, then one predicated step for the rest
 * (other_step and left are constants where this is inlined). */
static BINARY_ALWAYS_INLINE void mve_mul_row(const int8_t *vector, const int8_t *other, int32_t other_step, int8_t *out,
                                             int32_t n, const mve_mul_consts *c, int left)
{
    const int16x8_t single = vdupq_n_s16((int16_t)(other[0] + c->other_offset));
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const int16x8_t a = vaddq_n_s16(vldrbq_s16(vector + i), c->vector_offset);
        const int16x8_t b = other_step ? vaddq_n_s16(vldrbq_s16(other + i), c->other_offset) : single;
        vstrbq_s16(out + i, mve_mul_eight(a, b, c, left));
    }
    if (i < n) {
        const mve_pred16_t lanes = vctp16q((uint32_t)(n - i));
        const int16x8_t a = vaddq_n_s16(vldrbq_z_s16(vector + i, lanes), c->vector_offset);
        const int16x8_t b = other_step ? vaddq_n_s16(vldrbq_z_s16(other + i, lanes), c->other_offset) : single;
        vstrbq_p_s16(out + i, mve_mul_eight(a, b, c, left), lanes);
    }
}

/* The rows of a MUL plane (other_step and left constants where this is inlined). */
static BINARY_ALWAYS_INLINE void mve_mul_rows(const commuted_plane *m, const binary_plane *p, int8_t *out,
                                              const mve_mul_consts *c, int32_t other_step, int left)
{
    for (int32_t r = 0; r < p->rows; r++) {
        mve_mul_row(m->vector + r * m->vector_outer, m->other + r * m->other_outer, other_step, out + r * p->n, p->n, c,
                    left);
    }
}

/* MUL plane on unit steps, eight elements per step. */
static void mve_mul_plane(const binary_ctx *ctx, const binary_plane *p, const int8_t *in1, const int8_t *in2,
                          int8_t *out)
{
    const edgec_binary_desc *d = ctx->desc;
    const commuted_plane m = commute(ctx, p, in1, in2);
    mve_mul_consts c;
    c.multiplier = d->output_multiplier;
    c.shift = d->output_shift;
    c.lo = vdupq_n_s16((int16_t)ctx->stage.lo);
    c.hi = vdupq_n_s16((int16_t)ctx->stage.hi);
    c.offset = (int16_t)ctx->stage.offset;
    c.vector_offset = (int16_t)m.vector_offset;
    c.other_offset = (int16_t)m.other_offset;
    if (c.shift >= 0) {
        mve_mul_rows(&m, p, out, &c, m.other_step, 1);
    } else if (m.other_step == 0) {
        mve_mul_rows(&m, p, out, &c, 0, 0);
    } else {
        mve_mul_rows(&m, p, out, &c, 1, 0);
    }
}

/*
 * requantize on four lanes without a left shift (the callers fold it into theirs), any shift:
 * mve_requantize_right's steps with the fixup masked to the lanes' sign only where
 * minus_right = min(shift, 0) is negative (edgec_mve_requantize's form), so shift 0 needs no
 * branch.
 */
static inline int32x4_t mve_requantize_high(int32x4_t x, int32_t multiplier, int32x4_t minus_right)
{
    const int32x4_t high = vqrdmulhq_n_s32(x, multiplier);
    const int32x4_t fixup = vshrq_n_s32(vandq_s32(high, minus_right), 31);
    return vrshlq_s32(vqaddq_s32(high, fixup), minus_right);
}

/* What the Helium ADD/SUB rows keep in registers. The inputs' left shifts are left_shift plus
 * max(shift, 0): one VQSHL (mve_add_sub_fits keeps them below 32). The first left_shift bits
 * never overflow, so it saturates like the portable path's two shifts. */
typedef struct {
    int32_t offset1, left1, multiplier1;
    int32_t offset2, left2, multiplier2;
    int32_t left_out, multiplier_out;
    int32x4_t minus_right1, minus_right2, minus_right_out;
    edgec_output_stage stage;
} mve_add_consts;

static int mve_add_sub_fits(const edgec_binary_desc *d)
{
    return d->left_shift + EDGEC_MAX(d->input1_shift, 0) <= 31 && d->left_shift + EDGEC_MAX(d->input2_shift, 0) <= 31;
}

/* An add/sub operand's four lanes rescaled onto the common grid (rescaled() on each lane). */
static inline int32x4_t mve_rescaled(int32x4_t x, int32_t offset, int32_t left, int32_t multiplier,
                                     int32x4_t minus_right)
{
    return mve_requantize_high(vqshlq_r_s32(vaddq_n_s32(x, offset), left), multiplier, minus_right);
}

/* Four ADD/SUB outputs from the operands on the common grid. */
static inline int32x4_t mve_add_sub_four(int32x4_t a, int32x4_t b, const mve_add_consts *c, int subtract)
{
    /* VADD/VSUB wrap like the portable path's uint32_t arithmetic */
    const int32x4_t total = vqshlq_r_s32(subtract ? vsubq_s32(a, b) : vaddq_s32(a, b), c->left_out);
    return edgec_mve_output(mve_requantize_high(total, c->multiplier_out, c->minus_right_out), c->stage);
}

/* One ADD/SUB row, four elements per step (step1, step2 and subtract constants where this is
 * inlined); a single-value operand (step 0) is rescaled once. */
static BINARY_ALWAYS_INLINE void mve_add_sub_row(const int8_t *in1, int32_t step1, const int8_t *in2, int32_t step2,
                                                 int8_t *out, int32_t n, const mve_add_consts *c, int subtract)
{
    const int32x4_t single1 = mve_rescaled(vdupq_n_s32(in1[0]), c->offset1, c->left1, c->multiplier1, c->minus_right1);
    const int32x4_t single2 = mve_rescaled(vdupq_n_s32(in2[0]), c->offset2, c->left2, c->multiplier2, c->minus_right2);
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const int32x4_t a =
            step1 ? mve_rescaled(vldrbq_s32(in1 + i), c->offset1, c->left1, c->multiplier1, c->minus_right1) : single1;
        const int32x4_t b =
            step2 ? mve_rescaled(vldrbq_s32(in2 + i), c->offset2, c->left2, c->multiplier2, c->minus_right2) : single2;
        vstrbq_s32(out + i, mve_add_sub_four(a, b, c, subtract));
    }
    if (i < n) {
        const mve_pred16_t lanes = vctp32q((uint32_t)(n - i));
        const int32x4_t a =
            step1 ? mve_rescaled(vldrbq_z_s32(in1 + i, lanes), c->offset1, c->left1, c->multiplier1, c->minus_right1)
                  : single1;
        const int32x4_t b =
            step2 ? mve_rescaled(vldrbq_z_s32(in2 + i, lanes), c->offset2, c->left2, c->multiplier2, c->minus_right2)
                  : single2;
        vstrbq_p_s32(out + i, mve_add_sub_four(a, b, c, subtract), lanes);
    }
}

/* The rows of an ADD/SUB plane (step1, step2, subtract constants where this is inlined). */
static BINARY_ALWAYS_INLINE void mve_add_sub_rows(const binary_plane *p, const int8_t *in1, int32_t step1,
                                                  const int8_t *in2, int32_t step2, int8_t *out,
                                                  const mve_add_consts *c, int subtract)
{
    const int32_t rows = p->rows;
    const int32_t n = p->n;
    const int32_t outer1 = p->outer1;
    const int32_t outer2 = p->outer2;
    for (int32_t r = 0; r < rows; r++) {
        mve_add_sub_row(in1 + r * outer1, step1, in2 + r * outer2, step2, out + r * n, n, c, subtract);
    }
}

/* ADD/SUB plane on unit steps (mve_add_sub_fits: else the portable plane). */
static BINARY_ALWAYS_INLINE void mve_add_sub_plane(const binary_ctx *ctx, const binary_plane *p, const int8_t *in1,
                                                   const int8_t *in2, int8_t *out, int subtract)
{
    const edgec_binary_desc *d = ctx->desc;
    if (!mve_add_sub_fits(d)) {
        (subtract ? sub_plane : add_plane)(ctx, p, in1, in2, out);
        return;
    }
    mve_add_consts c;
    c.offset1 = d->input1_offset;
    c.left1 = d->left_shift + EDGEC_MAX(d->input1_shift, 0);
    c.multiplier1 = d->input1_multiplier;
    c.minus_right1 = vdupq_n_s32(EDGEC_MIN(d->input1_shift, 0));
    c.offset2 = d->input2_offset;
    c.left2 = d->left_shift + EDGEC_MAX(d->input2_shift, 0);
    c.multiplier2 = d->input2_multiplier;
    c.minus_right2 = vdupq_n_s32(EDGEC_MIN(d->input2_shift, 0));
    c.left_out = EDGEC_MAX(d->output_shift, 0);
    c.multiplier_out = d->output_multiplier;
    c.minus_right_out = vdupq_n_s32(EDGEC_MIN(d->output_shift, 0));
    c.stage = ctx->stage;
    if (p->step1 == 0) {
        mve_add_sub_rows(p, in1, 0, in2, 1, out, &c, subtract);
    } else if (p->step2 == 0) {
        mve_add_sub_rows(p, in1, 1, in2, 0, out, &c, subtract);
    } else {
        mve_add_sub_rows(p, in1, 1, in2, 1, out, &c, subtract);
    }
}

static void mve_add_plane(const binary_ctx *ctx, const binary_plane *p, const int8_t *in1, const int8_t *in2,
                          int8_t *out)
{
    mve_add_sub_plane(ctx, p, in1, in2, out, 0);
}

static void mve_sub_plane(const binary_ctx *ctx, const binary_plane *p, const int8_t *in1, const int8_t *in2,
                          int8_t *out)
{
    mve_add_sub_plane(ctx, p, in1, in2, out, 1);
}

/* One MINIMUM/MAXIMUM row, sixteen bytes per step (other_step and maximum constants where this
 * is inlined). */
static BINARY_ALWAYS_INLINE void mve_select_row(const int8_t *vector, const int8_t *other, int32_t other_step,
                                                int8_t *out, int32_t n, int8x16_t lo, int8x16_t hi, int maximum)
{
    const int8x16_t single = vdupq_n_s8(other[0]);
    int32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const int8x16_t a = vldrbq_s8(vector + i);
        const int8x16_t b = other_step ? vldrbq_s8(other + i) : single;
        const int8x16_t y = maximum ? vmaxq_s8(a, b) : vminq_s8(a, b);
        vstrbq_s8(out + i, vminq_s8(vmaxq_s8(y, lo), hi));
    }
    if (i < n) {
        const mve_pred16_t lanes = vctp8q((uint32_t)(n - i));
        const int8x16_t a = vldrbq_z_s8(vector + i, lanes);
        const int8x16_t b = other_step ? vldrbq_z_s8(other + i, lanes) : single;
        const int8x16_t y = maximum ? vmaxq_s8(a, b) : vminq_s8(a, b);
        vstrbq_p_s8(out + i, vminq_s8(vmaxq_s8(y, lo), hi), lanes);
    }
}

/* The rows of a MINIMUM/MAXIMUM plane (other_step and maximum constants where inlined). */
static BINARY_ALWAYS_INLINE void mve_select_rows(const commuted_plane *m, const binary_plane *p, int8_t *out,
                                                 int32_t other_step, int8x16_t lo, int8x16_t hi, int maximum)
{
    const int32_t rows = p->rows;
    const int32_t n = p->n;
    for (int32_t r = 0; r < rows; r++) {
        mve_select_row(m->vector + r * m->vector_outer, m->other + r * m->other_outer, other_step, out + r * n, n, lo,
                       hi, maximum);
    }
}

/* MINIMUM/MAXIMUM plane on unit steps. */
static BINARY_ALWAYS_INLINE void mve_select_plane(const binary_ctx *ctx, const binary_plane *p, const int8_t *in1,
                                                  const int8_t *in2, int8_t *out, int maximum)
{
    const commuted_plane m = commute(ctx, p, in1, in2);
    const int8x16_t lo = vdupq_n_s8((int8_t)ctx->desc->act_min);
    const int8x16_t hi = vdupq_n_s8((int8_t)ctx->desc->act_max);
    if (m.other_step == 0) {
        mve_select_rows(&m, p, out, 0, lo, hi, maximum);
    } else {
        mve_select_rows(&m, p, out, 1, lo, hi, maximum);
    }
}

static void mve_minimum_plane(const binary_ctx *ctx, const binary_plane *p, const int8_t *in1, const int8_t *in2,
                              int8_t *out)
{
    mve_select_plane(ctx, p, in1, in2, out, 0);
}

static void mve_maximum_plane(const binary_ctx *ctx, const binary_plane *p, const int8_t *in1, const int8_t *in2,
                              int8_t *out)
{
    mve_select_plane(ctx, p, in1, in2, out, 1);
}

edgec_status edgec_binary_s8_mve(const edgec_binary_desc *desc, const int8_t *input1, const int8_t *input2,
                                 int8_t *output)
{
    static const binary_plane_fn planes[] = { mve_add_plane, mve_sub_plane, mve_mul_plane, mve_minimum_plane,
                                              mve_maximum_plane };
    if (!binary_args_valid(desc, input1, input2, output)) {
        return EDGEC_ARG_ERROR;
    }
    const binary_ctx ctx = binary_ctx_make(desc);
    binary_desc_planes(&ctx, isa_plane(desc, planes[desc->op]), input1, input2, output);
    return EDGEC_OK;
}

#endif /* __ARM_FEATURE_MVE */

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
