"""The cycle model of edgec bench (edgec/targets/timing.py + runtime_c/port/qemu_insn_plugin.c), checked
on micro-benchmarks in assembly (tests/data/port/timing_micro.S) run under QEMU: each expected
figure is worked out by hand from the table it names (see docs/timing-model.md for the sources).

Every region holds its body plus the call site of bench_end (`movs r0, #0` + `bl`); the `empty`
region measures that call site, which is subtracted (and checked itself)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from edgec.targets import timing, toolchain
from tests.device_support import needs_toolchain

DATA = Path(__file__).resolve().parent / "data" / "port"
SOURCES = [DATA / "timing_micro_main.c", DATA / "timing_micro.S"]
REGIONS = [
    "empty",
    "ldr_independent",
    "ldr_chase",
    "ldr_use",
    "ldrd_x4",
    *(f"ldm_stm_{n}" for n in range(1, 9)),
    "branch_taken",
    "branch_untaken",
    "smlad_chain",
    "mul_umull_sdiv",
    "alu_independent",
    "alu_chain",
    "flash_fetch",
    "flash_fetch_again",
    "flash_data",
    "str_immediate",
    "str_register",
]
HELIUM_REGIONS = ["helium_overlap", "helium_no_overlap", "helium_straight"]

M4_TABLE = "M4 TRM table 3-1"
M4_LS = "M4 TRM 3.3.2 load/store timings"
P = 2  # the modelled pipeline refill of a taken branch on the M4/M33/M55 (timing.CORES)
# Body cycles on the Cortex-M4 with zero-wait memory, and where each comes from.
M4_EXPECTED = {
    "ldr_independent": (2 + 7 * 1, f"{M4_TABLE}: LDR 2; {M4_LS}: the next 7 pipeline, 1 each"),
    "ldr_chase": (4 * 2, f"{M4_LS}: a load addressed by the previous load's result does not pipeline"),
    "ldr_use": (4 * (2 + 1), f"{M4_TABLE}: LDR 2 then ADD 1; the M4 has no further load-use stall"),
    "ldrd_x4": (4 * (1 + 2), f"{M4_TABLE}: LDRD 1+N, N=2"),
    # A one-register LDM/STM is assembled as LDR/STR: LDR 2, then the STR pipelines (1).
    "ldm_stm_1": (2 + 1, f"{M4_TABLE} footnote b / {M4_LS}"),
    **{
        f"ldm_stm_{n}": (2 * (1 + n), f"{M4_TABLE}: LDM 1+N, STM 1+N (no pipelining with neighbours)")
        for n in range(2, 9)
    },
    "branch_taken": (4 * (1 + P) + 1, f"{M4_TABLE}: B taken 1+P (P=2: 16-bit aligned targets), then a NOP"),
    "branch_untaken": (1 + 4 * 1 + 1, f"{M4_TABLE}: CMP 1, B<cond> not taken 1 (footnote a), NOP 1"),
    "smlad_chain": (8 * 1, f"{M4_TABLE}: SMLAD 1, back to back"),
    "mul_umull_sdiv": (
        2 + 1 + 1 + 1 + 1 + 7 + 7,
        f"{M4_TABLE}: MOV 1, MUL 1, MLA 1, UMULL 1, SMLAL 1; SDIV/UDIV 2-12, modelled 7 (operand values unseen)",
    ),
    "alu_independent": (8, f"{M4_TABLE}: ADD 1"),
    "alu_chain": (8, f"{M4_TABLE}: ADD 1"),
    "flash_fetch": (32, f"{M4_TABLE}: ADD.W 1"),
    "flash_fetch_again": (32, f"{M4_TABLE}: ADD.W 1"),
    "flash_data": (2 + 15 * 1, f"{M4_TABLE}: LDR 2, {M4_LS}: the next 15 pipelined, 1 each"),
    "str_immediate": (4 * 1, f"{M4_LS}: STR Rx,[Ry,#imm] is always one cycle"),
    "str_register": (1 + 4 * 2, f"{M4_TABLE}: MOV 1, STR 2 (register offset; nothing pipelines after a store)"),
}
M55_EXPECTED = {  # scalar figures: timing.COSTS column m55; Helium: beat-wise execution, dual beat
    "ldr_independent": (8, "M55 scalar LDR 1, independent"),
    "ldr_chase": (1 + 3 * 2, "M55 load-use 1: each address waits for the previous load"),
    "ldr_use": (4 * (1 + 1 + 1), "M55 LDR 1, ADD 1 + load-use 1"),
    "ldrd_x4": (4, "M55 LDRD 1 (64-bit data path)"),
    "ldm_stm_1": (1 + 1, "LDR 1 + STR 1 (a store's data is read late: no load-use)"),
    **{f"ldm_stm_{n}": (2 * (1 + -(-n // 2)), "M55 LDM/STM 1+N/2") for n in range(2, 9)},
    "branch_taken": (4 * (1 + P) + 1, "taken branch 1+P, P=2"),
    "smlad_chain": (8, "SMLAD 1"),
    # DLSTP 1 after two MOVs; iteration 1: VLDRB 2, VMLADAVA overlapped 1, LETP 1 + P (the loop cache is
    # empty); iterations 2-4: VLDRB 2 (after a branch: no overlap), VMLADAVA 1, LETP 0 (cached).
    "helium_overlap": (3 + (2 + 1 + 1 + P) + 3 * (2 + 1 + 0), "beat overlap of two classes; loop cache"),
    # a scalar ADD between the load and the multiply-accumulate: no overlap (2 + 1 + 2 an iteration)
    "helium_no_overlap": (3 + (2 + 1 + 2 + 1 + P) + 3 * (2 + 1 + 2 + 0), "no overlap across a scalar instruction"),
    # 4 loads back to back (one class: 2 each), then a load (2, after a load) and 7 alternating 1 each
    "helium_straight": (4 * 2 + 2 + 7 * 1, "overlap only between different classes"),
}
M7_EXPECTED = {  # the documented dual-issue approximation (timing.CORES["cortex-m7"])
    "alu_independent": (4, "8 independent ADDs dual-issue in pairs"),
    "alu_chain": (8, "a dependent chain does not pair"),
    "ldr_independent": (8, "one memory instruction a cycle"),
    "ldr_use": (1 + 2 + 0 + 2 + 0 + 2 + 0 + 2, "ADD waits 1 for its load; the next LDR pairs with the ADD"),
    "smlad_chain": (8, "one multiply a cycle, dependent"),
}


def run(target: str, tmp_path_factory, flash_wait: int | None, part: str | None = None) -> dict:
    out = tmp_path_factory.mktemp(f"timing-{target}")
    elf = toolchain.cross_compile(target, SOURCES, [], out / "micro.elf")
    counts = toolchain.count_instructions(
        target, elf, timing=timing.setup_for(target, flash_wait=flash_wait, part=part)
    )
    names = REGIONS + (HELIUM_REGIONS if target == "cortex-m55" else [])
    assert len(counts["cycles"]) == len(names)
    assert counts["untimed"] == 0
    counts["by_name"] = dict(zip(names, counts["cycles"]))
    counts["elf"] = elf
    return counts


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    cache: dict = {}

    def get(target: str, flash_wait: int | None = 0, part: str | None = None) -> dict:
        if (target, flash_wait, part) not in cache:
            cache[target, flash_wait, part] = run(target, tmp_path_factory, flash_wait, part)
        return cache[target, flash_wait, part]

    return get


def body(result: dict, name: str) -> int:
    return result["by_name"][name] - result["by_name"]["empty"]


@needs_toolchain
@pytest.mark.parametrize("name", sorted(M4_EXPECTED))
def test_cortex_m4_micro_benchmarks(results, name):
    expected, source = M4_EXPECTED[name]
    assert body(results("cortex-m4"), name) == expected, source


@needs_toolchain
def test_bench_end_call_site_costs_a_move_and_a_taken_call(results):
    assert results("cortex-m4")["by_name"]["empty"] == 1 + (1 + P)  # M4 TRM table 3-1: MOV 1, BL 1+P


@needs_toolchain
def test_cortex_m33_uses_the_cortex_m4_table(results):
    assert results("cortex-m33")["cycles"] == results("cortex-m4")["cycles"]


@needs_toolchain
@pytest.mark.parametrize("name", sorted(M55_EXPECTED))
def test_cortex_m55_micro_benchmarks(results, name):
    expected, source = M55_EXPECTED[name]
    assert body(results("cortex-m55"), name) == expected, source


@needs_toolchain
@pytest.mark.parametrize("name", sorted(M7_EXPECTED))
def test_cortex_m7_dual_issue_approximation(results, name):
    expected, source = M7_EXPECTED[name]
    assert body(results("cortex-m7"), name) == expected, source


@needs_toolchain
def test_flash_wait_states_behind_the_art_cache_and_prefetcher(results):
    """Cortex-M4 with 5 wait states (timing.MEMORY: 16-byte lines, cache and prefetch). The fetch
    region's body starts 4 bytes into the line of its `bl bench_begin` (cached); its other 8 lines
    are new: with prefetch, each waits only for the part of the 5 wait states its predecessor did not
    cover: 3 ADD.W in line 0 -> 2 cycles for line 1, then 4 ADD.W a line -> 1 for each of lines 2-8.
    The second run finds every line cached. The data region misses the data cache on its 2 lines of
    constants once each (5 + 5), then hits."""
    zero, five = results("cortex-m4"), results("cortex-m4", flash_wait=5)
    assert body(five, "flash_fetch") == body(zero, "flash_fetch") + 2 + 7 * 1
    assert body(five, "flash_fetch_again") == body(zero, "flash_fetch_again")
    assert body(five, "flash_data") == body(zero, "flash_data") + 2 * 5


@needs_toolchain
def test_a_unified_cache_holds_the_constants_read_from_flash(results):
    """STM32U575 (4 wait states, 2-way ICACHE of 16-byte lines on the C-bus, which also carries the
    constants): the data region's 2 lines of constants miss once each (4 + 4), then hit; code the
    cache holds costs nothing more."""
    zero, u5 = results("cortex-m33"), results("cortex-m33", None, "stm32u575")
    assert body(u5, "flash_data") == body(zero, "flash_data") + 2 * 4
    assert body(u5, "flash_fetch_again") == body(zero, "flash_fetch_again")


@needs_toolchain
def test_timing_leaves_the_instruction_counts_exact(results):
    timed = results("cortex-m4")
    plain = toolchain.count_instructions("cortex-m4", timed["elf"])
    assert plain["insns"] == timed["insns"] and plain["total"] == timed["total"]
    assert "cycles" not in plain


def test_decoding_of_register_lists_branches_and_helium():
    core = timing.CORES["cortex-m4"]
    pop = timing.classify(0x100, 2, "pop", "{r4, r5, r6, pc}", core)
    assert (pop.kind, pop.cycles, pop.dst) == (timing.MULTI, 1 + 4, 0b1000000001110000)
    push = timing.classify(0x100, 4, "stmdb", "sp!, {r4, r5, r6, r7, r8, r9, sl, fp, lr}", core)
    assert push.cycles == 1 + 9 and push.dst == 0 and push.addr == 1 << 13
    assert timing.classify(0, 2, "bne.n", "1c <x>", core).kind == timing.BRANCH
    assert timing.classify(0, 4, "ldrd", "r2, r4, [r0, #8]", core).cycles == 3
    ldr = timing.classify(0, 4, "ldr.w", "r0, [r1, r2, lsl #2]", core)
    assert (ldr.kind, ldr.dst, ldr.addr) == (timing.LOAD, 1, 0b110)
    m55 = timing.CORES["cortex-m55"]
    assert timing.classify(0, 4, "vldrb.s16", "q0, [r0], #8", m55).kind == timing.VMEM
    assert timing.classify(0, 4, "vmlava.s16", "r2, q0, q0", m55).kind == timing.VMAC
    assert timing.classify(0, 4, "vadd.i8", "q0, q1, q2", m55).kind == timing.VALU
    assert timing.classify(0, 4, "letp", "lr, 1000006c <main+0x2c>", m55).kind == timing.LOOP_END
    assert timing.classify(0, 4, "vmov", "s0, r1", m55).kind == timing.ALU  # VFP, not Helium
    assert timing.cost_of("smladx") is timing.cost_of("smlad")
    assert timing.cost_of("addeq").kind == timing.ALU


def test_the_timing_document_is_generated_from_the_model():
    doc = Path(__file__).resolve().parent.parent / "docs" / "timing-model.md"
    assert doc.read_text() == timing.document(), "run python scripts/write_timing_doc.py"


@pytest.mark.parametrize("api", [1, 2])
def test_timed_plugin_under_both_plugin_api_versions(api, tmp_path):
    """The cycle model on the stand-in loaders of QEMU 7.2 (API 1) and 9.x (API 2) of
    tests/test_port.py, over its fixed guest trace: every instruction 1 cycle, each of the 8 jumps
    of the trace a refill of 2; the markers' cycles are tallied apart, like their instructions."""
    from tests.test_port import FAKE_TRACE_COUNTS, fake_host

    addresses = [0x10, 0x12, 0x14, 0x100, 0x20, 0x22, 0x24, 0x26, 0x200, 0x30]
    table = tmp_path / "timing.txt"
    table.write_text("param refill 2\n" + "".join(f"{a:x} 2 {timing.ALU} 1 0 0 0\n" for a in addresses))
    out = tmp_path / "counts.txt"
    result = subprocess.run(
        [
            fake_host(api, tmp_path),
            toolchain.build_insn_plugin(),
            "begin=0x100",
            "end=0x200",
            f"out={out}",
            f"timing={table}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert out.read_text() == "total 20\ncycles 36\nuntimed 0\nbegin 3 5\nend 7 11\nbegin 7 11\nend 15 23\n"
    counts = toolchain.parse_plugin_output(out.read_text())
    assert counts["insns"] == toolchain.parse_plugin_output(FAKE_TRACE_COUNTS)["insns"] == [4, 8]
    assert counts["cycles"] == [4 + 2, 4 + 2 + 4 + 2]


# The fake host's trace (tests/test_port.py) fetches, in 16-byte flash lines, 1 16 2 32 16 2 32 3
# (a repeated block in the same line fetches nothing). With 4 lines of cache and no prefetch:
# direct-mapped (line % 4) misses all but the second 2 (7 misses); 2 sets of 2 ways (LRU) thrash
# set 0 with 16, 2 and 32 (8 misses); one set of 4 ways keeps 16, 2 and 32 (5 misses).
@pytest.mark.parametrize("ways,misses", [(1, 7), (2, 8), (4, 5)])
def test_set_associative_lru_instruction_cache(ways, misses, tmp_path):
    assert _fake_trace_cycles(tmp_path, icache_lines=4, icache_ways=ways) == 36 + misses * 5


def test_free_fetch_bound_never_stalls(tmp_path):
    assert _fake_trace_cycles(tmp_path, icache_lines=4, icache_ways=1, free_fetch=1) == 36


def test_plugin_refuses_ways_that_do_not_divide_the_lines(tmp_path):
    with pytest.raises(AssertionError):
        _fake_trace_cycles(tmp_path, icache_lines=4, icache_ways=3)


def _fake_trace_cycles(tmp_path, **memory) -> int:
    """Total cycles of the fake host's trace, every instruction 1 cycle, refill 2, flash over all
    of it with 5 wait states and no prefetch, and the given cache parameters."""
    from tests.test_port import fake_host

    addresses = [0x10, 0x12, 0x14, 0x100, 0x20, 0x22, 0x24, 0x26, 0x200, 0x30]
    params = {"refill": 2, "flash_start": 0, "flash_end": 0x1000, "flash_wait": 5, "line_bytes": 16, **memory}
    table = tmp_path / "timing.txt"
    table.write_text(
        "".join(f"param {k} {v}\n" for k, v in params.items())
        + "".join(f"{a:x} 2 {timing.ALU} 1 0 0 0\n" for a in addresses)
    )
    out = tmp_path / "counts.txt"
    result = subprocess.run(
        [
            fake_host(1, tmp_path),
            toolchain.build_insn_plugin(),
            "begin=0x100",
            "end=0x200",
            f"out={out}",
            f"timing={table}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return toolchain.parse_plugin_output(out.read_text())["total_cycles"]


def test_named_parts_are_the_published_ones_with_their_documented_memory():
    l4, u5, h7 = (timing.PARTS[name] for name in ("stm32l4r5", "stm32u575", "stm32h7a3"))
    assert (l4.target, l4.memory.mhz, l4.memory.flash_wait) == ("cortex-m4", 120, 5)
    assert (u5.target, u5.memory.mhz, u5.memory.flash_wait, u5.memory.unified) == ("cortex-m33", 160, 4, True)
    assert (h7.target, h7.memory.mhz, h7.memory.flash_wait) == ("cortex-m7", 280, 6)
    for m7 in (h7.memory, timing.MEMORY["cortex-m7"]):  # Cortex-M7 TRM: 32-byte lines, 2-way I, 4-way D
        assert (m7.line_bytes, m7.icache_ways, m7.dcache_ways) == (32, 2, 4)
        assert m7.icache_lines * m7.line_bytes == m7.dcache_lines * m7.line_bytes == 16 * 1024
    assert timing.data_cache_bytes("cortex-m33", "stm32u575") == 8 * 1024  # unified: constants share the ICACHE
    assert timing.flash_wait_states("cortex-m7", None, "stm32h7a3") == 6
    assert timing.flash_wait_states("cortex-m7", 3, "stm32h7a3") == 3  # --flash-wait wins


def test_a_part_of_another_core_or_unknown_is_one_clear_error():
    from edgec.errors import EdgecError
    from edgec.targets.cores import get_target

    with pytest.raises(EdgecError, match="a cortex-m4 part, not a cortex-m7 one"):
        timing.on_part(get_target("cortex-m7"), "stm32l4r5")
    with pytest.raises(EdgecError, match="expected one of stm32l4r5"):
        timing.part_for("cortex-m4", "stm32f999")
    l4 = timing.on_part(get_target("cortex-m4"), "stm32l4r5")
    assert (l4.timing_part, l4.ram_bytes, l4.flash_bytes) == ("stm32l4r5", 640 * 1024, 2 * 1024 * 1024)


def test_sensitivity_reruns_only_what_can_change_the_estimate():
    by_name = {a.name: a for a in timing.SENSITIVITY}
    zero_wait = timing.TimingSetup("cortex-m55", 400, 0, None)
    assert [a.name for a in timing.SENSITIVITY if zero_wait.changed_by(a)] == [
        "IT folded (0 cycles)",
        "branch refill 1",
        "branch refill 3",
    ]
    f407 = timing.TimingSetup("cortex-m4", 168, 5, None)  # its ART is modelled direct-mapped already
    assert not f407.changed_by(by_name["caches direct-mapped"]) and f407.changed_by(by_name["caches fully associative"])
    assert not f407.changed_by(by_name["branch refill 1"].__class__("refill 2", refill=2))
    h7 = timing.TimingSetup("cortex-m7", 280, 6, None, "stm32h7a3")  # 2-way and 4-way vary; no prefetch, P = 1
    assert [a.name for a in timing.SENSITIVITY if not h7.changed_by(a)] == ["no prefetch", "branch refill 1"]


def test_sensitivity_varies_one_assumption_each():
    names = [a.name for a in timing.SENSITIVITY]
    assert len(set(names)) == len(names)
    assert any(a.associativity == "direct" for a in timing.SENSITIVITY)
    assert any(a.associativity == "full" for a in timing.SENSITIVITY)
    assert any(a.it_cycles == 0 for a in timing.SENSITIVITY) and any(a.free_fetch for a in timing.SENSITIVITY)
    core = timing.CORES["cortex-m4"]
    assert timing.classify(0, 2, "itt", "eq", core).it and not timing.classify(0, 2, "adds", "r0, #1", core).it
