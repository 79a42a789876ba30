/*
 * edgec_movement_s8.c -- int8 data movement: the strided copy (permute, slice, cat, expand,
 * channel shuffle), constant padding and nearest upsampling. Values are moved, never changed.
 *
 * All three build on two run primitives: copy_run (a contiguous run of bytes: 16 bytes per
 * LDM/STM pair on Thumb-2 cores when both ends are word-aligned, else a word at a time through
 * memcpy, one LDR/STR where unaligned access is allowed; 16 bytes per predicated vector on Helium)
 * and fill_run (a run of one repeated byte, likewise). The copy's rows are runs, fills, strided
 * element loops, or zips of two runs (a channel shuffle with 2 groups: SEL/PKHBT with the DSP
 * extension, VST2 on Helium). The descriptors come from edgec.ops.movement, whose simplifiers
 * leave as few and as long inner loops as the layout allows.
 * Golden: edgec.ops.movement.copy_s8, pad_s8, upsample_nearest_s8.
 */
#include <string.h>

#include "edgec_nn.h"
#include "../support/edgec_support.h"

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
#define EDGEC_MOVEMENT_MVE 1
#endif

/* ---- runs ------------------------------------------------------------------------------------ */

#if !defined(EDGEC_MOVEMENT_MVE)
/* dst[0, n) = src[0, n) for n < 16: the tail of copy_run, out of line so that copying whole
 * 16-byte blocks costs no tests beyond one. */
static EDGEC_NOINLINE void copy_short(int8_t *dst, const int8_t *src, int32_t n)
{
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint32_t w;
        memcpy(&w, src + i, 4);
        memcpy(dst + i, &w, 4);
    }
    for (; i < n; ++i) {
        dst[i] = src[i];
    }
}
#endif

/* dst[0, n) = src[0, n); the two do not overlap. */
static inline void copy_run(int8_t *dst, const int8_t *src, int32_t n)
{
#if defined(EDGEC_MOVEMENT_MVE)
    for (int32_t i = 0; i < n; i += 16) {
        const mve_pred16_t lanes = vctp8q((uint32_t)(n - i));
        vstrbq_p_s8(dst + i, vldrbq_z_s8(src + i, lanes), lanes);
    }
#else
    int32_t i = 0;
#if defined(__GNUC__) && defined(__thumb2__)
    if (edgec_word_aligned(src) && edgec_word_aligned(dst)) {
        /* 16 bytes per LDM/STM pair (both need word-aligned addresses) */
        const int8_t *const end = src + (n & ~15);
        while (src != end) {
            __asm__ volatile("ldmia %0!, {r4, r5, r6, r12}\n\tstmia %1!, {r4, r5, r6, r12}"
                             : "+r"(src), "+r"(dst)
                             :
                             : "r4", "r5", "r6", "r12", "memory");
        }
        n &= 15;
    }
#endif
    for (; i + 16 <= n; i += 16) { /* four words in registers, not one 16-byte object on the stack */
        uint32_t w0, w1, w2, w3;
        memcpy(&w0, src + i, 4);
        memcpy(&w1, src + i + 4, 4);
        memcpy(&w2, src + i + 8, 4);
        memcpy(&w3, src + i + 12, 4);
        memcpy(dst + i, &w0, 4);
        memcpy(dst + i + 4, &w1, 4);
        memcpy(dst + i + 8, &w2, 4);
        memcpy(dst + i + 12, &w3, 4);
    }
    if (i < n) {
        copy_short(dst + i, src + i, n - i);
    }
#endif
}

/* dst[0, n) = value. */
static inline void fill_run(int8_t *dst, int8_t value, int32_t n)
{
    int32_t i = 0;
#if defined(EDGEC_MOVEMENT_MVE)
    const int8x16_t v = vdupq_n_s8(value);
    for (; i < n; i += 16) {
        vstrbq_p_s8(dst + i, v, vctp8q((uint32_t)(n - i)));
    }
#else
    const uint32_t w = (uint32_t)(uint8_t)value * 0x01010101u;
    for (; i + 4 <= n; i += 4) {
        memcpy(dst + i, &w, 4);
    }
    for (; i < n; ++i) {
        dst[i] = value;
    }
#endif
}

/* dst[k * dst_stride] = src[k * src_stride] for k < n (element strides, any sign). */
static void copy_strided(int8_t *dst, int32_t dst_stride, const int8_t *src, int32_t src_stride, int32_t n)
{
    int32_t k = 0;
    int32_t d = 0;
    int32_t s = 0;
    for (; k + 4 <= n; k += 4) {
        dst[d] = src[s];
        d += dst_stride;
        s += src_stride;
        dst[d] = src[s];
        d += dst_stride;
        s += src_stride;
        dst[d] = src[s];
        d += dst_stride;
        s += src_stride;
        dst[d] = src[s];
        d += dst_stride;
        s += src_stride;
    }
    for (; k < n; ++k) {
        dst[d] = src[s];
        d += dst_stride;
        s += src_stride;
    }
}

#if defined(__ARM_FEATURE_DSP) && !defined(EDGEC_MOVEMENT_MVE)
/* Stores the 8 bytes a0 b0 a1 b1 a2 b2 a3 b3 of the words x = (a0 a1 a2 a3), y = (b0 b1 b2 b3):
 * SEL picks bytes by the GE flags zip_pairs sets (bytes 1 and 3 from its first operand), PKHBT
 * and PKHTB join halfwords. */
static inline void zip_word_dsp(int8_t *dst, uint32_t x, uint32_t y)
{
    const uint32_t even = __sel(y << 8, x); /* a0 b0 a2 b2 */
    const uint32_t odd = __sel(y, x >> 8);  /* a1 b1 a3 b3 */
    uint32_t lo, hi;
    __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(lo) : "r"(even), "r"(odd));
    __asm__("pkhtb %0, %1, %2, asr #16" : "=r"(hi) : "r"(odd), "r"(even));
    memcpy(dst, &lo, 4);
    memcpy(dst + 4, &hi, 4);
}
#endif

/* dst[2k] = a[k], dst[2k + 1] = b[k] for k < n: the inner loops of a channel shuffle with 2
 * groups. Four pairs per step through words where the byte order is known to be little-endian. */
static void zip_pairs(int8_t *dst, const int8_t *a, const int8_t *b, int32_t n)
{
    int32_t k = 0;
#if defined(EDGEC_MOVEMENT_MVE)
    for (; k + 16 <= n; k += 16) {
        int8x16x2_t pair;
        pair.val[0] = vld1q_s8(a + k);
        pair.val[1] = vld1q_s8(b + k);
        vst2q_s8(dst + 2 * k, pair);
    }
#elif defined(__ARM_FEATURE_DSP)
    /* 8 pairs per step, two words of each input: 12 instructions besides loads and stores. */
    /* GE = 0b1010: SEL takes bytes 1 and 3 from its first operand. An asm volatile, as the
     * compilers do not see SEL read the flags: GCC dropped an unused __usub8 in a
     * -mno-unaligned-access build. */
    uint32_t ge;
    __asm__ volatile("usub8 %0, %1, %2" : "=r"(ge) : "r"(0xFF00FF00u), "r"(0x01010101u));
    for (; k + 8 <= n; k += 8) {
        uint32_t x0, x1, y0, y1;
        memcpy(&x0, a + k, 4);
        memcpy(&x1, a + k + 4, 4);
        memcpy(&y0, b + k, 4);
        memcpy(&y1, b + k + 4, 4);
        zip_word_dsp(dst + 2 * k, x0, y0);
        zip_word_dsp(dst + 2 * k + 8, x1, y1);
    }
#elif defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; k + 4 <= n; k += 4) {
        uint32_t x, y, lo, hi;
        memcpy(&x, a + k, 4);
        memcpy(&y, b + k, 4);
        {
            /* bytes 0 and 2 of each input, then 1 and 3, interleaved: (a0 b0 a2 b2), (a1 b1 a3 b3) */
            const uint32_t even = (x & 0x00FF00FFu) | ((y & 0x00FF00FFu) << 8);
            const uint32_t odd = ((x >> 8) & 0x00FF00FFu) | (y & 0xFF00FF00u);
            lo = (even & 0xFFFFu) | (odd << 16);
            hi = (even >> 16) | (odd & 0xFFFF0000u);
        }
        memcpy(dst + 2 * k, &lo, 4);
        memcpy(dst + 2 * k + 4, &hi, 4);
    }
#endif
    for (; k < n; ++k) {
        dst[2 * k] = a[k];
        dst[2 * k + 1] = b[k];
    }
}

/* ---- strided copy ---------------------------------------------------------------------------- */

/* Every offset start + sum_k i_k * strides[k] (i < dims) lies in [0, elements), and each
 * dims[k] * strides[k] fits int32 (so the loops' offsets, one step past a loop included, do). */
static int span_valid(const int32_t *dims, const int32_t *strides, int32_t rank, int32_t start, int32_t elements)
{
    int64_t low = start;
    int64_t high = start;
    for (int32_t k = 0; k < rank; ++k) {
        const int64_t extent = (int64_t)dims[k] * strides[k];
        const int64_t reach = extent - strides[k];
        if (extent < -INT32_MAX || extent > INT32_MAX) {
            return 0;
        }
        if (reach < 0) {
            low += reach;
        } else {
            high += reach;
        }
    }
    return low >= 0 && high < elements;
}

typedef enum {
    ROW_COPY,
    ROW_FILL,
    ROW_ZIP,
    ROW_STRIDED
} row_kind;

/* How one row (the innermost loop, or the last two for ROW_ZIP) is moved. */
typedef struct {
    row_kind kind;
    int32_t n;         /* elements of the innermost loop */
    int32_t in_stride; /* ROW_ZIP: the distance between the two input runs */
    int32_t out_stride;
} row_plan;

/* `rows` rows, the r-th from src + r*src_step to dst + r*dst_step: the hot loop of every copy. */
static void copy_rows(const row_plan *plan, int8_t *dst, int32_t dst_step, const int8_t *src, int32_t src_step,
                      int32_t rows)
{
    const int32_t n = plan->n;
    int32_t d = 0;
    int32_t s = 0;
    switch (plan->kind) {
        case ROW_COPY:
            for (int32_t r = 0; r < rows; ++r, d += dst_step, s += src_step) {
                copy_run(dst + d, src + s, n);
            }
            break;
        case ROW_FILL:
            for (int32_t r = 0; r < rows; ++r, d += dst_step, s += src_step) {
                fill_run(dst + d, src[s], n);
            }
            break;
        case ROW_ZIP:
            for (int32_t r = 0; r < rows; ++r, d += dst_step, s += src_step) {
                zip_pairs(dst + d, src + s, src + s + plan->in_stride, n);
            }
            break;
        default:
            for (int32_t r = 0; r < rows; ++r, d += dst_step, s += src_step) {
                copy_strided(dst + d, plan->out_stride, src + s, plan->in_stride, n);
            }
            break;
    }
}

edgec_status edgec_copy_s8(const edgec_copy_desc *desc, const int8_t *input, int8_t *output)
{
    int32_t index[EDGEC_MAX_DIMS] = { 0 };
    int32_t rank, inner, in_off, out_off, row_loop;
    const int32_t *dims, *in_s, *out_s;
    row_plan plan;

    if (desc == NULL || input == NULL || output == NULL || desc->rank < 1 || desc->rank > EDGEC_MAX_DIMS) {
        return EDGEC_ARG_ERROR;
    }
    rank = desc->rank;
    dims = desc->dims;
    in_s = desc->input_strides;
    out_s = desc->output_strides;
    for (int32_t k = 0; k < rank; ++k) {
        if (dims[k] < 1) {
            return EDGEC_ARG_ERROR;
        }
    }
    if (!span_valid(dims, in_s, rank, desc->input_start, desc->input_elements) ||
        !span_valid(dims, out_s, rank, desc->output_start, desc->output_elements)) {
        return EDGEC_ARG_ERROR;
    }

    inner = rank - 1;
    plan.n = dims[inner];
    plan.in_stride = in_s[inner];
    plan.out_stride = out_s[inner];
    if (in_s[inner] == 1 && out_s[inner] == 1) {
        plan.kind = ROW_COPY;
    } else if (in_s[inner] == 0 && out_s[inner] == 1) {
        plan.kind = ROW_FILL;
    } else if (rank >= 2 && dims[inner - 1] == 2 && out_s[inner - 1] == 1 && out_s[inner] == 2 && in_s[inner] == 1) {
        plan.kind = ROW_ZIP; /* the last two loops are one row: two input runs zipped together */
        inner -= 1;
        plan.in_stride = in_s[inner];
    } else {
        plan.kind = ROW_STRIDED;
    }

    /* Loop inner-1 runs inside copy_rows; an odometer walks the loops outside it. */
    row_loop = inner - 1;
    in_off = desc->input_start;
    out_off = desc->output_start;
    for (;;) {
        int32_t k;
        if (row_loop < 0) {
            copy_rows(&plan, output + out_off, 0, input + in_off, 0, 1);
            return EDGEC_OK;
        }
        copy_rows(&plan, output + out_off, out_s[row_loop], input + in_off, in_s[row_loop], dims[row_loop]);
        for (k = row_loop - 1; k >= 0; --k) {
            if (++index[k] < dims[k]) {
                in_off += in_s[k];
                out_off += out_s[k];
                break;
            }
            index[k] = 0;
            in_off -= (dims[k] - 1) * in_s[k];
            out_off -= (dims[k] - 1) * out_s[k];
        }
        if (k < 0) {
            return EDGEC_OK;
        }
    }
}

/* ---- constant padding ------------------------------------------------------------------------ */

edgec_status edgec_pad_s8(const edgec_pad_desc *desc, const int8_t *input, int8_t *output)
{
    int32_t index[EDGEC_MAX_DIMS] = { 0 };
    int32_t block[EDGEC_MAX_DIMS]; /* output elements per index of dim k: the product of the later output dims */
    int32_t rank, last, pending, row;
    int64_t total = 1;
    int8_t value;

    if (desc == NULL || input == NULL || output == NULL || desc->rank < 1 || desc->rank > EDGEC_MAX_DIMS ||
        desc->fill < INT8_MIN || desc->fill > INT8_MAX) {
        return EDGEC_ARG_ERROR;
    }
    rank = desc->rank;
    for (int32_t k = rank - 1; k >= 0; --k) {
        if (desc->input_dims[k] < 1 || desc->pad_before[k] < 0 || desc->pad_after[k] < 0) {
            return EDGEC_ARG_ERROR;
        }
        block[k] = (int32_t)total;
        total *= (int64_t)desc->input_dims[k] + desc->pad_before[k] + desc->pad_after[k];
        if (total > INT32_MAX) {
            return EDGEC_ARG_ERROR;
        }
    }

    /* The output in memory order: runs of fill (adjacent ones merged into `pending`) between the
     * input's rows, which are contiguous and read in order. */
    value = (int8_t)desc->fill;
    last = rank - 1;
    row = desc->input_dims[last];
    pending = 0;
    for (int32_t k = 0; k < last; ++k) {
        pending += desc->pad_before[k] * block[k];
    }
    for (;;) {
        int32_t k;
        pending += desc->pad_before[last];
        fill_run(output, value, pending);
        output += pending;
        copy_run(output, input, row);
        output += row;
        input += row;
        pending = desc->pad_after[last];
        for (k = last - 1; k >= 0; --k) {
            if (++index[k] < desc->input_dims[k]) {
                break;
            }
            index[k] = 0;
            pending += desc->pad_after[k] * block[k];
        }
        if (k < 0) {
            break;
        }
        for (int32_t j = k + 1; j < last; ++j) {
            pending += desc->pad_before[j] * block[j];
        }
    }
    fill_run(output, value, pending);
    return EDGEC_OK;
}

/* ---- nearest upsampling ---------------------------------------------------------------------- */

edgec_status edgec_upsample_nearest_s8(const edgec_upsample_nearest_desc *desc, const int8_t *input, int8_t *output)
{
    int32_t channels, scale_w, row_bytes;

    if (desc == NULL || input == NULL || output == NULL || desc->batches < 1 || desc->input_h < 1 ||
        desc->input_w < 1 || desc->channels < 1 || desc->scale_h < 1 || desc->scale_w < 1 ||
        (int64_t)desc->batches * desc->input_h * desc->scale_h * desc->input_w * desc->scale_w * desc->channels >
            INT32_MAX) {
        return EDGEC_ARG_ERROR;
    }
    channels = desc->channels;
    scale_w = desc->scale_w;
    row_bytes = desc->input_w * scale_w * channels;
    for (int32_t rows = desc->batches * desc->input_h; rows > 0; --rows) {
        const int8_t *const first = output;
        /* the first output row of this input row, pixel by pixel ... */
        for (int32_t x = 0; x < desc->input_w; ++x) {
            if (channels == 1) {
                fill_run(output, *input, scale_w);
                output += scale_w;
            } else {
                for (int32_t r = 0; r < scale_w; ++r) {
                    copy_run(output, input, channels);
                    output += channels;
                }
            }
            input += channels;
        }
        /* ... then its copies */
        for (int32_t r = 1; r < desc->scale_h; ++r) {
            copy_run(output, first, row_bytes);
            output += row_bytes;
        }
    }
    return EDGEC_OK;
}
