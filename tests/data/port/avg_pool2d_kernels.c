/*
 * Runs edgec_avg_pool2d_s8 (Helium, DSP or portable C by the build's -mcpu) on cases written by
 * tests/test_kernels_avg_pool2d.py. cases.bin holds records: HEADER_WORDS little-endian int32
 * (payload bytes, output bytes, then edgec_pool2d_desc's fields in order), then the int8
 * input. For every record results.bin gets: int32 status, int32 guards_intact (the bytes after
 * the output are untouched), the output bytes. Exit status 0 after all records, 2 on an error.
 */
#include <stdint.h>
#include <string.h>

#include "edgec_nn.h"
#include "semihost.h"

enum { H_PAYLOAD, H_OUTPUT_BYTES, H_FIELDS, FIELDS = 17, HEADER_WORDS = 20 };

#define ARENA_BYTES (64 * 1024)

#include "kernel_records.h"


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
    const int32_t output_at = (h[H_PAYLOAD] + 3) & ~3;
    if (h[H_PAYLOAD] < 0 || h[H_OUTPUT_BYTES] < 0 ||
        output_at + h[H_OUTPUT_BYTES] + GUARD_BYTES > ARENA_BYTES ||
        read_bytes(in, arena, h[H_PAYLOAD]) != h[H_PAYLOAD]) {
        return -1;
    }
    edgec_pool2d_desc desc;
    memcpy(&desc, h + H_FIELDS, sizeof(desc));
    int8_t *output = arena + output_at;
    memset(output, GUARD_VALUE, (size_t)(h[H_OUTPUT_BYTES] + GUARD_BYTES));
    int32_t result[2];
    bench_begin(0);
    result[0] = edgec_avg_pool2d_s8(&desc, arena, output);
    bench_end(0);
    result[1] = 1;
    for (int32_t i = 0; i < GUARD_BYTES; i++) {
        result[1] &= output[h[H_OUTPUT_BYTES] + i] == GUARD_VALUE;
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
