/*
 * Port test: a crash must end the program (status 3, "HardFault" printed) instead of hanging.
 * FAULT_KIND 0: load from an unmapped address; 1: undefined instruction; 2: deep recursion
 * overflowing the stack; 3: one frame bigger than the stack, which on ARMv7-M (no stack limit
 * register, writes below RAM ignored) returns normally and is caught by startup's stack check.
 */
#include <stdint.h>

#include "semihost.h"

#ifndef FAULT_KIND
#define FAULT_KIND 0
#endif

static volatile uint32_t sink;

#if FAULT_KIND == 2
/* Each level keeps a 64-byte frame live across the recursive call. */
__attribute__((noinline)) static uint32_t recurse(uint32_t depth)
{
    volatile uint8_t frame[64];
    frame[0] = (uint8_t)depth;
    if (depth == 0) {
        return frame[0];
    }
    return recurse(depth - 1) + frame[0];
}
#endif

#if FAULT_KIND == 3
/* 16 KiB of locals against the default 8 KiB stack. */
__attribute__((noinline)) static uint32_t oversized_frame(uint32_t index)
{
    volatile uint8_t frame[16384];
    uint32_t i;
    for (i = 0; i < sizeof(frame); ++i) {
        frame[i] = (uint8_t)i;
    }
    return frame[index];
}
#endif

int main(void)
{
#if FAULT_KIND == 0
    sink = *(volatile uint32_t *)0xF0000000u;
#elif FAULT_KIND == 1
    __builtin_trap();
#elif FAULT_KIND == 2
    sink = recurse(1000); /* about 80 KiB of stack; the default is 8 KiB */
#else
    sink = oversized_frame(5);
#endif
    semihost_write0("no fault\n");
    return 0;
}
