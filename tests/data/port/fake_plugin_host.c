/*
 * A stand-in for QEMU's plugin loader, to test runtime_c/port/qemu_insn_plugin.c against the
 * plugin API versions this machine's QEMU does not have. Built with -rdynamic so that the plugin
 * resolves its API calls against the functions below, and with -DHOST_API=N:
 *   1: API version 1 (QEMU 7.2 to 8.2: accepts versions 0..1, inline ops on plain counters);
 *   2: API version 2 on (QEMU 9.x: accepts 2..4, inline ops on per-vCPU scoreboards only);
 *   0: neither inline API (accepts 0..1): the plugin must refuse to install, in one line.
 * Like QEMU it opens the plugin with RTLD_NOW and checks qemu_plugin_version against its range,
 * then runs a fixed guest trace: translation blocks are instrumented on first execution, then
 * each instruction runs its callbacks and inline ops. Usage: host PLUGIN ARG... (the plugin's
 * key=value arguments). Prints "version N"; exit 0, or 2 if refused, 3 if install failed.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HOST_API
#error "define HOST_API (0, 1 or 2)"
#endif

#define EXPORT __attribute__((visibility("default")))

typedef uint64_t qemu_plugin_id_t;
typedef struct {
    const char *target_name;
    struct {
        int min;
        int cur;
    } version;
    int system_emulation;
} qemu_info_t;

struct qemu_plugin_scoreboard {
    unsigned char data[1 << 16]; /* one vCPU's element */
};
typedef struct {
    struct qemu_plugin_scoreboard *score;
    size_t offset;
} qemu_plugin_u64;

typedef void (*udata_cb)(unsigned int vcpu_index, void *userdata);
typedef void (*exit_cb)(qemu_plugin_id_t id, void *userdata);

enum { MAX_OPS = 4 };
struct qemu_plugin_insn {
    uint64_t vaddr;
    int ops;
    uint64_t *counter[MAX_OPS];
    uint64_t imm[MAX_OPS];
    udata_cb cb;
    void *userdata;
};
struct qemu_plugin_tb {
    size_t n;
    struct qemu_plugin_insn insn[4];
    int translated;
};
struct qemu_plugin_tb;
typedef void (*trans_cb)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);

static trans_cb on_translate;
static exit_cb on_exit;
static void *exit_userdata;

EXPORT void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, trans_cb cb)
{
    (void)id;
    on_translate = cb;
}
EXPORT size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb) { return tb->n; }
EXPORT struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t i)
{
    return (struct qemu_plugin_insn *)&tb->insn[i];
}
EXPORT uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn) { return insn->vaddr; }
EXPORT void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, udata_cb cb, int flags,
                                                   void *userdata)
{
    (void)flags;
    insn->cb = cb;
    insn->userdata = userdata;
}
EXPORT void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, exit_cb cb, void *userdata)
{
    (void)id;
    on_exit = cb;
    exit_userdata = userdata;
}
EXPORT void qemu_plugin_outs(const char *string) { fputs(string, stderr); }

#if HOST_API != 0
static void add_op(struct qemu_plugin_insn *insn, uint64_t *counter, uint64_t imm)
{
    if (insn->ops == MAX_OPS) {
        abort();
    }
    insn->counter[insn->ops] = counter;
    insn->imm[insn->ops++] = imm;
}
#endif

#if HOST_API == 1
enum { MIN_VERSION = 0, CUR_VERSION = 1 };
EXPORT void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn, int op, void *ptr,
                                                       uint64_t imm)
{
    (void)op;
    add_op(insn, ptr, imm);
}
#elif HOST_API == 2
enum { MIN_VERSION = 2, CUR_VERSION = 4 };
EXPORT struct qemu_plugin_scoreboard *qemu_plugin_scoreboard_new(size_t element_size)
{
    return element_size <= sizeof(struct qemu_plugin_scoreboard) ? calloc(1, sizeof(struct qemu_plugin_scoreboard))
                                                                  : NULL;
}
EXPORT void qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(struct qemu_plugin_insn *insn, int op,
                                                                qemu_plugin_u64 entry, uint64_t imm)
{
    (void)op;
    add_op(insn, (uint64_t *)(void *)(entry.score->data + entry.offset), imm);
}
EXPORT uint64_t qemu_plugin_u64_sum(qemu_plugin_u64 entry)
{
    uint64_t value;
    memcpy(&value, entry.score->data + entry.offset, sizeof(value));
    return value;
}
#else
enum { MIN_VERSION = 0, CUR_VERSION = 1 };
#endif

/* The guest: code at 0x10 and 0x20 (3 and 4 instructions), bench_begin at 0x100 and bench_end
 * at 0x200 (one `bx lr` each), and a last block at 0x30; the trace runs them in this order. */
static const uint64_t block_start[] = {0x10, 0x100, 0x20, 0x200, 0x30};
static const size_t block_length[] = {3, 1, 4, 1, 1};
static const int trace[] = {0, 1, 2, 3, 1, 2, 2, 3, 4};
static struct qemu_plugin_tb blocks[5];

static void make_blocks(void)
{
    for (size_t b = 0; b < 5; b++) {
        blocks[b].n = block_length[b];
        for (size_t i = 0; i < block_length[b]; i++) {
            blocks[b].insn[i].vaddr = block_start[b] + 2 * i;
        }
    }
}

int main(int argc, char **argv)
{
    qemu_info_t info = {"arm", {MIN_VERSION, CUR_VERSION}, 1};
    void *plugin = argc > 1 ? dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) : NULL;
    if (plugin == NULL) {
        fprintf(stderr, "cannot load the plugin: %s\n", dlerror());
        return 1;
    }
    const int *version = dlsym(plugin, "qemu_plugin_version");
    void *install_symbol = dlsym(plugin, "qemu_plugin_install");
    int (*install)(qemu_plugin_id_t, const qemu_info_t *, int, char **) = NULL;
    memcpy(&install, &install_symbol, sizeof(install)); /* POSIX: a function's address as void * */
    printf("version %d\n", version ? *version : -1);
    if (version == NULL || *version < MIN_VERSION || *version > CUR_VERSION || install == NULL) {
        fprintf(stderr, "plugin requires API version %d, this host accepts %d to %d\n", version ? *version : -1,
                MIN_VERSION, CUR_VERSION);
        return 2;
    }
    if (install(1, &info, argc - 2, argv + 2) != 0) {
        return 3;
    }
    make_blocks();
    for (size_t t = 0; t < sizeof(trace) / sizeof(trace[0]); t++) {
        struct qemu_plugin_tb *tb = &blocks[trace[t]];
        if (!tb->translated) {
            on_translate(1, tb);
            tb->translated = 1;
        }
        for (size_t i = 0; i < tb->n; i++) {
            struct qemu_plugin_insn *insn = &tb->insn[i];
            if (insn->cb) {
                insn->cb(0, insn->userdata);
            }
            for (int k = 0; k < insn->ops; k++) {
                *insn->counter[k] += insn->imm[k];
            }
        }
    }
    on_exit(1, exit_userdata);
    return 0;
}
