"""The runtime and generated code built as applications build them besides edgec's default
(arm-none-eabi-gcc, unaligned access allowed), run under QEMU and compared byte for byte with the
golden: -mno-unaligned-access, where the port makes every unaligned access fault
(CCR.UNALIGN_TRP) and the kernels run the C forms of their assembly routines; and LLVM's clang
(--target=arm-none-eabi, linked by ld.lld against the GCC toolchain's newlib), warning-free at
-Wall -Wextra -Werror -pedantic, with its bare-metal default of strict alignment (the C forms) and
with -munaligned-access (the assembly routines through clang's assembler).

The DSP/Helium kernel driver of tests/test_kernels_arm.py runs a quarter of its random cases per
build (its assembly routines: clang with -munaligned-access), the data-movement driver of
tests/test_kernels_movement.py its cases on the M4; a small model with every layer
family (tests/data/models.py:all_ops) runs four samples as clang builds it by default.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from edgec.pipeline import compile_for, emit, quantize_model
from edgec.targets import toolchain
from edgec.targets.cores import Target, get_target
from edgec.tools import verify
from tests.data.models import all_ops_samples
from tests.device_support import ALL_OPS, ROOT, needs_toolchain, require_tools
from tests.test_kernels_arm import all_cases, failures, run_on_target
from tests.test_kernels_movement import device_cases
from tests.test_kernels_movement import run_on_target as run_movement_on_target
from tests.test_kernels_s16 import depthwise_dsp_cases, run_arm

pytestmark = [needs_toolchain, pytest.mark.usefixtures("edgec_cache")]

# name: (compiler, code-generation flags added to the target's)
BUILDS = {
    "gcc-no-unaligned": ("gcc", ("-mno-unaligned-access",)),
    "clang": ("clang", ()),
    "clang-unaligned": ("clang", ("-munaligned-access",)),
}
UNALIGNED_LOAD = ROOT / "tests" / "data" / "port" / "unaligned_load.c"
UNALIGNED_FAULT = 0x01000000  # CFSR.UNALIGNED (UsageFault)


def build_target(target: str, build: str) -> Target:
    compiler, flags = BUILDS[build]
    if compiler == "clang":
        require_tools("clang", "ld.lld", install=toolchain.CLANG_APT_INSTALL)
    base = get_target(target)
    return dataclasses.replace(base, compiler=compiler, cflags=base.cflags + flags)


@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
def test_an_unaligned_load_faults_in_a_no_unaligned_access_build(target, tmp_path):
    """What makes the other tests able to fail: the same word load at an odd address runs in a
    default build and faults in a -mno-unaligned-access one."""
    default = toolchain.cross_compile(target, [UNALIGNED_LOAD], [], tmp_path / "default.elf")
    assert toolchain.run_qemu(target, default, timeout=30).returncode == 0
    strict = build_target(target, "gcc-no-unaligned")
    result = toolchain.run_qemu(
        strict, toolchain.cross_compile(strict, [UNALIGNED_LOAD], [], tmp_path / "strict.elf"), timeout=30
    )
    assert result.returncode == toolchain.FAULT_STATUS
    assert f"CFSR=0x{UNALIGNED_FAULT:08x}" in result.stderr


@pytest.mark.parametrize(
    "target,build",
    [
        ("cortex-m4", "gcc-no-unaligned"),
        ("cortex-m55", "gcc-no-unaligned"),
        ("cortex-m4", "clang-unaligned"),
        ("cortex-m55", "clang-unaligned"),
    ],
)
def test_packed_kernels_match_golden(target, build, tmp_path):
    cases = all_cases(target, seed=11, divisor=4)
    failed = failures(cases, run_on_target(build_target(target, build), cases, tmp_path))
    assert not failed, f"{len(failed)} of {len(cases)} cases fail:\n" + "\n".join(failed[:10])


@pytest.mark.parametrize("build", ["gcc-no-unaligned", "clang"])
def test_movement_kernels_match_golden_on_cortex_m4(build, tmp_path):
    """The DSP channel shuffle's SEL reads flags a USUB8 set (GCC dropped an unused __usub8 in a
    -mno-unaligned-access build); copies take words where aligned."""
    cases = device_cases(seed=13)
    results, _ = run_movement_on_target(build_target("cortex-m4", build), cases, tmp_path)
    failed = [
        f"{name} ({kind}): status {status}, guard {guard}, {desc}"
        for (name, kind, desc, _, _, expected), (status, guard, out) in zip(cases, results)
        if status != 0 or not guard or not np.array_equal(out, expected)
    ]
    assert not failed, f"{len(failed)} of {len(cases)} cases fail:\n" + "\n".join(failed[:10])


@pytest.mark.parametrize("build", ["gcc-no-unaligned", "clang-unaligned"])
def test_s16_depthwise_dsp_matches_golden(build, tmp_path):
    """The DSP int16 depthwise kernel loads words of int16 pairs and int8 weights at any channel
    offset: byte loads in a -mno-unaligned-access build (which faults on an unaligned word), words
    with clang. run_arm asserts every output equals the golden."""
    run_arm(build_target("cortex-m4", build), depthwise_dsp_cases(25), tmp_path)


@pytest.fixture(scope="module")
def all_ops_quantized():
    return quantize_model(ALL_OPS, calibration=all_ops_samples(8, 0), warn=lambda _: None)


@pytest.mark.parametrize(
    "target,build", [("cortex-m4", "gcc-no-unaligned"), ("cortex-m4", "clang"), ("cortex-m55", "clang")]
)
def test_generated_model_matches_golden(all_ops_quantized, target, build, tmp_path):
    compiled = compile_for(all_ops_quantized, build_target(target, build))
    emit(compiled, tmp_path / "model", "model")
    inputs = verify.quantized_inputs(compiled.graph, all_ops_samples(4, 1))
    outputs = verify.run_on(compiled, tmp_path / "model", "model", inputs, tmp_path / "build")
    comparison = verify.compare(verify.golden_outputs(compiled.graph, inputs), outputs)
    assert comparison.mismatched_bytes == 0, comparison
