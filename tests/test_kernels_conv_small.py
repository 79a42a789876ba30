"""edgec_conv_s8_small_<KH>x<KW>x<C_in> (edgec.ops.conv_small) against the golden conv, byte for byte.

The same random cases -- every window shape of conv_small.WINDOWS, odd channel and pixel counts,
strides 1-2, padding, extreme zero points, multipliers and shifts inside and outside the short
requantization, clamps -- run on the host (UBSan build, through ctypes) and under QEMU on a
Cortex-M3 (the cores edgec chooses these kernels for) at -O2, -Os and -O0
(tests/data/port/conv_small_kernels.c). Guard bytes after every output catch writes past it; a
descriptor whose window is not the function's must be refused.
"""

from __future__ import annotations

import ctypes as C
import struct
from pathlib import Path

import numpy as np
import pytest

from edgec.ir import Graph, Op, Tensor
from edgec.numerics import quantize_multiplier
from edgec.ops import conv_small
from edgec.ops.conv import UNIT as CONV
from edgec.ops.conv import conv2d_s8, conv_output_size
from edgec.targets import toolchain
from tests.device_support import ROOT, needs_toolchain
from tests.kernel_lib import ctypes_struct, struct_from_desc

ConvSmallDesc = ctypes_struct(conv_small.CONV_SMALL_DESC)
GUARD, GUARD_VALUE, ARG_ERROR = 16, 0x5A, -1
HEADER_WORDS = 24
DRIVER = ROOT / "tests" / "data" / "port" / "conv_small_kernels.c"
RUNTIME = ROOT / "runtime_c"


def random_case(rng, window) -> tuple[dict, np.ndarray, np.ndarray]:
    """(descriptor values, input, expected output) of a random layer with this window shape."""
    kh, kw, c_in = window
    pointwise = kh == 1
    c_out = int(rng.integers(1, 19))
    h, w = (int(v) for v in rng.integers(1 if pointwise else 3, 12, 2))
    stride = (1, 1) if pointwise and rng.random() < 0.7 else tuple(int(v) for v in rng.integers(1, 3, 2))
    pad = (0, 0) if pointwise else tuple(int(v) for v in rng.integers(0, 2, 2))
    out_hw = tuple(conv_output_size(n, k, s, p, p, 1) for n, k, s, p in zip((h, w), (kh, kw), stride, pad))
    x = rng.integers(-128, 128, (int(rng.integers(1, 3)), h, w, c_in)).astype(np.int8)
    weight = rng.integers(-128, 128, (c_out, kh, kw, c_in)).astype(np.int8)
    bias = rng.integers(-(2**16), 2**16, c_out).astype(np.int32)
    if rng.random() < 0.3:  # large biases: the accumulator near the int32 range
        bias = rng.integers(-(2**28), 2**28, c_out).astype(np.int32)
    # Every channel within the short requantization (shifts -2..-24), its ends included.
    scales = 2.0 ** rng.uniform(-24, -2, c_out) * rng.choice([0.5, 0.99999, 0.75], c_out)
    pairs = [quantize_multiplier(float(s)) for s in scales]
    multiplier = np.array([m for m, _ in pairs], np.int32)
    shift = np.array([s for _, s in pairs], np.int32)
    input_zp, output_zp = (int(rng.choice([-128, 127, 0, int(rng.integers(-128, 128))])) for _ in range(2))
    lo, hi = sorted(int(v) for v in rng.integers(-128, 128, 2))
    act_min, act_max = [(-128, 127), (lo, 127), (lo, hi)][int(rng.integers(3))]
    attrs = dict(
        weight=weight,
        bias=bias,
        multiplier=multiplier,
        shift=shift,
        stride=stride,
        pad=(*pad, *pad),
        act_min=act_min,
        act_max=act_max,
    )
    out_shape = (x.shape[0], *out_hw, c_out)
    desc = conv_small.layer_desc(attrs, x.shape, out_shape, input_zp, output_zp)
    expected = conv2d_s8(
        x,
        weight,
        bias,
        multiplier,
        shift,
        input_zp=input_zp,
        output_zp=output_zp,
        stride=stride,
        pad=pad,
        out_hw=out_hw,
        act_min=act_min,
        act_max=act_max,
    )
    return desc, x, expected


def planned_input_offset(desc: dict) -> int:
    """The input's offset after the output that Conv2d.in_place gives this layer's kernel."""
    x_shape = (desc["batches"], desc["input_h"], desc["input_w"], desc["input_c"])
    graph = Graph(inputs=["x"], outputs=["y"])
    graph.add_tensor(Tensor("x", x_shape))
    graph.add_tensor(Tensor("y", (desc["batches"], desc["output_h"], desc["output_w"], desc["output_c"])))
    attrs = dict(
        weight=np.zeros((desc["output_c"], desc["kernel_h"], desc["kernel_w"], desc["input_c"]), np.int8),
        stride=(desc["stride_h"], desc["stride_w"]),
        pad=(desc["pad_top"], desc["pad_left"], 0, 0),
        dilation=(1, 1),
        groups=1,
        isa=None,
        small=True,
    )
    op = Op("layer", "conv2d", ["x"], ["y"], attrs)
    graph.ops = [op]
    [planned] = CONV.in_place(op, graph, None)
    assert planned.scratch_bytes == 0
    return planned.input_offset


def all_cases(seed: int, per_window: int) -> list[tuple[dict, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [random_case(rng, window) for window in conv_small.WINDOWS for _ in range(per_window)]


def test_random_cases_cover_the_short_requantization():
    attrs = [
        dict(multiplier=d["channel_table"][2::8], shift=-1 - d["channel_table"][6::8]) for d, _, _ in all_cases(3, 4)
    ]
    assert all(conv_small.short_requantization(a) for a in attrs)


def wrong_window(desc: dict) -> dict:
    """The descriptor with a kernel_h its function does not have: the kernel must refuse it."""
    return {**desc, "kernel_h": desc["kernel_h"] + 2}


# -- host: the portable C under UBSan ------------------------------------------------------------


def run_host(kernel_lib, desc: dict, x: np.ndarray, out_bytes: int, function: str) -> tuple[int, np.ndarray]:
    keep: list = []
    c_desc = struct_from_desc(ConvSmallDesc, desc, keep)
    xin = np.ascontiguousarray(x)
    out = np.full(out_bytes + GUARD, GUARD_VALUE, dtype=np.int8)
    fn = getattr(kernel_lib, function)
    fn.restype = C.c_int
    status = fn(C.byref(c_desc), xin.ctypes.data_as(C.c_void_p), out.ctypes.data_as(C.c_void_p))
    assert np.all(out[out_bytes:] == GUARD_VALUE), "write past the output"
    return status, out[:out_bytes]


def function_of(desc: dict) -> str:
    return f"edgec_conv_s8_small_{desc['kernel_h']}x{desc['kernel_w']}x{desc['input_c']}"


def test_small_convs_match_golden_on_host(kernel_lib):
    for desc, x, expected in all_cases(seed=0, per_window=25):
        status, out = run_host(kernel_lib, desc, x, expected.size, function_of(desc))
        assert status == 0 and np.array_equal(out, expected.reshape(-1)), desc


def test_small_conv_refuses_another_window(kernel_lib):
    desc, x, expected = all_cases(seed=1, per_window=1)[0]
    status, _ = run_host(kernel_lib, wrong_window(desc), x, expected.size, function_of(desc))
    assert status == ARG_ERROR


def test_small_convs_run_over_their_input_at_the_planned_offset(kernel_lib):
    """Output and input in one buffer, the input where the planner puts it: the golden's bytes."""
    for desc, x, expected in all_cases(seed=4, per_window=8):
        offset = planned_input_offset(desc)
        low, high = min(0, offset), max(expected.size, offset + x.size)
        block = np.full(GUARD + high - low + GUARD, GUARD_VALUE, np.int8)
        out_at, in_at = GUARD - low, GUARD - low + offset
        block[in_at : in_at + x.size] = x.ravel()
        keep: list = []
        c_desc = struct_from_desc(ConvSmallDesc, desc, keep)
        fn = getattr(kernel_lib, function_of(desc))
        fn.restype = C.c_int
        base = block.ctypes.data
        status = fn(C.byref(c_desc), C.c_void_p(base + in_at), C.c_void_p(base + out_at))
        untouched = np.ones(block.size, bool)
        untouched[out_at : out_at + expected.size] = untouched[in_at : in_at + x.size] = False
        assert status == 0 and np.all(block[untouched] == GUARD_VALUE)
        assert np.array_equal(block[out_at : out_at + expected.size], expected.ravel()), desc


# -- Cortex-M3 under QEMU at -O2, -Os and -O0 ------------------------------------------------------


def record(desc: dict, x: np.ndarray, out_bytes: int) -> bytes:
    arrays = [v for v in desc.values() if isinstance(v, np.ndarray)] + [x]
    payload = b"".join(a.tobytes() + bytes(-a.nbytes % 4) for a in arrays)
    ints = [v for v in desc.values() if not isinstance(v, np.ndarray)]  # the descriptor's 16
    header = [len(payload), out_bytes, *ints]
    return struct.pack(f"<{HEADER_WORDS}i", *header, *[0] * (HEADER_WORDS - len(header))) + payload


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("opt", ["-O2", "-Os", "-O0"])
def test_small_convs_match_golden_on_cortex_m3(opt, tmp_path: Path):
    cases = all_cases(seed=len(opt), per_window=12 if opt == "-O2" else 5)
    cases.append((wrong_window(cases[0][0]), cases[0][1], cases[0][2]))
    elf = toolchain.cross_compile(
        "cortex-m3",
        [DRIVER, RUNTIME / "src" / "conv" / "edgec_conv_s8_small.c"],
        [RUNTIME / "include"],
        tmp_path / "conv_small.elf",
        opt=opt,
        extra_cflags=["-Wall", "-Wextra", "-Werror", "-pedantic"],
    )
    (tmp_path / "cases.bin").write_bytes(b"".join(record(d, x, e.size) for d, x, e in cases))
    toolchain.count_instructions("cortex-m3", elf, timeout=300, cwd=tmp_path)
    data, at, failures = (tmp_path / "results.bin").read_bytes(), 0, []
    for i, (desc, _, expected) in enumerate(cases):
        status, guards = struct.unpack_from("<2i", data, at)
        out = np.frombuffer(data, np.int8, expected.size, at + 8)
        at += 8 + expected.size
        refused = i == len(cases) - 1
        if not guards or (status != ARG_ERROR if refused else status != 0 or not np.array_equal(out, expected.ravel())):
            failures.append(f"case {i}: status {status}, guards {guards}, {function_of(desc)}")
    assert at == len(data)
    assert not failures, f"{len(failures)} cases fail:\n" + "\n".join(failures[:5])
