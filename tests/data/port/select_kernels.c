/*
 * Runs edgec_select_s8 on cases written by tests/test_select_arm.py.
 *
 * cases.bin holds records, each a header of HEADER_WORDS little-endian int32 then `payload` bytes:
 * the operands x1, x2, a, b and the table, each starting on a 4-byte boundary, their sizes in the
 * header (x2 of 0 bytes: NULL; a table of 0 bytes: NULL). The descriptor's int32 fields, in
 * declaration order and without its table pointer, are the header's words from H_FIELDS on. For
 * every record the program writes to results.bin: int32 status, int32 guards_intact (the bytes
 * after the output are untouched), then the output bytes. Each call sits between bench_begin(k)
 * and bench_end(k), k the record's index, for instruction counts. Exit status 0 after all records, 2 on an I/O or size
 * error.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "edgec_nn.h"
#include "semihost.h"

enum {
    H_PAYLOAD, /* bytes after the header */
    H_OUTPUT_BYTES,
    H_IN_PLACE, /* 0..3: that operand is copied into the output buffer, which the kernel gets as both; -1 none */
    H_SIZES,    /* 5 words: bytes of x1, x2, a, b, table */
    H_FIELDS = H_SIZES + 5,
    HEADER_WORDS = 48
};

#define ARENA_BYTES (96 * 1024)

#include "kernel_records.h"

static int run_record(int in, int out)
{
    static unsigned index = 0;
    int32_t h[HEADER_WORDS];
    const int got = read_bytes(in, h, (int)sizeof(h));
    if (got == 0) {
        return 0;
    }
    if (got != (int)sizeof(h)) {
        return -1;
    }
    const int32_t output_at = align4(h[H_PAYLOAD]);
    if (h[H_PAYLOAD] < 0 || h[H_OUTPUT_BYTES] < 0 || output_at + h[H_OUTPUT_BYTES] + GUARD_BYTES > ARENA_BYTES ||
        read_bytes(in, arena, h[H_PAYLOAD]) != h[H_PAYLOAD]) {
        return -1;
    }
    const int8_t *operand[5];
    int32_t at = 0;
    for (int32_t k = 0; k < 5; k++) {
        operand[k] = h[H_SIZES + k] > 0 ? arena + at : NULL;
        at += align4(h[H_SIZES + k]);
    }
    int8_t *output = arena + output_at;
    memset(output, GUARD_VALUE, (size_t)(h[H_OUTPUT_BYTES] + GUARD_BYTES));
    if (h[H_IN_PLACE] >= 0 && h[H_IN_PLACE] < 4) {
        memcpy(output, operand[h[H_IN_PLACE]], (size_t)h[H_OUTPUT_BYTES]);
        operand[h[H_IN_PLACE]] = output;
    }
    edgec_select_desc desc;
    memset(&desc, 0, sizeof(desc));
    memcpy(&desc, h + H_FIELDS, offsetof(edgec_select_desc, table));
    desc.table = operand[4];
    int32_t result[2];
    bench_begin(index);
    result[0] = edgec_select_s8(&desc, operand[0], operand[1], operand[2], operand[3], output);
    bench_end(index);
    index++;
    result[1] = guards_intact(output + h[H_OUTPUT_BYTES]);
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
