/*
 * Port test: port_stack_used_by. A function whose frame holds a FRAME_BYTES array (volatile, so
 * it stays on the stack) is measured; main prints "used N" and returns the function's result.
 */
#include <stdint.h>

#include "port.h"
#include "semihost.h"

#ifndef FRAME_BYTES
#define FRAME_BYTES 512
#endif

static int fill_frame(void)
{
    volatile uint8_t frame[FRAME_BYTES];
    int i;
    int sum = 0;
    for (i = 0; i < FRAME_BYTES; ++i) {
        frame[i] = (uint8_t)i;
    }
    for (i = 0; i < FRAME_BYTES; ++i) {
        sum += frame[i];
    }
    return sum & 0x7F;
}

int main(void)
{
    int result = 0;
    const uint32_t used = port_stack_used_by(fill_frame, &result);
    semihost_write0("used ");
    semihost_write_int((long)used);
    semihost_write0("\n");
    return result;
}
