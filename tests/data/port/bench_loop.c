/*
 * Port test: instruction counting. Region k (k = 0, 1, 2) runs the same loop for (k + 1) * N
 * iterations, so consecutive regions differ by exactly N loop iterations; region 3 is empty.
 * The trip counts come from a volatile array, so one loop body serves every region.
 */
#include <stdint.h>

#include "semihost.h"

#ifndef N
#define N 100
#endif

static volatile uint32_t trip_counts[3] = {N, 2 * N, 3 * N};
static volatile uint32_t sink;

static uint32_t work(uint32_t iterations)
{
    uint32_t acc = 1;
    uint32_t i;
    for (i = 0; i < iterations; ++i) {
        acc = acc * 31u + i;
    }
    return acc;
}

int main(void)
{
    unsigned k;
    for (k = 0; k < 3; ++k) {
        const uint32_t iterations = trip_counts[k];
        bench_begin(k);
        sink = work(iterations);
        bench_end(k);
    }
    bench_begin(3);
    bench_end(3);
    return 0;
}
