/*
 * semihost.c -- Arm semihosting calls (see semihost.h) and the benchmark markers.
 *
 * A semihosting call is `bkpt 0xAB` with the operation number in r0 and a pointer to an
 * argument block (or a single argument) in r1; the result comes back in r0. Operation numbers
 * and return conventions are those of Arm's "Semihosting for AArch32 and AArch64" specification.
 */
#include "semihost.h"

#include <stdint.h>

enum semihost_op {
    SYS_OPEN = 0x01,
    SYS_CLOSE = 0x02,
    SYS_WRITE0 = 0x04,
    SYS_WRITE = 0x05,
    SYS_READ = 0x06,
    SYS_EXIT = 0x18,
    SYS_EXIT_EXTENDED = 0x20
};

/* Exit reason codes of SYS_EXIT / SYS_EXIT_EXTENDED. */
#define ADP_STOPPED_APPLICATION_EXIT 0x20026u
#define ADP_STOPPED_RUNTIME_ERROR_UNKNOWN 0x20023u

static int semihost_call(int op, const void *arg)
{
    register int r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    /* The host reads and writes guest memory through r1, hence the memory clobber. */
    __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

void semihost_write0(const char *text)
{
    (void)semihost_call(SYS_WRITE0, text);
}

void semihost_write_int(long value)
{
    /* Work on the magnitude as unsigned so LONG_MIN does not overflow. */
    unsigned long magnitude = value < 0 ? 0ul - (unsigned long)value : (unsigned long)value;
    char text[24];
    int pos = (int)sizeof(text) - 1;
    text[pos] = '\0';
    do {
        text[--pos] = (char)('0' + (int)(magnitude % 10u));
        magnitude /= 10u;
    } while (magnitude != 0u);
    if (value < 0) {
        text[--pos] = '-';
    }
    semihost_write0(&text[pos]);
}

void semihost_write_hex(unsigned long value)
{
    static const char digits[] = "0123456789abcdef";
    char text[11];
    int i;
    text[0] = '0';
    text[1] = 'x';
    for (i = 0; i < 8; ++i) {
        text[2 + i] = digits[(value >> (28 - 4 * i)) & 0xFu];
    }
    text[10] = '\0';
    semihost_write0(text);
}

void semihost_exit(int status)
{
    /* SYS_EXIT_EXTENDED passes the full status; plain SYS_EXIT on AArch32 only tells 0 from 1. */
    const uint32_t block[2] = { ADP_STOPPED_APPLICATION_EXIT, (uint32_t)status };
    (void)semihost_call(SYS_EXIT_EXTENDED, block);
    /* Only reached on a host without SYS_EXIT_EXTENDED. */
    (void)semihost_call(SYS_EXIT, (const void *)(uintptr_t)(status == 0 ? ADP_STOPPED_APPLICATION_EXIT
                                                                        : ADP_STOPPED_RUNTIME_ERROR_UNKNOWN));
    for (;;) {
    }
}

static int string_length(const char *text)
{
    int n = 0;
    while (text[n] != '\0') {
        ++n;
    }
    return n;
}

int semihost_open(const char *path, int mode)
{
    const uint32_t block[3] = { (uint32_t)(uintptr_t)path, (uint32_t)mode, (uint32_t)string_length(path) };
    return semihost_call(SYS_OPEN, block);
}

/* SYS_READ and SYS_WRITE return the number of bytes NOT transferred. */
static int bytes_transferred(int len, int not_transferred)
{
    if (not_transferred < 0 || not_transferred > len) {
        return -1;
    }
    return len - not_transferred;
}

int semihost_read(int fd, void *buf, int len)
{
    const uint32_t block[3] = { (uint32_t)fd, (uint32_t)(uintptr_t)buf, (uint32_t)len };
    return bytes_transferred(len, semihost_call(SYS_READ, block));
}

int semihost_write(int fd, const void *buf, int len)
{
    const uint32_t block[3] = { (uint32_t)fd, (uint32_t)(uintptr_t)buf, (uint32_t)len };
    return bytes_transferred(len, semihost_call(SYS_WRITE, block));
}

int semihost_close(int fd)
{
    const uint32_t block[1] = { (uint32_t)fd };
    return semihost_call(SYS_CLOSE, block) == 0 ? 0 : -1;
}

int semihost_read_file(const char *path, void *buf, int capacity)
{
    unsigned char *bytes = (unsigned char *)buf;
    int total = 0;
    const int fd = semihost_open(path, SEMIHOST_MODE_READ_BINARY);
    if (fd < 0) {
        return -1;
    }
    /* A read may return fewer bytes than asked before the end of the file. */
    while (total < capacity) {
        const int n = semihost_read(fd, bytes + total, capacity - total);
        if (n < 0) {
            total = -1;
            break;
        }
        if (n == 0) {
            break;
        }
        total += n;
    }
    (void)semihost_close(fd);
    return total;
}

int semihost_write_file(const char *path, const void *buf, int len)
{
    int written;
    const int fd = semihost_open(path, SEMIHOST_MODE_WRITE_BINARY);
    if (fd < 0) {
        return -1;
    }
    written = semihost_write(fd, buf, len);
    if (semihost_close(fd) != 0 || written != len) {
        return -1;
    }
    return written;
}

/*
 * The markers: `noipa` keeps GCC from inlining, cloning (constprop), or merging the two identical
 * bodies (ipa-icf), any of which would move calls away from the symbol addresses the plugin
 * hooks; clang has no noipa and does none of those to a noinline function with a side effect.
 * The asm statement makes the call an observable side effect that cannot be removed; it emits no
 * instruction, so each marker is a single `bx lr`.
 */
#if defined(__clang__)
#define PORT_MARKER __attribute__((noinline))
#else
#define PORT_MARKER __attribute__((noipa))
#endif

PORT_MARKER void bench_begin(unsigned id)
{
    __asm__ volatile("" : : "r"(id) : "memory");
}

PORT_MARKER void bench_end(unsigned id)
{
    __asm__ volatile("" : : "r"(id) : "memory");
}
