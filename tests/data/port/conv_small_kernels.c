/*
 * Runs edgec_conv_s8_small_<KH>x<KW>x<C_in> on cases written by tests/test_kernels_conv_small.py.
 *
 * cases.bin holds records, each a header of HEADER_WORDS little-endian int32 (payload bytes,
 * output bytes, then the descriptor's 16 integer fields in order) and a payload: the int16 filter
 * and the channel table, then the input, each padded to 4 bytes. For every record the
 * program writes to results.bin: int32 status, int32 guards_intact, then the output bytes. Each
 * call sits between bench_begin(k) and bench_end(k) (k: the record's index). Exit status 0 after
 * all records, 2 on an I/O or size error.
 */
#include <stdint.h>
#include <string.h>

#include "edgec_nn.h"
#include "semihost.h"

enum {
    H_PAYLOAD,
    H_OUTPUT,
    H_DESC,
    DESC_INTS = 16,
    HEADER_WORDS = 24
};

#define ARENA_BYTES (96 * 1024)

#include "kernel_records.h"

typedef edgec_status (*small_kernel)(const edgec_conv_small_desc *, const int8_t *, int8_t *);

/* The variant of the descriptor's window; an unknown one runs 3x3x3, which must refuse it. */
static small_kernel kernel_of(const edgec_conv_small_desc *d)
{
    static const struct {
        int32_t k_h, k_w, c_in;
        small_kernel fn;
    } variants[] = {
        { 3, 3, 1, edgec_conv_s8_small_3x3x1 },   { 3, 3, 2, edgec_conv_s8_small_3x3x2 },
        { 3, 3, 3, edgec_conv_s8_small_3x3x3 },   { 1, 1, 4, edgec_conv_s8_small_1x1x4 },
        { 1, 1, 8, edgec_conv_s8_small_1x1x8 },   { 1, 1, 12, edgec_conv_s8_small_1x1x12 },
        { 1, 1, 16, edgec_conv_s8_small_1x1x16 },
    };
    for (unsigned i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
        if (variants[i].k_h == d->kernel_h && variants[i].k_w == d->kernel_w && variants[i].c_in == d->input_c) {
            return variants[i].fn;
        }
    }
    return edgec_conv_s8_small_3x3x3;
}

/* One record: 1 done, 0 end of file, -1 error. */
static int run_record(int in, int out, unsigned index)
{
    int32_t h[HEADER_WORDS];
    const int got = read_bytes(in, h, (int)sizeof(h));
    if (got == 0) {
        return 0;
    }
    if (got != (int)sizeof(h) || h[H_PAYLOAD] < 0 || h[H_OUTPUT] < 1 ||
        align4(h[H_PAYLOAD]) + h[H_OUTPUT] + GUARD_BYTES > ARENA_BYTES ||
        read_bytes(in, arena, h[H_PAYLOAD]) != h[H_PAYLOAD]) {
        return -1;
    }
    edgec_conv_small_desc d;
    memcpy(&d, &h[H_DESC], DESC_INTS * sizeof(int32_t));
    const int32_t k4 = (d.kernel_h * d.kernel_w * d.input_c + 3) / 4 * 4;
    const int8_t *at = arena;
    const int32_t pairs = (d.output_c + 1) / 2;
    d.filter = (const int16_t *)(const void *)at;
    at += 2 * 2 * pairs * k4;
    d.channel_table = (const int32_t *)(const void *)at;
    const int8_t *input = (const int8_t *)(d.channel_table + 8 * pairs);
    int8_t *output = arena + align4(h[H_PAYLOAD]);
    memset(output, GUARD_VALUE, (size_t)(h[H_OUTPUT] + GUARD_BYTES));
    int32_t result[2];
    bench_begin(index);
    result[0] = kernel_of(&d)(&d, input, output);
    bench_end(index);
    result[1] = guards_intact(output + h[H_OUTPUT]);
    if (semihost_write(out, result, (int)sizeof(result)) != (int)sizeof(result) ||
        semihost_write(out, output, h[H_OUTPUT]) != h[H_OUTPUT]) {
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
