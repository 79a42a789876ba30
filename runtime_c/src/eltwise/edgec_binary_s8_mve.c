/*
 * edgec_binary_s8_mve -- the int8 binary ops on cores with Helium (MVE): on unit-step planes
 * ADD/SUB four elements a step, MUL eight, MINIMUM/MAXIMUM sixteen; other layouts run the portable
 * plane functions (edgec_binary_s8_plane.h, edgec_binary_s8_packed.h). Golden: edgec.ops.binary.binary_s8.
 */
#include "edgec_nn.h"

/* ---- Helium --------------------------------------------------------------------------------- */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)

#include "edgec_binary_s8_packed.h"

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
