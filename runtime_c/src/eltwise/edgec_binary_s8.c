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

/* ==== The ISA entry points ================================================================== */
#if defined(__ARM_FEATURE_DSP) || (defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))

/* The innermost strides the packed rows take: both inputs contiguous, or one of them a single
 * value (NHWC per-channel rows, scalar operands, per-pixel operands). */
static int unit_steps(int32_t step1, int32_t step2)
{
    return (step1 == 1 && (step2 == 0 || step2 == 1)) || (step1 == 0 && step2 == 1);
}

/* The row function of an ISA entry point: `packed` where it applies, else the portable one. */
static binary_row_fn isa_row(const edgec_binary_desc *d, binary_row_fn packed)
{
    const int32_t inner = d->num_dims - 1;
    return packed != NULL && unit_steps(d->strides1[inner], d->strides2[inner]) ? packed
                                                                              : portable_row(d->op);
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

/* Four MUL outputs, packed and clamped, from (x + offset) of elements 0..3 of both operands as
 * int16 pairs: even = (element 0, element 2), odd = (element 1, element 3). The products fit
 * SMULBB/SMULTT (|x + offset| <= 255). */
static inline uint32_t dsp_mul_four(int32_t a_even, int32_t a_odd, int32_t b_even, int32_t b_odd,
                                    edgec_dsp_requant q, uint32_t lows, uint32_t highs)
{
    const int32_t y0 = edgec_dsp_requantize_ssat8(dsp_mul_bottoms(a_even, b_even), q);
    const int32_t y1 = edgec_dsp_requantize_ssat8(dsp_mul_bottoms(a_odd, b_odd), q);
    const int32_t y2 = edgec_dsp_requantize_ssat8(dsp_mul_tops(a_even, b_even), q);
    const int32_t y3 = edgec_dsp_requantize_ssat8(dsp_mul_tops(a_odd, b_odd), q);
    return edgec_dsp_clamp_s8x4(edgec_dsp_pack_s8x4(y0, y1, y2, y3), lows, highs);
}

/*
 * MUL row on unit steps with the short requantization (edgec_dsp_requant: the output offset is
 * in its rounding constant): four elements per step, both operands widened with their offsets by
 * SXTAB16, products by SMULBB/SMULTT. The operand with step 1 is `vector`; the other has step
 * 1 too or is one value.
 */
static void dsp_mul_row(const binary_ctx *ctx, const int8_t *in1, int32_t step1,
                        const int8_t *in2, int32_t step2, int8_t *out, int32_t n)
{
    const edgec_binary_desc *d = ctx->desc;
    const int swap = step1 == 0; /* MUL commutes: in2 becomes the vector operand */
    const int8_t *vector = swap ? in2 : in1;
    const int8_t *other = swap ? in1 : in2;
    const int32_t vector_offset = swap ? d->input2_offset : d->input1_offset;
    const int32_t other_offset = swap ? d->input1_offset : d->input2_offset;
    const int32_t other_step = swap ? step1 : step2;
    const int32_t vector_pair = dsp_pair(vector_offset);
    const int32_t other_pair = dsp_pair(other_offset);
    const edgec_dsp_requant q = ctx->requant;
    const uint32_t lows = edgec_dsp_bytes(d->act_min);
    const uint32_t highs = edgec_dsp_bytes(d->act_max);
    int32_t i = 0;
    if (other_step == 0) {
        const int32_t b = dsp_pair(other[0] + other_offset);
        for (; i + 4 <= n; i += 4) {
            int32_t x;
            memcpy(&x, vector + i, 4);
            const uint32_t y = dsp_mul_four(__sxtab16(vector_pair, x),
                                            dsp_sxtab16_ror8(vector_pair, x), b, b, q, lows, highs);
            memcpy(out + i, &y, 4); /* after reading: out may be the vector operand */
        }
    } else {
        for (; i + 4 <= n; i += 4) {
            int32_t x1, x2;
            memcpy(&x1, vector + i, 4);
            memcpy(&x2, other + i, 4);
            const uint32_t y = dsp_mul_four(__sxtab16(vector_pair, x1),
                                            dsp_sxtab16_ror8(vector_pair, x1),
                                            __sxtab16(other_pair, x2),
                                            dsp_sxtab16_ror8(other_pair, x2), q, lows, highs);
            memcpy(out + i, &y, 4);
        }
    }
    for (; i < n; i++) {
        const int32_t product = (vector[i] + vector_offset) * (other[i * other_step] + other_offset);
        const int32_t y = edgec_dsp_requantize_ssat8(product, q);
        out[i] = (int8_t)EDGEC_MIN(EDGEC_MAX(y, d->act_min), d->act_max);
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

/* MINIMUM/MAXIMUM row on unit steps, four bytes per step (both commute, so a single-value
 * operand is simply in every byte of its word). */
static inline void dsp_select_row(const binary_ctx *ctx, const int8_t *in1, int32_t step1,
                                  const int8_t *in2, int32_t step2, int8_t *out, int32_t n,
                                  int maximum)
{
    const edgec_binary_desc *d = ctx->desc;
    const uint32_t lows = edgec_dsp_bytes(d->act_min);
    const uint32_t highs = edgec_dsp_bytes(d->act_max);
    const uint32_t splat1 = edgec_dsp_bytes(in1[0]);
    const uint32_t splat2 = edgec_dsp_bytes(in2[0]);
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint32_t a = splat1, b = splat2;
        if (step1 != 0) {
            memcpy(&a, in1 + i, 4);
        }
        if (step2 != 0) {
            memcpy(&b, in2 + i, 4);
        }
        const uint32_t y = edgec_dsp_clamp_s8x4(dsp_select4(a, b, maximum), lows, highs);
        memcpy(out + i, &y, 4);
    }
    for (; i < n; i++) {
        const int32_t a = in1[i * step1];
        const int32_t b = in2[i * step2];
        out[i] = edgec_clamp_to_s8(maximum ? EDGEC_MAX(a, b) : EDGEC_MIN(a, b), d->act_min, d->act_max);
    }
}

static void dsp_minimum_row(const binary_ctx *ctx, const int8_t *in1, int32_t step1,
                            const int8_t *in2, int32_t step2, int8_t *out, int32_t n)
{
    dsp_select_row(ctx, in1, step1, in2, step2, out, n, 0);
}

static void dsp_maximum_row(const binary_ctx *ctx, const int8_t *in1, int32_t step1,
                            const int8_t *in2, int32_t step2, int8_t *out, int32_t n)
{
    dsp_select_row(ctx, in1, step1, in2, step2, out, n, 1);
}

edgec_status edgec_binary_s8_dsp(const edgec_binary_desc *desc, const int8_t *input1,
                                 const int8_t *input2, int8_t *output)
{
    if (!binary_args_valid(desc, input1, input2, output)) {
        return EDGEC_ARG_ERROR;
    }
    const binary_ctx ctx = binary_ctx_make(desc);
    binary_row_fn packed = NULL;
    if (desc->op == EDGEC_BINARY_MUL &&
        edgec_dsp_requant_short(desc->output_multiplier, desc->output_shift)) {
        packed = dsp_mul_row;
    } else if (desc->op == EDGEC_BINARY_MINIMUM) {
        packed = dsp_minimum_row;
    } else if (desc->op == EDGEC_BINARY_MAXIMUM) {
        packed = dsp_maximum_row;
    }
    binary_desc_rows(&ctx, isa_row(desc, packed), input1, input2, output);
    return EDGEC_OK;
}

#endif /* __ARM_FEATURE_DSP */

/* ---- Helium --------------------------------------------------------------------------------- */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)

/* The output stage on eight int16 lanes: r (saturated to int16 from int32, which the clamp
 * bounds, within [-255, 255], make harmless) clamped, then the offset added. */
static inline int16x8_t mve_output_s16(int16x8_t r, edgec_output_stage stage)
{
    r = vmaxq_s16(r, vdupq_n_s16((int16_t)stage.lo));
    r = vminq_s16(r, vdupq_n_s16((int16_t)stage.hi));
    return vaddq_n_s16(r, (int16_t)stage.offset);
}

/* Eight MUL outputs from (x + offset) of both operands in int16 lanes: the even and the odd
 * lanes' int32 products (VMULLB/VMULLT) requantized, narrowed back into their lanes. */
static inline int16x8_t mve_mul_eight(int16x8_t a, int16x8_t b, int32x4_t multiplier,
                                      int32x4_t shift, edgec_output_stage stage)
{
    const int32x4_t even = edgec_mve_requantize(vmullbq_int_s16(a, b), multiplier, shift);
    const int32x4_t odd = edgec_mve_requantize(vmulltq_int_s16(a, b), multiplier, shift);
    return mve_output_s16(vqmovntq_s32(vqmovnbq_s32(vdupq_n_s16(0), even), odd), stage);
}

/* MUL row on unit steps, eight elements per step (the tail predicated). */
static void mve_mul_row(const binary_ctx *ctx, const int8_t *in1, int32_t step1,
                        const int8_t *in2, int32_t step2, int8_t *out, int32_t n)
{
    const edgec_binary_desc *d = ctx->desc;
    const int swap = step1 == 0; /* MUL commutes: in2 becomes the vector operand */
    const int8_t *vector = swap ? in2 : in1;
    const int8_t *other = swap ? in1 : in2;
    const int16x8_t vector_offset = vdupq_n_s16((int16_t)(swap ? d->input2_offset : d->input1_offset));
    const int32_t other_offset = swap ? d->input1_offset : d->input2_offset;
    const int32x4_t multiplier = vdupq_n_s32(d->output_multiplier);
    const int32x4_t shift = vdupq_n_s32(d->output_shift);
    if ((swap ? step1 : step2) == 0) {
        const int16x8_t b = vdupq_n_s16((int16_t)(other[0] + other_offset));
        for (int32_t i = 0; i < n; i += 8) {
            const mve_pred16_t lanes = vctp16q((uint32_t)(n - i));
            const int16x8_t a = vaddq_s16(vldrbq_z_s16(vector + i, lanes), vector_offset);
            vstrbq_p_s16(out + i, mve_mul_eight(a, b, multiplier, shift, ctx->stage), lanes);
        }
    } else {
        const int16x8_t b_offset = vdupq_n_s16((int16_t)other_offset);
        for (int32_t i = 0; i < n; i += 8) {
            const mve_pred16_t lanes = vctp16q((uint32_t)(n - i));
            const int16x8_t a = vaddq_s16(vldrbq_z_s16(vector + i, lanes), vector_offset);
            const int16x8_t b = vaddq_s16(vldrbq_z_s16(other + i, lanes), b_offset);
            vstrbq_p_s16(out + i, mve_mul_eight(a, b, multiplier, shift, ctx->stage), lanes);
        }
    }
}

/* An add/sub operand's four lanes rescaled onto the common grid (rescaled() on each lane). */
static inline int32x4_t mve_rescaled(const int8_t *x, mve_pred16_t lanes, int32_t offset,
                                     int32_t left_shift, int32x4_t multiplier, int32x4_t shift)
{
    const int32x4_t v = vaddq_n_s32(vldrbq_z_s32(x, lanes), offset);
    return edgec_mve_requantize(vshlq_r_s32(v, left_shift), multiplier, shift);
}

/* ADD/SUB row on unit steps, four elements per step; a single-value operand is rescaled once. */
static inline void mve_add_sub_row(const binary_ctx *ctx, const int8_t *in1, int32_t step1,
                                   const int8_t *in2, int32_t step2, int8_t *out, int32_t n,
                                   int subtract)
{
    const edgec_binary_desc *d = ctx->desc;
    const int32x4_t m1 = vdupq_n_s32(d->input1_multiplier);
    const int32x4_t s1 = vdupq_n_s32(d->input1_shift);
    const int32x4_t m2 = vdupq_n_s32(d->input2_multiplier);
    const int32x4_t s2 = vdupq_n_s32(d->input2_shift);
    const int32x4_t mo = vdupq_n_s32(d->output_multiplier);
    const int32x4_t so = vdupq_n_s32(d->output_shift);
    const int32x4_t single1 = vdupq_n_s32(
        rescaled(in1[0], d->input1_offset, ctx->scale, d->input1_multiplier, d->input1_shift));
    const int32x4_t single2 = vdupq_n_s32(
        rescaled(in2[0], d->input2_offset, ctx->scale, d->input2_multiplier, d->input2_shift));
    for (int32_t i = 0; i < n; i += 4) {
        const mve_pred16_t lanes = vctp32q((uint32_t)(n - i));
        const int32x4_t a = step1 ? mve_rescaled(in1 + i, lanes, d->input1_offset, d->left_shift, m1, s1)
                                  : single1;
        const int32x4_t b = step2 ? mve_rescaled(in2 + i, lanes, d->input2_offset, d->left_shift, m2, s2)
                                  : single2;
        /* VADD/VSUB wrap like the portable path's uint32_t arithmetic */
        const int32x4_t total = subtract ? vsubq_s32(a, b) : vaddq_s32(a, b);
        vstrbq_p_s32(out + i, edgec_mve_output(edgec_mve_requantize(total, mo, so), ctx->stage), lanes);
    }
}

static void mve_add_row(const binary_ctx *ctx, const int8_t *in1, int32_t step1,
                        const int8_t *in2, int32_t step2, int8_t *out, int32_t n)
{
    mve_add_sub_row(ctx, in1, step1, in2, step2, out, n, 0);
}

static void mve_sub_row(const binary_ctx *ctx, const int8_t *in1, int32_t step1,
                        const int8_t *in2, int32_t step2, int8_t *out, int32_t n)
{
    mve_add_sub_row(ctx, in1, step1, in2, step2, out, n, 1);
}

/* MINIMUM/MAXIMUM row on unit steps, sixteen bytes per step. */
static inline void mve_select_row(const binary_ctx *ctx, const int8_t *in1, int32_t step1,
                                  const int8_t *in2, int32_t step2, int8_t *out, int32_t n,
                                  int maximum)
{
    const edgec_binary_desc *d = ctx->desc;
    const int8x16_t lo = vdupq_n_s8((int8_t)d->act_min);
    const int8x16_t hi = vdupq_n_s8((int8_t)d->act_max);
    for (int32_t i = 0; i < n; i += 16) {
        const mve_pred16_t lanes = vctp8q((uint32_t)(n - i));
        const int8x16_t a = step1 ? vldrbq_z_s8(in1 + i, lanes) : vdupq_n_s8(in1[0]);
        const int8x16_t b = step2 ? vldrbq_z_s8(in2 + i, lanes) : vdupq_n_s8(in2[0]);
        const int8x16_t y = maximum ? vmaxq_s8(a, b) : vminq_s8(a, b);
        vstrbq_p_s8(out + i, vminq_s8(vmaxq_s8(y, lo), hi), lanes);
    }
}

static void mve_minimum_row(const binary_ctx *ctx, const int8_t *in1, int32_t step1,
                            const int8_t *in2, int32_t step2, int8_t *out, int32_t n)
{
    mve_select_row(ctx, in1, step1, in2, step2, out, n, 0);
}

static void mve_maximum_row(const binary_ctx *ctx, const int8_t *in1, int32_t step1,
                            const int8_t *in2, int32_t step2, int8_t *out, int32_t n)
{
    mve_select_row(ctx, in1, step1, in2, step2, out, n, 1);
}

edgec_status edgec_binary_s8_mve(const edgec_binary_desc *desc, const int8_t *input1,
                                 const int8_t *input2, int8_t *output)
{
    static const binary_row_fn rows[] = {mve_add_row, mve_sub_row, mve_mul_row, mve_minimum_row,
                                         mve_maximum_row};
    if (!binary_args_valid(desc, input1, input2, output)) {
        return EDGEC_ARG_ERROR;
    }
    const binary_ctx ctx = binary_ctx_make(desc);
    binary_desc_rows(&ctx, isa_row(desc, rows[desc->op]), input1, input2, output);
    return EDGEC_OK;
}

#endif /* __ARM_FEATURE_MVE */

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
