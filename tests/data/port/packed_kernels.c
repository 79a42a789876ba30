/*
 * Runs edgec's DSP (SMLAD) and Helium (MVE) kernels on cases written by tests/test_kernels_arm.py.
 *
 * cases.bin holds records, each a header of HEADER_WORDS little-endian int32 then `payload` bytes
 * of arrays, each starting on a 4-byte boundary in the order the header's kind lists below. For
 * every record the program writes to results.bin: int32 status, int32 guards_intact (the bytes
 * after the output and after the scratch are untouched), then `output_bytes` output bytes.
 * Exit status 0 after all records, 2 on an I/O or size error.
 */
#include <stdint.h>
#include <string.h>

#include "edgec_nn.h"
#include "semihost.h"

enum { KIND_CONV = 1, KIND_FC = 2, KIND_ADD = 3, KIND_DEPTHWISE = 5, KIND_AVGPOOL = 6, KIND_MAXPOOL = 7 };
enum { ISA_DSP = 1, ISA_MVE = 2, ISA_DSP_WIDE = 3 }; /* DSP_WIDE: conv and fc, the int16 filter */
enum { UNSUPPORTED = -100 }; /* the status of a kernel this build does not have */

/* Header words. conv: params (12), input, filter, output dims (4 each). fc: the 8 int fields of
 * edgec_fully_connected_s8_desc. add: edgec_add_s8_desc (13 words). conv also in_place, input_at,
 * output_at: in place, the output buffer is one block holding both tensors, the input (copied
 * there from the payload) at byte input_at and the output at byte output_at. depthwise: conv's fields, then
 * plain: edgec_depthwise_conv_s8_packed_in_place (always given one block), or with plain
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

static edgec_dims dims_at(const int32_t *words)
{
    edgec_dims d;
    d.n = words[0];
    d.h = words[1];
    d.w = words[2];
    d.c = words[3];
    return d;
}

static int32_t run_conv(const int32_t *h, payload_cursor *cursor, int8_t *block, int8_t *scratch)
{
    const int32_t *f = h + H_FIELDS;
    edgec_conv_params params;
    memcpy(&params, f, sizeof(params));
    const edgec_dims input_dims = dims_at(f + 12);
    const edgec_dims filter_dims = dims_at(f + 16);
    const edgec_dims output_dims = dims_at(f + 20);
    const int32_t isa = h[H_ISA];
    const int32_t c_out = output_dims.c;
    const int32_t blocking = isa == ISA_MVE ? 4 : 2; /* channels per micro-kernel block */
    const int32_t rows = (c_out + blocking - 1) / blocking * blocking;
    const int32_t group = isa == ISA_MVE ? 16 : 4;
    const int32_t k = filter_dims.h * filter_dims.w * filter_dims.c;
    const int32_t input_bytes = input_dims.n * input_dims.h * input_dims.w * input_dims.c;
    const int8_t *input = take(cursor, input_bytes);
    const int32_t tap_bytes = isa == ISA_DSP_WIDE ? 2 : 1;
    const int8_t *filter = take(cursor, tap_bytes * rows * ((k + group - 1) / group * group));
    /* the folded bias, or (DSP_WIDE) the channel table: 8 words per channel pair */
    const int32_t *bias = (const int32_t *)(void *)take(cursor, (isa == ISA_DSP_WIDE ? 16 : 4) * rows);
    edgec_per_channel_quant quant;
    quant.multiplier = (const int32_t *)(void *)take(cursor, 4 * c_out);
    quant.shift = (const int32_t *)(void *)take(cursor, 4 * c_out);
    int8_t *output = block;
    if (f[24]) { /* in place: the generic kernels need no variant, only a safe offset */
        memcpy(block + f[25], input, (size_t)input_bytes);
        input = block + f[25];
        output = block + f[26];
    }
#if defined(__ARM_FEATURE_DSP)
    if (isa == ISA_DSP) {
        return edgec_conv_s8_dsp(&params, &quant, &input_dims, input, &filter_dims, filter, bias,
                                 &output_dims, output, scratch);
    }
    if (isa == ISA_DSP_WIDE) {
        return edgec_conv_s8_dsp_wide(&params, &quant, &input_dims, input, &filter_dims,
                                      (const int16_t *)(const void *)filter, bias, &output_dims,
                                      output, scratch);
    }
#endif
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
    if (isa == ISA_MVE) {
        return edgec_conv_s8_mve(&params, &quant, &input_dims, input, &filter_dims, filter, bias,
                                 &output_dims, output, scratch);
    }
#endif
    (void)input;
    (void)filter;
    (void)bias;
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
    desc.filter = take(cursor, tap_bytes * ((desc.output_size + 3) / 4 * 4) *
                                   ((desc.input_size + group - 1) / group * group));
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

static int32_t run_depthwise(const int32_t *h, payload_cursor *cursor, int8_t *block,
                             int8_t *scratch)
{
    const int32_t *f = h + H_FIELDS;
    edgec_conv_params params;
    memcpy(&params, f, sizeof(params));
    const edgec_dims input_dims = dims_at(f + 12);
    const edgec_dims filter_dims = dims_at(f + 16);
    const edgec_dims output_dims = dims_at(f + 20);
    const int32_t c = output_dims.c;
    const int32_t padded_c = (c + 3) / 4 * 4;
    const int32_t input_bytes = input_dims.n * input_dims.h * input_dims.w * input_dims.c;
    const int8_t *payload_input = take(cursor, input_bytes);
    const int8_t *filter = take(cursor, filter_dims.h * filter_dims.w * padded_c);
    const int32_t *bias = (const int32_t *)(void *)take(cursor, 4 * padded_c);
    edgec_per_channel_quant quant;
    quant.multiplier = (const int32_t *)(void *)take(cursor, 4 * c);
    quant.shift = (const int32_t *)(void *)take(cursor, 4 * c);
    memcpy(block + f[25], payload_input, (size_t)input_bytes);
    return (f[27] ? edgec_depthwise_conv_s8_packed : edgec_depthwise_conv_s8_packed_in_place)(
        &params, &quant, &input_dims, block + f[25], &filter_dims, filter, bias, &output_dims,
        block + f[26], scratch);
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
