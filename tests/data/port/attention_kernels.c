/*
 * Runs edgec's attention-family kernels (batch matmul, layer norm) on cases written by
 * tests/test_kernels_matmul.py.
 *
 * cases.bin holds records: HEADER_WORDS little-endian int32 (kind, payload bytes, output bytes,
 * then the descriptor's int32 fields in declaration order, pointer fields left out), then the
 * payload, each array starting on a 4-byte boundary: matmul: lhs, rhs; layer norm: the input,
 * then its scale, offset_hi and offset_lo tables (int32 [features] each). For every record the
 * program writes to results.bin: int32 status, int32 guard_intact (the GUARD_BYTES after the
 * output are untouched), then the output bytes. Each kernel call is one bench_begin/bench_end
 * region. Exit status 0 after all records, 2 on an I/O or size error.
 */
#include <stdint.h>
#include <string.h>

#include "edgec_nn.h"
#include "semihost.h"

enum { KIND_MATMUL = 1, KIND_LAYER_NORM = 2 };
enum { H_KIND, H_PAYLOAD, H_OUTPUT_BYTES, H_DESC, HEADER_WORDS = 40 };

#define ARENA_BYTES (192 * 1024)

#include "kernel_records.h"


#define MEASURED(call) (bench_begin(0), measured(call))

static int32_t measured(int32_t status)
{
    bench_end(0);
    return status;
}

static int32_t run_matmul(const int32_t *d, const int8_t *payload, int8_t *output)
{
    edgec_batch_matmul_desc desc;
    int64_t lhs_bytes = 0;
    int32_t i;
    memcpy(&desc, d, sizeof(desc));
    /* lhs spans its batch strides plus one [rows x depth] block */
    lhs_bytes = (int64_t)desc.rows * desc.depth;
    for (i = 0; i < desc.batch_rank; i++) {
        lhs_bytes += (int64_t)(desc.batch_dims[i] - 1) * desc.lhs_batch_strides[i];
    }
    return MEASURED(edgec_batch_matmul_s8(&desc, payload, payload + align4((int32_t)lhs_bytes), output));
}

static int32_t run_layer_norm(const int32_t *d, const int8_t *payload, int8_t *output)
{
    edgec_layer_norm_desc desc;
    const int32_t *tables;
    desc.rows = d[0];
    desc.features = d[1];
    desc.eps_term_hi = d[2];
    desc.eps_term_lo = d[3];
    desc.shift = d[4];
    desc.output_offset = d[5];
    desc.act_min = d[6];
    desc.act_max = d[7];
    tables = (const int32_t *)(const void *)(payload + align4(desc.rows * desc.features));
    desc.scale = tables;
    desc.offset_hi = tables + desc.features;
    desc.offset_lo = tables + 2 * desc.features;
    return MEASURED(edgec_layer_norm_s8(&desc, payload, output));
}

static int run_record(int in, int out)
{
    int32_t h[HEADER_WORDS];
    int32_t result[2];
    int32_t output_at, i;
    int8_t *output;
    const int got = read_bytes(in, h, (int)sizeof(h));
    if (got == 0) {
        return 0;
    }
    if (got != (int)sizeof(h)) {
        return -1;
    }
    output_at = align4(h[H_PAYLOAD]);
    if (h[H_PAYLOAD] < 0 || h[H_OUTPUT_BYTES] < 0 || output_at + h[H_OUTPUT_BYTES] + GUARD_BYTES > ARENA_BYTES ||
        read_bytes(in, arena, h[H_PAYLOAD]) != h[H_PAYLOAD]) {
        return -1;
    }
    output = arena + output_at;
    memset(output, 0, (size_t)h[H_OUTPUT_BYTES]);
    memset(output + h[H_OUTPUT_BYTES], GUARD_VALUE, GUARD_BYTES);
    result[0] = h[H_KIND] == KIND_MATMUL ? run_matmul(h + H_DESC, arena, output)
              : h[H_KIND] == KIND_LAYER_NORM ? run_layer_norm(h + H_DESC, arena, output) : -100;
    result[1] = 1;
    for (i = 0; i < GUARD_BYTES; ++i) {
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
