/*
 * semihost.h -- the bare-metal port's only I/O: Arm semihosting (bkpt 0xAB) as QEMU implements it
 * with `-semihosting-config enable=on,target=native`. Host files carry test inputs and outputs, so
 * programs need no printf, no newlib stdio and no heap.
 *
 * Also declares the benchmark markers bench_begin()/bench_end(): empty functions whose addresses
 * edgec's QEMU plugin (qemu_insn_plugin.c) watches to count the instructions between them.
 */
#ifndef EDGEC_SEMIHOST_H
#define EDGEC_SEMIHOST_H

/* SYS_OPEN modes (index into the ISO C fopen mode list "r","rb","r+","r+b","w","wb",...). */
#define SEMIHOST_MODE_READ_BINARY 1
#define SEMIHOST_MODE_WRITE_BINARY 5
#define SEMIHOST_MODE_APPEND_BINARY 9

/* Exit status the fault handlers report, so a crash is told apart from a program's own status. */
#define SEMIHOST_FAULT_STATUS 3

/* Print a NUL-terminated string on the host (QEMU writes it to its stderr). */
void semihost_write0(const char *text);

/* Print a signed decimal integer / a 0x-prefixed 8-digit hex number, without a newline. */
void semihost_write_int(long value);
void semihost_write_hex(unsigned long value);

/* End the program; QEMU exits with `status` (any value, via SYS_EXIT_EXTENDED). */
void semihost_exit(int status) __attribute__((noreturn));

/* Open a host file; `path` is relative to QEMU's working directory. Returns a handle or -1. */
int semihost_open(const char *path, int mode);

/* Read up to `len` bytes; returns the bytes read (0 at end of file) or -1 on error. */
int semihost_read(int fd, void *buf, int len);

/* Write `len` bytes; returns the bytes written or -1 on error. */
int semihost_write(int fd, const void *buf, int len);

/* Returns 0 on success, -1 on error. */
int semihost_close(int fd);

/* Whole-file helpers: read at most `capacity` bytes / write `len` bytes. Return the byte count
 * transferred, or -1 if the file cannot be opened or the transfer fails. */
int semihost_read_file(const char *path, void *buf, int capacity);
int semihost_write_file(const char *path, const void *buf, int len);

/* Benchmark markers. They do nothing, but are never inlined, cloned or merged, so each call
 * executes the function at its symbol's address; the QEMU plugin records the instruction count
 * at every execution. `id` is for the reader of the C source only (the plugin cannot see it). */
void bench_begin(unsigned id);
void bench_end(unsigned id);

#endif /* EDGEC_SEMIHOST_H */
