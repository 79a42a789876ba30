/*
 * Runs edgec's lut-family kernels (edgec_lut_s8, edgec_lut_channels_s8, edgec_softmax_axis_s8,
 * edgec_softmax_s8, edgec_log_softmax_s8) on cases written by tests/test_kernels_lut.py.
 *
 * cases.bin holds records: HEADER_WORDS little-endian int32, then the payload: for KIND_LUT the
 * 256-byte table, for KIND_LUT_CHANNELS its CHANNELS 256-byte tables, then SIZE input bytes (each array padded to 4 bytes). The input is copied to
 * an input buffer at byte IN_SKEW of a word, the output buffer starts at byte OUT_SKEW and is
 * filled with GUARD_VALUE first; in place (FLAG_IN_PLACE), the input is copied into the output
 * buffer and the kernel reads and writes there. With FLAG_BENCH the call is bracketed by
 * bench_begin/bench_end for the QEMU instruction-count plugin. For every record results.bin gets
 * int32 status, int32 guard_intact (the GUARD_BYTES after the output are untouched), then SIZE
 * output bytes. Exit status 0 after all records, 2 on an I/O or size error.
 */
#include <stdint.h>
#include <string.h>

#include "edgec_nn.h"
#include "semihost.h"

enum {
    KIND_LUT = 1,
    KIND_SOFTMAX_AXIS = 2,
    KIND_LOG_SOFTMAX = 3,
    KIND_SOFTMAX_ROWS = 4,
    KIND_LUT_CHANNELS = 5
};
enum {
    FLAG_IN_PLACE = 1,
    FLAG_BENCH = 2
};

/* Header words. Fields: KIND_LUT size (edgec_lut_desc's int field); KIND_LUT_CHANNELS the two
 * edgec_lut_channels_desc fields (pixels, channels; at most MAX_TABLES); KIND_SOFTMAX_AXIS the six
 * edgec_softmax_desc fields; KIND_LOG_SOFTMAX the eight edgec_log_softmax_desc fields;
 * KIND_SOFTMAX_ROWS the softmax desc fields (inner 1), run as edgec_softmax_s8. */
enum {
    H_KIND,
    H_FLAGS,
    H_IN_SKEW,
    H_OUT_SKEW,
    H_SIZE,
    H_FIELDS,
    HEADER_WORDS = 16
};

#define BUFFER_BYTES (64 * 1024)

#include "kernel_records.h"

#define MAX_TABLES 64
static int8_t table[256 * MAX_TABLES];
static int32_t input_words[BUFFER_BYTES / 4];
static int32_t output_words[(BUFFER_BYTES + GUARD_BYTES) / 4 + 1];

/* Reads len bytes (a semihosting read may return fewer): len, fewer at the end of the file, or -1. */
/* Reads an array of len bytes and the padding after it. */
static int read_padded(int fd, void *buffer, int32_t len)
{
    int32_t padding = 0;
    return read_bytes(fd, buffer, (int)len) == (int)len &&
           read_bytes(fd, &padding, (int)(align4(len) - len)) == (int)(align4(len) - len);
}

static int32_t run_kernel(const int32_t *h, const int8_t *input, int8_t *output)
{
    const int32_t *f = h + H_FIELDS;
    switch (h[H_KIND]) {
        case KIND_LUT: {
            edgec_lut_desc desc;
            desc.size = f[0];
            desc.table = table;
            return edgec_lut_s8(&desc, input, output);
        }
        case KIND_LUT_CHANNELS: {
            edgec_lut_channels_desc desc;
            memcpy(&desc, f, sizeof(desc));
            return edgec_lut_channels_s8(&desc, table, input, output);
        }
        case KIND_SOFTMAX_AXIS: {
            edgec_softmax_desc desc;
            memcpy(&desc, f, sizeof(desc));
            return edgec_softmax_axis_s8(&desc, input, output);
        }
        case KIND_SOFTMAX_ROWS: {
            edgec_softmax_desc desc;
            memcpy(&desc, f, sizeof(desc));
            return edgec_softmax_s8(&desc, input, output);
        }
        case KIND_LOG_SOFTMAX: {
            edgec_log_softmax_desc desc;
            memcpy(&desc, f, sizeof(desc));
            return edgec_log_softmax_s8(&desc, input, output);
        }
        default: return -100;
    }
}

/* One record: 1 done, 0 end of file, -1 error. */
static int run_record(int in, int out)
{
    int32_t h[HEADER_WORDS];
    int32_t result[2];
    int8_t *input;
    int8_t *output;
    int32_t size;
    int32_t i;
    const int got = read_bytes(in, h, (int)sizeof(h));

    if (got == 0) {
        return 0;
    }
    size = h[H_SIZE];
    if (got != (int)sizeof(h) || size < 0 || size + 4 > BUFFER_BYTES || h[H_IN_SKEW] < 0 || h[H_IN_SKEW] > 3 ||
        h[H_OUT_SKEW] < 0 || h[H_OUT_SKEW] > 3) {
        return -1;
    }
    if (h[H_KIND] == KIND_LUT && !read_padded(in, table, 256)) {
        return -1;
    }
    if (h[H_KIND] == KIND_LUT_CHANNELS &&
        (h[H_FIELDS + 1] < 1 || h[H_FIELDS + 1] > MAX_TABLES || !read_padded(in, table, 256 * h[H_FIELDS + 1]))) {
        return -1;
    }
    input = (int8_t *)input_words + h[H_IN_SKEW];
    output = (int8_t *)output_words + h[H_OUT_SKEW];
    if (!read_padded(in, input, size)) {
        return -1;
    }
    memset(output, GUARD_VALUE, (size_t)(size + GUARD_BYTES));
    if (h[H_FLAGS] & FLAG_IN_PLACE) {
        memcpy(output, input, (size_t)size);
        input = output;
    }
    if (h[H_FLAGS] & FLAG_BENCH) {
        bench_begin(0);
        result[0] = run_kernel(h, input, output);
        bench_end(0);
    } else {
        result[0] = run_kernel(h, input, output);
    }
    result[1] = 1;
    for (i = 0; i < GUARD_BYTES; ++i) {
        if (output[size + i] != GUARD_VALUE) {
            result[1] = 0;
        }
    }
    if (semihost_write(out, result, (int)sizeof(result)) != (int)sizeof(result) ||
        semihost_write(out, output, (int)size) != (int)size) {
        return -1;
    }
    return 1;
}

int main(void)
{
    return run_records(run_record);
}
