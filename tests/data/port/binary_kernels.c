/*
 * Runs edgec's binary-family kernels (edgec_binary_s8 and its _dsp/_mve paths, edgec_prelu_s8,
 * edgec_prelu_s8_lookup: input 2 its tables)
 * on cases written by tests/test_kernels_binary_arm.py.
 *
 * cases.bin holds records, each a header of HEADER_WORDS little-endian int32 then `payload` bytes:
 * input 1 (or the PReLU input), then input 2 (or alpha) starting on a 4-byte boundary. The
 * descriptor's fields, in declaration order, are the header's words from H_FIELDS on. For every
 * record the program writes to results.bin: int32 status, int32 guards_intact (the bytes after
 * the output are untouched), then `output_bytes` output bytes. Each kernel call sits between
 * bench_begin(k) and bench_end(k) (k: the record's index), for instruction counts.
 * Exit status 0 after all records, 2 on an I/O or size error.
 */
#include <stdint.h>
#include <string.h>

#include "edgec_nn.h"
#include "semihost.h"

enum { KIND_BINARY = 1, KIND_PRELU = 2, KIND_PRELU_LOOKUP = 3 };
enum { ISA_PORTABLE = 0, ISA_DSP = 1, ISA_MVE = 2 };
enum { UNSUPPORTED = -100 }; /* the status of a path this build does not have */

enum {
    H_KIND,
    H_ISA,
    H_PAYLOAD,       /* bytes after the header */
    H_OUTPUT_BYTES,
    H_INPUT1_BYTES,  /* input 2 follows at the next 4-byte boundary */
    H_IN_PLACE,      /* 1: input 1 is copied into the output buffer, which the kernel gets as both */
    H_FIELDS,        /* the descriptor's int32 fields start here */
    HEADER_WORDS = 48
};

#define ARENA_BYTES (160 * 1024)

#include "kernel_records.h"


static int32_t run_binary(const int32_t *h, const int8_t *input1, const int8_t *input2,
                          int8_t *output)
{
    edgec_binary_desc desc;
    memcpy(&desc, h + H_FIELDS, sizeof(desc));
    switch (h[H_ISA]) {
    case ISA_PORTABLE:
        return edgec_binary_s8(&desc, input1, input2, output);
#if defined(__ARM_FEATURE_DSP)
    case ISA_DSP:
        return edgec_binary_s8_dsp(&desc, input1, input2, output);
#endif
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
    case ISA_MVE:
        return edgec_binary_s8_mve(&desc, input1, input2, output);
#endif
    default:
        return UNSUPPORTED;
    }
}

static int32_t run_prelu(const int32_t *h, const int8_t *input, const int8_t *alpha,
                         int8_t *output)
{
    edgec_prelu_desc desc;
    memcpy(&desc, h + H_FIELDS, sizeof(desc));
    return edgec_prelu_s8(&desc, input, alpha, output);
}

static int32_t run_prelu_lookup(const int32_t *h, const int8_t *input, const int8_t *tables,
                                int8_t *output)
{
    edgec_prelu_desc desc;
    memcpy(&desc, h + H_FIELDS, sizeof(desc));
    return edgec_prelu_s8_lookup(&desc, tables, input, output);
}

/* Reads len bytes (a semihosting read may return fewer before the end of the file): len, or
 * fewer at the end of the file, or -1. */
/* One record: 1 done, 0 end of file, -1 error. */
static int run_record(int in, int out, unsigned index)
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
    if (h[H_PAYLOAD] < 0 || h[H_OUTPUT_BYTES] < 0 || h[H_INPUT1_BYTES] < 0 ||
        h[H_INPUT1_BYTES] > h[H_PAYLOAD] ||
        output_at + h[H_OUTPUT_BYTES] + GUARD_BYTES > ARENA_BYTES ||
        read_bytes(in, arena, h[H_PAYLOAD]) != h[H_PAYLOAD]) {
        return -1;
    }
    const int8_t *input1 = arena;
    const int8_t *input2 = arena + align4(h[H_INPUT1_BYTES]);
    int8_t *output = arena + output_at;
    memset(output, GUARD_VALUE, (size_t)(h[H_OUTPUT_BYTES] + GUARD_BYTES));
    if (h[H_IN_PLACE]) {
        memcpy(output, input1, (size_t)h[H_INPUT1_BYTES]);
        input1 = output;
    }
    int32_t result[2];
    bench_begin(index);
    if (h[H_KIND] == KIND_BINARY) {
        result[0] = run_binary(h, input1, input2, output);
    } else if (h[H_KIND] == KIND_PRELU) {
        result[0] = run_prelu(h, input1, input2, output);
    } else if (h[H_KIND] == KIND_PRELU_LOOKUP) {
        result[0] = run_prelu_lookup(h, input1, input2, output);
    } else {
        result[0] = UNSUPPORTED;
    }
    bench_end(index);
    result[1] = guards_intact(output + h[H_OUTPUT_BYTES]);
    if (semihost_write(out, result, (int)sizeof(result)) != (int)sizeof(result) ||
        semihost_write(out, output, h[H_OUTPUT_BYTES]) != h[H_OUTPUT_BYTES]) {
        return -1;
    }
    return 1;
}

int main(void)
{
    const int in = semihost_open("cases.bin", SEMIHOST_MODE_READ_BINARY);
    const int out = semihost_open("results.bin", SEMIHOST_MODE_WRITE_BINARY);
    int status = 2;
    if (in >= 0 && out >= 0) {
        int done;
        unsigned index = 0;
        while ((done = run_record(in, out, index)) == 1) {
            index++;
        }
        status = done == 0 ? 0 : 2;
    }
    if (in >= 0) {
        (void)semihost_close(in);
    }
    if (out >= 0 && semihost_close(out) != 0) {
        status = 2;
    }
    return status;
}
