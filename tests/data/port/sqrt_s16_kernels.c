/*
 * Runs edgec_sqrt_s16 on cases written by tests/test_kernels_sqrt_s16.py.
 *
 * cases.bin holds records: 4 little-endian int32 (size, multiplier, half_shift, in_place), then
 * `size` int16 inputs padded to 4 bytes. For every record results.bin gets int32 status, int32
 * guard_intact (the bytes after the output untouched), then the `size` int16 outputs padded to 4
 * bytes. Exit status 0 after all records, 2 on an I/O or size error.
 */
#include <stdint.h>
#include <string.h>

#include "edgec_nn.h"
#include "semihost.h"

#define ARENA_BYTES (160 * 1024)

#include "kernel_records.h"

/* One record: 1 done, 0 end of file, -1 error. */
static int run_record(int in, int out)
{
    int32_t h[4];
    int32_t result[2];
    const int got = read_bytes(in, h, (int)sizeof(h));
    if (got == 0) {
        return 0;
    }
    if (got != (int)sizeof(h) || h[0] < 1 || h[0] > 32768) {
        return -1;
    }
    const edgec_sqrt_s16_desc d = {h[0], h[1], h[2]};
    const int32_t bytes = align4(2 * d.size);
    int8_t *input = arena;
    int8_t *output = h[3] ? input : arena + bytes + GUARD_BYTES;
    if (read_bytes(in, input, bytes) != bytes) {
        return -1;
    }
    memset(input + 2 * d.size, GUARD_VALUE, (size_t)(bytes - 2 * d.size + GUARD_BYTES));
    if (!h[3]) {
        memset(output, GUARD_VALUE, (size_t)(bytes + GUARD_BYTES));
    }
    result[0] = edgec_sqrt_s16(&d, (const int16_t *)(void *)input, (int16_t *)(void *)output);
    result[1] = guards_intact(output + bytes);
    if (semihost_write(out, result, (int)sizeof(result)) != (int)sizeof(result) ||
        semihost_write(out, output, (int)bytes) != (int)bytes) {
        return -1;
    }
    return 1;
}

int main(void)
{
    return run_records(run_record);
}
