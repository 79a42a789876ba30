/*
 * Runs the int4-weight kernels' DSP and Helium paths (edgec_fully_connected_s4_dsp/_mve,
 * edgec_conv_s4_dsp/_mve, _unpacked and _dsp_unpacked_narrow, edgec_depthwise_conv_s4_packed) and
 * their portable forms on cases written by tests/test_kernels_s4_arm.py.
 *
 * cases.bin holds records, each a header of HEADER_WORDS little-endian int32 (kind, path, payload
 * bytes, output bytes, scratch bytes, bias entries (0: none), filter bytes, channels, then the descriptor's
 * integer fields in order) and a payload: the packed filter, the bias (if any), the multipliers,
 * the shifts, then the input, each padded to 4 bytes. For every record the program writes to
 * results.bin: int32 status, int32 guards_intact (after the output and after the scratch), then the
 * output bytes. Exit status 0 after all records, 2 on an I/O or size error.
 */
#include <stdint.h>
#include <string.h>

#include "edgec_nn.h"
#include "semihost.h"

enum {
    H_KIND,
    H_PATH,
    H_PAYLOAD,
    H_OUTPUT,
    H_SCRATCH,
    H_BIAS_WORDS,
    H_FILTER,
    H_CHANNELS,
    H_DESC,
    H_BLOCKS = 38, /* edgec_conv_s4_mve_unpacked's routines: indices into `routines`, -1 for NULL */
    H_DIRECT = 39,
    HEADER_WORDS = 40
};
enum {
    KIND_FC = 1,
    KIND_CONV = 2
};
enum {
    PATH_PORTABLE = 0,
    PATH_DSP = 1,
    PATH_MVE = 2,
    PATH_DSP_UNPACKED = 3,
    PATH_MVE_UNPACKED = 4,
    PATH_DSP_NARROW_UNPACKED = 5
};

#define ARENA_BYTES (160 * 1024)

#include "kernel_records.h"

/* The descriptor's pointers, from the payload at `at`. */
static const int8_t *arrays(const int32_t *h, const int8_t *at, const int8_t **filter, const int32_t **bias,
                            const int32_t **multiplier, const int32_t **shift)
{
    *filter = at;
    at += align4(h[H_FILTER]);
    *bias = NULL;
    if (h[H_BIAS_WORDS] > 0) {
        *bias = (const int32_t *)(const void *)at;
        at += 4 * h[H_BIAS_WORDS];
    }
    *multiplier = (const int32_t *)(const void *)at;
    at += 4 * h[H_CHANNELS];
    *shift = (const int32_t *)(const void *)at;
    return at + 4 * h[H_CHANNELS];
}

static edgec_status run_fc(const int32_t *h, const int8_t *payload, int8_t *output, void *scratch)
{
    edgec_fully_connected_s4_desc d;
    memcpy(&d, &h[H_DESC], 7 * sizeof(int32_t));
    const int8_t *input = arrays(h, payload, &d.filter, &d.bias, &d.multiplier, &d.shift);
    switch (h[H_PATH]) {
        case PATH_DSP: return edgec_fully_connected_s4_dsp(&d, input, output, (int16_t *)scratch);
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
        case PATH_MVE: return edgec_fully_connected_s4_mve(&d, input, output, (int8_t *)scratch);
#endif
        default: return edgec_fully_connected_s4(&d, input, output);
    }
}

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
/* edgec_conv_s8_mve_with's routines in the order of tests/test_kernels_s4_arm.py's MVE_ROUTINES. */
static const edgec_conv_mve_routine *const routines[] = {
    &edgec_conv_mve_blocks_odd,
    &edgec_conv_mve_blocks_even,
    &edgec_conv_mve_blocks_odd_right,
    &edgec_conv_mve_blocks_even_right,
    &edgec_conv_mve_blocks_odd_strict,
    &edgec_conv_mve_blocks_even_strict,
    &edgec_conv_mve_blocks_odd_strict_quads,
    &edgec_conv_mve_blocks_even_strict_quads,
    &edgec_conv_mve_direct_odd,
    &edgec_conv_mve_direct_even,
    &edgec_conv_mve_direct_odd_runs3,
    &edgec_conv_mve_direct_even_runs3,
    &edgec_conv_mve_direct_single,
    &edgec_conv_mve_direct_single_runs3,
    &edgec_conv_mve_direct_triple_runs3,
    &edgec_conv_mve_direct_even_quads,
    &edgec_conv_mve_direct_even_runs3_quads,
};

static const edgec_conv_mve_routine *routine(int32_t i)
{
    return i >= 0 && i < (int32_t)(sizeof(routines) / sizeof(routines[0])) ? routines[i] : NULL;
}
#endif

static edgec_status run_conv(const int32_t *h, const int8_t *payload, int8_t *output, void *scratch)
{
    edgec_conv_s4_desc d;
    memcpy(&d, &h[H_DESC], 20 * sizeof(int32_t));
    const int8_t *input = arrays(h, payload, &d.filter, &d.bias, &d.multiplier, &d.shift);
    switch (h[H_PATH]) {
        case PATH_DSP: return edgec_conv_s4_dsp(&d, input, output, (int16_t *)scratch);
        case PATH_DSP_UNPACKED: return edgec_conv_s4_dsp_unpacked(&d, input, output, (int8_t *)scratch);
        case PATH_DSP_NARROW_UNPACKED: return edgec_conv_s4_dsp_unpacked_narrow(&d, input, output, (int8_t *)scratch);
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
        case PATH_MVE: return edgec_conv_s4_mve(&d, input, output, (int8_t *)scratch);
        case PATH_MVE_UNPACKED:
            return edgec_conv_s4_mve_unpacked(&d, routine(h[H_BLOCKS]), routine(h[H_DIRECT]), input, output,
                                              (int8_t *)scratch);
#endif
        default: return edgec_conv_s4(&d, input, output);
    }
}

static edgec_status run_depthwise(const int32_t *h, const int8_t *payload, int8_t *output, void *scratch)
{
    edgec_depthwise_conv_s4_desc d;
    memcpy(&d, &h[H_DESC], 19 * sizeof(int32_t));
    const int8_t *input = arrays(h, payload, &d.filter, &d.bias, &d.multiplier, &d.shift);
    return h[H_PATH] == PATH_PORTABLE ? edgec_depthwise_conv_s4(&d, input, output)
                                      : edgec_depthwise_conv_s4_packed(&d, input, output, (int8_t *)scratch);
}

/* One record: 1 done, 0 end of file, -1 error. */
static int run_record(int in, int out)
{
    int32_t h[HEADER_WORDS];
    const int got = read_bytes(in, h, (int)sizeof(h));
    if (got == 0) {
        return 0;
    }
    if (got != (int)sizeof(h) || h[H_PAYLOAD] < 0 || h[H_OUTPUT] < 1 || h[H_SCRATCH] < 0 ||
        align4(h[H_PAYLOAD]) + align4(h[H_OUTPUT] + GUARD_BYTES) + h[H_SCRATCH] + GUARD_BYTES > ARENA_BYTES ||
        read_bytes(in, arena, h[H_PAYLOAD]) != h[H_PAYLOAD]) {
        return -1;
    }
    int8_t *output = arena + align4(h[H_PAYLOAD]);
    int8_t *scratch = output + align4(h[H_OUTPUT] + GUARD_BYTES);
    memset(output, GUARD_VALUE, (size_t)(h[H_OUTPUT] + GUARD_BYTES));
    memset(scratch, GUARD_VALUE, (size_t)(h[H_SCRATCH] + GUARD_BYTES));
    int32_t result[2];
    result[0] = h[H_KIND] == KIND_FC     ? run_fc(h, arena, output, scratch)
                : h[H_KIND] == KIND_CONV ? run_conv(h, arena, output, scratch)
                                         : run_depthwise(h, arena, output, scratch);
    result[1] = guards_intact(output + h[H_OUTPUT]) && guards_intact(scratch + h[H_SCRATCH]);
    if (semihost_write(out, result, (int)sizeof(result)) != (int)sizeof(result) ||
        semihost_write(out, output, h[H_OUTPUT]) != h[H_OUTPUT]) {
        return -1;
    }
    return 1;
}

int main(void)
{
    return run_records(run_record);
}
