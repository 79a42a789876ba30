/*
 * Runs edgec_lstm_s16 on cases written by tests/test_kernels_lstm_s16.py.
 *
 * cases.bin holds records: HEADER_WORDS little-endian int32 (H_FLAGS, then the descriptor's 30
 * int32 fields in edgec_lstm_s16_desc order, its arrays left out), then the arrays, each padded
 * to 8 bytes: input_weights [4*H*I], hidden_weights [4*H*H], bias [4*H int64], sigmoid_table
 * [256 uint16], input [B*T*I int16], hidden [B*H int16], cell [B*H int16]. For every record
 * results.bin gets int32 status, int32 guard_intact (the bytes after the output and the scratch
 * untouched), then the output [B*T*H, or B*H with last_step_only, int16], hidden and cell, each
 * padded to 4 bytes. With FLAG_BENCH the call is bracketed by bench_begin/bench_end. Exit status
 * 0 after all records, 2 on an I/O or size error.
 */
#include <stdint.h>
#include <string.h>

#include "edgec_nn.h"
#include "semihost.h"

enum { FLAG_BENCH = 1 };
enum { H_FLAGS, H_DESC, HEADER_WORDS = 32 };

#define ARENA_BYTES (160 * 1024)

#include "kernel_records.h"

static int32_t align8(int32_t n)
{
    return (n + 7) & ~7;
}

/* Reads len bytes and the padding after them to 8 bytes. */
static int read_padded(int fd, void *buffer, int32_t len)
{
    int64_t padding = 0;
    const int32_t extra = align8(len) - len;
    return read_bytes(fd, buffer, (int)len) == (int)len && (extra == 0 || read_bytes(fd, &padding, extra) == extra);
}

static int write_padded(int fd, const void *buffer, int32_t len)
{
    const int32_t padding = 0;
    return semihost_write(fd, buffer, (int)len) == (int)len &&
           (align4(len) == len || semihost_write(fd, &padding, (int)(align4(len) - len)) == (int)(align4(len) - len));
}

static void unpack_header(const int32_t *f, edgec_lstm_s16_desc *d)
{
    memset(d, 0, sizeof(*d));
    d->batches = f[0];
    d->time_steps = f[1];
    d->input_size = f[2];
    d->hidden_size = f[3];
    d->time_major = f[4];
    d->reset_state = f[5];
    memcpy(d->input_multiplier, f + 6, sizeof(d->input_multiplier));
    memcpy(d->input_shift, f + 10, sizeof(d->input_shift));
    memcpy(d->hidden_multiplier, f + 14, sizeof(d->hidden_multiplier));
    memcpy(d->hidden_shift, f + 18, sizeof(d->hidden_shift));
    d->forget_cell_multiplier = f[22];
    d->forget_cell_shift = f[23];
    d->input_cell_multiplier = f[24];
    d->input_cell_shift = f[25];
    d->cell_tanh_shift = f[26];
    d->output_multiplier = f[27];
    d->output_shift = f[28];
    d->last_step_only = f[29];
}

/* One record: 1 done, 0 end of file, -1 error. */
static int run_record(int in, int out)
{
    int32_t h[HEADER_WORDS];
    int32_t result[2];
    edgec_lstm_s16_desc d;
    const int got = read_bytes(in, h, (int)sizeof(h));
    int8_t *next = arena;
    if (got == 0) {
        return 0;
    }
    if (got != (int)sizeof(h)) {
        return -1;
    }
    unpack_header(h + H_DESC, &d);
    if (d.batches < 1 || d.time_steps < 1 || d.input_size < 1 || d.hidden_size < 1 || d.hidden_size > 4096 ||
        d.input_size > 4096 || d.batches > 64 || d.time_steps > 4096) {
        return -1;
    }
    const int32_t rows = 4 * d.hidden_size;
    const int32_t state = d.batches * d.hidden_size * 2;
    const int32_t out_bytes = d.batches * (d.last_step_only ? 1 : d.time_steps) * d.hidden_size * 2;
    const int32_t scratch_bytes = EDGEC_LSTM_S16_SCRATCH_BYTES(d.input_size, d.hidden_size);
    const int32_t sizes[7] = {rows * d.input_size, rows * d.hidden_size, rows * 8, 512,
                              d.batches * d.time_steps * d.input_size * 2, state, state};
    int8_t *arrays[7];
    int32_t total = align8(out_bytes) + 2 * GUARD_BYTES + scratch_bytes;
    for (int i = 0; i < 7; ++i) {
        total += align8(sizes[i]);
    }
    if (total > ARENA_BYTES) {
        return -1;
    }
    for (int i = 0; i < 7; ++i) {
        arrays[i] = next;
        if (!read_padded(in, next, sizes[i])) {
            return -1;
        }
        next += align8(sizes[i]);
    }
    int8_t *output = next;
    next += align8(out_bytes + GUARD_BYTES);
    int8_t *scratch = next;
    memset(output, GUARD_VALUE, (size_t)(scratch - output));
    memset(scratch, GUARD_VALUE, (size_t)(scratch_bytes + GUARD_BYTES));
    d.input_weights = arrays[0];
    d.hidden_weights = arrays[1];
    d.bias = (const int64_t *)(void *)arrays[2];
    d.sigmoid_table = (const uint16_t *)(void *)arrays[3];
    if (h[H_FLAGS] & FLAG_BENCH) {
        bench_begin(0);
    }
    result[0] = edgec_lstm_s16(&d, (const int16_t *)(void *)arrays[4], (int16_t *)(void *)output,
                               (int16_t *)(void *)arrays[5], (int16_t *)(void *)arrays[6], scratch);
    if (h[H_FLAGS] & FLAG_BENCH) {
        bench_end(0);
    }
    result[1] = guards_intact(output + out_bytes) && guards_intact(scratch + scratch_bytes);
    if (semihost_write(out, result, (int)sizeof(result)) != (int)sizeof(result) ||
        !write_padded(out, output, out_bytes) || !write_padded(out, arrays[5], state) ||
        !write_padded(out, arrays[6], state)) {
        return -1;
    }
    return 1;
}

int main(void)
{
    return run_records(run_record);
}
