"""edgec_sqrt_s16 against its golden (edgec.ops.int16.sqrt_s16), byte for byte, and the golden
against the correctly rounded root (Python integers), on every int16 input: host (UBSan library),
Cortex-M4 and M55 under QEMU at -O2, -Os and -O0 (tests/data/port/sqrt_s16_kernels.c). Then the
units that use it: an int16 model's sqrt and x ** 2 (SquareS16: edgec_mul_s16 of x by itself)
pass verify's layer check where the interpolated tables did not.
"""

from __future__ import annotations

import ctypes as C
import math
import struct

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import edgec
from edgec.ops import int16
from edgec.targets import toolchain
from tests.device_support import ROOT, needs_toolchain
from tests.kernel_lib import SqrtS16Desc, struct_from_desc

EVERY_INPUT = np.arange(-32768, 32768, dtype=np.int16)


def random_desc(rng) -> dict:
    s_in = float(2 ** rng.uniform(-20, 4))
    s_out = float(np.sqrt(s_in * 32767) / 32767 * 2 ** rng.uniform(-3, 3))
    return int16.sqrt_s16_desc(EVERY_INPUT.size, s_in, s_out)


def extreme_desc(rng) -> dict:
    return dict(
        size=EVERY_INPUT.size,
        multiplier=int(rng.choice([0, 1, 2**31 - 1, int(rng.integers(0, 2**31))])),
        half_shift=int(rng.choice([0, 31, int(rng.integers(0, 32))])),
    )


def run_c(lib, desc, x, expect=0):
    keep: list = []
    x = np.ascontiguousarray(x, np.int16)
    out = np.full(x.size + 8, 0x5A5A, np.uint16).view(np.int16)
    P16 = C.POINTER(C.c_int16)
    status = lib.edgec_sqrt_s16(
        C.byref(struct_from_desc(SqrtS16Desc, desc, keep)), x.ctypes.data_as(P16), out.ctypes.data_as(P16)
    )
    assert status == expect
    assert (out[x.size :].view(np.uint16) == 0x5A5A).all(), "wrote past the output"
    return out[: x.size]


def reference(desc, x: int) -> int:
    """round half up of sqrt(n / 4^h), n = max(x, 0) * multiplier, from its definition: the largest
    y with y - 1/2 <= sqrt(n / 4^h), i.e. (2y - 1)^2 4^h <= 4n (y >= 0), found from a float guess."""
    n, scale = max(x, 0) * desc["multiplier"], 4 ** desc["half_shift"]
    y = round(math.sqrt(n / scale))
    while (2 * y + 1) ** 2 * scale <= 4 * n:
        y += 1
    while y > 0 and (2 * y - 1) ** 2 * scale > 4 * n:
        y -= 1
    return min(y, 32767)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_sqrt_golden_equals_c_on_every_input(kernel_lib, seed):
    rng = np.random.default_rng(seed)
    desc = random_desc(rng) if seed % 3 else extreme_desc(rng)
    np.testing.assert_array_equal(run_c(kernel_lib, desc, EVERY_INPUT), int16.sqrt_s16(desc, EVERY_INPUT))


@pytest.mark.parametrize("seed", range(4))
def test_sqrt_golden_is_the_correctly_rounded_root(seed):
    rng = np.random.default_rng(seed)
    desc = random_desc(rng) if seed else extreme_desc(rng)
    golden = int16.sqrt_s16(desc, EVERY_INPUT)
    for x in range(-32768, 32768, 7):
        assert golden[x + 32768] == reference(desc, x), x


def test_sqrt_desc_approximates_the_scale_ratio():
    for s_in, s_out in ((1e-3, 2e-4), (0.005, 0.0004), (2.0**-15, 2.0**-15)):
        d = int16.sqrt_s16_desc(4, s_in, s_out)
        assert 2**29 <= d["multiplier"] < 2**31 or d["half_shift"] == 31  # a factor 4 per half_shift
        assert abs(d["multiplier"] * 4.0 ** -d["half_shift"] / (s_in / s_out**2) - 1) < 2**-28


def test_sqrt_rejects_bad_arguments(kernel_lib):
    x = np.zeros(4, np.int16)
    good = dict(size=4, multiplier=2**30, half_shift=3)
    for bad in (dict(good, size=0), dict(good, multiplier=-1), dict(good, half_shift=32), dict(good, half_shift=-1)):
        run_c(kernel_lib, bad, x, expect=-1)


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("opt", ["-O2", "-Os", "-O0"])
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
def test_sqrt_on_cortex_m(target, opt, tmp_path):
    rng = np.random.default_rng(31)
    descs = [random_desc(rng), random_desc(rng), extreme_desc(rng)]
    halves = np.split(EVERY_INPUT, 2)  # a record holds at most 32768 elements (the driver's arena)
    records = b""
    for k, desc in enumerate(descs):
        for half in halves:
            records += struct.pack("<4i", half.size, desc["multiplier"], desc["half_shift"], k % 2) + half.tobytes()
    elf = toolchain.cross_compile(
        target,
        [
            ROOT / "tests" / "data" / "port" / "sqrt_s16_kernels.c",
            ROOT / "runtime_c" / "src" / "activation" / "edgec_sqrt_s16.c",
        ],
        [ROOT / "runtime_c" / "include"],
        tmp_path / "sqrt.elf",
        opt=opt,
        extra_cflags=["-Wall", "-Wextra", "-Werror", "-pedantic"],
    )
    (tmp_path / "cases.bin").write_bytes(records)
    toolchain.count_instructions(target, elf, timeout=300, cwd=tmp_path)
    data, at = (tmp_path / "results.bin").read_bytes(), 0
    for desc in descs:
        for half in halves:
            status, intact = struct.unpack_from("<2i", data, at)
            got = np.frombuffer(data, np.int16, half.size, at + 8)
            at += 8 + 2 * half.size
            assert status == 0 and intact
            np.testing.assert_array_equal(got, int16.sqrt_s16(dict(desc, size=half.size), half))
    assert at == len(data)


class _Magnitude(nn.Module):
    """The STFT magnitude of a Silero-style VAD: sqrt(re ** 2 + im ** 2) after a linear layer."""

    def __init__(self):
        super().__init__()
        self.basis = nn.Linear(16, 32)

    def forward(self, x):
        y = self.basis(x)
        return torch.sqrt(y[:, :16] ** 2 + y[:, 16:] ** 2)


def test_int16_magnitude_uses_exact_square_and_root_and_passes_the_layer_check():
    torch.manual_seed(0)
    samples = np.random.default_rng(0).standard_normal((24, 1, 16)).astype(np.float32)
    compiled = edgec.compile(
        _Magnitude().eval(),
        (torch.from_numpy(samples[0]),),
        calibration=samples[:16],
        target="host",
        activations="int16",
    )
    functions = {op.kernel.function for op in compiled.graph.ops if op.kind == "lut"}
    assert functions == {"edgec_sqrt_s16", "edgec_mul_s16"}, functions
    result = compiled.verify(samples[16:])
    assert "golden simulator == host C, 0 LSB" in str(result) and "each within its tolerance" in str(result)
