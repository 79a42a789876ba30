/*
 * What the kernel test drivers share (the tests/data/port drivers named *_kernels.c, run under
 * QEMU): the cases come from cases.bin by semihosting one record at a time, each driver's
 * run_record runs one and writes its result to results.bin; outputs are followed by GUARD_BYTES
 * of GUARD_VALUE that the kernel must leave intact. A driver that defines ARENA_BYTES before
 * including this gets `arena`, that many bytes aligned to 16.
 */
#ifndef KERNEL_RECORDS_H
#define KERNEL_RECORDS_H

#include <stdint.h>

#include "semihost.h"

#define GUARD_BYTES 16
#define GUARD_VALUE 0x5A

#ifdef ARENA_BYTES
static int64_t arena_words[ARENA_BYTES / 8] __attribute__((aligned(16)));
static int8_t *const arena = (int8_t *)arena_words;
#endif

static inline int32_t align4(int32_t n)
{
    return (n + 3) & ~3;
}

/* The GUARD_BYTES after an output are all still GUARD_VALUE. */
static inline int guards_intact(const int8_t *guard)
{
    for (int32_t i = 0; i < GUARD_BYTES; i++) {
        if (guard[i] != GUARD_VALUE) {
            return 0;
        }
    }
    return 1;
}

/* Up to len bytes from fd (a semihosting read may return fewer): how many, or -1 on error. */
static inline int read_bytes(int fd, void *buffer, int len)
{
    int total = 0;
    while (total < len) {
        const int n = semihost_read(fd, (int8_t *)buffer + total, len - total);
        if (n < 0) {
            return -1;
        }
        if (n == 0) {
            break;
        }
        total += n;
    }
    return total;
}

/* main's whole work: every record of cases.bin through run_record (1 done, 0 end of file, -1
 * error) into results.bin; the exit status is 0 when all ran, else 2. */
static inline int run_records(int (*run_record)(int in, int out))
{
    const int in = semihost_open("cases.bin", SEMIHOST_MODE_READ_BINARY);
    const int out = semihost_open("results.bin", SEMIHOST_MODE_WRITE_BINARY);
    int status = 2;
    if (in >= 0 && out >= 0) {
        int done;
        while ((done = run_record(in, out)) == 1) {
        }
        status = done == 0 ? 0 : 2;
    }
    if (in >= 0) {
        (void)semihost_close(in);
    }
    if (out >= 0 && semihost_close(out) != 0) {
        status = 2;
    }
    return status;
}

#endif /* KERNEL_RECORDS_H */
