/*
 * edgec_depthwise_conv_s8_packed's groups on cores with neither the DSP extension nor Helium (and
 * the host): an entry is a pixel's four int8 channels, a tap four multiply-adds. Golden kernel:
 * edgec.ops.depthwise.depthwise_conv2d_s8; the driver (edgec_depthwise_conv_s8_packed.c)
 * describes the row cache.
 */
#include "edgec_nn.h"

#if !defined(__ARM_FEATURE_DSP) && !(defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))

#define EDGEC_DEPTHWISE_PACKED_GROUP_CODE
#include "edgec_depthwise_conv_s8_packed.h"

/* acc += x * w, wrapping like SMLAxy: the folded bias may take a sum past int32 and back. */
static inline void mac_wrapping(int32_t *acc, int8_t x, int8_t w)
{
    *acc = (int32_t)((uint32_t)*acc + (uint32_t)((int32_t)x * (int32_t)w));
}

static inline void tap_four_int8(const int8_t *x, const int8_t *w, int32_t *a0, int32_t *a1, int32_t *a2, int32_t *a3)
{
    mac_wrapping(a0, x[0], w[0]);
    mac_wrapping(a1, x[1], w[1]);
    mac_wrapping(a2, x[2], w[2]);
    mac_wrapping(a3, x[3], w[3]);
}

static void group_make(packed_group *g)
{
    memcpy(g->bias, g->layer->bias + g->first, sizeof g->bias);
}

static inline void group_store(const packed_group *g, int32_t a0, int32_t a1, int32_t a2, int32_t a3, int8_t *out)
{
    const int32_t sums[4] = { a0, a1, a2, a3 };
    const int32_t *mult = g->layer->quant->multiplier + g->first;
    const int32_t *shift = g->layer->quant->shift + g->first;
    for (int32_t k = 0; k < g->count; k++) {
        out[k] = edgec_requantize_s8(sums[k], mult[k], shift[k], g->layer->stage);
    }
}

static void group_pixel(const packed_group *g, const int32_t *slots, int32_t at, int8_t *out)
{
    const packed_layer *layer = g->layer;
    const int32_t entry = (int32_t)EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES;
    const int8_t *w = g->taps;
    int32_t a0 = g->bias[0], a1 = g->bias[1], a2 = g->bias[2], a3 = g->bias[3];
    for (int32_t ky = 0; ky < layer->k_h; ky++) {
        const int8_t *x = layer->cache + at * layer->column_bytes + entry * slots[ky];
        for (int32_t kx = 0; kx < layer->k_w; kx++, w += 4, x += layer->dilation_w * layer->column_bytes) {
            tap_four_int8(x, w, &a0, &a1, &a2, &a3);
        }
    }
    group_store(g, a0, a1, a2, a3, out);
}

/* A row of 3x3 undilated pixels in phase p: nine consecutive entries each. */
static EDGEC_NOINLINE void group_row_3x3(const packed_group *g, int32_t p, int8_t *out, int32_t out_step)
{
    const int32_t entry = (int32_t)EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES;
    const int32_t step = 3 * entry * g->layer->stride_w;
    const int8_t *x = g->layer->cache;
    for (int32_t ox = 0; ox < g->layer->out_w; ox++, x += step, out += out_step) {
        int32_t a0 = g->bias[0], a1 = g->bias[1], a2 = g->bias[2], a3 = g->bias[3];
        for (int32_t t = 0; t < 9; t++) {
            tap_four_int8(x + entry * t, g->w[p][t], &a0, &a1, &a2, &a3);
        }
        group_store(g, a0, a1, a2, a3, out);
    }
}

void edgec_depthwise_packed_group_outputs(const packed_layer *layer, int32_t batches, int32_t first, int8_t *out,
                                          int32_t pixel_step)
{
    packed_group g;
    group_begin(&g, layer, first);
    for (int32_t b = 0; b < batches; b++) {
        out = group_rows(&g, b, out, pixel_step);
    }
}

#endif
