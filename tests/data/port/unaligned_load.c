/*
 * One word load from an odd address: it runs where the build allows unaligned access and faults
 * (UsageFault UNALIGNED, exit status 3) in a -mno-unaligned-access build, whose start-up sets
 * CCR.UNALIGN_TRP (runtime_c/port/startup.c).
 */
#include <stdint.h>

static volatile uint8_t bytes[8] __attribute__((aligned(4)));

int main(void)
{
    uint32_t word;
    __asm__ volatile("ldr %0, [%1]" : "=r"(word) : "r"(bytes + 1) : "memory");
    return (int)(word & 0u);
}
