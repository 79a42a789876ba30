/*
 * edgec_binary_s8_packed.h -- private to the packed int8 binary ops (edgec_binary_s8_dsp.c,
 * edgec_binary_s8_mve.c): on top of edgec_binary_s8_plane.h, the layouts they take and a plane
 * of a commutative op seen from its contiguous operand.
 */
#ifndef EDGEC_BINARY_S8_PACKED_H
#define EDGEC_BINARY_S8_PACKED_H

#include "edgec_binary_s8_plane.h"

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

#endif /* packed paths */

#endif /* EDGEC_BINARY_S8_PACKED_H */
