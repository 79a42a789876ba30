/*
 * startup.c -- bare-metal start-up for edgec's Cortex-M boards (no libc start files).
 *
 * The vector table goes first in flash (section .vectors, KEEP'd by the board linker scripts).
 * Reset: enable the FPU/MVE coprocessors if the build uses them, trap unaligned accesses in a
 * -mno-unaligned-access build, set the stack limit on ARMv8-M,
 * paint the stack, copy .data, zero .bss, run main(), and exit through semihosting with main's
 * return value. Every fault ends the program with status SEMIHOST_FAULT_STATUS after printing
 * "HardFault", so a crash never hangs the emulator; an unexpected interrupt ends it with status 4.
 *
 * Stack overflow: ARMv8-M (M33, M55) faults at once through MSPLIM. ARMv7-M has no stack limit
 * and the MPS2 boards ignore writes below RAM, so there the stack is painted at reset and, when
 * main returns, an overwritten bottom word means the stack overflowed: "HardFault: stack
 * overflow" and status SEMIHOST_FAULT_STATUS (an overflow that corrupts a return address faults
 * earlier). Build with -DEDGEC_REPORT_STACK to also print
 * "stack_used N" (peak stack bytes) at exit, and to measure a function's stack with
 * port_stack_used_by (port.h).
 *
 * Symbols from the linker script: __stack_top, __stack_limit, __data_load, __data_start,
 * __data_end, __bss_start, __bss_end.
 */
#include <stdint.h>
#include <string.h>

#include "port.h"
#include "semihost.h"

#define UNEXPECTED_EXCEPTION_STATUS 4
#define STACK_PAINT 0x5AC3A55Au

/* System Control Block registers. */
#define SCB_CPACR (*(volatile uint32_t *)0xE000ED88u)
#define SCB_CFSR (*(volatile uint32_t *)0xE000ED28u)
#define SCB_HFSR (*(volatile uint32_t *)0xE000ED2Cu)
#define SCB_CCR (*(volatile uint32_t *)0xE000ED14u)
#define CCR_UNALIGN_TRP (1u << 3)
#define CPACR_CP10_CP11_FULL_ACCESS (0xFu << 20)

/* Mainline profiles have the configurable fault status registers and 32-bit Thumb-2. */
#if defined(__ARM_ARCH_7M__) || defined(__ARM_ARCH_7EM__) || defined(__ARM_ARCH_8M_MAIN__) || \
    defined(__ARM_ARCH_8_1M_MAIN__)
#define PORT_HAS_FAULT_STATUS 1
#else
#define PORT_HAS_FAULT_STATUS 0
#endif

#if defined(__ARM_ARCH_8M_MAIN__) || defined(__ARM_ARCH_8_1M_MAIN__) || defined(__ARM_ARCH_8M_BASE__)
#define PORT_HAS_STACK_LIMIT 1
#else
#define PORT_HAS_STACK_LIMIT 0
#endif

/* Declared as arrays of unknown size: they are addresses of memory areas, not single objects. */
extern uint32_t __stack_top[];
extern uint32_t __stack_limit[];
extern uint32_t __data_load[];
extern uint32_t __data_start[];
extern uint32_t __data_end[];
extern uint32_t __bss_start[];
extern uint32_t __bss_end[];

int main(void);

void Reset_Handler(void) __attribute__((noreturn));
void Fault_Handler(void) __attribute__((naked, noreturn));
void Default_Handler(void) __attribute__((noreturn));
void port_report_fault(void) __attribute__((noreturn, used));

/* The first float or MVE instruction faults (NOCP) until CP10/CP11 are enabled. */
static void enable_coprocessors(void)
{
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
    SCB_CPACR |= CPACR_CP10_CP11_FULL_ACCESS;
    __asm__ volatile("dsb\n\tisb" : : : "memory");
#endif
}

/* A build for memory without unaligned access (-mno-unaligned-access) makes every unaligned word
 * or halfword access fault (UsageFault UNALIGNED), so none can hide in its code. */
static void trap_unaligned_access(void)
{
#if PORT_HAS_FAULT_STATUS && !defined(__ARM_FEATURE_UNALIGNED)
    SCB_CCR |= CCR_UNALIGN_TRP;
    __asm__ volatile("dsb\n\tisb" : : : "memory");
#endif
}

#if PORT_HAS_FAULT_STATUS && !defined(__ARM_FEATURE_UNALIGNED)
/*
 * With the trap on, newlib's memcpy, built for cores that allow unaligned access, faults on a
 * copy between differently aligned buffers (Debian has no -mno-unaligned-access multilib): the
 * program takes this one instead, as a firmware takes a C library built like itself. The empty
 * asm keeps the compiler from turning the loop back into a call to memcpy.
 */
void *memcpy(void *dst, const void *src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    while (n--) {
        *d++ = *s++;
        __asm__ volatile("" : : : "memory");
    }
    return dst;
}
#endif

/* ARMv8-M checks the main stack pointer against MSPLIM: an overflow faults instead of silently
 * writing below the stack. */
static void set_stack_limit(void)
{
#if PORT_HAS_STACK_LIMIT
    __asm__ volatile("msr msplim, %0" : : "r"(__stack_limit) : "memory");
#endif
}

static uintptr_t current_stack_pointer(void)
{
    uintptr_t sp;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    return sp;
}

/* Fill the unused stack below the caller's frame with STACK_PAINT. */
static void paint_stack(void)
{
    uint32_t *word = __stack_limit;
    const uintptr_t end = current_stack_pointer() - 64u;
    while ((uintptr_t)word < end) {
        *word++ = STACK_PAINT;
    }
}

#ifdef EDGEC_REPORT_STACK
/* The lowest stack address written since the stack was last painted. */
static uintptr_t lowest_stack_used(void)
{
    const uint32_t *word = __stack_limit;
    while ((uintptr_t)word < (uintptr_t)__stack_top && *word == STACK_PAINT) {
        ++word;
    }
    return (uintptr_t)word;
}

/* Bytes of stack ever used: everything above the lowest word that is no longer painted. */
static uint32_t stack_bytes_used(void)
{
    return (uint32_t)((uintptr_t)__stack_top - lowest_stack_used());
}

/*
 * Repaints the free stack, so that what function() uses below this frame shows. The 64 bytes
 * paint_stack leaves unpainted under it count as used: the figure may be high by up to 64, never
 * low. (The peak reported at exit then misses earlier, deeper use; this is for measurements.)
 */
uint32_t port_stack_used_by(int (*function)(void), int *result)
{
    const uintptr_t caller = current_stack_pointer();
    paint_stack();
    *result = function();
    return (uint32_t)(caller - lowest_stack_used());
}
#endif

static void check_stack(void)
{
    if (__stack_limit[0] != STACK_PAINT) {
        semihost_write0("HardFault: stack overflow\n");
        semihost_exit(SEMIHOST_FAULT_STATUS);
    }
#ifdef EDGEC_REPORT_STACK
    semihost_write0("stack_used ");
    semihost_write_int((long)stack_bytes_used());
    semihost_write0("\n");
#endif
}

static void init_memory(void)
{
    const size_t data_bytes = (size_t)((uintptr_t)__data_end - (uintptr_t)__data_start);
    const size_t bss_bytes = (size_t)((uintptr_t)__bss_end - (uintptr_t)__bss_start);
    memcpy(__data_start, __data_load, data_bytes);
    memset(__bss_start, 0, bss_bytes);
}

void Reset_Handler(void)
{
    enable_coprocessors();
    trap_unaligned_access();
    set_stack_limit();
    paint_stack();
    init_memory();
    {
        const int status = main();
        check_stack();
        semihost_exit(status);
    }
}

/*
 * Shared by all fault vectors. The faulting stack pointer may be what caused the fault (overflow,
 * corruption), so reset SP to the top of the stack before running any C code.
 */
void Fault_Handler(void)
{
    __asm__ volatile("ldr r0, =__stack_top\n\t"
                     "mov sp, r0\n\t"
                     "bl port_report_fault\n\t"
                     ".ltorg");
}

void port_report_fault(void)
{
    semihost_write0("HardFault");
#if PORT_HAS_FAULT_STATUS
    semihost_write0(" CFSR=");
    semihost_write_hex(SCB_CFSR);
    semihost_write0(" HFSR=");
    semihost_write_hex(SCB_HFSR);
#endif
    semihost_write0("\n");
    semihost_exit(SEMIHOST_FAULT_STATUS);
}

/* No interrupt is ever enabled, so reaching this is a bug worth stopping on. */
void Default_Handler(void)
{
    semihost_write0("Unexpected exception\n");
    semihost_exit(UNEXPECTED_EXCEPTION_STATUS);
}

/* One vector: the initial stack pointer (entry 0) or a handler address. */
typedef union {
    void (*handler)(void);
    const void *stack_top;
} vector_entry;

/* Entries 0-15: the architecture's system exceptions (entry 7 is SecureFault on ARMv8-M). */
__attribute__((section(".vectors"), used)) const vector_entry port_vector_table[16] = {
    { .stack_top = __stack_top },
    { .handler = Reset_Handler },
    { .handler = Default_Handler }, /* NMI */
    { .handler = Fault_Handler },   /* HardFault */
    { .handler = Fault_Handler },   /* MemManage */
    { .handler = Fault_Handler },   /* BusFault */
    { .handler = Fault_Handler },   /* UsageFault */
    { .handler = Fault_Handler },   /* SecureFault */
    { .handler = 0 },
    { .handler = 0 },
    { .handler = 0 },
    { .handler = Default_Handler }, /* SVCall */
    { .handler = Default_Handler }, /* DebugMonitor */
    { .handler = 0 },
    { .handler = Default_Handler }, /* PendSV */
    { .handler = Default_Handler }, /* SysTick */
};
