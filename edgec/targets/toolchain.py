"""Building and running C programs for a target: arm-none-eabi-gcc cross builds against edgec's
bare-metal port (runtime_c/port), or clang ones (a target whose `compiler` is "clang": Debian's
clang for --target=arm-none-eabi, linked by ld.lld against the GCC toolchain's newlib), runs under
QEMU with semihosting, exact instruction counts through edgec's QEMU plugin, and flash/RAM sizes of
a build. Imports nothing of torch.

Objects are cached (see compile_object): a test session that builds many programs compiles the
shared runtime and port sources once per target and flag set.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from edgec.errors import EdgecError
from edgec.resources import data_dir
from edgec.targets.cores import Target, board_memory_map, get_target

PORT_DIR = data_dir("runtime_c") / "port"
PORT_SOURCES = (PORT_DIR / "startup.c", PORT_DIR / "semihost.c")
PLUGIN_SOURCE = PORT_DIR / "qemu_insn_plugin.c"

APT_INSTALL = "apt-get install -y --no-install-recommends gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm"
CLANG_APT_INSTALL = "apt-get install -y --no-install-recommends clang lld"
BASE_CFLAGS = ("-std=c99", "-ffunction-sections", "-fdata-sections")
LINK_FLAGS = ("-nostartfiles", "--specs=nano.specs", "-Wl,--gc-sections")
# clang links with ld.lld and no start files or libraries of its own (it has no newlib or
# compiler-rt for arm-none-eabi): newlib-nano's libc and libgcc come from the GCC toolchain.
CLANG_LINK_FLAGS = ("-fuse-ld=lld", "-nostdlib", "-Wl,--gc-sections")
QEMU_FLAGS = ("-nographic", "-monitor", "none", "-serial", "none", "-semihosting-config", "enable=on,target=native")
FAULT_STATUS = 3  # SEMIHOST_FAULT_STATUS in runtime_c/port/semihost.h


class ToolchainError(EdgecError):
    """A missing tool, a failed build or a failed/hung emulator run."""


class QemuTimeout(ToolchainError):
    """The program did not exit within the timeout (QEMU was killed)."""


# ---------------------------------------------------------------------------------------------
# Finding the tools


def find_arm_gcc() -> str | None:
    """Path of arm-none-eabi-gcc, or None."""
    return shutil.which("arm-none-eabi-gcc")


def find_qemu() -> str | None:
    """Path of qemu-system-arm, or None."""
    return shutil.which("qemu-system-arm")


def find_host_cc() -> str | None:
    """Path of the host C compiler ($CC, cc or gcc), or None."""
    for name in (os.environ.get("CC"), "cc", "gcc"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def require_cross_toolchain() -> str:
    """Path of arm-none-eabi-gcc; a ToolchainError saying how to install it if missing."""
    gcc = find_arm_gcc()
    if gcc is None:
        raise ToolchainError(f"arm-none-eabi-gcc not found; install the Arm toolchain (Debian/Ubuntu): {APT_INSTALL}")
    return gcc


def require_qemu() -> str:
    """Path of qemu-system-arm; a ToolchainError saying how to install it if missing."""
    qemu = find_qemu()
    if qemu is None:
        raise ToolchainError(f"qemu-system-arm not found; install it (Debian/Ubuntu): {APT_INSTALL}")
    return qemu


def require_clang() -> str:
    """Path of clang (and ld.lld, which it links with); a ToolchainError saying how to install them."""
    clang = shutil.which("clang")
    if clang is None or shutil.which("ld.lld") is None:
        raise ToolchainError(
            f"clang and ld.lld are needed for a clang build; install them (Debian/Ubuntu): {CLANG_APT_INSTALL}"
        )
    return clang


@functools.cache
def newlib_for(cflags: tuple[str, ...]) -> tuple[Path, Path, Path]:
    """(sysroot, libc_nano.a, libgcc.a) of the GCC toolchain's multilib for the code-generation
    flags `cflags`, as arm-none-eabi-gcc finds them: clang builds compile against that sysroot's
    headers and link those two libraries."""
    gcc = require_cross_toolchain()

    def ask(*question: str) -> str:
        return subprocess.run([gcc, *cflags, *question], capture_output=True, text=True, check=True).stdout.strip()

    libc = Path(ask("-print-file-name=libc_nano.a")).resolve()
    multilib = ask("-print-multi-directory")
    sysroot = libc.parent
    for _ in Path(multilib).parts if multilib != "." else ():
        sysroot = sysroot.parent
    return sysroot.parent, libc, Path(ask("-print-libgcc-file-name")).resolve()


def require_host_cc() -> str:
    cc = find_host_cc()
    if cc is None:
        raise ToolchainError("no host C compiler found (set $CC or install gcc)")
    return cc


def _compiler_for(target: Target) -> list[str]:
    """The command that compiles (and links) for `target`."""
    if target.is_host:
        return [require_host_cc()]
    if target.compiler == "clang":
        sysroot, _, _ = newlib_for(target.cflags)
        return [require_clang(), "--target=arm-none-eabi", f"--sysroot={sysroot}"]
    return [require_cross_toolchain()]


@functools.cache
def _compiler_identity(compiler: str) -> str:
    """The compiler's version banner: part of every object cache key."""
    result = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=False)
    return compiler + "\n" + result.stdout.splitlines()[0] if result.stdout else compiler


def default_cache_dir() -> Path:
    """$EDGEC_CACHE_DIR, else $XDG_CACHE_HOME/edgec, else ~/.cache/edgec."""
    if os.environ.get("EDGEC_CACHE_DIR"):
        return Path(os.environ["EDGEC_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "edgec"


# ---------------------------------------------------------------------------------------------
# Compiling with an object cache


def _sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _define_flags(defines: Mapping[str, object] | Iterable[str]) -> list[str]:
    """-D flags from {"N": 4} or ["N=4", "FLAG"]."""
    if isinstance(defines, Mapping):
        return [f"-D{name}" if value is None else f"-D{name}={value}" for name, value in defines.items()]
    return [f"-D{d}" for d in defines]


def _atomic_write(path: Path, data: bytes) -> None:
    """Write via a temporary file and rename, so concurrent builds never see a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _parse_depfile(text: str) -> list[Path]:
    """The prerequisites listed in a gcc -MMD dependency file."""
    body = text.replace("\\\n", " ")
    _, _, prerequisites = body.partition(": ")
    # Escaped spaces ("\ ") are part of a file name.
    names = re.split(r"(?<!\\)\s+", prerequisites.strip())
    return [Path(n.replace("\\ ", " ")) for n in names if n]


def _cached_object_is_fresh(obj: Path, manifest: Path) -> bool:
    """True if `obj` exists and every file it was compiled from still has the same content."""
    if not (obj.exists() and manifest.exists()):
        return False
    try:
        recorded = json.loads(manifest.read_text())
        return all(_sha256_file(Path(p)) == h for p, h in recorded.items())
    except (OSError, ValueError):
        return False


def compile_object(
    target: Target | str,
    source: Path,
    include_dirs: Sequence[Path] = (),
    defines: Mapping[str, object] | Iterable[str] = (),
    opt: str = "-O2",
    extra_cflags: Sequence[str] = (),
    cache_dir: Path | None = None,
) -> Path:
    """Compile one C file for `target`, or reuse the cached object.

    The cache key covers the compiler and its version, the target, all flags (include dirs,
    defines, optimisation, extra flags), the source path and the source content. Each object
    also records the content hash of every non-system header it included (gcc -MMD); a changed
    header makes the object stale. Safe to call from several threads or processes at once.
    """
    target = get_target(target)
    source = Path(source).resolve()
    compiler = _compiler_for(target)
    flags = [
        *target.cflags,
        *BASE_CFLAGS,
        opt,
        *_define_flags(defines),
        *(f"-I{Path(d).resolve()}" for d in (*include_dirs, PORT_DIR)),
        *extra_cflags,
    ]
    key_text = "\0".join(
        [_compiler_identity(compiler[0]), *compiler[1:], target.name, *flags, str(source), _sha256_file(source)]
    )
    key = hashlib.sha256(key_text.encode()).hexdigest()[:24]
    obj_dir = Path(cache_dir or default_cache_dir()) / "obj" / target.name
    obj = obj_dir / f"{source.stem}-{key}.o"
    manifest = obj.with_suffix(".deps.json")
    if _cached_object_is_fresh(obj, manifest):
        return obj

    obj_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=obj_dir, prefix=".build-") as tmp:
        tmp_obj, depfile = Path(tmp) / "out.o", Path(tmp) / "out.d"
        cmd = [*compiler, *flags, "-MMD", "-MF", str(depfile), "-c", str(source), "-o", str(tmp_obj)]
        _run_build(cmd, f"compiling {source} for {target.name}")
        deps = {str(p.resolve()): _sha256_file(p) for p in _parse_depfile(depfile.read_text())}
        _atomic_write(obj, tmp_obj.read_bytes())
        _atomic_write(manifest, json.dumps(deps, indent=0).encode())
    return obj


def _run_build(cmd: list[str], what: str) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ToolchainError(
            f"{what} failed (exit {result.returncode}):\n  {' '.join(cmd)}\n{result.stdout}{result.stderr}"
        )


def compile_objects(target: Target | str, sources: Sequence[Path], **kwargs) -> list[Path]:
    """compile_object for several sources in parallel (same keyword arguments)."""
    sources = list(sources)
    if len(sources) <= 1:
        return [compile_object(target, s, **kwargs) for s in sources]
    with ThreadPoolExecutor(max_workers=min(len(sources), os.cpu_count() or 1)) as pool:
        return list(pool.map(lambda s: compile_object(target, s, **kwargs), sources))


def cross_compile(
    target: Target | str,
    sources: Sequence[Path],
    include_dirs: Sequence[Path],
    out_elf: Path,
    defines: Mapping[str, object] | Iterable[str] = (),
    opt: str = "-O2",
    extra_cflags: Sequence[str] = (),
    *,
    cache_dir: Path | None = None,
    stack_size: int | None = None,
    extra_ldflags: Sequence[str] = (),
) -> Path:
    """Compile `sources` (one of them defines main()) and link them into `out_elf`.

    Arm targets link with the port (startup.c, semihost.c; runtime_c/port is always on the
    include path, so programs can #include "semihost.h") and the board's linker script, with
    `-nostartfiles --specs=nano.specs -Wl,--gc-sections` (clang: ld.lld and the same newlib-nano,
    CLANG_LINK_FLAGS). `stack_size` (bytes) overrides the
    linker script's 8 KiB default. The host target builds a native executable without the port.
    `defines`, `opt` and `extra_cflags` apply to the port objects too. Returns `out_elf`.
    """
    target = get_target(target)
    out_elf = Path(out_elf)
    all_sources = [Path(s) for s in sources]
    link_flags: list[str] = []
    libraries: list[str] = []
    if not target.is_host:
        if target.linker_script is None:
            raise ToolchainError(f"target {target.name} has no linker script")
        all_sources += PORT_SOURCES
        clang = target.compiler == "clang"
        link_flags += [*(CLANG_LINK_FLAGS if clang else LINK_FLAGS), "-T", str(PORT_DIR / target.linker_script)]
        if stack_size is not None:
            link_flags.append(f"-Wl,--defsym=__stack_size={int(stack_size)}")
        if clang:
            libraries += [str(library) for library in newlib_for(target.cflags)[1:]]
    objects = compile_objects(
        target,
        all_sources,
        include_dirs=include_dirs,
        defines=defines,
        opt=opt,
        extra_cflags=extra_cflags,
        cache_dir=cache_dir,
    )
    out_elf.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        *_compiler_for(target),
        *target.cflags,
        opt,
        *map(str, objects),
        *link_flags,
        *extra_ldflags,
        *libraries,
        "-o",
        str(out_elf),
    ]
    _run_build(cmd, f"linking {out_elf} for {target.name}")
    return out_elf


def board_regions(target: Target | str) -> dict[str, int]:
    """The memory regions (name -> bytes) of the target's linker script: what its QEMU board, or
    the generic layout of a target without one, gives a program."""
    return {name: length for name, (_, length) in board_memory_map(target).items()}


# ---------------------------------------------------------------------------------------------
# Running under QEMU


@dataclass
class QemuResult:
    """Like subprocess.CompletedProcess. Semihosting text (SYS_WRITE0) arrives on stderr."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def _qemu_option_value(text: str) -> str:
    """QEMU splits option values at commas; a literal comma is written twice."""
    return str(text).replace(",", ",,")


def run_qemu(
    target: Target | str,
    elf: Path,
    timeout: float = 60,
    cwd: Path | None = None,
    plugin_out: Path | None = None,
    cache_dir: Path | None = None,
    profile_out: Path | None = None,
    timing_table: Path | None = None,
) -> QemuResult:
    """Run `elf` on the target's QEMU board; semihosting file paths are relative to `cwd`.

    The exit status is main's return value (3 after a fault). With `plugin_out`, edgec's
    instruction-count plugin writes its results there (see count_instructions), and with
    `profile_out` too how often each instruction address ran, and with `timing_table` (see
    edgec.targets.timing.write_timing_table) the modelled cycles too. Raises
    QemuTimeout if the program has not exited after `timeout` seconds.
    """
    target = get_target(target)
    if target.qemu_machine is None:
        raise ToolchainError(f"target {target.name} has no QEMU board; it can be compiled but not run")
    elf = Path(elf).resolve()
    cmd = [require_qemu(), "-M", target.qemu_machine, "-cpu", target.qemu_cpu, *QEMU_FLAGS, "-kernel", str(elf)]
    if plugin_out is not None:
        cmd += [
            "-plugin",
            _plugin_option(elf, Path(plugin_out).resolve(), cache_dir, profile_out, timing_table),
            "-d",
            "plugin",
        ]
    start = time.monotonic()
    try:
        result = subprocess.run(
            cmd, capture_output=True, stdin=subprocess.DEVNULL, cwd=cwd, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise QemuTimeout(
            f"{elf.name} on {target.name} did not exit within {timeout} s (killed). Output so far: {_text(exc.stderr)}"
        ) from None
    return QemuResult(cmd, result.returncode, _text(result.stdout), _text(result.stderr), time.monotonic() - start)


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")


# ---------------------------------------------------------------------------------------------
# Instruction counts


def build_insn_plugin(cache_dir: Path | None = None) -> Path:
    """The instruction-count plugin as a shared library, compiled once per plugin source."""
    digest = _sha256_file(PLUGIN_SOURCE)[:16]
    lib = Path(cache_dir or default_cache_dir()) / "plugin" / f"libedgec_insn-{digest}.so"
    if lib.exists():
        return lib
    lib.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=lib.parent, prefix=".build-") as tmp:
        tmp_lib = Path(tmp) / lib.name
        _run_build(
            [
                require_host_cc(),
                "-shared",
                "-fPIC",
                "-O2",
                "-std=c99",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-fvisibility=hidden",
                str(PLUGIN_SOURCE),
                "-o",
                str(tmp_lib),
            ],
            "building the QEMU instruction-count plugin",
        )
        os.replace(tmp_lib, lib)
    return lib


def qemu_version() -> str:
    """The version qemu-system-arm reports ("7.2.22"), or "(unknown version)"."""
    result = subprocess.run([require_qemu(), "--version"], capture_output=True, text=True, check=False)
    found = re.search(r"version (\d+\.\d+(?:\.\d+)?)", result.stdout)
    return found.group(1) if found else "(unknown version)"


# What QEMU or the plugin print when the plugin cannot be loaded or installed: an API version
# outside the QEMU build's range, a QEMU without plugin support, or the plugin refusing the API.
_PLUGIN_LOAD_FAILURE = re.compile(
    r"API version|[Cc]ould not load plugin|TCG plugin|unsupported QEMU plugin API|"
    r"-plugin"
)


def plugin_load_failure(stderr: str) -> str | None:
    """The line of a QEMU run's stderr saying that the instruction-count plugin was refused, if any."""
    return next((line.strip() for line in stderr.splitlines() if _PLUGIN_LOAD_FAILURE.search(line)), None)


def elf_function(elf: Path, name: str) -> tuple[int, int] | None:
    """(address, size) of function `name` in `elf`, or None. The Thumb bit is cleared."""
    from elftools.elf.elffile import ELFFile

    with open(elf, "rb") as f:
        symtab = ELFFile(f).get_section_by_name(".symtab")
        if symtab is None:
            return None
        for sym in symtab.get_symbol_by_name(name) or ():
            if sym["st_info"]["type"] == "STT_FUNC":
                return sym["st_value"] & ~1, sym["st_size"]
    return None


def _plugin_option(
    elf: Path, out: Path, cache_dir: Path | None, profile_out: Path | None = None, timing_table: Path | None = None
) -> str:
    parts = [_qemu_option_value(build_insn_plugin(cache_dir)), f"out={_qemu_option_value(out)}"]
    if profile_out is not None:
        parts.append(f"pcs={_qemu_option_value(Path(profile_out).resolve())}")
    if timing_table is not None:
        parts.append(f"timing={_qemu_option_value(Path(timing_table).resolve())}")
    for marker in ("begin", "end"):
        found = elf_function(elf, f"bench_{marker}")
        if found is not None:  # --gc-sections drops markers a program never calls
            address, size = found
            parts += [f"{marker}={address:#x}", f"{marker}_size={max(size, 2)}"]
    return ",".join(parts)


def parse_plugin_output(text: str) -> dict:
    """{"total": N, "regions": [(begin, end), ...], "insns": [end - begin, ...]}; from a timed run
    also "total_cycles" (every instruction, markers included), "untimed" (executed instructions
    the timing table did not know, charged 1 cycle) and "cycles": [cycles of each region].

    Marker entries must alternate begin, end (regions do not nest)."""
    total = None
    totals: dict[str, int] = {}
    events: list[tuple[str, int]] = []
    event_cycles: list[int] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        word, value, *cycles = line.split()
        if word == "total":
            total = int(value)
        elif word in ("cycles", "untimed"):
            totals[word] = int(value)
        else:
            events.append((word, int(value)))
            event_cycles += [int(c) for c in cycles]
    if total is None:
        raise ToolchainError("instruction-count plugin wrote no total")
    labels = [word for word, _ in events]
    if labels != ["begin", "end"] * (len(events) // 2):
        raise ToolchainError(f"bench_begin/bench_end calls do not alternate: {' '.join(labels)}")
    regions = [(events[i][1], events[i + 1][1]) for i in range(0, len(events), 2)]
    counts = {"total": total, "regions": regions, "insns": [end - begin for begin, end in regions]}
    if "cycles" in totals:
        if len(event_cycles) != len(events):
            raise ToolchainError("the plugin's timed output lacks the cycles of some marker entries")
        counts.update(
            total_cycles=totals["cycles"],
            untimed=totals.get("untimed", 0),
            cycles=[event_cycles[i + 1] - event_cycles[i] for i in range(0, len(events), 2)],
        )
    return counts


def count_instructions(
    target: Target | str,
    elf: Path,
    timeout: float = 60,
    cwd: Path | None = None,
    cache_dir: Path | None = None,
    expect_status: int | None = 0,
    profile: bool = False,
    timing=None,
) -> dict:
    """Run `elf` under QEMU with the instruction-count plugin.

    Returns {"total": all instructions executed, "regions": [(begin, end), ...] the counts at
    each bench_begin/bench_end pair in execution order, "insns": [end - begin, ...],
    "result": the QemuResult}. A region counts the instructions after bench_begin returns up to
    and including the branch into bench_end (so its call site: usually `movs r0, #id` + `bl`,
    2 instructions); the marker functions' own instructions are never counted in a region.
    With `profile`, also "functions": {function: instructions} over the whole run (see
    instructions_by_function). With `timing` (an edgec.targets.timing.TimingSetup), also the modelled
    cycles: "total_cycles", "untimed" and "cycles" (per region, like "insns"); see edgec/targets/timing.py.
    Raises ToolchainError if the exit status differs from `expect_status` (None: any).
    """
    with tempfile.TemporaryDirectory(prefix="edgec-insn-") as tmp:
        out = Path(tmp) / "counts.txt"
        pcs = Path(tmp) / "pcs.txt" if profile else None
        table = None
        if timing is not None:
            from edgec.targets.timing import write_timing_table

            table = write_timing_table(elf, timing, Path(tmp) / "timing.txt")
        result = run_qemu(
            target,
            elf,
            timeout=timeout,
            cwd=cwd,
            plugin_out=out,
            cache_dir=cache_dir,
            profile_out=pcs,
            timing_table=table,
        )
        refused = None if out.exists() else plugin_load_failure(result.stderr)
        if refused is not None:
            raise ToolchainError(
                f"QEMU {qemu_version()} cannot run edgec's instruction-count plugin "
                f"({refused}); it supports QEMU's plugin API versions 1 (QEMU 7.2 to 8.2) "
                f"and 2 on (QEMU 9.x)"
            )
        if expect_status is not None and result.returncode != expect_status:
            raise ToolchainError(
                f"{Path(elf).name} exited with {result.returncode}, expected {expect_status}:\n{result.stderr}"
            )
        if not out.exists():
            raise ToolchainError(f"instruction-count plugin wrote nothing:\n{result.stderr}")
        counts = parse_plugin_output(out.read_text())
        if pcs is not None:
            counts["functions"] = instructions_by_function(elf, pcs.read_text())
    counts["result"] = result
    return counts


def instructions_by_function(elf: Path, pcs: str) -> dict[str, int]:
    """The plugin's per-address counts ("ADDRESS COUNT" lines) summed per function of `elf`,
    most first; addresses in no function symbol count as "?"."""
    from elftools.elf.elffile import ELFFile

    with open(elf, "rb") as f:
        symtab = ELFFile(f).get_section_by_name(".symtab")
        functions = sorted(
            (sym["st_value"] & ~1, sym["st_size"], sym.name)
            for sym in symtab.iter_symbols()
            if sym["st_info"]["type"] == "STT_FUNC" and sym["st_size"] > 0
        )
    starts = [start for start, _, _ in functions]
    totals: dict[str, int] = {}
    for line in pcs.split("\n"):
        if not line.strip():
            continue
        address, count = (int(field, 0) for field in line.split())
        index = bisect.bisect_right(starts, address) - 1
        start, size, name = functions[index] if index >= 0 else (0, 0, "?")
        name = name if start <= address < start + size else "?"
        totals[name] = totals.get(name, 0) + count
    return dict(sorted(totals.items(), key=lambda item: (-item[1], item[0])))


# ---------------------------------------------------------------------------------------------
# Sizes


def elf_memory(elf: Path) -> dict:
    """Flash and RAM bytes of a linked bare-metal ELF, from its allocated sections.

    Read-only sections (vectors, code, constants) count as flash; initialised writable data
    (.data) counts as flash (its load image) and RAM; NOBITS sections (.bss, .stack) count as
    RAM. Returns {"flash_bytes", "ram_bytes", "text", "rodata", "data", "bss", "stack"}, with
    "text" the executable sections and "rodata" the other read-only ones (vector table included).
    """
    from elftools.elf.constants import SH_FLAGS
    from elftools.elf.elffile import ELFFile

    sizes = dict.fromkeys(("text", "rodata", "data", "bss", "stack"), 0)
    with open(elf, "rb") as f:
        for section in ELFFile(f).iter_sections():
            flags = section["sh_flags"]
            if not flags & SH_FLAGS.SHF_ALLOC or section["sh_size"] == 0:
                continue
            if section.name == ".stack":
                kind = "stack"
            elif section["sh_type"] == "SHT_NOBITS":
                kind = "bss"
            elif flags & SH_FLAGS.SHF_WRITE:
                kind = "data"
            elif flags & SH_FLAGS.SHF_EXECINSTR:
                kind = "text"
            else:
                kind = "rodata"
            sizes[kind] += section["sh_size"]
    return {
        "flash_bytes": sizes["text"] + sizes["rodata"] + sizes["data"],
        "ram_bytes": sizes["data"] + sizes["bss"] + sizes["stack"],
        **sizes,
    }
