/*
 * Runs edgec's DSP (SMLAD) and Helium (MVE) kernels on cases written by tests/test_kernels_arm.py.
 *
 * cases.bin holds records, each a header of HEADER_WORDS little-endian int32 then `payload` bytes
 * of arrays, each starting on a 4-byte boundary in the order the header's kind lists below. For
 * every record the program writes to results.bin: int32 status, int32 guards_intact (the bytes
 * after the output and after the scratch are untouched), then `output_bytes` output bytes.
 * Exit status 0 after all records, 2 on an I/O or size error.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "edgec_nn.h"
#include "semihost.h"

enum { KIND_CONV = 1, KIND_FC = 2, KIND_ADD = 3, KIND_DEPTHWISE = 5, KIND_AVGPOOL = 6, KIND_MAXPOOL = 7 };
/* DSP_WIDE: conv and fc, the int16 filter; DSP_WIDE_1X1X8: conv, the same layout, run by
 * edgec_conv_s8_dsp_wide_1x1x8 */
enum { ISA_DSP = 1, ISA_MVE = 2, ISA_DSP_WIDE = 3, ISA_DSP_WIDE_1X1X8 = 4 };
enum { UNSUPPORTED = -100 }; /* the status of a kernel this build does not have */

/* Header words. conv: edgec_conv_desc's int32 fields (20), then in_place, input_at, output_at:
 * in place, the output buffer is one block holding both tensors, the input (copied there from the
 * payload) at byte input_at and the output at byte output_at. fc: the 8 int fields of
 * edgec_fully_connected_s8_desc. add: edgec_add_s8_desc (13 words). depthwise:
 * edgec_depthwise_conv_desc's int32 fields (19), then 1, input_at, output_at and plain:
 * edgec_depthwise_conv_s8_packed_in_place (always given one block), or with plain
 * edgec_depthwise_conv_s8_packed (the tensors apart), whose DSP or Helium path the build's -mcpu
 * chooses, not the ISA word; the packed filter and folded bias of edgec_nn.h. avgpool:
 * edgec_pool2d_desc (17 words); edgec_avgpool_s8 (Helium or portable C by the build). maxpool:
 * the same fields; edgec_maxpool_s8 (Helium, DSP or portable C by the build). */
enum {
    H_KIND,
    H_ISA,
    H_PAYLOAD,      /* bytes after the header */
    H_OUTPUT_BYTES,
    H_SCRATCH_BYTES,
    H_SCRATCH_SKEW, /* bytes added to the scratch address (1: misaligned, for the checks) */
    H_FIELDS,       /* the kernel's own fields start here */
    HEADER_WORDS = 48
};

#define ARENA_BYTES (256 * 1024)

#include "kernel_records.h"

/* int32 words, so the kernels' int32 arrays (bias, quant) in it are int32 objects. */

/* Cursor over a record's payload: each array starts on a 4-byte boundary. */
typedef struct {
    int8_t *next;
} payload_cursor;

static int8_t *take(payload_cursor *cursor, int32_t bytes)
{
    int8_t *start = cursor->next;
    cursor->next += align4(bytes);
    return start;
}

/* The header words of a conv record: the descriptor's int32 fields, then in_place, input_at,
 * output_at. */
enum { CONV_INTS = offsetof(edgec_conv_desc, filter) / 4 };

static int32_t run_conv(const int32_t *h, payload_cursor *cursor, int8_t *block, int8_t *scratch)
{
    const int32_t *f = h + H_FIELDS;
    edgec_conv_desc desc;
    memcpy(&desc, f, offsetof(edgec_conv_desc, filter));
    const int32_t isa = h[H_ISA];
    const int wide = isa == ISA_DSP_WIDE || isa == ISA_DSP_WIDE_1X1X8;
    const int32_t c_out = desc.output_c;
    const int32_t blocking = isa == ISA_MVE ? 4 : 2; /* channels per micro-kernel block */
    const int32_t rows = (c_out + blocking - 1) / blocking * blocking;
    const int32_t group = isa == ISA_MVE ? 16 : 4;
    const int32_t run_len = desc.kernel_w * desc.input_c;
    /* Helium: a 3x3 window's rows of 8 to 15 taps padded to 16 (edgec.ops.conv.mve_packed_taps) */
    const int padded = isa == ISA_MVE && desc.kernel_h == 3 && run_len >= 8 && run_len < 16 && c_out % 4 == 0;
    const int32_t k = padded ? 48 : desc.kernel_h * run_len;
    const int32_t input_bytes = desc.batches * desc.input_h * desc.input_w * desc.input_c;
    const int8_t *input = take(cursor, input_bytes);
    const int32_t tap_bytes = wide ? 2 : 1;
    desc.filter = take(cursor, tap_bytes * rows * ((k + group - 1) / group * group));
    /* the folded bias, or (DSP_WIDE) the channel table: 8 words per channel pair */
    desc.bias = (const int32_t *)(void *)take(cursor, (wide ? 16 : 4) * rows);
    desc.multiplier = (const int32_t *)(void *)take(cursor, 4 * c_out);
    desc.shift = (const int32_t *)(void *)take(cursor, 4 * c_out);
    int8_t *output = block;
    if (f[CONV_INTS]) { /* in place: the generic kernels need no variant, only a safe offset */
        memcpy(block + f[CONV_INTS + 1], input, (size_t)input_bytes);
        input = block + f[CONV_INTS + 1];
        output = block + f[CONV_INTS + 2];
    }
#if defined(__ARM_FEATURE_DSP)
    if (isa == ISA_DSP) {
        return edgec_conv_s8_dsp(&desc, input, output, scratch);
    }
    if (wide) {
        edgec_conv_dsp_wide_desc wide_desc;
        memcpy(&wide_desc, &desc, offsetof(edgec_conv_dsp_wide_desc, wide_filter));
        wide_desc.wide_filter = (const int16_t *)(const void *)desc.filter;
        wide_desc.channel_table = desc.bias;
        wide_desc.multiplier = desc.multiplier;
        wide_desc.shift = desc.shift;
        return isa == ISA_DSP_WIDE ? edgec_conv_s8_dsp_wide(&wide_desc, input, output, scratch)
                                   : edgec_conv_s8_dsp_wide_1x1x8(&wide_desc, input, output, scratch);
    }
#endif
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
    if (isa == ISA_MVE) {
        return edgec_conv_s8_mve(&desc, input, output, scratch);
    }
#endif
    (void)input;
    (void)output;
    (void)scratch;
    return UNSUPPORTED;
}

static int32_t run_fc(const int32_t *h, payload_cursor *cursor, int8_t *output)
{
    const int32_t *f = h + H_FIELDS;
    edgec_fully_connected_s8_desc desc;
    desc.batches = f[0];
    desc.input_size = f[1];
    desc.output_size = f[2];
    desc.input_offset = f[3];
    desc.output_offset = f[4];
    desc.per_channel = f[5];
    desc.act_min = f[6];
    desc.act_max = f[7];
    const int32_t isa = h[H_ISA];
    const int32_t group = isa == ISA_MVE ? 16 : 4;
    const int32_t tap_bytes = isa == ISA_DSP_WIDE ? 2 : 1;
    const int32_t quant_count = desc.per_channel ? desc.output_size : 1;
    const int8_t *input = take(cursor, desc.batches * desc.input_size);
    /* rows zero-padded to whole blocks of 4, or (DSP int8) to an even count (blocks of 6, the last of 2, 4 or 6) */
    const int32_t rows = isa == ISA_DSP ? (desc.output_size + 1) / 2 * 2 : (desc.output_size + 3) / 4 * 4;
    desc.filter = take(cursor, tap_bytes * rows * ((desc.input_size + group - 1) / group * group));
    desc.bias = (const int32_t *)(void *)take(cursor, 4 * desc.output_size);
    desc.multiplier = (const int32_t *)(void *)take(cursor, 4 * quant_count);
    desc.shift = (const int32_t *)(void *)take(cursor, 4 * quant_count);
#if defined(__ARM_FEATURE_DSP)
    if (isa == ISA_DSP) {
        return edgec_fully_connected_s8_dsp(&desc, input, output);
    }
    if (isa == ISA_DSP_WIDE) {
        return edgec_fully_connected_s8_dsp_wide(&desc, input, output);
    }
#endif
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
    if (isa == ISA_MVE) {
        return edgec_fully_connected_s8_mve(&desc, input, output);
    }
#endif
    (void)input;
    (void)output;
    return UNSUPPORTED;
}

/* The header words of a depthwise record: the descriptor's int32 fields, then 1, input_at,
 * output_at, plain. */
enum { DEPTHWISE_INTS = offsetof(edgec_depthwise_conv_desc, filter) / 4 };

static int32_t run_depthwise(const int32_t *h, payload_cursor *cursor, int8_t *block,
                             int8_t *scratch)
{
    const int32_t *f = h + H_FIELDS;
    edgec_depthwise_conv_desc desc;
    memcpy(&desc, f, offsetof(edgec_depthwise_conv_desc, filter));
    const int32_t c = desc.input_c;
    const int32_t padded_c = (c + 3) / 4 * 4;
    const int32_t input_bytes = desc.batches * desc.input_h * desc.input_w * c;
    const int8_t *payload_input = take(cursor, input_bytes);
    desc.filter = take(cursor, desc.kernel_h * desc.kernel_w * padded_c);
    desc.bias = (const int32_t *)(void *)take(cursor, 4 * padded_c);
    desc.multiplier = (const int32_t *)(void *)take(cursor, 4 * c);
    desc.shift = (const int32_t *)(void *)take(cursor, 4 * c);
    memcpy(block + f[DEPTHWISE_INTS + 1], payload_input, (size_t)input_bytes);
    return (f[DEPTHWISE_INTS + 3] ? edgec_depthwise_conv_s8_packed : edgec_depthwise_conv_s8_packed_in_place)(
        &desc, block + f[DEPTHWISE_INTS + 1], block + f[DEPTHWISE_INTS + 2], scratch);
}

static int32_t run_add(const int32_t *h, payload_cursor *cursor, int8_t *output, int8_t *scratch)
{
    const int32_t *f = h + H_FIELDS;
    edgec_add_s8_desc desc;
    memcpy(&desc, f, sizeof(desc));
    const int8_t *input1 = take(cursor, desc.size);
    const int8_t *input2 = take(cursor, desc.size);
#if defined(__ARM_FEATURE_DSP)
    if (h[H_ISA] == ISA_DSP) {
        return edgec_add_s8_dsp(&desc, input1, input2, output, scratch);
    }
#endif
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
    if (h[H_ISA] == ISA_MVE) {
        return edgec_add_s8_mve(&desc, input1, input2, output, scratch);
    }
#endif
    (void)input1;
    (void)input2;
    (void)output;
    (void)scratch;
    return UNSUPPORTED;
}

/* Reads len bytes (a semihosting read may return fewer before the end of the file): len, or
 * fewer at the end of the file, or -1. */
static int32_t run_avgpool(const int32_t *h, payload_cursor *cursor, int8_t *output)
{
    edgec_pool2d_desc desc;
    memcpy(&desc, h + H_FIELDS, sizeof(desc));
    const int8_t *input = take(cursor, desc.batches * desc.input_h * desc.input_w * desc.channels);
    return edgec_avgpool_s8(&desc, input, output);
}

static int32_t run_maxpool(const int32_t *h, payload_cursor *cursor, int8_t *output)
{
    edgec_pool2d_desc desc;
    memcpy(&desc, h + H_FIELDS, sizeof(desc));
    const int8_t *input = take(cursor, desc.batches * desc.input_h * desc.input_w * desc.channels);
    return edgec_maxpool_s8(&desc, input, output);
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
    const int32_t output_at = align4(h[H_PAYLOAD]);
    const int32_t scratch_at = output_at + align4(h[H_OUTPUT_BYTES] + GUARD_BYTES);
    if (h[H_PAYLOAD] < 0 || h[H_OUTPUT_BYTES] < 0 || h[H_SCRATCH_BYTES] < 0 ||
        scratch_at + h[H_SCRATCH_SKEW] + h[H_SCRATCH_BYTES] + GUARD_BYTES > ARENA_BYTES ||
        read_bytes(in, arena, h[H_PAYLOAD]) != h[H_PAYLOAD]) {
        return -1;
    }
    int8_t *output = arena + output_at;
    int8_t *scratch = arena + scratch_at + h[H_SCRATCH_SKEW];
    memset(output, GUARD_VALUE, (size_t)(h[H_OUTPUT_BYTES] + GUARD_BYTES));
    memset(scratch, GUARD_VALUE, (size_t)(h[H_SCRATCH_BYTES] + GUARD_BYTES));
    payload_cursor cursor = {arena};
    int32_t result[2];
    switch (h[H_KIND]) {
    case KIND_CONV:
        result[0] = run_conv(h, &cursor, output, scratch);
        break;
    case KIND_FC:
        result[0] = run_fc(h, &cursor, output);
        break;
    case KIND_ADD:
        result[0] = run_add(h, &cursor, output, scratch);
        break;
    case KIND_DEPTHWISE:
        result[0] = run_depthwise(h, &cursor, output, scratch);
        break;
    case KIND_AVGPOOL:
        result[0] = run_avgpool(h, &cursor, output);
        break;
    case KIND_MAXPOOL:
        result[0] = run_maxpool(h, &cursor, output);
        break;
    default:
        return -1;
    }
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
