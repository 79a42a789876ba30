/*
 * Runs edgec's transposed convolution kernels (portable, DSP, Helium, int4 weights) on cases written by
 * tests/test_kernels_conv_transpose.py, each call between bench_begin and bench_end so the QEMU
 * plugin counts its instructions.
 *
 * cases.bin holds records: HEADER_WORDS little-endian int32, then `payload` bytes: the input,
 * the filter, the bias (when bias words > 0), multipliers and shifts, each starting on a 4-byte
 * boundary. For every record the program writes to results.bin: int32 status, int32
 * guards_intact (the bytes after the output and after the scratch are untouched), then the
 * output bytes. Exit status 0 after all records, 2 on an I/O or size error.
 */
#include <stdint.h>
#include <string.h>

#include "edgec_nn.h"
#include "semihost.h"

enum { ISA_PORTABLE = 0, ISA_DSP = 1, ISA_MVE = 2, ISA_S4 = 3, ISA_S4_DSP = 4 }; /* S4: int4 weights */
enum { UNSUPPORTED = -100 }; /* the status of a kernel this build does not have */

enum {
    H_ISA,
    H_PAYLOAD,      /* bytes after the header */
    H_OUTPUT_BYTES,
    H_SCRATCH_BYTES,
    H_SCRATCH_SKEW, /* bytes added to the scratch address (1: misaligned, which must be refused) */
    H_FILTER_BYTES,
    H_BIAS_WORDS,   /* 0: no bias (NULL) */
    H_FIELDS,       /* edgec_conv_transpose_desc's int32 fields, in declaration order */
    INT_FIELDS = 22,
    HEADER_WORDS = 32
};

#define ARENA_BYTES (256 * 1024)

#include "kernel_records.h"


static int32_t run_kernel(int32_t isa, const edgec_conv_transpose_desc *desc, const int8_t *input,
                          int8_t *output, int8_t *scratch)
{
    int32_t status = UNSUPPORTED;
    bench_begin(0);
    if (isa == ISA_PORTABLE) {
        status = edgec_conv_transpose_s8(desc, input, output);
    }
    if (isa == ISA_S4) {
        status = edgec_conv_transpose_s4(desc, input, output);
    }
#if defined(__ARM_FEATURE_DSP)
    if (isa == ISA_DSP) {
        status = edgec_conv_transpose_s8_dsp(desc, input, output, scratch);
    }
    if (isa == ISA_S4_DSP) {
        status = edgec_conv_transpose_s4_dsp(desc, input, output, scratch);
    }
#endif
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
    if (isa == ISA_MVE) {
        status = edgec_conv_transpose_s8_mve(desc, input, output, scratch);
    }
#endif
    bench_end(0);
    (void)scratch;
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
    const int32_t output_at = align4(h[H_PAYLOAD]);
    const int32_t scratch_at = output_at + align4(h[H_OUTPUT_BYTES] + GUARD_BYTES);
    if (h[H_PAYLOAD] < 0 || h[H_OUTPUT_BYTES] < 0 || h[H_SCRATCH_BYTES] < 0 ||
        scratch_at + 4 + h[H_SCRATCH_BYTES] + GUARD_BYTES > ARENA_BYTES ||
        read_bytes(in, arena, h[H_PAYLOAD]) != h[H_PAYLOAD]) {
        return -1;
    }
    edgec_conv_transpose_desc desc;
    int32_t fields[INT_FIELDS];
    memcpy(fields, h + H_FIELDS, sizeof(fields));
    /* The int32 fields lead the struct, in order, without padding. */
    memcpy(&desc, fields, sizeof(fields));
    int8_t *cursor = arena;
    const int8_t *input = cursor;
    cursor += align4(desc.batches * desc.input_h * desc.input_w * desc.input_c);
    desc.filter = cursor;
    cursor += align4(h[H_FILTER_BYTES]);
    desc.bias = NULL;
    if (h[H_BIAS_WORDS] > 0) {
        desc.bias = (const int32_t *)(void *)cursor;
        cursor += 4 * h[H_BIAS_WORDS];
    }
    desc.multiplier = (const int32_t *)(void *)cursor;
    cursor += 4 * desc.output_c;
    desc.shift = (const int32_t *)(void *)cursor;

    int8_t *output = arena + output_at;
    int8_t *scratch = arena + scratch_at + h[H_SCRATCH_SKEW];
    memset(output, GUARD_VALUE, (size_t)(h[H_OUTPUT_BYTES] + GUARD_BYTES));
    memset(scratch, GUARD_VALUE, (size_t)(h[H_SCRATCH_BYTES] + GUARD_BYTES));
    int32_t result[2];
    result[0] = run_kernel(h[H_ISA], &desc, input, output, scratch);
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
