/*
 * Runs edgec's data movement and reduction kernels on cases written by
 * tests/test_kernels_movement.py.
 *
 * cases.bin holds records: HEADER_WORDS little-endian int32 (kind, payload bytes, input bytes,
 * output bytes, then the descriptor's int32 fields in declaration order), then the payload: the
 * input, the output buffer's bytes before the call (a copy writes only part of it), and for the
 * bilinear resize its y and x tables, each array starting on a 4-byte boundary. For every record
 * the program writes to results.bin: int32 status, int32 guard_intact (the GUARD_BYTES after the
 * output are untouched), then the output bytes. Each kernel call (its descriptor already built)
 * is one bench_begin/bench_end region, so the instruction-count plugin measures every call.
 * Exit status 0 after all records, 2 on an I/O or size error.
 */
#include <stdint.h>
#include <string.h>

#include "edgec_nn.h"
#include "semihost.h"

enum { KIND_COPY = 1, KIND_PAD = 2, KIND_UPSAMPLE_NEAREST = 3, KIND_RESIZE_BILINEAR = 4, KIND_REDUCE = 5 };
enum { H_KIND, H_PAYLOAD, H_INPUT_BYTES, H_OUTPUT_BYTES, H_DESC, HEADER_WORDS = 48 };

#define ARENA_BYTES (192 * 1024)

#include "kernel_records.h"


/* Reads len bytes: len, or fewer at the end of the file, or -1. */
/* The kernel call alone is one bench region (the descriptor is built before it). */
#define MEASURED(call) (bench_begin(0), measured(call))

static int32_t measured(int32_t status)
{
    bench_end(0);
    return status;
}

static int32_t run_kernel(const int32_t *h, const int8_t *input, const int8_t *tables, int8_t *output)
{
    const int32_t *d = h + H_DESC;
    switch (h[H_KIND]) {
    case KIND_COPY: {
        edgec_copy_desc desc;
        memcpy(&desc, d, sizeof(desc));
        return MEASURED(edgec_copy_s8(&desc, input, output));
    }
    case KIND_PAD: {
        edgec_pad_desc desc;
        memcpy(&desc, d, sizeof(desc));
        return MEASURED(edgec_pad_s8(&desc, input, output));
    }
    case KIND_UPSAMPLE_NEAREST: {
        edgec_upsample_nearest_desc desc;
        memcpy(&desc, d, sizeof(desc));
        return MEASURED(edgec_upsample_nearest_s8(&desc, input, output));
    }
    case KIND_RESIZE_BILINEAR: {
        edgec_resize_bilinear_desc desc;
        desc.batches = d[0];
        desc.input_h = d[1];
        desc.input_w = d[2];
        desc.channels = d[3];
        desc.output_h = d[4];
        desc.output_w = d[5];
        desc.y_table = (const int16_t *)(const void *)tables;
        desc.x_table = (const int16_t *)(const void *)(tables + align4(6 * desc.output_h));
        return MEASURED(edgec_resize_bilinear_s8(&desc, input, output));
    }
    case KIND_REDUCE: {
        edgec_reduce_desc desc;
        memcpy(&desc, d, sizeof(desc));
        return MEASURED(edgec_reduce_s8(&desc, input, output));
    }
    default:
        return -100;
    }
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
    const int32_t input_at = 0;
    const int32_t before_at = align4(h[H_INPUT_BYTES]);
    const int32_t tables_at = before_at + align4(h[H_OUTPUT_BYTES]);
    const int32_t output_at = align4(h[H_PAYLOAD]);
    if (h[H_PAYLOAD] < 0 || h[H_INPUT_BYTES] < 0 || h[H_OUTPUT_BYTES] < 0 || tables_at > h[H_PAYLOAD] ||
        output_at + h[H_OUTPUT_BYTES] + GUARD_BYTES > ARENA_BYTES ||
        read_bytes(in, arena, h[H_PAYLOAD]) != h[H_PAYLOAD]) {
        return -1;
    }
    int8_t *output = arena + output_at;
    memcpy(output, arena + before_at, (size_t)h[H_OUTPUT_BYTES]);
    memset(output + h[H_OUTPUT_BYTES], GUARD_VALUE, GUARD_BYTES);

    int32_t result[2];
    result[0] = run_kernel(h, arena + input_at, arena + tables_at, output);
    result[1] = 1;
    for (int32_t i = 0; i < GUARD_BYTES; ++i) {
        if (output[h[H_OUTPUT_BYTES] + i] != GUARD_VALUE) {
            result[1] = 0;
        }
    }
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
