"""Run a generated model directory on an emulated Cortex-M: cross-compile it with a bare-metal
driver (templates/target_main.c.j2), run it under QEMU and read its outputs back (every layer's
arena writes checked), count the instructions each layer executes (edgec bench), or measure the RAM
the model needs besides its arena.

Samples travel as host files over semihosting: the driver reads int8 inputs from INPUTS_FILE and
writes int8 outputs to OUTPUTS_FILE, both in the build directory (QEMU's working directory), so
one QEMU run serves any number of samples. Imports nothing of torch.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import jinja2
import numpy as np

from edgec.backend.codegen import TEMPLATES
from edgec.errors import EdgecError
from edgec.targets import cmsis_nn_build, timing, toolchain
from edgec.targets.cores import TARGETS, Target
from edgec.targets.timing import TimingSetup

INPUTS_FILE = "inputs.bin"
OUTPUTS_FILE = "outputs.bin"
WARNING_FLAGS = ("-Wall", "-Wextra", "-Werror", "-pedantic")
# Emulated guests run 400-750 million instructions a second; allow for ~100 per MAC.
QEMU_SECONDS_PER_MAC = 100 / 400e6
QEMU_MIN_TIMEOUT = 30.0
LAYER_MARKER = re.compile(r"EDGEC_LAYER_BEGIN\((\d+)\);")
PROFILE_ROWS = 15  # functions format_table lists with a profile
# How the counts are taken, for every bench report.
COUNTED = (
    "instructions executed inside each layer's EDGEC_LAYER_BEGIN/END markers during one "
    "invoke, summed: kernel calls and their argument set-up; start-up, the test driver and "
    "the few instructions of invoke's own prologue are not counted"
)
# What the cycles are, for every bench report with them.
CYCLE_MODEL = (
    "an estimate: the same instructions timed by edgec's model of the core and its memory system "
    "(docs/timing-model.md); instructions are the exact, model-free figure"
)


def require_runnable(target: Target) -> None:
    if not target.can_run:
        runnable = ", ".join(t.name for t in TARGETS.values() if t.can_run)
        raise EdgecError(f"{target.name} has no emulated board to run on (targets that run under QEMU: {runnable})")


def model_sources(model_dir: Path, name: str) -> list[Path]:
    """The C files of a generated directory, as its edgec.mk lists them."""
    runtime = sorted((model_dir / "runtime" / "src").rglob("*.c"))
    return [model_dir / f"{name}.c", model_dir / f"{name}_weights.c", *runtime]


def model_include_dirs(model_dir: Path, report: dict) -> list[Path]:
    """The include path of a generated directory (`report`: its report.json), CMSIS-NN's headers
    with --kernels cmsis-nn."""
    library = report.get("cmsis_nn")
    return [model_dir, model_dir / "runtime" / "include", *([Path(library["dir"]) / "Include"] if library else [])]


def library_objects(target: Target, report: dict) -> list[Path]:
    """The objects of the kernel library the generated code links besides its own runtime/ (CMSIS-NN's
    with --kernels cmsis-nn, compiled from the checkout the directory was generated with)."""
    library = report.get("cmsis_nn")
    if not library:
        return []
    root = Path(library["dir"])
    if not (root / "Include" / "arm_nnfunctions.h").is_file():
        raise EdgecError(
            f"the model was generated with --kernels cmsis-nn from {root}, which is gone; "
            f"regenerate it with CMSIS_NN_DIR set to a CMSIS-NN checkout"
        )
    return cmsis_nn_build.objects(target, root)


# What a program is built for: "verify" checks every layer's writes (EDGEC_CHECK_WRITES), "bench"
# brackets the layers for instruction counting, "memory" measures the stack one invoke uses.
BUILD_DEFINES = {"verify": ("EDGEC_CHECK_WRITES",), "bench": ("EDGEC_BENCH",), "memory": ("EDGEC_REPORT_STACK",)}
INVOKE_STACK = re.compile(r"invoke_stack_bytes (\d+)")


def build_program(target: Target, model_dir: Path, name: str, build_dir: Path, *, purpose: str = "verify") -> Path:
    """The model directory and the semihosting driver, cross-compiled and linked into one ELF
    built for `purpose` (a BUILD_DEFINES key)."""
    build_dir.mkdir(parents=True, exist_ok=True)
    driver = build_dir / "target_main.c"
    template = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined, keep_trailing_newline=True
    ).get_template("target_main.c.j2")
    report = read_report(model_dir)
    driver.write_text(
        template.render(
            name=name,
            NAME=name.upper(),
            inputs_file=INPUTS_FILE,
            outputs_file=OUTPUTS_FILE,
            inputs=report["inputs"],
            outputs=report["outputs"],
            stream_input=report.get("stream_input"),
        )
    )
    try:
        return toolchain.cross_compile(
            target,
            [driver, *model_sources(model_dir, name)],
            model_include_dirs(model_dir, report),
            build_dir / f"{name}_{purpose}.elf",
            defines=BUILD_DEFINES[purpose],
            extra_cflags=WARNING_FLAGS,
            extra_ldflags=[str(o) for o in library_objects(target, report)],
        )
    except toolchain.ToolchainError as exc:
        overflow = REGION_OVERFLOW.search(str(exc))
        if overflow is None:
            raise
        raise EdgecError(board_overflow_message(target, overflow.group(1), int(overflow.group(2)))) from None


# The linker's complaint when a program does not fit a memory region of the board's linker script.
REGION_OVERFLOW = re.compile(r"region `(\w+)' overflowed by (\d+) bytes")


def board_overflow_message(target: Target, region: str, excess: int) -> str:
    """One line for a model program that does not fit the memory of the QEMU board emulating
    `target` (which may be smaller than a --ram/--flash budget, made for a real part)."""
    size = toolchain.board_regions(target).get(region)
    budget = target.ram_bytes if region == "RAM" else target.flash_bytes
    beyond = (
        f"; the budget of {budget:,} B (--ram/--flash) is larger than the board, which can only run models that fit it"
        if budget is not None and size is not None and budget > size
        else ""
    )
    return (
        f"the model program does not fit QEMU's {target.qemu_machine} board for {target.name}: its {region} "
        f"({size:,} B) overflows by {excess:,} B{beyond}"
    )


def qemu_timeout(macs: int, samples: int) -> float:
    return QEMU_MIN_TIMEOUT + samples * macs * QEMU_SECONDS_PER_MAC


def _write_inputs(build_dir: Path, inputs: np.ndarray) -> None:
    (build_dir / INPUTS_FILE).write_bytes(np.ascontiguousarray(inputs, dtype=np.int8).tobytes())
    (build_dir / OUTPUTS_FILE).unlink(missing_ok=True)


def _read_outputs(build_dir: Path, samples: int, output_size: int) -> np.ndarray:
    data = (build_dir / OUTPUTS_FILE).read_bytes()
    if len(data) != samples * output_size:
        raise EdgecError(f"the target wrote {len(data)} output bytes, expected {samples} x {output_size}")
    return np.frombuffer(data, dtype=np.int8).reshape(samples, output_size)


def _check_exit(result: toolchain.QemuResult, target: Target) -> None:
    if result.returncode != 0:
        message = " ".join(result.stderr.split())[:300]
        raise EdgecError(f"the model program failed on {target.name} (exit {result.returncode}): {message}")


def run_model(target: Target, model_dir: Path, name: str, inputs: np.ndarray, build_dir: Path) -> np.ndarray:
    """The model's int8 outputs on `target` for int8 `inputs` ([samples, input_size]), from one
    QEMU run."""
    require_runnable(target)
    report = read_report(model_dir)
    elf = build_program(target, model_dir, name, build_dir)
    _write_inputs(build_dir, inputs)
    result = toolchain.run_qemu(target, elf, timeout=qemu_timeout(report["macs"], len(inputs)), cwd=build_dir)
    _check_exit(result, target)
    return _read_outputs(build_dir, len(inputs), output_size(model_dir, name))


# ---------------------------------------------------------------------------------------------
# RAM besides the arena


@dataclass
class RamBeyondArena:
    """What a model needs in RAM on a target besides its arena."""

    invoke_stack_bytes: int  # the deepest stack one invoke used (QEMU, painted stack; up to 64 B high)
    data_bytes: int  # .data of the generated code and kernels (copied from flash at reset)
    bss_bytes: int  # .bss of the generated code and kernels, the arena excepted
    writable_sections: list[str]  # every writable section of those objects, the arena's included

    @property
    def total_bytes(self) -> int:
        return self.invoke_stack_bytes + self.data_bytes + self.bss_bytes

    def to_json(self) -> dict:
        return {
            "invoke_stack_bytes": self.invoke_stack_bytes,
            "data_bytes": self.data_bytes,
            "bss_bytes": self.bss_bytes,
            "total_bytes": self.total_bytes,
        }


def ram_beyond_arena(target: Target, model_dir: Path, name: str, sample: np.ndarray, build_dir: Path) -> RamBeyondArena:
    """Measures, for one invoke on `sample` under QEMU, the stack it uses, and, from the object
    files of the generated code and kernels (as a firmware would link them), their .data and their
    .bss other than the arena."""
    require_runnable(target)
    elf = build_program(target, model_dir, name, build_dir, purpose="memory")
    _write_inputs(build_dir, sample.reshape(1, -1))
    result = toolchain.run_qemu(target, elf, timeout=qemu_timeout(read_report(model_dir)["macs"], 1), cwd=build_dir)
    _check_exit(result, target)
    stack = INVOKE_STACK.search(result.stderr)
    if stack is None:
        raise EdgecError(f"the stack-measuring program printed no invoke_stack_bytes: {result.stderr[:300]}")
    sections = writable_sections(target, model_dir, name)
    arena = f".bss.{name}_arena"
    return RamBeyondArena(
        int(stack.group(1)),
        sum(size for section, (size, nobits) in sections.items() if not nobits),
        sum(size for section, (size, nobits) in sections.items() if nobits and section != arena),
        sorted(sections),
    )


def writable_sections(target: Target, model_dir: Path, name: str) -> dict[str, tuple[int, bool]]:
    """Section name -> (bytes, whether it is .bss-like) of every non-empty writable section in
    the objects of the generated directory, compiled for `target`."""
    from elftools.elf.constants import SH_FLAGS
    from elftools.elf.elffile import ELFFile

    objects = toolchain.compile_objects(
        target,
        model_sources(model_dir, name),
        include_dirs=model_include_dirs(model_dir, read_report(model_dir)),
        defines=BUILD_DEFINES["memory"],
        extra_cflags=WARNING_FLAGS,
    )
    sections: dict[str, tuple[int, bool]] = {}
    for path in objects:
        with open(path, "rb") as f:
            for section in ELFFile(f).iter_sections():
                flags = section["sh_flags"]
                if flags & SH_FLAGS.SHF_ALLOC and flags & SH_FLAGS.SHF_WRITE and section["sh_size"]:
                    size, nobits = sections.get(section.name, (0, section["sh_type"] == "SHT_NOBITS"))
                    sections[section.name] = (size + section["sh_size"], nobits)
    return sections


def read_report(model_dir: Path) -> dict:
    return json.loads((model_dir / "report.json").read_text())


def output_size(model_dir: Path, name: str) -> int:
    """The bytes of one sample's outputs, all of them in order."""
    return sum(output["bytes"] for output in read_report(model_dir)["outputs"])


# ---------------------------------------------------------------------------------------------
# Benchmarks


@dataclass
class LayerCount:
    name: str
    op: str
    macs: int
    instructions: int
    cycles: int | None = None  # modelled (edgec.targets.timing); None for a target without a timing model


@dataclass
class Bench:
    target: str
    layers: list[LayerCount]  # the layers that emit code, in execution order
    flash_bytes: int  # the whole bench program: text + rodata + data
    ram_bytes: int  # data + bss (the arena) + stack
    memory: dict  # toolchain.elf_memory of the bench program
    arena_bytes: int
    weights_bytes: int
    output: np.ndarray  # the model's int8 output for the benchmarked sample
    ram_beyond_arena: RamBeyondArena  # of the model alone, measured apart from the bench program
    functions: dict[str, int] | None = None  # with a profile: instructions per function, whole run
    timing: TimingSetup | None = None  # the clock and memory system the cycles were modelled for
    # with --sensitivity: the total cycles with each of edgec.targets.timing.SENSITIVITY's assumptions
    sensitivity: dict[str, int] | None = None

    @property
    def total_instructions(self) -> int:
        return sum(layer.instructions for layer in self.layers)

    @property
    def total_cycles(self) -> int | None:
        return None if self.timing is None else sum(layer.cycles for layer in self.layers)

    @property
    def milliseconds(self) -> float | None:
        return None if self.timing is None else timing.milliseconds(self.total_cycles, self.timing.mhz)

    @property
    def macs(self) -> int:
        return sum(layer.macs for layer in self.layers)

    def to_json(self) -> dict:
        """The fields of earlier versions first, in their order; then, with a timing model, the
        modelled cycles (total and per layer) and milliseconds at the clock given."""
        layers = [
            {
                "name": layer.name,
                "op": layer.op,
                "macs": layer.macs,
                "instructions": layer.instructions,
                **({} if layer.cycles is None else {"cycles": layer.cycles}),
            }
            for layer in self.layers
        ]
        result = {
            "target": self.target,
            "total_instructions": self.total_instructions,
            "macs": self.macs,
            "flash_bytes": self.flash_bytes,
            "ram_bytes": self.ram_bytes,
            "ram_beyond_arena": self.ram_beyond_arena.to_json(),
            "layers": layers,
            **({} if self.functions is None else {"functions": self.functions}),
        }
        if self.timing is not None:
            result.update(
                total_cycles=self.total_cycles,
                ms=round(self.milliseconds, 4),
                clock_mhz=self.timing.mhz,
                flash_wait_states=self.timing.flash_wait,
                cycle_model=CYCLE_MODEL,
                part=self.timing.part_name,
                **({} if self.timing.part is None else {"part_name": self.timing.part}),
                **({} if self.sensitivity is None else {"sensitivity": self.sensitivity}),
            )
        return result

    def by_op(self) -> dict[str, tuple[int, int]]:
        """op kind -> (MACs, instructions), over all its layers."""
        totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for layer in self.layers:
            totals[layer.op][0] += layer.macs
            totals[layer.op][1] += layer.instructions
        return {op: (macs, insns) for op, (macs, insns) in totals.items()}


def marker_layers(model_c: Path) -> list[int]:
    """Indices (into report.json's layers) of the layers bracketed in the generated C, in order.
    Layers that emit no code (views) have no markers."""
    return [int(index) for index in LAYER_MARKER.findall(model_c.read_text())]


def bench(
    target: Target,
    model_dir: Path,
    name: str,
    sample: np.ndarray,
    build_dir: Path,
    profile: bool = False,
    mhz: float | None = None,
    sensitivity: bool = False,
) -> Bench:
    """One invoke on `sample` (int8, one row) under QEMU with the instruction-count plugin; with
    `profile`, also the instructions of each function over the whole run. On a core with a timing
    model (edgec.targets.timing), also the modelled cycles at `mhz` (default: the target's typical part)
    with target.flash_wait flash wait states, the ones the build's --opt auto chose for, on
    target.timing_part (--part; else the typical part). With `sensitivity`, also the total cycles
    under each of edgec.targets.timing.SENSITIVITY's assumptions (one more timed run each)."""
    require_runnable(target)
    report = read_report(model_dir)
    elf = build_program(target, model_dir, name, build_dir, purpose="bench")
    _write_inputs(build_dir, sample.reshape(1, -1))
    setup = (
        timing.setup_for(target.name, mhz, target.flash_wait, target.timing_part)
        if timing.has_model(target.name)
        else None
    )
    counts = toolchain.count_instructions(
        target,
        elf,
        timeout=qemu_timeout(report["macs"], 1),
        cwd=build_dir,
        expect_status=None,
        profile=profile,
        timing=setup,
    )
    _check_exit(counts["result"], target)
    indices = marker_layers(model_dir / f"{name}.c")
    if len(counts["insns"]) != len(indices):
        raise EdgecError(f"{len(counts['insns'])} measured regions for {len(indices)} bracketed layers")
    cycles = counts.get("cycles", [None] * len(indices))
    layers = [
        LayerCount(report["layers"][i]["name"], report["layers"][i]["op"], report["layers"][i]["macs"], n, c)
        for i, n, c in zip(indices, counts["insns"], cycles)
    ]
    memory = toolchain.elf_memory(elf)
    output = _read_outputs(build_dir, 1, output_size(model_dir, name))[0]
    varied = None
    if sensitivity and setup is not None:  # an assumption that cannot change the estimate is not rerun
        varied = {
            a.name: sum(
                toolchain.count_instructions(
                    target,
                    elf,
                    timeout=qemu_timeout(report["macs"], 1),
                    cwd=build_dir,
                    expect_status=None,
                    timing=setup.varied(a),
                )["cycles"]
            )
            if setup.changed_by(a)
            else sum(layer.cycles for layer in layers)
            for a in timing.SENSITIVITY
        }
    return Bench(
        target.name,
        layers,
        memory["flash_bytes"],
        memory["ram_bytes"],
        memory,
        report["arena_bytes"],
        report["weights_bytes"],
        output,
        ram_beyond_arena(target, model_dir, name, sample, build_dir),
        counts.get("functions"),
        setup,
        varied,
    )


def format_table(result: Bench, model: str) -> str:
    """The human-readable form of a bench result."""

    def per_mac(insns: int, macs: int) -> str:
        return f"{insns / macs:9.2f}" if macs else f"{'-':>9}"

    timed = result.timing is not None
    cycles = (lambda n: f" {n:>14,}") if timed else (lambda n: "")
    lines = [
        f"{model} on {result.target} (QEMU, exact instruction counts"
        + (
            f"; cycles modelled at {result.timing.mhz:g} MHz, {result.timing.flash_wait} flash wait states)"
            if timed
            else ")"
        ),
        f"{'layer':<28} {'op':<18} {'MACs':>12}"
        + (f" {'cycles':>14}" if timed else "")
        + f" {'instructions':>14} {'insn/MAC':>9}",
    ]
    lines += [
        f"{layer.name:<28} {layer.op:<18} {layer.macs:>12,}{cycles(layer.cycles)} {layer.instructions:>14,} "
        f"{per_mac(layer.instructions, layer.macs)}"
        for layer in result.layers
    ]
    lines.append(
        f"{'total':<47} {result.macs:>12,}{cycles(result.total_cycles)} {result.total_instructions:>14,} "
        f"{per_mac(result.total_instructions, result.macs)}"
    )
    if timed:
        lines.append(f"part: {result.timing.part_name}")
        lines.append(
            f"time: {result.milliseconds:.3f} ms at {result.timing.mhz:g} MHz "
            f"({result.total_cycles / max(result.total_instructions, 1):.2f} cycles/instruction); "
            f"cycles are {CYCLE_MODEL}"
        )
    if result.sensitivity:
        lines.append(
            "sensitivity (estimated total cycles, one assumption varied at a time): "
            + ", ".join(
                f"{name} {cycles:,} ({cycles / result.total_cycles - 1:+.1%})"
                for name, cycles in result.sensitivity.items()
            )
        )
    lines.append(
        "by op: "
        + ", ".join(
            f"{op} {insns:,} ({per_mac(insns, macs).strip()}/MAC)" for op, (macs, insns) in result.by_op().items()
        )
    )
    m = result.memory
    lines.append(
        f"flash {result.flash_bytes:,} B (text {m['text']:,} + rodata {m['rodata']:,} + data {m['data']:,}; "
        f"model constants {result.weights_bytes:,})"
    )
    lines.append(
        f"RAM {result.ram_bytes:,} B (data {m['data']:,} + bss {m['bss']:,} + stack {m['stack']:,}; "
        f"arena {result.arena_bytes:,})"
    )
    extra = result.ram_beyond_arena
    lines.append(
        f"the model's RAM besides the arena: {extra.total_bytes:,} B (invoke stack {extra.invoke_stack_bytes:,} "
        f"+ data {extra.data_bytes:,} + bss {extra.bss_bytes:,})"
    )
    lines.append(f"counted: {COUNTED}; flash and RAM are those of the whole bench program.")
    if result.functions is not None:
        whole = sum(result.functions.values())
        lines.append("instructions by function, whole run (start-up and test driver included):")
        lines += [
            f"  {count:>14,} {100 * count / whole:5.1f}%  {function}"
            for function, count in list(result.functions.items())[:PROFILE_ROWS]
        ]
    return "\n".join(lines)
