/*
 * Runs edgec_softmax_s8 on cases written by tests/test_kernels_softmax_arm.py.
 *
 * cases.bin holds records, each a header of HEADER_WORDS little-endian int32 (input_multiplier,
 * input_left_shift, diff_min, rows, row_size) then rows * row_size input bytes. For every record
 * the program writes to results.bin: int32 status, int32 guards_intact, then the output bytes.
 * Each call sits between bench_begin(k) and bench_end(k) (k: the record's index).
 * Exit status 0 after all records, 2 on an I/O or size error.
 */
#include <stdint.h>
#include <string.h>

#include "edgec_nn.h"
#include "semihost.h"

enum { H_MULTIPLIER, H_LEFT_SHIFT, H_DIFF_MIN, H_ROWS, H_ROW_SIZE, HEADER_WORDS = 8 };

#define ARENA_BYTES (64 * 1024)

#include "kernel_records.h"

/* One record: 1 done, 0 end of file, -1 error. */
static int run_record(int in, int out, unsigned index)
{
    int32_t h[HEADER_WORDS];
    const int got = read_bytes(in, h, (int)sizeof(h));
    if (got == 0) {
        return 0;
    }
    const int32_t size = h[H_ROWS] * h[H_ROW_SIZE];
    if (got != (int)sizeof(h) || h[H_ROWS] < 1 || h[H_ROW_SIZE] < 1 ||
        2 * align4(size) + GUARD_BYTES > ARENA_BYTES || read_bytes(in, arena, size) != size) {
        return -1;
    }
    const edgec_softmax_desc desc = {.outer = h[H_ROWS], .axis_size = h[H_ROW_SIZE], .inner = 1,
                                     .input_multiplier = h[H_MULTIPLIER], .input_left_shift = h[H_LEFT_SHIFT],
                                     .diff_min = h[H_DIFF_MIN]};
    int8_t *output = arena + align4(size);
    memset(output, GUARD_VALUE, (size_t)(size + GUARD_BYTES));
    int32_t result[2];
    bench_begin(index);
    result[0] = edgec_softmax_s8(&desc, arena, output);
    bench_end(index);
    result[1] = guards_intact(output + size);
    if (semihost_write(out, result, (int)sizeof(result)) != (int)sizeof(result) ||
        semihost_write(out, output, size) != size) {
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
