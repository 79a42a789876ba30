/*
 * qemu_insn_plugin.c -- exact guest instruction counts for edgec benchmarks (QEMU TCG plugin).
 * Built on the host:
 *     gcc -shared -fPIC -O2 -o libedgec_insn.so qemu_insn_plugin.c
 * Run:
 *     qemu-system-arm ... -plugin ./libedgec_insn.so,begin=0xADDR,end=0xADDR,out=PATH
 *                         [,begin_size=N,end_size=N,pcs=PATH,timing=PATH]
 * begin/end are the (even) addresses of bench_begin()/bench_end(), sizes their byte lengths
 * (default 2: a single 16-bit `bx lr`). pcs=PATH also writes how often each instruction address
 * ran (`edgec bench --profile` sums them per function). timing=PATH (a table written by
 * edgec.timing) also estimates cycles with a model of the core and its memory system (see "The
 * cycle model" below); the instruction counts are the same with or without it.
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
 * included), then one "begin C" or "end C" line per marker entry, in execution order. With
 * timing=PATH, "cycles N" (modelled cycles, markers included) and "untimed N" (executed
 * instructions missing from the table) follow "total", and each marker line ends with the
 * modelled cycles of the counted instructions so far: "begin C CYCLES". The guest
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

enum qemu_plugin_cb_flags {
    QEMU_PLUGIN_CB_NO_REGS,
    QEMU_PLUGIN_CB_R_REGS,
    QEMU_PLUGIN_CB_RW_REGS
};
enum qemu_plugin_op {
    QEMU_PLUGIN_INLINE_ADD_U64
};

typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

/* In every API version this plugin supports. */
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
void qemu_plugin_outs(const char *string);

/* API version 1 only. */
#define WEAK __attribute__((weak))
WEAK void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn, enum qemu_plugin_op op, void *ptr,
                                                     uint64_t imm);
/* API version 2 on. */
WEAK struct qemu_plugin_scoreboard *qemu_plugin_scoreboard_new(size_t element_size);
WEAK void qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(struct qemu_plugin_insn *insn, enum qemu_plugin_op op,
                                                              qemu_plugin_u64 entry, uint64_t imm);
WEAK uint64_t qemu_plugin_u64_sum(qemu_plugin_u64 entry);
/* Used only with timing=PATH (the cycle model, below); weak like the others, so that a host
 * without them still loads the plugin for plain counting. Unchanged from API version 1 on. */
typedef uint32_t qemu_plugin_meminfo_t;
enum qemu_plugin_mem_rw {
    QEMU_PLUGIN_MEM_R = 1,
    QEMU_PLUGIN_MEM_W,
    QEMU_PLUGIN_MEM_RW
};
typedef void (*qemu_plugin_vcpu_mem_cb_t)(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr,
                                          void *userdata);
WEAK void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_mem_cb_t cb,
                                           enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw, void *userdata);
WEAK size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);

#define PLUGIN_EXPORT __attribute__((visibility("default")))
enum {
    API_PLAIN_COUNTERS = 1,
    API_SCOREBOARDS = 2
};
PLUGIN_EXPORT int qemu_plugin_version = API_PLAIN_COUNTERS;

static int scoreboard_api_present(void)
{
    return qemu_plugin_scoreboard_new != NULL && qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu != NULL &&
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
        qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(insn, QEMU_PLUGIN_INLINE_ADD_U64, c.entry, 1);
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

enum {
    MARKER_BEGIN,
    MARKER_END,
    MARKER_COUNT
};

typedef struct {
    const char *label;
    uint64_t count;
    uint64_t cycles; /* with timing=PATH: the modelled cycles of the counted instructions so far */
} marker_event;

static marker markers[MARKER_COUNT] = {
    { UINT64_MAX, 2, "begin" },
    { UINT64_MAX, 2, "end" },
};
enum {
    COUNTED_INSNS,
    MARKER_INSNS,
    TOTALS
};
static counter_block totals; /* all instructions outside / inside the marker functions */
static counter counted_insns;
static counter marker_insns;
static const char *out_path;
static const char *pcs_path; /* pcs=PATH: also count every instruction address (a profile) */
static marker_event *events;
static size_t event_count;
static size_t event_capacity;

static int append_event(const char *label, uint64_t count, uint64_t cycles)
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
    events[event_count].cycles = cycles;
    ++event_count;
    return 0;
}

/* Per-address counters for pcs=PATH, in chunks that never move (inline ops refer to them). A
 * block translated twice gets two counters per address; the reader sums them. */
enum {
    PC_CHUNK = 4096
};
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
    if (append_event(m->label, counter_value(counted_insns), 0) != 0) {
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

/* ---- The cycle model (timing=PATH) ----
 * edgec.timing decodes the program (objdump; QEMU 7.2's Capstone 4 cannot disassemble Helium)
 * and writes PATH: "param NAME VALUE" lines (the core's rules and the memory system), then one
 * "ADDRESS SIZE KIND CYCLES DST SRC ADDR" line per instruction. The costs and their Technical
 * Reference Manual sources are written down in ONE place, edgec/timing.py (COSTS, CORES, MEMORY;
 * docs/timing-model.md is generated from it); this file only applies them to the executed
 * stream. An instruction's cost is settled when the next one starts: only then is it known
 * whether it branched (next address != address + size). Cycles of marker instructions are
 * tallied apart, like their instruction counts. Single vCPU (the boards have one). */
enum insn_kind {
    KIND_ALU,
    KIND_LOAD,
    KIND_STORE,
    KIND_MULTI,
    KIND_BRANCH,
    KIND_DIV,
    KIND_MAC,
    KIND_VMEM,
    KIND_VALU,
    KIND_VMAC,
    KIND_LOOP_END,
    KIND_LOOP_START
};

typedef struct {
    uint64_t address;
    uint32_t size;
    uint32_t kind;
    uint32_t cycles;
    uint32_t dst;  /* registers written, bit i = ri */
    uint32_t src;  /* registers read */
    uint32_t addr; /* registers forming the address */
} timed_insn;

typedef struct {
    uint64_t refill, load_pipelining, load_use_stall, dual_issue, beat_overlap;
    uint64_t flash_start, flash_end, flash_wait, icache_lines, dcache_lines, prefetch, line_bytes;
    uint64_t icache_ways, dcache_ways; /* set-associative, LRU (1: direct-mapped) */
    uint64_t unified;                  /* constants read from flash go through the instruction cache */
    uint64_t free_fetch;               /* instruction fetches never stall (a sensitivity bound) */
} timing_params;

/* A set-associative cache of line tags (line number + 1, 0: empty); each set's ways are kept
 * most recently used first. */
typedef struct {
    uint64_t *tags;
    uint64_t lines, ways;
} cache;

/* One translated instruction: its timing and, for a marker's first instruction, the marker. */
typedef struct {
    const timed_insn *timing;
    const marker *entered;
    int in_marker;
    int untimed; /* missing from the table: charged 1 cycle */
} exec_site;

enum {
    SITE_CHUNK = 4096,
    PC_REGISTER = 15
};
typedef struct site_chunk {
    struct site_chunk *next;
    size_t used;
    exec_site sites[SITE_CHUNK];
    timed_insn untimed[SITE_CHUNK]; /* for addresses missing from the table */
} site_chunk;

static const char *timing_path;
static timing_params params;
static timed_insn *table;
static size_t table_size;
static site_chunk *site_chunks;

static struct {
    uint64_t cycles[2];    /* [0]: counted instructions, [1]: marker instructions */
    uint64_t untimed;      /* executed instructions missing from the table (cost 1) */
    const exec_site *prev; /* the instruction whose cost is not settled yet */
    int prev_paired;       /* dual issue: prev issued with the one before it */
    int prev_cached_loop;  /* prev is a loop end the loop cache held */
    uint64_t loop_end;     /* the loop end the loop cache holds */
    uint64_t fetch_line;   /* the flash line of the last instruction fetched */
    uint64_t prefetch_line, prefetch_ready;
    cache icache, dcache;
} t;

static uint64_t now(void)
{
    return t.cycles[0] + t.cycles[1];
}

static int by_address(const void *a, const void *b)
{
    const uint64_t x = ((const timed_insn *)a)->address, y = ((const timed_insn *)b)->address;
    return x < y ? -1 : x > y;
}

static int set_param(const char *name, uint64_t value)
{
    static const struct {
        const char *name;
        size_t offset;
    } known[] = {
#define PARAM(field) { #field, offsetof(timing_params, field) }
        PARAM(refill),       PARAM(load_pipelining), PARAM(load_use_stall), PARAM(dual_issue),
        PARAM(beat_overlap), PARAM(flash_start),     PARAM(flash_end),      PARAM(flash_wait),
        PARAM(icache_lines), PARAM(dcache_lines),    PARAM(prefetch),       PARAM(line_bytes),
        PARAM(icache_ways),  PARAM(dcache_ways),     PARAM(unified),        PARAM(free_fetch),
#undef PARAM
    };
    size_t i;
    for (i = 0; i < sizeof(known) / sizeof(known[0]); ++i) {
        if (strcmp(name, known[i].name) == 0) {
            memcpy((char *)&params + known[i].offset, &value, sizeof(value));
            return 0;
        }
    }
    return -1;
}

/* An empty cache of `lines` tags in sets of `ways` (0 lines: no cache). Returns 0, or -1. */
static int cache_init(cache *c, uint64_t lines, uint64_t ways)
{
    c->lines = lines;
    c->ways = ways;
    if (!lines) {
        return 0;
    }
    if (!ways || lines % ways) {
        return -1;
    }
    c->tags = calloc(lines, sizeof(uint64_t));
    return c->tags ? 0 : -1;
}

/* Reads timing_path into params and table. Returns 0, or -1 with a message. */
static int load_timing(void)
{
    FILE *f = fopen(timing_path, "r");
    char line[256];
    size_t capacity = 0;
    if (!f) {
        return -1;
    }
    params.line_bytes = 16;
    params.icache_ways = params.dcache_ways = 1;
    while (fgets(line, sizeof(line), f)) {
        char name[64];
        uint64_t value;
        timed_insn insn;
        unsigned long long address;
        unsigned size, kind, cycles, dst, src, addr;
        if (sscanf(line, "param %63s %" SCNu64, name, &value) == 2) {
            if (set_param(name, value) != 0) {
                fclose(f);
                return -1;
            }
            continue;
        }
        if (sscanf(line, "%llx %u %u %u %x %x %x", &address, &size, &kind, &cycles, &dst, &src, &addr) != 7) {
            fclose(f);
            return -1;
        }
        if (table_size == capacity) {
            timed_insn *grown;
            capacity = capacity ? 2 * capacity : 4096;
            grown = realloc(table, capacity * sizeof(*grown));
            if (!grown) {
                fclose(f);
                return -1;
            }
            table = grown;
        }
        insn.address = address;
        insn.size = size;
        insn.kind = kind;
        insn.cycles = cycles;
        insn.dst = dst;
        insn.src = src;
        insn.addr = addr;
        table[table_size++] = insn;
    }
    fclose(f);
    qsort(table, table_size, sizeof(*table), by_address);
    if (params.line_bytes == 0) {
        return -1;
    }
    return cache_init(&t.icache, params.icache_lines, params.icache_ways) ||
                   cache_init(&t.dcache, params.dcache_lines, params.dcache_ways)
               ? -1
               : 0;
}

static const timed_insn *timing_of(uint64_t vaddr)
{
    size_t lo = 0, hi = table_size;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (table[mid].address < vaddr) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < table_size && table[lo].address == vaddr ? &table[lo] : NULL;
}

/* A new site for an instruction at vaddr, or NULL (out of memory). */
static exec_site *new_site(struct qemu_plugin_insn *insn, uint64_t vaddr)
{
    exec_site *site;
    if (!site_chunks || site_chunks->used == SITE_CHUNK) {
        site_chunk *chunk = calloc(1, sizeof(*chunk));
        if (!chunk) {
            return NULL;
        }
        chunk->next = site_chunks;
        site_chunks = chunk;
    }
    site = &site_chunks->sites[site_chunks->used];
    site->timing = timing_of(vaddr);
    if (!site->timing) {
        timed_insn *untimed = &site_chunks->untimed[site_chunks->used];
        untimed->address = vaddr;
        untimed->size = qemu_plugin_insn_size ? (uint32_t)qemu_plugin_insn_size(insn) : 2;
        untimed->kind = KIND_ALU;
        untimed->cycles = 1;
        untimed->dst = untimed->src = untimed->addr = 0;
        site->timing = untimed;
        site->untimed = 1;
    }
    ++site_chunks->used;
    return site;
}

static int in_flash(uint64_t vaddr)
{
    return params.flash_wait > 0 && vaddr >= params.flash_start && vaddr < params.flash_end;
}

/* Looks `line` up in `c` and makes it the most recently used of its set (inserting it on a miss,
 * over the least recently used). 1 on a hit. */
static int cache_lookup(cache *c, uint64_t line)
{
    uint64_t *set, way, found;
    if (!c->lines) {
        return 0;
    }
    set = &c->tags[(line % (c->lines / c->ways)) * c->ways];
    for (found = 0; found < c->ways && set[found] != line + 1; ++found) {
    }
    for (way = found < c->ways ? found : c->ways - 1; way > 0; --way) {
        set[way] = set[way - 1];
    }
    set[0] = line + 1;
    return found < c->ways;
}

/* Stall cycles of fetching instruction line `line` from flash: 0 on a cache hit; the rest of the
 * prefetch's wait when the prefetcher is already reading it; else the wait states. Starts the
 * prefetch of the next line. */
static uint64_t fetch_stall(uint64_t line)
{
    uint64_t stall;
    if (cache_lookup(&t.icache, line) || params.free_fetch) {
        stall = 0;
    } else if (params.prefetch && line == t.prefetch_line) {
        stall = t.prefetch_ready > now() ? t.prefetch_ready - now() : 0;
    } else {
        stall = params.flash_wait;
    }
    if (params.prefetch && t.prefetch_line != line + 1) {
        t.prefetch_line = line + 1;
        t.prefetch_ready = now() + stall + params.flash_wait;
    }
    return stall;
}

static int is_vector(uint32_t kind)
{
    return kind == KIND_VMEM || kind == KIND_VALU || kind == KIND_VMAC;
}

static int is_memory(uint32_t kind)
{
    return kind == KIND_LOAD || kind == KIND_STORE || kind == KIND_MULTI;
}

/* Dual issue (the M7 approximation): can `second` issue in the cycle of `first`? */
static int pairs(const timed_insn *first, const timed_insn *second)
{
    const uint32_t single = (1u << KIND_ALU) | (1u << KIND_LOAD) | (1u << KIND_STORE) | (1u << KIND_MAC);
    if (!(single >> first->kind & 1) || !((single | 1u << KIND_BRANCH) >> second->kind & 1)) {
        return 0;
    }
    if ((first->dst >> PC_REGISTER & 1) || (second->src & first->dst)) {
        return 0;
    }
    if (is_memory(first->kind) && is_memory(second->kind)) {
        return 0;
    }
    return !(first->kind == KIND_MAC && second->kind == KIND_MAC);
}

/* The cycles `cur` takes given the instruction before it (`prev`, NULL at the start), without
 * the refill of a branch it may take; updates the pairing/overlap/loop-cache state. */
static uint64_t issue_cycles(const timed_insn *prev, const timed_insn *cur, int prev_taken)
{
    uint64_t cycles = cur->cycles;
    int paired = 0;
    t.prev_cached_loop = 0;
    if (cur->kind == KIND_LOOP_END) {
        t.prev_cached_loop = t.loop_end == cur->address;
        cycles = t.prev_cached_loop ? 0 : cur->cycles;
        t.loop_end = cur->address;
    }
    if (prev && !prev_taken) {
        if (params.load_pipelining && prev->kind == KIND_LOAD && !(prev->dst >> PC_REGISTER & 1) &&
            (cur->kind == KIND_LOAD || cur->kind == KIND_STORE) && !(cur->addr & prev->dst) && cycles > 1) {
            cycles -= 1;
        }
        if (params.dual_issue && !t.prev_paired && pairs(prev, cur)) {
            cycles = 0;
            paired = 1;
        }
        if (params.beat_overlap && is_vector(prev->kind) && is_vector(cur->kind) && prev->kind != cur->kind &&
            cycles > 1) {
            cycles -= 1;
        }
    }
    if (prev && params.load_use_stall && prev->kind == KIND_LOAD &&
        ((cur->kind == KIND_STORE ? cur->addr : cur->src) & prev->dst)) { /* a store's data is read late */
        cycles += params.load_use_stall;
    }
    t.prev_paired = paired;
    return cycles;
}

static void charge(const exec_site *site, uint64_t cycles)
{
    t.cycles[site->in_marker] += cycles;
}

/* Settles the previous instruction: adds the refill when `next` does not follow it, i.e. it
 * branched -- except a loop end the loop cache held. Returns whether it branched. */
static int settle_previous(const timed_insn *next)
{
    const timed_insn *prev;
    uint64_t refill;
    if (!t.prev) {
        return 0;
    }
    prev = t.prev->timing;
    if (next->address == prev->address + prev->size) {
        return 0;
    }
    if (prev->kind == KIND_LOOP_END && t.prev_cached_loop) {
        return 1;
    }
    refill = params.refill;
    if (next->size == 4 && (next->address & 2)) {
        refill += 1; /* a 32-bit target straddling a word needs one more fetch */
    }
    charge(t.prev, refill);
    return 1;
}

/* Runs before every instruction. */
static void on_exec(unsigned int vcpu_index, void *userdata)
{
    const exec_site *site = userdata;
    const timed_insn *cur = site->timing;
    const int taken = settle_previous(cur);
    (void)vcpu_index;
    if (site->entered && append_event(site->entered->label, counter_value(counted_insns), t.cycles[0]) != 0) {
        qemu_plugin_outs("edgec insn plugin: out of memory, marker event dropped\n");
    }
    t.untimed += (uint64_t)site->untimed;
    if (in_flash(cur->address)) { /* the fetch comes first */
        const uint64_t line = cur->address / params.line_bytes;
        if (line != t.fetch_line) {
            charge(site, fetch_stall(line));
            t.fetch_line = line;
        }
    } else {
        t.fetch_line = UINT64_MAX;
    }
    charge(site, issue_cycles(t.prev ? t.prev->timing : NULL, cur, taken));
    t.prev = site;
}

/* Runs after a load: constants read from flash miss the data cache at the wait states' cost.
 * Registered for reads and writes (QEMU_PLUGIN_MEM_RW): QEMU 7.2 does not call a read-only
 * (QEMU_PLUGIN_MEM_R) callback for single LDRs; stores never reach flash, so they cost nothing. */
static void on_data_read(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr, void *userdata)
{
    const exec_site *site = userdata;
    (void)vcpu_index;
    (void)info;
    if (in_flash(vaddr) && !cache_lookup(params.unified ? &t.icache : &t.dcache, vaddr / params.line_bytes)) {
        charge(site, params.flash_wait);
    }
}

/* Instruments one instruction for the cycle model; `m` is the marker containing it, if any. */
static void time_instruction(struct qemu_plugin_insn *insn, uint64_t vaddr, const marker *m)
{
    exec_site *site = new_site(insn, vaddr);
    if (!site) {
        qemu_plugin_outs("edgec insn plugin: out of memory, instruction not timed\n");
        return;
    }
    site->in_marker = m != NULL;
    site->entered = m && vaddr == m->address ? m : NULL;
    qemu_plugin_register_vcpu_insn_exec_cb(insn, on_exec, QEMU_PLUGIN_CB_NO_REGS, site);
    if (params.flash_wait && qemu_plugin_register_vcpu_mem_cb &&
        (site->timing->kind == KIND_LOAD || site->timing->kind == KIND_MULTI || site->timing->kind == KIND_VMEM)) {
        qemu_plugin_register_vcpu_mem_cb(insn, on_data_read, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, site);
    }
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
        if (timing_path) {
            time_instruction(insn, vaddr, m);
        }
        if (!m) {
            count_executions(insn, counted_insns);
            continue;
        }
        count_executions(insn, marker_insns);
        if (vaddr == m->address && !timing_path) { /* with timing, on_exec records the entry */
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_marker_entry, QEMU_PLUGIN_CB_NO_REGS, (void *)m);
        }
    }
}

static void write_results(FILE *f)
{
    size_t i;
    fprintf(f, "total %" PRIu64 "\n", counter_value(counted_insns) + counter_value(marker_insns));
    if (timing_path) { /* the last instruction ran to the end: nothing left to settle */
        fprintf(f, "cycles %" PRIu64 "\nuntimed %" PRIu64 "\n", now(), t.untimed);
    }
    for (i = 0; i < event_count; ++i) {
        if (timing_path) {
            fprintf(f, "%s %" PRIu64 " %" PRIu64 "\n", events[i].label, events[i].count, events[i].cycles);
        } else {
            fprintf(f, "%s %" PRIu64 "\n", events[i].label, events[i].count);
        }
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
        snprintf(message, sizeof(message), "edgec insn plugin: cannot write %s: %s\n", out_path, strerror(errno));
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
    if (KEY_IS("timing")) {
        timing_path = value;
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

PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    int i;
    if (qemu_plugin_version == API_PLAIN_COUNTERS && !qemu_plugin_register_vcpu_insn_exec_inline) {
        char message[256];
        snprintf(message, sizeof(message),
                 "edgec insn plugin: unsupported QEMU plugin API (versions "
                 "%d to %d): it has neither plain-counter (version 1) nor scoreboard (version 2) "
                 "inline operations\n",
                 info->version.min, info->version.cur);
        qemu_plugin_outs(message);
        return -1;
    }
    for (i = 0; i < argc; ++i) {
        if (parse_arg(argv[i]) != 0) {
            char message[512];
            snprintf(message, sizeof(message),
                     "edgec insn plugin: bad argument '%s' (expected "
                     "begin=ADDR,end=ADDR,out=PATH[,begin_size=N,end_size=N,pcs=PATH,timing=PATH])\n",
                     argv[i]);
            qemu_plugin_outs(message);
            return -1;
        }
    }
    if (!out_path) {
        qemu_plugin_outs("edgec insn plugin: missing out=PATH\n");
        return -1;
    }
    if (timing_path && load_timing() != 0) {
        char message[512];
        snprintf(message, sizeof(message), "edgec insn plugin: cannot read the timing table %s\n", timing_path);
        qemu_plugin_outs(message);
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
