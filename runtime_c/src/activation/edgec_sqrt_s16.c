/*
 * edgec_sqrt_s16.c -- int16 square root, correctly rounded in integers: y = round(sqrt(x * R)),
 * R = s_in / s_out^2 = multiplier * 4^-half_shift; golden: edgec.ops.int16.sqrt_s16.
 */
#include "../support/edgec_support.h"

/* floor(sqrt(n)), digit by digit (two bits of n per step). */
static uint32_t isqrt64(uint64_t n)
{
    uint64_t root = 0;
    uint64_t bit = (uint64_t)1 << 62;
    while (bit > n) {
        bit >>= 2;
    }
    while (bit != 0) {
        if (n >= root + bit) {
            n -= root + bit;
            root = (root >> 1) + bit;
        } else {
            root >>= 1;
        }
        bit >>= 2;
    }
    return (uint32_t)root;
}

edgec_status edgec_sqrt_s16(const edgec_sqrt_s16_desc *desc, const int16_t *input, int16_t *output)
{
    if (!desc || !input || !output || desc->size < 1 || desc->multiplier < 0 || desc->half_shift < 0 ||
        desc->half_shift > 31) {
        return EDGEC_ARG_ERROR;
    }
    const uint64_t multiplier = (uint64_t)desc->multiplier;
    for (int32_t i = 0; i < desc->size; i++) {
        /* x < 0 takes the root at 0; 4 * x * multiplier < 2^48 */
        const uint64_t x = input[i] > 0 ? (uint64_t)input[i] : 0u;
        const uint32_t twice = isqrt64(4u * x * multiplier) >> desc->half_shift; /* floor(2 sqrt(x R)) */
        output[i] = (int16_t)EDGEC_MIN((twice + 1u) >> 1, (uint32_t)INT16_MAX);
    }
    return EDGEC_OK;
}
