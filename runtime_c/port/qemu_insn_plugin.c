/*
 * qemu_insn_plugin.c -- exact guest instruction counts for edgec benchmarks (QEMU TCG plugin).
 * Built on the host:
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
 * does not pass the marker's id here: the i-th begin/end pair is the i-th region the program
 * bracketed.
 *
 * QEMU versions. QEMU loads a plugin only if its exported qemu_plugin_version lies in the range
 * [QEMU_PLUGIN_MIN_VERSION, QEMU_PLUGIN_VERSION] of that QEMU build (plugins/loader.c), and the
 * inline counter API changed on the way:
 *   - API version 1 (QEMU 5.x to 8.2, min 0, current 1 -- Debian 12's QEMU 7.2): an inline op
 *     adds to a plain uint64_t (qemu_plugin_register_vcpu_insn_exec_inline);
 *   - API version 2 (QEMU 9.0 on, min 2, current 2 in 9.0, 3 in 9.1, 4 in 9.2): that call is
 *     gone; inline ops add to a per-vCPU scoreboard entry (qemu_plugin_scoreboard_new,
 *     qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu, qemu_plugin_u64_sum).
 * No single version number is accepted by both (7.2 refuses 2, 9.x refuses 1), so the plugin
 * refers to the version-specific functions as weak symbols (NULL where the loading QEMU lacks
 * them: QEMU opens plugins with RTLD_NOW, which would refuse a plain unresolved reference), and a
 * constructor, which runs inside dlopen before QEMU reads qemu_plugin_version, declares 2 when
 * the scoreboard API is there and 1 otherwise. A QEMU with neither makes qemu_plugin_install
 * fail with one line; a QEMU whose minimum version is above 2 refuses the plugin with its own
 * one-line message, which edgec (edgec.toolchain) reports as an unsupported QEMU.
 *
 * The API is declared here rather than taken from QEMU's include/qemu/qemu-plugin.h because no
 * QEMU package of this system installs that header (Debian 12's qemu-system-common, -arm and
 * -data ship none). The declarations below are the subset used, with the types, enum values
 * and signatures of that header in the releases above.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The subset of QEMU's plugin API used here (include/qemu/qemu-plugin.h) ---- */
typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
struct qemu_plugin_scoreboard;

/* The leading fields of qemu_info_t, unchanged since the version range was added to it. */
typedef struct {
    const char *target_name;
    struct {
        int min;
        int cur;
    } version;
} qemu_info_t;

/* A uint64_t at `offset` in each vCPU's element of a scoreboard (API version 2 on). */
typedef struct {
    struct qemu_plugin_scoreboard *score;
    size_t offset;
} qemu_plugin_u64;

enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };

typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

/* In every API version this plugin supports. */
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
                                            qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb,
                                    void *userdata);
void qemu_plugin_outs(const char *string);

/* API version 1 only. */
#define WEAK __attribute__((weak))
WEAK void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn,
                                                     enum qemu_plugin_op op, void *ptr,
                                                     uint64_t imm);
/* API version 2 on. */
WEAK struct qemu_plugin_scoreboard *qemu_plugin_scoreboard_new(size_t element_size);
WEAK void qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(struct qemu_plugin_insn *insn,
                                                              enum qemu_plugin_op op,
                                                              qemu_plugin_u64 entry, uint64_t imm);
WEAK uint64_t qemu_plugin_u64_sum(qemu_plugin_u64 entry);

#define PLUGIN_EXPORT __attribute__((visibility("default")))
enum { API_PLAIN_COUNTERS = 1, API_SCOREBOARDS = 2 };
PLUGIN_EXPORT int qemu_plugin_version = API_PLAIN_COUNTERS;

static int scoreboard_api_present(void)
{
    return qemu_plugin_scoreboard_new != NULL &&
           qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu != NULL &&
           qemu_plugin_u64_sum != NULL;
}

/* Runs inside dlopen, before QEMU reads qemu_plugin_version (see the top of the file). */
__attribute__((constructor)) static void declare_api_version(void)
{
    if (scoreboard_api_present()) {
        qemu_plugin_version = API_SCOREBOARDS;
    }
}

/* ---- Counters: plain uint64_t (API version 1) or scoreboard entries (version 2 on) ---- */
typedef struct {
    uint64_t *plain;
    qemu_plugin_u64 entry;
} counter;

/* `count` counters, zero to start with. */
typedef struct {
    uint64_t *plain;
    struct qemu_plugin_scoreboard *score;
} counter_block;

static int counter_block_init(counter_block *block, size_t count)
{
    if (qemu_plugin_version == API_SCOREBOARDS) {
        block->score = qemu_plugin_scoreboard_new(count * sizeof(uint64_t));
        return block->score ? 0 : -1;
    }
    block->plain = calloc(count, sizeof(uint64_t));
    return block->plain ? 0 : -1;
}

static counter counter_at(const counter_block *block, size_t index)
{
    counter c;
    memset(&c, 0, sizeof(c));
    if (qemu_plugin_version == API_SCOREBOARDS) {
        c.entry.score = block->score;
        c.entry.offset = index * sizeof(uint64_t);
    } else {
        c.plain = &block->plain[index];
    }
    return c;
}

/* Adds 1 to `c` each time `insn` executes, before it does. */
static void count_executions(struct qemu_plugin_insn *insn, counter c)
{
    if (qemu_plugin_version == API_SCOREBOARDS) {
        qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(insn, QEMU_PLUGIN_INLINE_ADD_U64,
                                                            c.entry, 1);
    } else {
        qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, c.plain, 1);
    }
}

/* The counter's value, summed over the vCPUs (the boards have one). */
static uint64_t counter_value(counter c)
{
    return qemu_plugin_version == API_SCOREBOARDS ? qemu_plugin_u64_sum(c.entry) : *c.plain;
}

/* ---- State ---- */
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
enum { COUNTED_INSNS, MARKER_INSNS, TOTALS };
static counter_block totals;   /* all instructions outside / inside the marker functions */
static counter counted_insns;
static counter marker_insns;
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

/* Per-address counters for pcs=PATH, in chunks that never move (inline ops refer to them). A
 * block translated twice gets two counters per address; the reader sums them. */
enum { PC_CHUNK = 4096 };
typedef struct pc_chunk {
    struct pc_chunk *next;
    size_t used;
    counter_block counts;
    uint64_t vaddr[PC_CHUNK];
} pc_chunk;
static pc_chunk *pc_chunks;

/* A new counter for address vaddr, or 0 (out of memory). */
static int pc_counter(uint64_t vaddr, counter *c)
{
    if (!pc_chunks || pc_chunks->used == PC_CHUNK) {
        pc_chunk *chunk = calloc(1, sizeof(*chunk));
        if (!chunk || counter_block_init(&chunk->counts, PC_CHUNK) != 0) {
            free(chunk);
            return 0;
        }
        chunk->next = pc_chunks;
        pc_chunks = chunk;
    }
    pc_chunks->vaddr[pc_chunks->used] = vaddr;
    *c = counter_at(&pc_chunks->counts, pc_chunks->used++);
    return 1;
}

/* Runs before the first instruction of a marker; that instruction is not in counted_insns. */
static void on_marker_entry(unsigned int vcpu_index, void *userdata)
{
    const marker *m = userdata;
    (void)vcpu_index;
    if (append_event(m->label, counter_value(counted_insns)) != 0) {
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
        counter at_address;
        if (pcs_path && pc_counter(vaddr, &at_address)) {
            count_executions(insn, at_address);
        }
        if (!m) {
            count_executions(insn, counted_insns);
            continue;
        }
        count_executions(insn, marker_insns);
        if (vaddr == m->address) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_marker_entry, QEMU_PLUGIN_CB_NO_REGS,
                                                   (void *)m);
        }
    }
}

static void write_results(FILE *f)
{
    size_t i;
    fprintf(f, "total %" PRIu64 "\n", counter_value(counted_insns) + counter_value(marker_insns));
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
            const uint64_t count = counter_value(counter_at(&chunk->counts, i));
            if (count) {
                fprintf(f, "%#" PRIx64 " %" PRIu64 "\n", chunk->vaddr[i], count);
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

PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                      char **argv)
{
    int i;
    if (qemu_plugin_version == API_PLAIN_COUNTERS && !qemu_plugin_register_vcpu_insn_exec_inline) {
        char message[256];
        snprintf(message, sizeof(message), "edgec insn plugin: unsupported QEMU plugin API (versions "
                 "%d to %d): it has neither plain-counter (version 1) nor scoreboard (version 2) "
                 "inline operations\n", info->version.min, info->version.cur);
        qemu_plugin_outs(message);
        return -1;
    }
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
    if (counter_block_init(&totals, TOTALS) != 0) {
        qemu_plugin_outs("edgec insn plugin: out of memory\n");
        return -1;
    }
    counted_insns = counter_at(&totals, COUNTED_INSNS);
    marker_insns = counter_at(&totals, MARKER_INSNS);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_qemu_exit, NULL);
    return 0;
}
