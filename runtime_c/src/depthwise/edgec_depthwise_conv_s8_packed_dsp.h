/*
 * edgec_depthwise_conv_s8_packed_dsp.h -- private to the DSP group code: what
 * edgec_depthwise_conv_s8_packed_dsp.c (the short requantization) and
 * edgec_depthwise_conv_s8_packed_dsp_wide.c (its wide form, for groups with a shift of -1) share.
 * The wide form is a file of its own so that the short form's code keeps its size and order:
 * the M4 flash accelerator's instruction cache is modelled direct-mapped, and the wide routines
 * among the short ones (GCC orders a file's functions itself) moved dsp_group_rows_3x3 onto
 * dsp_row_3x3's lines (DS-CNN int8, cortex-m4: +2 to +5 % estimated cycles a depthwise layer, the
 * same instructions).
 */
#ifndef EDGEC_DEPTHWISE_CONV_S8_PACKED_DSP_H
#define EDGEC_DEPTHWISE_CONV_S8_PACKED_DSP_H

#include "edgec_depthwise_conv_s8_packed.h"

#if defined(__ARM_FEATURE_DSP) && !(defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))

/* The wide short requantization's constants (qw) of a group with wide_requant set. */
void edgec_depthwise_packed_wide_make(packed_group *g);

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

/* Pixel pairs of a row (edgec_depthwise_conv_s8_packed_dsp.c). */
typedef struct dsp_pair_run dsp_pair_run;
typedef void (*dsp_pairs_fn)(dsp_pair_run *run);

/*
 * n >= 0 columns of a full group into the 3x3 cache, each entry's four channels widened as
 * cache_entry does: from src on (pixels c bytes apart; c = 0 repeats one word, the pad value),
 * into the entries at dst, 24 bytes (a column) apart. Two columns a turn, both loaded first (the
 * second load pipelines), stored by STR immediates (1 cycle each on the M4, where STRD takes 3).
 */
static inline void dsp_widen_columns(int8_t *dst, const int8_t *src, int32_t n, int32_t c)
{
    int32_t a;
    int32_t b;
    int32_t t;
    __asm__ volatile("asrs %[n], %[n], #1\n\t" /* the pairs; the carry: an odd column, done first */
                     "bcc 2f\n\t"
                     "ldr %[a], [%[src]]\n\t"
                     "add %[src], %[src], %[c]\n\t"
                     "sxtb16 %[t], %[a]\n\t"
                     "sxtb16 %[a], %[a], ror #8\n\t"
                     "str %[t], [%[dst]]\n\t"
                     "str %[a], [%[dst], #4]\n\t"
                     "add %[dst], %[dst], #24\n"
                     "2:\n\t"
                     "cmp %[n], #0\n\t"
                     "beq 3f\n"
                     "1:\n\t"
                     "ldr %[a], [%[src]]\n\t"
                     "ldr %[b], [%[src], %[c]]\n\t"
                     "add %[src], %[src], %[c], lsl #1\n\t"
                     "sxtb16 %[t], %[a]\n\t"
                     "sxtb16 %[a], %[a], ror #8\n\t"
                     "str %[t], [%[dst]]\n\t"
                     "str %[a], [%[dst], #4]\n\t"
                     "sxtb16 %[t], %[b]\n\t"
                     "sxtb16 %[b], %[b], ror #8\n\t"
                     "str %[t], [%[dst], #24]\n\t"
                     "str %[b], [%[dst], #28]\n\t"
                     "add %[dst], %[dst], #48\n\t"
                     "subs %[n], %[n], #1\n\t"
                     "bne 1b\n"
                     "3:"
                     : [dst] "+r"(dst), [src] "+r"(src), [n] "+r"(n), [a] "=&r"(a), [b] "=&r"(b), [t] "=&r"(t)
                     : [c] "r"(c)
                     : "memory", "cc");
}

/* What dsp_group_rows_3x3 reads per row: where padded rows enter the cache, and the row routine's
 * arguments besides the phase and the output. */
typedef struct {
    int8_t *columns;     /* the cache's first image column, slot 0 */
    const int8_t *image; /* the group's first channel at pixel (0, 0) of the batch */
    const int8_t *pad;   /* the pad word */
    int32_t in_row;      /* bytes from one image row to the next */
    int32_t in_h;
    int32_t pad_top;
    int32_t n; /* image columns; n > 0 means image_start == pad_left: column 0 is the image's */
    int32_t c;
    dsp_pairs_fn pairs;
    dsp_row row;
} dsp_rows;

/* Padded row r into slot `slot`: its image columns, or the pad word above and below the image (out
 * of line: the row loops stay small enough for the M4 flash accelerator to keep them cached). */
static EDGEC_NOINLINE void dsp_bring_row(const dsp_rows *rows, int32_t r, int32_t slot)
{
    const int32_t entry = (int32_t)EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES;
    const int32_t iy = r - rows->pad_top;
    const int inside = iy >= 0 && iy < rows->in_h;
    dsp_widen_columns(rows->columns + slot * entry, inside ? rows->image + iy * rows->in_row : rows->pad, rows->n,
                      inside ? rows->c : 0);
}

/* One output row in phase p (rows->row.pixels set, then the row routine). */
typedef void (*dsp_row_runner)(const packed_group *g, dsp_rows *rows, int32_t p, int8_t *out);

/*
 * Every row of batch b of a full group with a 3x3 undilated window, each by `run` (a constant:
 * each caller has its own copy, with no test per row): cache_rows and group_row_3x3 with their
 * bookkeeping cut to the bone, as a DS-CNN-sized row of 5 pixels spent as much on it as on two of
 * its pixels. Filter row 0 is in slot first mod 3, so that is the phase, counted along the rows;
 * at stride 1 each output row oy brings in one padded row, oy + 2, after rows 0 and 1. `pairs`
 * (dsp_pairs_for; NULL: every row pixel by pixel) goes to `run` in rows.
 */
static inline void dsp_rows_3x3(const packed_group *g, int32_t b, int8_t *out, int32_t pixel_step, dsp_pairs_fn pairs,
                                dsp_row_runner run)
{
    const packed_layer *layer = g->layer;
    const int32_t entry = (int32_t)EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES;
    const int32_t out_h = layer->out_h;
    const int32_t row_bytes = layer->out_w * pixel_step;
    const int32_t stride_h = layer->stride_h;
    dsp_rows rows;
    rows.columns = layer->cache + layer->image_start * layer->column_bytes;
    rows.image = layer->input + b * layer->in_h * layer->in_w * layer->c + g->first;
    rows.pad = (const int8_t *)&layer->pad_four;
    rows.in_row = layer->in_w * layer->c;
    rows.in_h = layer->in_h;
    rows.pad_top = layer->pad_top;
    rows.n = layer->image_end - layer->image_start;
    rows.c = layer->c;
    rows.pairs = pairs;
    rows.row.out_step = pixel_step;
    rows.row.x_advance = 3 * entry * layer->stride_w - 9 * entry;
    if (stride_h == 1) {
        dsp_bring_row(&rows, 0, 0);
        dsp_bring_row(&rows, 1, 1);
        for (int32_t oy = 0, slot = 2, phase = 0; oy < out_h; oy++, out += row_bytes) {
            dsp_bring_row(&rows, oy + 2, slot);
            run(g, &rows, phase, out);
            slot = slot == 2 ? 0 : slot + 1;
            phase = phase == 2 ? 0 : phase + 1;
        }
        return;
    }
    const int32_t phase_step = stride_h % 3;
    int32_t next = 0; /* the next padded row to bring in */
    int32_t slot = 0; /* its slot, next mod 3 */
    int32_t phase = 0;
    for (int32_t oy = 0, first = 0; oy < out_h; oy++, first += stride_h, out += row_bytes) {
        for (; next < first + 3; next++, slot = slot == 2 ? 0 : slot + 1) {
            if (next >= first) { /* not a row no output row reads (stride_h > 3) */
                dsp_bring_row(&rows, next, slot);
            }
        }
        run(g, &rows, phase, out);
        phase += phase_step;
        if (phase >= 3) {
            phase -= 3;
        }
    }
}

/* dsp_rows_3x3 of a group with the wide short requantization, every row pixel by pixel. */
void edgec_depthwise_packed_wide_rows_3x3(const packed_group *g, int32_t b, int8_t *out, int32_t pixel_step);
#endif

#endif
#endif /* EDGEC_DEPTHWISE_CONV_S8_PACKED_DSP_H */
