"""The target table: compiler flags, ISA features, QEMU board and memory budget of every target.

Memory budgets are those of a typical part with that core (named per entry), so a build can be
checked against a real device; the QEMU boards themselves have far more memory. `cortex-m0plus`
has no QEMU board: it is compiled and linked (to measure sizes) but never run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from edgec.errors import EdgecError
from edgec.resources import data_dir


@dataclass(frozen=True)
class Target:
    name: str
    cflags: tuple[str, ...]  # code-generation flags for gcc (empty for the host compiler)
    dsp: bool  # ARMv7E-M/ARMv8-M DSP extension (SMLAD, SSAT, ...)
    mve: bool  # Helium (M-profile Vector Extension)
    fpu: bool  # hardware floating point
    qemu_machine: str | None  # `qemu-system-arm -M` board; None: cannot be run
    qemu_cpu: str | None  # `qemu-system-arm -cpu`
    linker_script: str | None  # file name in runtime_c/port/; None for the host
    ram_bytes: int | None  # RAM budget of the typical part; None: no budget (host)
    flash_bytes: int | None  # flash budget of the typical part; None: no budget (host)
    part: str = ""  # the typical part the budgets come from
    # The user gave the flash budget (--flash): over it, the int4 chooser may trade accuracy for
    # flash (edgec.pipeline.fit_flash_budget); the typical part's budget only refuses.
    flash_budget_given: bool = False
    opt: str = "auto"  # `edgec build --opt` (OPT_LEVELS)
    kernels: str = "edgec"  # `edgec build --kernels` (KERNEL_LIBRARIES)
    cmsis_nn_dir: str | None = None  # the CMSIS-NN checkout linked with --kernels cmsis-nn
    # Flash wait states of the user's part (--flash-wait): what --opt auto chooses for and bench's
    # cycles are modelled at; None: those of the typical part (edgec.targets.timing.MEMORY).
    flash_wait: int | None = None
    # A named part of edgec.targets.timing.PARTS (--part): its clock, wait states and caches replace the
    # typical part's in --opt auto's choice and bench's cycles; None: the typical part.
    timing_part: str | None = None
    # The optimisation flag Arm's CMSIS-NN sources are compiled with (--kernels cmsis-nn):
    # -O2 like edgec's, or -Ofast, which Arm recommends for CMSIS-NN.
    cmsis_nn_opt: str = "-O2"
    # The cross compiler edgec's own builds of the target (verify, bench) use: "gcc"
    # (arm-none-eabi-gcc) or "clang" (edgec.targets.toolchain). Generated code takes the application's.
    compiler: str = "gcc"
    # --stream-input: the application hands the model's image input in row bands
    # (<name>_invoke_streamed), so a band stage starting at the input never holds it whole.
    stream_input: bool = False

    @property
    def is_host(self) -> bool:
        return self.name == "host"

    @property
    def can_run(self) -> bool:
        """True if the target runs under QEMU (the host runs natively and is not included)."""
        return self.qemu_machine is not None

    def with_budget(self, ram: int | None = None, flash: int | None = None) -> "Target":
        """This target with the memory budget of the user's own part (bytes; None keeps the
        typical part's figure)."""
        if ram is None and flash is None:
            return self
        return replace(
            self,
            ram_bytes=self.ram_bytes if ram is None else ram,
            flash_bytes=self.flash_bytes if flash is None else flash,
            flash_budget_given=self.flash_budget_given or flash is not None,
            part="budget from --ram/--flash",
        )

    def with_stream_input(self, stream_input: bool) -> "Target":
        """This target with the input handed in row bands (--stream-input) or not."""
        return replace(self, stream_input=bool(stream_input))

    def with_flash_wait(self, flash_wait: int | None) -> "Target":
        """This target on a part with `flash_wait` flash wait states (None keeps the typical part's)."""
        if flash_wait is not None and flash_wait < 0:
            raise EdgecError(f"--flash-wait {flash_wait}: wait states cannot be negative")
        return self if flash_wait is None else replace(self, flash_wait=flash_wait)

    def with_cmsis_nn_opt(self, opt: str) -> "Target":
        """This target compiling CMSIS-NN with `opt` (CMSIS_NN_OPTS)."""
        if opt not in CMSIS_NN_OPTS:
            raise EdgecError(f"--cmsis-nn-opt {opt!r}: expected one of {', '.join(CMSIS_NN_OPTS)}")
        return replace(self, cmsis_nn_opt=opt)

    @property
    def fast_layouts(self) -> bool:
        """Whether kernels take the constant layouts that spend flash for fewer instructions
        (--opt auto then narrows back those estimated slower, or not fitting the flash budget)."""
        return self.opt in ("auto", "speed")

    def with_opt(self, opt: str) -> "Target":
        """This target building for `opt` (OPT_LEVELS)."""
        if opt not in OPT_LEVELS:
            raise EdgecError(f"--opt {opt!r}: expected one of {', '.join(OPT_LEVELS)}")
        return replace(self, opt=opt)

    def with_kernels(self, kernels: str, cmsis_nn_dir: str | None = None) -> "Target":
        """This target calling `kernels` (KERNEL_LIBRARIES); "cmsis-nn" links the checkout at
        `cmsis_nn_dir`, else at $CMSIS_NN_DIR (a clear error if there is none)."""
        if kernels not in KERNEL_LIBRARIES:
            raise EdgecError(f"--kernels {kernels!r}: expected one of {', '.join(KERNEL_LIBRARIES)}")
        if kernels == "edgec":
            return replace(self, kernels=kernels, cmsis_nn_dir=None)
        from edgec.targets import cmsis_nn

        return replace(self, kernels=kernels, cmsis_nn_dir=str(cmsis_nn.checkout(cmsis_nn_dir)))


# Whose kernels the generated code calls: edgec's own, or Arm's CMSIS-NN library (linked from the
# user's checkout) for the layers it has kernels for (edgec/ops/cmsis_nn.py).
KERNEL_LIBRARIES = ("edgec", "cmsis-nn")
CMSIS_NN_OPTS = ("-O2", "-Ofast")

# What `--opt` trades: "speed" lays some constants out for the kernels with the fewest instructions
# even where that takes more flash (e.g. the DSP convolution's filter widened to int16); "size"
# never does; "auto" does per layer where the timing model estimates it faster at the part's flash
# wait states, as far as the constants fit the flash budget (passes/constant_layouts.py).
OPT_LEVELS = ("auto", "speed", "size")


def _arm(
    name: str,
    cflags: str,
    *,
    dsp: bool = False,
    mve: bool = False,
    fpu: bool = False,
    machine: str | None,
    linker_script: str,
    ram: str,
    flash: str,
    part: str,
) -> Target:
    cpu = name if machine is not None else None
    return Target(
        name=name,
        cflags=tuple(cflags.split()),
        dsp=dsp,
        mve=mve,
        fpu=fpu,
        qemu_machine=machine,
        qemu_cpu=cpu,
        linker_script=linker_script,
        ram_bytes=parse_size(ram),
        flash_bytes=parse_size(flash),
        part=part,
    )


def parse_size(size: str | int) -> int:
    """Bytes from "256K", "1M", "512KiB", "2MB" (all binary multiples), "4096" or an int."""
    if isinstance(size, int) and not isinstance(size, bool):
        if size < 0:
            raise ValueError(f"size must not be negative, got {size}")
        return size
    match = re.fullmatch(r"\s*(\d+)\s*(k|kb|kib|m|mb|mib|)\s*", str(size), re.IGNORECASE)
    if not match:
        raise ValueError(f"bad size {size!r}: expected bytes or a number with K/M (e.g. 256K, 1M)")
    unit = match.group(2).lower()[:1]
    return int(match.group(1)) * {"": 1, "k": 1024, "m": 1024 * 1024}[unit]


_TARGET_LIST = (
    Target(
        name="host",
        cflags=(),
        dsp=False,
        mve=False,
        fpu=True,
        qemu_machine=None,
        qemu_cpu=None,
        linker_script=None,
        ram_bytes=None,
        flash_bytes=None,
        part="the machine running edgec (native build, for verification)",
    ),
    # Never run: links with the generic layout of mps2_an385.ld (flash at 0, RAM at 0x20000000)
    # only so that flash and RAM sizes can be measured.
    _arm(
        "cortex-m0plus",
        "-mcpu=cortex-m0plus -mthumb -mfloat-abi=soft",
        machine=None,
        linker_script="mps2_an385.ld",
        ram="32K",
        flash="256K",
        part="Microchip ATSAMD21G18A (32 KiB SRAM, 256 KiB flash)",
    ),
    _arm(
        "cortex-m3",
        "-mcpu=cortex-m3 -mthumb -mfloat-abi=soft",
        machine="mps2-an385",
        linker_script="mps2_an385.ld",
        ram="64K",
        flash="256K",
        part="NXP LPC1766 (64 KiB SRAM, 256 KiB flash)",
    ),
    _arm(
        "cortex-m4",
        "-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16",
        dsp=True,
        fpu=True,
        machine="mps2-an386",
        linker_script="mps2_an386.ld",
        ram="128K",
        flash="1M",
        part="ST STM32F407VG (128 KiB SRAM1+SRAM2, CCM not counted; 1 MiB flash)",
    ),
    _arm(
        "cortex-m7",
        "-mcpu=cortex-m7 -mthumb -mfloat-abi=hard -mfpu=fpv5-d16",
        dsp=True,
        fpu=True,
        machine="mps2-an500",
        linker_script="mps2_an500.ld",
        ram="512K",
        flash="2M",
        part="ST STM32F767ZI (512 KiB SRAM, 2 MiB flash)",
    ),
    _arm(
        "cortex-m33",
        "-mcpu=cortex-m33 -mthumb -mfloat-abi=hard -mfpu=fpv5-sp-d16",
        dsp=True,
        fpu=True,
        machine="mps2-an505",
        linker_script="mps2_an505.ld",
        ram="256K",
        flash="1M",
        part="Nordic nRF9160 (256 KiB SRAM, 1 MiB flash)",
    ),
    _arm(
        "cortex-m55",
        "-mcpu=cortex-m55 -mthumb -mfloat-abi=hard",
        dsp=True,
        mve=True,
        fpu=True,
        machine="mps3-an547",
        linker_script="mps3_an547.ld",
        ram="512K",
        flash="2M",
        part="Arm Corstone-300 class (512 KiB DTCM; 2 MiB code and weights)",
    ),
)

TARGETS: dict[str, Target] = {t.name: t for t in _TARGET_LIST}


class UnknownTargetError(EdgecError, ValueError):
    """An unknown target name (a ValueError, and an EdgecError for the CLI)."""


def get_target(name: str | Target) -> Target:
    """The target called `name` (a Target is returned as is)."""
    if isinstance(name, Target):
        return name
    try:
        return TARGETS[name]
    except (KeyError, TypeError):
        raise UnknownTargetError(f"unknown target {name!r}; valid targets: {', '.join(TARGETS)}") from None


def board_memory_map(target: Target | str) -> dict[str, tuple[int, int]]:
    """The memory regions (name -> (origin, bytes)) of the target's linker script."""
    target = get_target(target)
    if target.linker_script is None:
        return {}
    text = (data_dir("runtime_c") / "port" / target.linker_script).read_text()
    regions = re.findall(
        r"^\s*(\w+)\s*\([a-z]+\)\s*:\s*ORIGIN\s*=\s*(\w+)\s*,\s*LENGTH\s*=\s*(\w+)", text, re.MULTILINE
    )
    return {name: (int(origin, 0), parse_size(length)) for name, origin, length in regions}
