/*
 * Runs edgec's int16 (16x8) kernels on cases written by tests/test_kernels_s16.py, each call
 * between bench_begin and bench_end so the QEMU plugin counts its instructions.
 *
 * cases.bin holds records: HEADER_WORDS little-endian int32, then `payload` bytes: the input,
 * then for the weighted kernels the filter, the int64 bias (when bias count > 0), multipliers
 * and shifts, for add and mul the second input, for the lookup table its table, for softmax
 * its exp and 1/(1+x) tables (as filter bytes: both, 1026 bytes each), each starting on an
 * 8-byte boundary. For every record the program writes to
 * results.bin: int32 status, int32 guards_intact (the bytes after the output and after the
 * scratch are untouched), then the output bytes. Exit status 0 after all records, 2 on an I/O or
 * size error.
 */
#include <stdint.h>
#include <string.h>

#include "edgec_nn.h"
#include "semihost.h"

enum {
    K_CONV = 0,
    K_CONV_DSP = 1,
    K_DEPTHWISE = 2,
    K_FC = 3,
    K_FC_DSP = 4,
    K_ADD = 5,
    K_MUL = 6,
    K_MAX_POOL = 7,
    K_AVG_POOL = 8,
    K_LUT = 9,
    K_SOFTMAX = 10,
    K_REQUANTIZE_S8_S16 = 11,
    K_REQUANTIZE_S16_S8 = 12,
    K_CONV_MVE = 13,
    K_FC_MVE = 14,
    K_DEPTHWISE_MVE = 15,
    K_DEPTHWISE_DSP = 16
};
enum { UNSUPPORTED = -100 }; /* the status of a kernel this build does not have */

enum {
    H_KERNEL,
    H_PAYLOAD,       /* bytes after the header */
    H_OUTPUT_BYTES,
    H_SCRATCH_BYTES,
    H_INPUT_BYTES,
    H_FILTER_BYTES,  /* add, mul: the second input's bytes */
    H_BIAS_COUNT,    /* 0: no bias (NULL) */
    H_CHANNELS,      /* multipliers and shifts */
    H_SCRATCH_SKEW,  /* bytes added to the scratch address (2: misaligned, which must be refused) */
    H_FIELDS,        /* the descriptor's leading int32 fields, in declaration order */
    MAX_FIELDS = 32,
    HEADER_WORDS = H_FIELDS + MAX_FIELDS
};

#define ARENA_BYTES (256 * 1024)

#include "kernel_records.h"


static int32_t align8(int32_t n)
{
    return (n + 7) & ~7;
}

/* The weight pointers of a record, laid out after its input. */
typedef struct {
    const int8_t *filter;
    const int64_t *bias;
    const int32_t *multiplier;
    const int32_t *shift;
} weights;

static weights weights_at(const int32_t *h, const int8_t *cursor)
{
    weights w;
    cursor += align8(h[H_INPUT_BYTES]);
    w.filter = cursor;
    cursor += align8(h[H_FILTER_BYTES]);
    w.bias = NULL;
    if (h[H_BIAS_COUNT] > 0) {
        w.bias = (const int64_t *)(const void *)cursor;
        cursor += 8 * h[H_BIAS_COUNT];
    }
    w.multiplier = (const int32_t *)(const void *)cursor;
    cursor += align8(4 * h[H_CHANNELS]);
    w.shift = (const int32_t *)(const void *)cursor;
    return w;
}

/* Copies the int32 fields (which lead each descriptor, without padding) and sets its pointers. */
#define FILL_DESC(desc, h, w, count)                                 \
    do {                                                             \
        memcpy(&(desc), (h) + H_FIELDS, (size_t)(count) * 4u);       \
        (desc).filter = (w).filter;                                  \
        (desc).bias = (w).bias;                                      \
        (desc).multiplier = (w).multiplier;                          \
        (desc).shift = (w).shift;                                    \
    } while (0)

static int32_t run_kernel(const int32_t *h, const int8_t *payload, int8_t *output, int8_t *scratch)
{
    const int16_t *input = (const int16_t *)(const void *)payload;
    int16_t *out16 = (int16_t *)(void *)output;
    int16_t *scratch16 = (int16_t *)(void *)scratch;
    const weights w = weights_at(h, payload);
    edgec_conv_s16_desc conv;
    edgec_depthwise_conv_s16_desc depthwise;
    edgec_fully_connected_s16_desc fc;
    edgec_binary_s16_desc binary;
    edgec_pool_s16_desc pool;
    edgec_lut_s16_desc lut;
    edgec_softmax_s16_desc softmax;
    edgec_requantize_s16_desc requantize;
    const int16_t *input2 = (const int16_t *)(const void *)w.filter;
    int32_t status = UNSUPPORTED;
    memcpy(&binary, h + H_FIELDS, sizeof(binary));
    memcpy(&pool, h + H_FIELDS, sizeof(pool));
    memcpy(&requantize, h + H_FIELDS, sizeof(requantize));
    lut.size = h[H_FIELDS];
    lut.table = input2;
    memcpy(&softmax, h + H_FIELDS, 5 * sizeof(int32_t));
    softmax.exp_lut = input2;
    softmax.one_over_one_plus_x_lut = input2 + EDGEC_LUT_S16_SIZE;
    FILL_DESC(conv, h, w, 18);
    FILL_DESC(depthwise, h, w, 17);
    FILL_DESC(fc, h, w, 5);
    bench_begin(0);
    switch (h[H_KERNEL]) {
    case K_CONV:
        status = edgec_conv_s16(&conv, input, out16);
        break;
    case K_DEPTHWISE:
        status = edgec_depthwise_conv_s16(&depthwise, input, out16);
        break;
    case K_FC:
        status = edgec_fully_connected_s16(&fc, input, out16);
        break;
    case K_ADD:
        status = edgec_add_s16(&binary, input, input2, out16);
        break;
    case K_MUL:
        status = edgec_mul_s16(&binary, input, input2, out16);
        break;
    case K_MAX_POOL:
        status = edgec_max_pool_s16(&pool, input, out16);
        break;
    case K_AVG_POOL:
        status = edgec_avg_pool_s16(&pool, input, out16);
        break;
    case K_LUT:
        status = edgec_lut_s16(&lut, input, out16);
        break;
    case K_SOFTMAX:
        status = edgec_softmax_s16(&softmax, input, out16);
        break;
    case K_REQUANTIZE_S8_S16:
        status = edgec_requantize_s8_s16(&requantize, (const int8_t *)payload, out16);
        break;
    case K_REQUANTIZE_S16_S8:
        status = edgec_requantize_s16_s8(&requantize, input, output);
        break;
#if defined(__ARM_FEATURE_DSP)
    case K_CONV_DSP:
        status = edgec_conv_s16_dsp(&conv, input, out16, scratch16);
        break;
    case K_FC_DSP:
        status = edgec_fully_connected_s16_dsp(&fc, input, out16, scratch16);
        break;
    case K_DEPTHWISE_DSP:
        status = edgec_depthwise_conv_s16_dsp(&depthwise, input, out16);
        break;
#endif
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
    case K_CONV_MVE:
        status = edgec_conv_s16_mve(&conv, input, out16, scratch16);
        break;
    case K_FC_MVE:
        status = edgec_fully_connected_s16_mve(&fc, input, out16);
        break;
    case K_DEPTHWISE_MVE:
        status = edgec_depthwise_conv_s16_mve(&depthwise, input, out16);
        break;
#endif
    default:
        break;
    }
    bench_end(0);
    (void)scratch16;
    return status;
}

/* One record: 1 done, 0 end of file, -1 error. */
static int run_record(int in, int out)
{
    int32_t h[HEADER_WORDS];
    const int got = read_bytes(in, h, (int)sizeof(h));
    if (got == 0) {
        return 0;
    }
    if (got != (int)sizeof(h)) {
        return -1;
    }
    const int32_t output_at = align8(h[H_PAYLOAD]);
    const int32_t scratch_at = output_at + align8(h[H_OUTPUT_BYTES] + GUARD_BYTES);
    if (h[H_PAYLOAD] < 0 || h[H_OUTPUT_BYTES] < 0 || h[H_SCRATCH_BYTES] < 0 ||
        h[H_SCRATCH_SKEW] < 0 || h[H_SCRATCH_SKEW] > 7 ||
        scratch_at + h[H_SCRATCH_SKEW] + h[H_SCRATCH_BYTES] + GUARD_BYTES > ARENA_BYTES ||
        read_bytes(in, arena, h[H_PAYLOAD]) != h[H_PAYLOAD]) {
        return -1;
    }
    int8_t *output = arena + output_at;
    int8_t *scratch = arena + scratch_at + h[H_SCRATCH_SKEW];
    memset(output, GUARD_VALUE, (size_t)(h[H_OUTPUT_BYTES] + GUARD_BYTES));
    memset(scratch, GUARD_VALUE, (size_t)(h[H_SCRATCH_BYTES] + GUARD_BYTES));
    int32_t result[2];
    result[0] = run_kernel(h, arena, output, scratch);
    result[1] = guards_intact(output + h[H_OUTPUT_BYTES]) &&
                guards_intact(scratch + h[H_SCRATCH_BYTES]);
    if (semihost_write(out, result, (int)sizeof(result)) != (int)sizeof(result) ||
        semihost_write(out, output, h[H_OUTPUT_BYTES]) != h[H_OUTPUT_BYTES]) {
        return -1;
    }
    return 1;
}

int main(void)
{
    return run_records(run_record);
}
