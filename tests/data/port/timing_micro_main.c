/* Runs the micro-benchmarks of timing_micro.S in a fixed order (one bench region each). */
#include <stdint.h>

#include "semihost.h"

void empty(void *buffer);
void ldr_independent(void *buffer);
void ldr_chase(void *buffer);
void ldr_use(void *buffer);
void ldrd_x4(void *buffer);
void ldm_stm_1(void *buffer);
void ldm_stm_2(void *buffer);
void ldm_stm_3(void *buffer);
void ldm_stm_4(void *buffer);
void ldm_stm_5(void *buffer);
void ldm_stm_6(void *buffer);
void ldm_stm_7(void *buffer);
void ldm_stm_8(void *buffer);
void branch_taken(void *buffer);
void branch_untaken(void *buffer);
void smlad_chain(void *buffer);
void mul_umull_sdiv(void *buffer);
void alu_independent(void *buffer);
void alu_chain(void *buffer);
void flash_fetch(void *buffer);
void flash_data(const void *constants);
void str_immediate(void *buffer);
void str_register(void *buffer);
void helium_overlap(void *buffer);
void helium_no_overlap(void *buffer);
void helium_straight(void *buffer);

static uint32_t buffer[16] __attribute__((aligned(16)));
static const uint32_t constants[8] __attribute__((aligned(16))) = {1, 2, 3, 4, 5, 6, 7, 8};

int main(void)
{
    void (*const routines[])(void *) = {
        empty, ldr_independent, ldr_chase, ldr_use, ldrd_x4, ldm_stm_1, ldm_stm_2, ldm_stm_3,
        ldm_stm_4, ldm_stm_5, ldm_stm_6, ldm_stm_7, ldm_stm_8, branch_taken, branch_untaken,
        smlad_chain, mul_umull_sdiv, alu_independent, alu_chain, flash_fetch, flash_fetch,
    };
    unsigned i;
    for (i = 0; i < sizeof(routines) / sizeof(routines[0]); ++i) {
        buffer[0] = (uint32_t)(uintptr_t)buffer;
        routines[i](buffer);
    }
    flash_data(constants);
    str_immediate(buffer);
    str_register(buffer);
#if defined(__ARM_FEATURE_MVE)
    helium_overlap(buffer);
    helium_no_overlap(buffer);
    helium_straight(buffer);
#endif
    return 0;
}
