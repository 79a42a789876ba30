/*
 * Runs edgec_lstm_s8 / edgec_gru_s8 on cases written by tests/test_kernels_recurrent.py.
 *
 * cases.bin holds records: HEADER_WORDS little-endian int32 (H_FLAGS, then the descriptor's 37
 * int32 fields in edgec_recurrent_desc order, its arrays left out), then the arrays, each padded
 * to 4 bytes: input_weights [G*H*I], hidden_weights [G*H*H] (weight_bits 4: packed, half that), input_bias, hidden_bias [G*H int32],
 * sigmoid_table [256 uint16], input [B*T*I], hidden [B*H], cell [B*H int16]. For every record
 * results.bin gets int32 status, int32 guard_intact (the bytes after the output and the scratch
 * untouched), then the output [B*T*H, or B*H with last_step_only], hidden and cell, each padded to 4 bytes. With FLAG_BENCH
 * the call is bracketed by bench_begin/bench_end. Exit status 0 after all records, 2 on an I/O
 * or size error.
 */
#include <stdint.h>
#include <string.h>

#include "edgec_nn.h"
#include "semihost.h"

enum { FLAG_BENCH = 1 };
enum { H_FLAGS, H_DESC, HEADER_WORDS = 40 };

#define ARENA_BYTES (160 * 1024)

#include "kernel_records.h"


/* Reads len bytes and the padding after them (a semihosting read may return fewer). */
static int read_padded(int fd, void *buffer, int32_t len)
{
    int32_t total = 0;
    int32_t padding = 0;
    while (total < len) {
        const int n = semihost_read(fd, (int8_t *)buffer + total, (int)(len - total));
        if (n <= 0) {
            return 0;
        }
        total += n;
    }
    return align4(len) == len || semihost_read(fd, &padding, (int)(align4(len) - len)) == (int)(align4(len) - len);
}

static int write_padded(int fd, const void *buffer, int32_t len)
{
    const int32_t padding = 0;
    return semihost_write(fd, buffer, (int)len) == (int)len &&
           (align4(len) == len || semihost_write(fd, &padding, (int)(align4(len) - len)) == (int)(align4(len) - len));
}

/* One record: 1 done, 0 end of file, -1 error. */
static int run_record(int in, int out)
{
    int32_t h[HEADER_WORDS];
    int32_t result[2];
    edgec_recurrent_desc d;
    const int got = semihost_read(in, h, (int)sizeof(h));
    int8_t *next = arena;
    if (got == 0) {
        return 0;
    }
    if (got != (int)sizeof(h)) {
        return -1;
    }
    memset(&d, 0, sizeof(d));
    {
        const int32_t *f = h + H_DESC;
        d.cell = f[0];
        d.batches = f[1];
        d.time_steps = f[2];
        d.input_size = f[3];
        d.hidden_size = f[4];
        d.time_major = f[5];
        d.reset_state = f[6];
        memcpy(d.input_multiplier, f + 7, sizeof(d.input_multiplier));
        memcpy(d.input_shift, f + 11, sizeof(d.input_shift));
        memcpy(d.hidden_multiplier, f + 15, sizeof(d.hidden_multiplier));
        memcpy(d.hidden_shift, f + 19, sizeof(d.hidden_shift));
        d.forget_cell_multiplier = f[23];
        d.forget_cell_shift = f[24];
        d.input_cell_multiplier = f[25];
        d.input_cell_shift = f[26];
        d.cell_tanh_shift = f[27];
        d.output_multiplier = f[28];
        d.output_shift = f[29];
        d.output_offset = f[30];
        d.hidden_q15_multiplier = f[31];
        d.hidden_q15_shift = f[32];
        d.last_step_only = f[33];
        d.tanh_linear = f[34];
        d.weight_bits = f[35];
    }
    {
        const int32_t rows = d.cell * d.hidden_size;
        const int32_t state = d.batches * d.hidden_size;
        const int32_t out_bytes = d.batches * (d.last_step_only ? 1 : d.time_steps) * d.hidden_size;
        const int32_t packed = d.weight_bits == 4; /* int4 weights: two per byte */
        const int32_t sizes[8] = {(rows * d.input_size + packed) >> packed, (rows * d.hidden_size + packed) >> packed,
                                  rows * 4, rows * 4, 512,
                                  d.batches * d.time_steps * d.input_size, state, state * 2};
        int8_t *arrays[8];
        int8_t *output;
        int8_t *scratch;
        int32_t total = 0;
        int32_t i;
        for (i = 0; i < 8; ++i) {
            total += align4(sizes[i]);
        }
        total += align4(out_bytes) + 2 * GUARD_BYTES + EDGEC_RECURRENT_SCRATCH_BYTES(d.hidden_size);
        if (d.batches < 1 || d.time_steps < 1 || d.input_size < 1 || d.hidden_size < 1 || total > ARENA_BYTES) {
            return -1;
        }
        for (i = 0; i < 8; ++i) {
            arrays[i] = next;
            if (!read_padded(in, next, sizes[i])) {
                return -1;
            }
            next += align4(sizes[i]);
        }
        output = next;
        next += align4(out_bytes) + GUARD_BYTES;
        scratch = next;
        memset(output, GUARD_VALUE, (size_t)(scratch - output));
        memset(scratch, GUARD_VALUE, (size_t)(EDGEC_RECURRENT_SCRATCH_BYTES(d.hidden_size) + GUARD_BYTES));
        d.input_weights = arrays[0];
        d.hidden_weights = arrays[1];
        d.input_bias = (const int32_t *)(void *)arrays[2];
        d.hidden_bias = (const int32_t *)(void *)arrays[3];
        d.sigmoid_table = (const uint16_t *)(void *)arrays[4];
        if (h[H_FLAGS] & FLAG_BENCH) {
            bench_begin(0);
        }
        if (d.cell == EDGEC_RECURRENT_LSTM) {
            result[0] = edgec_lstm_s8(&d, arrays[5], output, arrays[6], (int16_t *)(void *)arrays[7], scratch);
        } else {
            result[0] = edgec_gru_s8(&d, arrays[5], output, arrays[6], scratch);
        }
        if (h[H_FLAGS] & FLAG_BENCH) {
            bench_end(0);
        }
        result[1] = guards_intact(output + out_bytes) &&
                    guards_intact(scratch + EDGEC_RECURRENT_SCRATCH_BYTES(d.hidden_size));
        if (semihost_write(out, result, (int)sizeof(result)) != (int)sizeof(result) ||
            !write_padded(out, output, out_bytes) || !write_padded(out, arrays[6], sizes[6]) ||
            !write_padded(out, arrays[7], sizes[7])) {
            return -1;
        }
    }
    return 1;
}

int main(void)
{
    return run_records(run_record);
}
