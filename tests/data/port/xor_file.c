/*
 * Port test: file I/O over semihosting, startup memory initialisation, floating point (and MVE
 * on Helium targets), exit status.
 * Reads input.bin from the working directory; writes output.bin: input[i] ^ (i * 7 + 1) for each
 * byte, then the little-endian uint32 byte sum of the input, then uint32 floor(n * 0.5) computed
 * in float. Prints "processed N bytes" and exits with 7.
 */
#include <stdint.h>

#include "semihost.h"

#if defined(__ARM_FEATURE_MVE)
#include <arm_mve.h>
#endif

#define CAPACITY 4096

static uint8_t input[CAPACITY];      /* .bss: startup must zero it */
static uint8_t output[CAPACITY + 8];
static uint32_t data_word = 0x12345678u; /* .data: startup must copy it */
static volatile float half = 0.5f;   /* faults on hard-float targets unless CP10/CP11 are on */

static int memory_initialised(void)
{
    int i;
    for (i = 0; i < CAPACITY; ++i) {
        if (input[i] != 0) {
            return 0;
        }
    }
    return data_word == 0x12345678u;
}

static uint32_t byte_sum(const uint8_t *bytes, int n)
{
    uint32_t sum = 0;
    int i = 0;
#if defined(__ARM_FEATURE_MVE)
    for (; i + 16 <= n; i += 16) {
        sum = vaddvaq_u8(sum, vld1q_u8(&bytes[i]));
    }
#endif
    for (; i < n; ++i) {
        sum += bytes[i];
    }
    return sum;
}

static void put_u32_le(uint8_t *dst, uint32_t value)
{
    dst[0] = (uint8_t)value;
    dst[1] = (uint8_t)(value >> 8);
    dst[2] = (uint8_t)(value >> 16);
    dst[3] = (uint8_t)(value >> 24);
}

int main(void)
{
    int n;
    int i;
    if (!memory_initialised()) {
        semihost_write0("startup did not initialise .data/.bss\n");
        return 9;
    }
    n = semihost_read_file("input.bin", input, CAPACITY);
    if (n < 0) {
        semihost_write0("cannot read input.bin\n");
        return 10;
    }
    for (i = 0; i < n; ++i) {
        output[i] = (uint8_t)(input[i] ^ (uint8_t)(i * 7 + 1));
    }
    put_u32_le(&output[n], byte_sum(input, n));
    put_u32_le(&output[n + 4], (uint32_t)((float)n * half));
    if (semihost_write_file("output.bin", output, n + 8) != n + 8) {
        semihost_write0("cannot write output.bin\n");
        return 11;
    }
    semihost_write0("processed ");
    semihost_write_int(n);
    semihost_write0(" bytes\n");
    return 7;
}
