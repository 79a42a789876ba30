/*
 * edgec_depthwise_conv_s8_packed.h -- private to edgec_depthwise_conv_s8_packed (the entry points
 * and the driver, edgec_depthwise_conv_s8_packed.c) and its per-ISA group code
 * (edgec_depthwise_conv_s8_packed_dsp.c, _mve.c, _portable.c, one of which a build compiles):
 * the layer and group records, and the row cache every ISA fills the same way. The driver's
 * header comment describes the cache and its entries.
 */
#ifndef EDGEC_DEPTHWISE_CONV_S8_PACKED_H
#define EDGEC_DEPTHWISE_CONV_S8_PACKED_H

#include "edgec_nn.h"
#include "../support/edgec_support.h"

#include <stddef.h>
#include <string.h>

#define GROUP 4  /* channels per pass */
#define PHASES 3 /* slot orders of a 3x3 window's rows */

/* What every pass needs, fixed for the call. */
typedef struct {
    const edgec_per_channel_quant *quant;
    const int8_t *filter; /* [groups][KH*KW][4] */
    const int32_t *bias;  /* [groups * 4] */
    const int8_t *input;
    int32_t in_h;
    int32_t in_w;
    int32_t c;
    int32_t k_h;
    int32_t k_w;
    int32_t out_h;
    int32_t out_w;
    int32_t stride_h;
    int32_t stride_w;
    int32_t dilation_h;
    int32_t dilation_w;
    int32_t pad_top;
    int32_t pad_left;
    int32_t padded_w;    /* cached columns */
    int32_t image_start; /* the cached columns that hold image pixels: [image_start, image_end) */
    int32_t image_end;
    int32_t column_bytes; /* KH entries */
    int unrolled;         /* a 3x3 undilated window: group_row_3x3 */
    int8_t pad;           /* the input zero point */
    uint32_t pad_four;    /* ... in each byte */
    edgec_output_stage stage;
    int8_t *cache; /* [padded_w][KH] entries */
} packed_layer;

/* One pass: channels first .. first + count - 1 (count <= 4; the filter and bias are zero-padded
 * to 4 channels), with its constants read once. */
typedef struct {
    const packed_layer *layer;
    int32_t first;
    int32_t count;
    const int8_t *taps; /* the group's KH*KW taps of 4 bytes, [KH][KW] */
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
    /* From multiplier to bias in the order the 3x3 rows' assembly reads them (mve_pixels_3x3). */
    int32x4_t multiplier;
    int32x4_t left;        /* max(shift, 0) */
    int32x4_t minus_right; /* min(shift, 0) */
    int32x4_t lo;          /* the output stage's bounds, in every lane */
    int32x4_t hi;
    int32x4_t bias;
    int32x4_t shift;
    int right_shifts_only;   /* no channel's shift is positive: the 3x3 rows take pixel pairs */
    int strict_right_shifts; /* every channel's shift is negative */
#else
    int32_t bias[4];
#if defined(__ARM_FEATURE_DSP)
    int short_requant;                  /* all four channels admit the short requantization */
    union {                             /* one or the other: the stack holds a group per call */
        edgec_dsp_requant q[4];         /* short_requant */
        edgec_dsp_requant_wide wide[4]; /* wide_requant */
    } rq;
    uint32_t lows;
    uint32_t highs;
#endif
#endif
#if EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES == 8
    int32_t w[PHASES][9][2]; /* 3x3 taps widened like the entries (0/2, 1/3), cache order [kx][slot] */
#else
    int8_t w[PHASES][9][4]; /* 3x3 taps in cache order: [kx][slot] */
#endif
#if defined(__ARM_FEATURE_DSP) && !(defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))
    int wide_requant; /* not short_requant, but all four admit the wide form (a shift of -1) */
#endif
} packed_group;

/*
 * All output pixels of one group (channels first .. first + 3), in NHWC order, into `out` (pixels
 * `pixel_step` bytes apart), through the row cache. Defined by the build's ISA file: _mve.c with
 * Helium, _dsp.c with the DSP extension, else _portable.c.
 */
void edgec_depthwise_packed_group_outputs(const packed_layer *layer, int32_t batches, int32_t first, int8_t *out,
                                          int32_t pixel_step);

/* ==== The group code every ISA file shares: the file defines EDGEC_DEPTHWISE_PACKED_GROUP_CODE
 * before it includes this header, and group_make, group_pixel and group_row_3x3 after. ========== */
#if defined(EDGEC_DEPTHWISE_PACKED_GROUP_CODE)

/* An entry: the group's four channels, widened to int16 pairs (0/2, then 1/3) where the DSP
 * extension multiplies them, else as they are. */
static inline void cache_entry(int8_t *dst, uint32_t four)
{
#if EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES == 8
    edgec_dsp_store_widened(dst, (int32_t)four);
#else
    memcpy(dst, &four, 4);
#endif
}

/* The group's constants (in the ISA's form) and the first of its pixels' outputs. */
static void group_make(packed_group *g);
static void group_pixel(const packed_group *g, const int32_t *slots, int32_t at, int8_t *out);
static EDGEC_NOINLINE void group_row_3x3(const packed_group *g, int32_t p, int8_t *out, int32_t out_step);

#if EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES == 8
/*
 * The 3x3 taps widened like the entries, in each phase's cache order [kx][slot]: phase p keeps
 * filter row ky in slot (ky + p) mod 3. Each tap is read and widened once and stored into its
 * three phases (no division per tap, no copy between phases: a group's constants are a fixed cost
 * that a 3x3 or 6x6 layer pays per 9 or 36 pixels).
 */
static void group_phases(packed_group *g)
{
    for (int32_t ky = 0; ky < 3; ky++) {
        const int32_t slot1 = ky == 2 ? 0 : ky + 1; /* (ky + 1) mod 3 */
        const int32_t slot2 = ky == 0 ? 2 : ky - 1; /* (ky + 2) mod 3 */
        for (int32_t kx = 0; kx < 3; kx++) {
            int32_t ws;
            memcpy(&ws, g->taps + 4 * (ky * 3 + kx), 4);
            const int32_t even = __sxtb16(ws);
            const int32_t odd = edgec_sxtb16_ror8(ws);
            g->w[0][kx * 3 + ky][0] = even;
            g->w[0][kx * 3 + ky][1] = odd;
            g->w[1][kx * 3 + slot1][0] = even;
            g->w[1][kx * 3 + slot1][1] = odd;
            g->w[2][kx * 3 + slot2][0] = even;
            g->w[2][kx * 3 + slot2][1] = odd;
        }
    }
}
#else
/* Phase p's slot s holds filter row (s - p) mod 3: phase 0's slot (s - p) mod 3, so phases 1 and 2
 * are phase 0's entries permuted (no division per tap). */
static const int8_t phase_source_slot[PHASES][3] = { { 0, 1, 2 }, { 2, 0, 1 }, { 1, 2, 0 } };

/* The 3x3 taps in each phase's cache order. */
static void group_phases(packed_group *g)
{
    for (int32_t t = 0; t < 9; t++) { /* phase 0: cache order [kx][slot], slot s = filter row s */
        const int8_t *tap = g->taps + 4 * ((t % 3) * 3 + t / 3);
        memcpy(g->w[0][t], tap, 4);
    }
    for (int32_t p = 1; p < PHASES; p++) {
        for (int32_t kx = 0; kx < 3; kx++) {
            for (int32_t s = 0; s < 3; s++) {
                memcpy(g->w[p][kx * 3 + s], g->w[0][kx * 3 + phase_source_slot[p][s]], sizeof g->w[0][0]);
            }
        }
    }
}
#endif

/* ---- The row cache -------------------------------------------------------------------------- */

/* The padding columns' entries the pad value, once per group: they keep it, and fill_row writes
 * the image columns of every row it brings in (the pad value too, above and below the image). */
static void cache_pad(const packed_layer *layer)
{
    const int32_t entry = (int32_t)EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES;
    int8_t *dst = layer->cache;
    for (int32_t j = 0; j < layer->image_start * layer->k_h; j++, dst += entry) { /* left */
        cache_entry(dst, layer->pad_four);
    }
    dst = layer->cache + layer->image_end * layer->column_bytes;
    for (int32_t j = layer->image_end * layer->k_h; j < layer->padded_w * layer->k_h; j++, dst += entry) {
        cache_entry(dst, layer->pad_four); /* right */
    }
}

/* n image columns of a full group: four channels from src (pixels c bytes apart) per entry. */
static inline void fill_image_columns(int8_t *dst, const int8_t *src, int32_t n, int32_t c, int32_t step)
{
    for (int32_t k = 0; k < n; k++, dst += step) {
        uint32_t four;
        memcpy(&four, src + k * c, 4);
        cache_entry(dst, four);
    }
}

/* The image columns of padded row r (input row r - pad_top) of batch b into cache slot `slot`:
 * the group's channels (the pad byte past its last one), or the pad value above and below the
 * image. */
static void fill_row(const packed_group *g, int32_t b, int32_t r, int32_t slot)
{
    const packed_layer *layer = g->layer;
    const int32_t step = layer->column_bytes;
    const int32_t iy = r - layer->pad_top;
    const int32_t n = layer->image_end - layer->image_start;
    int8_t *dst = layer->cache + layer->image_start * step + slot * (int32_t)EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES;
    if (iy < 0 || iy >= layer->in_h) {
        for (int32_t k = 0; k < n; k++, dst += step) {
            cache_entry(dst, layer->pad_four);
        }
        return;
    }
    if (n <= 0) {
        return;
    }
    const int32_t c = layer->c;
    const int8_t *src =
        layer->input + ((b * layer->in_h + iy) * layer->in_w + layer->image_start - layer->pad_left) * c + g->first;
    if (g->count == GROUP) { /* a fixed-size copy is one load, a variable one a call */
        fill_image_columns(dst, src, n, c, step);
        return;
    }
    uint32_t four = layer->pad_four; /* past the group's last channel: the pad byte */
    for (int32_t k = 0; k < n; k++, dst += step) {
        memcpy(&four, src + k * c, (size_t)g->count);
        cache_entry(dst, four);
    }
}

/*
 * Brings the rows output row oy reads into the cache; slots[ky] = the slot of filter row ky.
 * Undilated, padded row r stays in slot r mod KH until overwritten: rows below `*cached` are
 * there already. Dilated, every row is copied into slot ky.
 */
static void cache_rows(const packed_group *g, int32_t b, int32_t oy, int32_t *cached, int32_t *slots)
{
    const packed_layer *layer = g->layer;
    const int32_t k_h = layer->k_h;
    const int32_t first = oy * layer->stride_h;
    if (layer->dilation_h != 1) {
        for (int32_t ky = 0; ky < k_h; ky++) {
            slots[ky] = ky;
            fill_row(g, b, first + ky * layer->dilation_h, ky);
        }
        return;
    }
    for (int32_t r = EDGEC_MAX(first, *cached); r < first + k_h; r++) {
        fill_row(g, b, r, r % k_h);
    }
    *cached = first + k_h;
    int32_t slot = first % k_h;
    for (int32_t ky = 0; ky < k_h; ky++) {
        slots[ky] = slot;
        slot = slot + 1 == k_h ? 0 : slot + 1;
    }
}

/* One batch's output rows of a group, through the row cache; returns the output after them. Apart
 * from group_outputs so that its cache slots are on the stack only on this path, not under the
 * DSP/Helium row routines group_outputs calls instead (the deepest stack of a model's invoke). */
static EDGEC_NOINLINE int8_t *group_rows(const packed_group *g, int32_t b, int8_t *out, int32_t pixel_step)
{
    const packed_layer *layer = g->layer;
    int32_t slots[EDGEC_DEPTHWISE_PACKED_MAX_K];
    int32_t cached = 0;
    for (int32_t oy = 0; oy < layer->out_h; oy++) {
        cache_rows(g, b, oy, &cached, slots);
        if (layer->unrolled) {
            group_row_3x3(g, slots[0], out, pixel_step);
            out += layer->out_w * pixel_step;
            continue;
        }
        for (int32_t ox = 0; ox < layer->out_w; ox++, out += pixel_step) {
            group_pixel(g, slots, ox * layer->stride_w, out);
        }
    }
    return out;
}

/* The group record of channels first .. first + 3 (group_make, and the 3x3 taps' phases where
 * the window is unrolled), with the row cache's padding columns set. */
static inline void group_begin(packed_group *g, const packed_layer *layer, int32_t first)
{
    g->layer = layer;
    g->first = first;
    g->count = EDGEC_MIN(GROUP, layer->c - first);
    g->taps = layer->filter + first * layer->k_h * layer->k_w;
    group_make(g);
    if (layer->unrolled) {
        group_phases(g);
    }
    cache_pad(layer);
}

#endif /* EDGEC_DEPTHWISE_PACKED_GROUP_CODE */
#endif /* EDGEC_DEPTHWISE_CONV_S8_PACKED_H */
