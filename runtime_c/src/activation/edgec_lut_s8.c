/*
 * edgec_lut_s8.c -- int8 -> int8 elementwise function through a 256-entry table.
 *
 * y[i] = table[x[i] + 128]. The table, built at compile time by edgec.ops.lut.lut_table, is the
 * specification; golden: edgec.ops.lut.lut_s8. Three paths, chosen by the build's -mcpu:
 *  - portable C: one element per iteration, the table pointer moved to entry 128 so the signed
 *    input byte indexes it directly;
 *  - Armv7-M and later without Helium (the DSP-era Cortex-M3/M4/M7/M33; what it needs is unaligned
 *    word access, __ARM_FEATURE_UNALIGNED): four elements per word load and word store, each byte
 *    sign-extended straight into its index;
 *  - Helium (Cortex-M55): sixteen elements per vector, the table read by one byte gather
 *    (VLDRB.U8 with byte offsets), the tail by predication.
 * Each element is read before its output is written, so output == input is allowed.
 */
#include <stddef.h>
#include <string.h>

#include "edgec_nn.h"
#include "../support/edgec_support.h"

#define LUT_CENTRE 128 /* the entry of input value 0 */

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)

/*
 * A tail-predicated low-overhead loop (DLSTP/LETP), 16 lanes per pass: load, flip the top bit
 * (x + 128 as an unsigned byte offset), gather the table bytes, store. 5 instructions per 16
 * elements; GCC 12 does not form this loop from the intrinsics. size >= 1.
 */
static void lut_run(const int8_t *table, const int8_t *input, int8_t *output, int32_t size)
{
    __asm__ volatile("vmov.i8 q1, #0x80\n\t"
                     "dlstp.8 lr, %[size]\n"
                     "1:\n\t"
                     "vldrb.u8 q0, [%[in]], #16\n\t"
                     "veor q0, q0, q1\n\t"
                     "vldrb.u8 q2, [%[table], q0]\n\t"
                     "vstrb.8 q2, [%[out]], #16\n\t"
                     "letp lr, 1b"
                     : [in] "+r"(input), [out] "+r"(output)
                     : [table] "r"(table), [size] "r"(size)
                     : "lr", "q0", "q1", "q2", "memory");
}

#elif defined(__arm__) && defined(__ARM_FEATURE_UNALIGNED)

/*
 * Four entries of a little-endian input word, as an output word: each byte sign-extended straight
 * into an index from the centre (SXTB / SBFX / ASR), its entry loaded, the four entries merged by
 * ORR with shifted operands. (int8_t) of an out-of-range value keeps its low byte on every Arm
 * compiler (implementation-defined in C99, not undefined).
 */
static inline uint32_t lut_word(const int8_t *centre, uint32_t w)
{
    uint32_t y = (uint8_t)centre[(int8_t)(w >> 24)];
    y = (y << 8) | (uint8_t)centre[(int8_t)(w >> 16)];
    y = (y << 8) | (uint8_t)centre[(int8_t)(w >> 8)];
    return (y << 8) | (uint8_t)centre[(int8_t)w];
}

/* Armv7-M and later without Helium (Cortex-M3/M4/M7/M33): word loads and stores, which these
 * cores allow unaligned (memcpy of a word compiles to one LDR/STR), eight elements per pass. */
static void lut_run(const int8_t *table, const int8_t *input, int8_t *output, int32_t size)
{
    const int8_t *centre = table + LUT_CENTRE;
    int32_t i;

    for (i = 0; i + 8 <= size; i += 8) {
        uint32_t low;
        uint32_t high;
        memcpy(&low, input + i, 4);
        memcpy(&high, input + i + 4, 4);
        low = lut_word(centre, low);
        high = lut_word(centre, high);
        memcpy(output + i, &low, 4);
        memcpy(output + i + 4, &high, 4);
    }
    if (i + 4 <= size) {
        uint32_t w;
        memcpy(&w, input + i, 4);
        w = lut_word(centre, w);
        memcpy(output + i, &w, 4);
        i += 4;
    }
    for (; i < size; ++i) {
        output[i] = centre[input[i]];
    }
}

#else

static void lut_run(const int8_t *table, const int8_t *input, int8_t *output, int32_t size)
{
    const int8_t *centre = table + LUT_CENTRE;
    int32_t i;

    for (i = 0; i < size; ++i) {
        output[i] = centre[input[i]];
    }
}

#endif

edgec_status edgec_lut_s8(const edgec_lut_desc *desc, const int8_t *input, int8_t *output)
{
    if (desc == NULL || desc->table == NULL || input == NULL || output == NULL || desc->size < 1) {
        return EDGEC_ARG_ERROR;
    }
    lut_run(desc->table, input, output, desc->size);
    return EDGEC_OK;
}

edgec_status edgec_lut_channels_s8(const edgec_lut_channels_desc *desc, const int8_t *tables, const int8_t *input,
                                   int8_t *output)
{
    int32_t p;

    if (desc == NULL || tables == NULL || input == NULL || output == NULL || desc->pixels < 1 || desc->channels < 1) {
        return EDGEC_ARG_ERROR;
    }
    for (p = 0; p < desc->pixels; ++p) {
        const int8_t *table = tables + LUT_CENTRE; /* channel c's entry for x at table[c * 256 + x] */
        int32_t c = desc->channels;
        /* Four channels a step, their tables at fixed offsets from one pointer. */
        for (; c >= 4; c -= 4) {
            const int8_t y0 = table[input[0]];
            const int8_t y1 = table[256 + input[1]];
            const int8_t y2 = table[512 + input[2]];
            const int8_t y3 = table[768 + input[3]];
            output[0] = y0;
            output[1] = y1;
            output[2] = y2;
            output[3] = y3;
            input += 4;
            output += 4;
            table += 1024;
        }
        for (; c > 0; --c) {
            *output++ = table[*input++];
            table += 256;
        }
    }
    return EDGEC_OK;
}
