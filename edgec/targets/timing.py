"""Cycle estimates for `edgec bench`: a Cortex-M timing model run by edgec's QEMU plugin.

QEMU has no timing model; it executes instructions. edgec's plugin (runtime_c/port/
qemu_insn_plugin.c) counts them exactly and, given a timing table, also charges each executed
instruction the cycles this module assigns it, plus the dynamic effects the plugin sees in the
executed stream: taken branches (the next executed address is not pc + size), load/store
pipelining, load-use stalls, dual issue, Helium beat overlap, the low-overhead-loop cache, and
flash wait states behind an ART-like cache and prefetcher.

The static part is decoded here, from the ELF's disassembly (arm-none-eabi-objdump), not in the
plugin: QEMU 7.2 disassembles through Capstone 4, which knows neither Helium (MVE) nor the
low-overhead-loop instructions (it prints `ldc`/`cdp`/`.byte` for them), and its plugin API
gives no register values. objdump with `-m armv8.1-m.main` decodes every instruction edgec
emits. The plugin reads one line per instruction address (write_timing_table).

COSTS below is the one place every cost is written down, with its source; docs/timing-model.md
is generated from it (`python scripts/write_timing_doc.py`). These are estimates: see LEFT_OUT.
"""

from __future__ import annotations

import math
import re
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

from edgec.errors import EdgecError
from edgec.targets.cores import Target, board_memory_map

# Instruction kinds, shared with the plugin (enum insn_kind in qemu_insn_plugin.c).
ALU, LOAD, STORE, MULTI, BRANCH, DIV, MAC, VMEM, VALU, VMAC, LOOP_END, LOOP_START = range(12)
KIND_NAMES = ("alu", "load", "store", "multi", "branch", "div", "mac", "vmem", "valu", "vmac", "loop_end", "loop_start")

M4_TRM = "Cortex-M4 TRM (DDI 0439B) table 3-1, Processor instruction timings"
M4_TRM_LS = "Cortex-M4 TRM (DDI 0439B) section 3.3.2, Load/store timings"
M4_FPU_TRM = "Cortex-M4 TRM (DDI 0439B) table 7-1, FPU instruction set (VLDR 2, VLDM/VPUSH/VPOP 1+N)"
M55_BEATS = (
    "Armv8.1-M Architecture Reference Manual (DDI 0553) B5.3 beat-wise execution, and the Cortex-M55 "
    "TRM (101051) 'dual-beat' MVE: 4 beats per 128-bit instruction, 2 per cycle"
)
APPROX = "approximation (no public per-instruction table for this core)"


@dataclass(frozen=True)
class Cost:
    """Cycles of one instruction class on each core, as base + per_reg * N (N registers in the
    list; rounded up) -- the cost when the instruction does not branch and nothing overlaps."""

    name: str
    kind: int
    mnemonics: str  # regular expression over the mnemonic (condition and .w/.n stripped)
    m4: tuple[float, float] | None  # (base, per register); Cortex-M33 uses the M4 figures (see CORES);
    m7: tuple[float, float] | None  #   None: the core does not have the instruction
    m55: tuple[float, float] | None
    source: str
    operands: str = ""  # if given, a regular expression the operands must contain for this row


_DP = (
    r"adcs?|adds?|addw|adr|ands?|asrs?|bics?|bfc|bfi|clz|cmn|cmp|eors?|lsls?|lsrs?|movs?|movw|movt|mvns?|negs?|"
    r"orns?|orrs?|rbit|rev|rev16|revsh|rors?|rrxs?|rsbs?|sbcs?|sbfx|subs?|subw|teq|tst|ubfx|"
    r"[su]xt[bh]|[su]xtb16|[su]xta[bh]|[su]xtab16|pkhbt|pkhtb|sel|ssat|usat|ssat16|usat16|"
    r"[su]?q?h?(add|sub)(8|16)|[su]?q?h?(asx|sax)|q(d)?(add|sub)|usada?8|nop|it[te]{0,3}|"
    r"cps(ie|id)|mrs|msr|dmb|dsb|isb|sev|wfe|wfi|yield|bkpt|svc|udf|vmov|vmrs|vmsr|csel|csinc|csinv|csneg|"
    r"cset|csetm|cinc|cinv|cneg|sqrshr|uqrshl|sqshl|uqshl|srshr|urshr|asrl|lsll|lsrl|sqrshrl|uqrshll|"
    r"sqshll|uqshll|srshrl|urshrl|vctp(8|16|32|64)?|vpst[te]{0,3}"
)
_MUL = (
    r"muls?|mla|mls|[su]mull|[su]mlal|umaal|smul[bt][bt]|smulw[bt]|smla[bt][bt]|smlaw[bt]|smlal[bt][bt]|"
    r"smla[dl]?dx?|smlsl?dx?|smmulr?|smmlar?|smmlsr?|smuadx?|smusdx?|smlald|smlaldx|smlsld|smlsldx"
)

COSTS = (
    Cost(
        "data processing, saturating, packing, parallel add/sub, IT, VMOV",
        ALU,
        _DP,
        (1, 0),
        (1, 0),
        (1, 0),
        f"{M4_TRM}: 1 (IT may fold to 0 on the M4: charged 1)",
    ),
    Cost(
        "multiply, multiply-accumulate, long multiply, DSP multiply (SMLAD, SMLAxy...)",
        MAC,
        _MUL,
        (1, 0),
        (1, 0),
        (1, 0),
        f"{M4_TRM}: MUL/MLA/MLS 1, SMULL/UMULL/SMLAL/UMLAL 1, DSP multiplies 1",
    ),
    Cost(
        "divide SDIV/UDIV",
        DIV,
        r"[su]div",
        (7, 0),
        (7, 0),
        (7, 0),
        f"{M4_TRM}: 2 to 12, early termination on the operands' leading bits; "
        "the plugin cannot read operand values (QEMU 7.2's plugin API has no register reads): fixed 7, "
        "the middle of the range (error up to +-5 per divide)",
    ),
    Cost(
        "load single LDR/LDRB/LDRH/LDRSB/LDRSH/LDREX, VLDR (FP)",
        LOAD,
        r"ldr(b|h|sb|sh|ex|exb|exh|t|bt|ht|sbt|sht)?|vldr|lda(b|h|ex|exb|exh)?",
        (2, 0),
        (1, 0),
        (1, 0),
        f"{M4_TRM}: 2; {M4_TRM_LS}: 1 when it follows a load single whose destination "
        "it does not use as an address (pipelined); M7/M55: 1 issue + 1 load-use stall, " + APPROX,
    ),
    Cost(
        "store single with an immediate offset STR/STRB/STRH Rt, [Rn, #imm]",
        STORE,
        r"str(b|h|t|bt|ht)?|vstr",
        (1, 0),
        (1, 0),
        (1, 0),
        f"{M4_TRM_LS}: 'STR Rx,[Ry,#imm] is always one cycle' (the store completes "
        "while the next instruction executes); M7/M55: 1, " + APPROX,
        operands=r"\[\s*\w+\s*(,\s*#[^\]]*)?\]",
    ),
    Cost(
        "store single, other addressing (register offset, STREX...)",
        STORE,
        r"str(b|h|ex|exb|exh|t|bt|ht)?|vstr|stl(b|h|ex|exb|exh)?",
        (2, 0),
        (1, 0),
        (1, 0),
        f"{M4_TRM}: 2; {M4_TRM_LS}: 1 when it follows a load single (nothing "
        "pipelines after a store); M7/M55: 1, " + APPROX,
    ),
    Cost(
        "load/store double LDRD/STRD",
        MULTI,
        r"ldrd|strd",
        (3, 0),
        (1, 0),
        (1, 0),
        f"{M4_TRM}: 1+N with N = 2; M7/M55 64-bit data path: 1, " + APPROX,
    ),
    Cost(
        "load/store multiple LDM/STM/PUSH/POP, VLDM/VSTM/VPUSH/VPOP",
        MULTI,
        r"ldm(ia|db|fd|ea)?|stm(ia|db|fd|ea)?|push|pop|vldm(ia|db)?|vstm(ia|db)?|vpush|vpop",
        (1, 1),
        (1, 0.5),
        (1, 0.5),
        f"{M4_TRM}: 1+N (N registers; +P when PC is loaded); {M4_FPU_TRM}; "
        "M7/M55: 1+N/2 (two registers a cycle on the 64-bit path), " + APPROX,
    ),
    Cost(
        "branch B/BL/BX/BLX/CBZ/CBNZ; any instruction writing PC",
        BRANCH,
        r"b|bl|bx|blx|cbn?z|bxns|blxns",
        (1, 0),
        (1, 0),
        (1, 0),
        f"{M4_TRM}: 1 not taken, 1+P taken (P = refill, see CORES)",
    ),
    Cost(
        "table branch TBB/TBH",
        BRANCH,
        r"tb[bh]",
        (2, 0),
        (2, 0),
        (2, 0),
        f"{M4_TRM}: 2+P; {M4_TRM_LS} says at least 6 with the refill",
    ),
    Cost(
        "low-overhead loop start DLS/DLSTP/WLS/WLSTP",
        LOOP_START,
        r"dlstp(\.\d+)?|dls|wlstp(\.\d+)?|wls",
        None,
        None,
        (1, 0),
        "Cortex-M55: 1 (+P when WLS skips the loop), " + APPROX,
    ),
    Cost(
        "low-overhead loop end LE/LETP",
        LOOP_END,
        r"le|letp",
        None,
        None,
        (1, 0),
        "Cortex-M55 TRM loop cache: 0 when the loop end is cached (the previous LE "
        "executed was this one), else 1 (+P when it loops); " + APPROX,
    ),
    Cost(
        "Helium load/store VLDRB/H/W, VSTRB/H/W, VLD2x/VLD4x, VST2x/VST4x",
        VMEM,
        r"vldr[bhwd](\.\w+)?|vstr[bhwd](\.\w+)?|vld[24][0-3](\.\w+)?|vst[24][0-3](\.\w+)?",
        None,
        None,
        (2, 0),
        f"{M55_BEATS}: 2 cycles; overlaps the previous vector instruction of another class by 1",
    ),
    Cost(
        "Helium multiply / multiply-accumulate (VMLA, VMLADAV, VMUL, VQDMULH...)",
        VMAC,
        r"v(r?mla|mls|r?mlal|mlsl|rmlal)[a-z]*|vq?r?d?mul[a-z]*|vq?r?dml[as][a-z]*|vfm[as]|vfmas|vmul",
        None,
        None,
        (2, 0),
        f"{M55_BEATS}: 2 cycles; overlaps the previous vector instruction of another class by 1",
    ),
    Cost(
        "Helium other vector instructions (add, shift, compare, move, reduce, VPT...)",
        VALU,
        r"v[a-z0-9]+",
        None,
        None,
        (2, 0),
        f"{M55_BEATS}: 2 cycles; overlaps the previous vector instruction of another class by 1",
    ),
)


@dataclass(frozen=True)
class Core:
    """The dynamic rules of one core, passed to the plugin."""

    name: str
    costs: str  # which column of COSTS
    refill: int  # P: cycles added when a branch is taken
    load_pipelining: bool  # M4 TRM 3.3.2: a load/store single right after a load single costs 1 less
    load_use_stall: int  # cycles an instruction waits for the register a load single just wrote
    dual_issue: bool  # two adjacent independent instructions may issue in one cycle
    beat_overlap: bool  # Helium: a vector instruction overlaps the previous one of another class
    source: str


CORES = {
    "cortex-m4": Core(
        "cortex-m4",
        "m4",
        2,
        True,
        0,
        False,
        False,
        f"{M4_TRM}: P is 1 to 3 'depending on the alignment and width of the target instruction'; "
        "modelled as 2, plus 1 when the target is a 32-bit instruction not 4-byte aligned",
    ),
    "cortex-m33": Core(
        "cortex-m33",
        "m4",
        2,
        True,
        0,
        False,
        False,
        "Cortex-M33 TRM (100230) gives no per-instruction timings; its 3-stage pipeline is "
        "modelled with the Cortex-M4 table (its limited dual issue of 16-bit pairs is not modelled)",
    ),
    "cortex-m7": Core(
        "cortex-m7",
        "m7",
        1,
        False,
        1,
        True,
        False,
        "Cortex-M7 TRM (DDI 0489) gives no per-instruction timings; approximation: dual issue of two "
        "adjacent independent instructions (not two memory, not two multiplies, the second not "
        "reading the first's result, no LDM/STM/divide/taken branch in the pair), load-use 1, "
        "predicted taken branch 1 extra (mispredictions not modelled)",
    ),
    "cortex-m55": Core(
        "cortex-m55",
        "m55",
        2,
        False,
        1,
        False,
        True,
        f"{M55_BEATS}; scalar: 1 cycle, load-use 1, taken branch P=2 ({APPROX})",
    ),
}


@dataclass(frozen=True)
class Memory:
    """The memory system of a part: flash wait states behind its flash accelerator or L1 caches
    (an instruction cache, a data cache for constants read from flash, sequential prefetch);
    SRAM/TCM data is zero-wait. Caches are set-associative with LRU replacement (1 way: direct-
    mapped); `unified`: constants read from flash go through the instruction cache (no data cache)."""

    mhz: float
    flash_wait: int
    icache_lines: int
    dcache_lines: int
    prefetch: bool
    part: str
    line_bytes: int = 16
    icache_ways: int = 1
    dcache_ways: int = 1
    unified: bool = False


# The clock, flash wait states and flash accelerator of each target's typical part (Target.part).
# The ART accelerators' associativity is not documented: modelled direct-mapped (see SENSITIVITY).
MEMORY = {
    "cortex-m4": Memory(
        168,
        5,
        64,
        8,
        True,
        "STM32F407VG at 168 MHz: 5 wait states, ART accelerator (64 x 128-bit "
        "instruction lines, 8 data lines, prefetch; RM0090 3.5)",
    ),
    "cortex-m33": Memory(
        64,
        0,
        0,
        0,
        False,
        "nRF9160 at 64 MHz: its datasheet gives no flash wait states (code "
        "runs through its instruction cache); modelled zero-wait",
    ),
    "cortex-m7": Memory(
        216,
        7,
        512,
        512,
        True,
        "STM32F767ZI at 216 MHz: 7 wait states behind the Cortex-M7's 16 KiB "
        "L1 instruction cache (2-way) and 16 KiB data cache (4-way), 32-byte lines (Cortex-M7 TRM "
        "DDI 0489 5.1/6.1), ART prefetch",
        line_bytes=32,
        icache_ways=2,
        dcache_ways=4,
    ),
    "cortex-m55": Memory(
        400,
        0,
        0,
        0,
        False,
        "a Corstone-300 class part (e.g. Alif Ensemble E7 high-performance core "
        "at 400 MHz) running from zero-wait ITCM/DTCM",
    ),
}


@dataclass(frozen=True)
class Part:
    """A named part (`--part`): the core it has, its memory system at the clock it was run at,
    and its SRAM and flash (the memory budget a build on it is checked against)."""

    target: str
    memory: Memory
    ram_bytes: int | None = None
    flash_bytes: int | None = None


# The parts of the fastest published MLPerf Tiny results (docs/anchors.md), at their published clocks,
# so that a comparison with them is made under their memory conditions. Wait states: the reference
# manual's flash latency table at that clock and voltage range.
PARTS = {
    "stm32l4r5": Part(
        "cortex-m4",
        Memory(
            120,
            5,
            32,
            8,
            True,
            "STM32L4R5 at 120 MHz (Range 1 boost): 5 wait states (RM0432 flash latency table), "
            "ART accelerator: 32 instruction lines and 8 data lines of 4 x 64 bits, prefetch; associativity not "
            "documented, modelled direct-mapped",
            line_bytes=32,
        ),
        640 * 1024,
        2048 * 1024,
    ),
    "stm32u575": Part(
        "cortex-m33",
        Memory(
            160,
            4,
            512,
            0,
            True,
            "STM32U575 at 160 MHz (Range 1): 4 wait states (RM0456 flash latency table), 8 KiB "
            "ICACHE, 2-way, 16-byte lines, on the C-bus that carries both instruction fetches and literal/constant "
            "reads (modelled unified), flash prefetch on",
            icache_ways=2,
            unified=True,
        ),
        768 * 1024,
        2048 * 1024,
    ),
    "stm32h7a3": Part(
        "cortex-m7",
        Memory(
            280,
            6,
            512,
            512,
            False,
            "STM32H7A3 at 280 MHz (VOS0): 6 wait states (RM0455 flash latency table), Cortex-M7 "
            "16 KiB L1 instruction cache (2-way) and 16 KiB data cache (4-way), 32-byte lines; a line fill is charged "
            "the wait states once (the flash word is 128 bits: a second flash access per 32-byte line is not "
            "charged); no flash prefetch",
            line_bytes=32,
            icache_ways=2,
            dcache_ways=4,
        ),
        1376 * 1024,
        2048 * 1024,
    ),
}


def part_for(target: str, part: str | None) -> Part:
    """The named part `part` (PARTS), checked to have `target`'s core; None: the typical part."""
    if part is None:
        return Part(target, MEMORY[target])
    if part not in PARTS:
        raise EdgecError(f"--part {part!r}: expected one of {', '.join(PARTS)}")
    if PARTS[part].target != target:
        raise EdgecError(
            f"--part {part}: a {PARTS[part].target} part, not a {target} one (use --target {PARTS[part].target})"
        )
    return PARTS[part]


def on_part(target: Target, part: str | None) -> Target:
    """`target` on the named part `part` (PARTS: its memory system and its SRAM and flash as the
    budget); None keeps the typical part."""
    if part is None:
        return target
    named = part_for(target.name, part)  # a clear error for an unknown part or another core's
    return replace(
        target,
        timing_part=part,
        ram_bytes=named.ram_bytes,
        flash_bytes=named.flash_bytes,
        part=f"ST {part.upper()} ({named.ram_bytes // 1024} KiB SRAM, {named.flash_bytes // (1024 * 1024)} MiB flash)",
    )


@dataclass(frozen=True)
class Assumption:
    """One way the model's uncertain parts could be instead: what `bench --sensitivity` reruns."""

    name: str
    associativity: str | None = None  # "direct" or "full": every cache with 1 way / all ways
    prefetch: bool | None = None  # sequential prefetch on/off instead of the part's
    free_fetch: bool = False  # instruction fetches never stall (a perfect prefetcher)
    it_cycles: int | None = None  # cycles of IT (0: always folded)
    refill: int | None = None  # taken-branch refill P instead of the core's


# The model's uncertain parts, each varied alone (the documented model is the reference):
# the flash caches' associativity (ART: undocumented), instruction-fetch stalls (prefetch timing),
# IT folding (M4 TRM: IT "may" fold to 0) and the taken-branch refill (M4 TRM: 1 to 3).
SENSITIVITY = (
    Assumption("caches direct-mapped", associativity="direct"),
    Assumption("caches fully associative", associativity="full"),
    Assumption("no prefetch", prefetch=False),
    Assumption("fetch never stalls", free_fetch=True),
    Assumption("IT folded (0 cycles)", it_cycles=0),
    Assumption("branch refill 1", refill=1),
    Assumption("branch refill 3", refill=3),
)


LEFT_OUT = (
    "interrupts and exceptions, bus contention and AHB/AXI latency beyond the flash wait states, "
    "unaligned-access penalties, IT folding (IT is charged 1; `--sensitivity` shows 0), operand-dependent "
    "divide times, the M7's branch mispredictions and its caches' write-back traffic, the caches' own "
    "replacement policies (LRU is modelled; `--sensitivity` bounds associativity), a cache line fill's "
    "second flash access where the line is wider than the flash word, the M33's 16-bit dual issue, FPU "
    "timings beyond loads/stores, and Helium's exceptions to overlap (e.g. cross-beat dependencies of VLDR "
    "gathers)"
)

_CONDITIONS = ("eq", "ne", "cs", "hs", "cc", "lo", "mi", "pl", "vs", "vc", "hi", "ls", "ge", "lt", "gt", "le", "al")
_COMPILED = [(cost, re.compile(f"(?:{cost.mnemonics})")) for cost in COSTS]
_REGISTER = re.compile(r"\b(r1[0-5]|r[0-9]|sb|sl|fp|ip|sp|lr|pc)\b")
_REG_ALIAS = {"sb": 9, "sl": 10, "fp": 11, "ip": 12, "sp": 13, "lr": 14, "pc": 15}
PC = 15


def has_model(target: str) -> bool:
    return target in CORES


def _register(name: str) -> int:
    return _REG_ALIAS[name] if name in _REG_ALIAS else int(name[1:])


def _mask(names) -> int:
    mask = 0
    for name in names:
        mask |= 1 << _register(name)
    return mask


def _register_list(operands: str) -> list[str]:
    """The registers of a {r4, r5-r7, lr} list, ranges expanded."""
    inside = operands[operands.index("{") + 1 : operands.index("}")]
    names: list[str] = []
    for part in inside.split(","):
        part = part.strip()
        if "-" in part:
            first, last = part.split("-")
            prefix = first.strip()[0]
            names += [f"{prefix}{i}" for i in range(int(first.strip()[1:]), int(last.strip()[1:]) + 1)]
        elif part:
            names.append(part)
    return names


def cost_of(mnemonic: str, operands: str = "") -> Cost | None:
    """The COSTS row of a disassembled mnemonic (any condition, width and data-type suffix, and
    Helium's VPT-block suffix: `vldrbt` is a `vldrb` predicated "then") with its operands."""
    base = mnemonic.lower().split(".")[0]
    candidates = [base]
    if base.endswith(_CONDITIONS) and len(base) > 2:
        candidates.append(base[:-2])
    if base.startswith("v") and base.endswith(("t", "e")):
        candidates.append(base[:-1])
    *specific, (catch_all, catch_all_pattern) = _COMPILED  # the last row takes any other V mnemonic
    for candidate in candidates:
        for cost, pattern in specific:
            if pattern.fullmatch(candidate) and (not cost.operands or re.search(cost.operands, operands)):
                return cost
    return catch_all if any(catch_all_pattern.fullmatch(c) for c in candidates) else None


@dataclass(frozen=True)
class Timed:
    """One decoded instruction, as the plugin reads it."""

    address: int
    size: int
    kind: int
    cycles: int
    dst: int  # registers written (bit i = ri); not a base register's writeback, which the address
    #   stage computes early (M4 TRM 3.3.2 delays only on a load's destination)
    src: int  # registers read
    addr: int  # registers forming a memory address
    it: bool = False  # an IT instruction (which the M4 may fold: SENSITIVITY)


def _cycles_on(cost: Cost | None, core: Core) -> tuple[float, float]:
    """(base, per register) of a COSTS row on `core`; 1 cycle for an unknown mnemonic or one the
    core does not have."""
    return (getattr(cost, core.costs) if cost else None) or (1, 0)


def classify(address: int, size: int, mnemonic: str, operands: str, core: Core) -> Timed:
    """The static timing of one instruction on `core`. Unknown mnemonics cost 1 (ALU)."""
    operands = operands.split(";")[0].split("@")[0].strip()
    cost = cost_of(mnemonic, operands)
    kind = cost.kind if cost else ALU
    base, per_reg = _cycles_on(cost, core)
    helium = re.search(r"\bq\d", operands) is not None
    if kind in (VMEM, VALU, VMAC) and not helium:  # a VFP instruction sharing a V mnemonic
        kind, base, per_reg = ALU, 1, 0
    if kind == ALU and mnemonic.lower().startswith("vmov") and helium:
        kind, (base, per_reg) = VALU, _cycles_on(COSTS[-1], core)  # a Helium move
    if kind == ALU and mnemonic.lower().startswith(("vldr", "vstr")):
        kind = LOAD if mnemonic.lower().startswith("vldr") else STORE
    registers = _REGISTER.findall(operands)
    if "{" in operands:
        listed = _register_list(operands)
        if mnemonic.lower().startswith("v"):  # VPUSH {d8-d9}: count 32-bit words
            count = sum(2 if name.startswith("d") else 1 for name in listed)
            listed = []
        else:
            count = len(listed)
        outside = _REGISTER.findall(operands[: operands.index("{")])
        loads = mnemonic.lower().startswith(("ldm", "pop", "vldm", "vpop"))
        dst = _mask(listed) if loads else 0
        src = _mask(outside) | (0 if loads else _mask(listed))
        addr = _mask(outside) | (1 << 13 if mnemonic.lower().startswith(("push", "pop", "vpush", "vpop")) else 0)
        if mnemonic.lower().startswith(("push", "pop", "vpush", "vpop")):
            src |= 1 << 13
        cycles = math.ceil(base + per_reg * count)
    else:
        inside = operands[operands.index("[") :] if "[" in operands else ""
        addr = _mask(_REGISTER.findall(inside))
        cycles = math.ceil(base)
        if kind in (VMEM, VALU, VMAC):  # Q registers are not tracked; a reduction writes a scalar
            dst = _mask(registers[:1]) if kind != VMEM and re.match(r"\s*r", operands) else 0
            src = _mask(registers)
        elif kind in (LOAD, MULTI) and mnemonic.lower().startswith(("ldr", "vldr", "lda")):
            written = _REGISTER.findall(operands[: operands.index("[")] if "[" in operands else operands)
            dst, src = _mask(written), addr
        elif kind in (STORE, MULTI, BRANCH) or mnemonic.lower().startswith(("cmp", "cmn", "tst", "teq", "it")):
            dst, src = 0, _mask(registers)
        else:
            dst = _mask(registers[:1]) if registers else 0
            src = _mask(registers[1:])
            if operands.count(",") == 1 and _TWO_OPERAND_READS_DST.fullmatch(mnemonic.lower().split(".")[0]):
                src |= dst  # `adds r5, #1`, `ands r0, r1`: the destination is also an operand
            if cost is not None and cost.kind == MAC and re.match(r"[su]m(ull|lal)|umaal|smlal", mnemonic.lower()):
                dst = _mask(registers[:2])
                src = _mask(registers[2:]) | (dst if "la" in mnemonic.lower() or "aal" in mnemonic.lower() else 0)
            elif re.match(r"(mla|mls|sml|smml|usada)", mnemonic.lower()):  # accumulators are read too
                src |= dst
    if dst & (1 << PC) and kind in (ALU, MAC):  # MOV PC / ADD PC: a branch (1 + P)
        kind = BRANCH
    it = re.fullmatch(r"it[te]{0,3}", mnemonic.lower().split(".")[0]) is not None
    return Timed(address, size, kind, cycles, dst & 0xFFFF, src & 0xFFFF, addr & 0xFFFF, it)


_TWO_OPERAND_READS_DST = re.compile(
    r"(adcs?|adds?|ands?|asrs?|bics?|eors?|lsls?|lsrs?|muls?|orrs?|rors?|sbcs?|"
    r"subs?)(eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le|al)?"
)
_OBJDUMP_LINE = re.compile(r"^\s*([0-9a-f]+):\s+((?:[0-9a-f]{4}\s?){1,2})\s+(\S+)\s*(.*)$")


def decode_elf(elf: Path, target: str) -> list[Timed]:
    """Every instruction of `elf`'s executable sections, decoded for `target`'s core."""
    core = CORES[target]
    result = subprocess.run(
        ["arm-none-eabi-objdump", "-d", "-m", "armv8.1-m.main", str(elf)], capture_output=True, text=True, check=True
    )
    decoded = []
    for line in result.stdout.splitlines():
        match = _OBJDUMP_LINE.match(line)
        if not match or match.group(3).startswith("."):  # .word/.short: literal data
            continue
        size = len(match.group(2).replace(" ", "")) // 2
        decoded.append(classify(int(match.group(1), 16), size, match.group(3), match.group(4), core))
    return decoded


@dataclass(frozen=True)
class TimingSetup:
    """What a timed run needs: the core, the memory system, the flash address range and the
    assumption the uncertain parts are modelled with (None: the documented model)."""

    target: str
    mhz: float
    flash_wait: int
    flash: tuple[int, int] | None  # [start, end) of the flash the code and constants sit in
    part: str | None = None  # a PARTS name; None: the target's typical part (MEMORY)
    assumption: Assumption | None = None

    @property
    def memory(self) -> Memory:
        return part_for(self.target, self.part).memory

    @property
    def part_name(self) -> str:
        return self.memory.part

    def varied(self, assumption: Assumption) -> "TimingSetup":
        return replace(self, assumption=assumption)

    def changed_by(self, assumption: Assumption) -> bool:
        """Whether `assumption` can change this setup's estimate (else it is the documented one):
        the memory assumptions only with flash wait states, associativity only where it differs."""
        memory, core = self.memory, CORES[self.target]
        if assumption.associativity is not None or assumption.prefetch is not None or assumption.free_fetch:
            if self.flash_wait == 0:
                return False
        if assumption.associativity is not None:
            return any(
                _ways(lines, ways, assumption) != ways
                for lines, ways in (
                    (memory.icache_lines, memory.icache_ways),
                    (memory.dcache_lines, memory.dcache_ways),
                )
            )
        if assumption.prefetch is not None:
            return assumption.prefetch != memory.prefetch
        return assumption.refill is None or assumption.refill != core.refill


def setup_for(
    target: str, mhz: float | None = None, flash_wait: int | None = None, part: str | None = None
) -> TimingSetup:
    """The timing of `part` (PARTS; None: `target`'s typical part, MEMORY), with the user's clock
    and wait states if given. Flash is every region of the board's linker script but RAM: code and
    constants."""
    spans = [(origin, origin + length) for name, (origin, length) in board_memory_map(target).items() if name != "RAM"]
    flash = (min(s for s, _ in spans), max(e for _, e in spans)) if spans else None
    memory = part_for(target, part).memory
    return TimingSetup(
        target, memory.mhz if mhz is None else mhz, flash_wait_states(target, flash_wait, part), flash, part
    )


def flash_wait_states(target: str, flash_wait: int | None = None, part: str | None = None) -> int:
    """The flash wait states a build and a timed run assume: the user's (--flash-wait), else those
    of `part` (--part), else of `target`'s typical part (MEMORY)."""
    return part_for(target, part).memory.flash_wait if flash_wait is None else flash_wait


def data_cache_bytes(target: str, part: str | None = None) -> int:
    """The bytes of flash data the part's caches can keep (0: none); a unified cache's whole size
    (shared with the code, which in a kernel's inner loop is small)."""
    memory = part_for(target, part).memory
    return (memory.icache_lines if memory.unified else memory.dcache_lines) * memory.line_bytes


def _ways(lines: int, ways: int, assumption: Assumption | None) -> int:
    if assumption is None or assumption.associativity is None or not lines:
        return ways
    return 1 if assumption.associativity == "direct" else lines


def write_timing_table(elf: Path, setup: TimingSetup, path: Path) -> Path:
    """The plugin's timing file: `param NAME VALUE` lines (the core's rules and memory system),
    then one `ADDRESS SIZE KIND CYCLES DST SRC ADDR` line per instruction (hex masks)."""
    core, memory, varied = CORES[setup.target], setup.memory, setup.assumption or Assumption("documented")
    start, end = setup.flash or (0, 0)
    params = {
        "refill": core.refill if varied.refill is None else varied.refill,
        "load_pipelining": int(core.load_pipelining),
        "load_use_stall": core.load_use_stall,
        "dual_issue": int(core.dual_issue),
        "beat_overlap": int(core.beat_overlap),
        "flash_start": start,
        "flash_end": end,
        "flash_wait": setup.flash_wait,
        "icache_lines": memory.icache_lines,
        "dcache_lines": memory.dcache_lines,
        "icache_ways": _ways(memory.icache_lines, memory.icache_ways, varied),
        "dcache_ways": _ways(memory.dcache_lines, memory.dcache_ways, varied),
        "unified": int(memory.unified),
        "prefetch": int(memory.prefetch if varied.prefetch is None else varied.prefetch),
        "free_fetch": int(varied.free_fetch),
        "line_bytes": memory.line_bytes,
    }
    lines = [f"param {name} {value}" for name, value in params.items()]
    for t in decode_elf(elf, setup.target):
        if varied.it_cycles is not None and t.it:
            t = replace(t, cycles=varied.it_cycles)
        lines.append(f"{t.address:x} {t.size} {t.kind} {t.cycles} {t.dst:x} {t.src:x} {t.addr:x}")
    path.write_text("\n".join(lines) + "\n")
    return path


def milliseconds(cycles: int, mhz: float) -> float:
    return cycles / (mhz * 1e3)


def document() -> str:
    """docs/timing-model.md: COSTS, CORES and MEMORY as tables."""

    def cycles(pair: tuple[float, float] | None) -> str:
        if pair is None:
            return "-"
        base, per_reg = pair
        return f"{base:g}" if not per_reg else f"{base:g}+{'N' if per_reg == 1 else f'N*{per_reg:g}'}"

    lines = [
        "# The timing model of `edgec bench`",
        "",
        "Generated from `edgec/targets/timing.py` by `python scripts/write_timing_doc.py`; do not edit.",
        "",
        "`edgec bench` counts instructions exactly (QEMU executes them) and estimates cycles with this model,",
        "run by edgec's QEMU plugin (`runtime_c/port/qemu_insn_plugin.c`) over the executed instruction",
        "stream. Instructions are decoded from the ELF with `arm-none-eabi-objdump -m armv8.1-m.main`",
        "(QEMU 7.2's own disassembler, Capstone 4, does not know Helium or the loop instructions).",
        "",
        "## Cycles per instruction class",
        "",
        "Cost when the instruction does not branch and does not overlap; N = registers in the list.",
        "Cortex-M33 uses the Cortex-M4 column.",
        "",
        "| class | M4 / M33 | M7 | M55 | source |",
        "|---|---:|---:|---:|---|",
    ]
    lines += [f"| {c.name} | {cycles(c.m4)} | {cycles(c.m7)} | {cycles(c.m55)} | {c.source} |" for c in COSTS]
    lines += [
        "",
        "## Dynamic rules per core",
        "",
        "- **taken branch**: the next executed address is not pc + size; adds the refill P",
        "  (+1 when the target is a 32-bit instruction at an address = 2 mod 4).",
        "- **load pipelining** (M4/M33): a load/store single right after a load single costs 1 less, unless",
        "  its address uses the register that load wrote (M4 TRM 3.3.2).",
        "- **load-use** (M7/M55): an instruction reading the register a load single just wrote waits.",
        "- **dual issue** (M7): see its source below.",
        "- **beat overlap** (M55): a Helium instruction right after one of another class (memory,",
        "  multiply, other) starts in the previous one's second cycle: it costs 1 less. Tail-predicated",
        "  iterations cost full beats (inactive lanes still take their beat).",
        "- **loop end** (M55): LE/LETP cost 0 when the loop cache holds them (the previous LE executed).",
        "",
        "| core | P | load pipelining | load-use | dual issue | beat overlap | source |",
        "|---|---:|---|---:|---|---|---|",
    ]
    lines += [
        f"| {c.name} | {c.refill} | {'yes' if c.load_pipelining else 'no'} | {c.load_use_stall} "
        f"| {'yes' if c.dual_issue else 'no'} | {'yes' if c.beat_overlap else 'no'} | {c.source} |"
        for c in CORES.values()
    ]
    lines += [
        "",
        "## Memory system",
        "",
        "Code and constants in flash: an instruction fetch or data read of a line (the part's line size)",
        "missing the part's cache costs the flash wait states; with prefetch, the next sequential line is",
        "fetched in the background while the current one executes (a fetch that finds it on the way waits",
        "only for the rest). Caches are set-associative with LRU replacement (1 way: direct-mapped); a",
        "unified cache also holds the constants read from flash. SRAM/TCM data reads and all stores are",
        "zero-wait. `--part` selects a named part below; `--flash-wait` and `--mhz` override its figures.",
        "",
        "The same wait states and data cache decide `--opt auto`'s constant layouts (`edgec build`, `verify`",
        "and `bench` all take `--flash-wait` and `--part`): a DSP convolution's filter is widened to int16",
        "(fewer instructions, twice the flash reads) without wait states, when the widened filter and its",
        "channel table fit the data cache, or at few wait states; never on a part without a data cache once",
        "it has wait states; a fully connected layer's only without wait states, and then not on the",
        "dual-issue M7. Widening then adds at most 20 % to the compact constants (8 KiB for a small model),",
        "the most reused layers first. The measured thresholds are in edgec/passes/constant_layouts.py.",
        "",
    ]

    def memory_row(name: str, target: str, m: Memory) -> str:
        def cache(lines: int, ways: int) -> str:
            return "-" if not lines else f"{lines} x {m.line_bytes} B, {'direct' if ways == 1 else f'{ways}-way'}"

        data = "unified" if m.unified else cache(m.dcache_lines, m.dcache_ways)
        return (
            f"| {name} | {target} | {m.mhz:g} | {m.flash_wait} | {cache(m.icache_lines, m.icache_ways)} | {data} "
            f"| {'yes' if m.prefetch else 'no'} | {m.part} |"
        )

    header = [
        "| {} | core | MHz | flash wait states | I-cache | D-cache | prefetch | part |",
        "|---|---|---:|---:|---|---|---|---|",
    ]
    lines += ["Typical parts (the default of each target):", "", header[0].format("target"), header[1]]
    lines += [memory_row(t, t, m) for t, m in MEMORY.items()]
    lines += [
        "",
        "Named parts (`--part NAME`): the parts of the fastest published MLPerf Tiny results, at their",
        "published clocks.",
        "",
        header[0].format("--part"),
        header[1],
    ]
    lines += [memory_row(name, p.target, p.memory) for name, p in PARTS.items()]
    lines += [
        "",
        "## Sensitivity",
        "",
        "`edgec bench --sensitivity` reruns the estimate with each uncertain part of the model varied alone",
        "and reports every total; BENCHMARKS.md gives each headline ratio's range over them:",
        "",
    ]
    lines += [f"- {a.name}" for a in SENSITIVITY]
    lines += ["", "## Left out", "", f"Cycles are an estimate. The model leaves out {LEFT_OUT}.", ""]
    return "\n".join(lines)
