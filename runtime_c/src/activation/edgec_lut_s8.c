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
 *
 * edgec_lut_channels_s8 (one table per channel, channels last: a per-channel affine, a PReLU) has
 * the same three paths over each pixel's channels: portable C one channel at a time; a word of four
 * channels per load and store, their tables 256 B apart from one pointer, or channel by channel
 * where many pixels share few channels; Helium, eight channels per 16-bit byte gather (offset
 * x + 128 + 256 * lane), the pixel's tail by predication (1, 2, 4 or 8 channels: one loop over
 * all the elements).
 */
#include <stddef.h>
#include <string.h>

#include "edgec_nn.h"
#include "../support/edgec_support.h"

#define LUT_CENTRE 128 /* the entry of input value 0 */
#define LUT_SIZE 256   /* entries of a table: one channel's table follows the last */

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

/* lane k's offset from its table's entry for input -128 to its entry for input 0, tables 256 B apart */
static const uint16_t lane_offsets[8] = { 128, 384, 640, 896, 1152, 1408, 1664, 1920 };

/*
 * Pixel after pixel, a tail-predicated low-overhead loop over its channels, 8 lanes per pass:
 * load 8 input bytes sign-extended to 16 bits, add each lane's table offset (lane_offsets, q1),
 * gather the 8 entries (byte gather with 16-bit offsets: the 8 tables span 2 KiB), store the low
 * bytes; the table pointer steps 8 tables. The pointers step 8 bytes a pass, the last pass
 * included: `overshoot` takes them back to the next pixel. 6 instructions per 8 elements, 6 more a
 * pixel. pixels, channels >= 1.
 */
static void lut_channels_pixels(const int8_t *tables, const int8_t *input, int8_t *output, int32_t pixels,
                                int32_t channels)
{
    const int32_t overshoot = (8 - channels % 8) % 8;
    const int8_t *table;
    /* input and output in low registers: the widening load and narrowing store encode only r0-r7 */
    __asm__ volatile(
        "vldrh.u16 q1, [%[offsets]]\n"
        "1:\n\t"
        "mov %[table], %[tables]\n\t"
        "dlstp.16 lr, %[channels]\n"
        "2:\n\t"
        "vldrb.s16 q0, [%[in]], #8\n\t"
        "vadd.i16 q0, q0, q1\n\t"
        "vldrb.u16 q2, [%[table], q0]\n\t"
        "vstrb.16 q2, [%[out]], #8\n\t"
        "add %[table], %[table], #2048\n\t"
        "letp lr, 2b\n\t"
        "sub %[in], %[in], %[overshoot]\n\t"
        "sub %[out], %[out], %[overshoot]\n\t"
        "subs %[pixels], %[pixels], #1\n\t"
        "bne 1b"
        : [in] "+l"(input), [out] "+l"(output), [pixels] "+r"(pixels), [table] "=&r"(table)
        : [tables] "r"(tables), [channels] "r"(channels), [overshoot] "r"(overshoot), [offsets] "r"(lane_offsets)
        : "lr", "q0", "q1", "q2", "memory", "cc");
}

/*
 * Channels dividing the 8 lanes (1, 2, 4, 8): every pass covers whole pixels and lane k always reads
 * table k % channels, so one tail-predicated loop runs over all the elements with fixed offsets
 * (q1) from the first table: 4 instructions per 8 elements. size >= 1.
 */
static void lut_channels_flat(const int8_t *tables, const int8_t *input, int8_t *output, int32_t size, int32_t channels)
{
    uint16_t offsets[8];
    int32_t k;

    for (k = 0; k < 8; ++k) {
        offsets[k] = lane_offsets[k % channels];
    }
    /* input and output in low registers, as above */
    __asm__ volatile("vldrh.u16 q1, [%[offsets]]\n\t"
                     "dlstp.16 lr, %[size]\n"
                     "1:\n\t"
                     "vldrb.s16 q0, [%[in]], #8\n\t"
                     "vadd.i16 q0, q0, q1\n\t"
                     "vldrb.u16 q2, [%[tables], q0]\n\t"
                     "vstrb.16 q2, [%[out]], #8\n\t"
                     "letp lr, 1b"
                     : [in] "+l"(input), [out] "+l"(output)
                     : [tables] "r"(tables), [size] "r"(size), [offsets] "r"(offsets)
                     : "lr", "q0", "q1", "q2", "memory");
}

static void lut_channels_run(const int8_t *tables, const int8_t *input, int8_t *output, int32_t pixels,
                             int32_t channels)
{
    if (8 % channels == 0 && pixels <= INT32_MAX / channels) {
        lut_channels_flat(tables, input, output, pixels * channels, channels);
    } else {
        lut_channels_pixels(tables, input, output, pixels, channels);
    }
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

#if defined(__ARM_FEATURE_DSP)
/* base + (int8_t)(w >> ROT) in one SXTAB (GCC spends an SBFX and an ADD on the C expression). */
#define LUT_INDEX(base, w, ROT)                                                     \
    __extension__({                                                                 \
        const int8_t *index_;                                                       \
        __asm__("sxtab %0, %1, %2, ror #" #ROT : "=r"(index_) : "r"(base), "r"(w)); \
        index_;                                                                     \
    })
#else
#define LUT_INDEX(base, w, ROT) ((base) + (int8_t)((w) >> (ROT)))
#endif

/* Four channels of a little-endian input word through their tables, `centre` channel 0's entry
 * for input 0 and channel k's table 256 k bytes on. */
static inline uint32_t lut_channels_word(const int8_t *centre, uint32_t w)
{
    uint32_t y = (uint8_t)LUT_INDEX(centre, w, 24)[3 * LUT_SIZE];
    y = (y << 8) | (uint8_t)LUT_INDEX(centre, w, 16)[2 * LUT_SIZE];
    y = (y << 8) | (uint8_t)LUT_INDEX(centre, w, 8)[LUT_SIZE];
    return (y << 8) | (uint8_t)LUT_INDEX(centre, w, 0)[0];
}

/* One channel of every pixel through its table, pixel after pixel (`channels` bytes apart), four a
 * pass. */
static void lut_channels_column(const int8_t *centre, const int8_t *input, int8_t *output, int32_t pixels,
                                int32_t channels)
{
    const int32_t two = 2 * channels;
    const int32_t three = 3 * channels;
    int32_t p = pixels;

    for (; p >= 4; p -= 4) {
        const int8_t y0 = centre[input[0]];
        const int8_t y1 = centre[input[channels]];
        const int8_t y2 = centre[input[two]];
        const int8_t y3 = centre[input[three]];
        output[0] = y0;
        output[channels] = y1;
        output[two] = y2;
        output[three] = y3;
        input += 4 * channels;
        output += 4 * channels;
    }
    for (; p > 0; --p) {
        *output = centre[*input];
        input += channels;
        output += channels;
    }
}

/*
 * Two orders: a word of four channels (their tables) per load and store, pixel after pixel (about
 * 3.9 instructions an element and 12 a pixel on Cortex-M4), the last channels % 4 by column; or
 * every channel by column (about 4.2 an element and 20 a channel): the cheaper for the shape.
 */
static void lut_channels_run(const int8_t *tables, const int8_t *input, int8_t *output, int32_t pixels,
                             int32_t channels)
{
    const int8_t *const first = tables + LUT_CENTRE;
    const int by_column = (int64_t)channels * (200 + 3 * (int64_t)pixels) < (int64_t)120 * pixels;
    const int32_t words = by_column ? 0 : channels / 4;
    const int8_t *const words_end = first + words * 4 * LUT_SIZE;
    int32_t c;

    if (words > 0) {
        const int8_t *in = input;
        int8_t *out = output;
        int32_t p;
        for (p = pixels; p > 0; --p) {
            const int8_t *centre;
            for (centre = first; centre != words_end; centre += 4 * LUT_SIZE) {
                uint32_t w;
                memcpy(&w, in, 4);
                w = lut_channels_word(centre, w);
                memcpy(out, &w, 4);
                in += 4;
                out += 4;
            }
            in += channels - 4 * words;
            out += channels - 4 * words;
        }
    }
    for (c = 4 * words; c < channels; ++c) {
        lut_channels_column(first + c * LUT_SIZE, input + c, output + c, pixels, channels);
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

/* Channel c of each pixel through table c (tables 256 B apart). */
static void lut_channels_run(const int8_t *tables, const int8_t *input, int8_t *output, int32_t pixels,
                             int32_t channels)
{
    int32_t p;

    for (p = 0; p < pixels; ++p) {
        const int8_t *centre = tables + LUT_CENTRE;
        int32_t c;
        for (c = 0; c < channels; ++c) {
            output[c] = centre[input[c]];
            centre += LUT_SIZE;
        }
        input += channels;
        output += channels;
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
    if (desc == NULL || tables == NULL || input == NULL || output == NULL || desc->pixels < 1 || desc->channels < 1) {
        return EDGEC_ARG_ERROR;
    }
    lut_channels_run(tables, input, output, desc->pixels, desc->channels);
    return EDGEC_OK;
}
