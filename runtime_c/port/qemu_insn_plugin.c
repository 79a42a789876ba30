/*
 * qemu_insn_plugin.c -- exact guest instruction counts for edgec benchmarks (QEMU TCG plugin,
 * plugin API version 1 as in QEMU 7.2). Built on the host:
 *     gcc -shared -fPIC -O2 -o libedgec_insn.so qemu_insn_plugin.c
 * Run:
 *     qemu-system-arm ... -plugin ./libedgec_insn.so,begin=0xADDR,end=0xADDR,out=PATH
 *                         [,begin_size=N,end_size=N,pcs=PATH]
 * begin/end are the (even) addresses of bench_begin()/bench_end(), sizes their byte lengths
 * (default 2: a single 16-bit `bx lr`). pcs=PATH also writes how often each instruction address
 * ran (`edgec bench --profile` sums them per function).
 *
 * What is counted: every executed guest instruction gets an inline counter increment placed
 * before it, so counts are exact (not sampled, not per-block estimates) and identical run to
 * run. Instructions inside the two marker functions are tallied apart. On each entry to a marker
 * the plugin records the count of non-marker instructions executed so far. Hence for one
 * bench_begin()/bench_end() pair, end - begin is the number of instructions executed after
 * bench_begin returned, up to and including the branch into bench_end -- the measured code plus
 * the call site of bench_end (typically `movs r0, #id` and `bl`: 2 instructions); no instruction
 * of the marker bodies is included.
 *
 * Output, written to `out` when QEMU exits: "total N" (every executed instruction, markers
 * included), then one "begin C" or "end C" line per marker entry, in execution order. The guest
 * cannot pass the marker's id here (API version 1 cannot read registers): the i-th begin/end pair
 * is the i-th region the program bracketed.
 *
 * The API is declared here rather than taken from QEMU's qemu-plugin.h, which is not installed;
 * the declarations match QEMU 7.2's header.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The subset of QEMU 7.2's plugin API used here ---- */
typedef uint64_t qemu_plugin_id_t;
struct qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;

enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };

typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn,
                                                enum qemu_plugin_op op, void *ptr, uint64_t imm);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
                                            qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb,
                                    void *userdata);
void qemu_plugin_outs(const char *string);

#define PLUGIN_EXPORT __attribute__((visibility("default")))
PLUGIN_EXPORT int qemu_plugin_version = 1;

/* ---- State (the boards are single-core, so plain counters are exact) ---- */
typedef struct {
    uint64_t address;
    uint64_t size;
    const char *label;
} marker;

enum { MARKER_BEGIN, MARKER_END, MARKER_COUNT };

typedef struct {
    const char *label;
    uint64_t count;
} marker_event;

static marker markers[MARKER_COUNT] = {
    {UINT64_MAX, 2, "begin"},
    {UINT64_MAX, 2, "end"},
};
static uint64_t counted_insns;  /* all instructions outside the marker functions */
static uint64_t marker_insns;   /* instructions inside the marker functions */
static const char *out_path;
static const char *pcs_path;    /* pcs=PATH: also count every instruction address (a profile) */
static marker_event *events;
static size_t event_count;
static size_t event_capacity;

static int append_event(const char *label, uint64_t count)
{
    if (event_count == event_capacity) {
        const size_t capacity = event_capacity ? 2 * event_capacity : 1024;
        marker_event *grown = realloc(events, capacity * sizeof(*grown));
        if (!grown) {
            return -1;
        }
        events = grown;
        event_capacity = capacity;
    }
    events[event_count].label = label;
    events[event_count].count = count;
    ++event_count;
    return 0;
}

/* Per-address counters for pcs=PATH, in chunks that never move (inline ops hold pointers). A
 * block translated twice gets two counters per address; the reader sums them. */
enum { PC_CHUNK = 4096 };
typedef struct {
    uint64_t vaddr;
    uint64_t count;
} pc_count;
typedef struct pc_chunk {
    struct pc_chunk *next;
    size_t used;
    pc_count entries[PC_CHUNK];
} pc_chunk;
static pc_chunk *pc_chunks;

static uint64_t *pc_counter(uint64_t vaddr)
{
    if (!pc_chunks || pc_chunks->used == PC_CHUNK) {
        pc_chunk *chunk = calloc(1, sizeof(*chunk));
        if (!chunk) {
            return NULL;
        }
        chunk->next = pc_chunks;
        pc_chunks = chunk;
    }
    pc_count *entry = &pc_chunks->entries[pc_chunks->used++];
    entry->vaddr = vaddr;
    return &entry->count;
}

/* Runs before the first instruction of a marker; that instruction is not in counted_insns. */
static void on_marker_entry(unsigned int vcpu_index, void *userdata)
{
    const marker *m = userdata;
    (void)vcpu_index;
    if (append_event(m->label, counted_insns) != 0) {
        qemu_plugin_outs("edgec insn plugin: out of memory, marker event dropped\n");
    }
}

static const marker *marker_containing(uint64_t vaddr)
{
    int i;
    for (i = 0; i < MARKER_COUNT; ++i) {
        if (vaddr >= markers[i].address && vaddr - markers[i].address < markers[i].size) {
            return &markers[i];
        }
    }
    return NULL;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    const size_t n = qemu_plugin_tb_n_insns(tb);
    size_t i;
    (void)id;
    for (i = 0; i < n; ++i) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        const uint64_t vaddr = qemu_plugin_insn_vaddr(insn);
        const marker *m = marker_containing(vaddr);
        uint64_t *counter = pcs_path ? pc_counter(vaddr) : NULL;
        if (counter) {
            qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, counter, 1);
        }
        if (!m) {
            qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64,
                                                       &counted_insns, 1);
            continue;
        }
        qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64,
                                                   &marker_insns, 1);
        if (vaddr == m->address) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_marker_entry, QEMU_PLUGIN_CB_NO_REGS,
                                                   (void *)m);
        }
    }
}

static void write_results(FILE *f)
{
    size_t i;
    fprintf(f, "total %" PRIu64 "\n", counted_insns + marker_insns);
    for (i = 0; i < event_count; ++i) {
        fprintf(f, "%s %" PRIu64 "\n", events[i].label, events[i].count);
    }
}

/* "ADDRESS COUNT" lines, one per counter that ran. */
static void write_pcs(void)
{
    FILE *f = fopen(pcs_path, "w");
    const pc_chunk *chunk;
    size_t i;
    if (!f) {
        qemu_plugin_outs("edgec insn plugin: cannot write the pcs file\n");
        return;
    }
    for (chunk = pc_chunks; chunk; chunk = chunk->next) {
        for (i = 0; i < chunk->used; ++i) {
            if (chunk->entries[i].count) {
                fprintf(f, "%#" PRIx64 " %" PRIu64 "\n", chunk->entries[i].vaddr, chunk->entries[i].count);
            }
        }
    }
    fclose(f);
}

static void on_qemu_exit(qemu_plugin_id_t id, void *userdata)
{
    FILE *f;
    (void)id;
    (void)userdata;
    f = fopen(out_path, "w");
    if (!f) {
        char message[512];
        snprintf(message, sizeof(message), "edgec insn plugin: cannot write %s: %s\n", out_path,
                 strerror(errno));
        qemu_plugin_outs(message);
        return;
    }
    write_results(f);
    fclose(f);
    if (pcs_path) {
        write_pcs();
    }
    free(events);
    events = NULL;
}

static int parse_u64(const char *text, uint64_t *value)
{
    char *end;
    errno = 0;
    *value = strtoull(text, &end, 0);
    return (errno != 0 || end == text || *end != '\0') ? -1 : 0;
}

/* One "key=value" plugin argument. Returns 0 if understood. */
static int parse_arg(const char *arg)
{
    const char *eq = strchr(arg, '=');
    const char *value;
    size_t key_len;
    if (!eq) {
        return -1;
    }
    key_len = (size_t)(eq - arg);
    value = eq + 1;
#define KEY_IS(name) (key_len == strlen(name) && strncmp(arg, name, key_len) == 0)
    if (KEY_IS("out")) {
        out_path = value;
        return 0;
    }
    if (KEY_IS("pcs")) {
        pcs_path = value;
        return 0;
    }
    if (KEY_IS("begin")) {
        return parse_u64(value, &markers[MARKER_BEGIN].address);
    }
    if (KEY_IS("end")) {
        return parse_u64(value, &markers[MARKER_END].address);
    }
    if (KEY_IS("begin_size")) {
        return parse_u64(value, &markers[MARKER_BEGIN].size);
    }
    if (KEY_IS("end_size")) {
        return parse_u64(value, &markers[MARKER_END].size);
    }
#undef KEY_IS
    return -1;
}

PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const struct qemu_info_t *info,
                                      int argc, char **argv)
{
    int i;
    (void)info;
    for (i = 0; i < argc; ++i) {
        if (parse_arg(argv[i]) != 0) {
            char message[512];
            snprintf(message, sizeof(message), "edgec insn plugin: bad argument '%s' (expected "
                     "begin=ADDR,end=ADDR,out=PATH[,begin_size=N,end_size=N,pcs=PATH])\n", argv[i]);
            qemu_plugin_outs(message);
            return -1;
        }
    }
    if (!out_path) {
        qemu_plugin_outs("edgec insn plugin: missing out=PATH\n");
        return -1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_qemu_exit, NULL);
    return 0;
}
