/*
 * edgec_binary_s8_dsp -- the int8 binary ops on cores with the Arm DSP extension: on unit-step
 * planes MUL (output shift -1..-24), MINIMUM and MAXIMUM four elements a step; the other ops and
 * layouts run the portable plane functions (edgec_binary_s8_plane.h).
 * Golden: edgec.ops.binary.binary_s8.
 */
#include "edgec_nn.h"

/* ---- Arm DSP extension ---------------------------------------------------------------------- */
#if defined(__ARM_FEATURE_DSP)

#include "edgec_binary_s8_packed.h"

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
