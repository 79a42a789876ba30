"""The bare-metal port and toolchain layer, for real: cross-compiled programs run under QEMU.

Programs live in tests/data/port/. Each QEMU run takes about 50 ms; objects are cached per session.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from edgec.targets import toolchain
from edgec.targets.cores import TARGETS, UnknownTargetError, get_target, parse_size
from tests.device_support import needs_toolchain

DATA = Path(__file__).resolve().parent / "data" / "port"
RUNNABLE = ["cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55"]
FAULT_KINDS = ["bad_address", "undefined_instruction", "deep_recursion", "oversized_frame"]  # fault.c


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("edgec-cache")


def build(target, program, out_dir, cache_dir, **kwargs):
    return toolchain.cross_compile(
        target, [DATA / program], [], out_dir / f"{target}.elf", cache_dir=cache_dir, **kwargs
    )


def expected_output(data: bytes) -> bytes:
    n = len(data)
    xored = bytes(b ^ ((i * 7 + 1) & 0xFF) for i, b in enumerate(data))
    return xored + sum(data).to_bytes(4, "little") + (n // 2).to_bytes(4, "little")


@needs_toolchain
@pytest.mark.parametrize("target", RUNNABLE)
def test_file_io_exit_status_and_startup(target, tmp_path, cache_dir):
    elf = build(target, "xor_file.c", tmp_path, cache_dir, extra_cflags=["-Wall", "-Wextra", "-Werror"])
    data = np.random.default_rng(1).integers(0, 256, 1003, dtype=np.uint8).tobytes()
    (tmp_path / "input.bin").write_bytes(data)

    result = toolchain.run_qemu(target, elf, timeout=20, cwd=tmp_path)

    assert result.returncode == 7, result.stderr
    assert "processed 1003 bytes" in result.stderr
    assert (tmp_path / "output.bin").read_bytes() == expected_output(data)


@needs_toolchain
@pytest.mark.parametrize("target", RUNNABLE)
def test_instruction_counts_are_exact_and_linear(target, tmp_path, cache_dir):
    n = 100
    elf = build(target, "bench_loop.c", tmp_path, cache_dir, defines={"N": n})

    first = toolchain.count_instructions(target, elf, timeout=20, cache_dir=cache_dir)
    second = toolchain.count_instructions(target, elf, timeout=20, cache_dir=cache_dir)

    assert first["regions"] == second["regions"] and first["total"] == second["total"]
    once, twice, thrice, empty = first["insns"]
    per_n = twice - once
    assert per_n > 0 and thrice - twice == per_n  # N more iterations cost the same each time
    assert per_n % n == 0  # a whole number of instructions per iteration
    assert once >= per_n  # region 0 holds N iterations plus overhead
    assert empty == 2  # only `movs r0, #3` and `bl bench_end`
    assert first["total"] > once + twice + thrice


@needs_toolchain
@pytest.mark.parametrize("target", ["cortex-m3", "cortex-m33"])
@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_fault_exits_instead_of_hanging(target, kind, tmp_path, cache_dir):
    elf = build(
        target,
        "fault.c",
        tmp_path,
        cache_dir,
        defines={"FAULT_KIND": FAULT_KINDS.index(kind)},
        extra_cflags=["-Wall", "-Wextra", "-Werror"],
    )

    result = toolchain.run_qemu(target, elf, timeout=10)

    assert result.returncode == toolchain.FAULT_STATUS, result.stderr
    assert "HardFault" in result.stderr
    assert result.seconds < 5


@needs_toolchain
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
def test_stack_used_by_a_function_is_measured(target, tmp_path, cache_dir):
    frame = 512
    elf = build(
        target,
        "stack_depth.c",
        tmp_path,
        cache_dir,
        defines={"EDGEC_REPORT_STACK": None, "FRAME_BYTES": frame},
        extra_cflags=["-Wall", "-Wextra", "-Werror"],
    )

    result = toolchain.run_qemu(target, elf, timeout=10)

    assert result.returncode == sum(range(256)) * 2 & 0x7F, result.stderr
    used = int(re.search(r"used (\d+)", result.stderr).group(1))
    assert frame <= used <= frame + 64 + 32  # its frame, a few saved registers, at most 64 unpainted bytes


@needs_toolchain
def test_cortex_m0plus_compiles_and_links_but_does_not_run(tmp_path, cache_dir):
    elf = build("cortex-m0plus", "xor_file.c", tmp_path, cache_dir, extra_cflags=["-Wall", "-Wextra", "-Werror"])

    header = elf.read_bytes()[:20]
    assert header[:4] == b"\x7fELF" and int.from_bytes(header[18:20], "little") == 40  # EM_ARM
    memory = toolchain.elf_memory(elf)
    target = get_target("cortex-m0plus")
    assert 0 < memory["flash_bytes"] <= target.flash_bytes
    assert memory["ram_bytes"] <= target.ram_bytes
    with pytest.raises(toolchain.ToolchainError, match="no QEMU board"):
        toolchain.run_qemu(target, elf)


@needs_toolchain
def test_elf_memory_counts_sections_and_stack(tmp_path, cache_dir):
    source = tmp_path / "sizes.c"
    source.write_text(
        "#include <stdint.h>\n"
        "const uint8_t table[5000] = {1, 2, 3, 4};\n"
        "uint8_t arena[10000];\n"
        "uint32_t counter = 3;\n"
        "int main(void) { arena[counter] = table[counter]; return arena[3]; }\n"
    )
    small = toolchain.cross_compile(
        "cortex-m4", [source], [], tmp_path / "small.elf", cache_dir=cache_dir, stack_size=4096
    )
    large = toolchain.cross_compile(
        "cortex-m4", [source], [], tmp_path / "large.elf", cache_dir=cache_dir, stack_size=8192
    )

    small_memory, large_memory = toolchain.elf_memory(small), toolchain.elf_memory(large)
    assert small_memory["rodata"] >= 5000 and small_memory["bss"] >= 10000
    assert small_memory["data"] >= 4 and small_memory["stack"] == 4096
    assert large_memory["ram_bytes"] - small_memory["ram_bytes"] == 4096
    assert large_memory["flash_bytes"] == small_memory["flash_bytes"]
    assert toolchain.run_qemu("cortex-m4", small, timeout=10).returncode == 4


@needs_toolchain
def test_object_cache_reuses_objects_and_notices_header_changes(tmp_path, cache_dir):
    header = tmp_path / "value.h"
    source = tmp_path / "uses_header.c"
    header.write_text("#define VALUE 1\n")
    source.write_text('#include "value.h"\nint value(void) { return VALUE; }\n')

    first = toolchain.compile_object("cortex-m4", source, cache_dir=cache_dir)
    stamp, content = first.stat().st_mtime_ns, first.read_bytes()
    time.sleep(0.01)
    again = toolchain.compile_object("cortex-m4", source, cache_dir=cache_dir)
    assert again == first and again.stat().st_mtime_ns == stamp

    header.write_text("#define VALUE 123456\n")
    changed = toolchain.compile_object("cortex-m4", source, cache_dir=cache_dir)
    assert changed.read_bytes() != content
    other_flags = toolchain.compile_object("cortex-m4", source, cache_dir=cache_dir, opt="-O0")
    assert other_flags != changed


def test_missing_cross_toolchain_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(toolchain.ToolchainError, match="apt-get install .*gcc-arm-none-eabi"):
        toolchain.require_cross_toolchain()


def test_target_table():
    assert set(TARGETS) == {"host", "cortex-m0plus", *RUNNABLE}
    with pytest.raises(ValueError, match="valid targets: host, cortex-m0plus, cortex-m3"):
        get_target("cortex-m85")
    with pytest.raises(UnknownTargetError):
        get_target("m4")
    m55 = get_target("cortex-m55")
    assert m55.mve and m55.dsp and m55.qemu_machine == "mps3-an547" and m55.ram_bytes == 512 * 1024
    assert not get_target("cortex-m3").dsp and get_target("cortex-m0plus").qemu_machine is None
    for target in TARGETS.values():
        if target.linker_script:
            assert (toolchain.PORT_DIR / target.linker_script).exists()


def test_parse_size():
    assert parse_size("256K") == 262144
    assert parse_size("1M") == parse_size("1MiB") == 1048576
    assert parse_size("4096") == parse_size(4096) == 4096
    with pytest.raises(ValueError):
        parse_size("12 parsecs")


# --- the instruction-count plugin across QEMU's plugin API versions -----------------------------
# This machine's QEMU is 7.2 (API version 1); tests/data/port/fake_plugin_host.c stands in for
# the loaders of other versions: QEMU 9.x's (only versions 2 on, per-vCPU scoreboards) and one
# with neither inline API. Each runs the same guest trace (fake_plugin_host.c: 16 counted
# instructions, two regions of 4 and 8, the markers run 4 times).
FAKE_HOST = DATA / "fake_plugin_host.c"
FAKE_TRACE_COUNTS = "total 20\nbegin 3\nend 7\nbegin 7\nend 15\n"


def fake_host(api: int, tmp_path: Path) -> Path:
    host = tmp_path / f"host{api}"
    subprocess.run(
        [
            toolchain.require_host_cc(),
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-rdynamic",
            f"-DHOST_API={api}",
            str(FAKE_HOST),
            "-o",
            str(host),
            "-ldl",
        ],
        check=True,
        capture_output=True,
    )
    return host


@pytest.mark.parametrize("api,version", [(1, 1), (2, 2)])
def test_plugin_declares_the_api_version_its_qemu_accepts_and_counts_alike(api, version, tmp_path, cache_dir):
    plugin = toolchain.build_insn_plugin(cache_dir)
    out, pcs = tmp_path / "counts.txt", tmp_path / "pcs.txt"
    result = subprocess.run(
        [fake_host(api, tmp_path), plugin, "begin=0x100", "end=0x200", f"out={out}", f"pcs={pcs}"],
        capture_output=True,
        text=True,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"version {version}\n"
    assert out.read_text() == FAKE_TRACE_COUNTS
    assert toolchain.parse_plugin_output(out.read_text())["insns"] == [4, 8]
    assert sorted(pcs.read_text().split("\n")[:-1]) == sorted(
        ["0x10 1", "0x12 1", "0x14 1", "0x100 2", "0x20 3", "0x22 3", "0x24 3", "0x26 3", "0x200 2", "0x30 1"]
    )


def test_plugin_refuses_a_qemu_without_either_api_in_one_line(tmp_path, cache_dir):
    plugin = toolchain.build_insn_plugin(cache_dir)
    result = subprocess.run(
        [fake_host(0, tmp_path), plugin, "begin=0x100", "end=0x200", f"out={tmp_path / 'x'}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 3
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("edgec insn plugin: unsupported QEMU plugin API (versions 0 to 1)")
    assert toolchain.plugin_load_failure(result.stderr) == result.stderr.strip()


@needs_toolchain
def test_a_qemu_that_refuses_the_plugin_is_one_clear_error(tmp_path, cache_dir, monkeypatch):
    """A QEMU whose plugin API does not take the plugin (here a stand-in for a future QEMU with
    minimum version 3) fails edgec's counting with one line naming the QEMU version."""
    elf = build("cortex-m4", "bench_loop.c", tmp_path, cache_dir, defines={"N": 3})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_qemu = bin_dir / "qemu-system-arm"
    fake_qemu.write_text(
        '#!/bin/sh\nif [ "$1" = --version ]; then echo "QEMU emulator version 11.0.0"; exit 0; fi\n'
        'echo "qemu-system-arm: -plugin x: Could not load plugin x: plugin requires API version 2, '
        'but this QEMU supports only a minimum version of 3" >&2\nexit 1\n'
    )
    fake_qemu.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    with pytest.raises(toolchain.ToolchainError) as error:
        toolchain.count_instructions("cortex-m4", elf, timeout=20, cache_dir=cache_dir)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(
        "QEMU 11.0.0 cannot run edgec's instruction-count plugin (qemu-system-arm: -plugin x: "
        "Could not load plugin x: plugin requires API version 2"
    )
