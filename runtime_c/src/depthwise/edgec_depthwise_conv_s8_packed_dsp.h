/*
 * edgec_depthwise_conv_s8_packed_dsp.h -- private to the DSP group code: what
 * edgec_depthwise_conv_s8_packed_dsp.c (the short requantization) and
 * edgec_depthwise_conv_s8_packed_dsp_wide.c (its wide form, for groups with a shift of -1) share.
 * The wide form is a file of its own so that the short form's code keeps its place: the M4 flash
 * accelerator's instruction cache is modelled direct-mapped, and the wide routines between the
 * short ones moved dsp_group_rows_3x3 onto dsp_row_3x3's lines (DS-CNN int8, cortex-m4: +2 %
 * estimated cycles a depthwise layer, the same instructions).
 */
#ifndef EDGEC_DEPTHWISE_CONV_S8_PACKED_DSP_H
#define EDGEC_DEPTHWISE_CONV_S8_PACKED_DSP_H

#include "edgec_depthwise_conv_s8_packed.h"

#if defined(__ARM_FEATURE_DSP) && !(defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))

/* 1 with the group's wide short requantization constants (qw) made if all four channels admit it
 * (a full group). */
int edgec_depthwise_packed_wide_make(packed_group *g);

/* dsp_store_four by the wide short requantization. */
void edgec_depthwise_packed_store_four_wide(const packed_group *g, int32_t a0, int32_t a1, int32_t a2, int32_t a3,
                                            int8_t *out);

/* A row of 3x3 undilated pixels in phase p: nine consecutive entries each. */
#if defined(__OPTIMIZE__) && EDGEC_UNALIGNED_ASM
/* What dsp_row_3x3's assembly reads per row besides the group. */
typedef struct {
    int32_t out_step;
    int32_t x_advance; /* from the entry after a pixel's ninth to the next pixel's first */
    int32_t pixels;    /* >= 1 */
} dsp_row;

/* A tap: its entry and weights by 4 loads in one run (pipelined: 5 cycles; 2 LDRD take 6). */
#define DSP_TAP(t)                                                                                           \
    "ldr r8, [%[x]], #4\n\tldr r9, [%[x]], #4\n\tldr r10, [%[w], #" #t "]\n\tldr r12, [%[w], #" #t "+4]\n\t" \
    "smlabb r0, r8, r10, r0\n\tsmlatt r2, r8, r10, r2\n\t"                                                   \
    "smlabb r1, r9, r12, r1\n\tsmlatt r3, r9, r12, r3\n\t"

#if defined(__clang__)
/* clang keeps a frame register and cannot give the loop r11 too: the pixels to go stay in row. */
#define DSP_ROW_COUNT_START ""
#define DSP_ROW_COUNT_DOWN "ldr r8, [%[row], #8]\n\tsubs r8, r8, #1\n\tstr r8, [%[row], #8]\n\t"
#define DSP_ROW_COUNTER
#else
/* the pixels to go, in the one register the loop leaves free */
#define DSP_ROW_COUNT_START "ldr r11, [%[row], #8]\n\t"
#define DSP_ROW_COUNT_DOWN "subs r11, r11, #1\n\t"
#define DSP_ROW_COUNTER "r11",
#endif

/* The biases, then the nine taps of a pixel. */
#define DSP_ROW_TAPS                                                                                                  \
    "ldrd r0, r1, [%[g], %[bias]]\n\tldrd r2, r3, [%[g], %[bias2]]\n\t" DSP_TAP(0) DSP_TAP(8) DSP_TAP(16) DSP_TAP(24) \
        DSP_TAP(32) DSP_TAP(40) DSP_TAP(48) DSP_TAP(56) DSP_TAP(64)

/* The four saturated outputs packed, clamped and stored; on to the next pixel. */
#define DSP_ROW_STORE                                                                \
    "bfi r0, r1, #8, #8\n\tbfi r0, r2, #16, #8\n\tbfi r0, r3, #24, #8\n\t"           \
    "ldrd r8, r9, [%[g], %[lows]]\n\t"                                               \
    "ssub8 r10, r0, r8\n\tsel r0, r0, r8\n\tssub8 r10, r0, r9\n\tsel r0, r9, r0\n\t" \
    "str r0, [%[out]]\n\t"                                                           \
    "ldrd r8, r9, [%[row]]\n\t"                                                      \
    "add %[out], %[out], r8\n\t"                                                     \
    "add %[x], %[x], r9\n\t" DSP_ROW_COUNT_DOWN "bne 1b"

/* dsp_row_3x3 of a group with the wide short requantization. */
void edgec_depthwise_packed_row_3x3_wide(const packed_group *g, const int32_t (*w)[2], const int8_t *x, int8_t *out,
                                         dsp_row *row);
#endif

#endif
#endif /* EDGEC_DEPTHWISE_CONV_S8_PACKED_DSP_H */
