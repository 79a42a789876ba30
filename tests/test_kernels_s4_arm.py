"""The int4-weight kernels' DSP and Helium paths against the golden kernels, byte for byte.

edgec_fully_connected_s4_dsp/_mve and edgec_conv_s4_dsp/_mve only compile for Arm, so
tests/data/port/s4_kernels.c runs them under QEMU on Cortex-M4 (DSP) and Cortex-M55 (Helium, and
the DSP paths there too), at -O2 (what edgec's builds use), -Os and -O0 (the assembly routines are
naked functions: every level runs them). The random cases (tests/test_kernels_s4.py's, widened):
row lengths with and without a tail of 8 (DSP) or 32 (Helium), beyond 256 (the DSP path's chunks),
output channel counts leaving one or two rows of a three (DSP) or four (Helium), groups, padding,
dilation, extreme zero points, multipliers and shifts inside and outside the short
requantization, no bias. Guard bytes after every output and scratch buffer catch writes past them,
and each scratch buffer is exactly the size the op unit declares to the planner.
"""

from __future__ import annotations

import struct
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from edgec.ops import conv, depthwise, int4, linear
from edgec.targets import toolchain
from tests.device_support import ROOT, needs_toolchain
from tests.test_kernels_s4 import (
    EVEN_K_SHAPES,
    ODD_K_SHAPES,
    gather_cases,
    int4_weights,
    int8_array,
    output_stage,
    packed_depthwise_scratch,
    random_case,
)

DRIVER = ROOT / "tests" / "data" / "port" / "s4_kernels.c"
RUNTIME = ROOT / "runtime_c"
SOURCES = [
    RUNTIME / "src" / f
    for f in (
        "fc/edgec_fully_connected_s4.c",
        "conv/edgec_conv_s4.c",
        "depthwise/edgec_depthwise_conv_s4.c",
        *depthwise.UNIT.runtime_sources,  # edgec_depthwise_conv_s4_packed runs the int8 packed kernel
        *conv.UNIT.runtime_sources,  # so do edgec_conv_s4_dsp_unpacked / _mve_unpacked
    )
]
HEADER_WORDS = 40
KIND = {"fc": 1, "conv": 2, "depthwise": 3}
PATH = {"portable": 0, "dsp": 1, "mve": 2, "dsp_unpacked": 3, "mve_unpacked": 4, "dsp_narrow_unpacked": 5}
# The unpacked paths' filter layouts (edgec.ops.int4.conv_unpacked_layout's values)
LAYOUT = {"dsp_unpacked": "dsp", "dsp_narrow_unpacked": int4.DSP_NARROW, "mve_unpacked": "mve"}
# s4_kernels.c's `routines`, in order: edgec_conv_s4_mve_unpacked's (edgec.ops.conv.mve_routines)
MVE_ROUTINES = [
    f"edgec_conv_mve_{name}"
    for name in (
        *(f"blocks_{p}{s}" for s in ("", "_right", "_strict", "_strict_quads") for p in ("odd", "even")),
        *("direct_odd", "direct_even", "direct_odd_runs3", "direct_even_runs3", "direct_single"),
        *("direct_single_runs3", "direct_triple_runs3", "direct_even_quads", "direct_even_runs3_quads"),
    )
]
ARG_ERROR = -1
PATHS = {"cortex-m4": ("dsp",), "cortex-m55": ("mve", "dsp")}
OPT_CASES = {"-O2": 60, "-Os": 20, "-O0": 20}  # cases per path and kind


def row_length(desc: dict) -> int:
    return desc["kernel_h"] * desc["kernel_w"] if "ch_mult" in desc else int4.row_length(desc)


def channels_of(desc: dict) -> int:
    return desc["input_c"] * desc["ch_mult"] if "ch_mult" in desc else desc["output_c"]


def fc_case(rng, path: str) -> tuple[dict, np.ndarray]:
    """A fully connected case the path takes: an even row length (DSP: at least 8), now and then
    long (chunks) or a multiple of 8 / 32 (no tail)."""
    n = int(rng.integers(1, 3))
    step = 8 if rng.random() < 0.5 else 2
    c_in = int(rng.choice([rng.integers(4, 40), rng.integers(4, 100), rng.integers(130, 330)])) * step // 2 * 2
    c_in = max(c_in, 8 if path == "dsp" else 2)
    c_out = int(rng.choice([1, 2, 3, 4, 5, int(rng.integers(1, 40))]))
    a = {"weight": int4_weights(rng, (c_out, c_in)), **output_stage(rng, c_out, c_in)}
    zp_in, zp_out = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
    return int4.fully_connected_s4_desc(a, zp_in, zp_out, n), int8_array(rng, (n, c_in))


def conv_case(rng, path: str) -> tuple[dict, np.ndarray]:
    """A convolution case whose row length K the path takes (redrawn until it does: an odd K
    when ungrouped); now and then a 1x1 window (the column is the input pixel) or more
    channels."""
    while True:
        if rng.random() < 0.3:
            desc, x = _pointwise_case(rng)
        else:
            desc, x = random_case(rng, "conv", max_hw=6, max_c=int(rng.choice([9, 24])))
        k = row_length(desc)
        if k % 2 == 0 and k >= (8 if path == "dsp" else 2) or k % 2 and desc["groups"] == 1:
            return desc, x


def _pointwise_case(rng) -> tuple[dict, np.ndarray]:
    n, h, w = 1, int(rng.integers(1, 5)), int(rng.integers(1, 5))
    c_in, c_out = int(rng.choice([8, 16, 24, 64, 2 * int(rng.integers(4, 40))])), int(rng.integers(1, 40))
    a = {
        "weight": int4_weights(rng, (c_out, 1, 1, c_in)),
        "groups": 1,
        "stride": (1, 1),
        "pad": (0, 0, 0, 0),
        "dilation": (1, 1),
        **output_stage(rng, c_out, c_in),
    }
    zp_in, zp_out = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
    desc = int4.conv_s4_desc(a, (n, h, w, c_in), (n, h, w, c_out), zp_in, zp_out)
    return desc, int8_array(rng, (n, h, w, c_in))


def short_edges(rng, desc: dict) -> dict:
    """Now and then every channel at the short requantization's ends: multipliers >= 2^30 and
    shifts -1 (the int4 form's r = 1), -2 or -24."""
    if rng.random() < 0.6:
        return desc
    c = channels_of(desc)
    return dict(
        desc,
        multiplier=rng.integers(2**30, 2**31, c).astype(np.int32),
        shift=rng.choice(np.array([-1, -1, -2, -24, -6], np.int32), c),
    )


def depthwise_case(rng, path: str) -> tuple[dict, np.ndarray]:
    """A case edgec_depthwise_conv_s4_packed takes (on either path: the build picks the int8 packed
    kernel's DSP or Helium form): channel multiplier 1, odd and even channel counts up to 40 (a
    partial last group of 4)."""
    while True:
        desc, x = random_case(rng, "depthwise", max_hw=6, max_c=int(rng.choice([9, 40])))
        if int4.depthwise_fits(desc):
            return desc, x


def scratch_bytes(kind: str, path: str, desc: dict, target: str) -> int:
    """The size the op unit gives the planner (int4.scratch_bytes), for this descriptor."""
    if kind == "depthwise":  # a cached pixel is 8 bytes on a DSP-only build (int16 pairs), else 4
        return packed_depthwise_scratch(desc, 8 if target == "cortex-m4" else 4)
    k = row_length(desc)
    if path.endswith("_unpacked"):  # the int8 packed kernel's filter, then its scratch
        if path.startswith("dsp"):  # edgec_conv_s8_dsp_wide's int16 taps or edgec_conv_s8_dsp's int8: K to 4, rows to 2
            tap = 2 if path == "dsp_unpacked" else 1
            return 2 * tap * -(-desc["output_c"] // 2) * -(-k // 4) * 4 + (28 if desc["input_c"] % 4 else 24) * -(
                -k // 4
            )
        shape = (desc["output_c"], desc["kernel_h"], desc["kernel_w"], desc["input_c"])
        taps = 48 if conv.mve_padded_runs(shape) else k  # edgec_conv_s8_mve's: taps to 16, rows to 4
        return 4 * -(-desc["output_c"] // 4) * -(-taps // 16) * 16 + 32 * -(-taps // 16)
    if kind == "conv" and path == "mve" and k % 2:  # two column pairs of K + 1 inputs, two gathered columns
        return 6 * 32 * ((k + 32) // 32) + 32
    if kind == "conv" and path == "dsp" and k % 2:  # two widened columns, the filter's end, one column
        return 88 * ((k + 8) // 8) + 2 * k + 12
    if kind == "conv":
        return {"dsp": 4 * (k // 8 * 8) + 2 * k, "mve": 128 * ((k + 31) // 32)}[path]
    return {"dsp": 2 * (k // 8 * 8), "mve": 32 * ((k + 31) // 32)}[path]


def _padded(data: bytes) -> bytes:
    return data + bytes(-len(data) % 4)


def record(kind: str, path: str, desc: dict, x: np.ndarray, out_bytes: int, target: str, fold: bool = True) -> bytes:
    """The driver's record; `fold`: a Helium or packed depthwise call gets the folded bias its kernel
    requires."""
    call_desc, routines = desc, [-1, -1]
    if path.endswith("_unpacked"):
        call_desc = int4.unpacked_desc(desc, LAYOUT[path]) if fold else desc
        routines = [MVE_ROUTINES.index(r) if r else -1 for r in conv.mve_routines(desc)]
    elif fold and kind == "depthwise":
        call_desc = int4.depthwise_packed_desc(desc)
    elif fold and path == "mve":
        call_desc = int4.mve_desc(desc)
    has_bias = call_desc["bias"] is not None
    arrays = [call_desc["filter"]] + ([call_desc["bias"]] if has_bias else [])
    arrays += [call_desc["multiplier"], call_desc["shift"], x]
    payload = b"".join(_padded(np.ascontiguousarray(a).tobytes()) for a in arrays)
    ints = [v for v in call_desc.values() if not isinstance(v, np.ndarray) and v is not None]
    channels = channels_of(desc)
    bias_words = call_desc["bias"].size if has_bias else 0
    header = [KIND[kind], PATH[path], len(payload), out_bytes, scratch_bytes(kind, path, desc, target), bias_words]
    header += [call_desc["filter"].size, channels, *ints]
    header += [0] * (HEADER_WORDS - 2 - len(header)) + routines
    return struct.pack(f"<{HEADER_WORDS}i", *header) + payload


GOLDEN = {"fc": linear.fully_connected_s4, "conv": conv.conv_s4, "depthwise": depthwise.depthwise_conv_s4}
CASE = {"fc": fc_case, "conv": conv_case, "depthwise": depthwise_case}


def all_cases(target: str, seed: int, count: int) -> list[tuple[str, str, dict, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    cases = []
    for path in PATHS[target]:
        for kind in ("fc", "conv", "depthwise"):
            for _ in range(count):
                desc, x = CASE[kind](rng, path)
                desc = short_edges(rng, desc)
                cases.append((kind, path, desc, x, GOLDEN[kind](desc, x).reshape(-1)))
    return cases


def test_cases_reach_the_assembly_routines_and_the_other_branches():
    """The DSP path's whole-triples routine (K a multiple of 8 up to 256, short requantization,
    a bias, at least 3 rows) and its C branches (a tail, a long row, no bias) all occur."""
    cases = [c for c in all_cases("cortex-m4", 0, OPT_CASES["-O2"])]
    ks = [row_length(desc) for _, _, desc, _, _ in cases]
    assert any(k % 8 == 0 and k <= 256 for k in ks) and any(k % 8 for k in ks) and any(k > 256 for k in ks)
    assert any(desc["bias"] is None for _, _, desc, _, _ in cases)
    assert {channels_of(desc) % 3 for kind, _, desc, _, _ in cases if kind != "depthwise"} == {0, 1, 2}


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
@pytest.mark.parametrize("opt", list(OPT_CASES))
def test_s4_arm_paths_match_golden(target, opt, tmp_path: Path):
    cases = all_cases(target, seed=len(opt) + len(target), count=OPT_CASES[opt])
    # Refused: an odd row length (but an ungrouped convolution's); a Helium call without a bias (it
    # needs the folded one); a grouped convolution of odd K.
    rng = np.random.default_rng(1)
    odd = {**fc_case(rng, "dsp")[0], "input_c": 9, "output_c": 1, "batches": 1, "bias": np.zeros(1, np.int32)}
    odd.update(filter=int4.pack_int4(np.ones(9, np.int8)), multiplier=odd["multiplier"][:1], shift=odd["shift"][:1])
    refusals = [("fc", path, odd, np.zeros((1, 9), np.int8), np.zeros(1, np.int8)) for path in PATHS[target]]
    grouped, gx = grouped_odd_case(rng)
    grouped_out = np.zeros(conv.conv_s4(grouped, gx).size, np.int8)
    refusals.append(("conv", "dsp", grouped, gx, grouped_out))
    if "mve" in PATHS[target]:
        desc, x = fc_case(rng, "mve")
        refusals.append(("fc", "mve", dict(desc, bias=None), x, np.zeros(desc["output_c"] * x.shape[0], np.int8)))
        refusals.append(("conv", "mve", int4.mve_desc(grouped), gx, grouped_out))
    failures = run_on_qemu(target, opt, cases, refusals, tmp_path)
    assert not failures, f"{len(failures)} of {len(cases) + len(refusals)} cases fail:\n" + "\n".join(failures[:8])


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("opt", list(OPT_CASES))
def test_s4_mve_gather_shapes_match_golden(opt, tmp_path: Path):
    """Helium's gather of a convolution's columns (and the DSP path's, on the same core) over
    GATHER_SHAPES: padding on every side, whole windows in it, odd widths, strides 1 and 2, C_in 1
    and 3, DS-CNN's stem."""
    cases = [
        ("conv", path, desc, x, conv.conv_s4(desc, x).reshape(-1))
        for seed in (list(OPT_CASES).index(opt), 7)
        for desc, x in gather_cases(seed)
        for path in ("mve", "dsp")
        if path == "mve" or row_length(desc) >= 8
    ]
    failures = run_on_qemu("cortex-m55", opt, cases, [], tmp_path)
    assert not failures, f"{len(failures)} of {len(cases)} cases fail:\n" + "\n".join(failures[:8])


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
@pytest.mark.parametrize("opt", list(OPT_CASES))
def test_s4_odd_row_lengths_match_golden(target, opt, tmp_path: Path):
    """The odd-K convolution (rows read from their first nibble's byte) over ODD_K_SHAPES on three
    seeds' weights, zero points and quantization (short_edges' shifts -1 among them): Helium's on
    M55, the DSP path's on M4 (its rows three at a time by edgec_s4_dsp_dot3 with row step K, the
    last rows of a parity portable)."""
    path = "mve" if target == "cortex-m55" else "dsp"
    cases = [
        ("conv", path, desc, x, conv.conv_s4(desc, x).reshape(-1))
        for seed in (list(OPT_CASES).index(opt), 7, 11)
        for desc, x in ((short_edges(np.random.default_rng(seed), d), x) for d, x in gather_cases(seed, ODD_K_SHAPES))
    ]
    assert all(row_length(desc) % 2 for _, _, desc, _, _ in cases)
    failures = run_on_qemu(target, opt, cases, [], tmp_path)
    assert not failures, f"{len(failures)} of {len(cases)} cases fail:\n" + "\n".join(failures[:8])


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
@pytest.mark.parametrize("opt", list(OPT_CASES))
def test_s4_unpacked_match_golden(target, opt, tmp_path: Path):
    """edgec_conv_s4_dsp_unpacked and _dsp_unpacked_narrow (M4, M55) and _mve_unpacked (M55): the
    filter unpacked into the int8 packed kernel's layout (Helium's padded stem rows where
    mve_padded_runs; an even K without them four or sixteen weights a step), over ODD_K_SHAPES and
    EVEN_K_SHAPES on three seeds (short_edges' shifts -1 among them: the int8 kernels' general
    output stage; the Helium routines by each case's shifts) and random odd- and even-K cases;
    refused: a grouped layer, no bias."""
    paths = ["dsp_unpacked", "dsp_narrow_unpacked"] + (["mve_unpacked"] if target == "cortex-m55" else [])
    rng = np.random.default_rng(len(opt))
    shaped = [
        (short_edges(np.random.default_rng(seed), d), x)
        for seed in (list(OPT_CASES).index(opt), 7, 11)
        for d, x in gather_cases(seed, ODD_K_SHAPES + EVEN_K_SHAPES)
    ]
    drawn = [conv_case(rng, "dsp") for _ in range(80)]
    drawn = [(short_edges(rng, d), x) for d, x in drawn if d["groups"] == 1][:16]
    cases = [("conv", p, d, x, conv.conv_s4(d, x).reshape(-1)) for p in paths for d, x in shaped + drawn]
    assert {row_length(desc) % 2 for _, _, desc, _, _ in cases} == {0, 1}
    for _, p, desc, _, _ in cases:  # the size the unit gives the planner is the one tested here
        op = SimpleNamespace(kind="conv2d", attrs={"desc": desc, "s4_isa": p[:3], "s4_unpacked": LAYOUT[p]})
        assert int4.scratch_bytes(op) == scratch_bytes("conv", p, desc, target)
    grouped, gx = grouped_odd_case(rng)
    desc, x = shaped[0]
    refusals = []
    for p in paths:
        grouped_out = np.zeros(conv.conv_s4(grouped, gx).size, np.int8)
        refusals.append(("conv", p, int4.unpacked_desc(grouped, LAYOUT[p]), gx, grouped_out))
        refusals.append(("conv", p, dict(desc, bias=None), x, np.zeros(conv.conv_s4(desc, x).size, np.int8)))
    failures = run_on_qemu(target, opt, cases, refusals, tmp_path)
    assert not failures, f"{len(failures)} of {len(cases) + len(refusals)} cases fail:\n" + "\n".join(failures[:8])


def grouped_odd_case(rng) -> tuple[dict, np.ndarray]:
    """A grouped convolution of odd K (3x3, 3 channels a group): the DSP and Helium paths refuse it."""
    a = {
        "weight": int4_weights(rng, (4, 3, 3, 3)),
        "groups": 2,
        "stride": (1, 1),
        "pad": (0, 0, 0, 0),
        "dilation": (1, 1),
        **output_stage(rng, 4, 27),
    }
    return int4.conv_s4_desc(a, (1, 4, 4, 6), (1, 2, 2, 4), 3, -5), int8_array(rng, (1, 4, 4, 6))


def run_on_qemu(target: str, opt: str, cases: list, refusals: list, tmp_path: Path) -> list[str]:
    """The driver built at `opt` runs `cases` (kind, path, descriptor, input, golden output) and
    `refusals` (the same, each to be refused, passed without the folded bias) under QEMU; one line
    per case that fails (wrong output or status, a guard byte overwritten)."""
    elf = toolchain.cross_compile(
        target,
        [DRIVER, *SOURCES],
        [RUNTIME / "include"],
        tmp_path / "s4.elf",
        opt=opt,
        extra_cflags=["-Wall", "-Wextra", "-Werror", "-pedantic"],
    )
    everything = cases + refusals
    records = [record(k, p, d, xx, e.size, target) for k, p, d, xx, e in cases]
    records += [record(k, p, d, xx, e.size, target, fold=False) for k, p, d, xx, e in refusals]
    (tmp_path / "cases.bin").write_bytes(b"".join(records))
    toolchain.count_instructions(target, elf, timeout=600, cwd=tmp_path)
    data, at, failures = (tmp_path / "results.bin").read_bytes(), 0, []
    for i, (kind, path, desc, _, expected) in enumerate(everything):
        status, guards = struct.unpack_from("<2i", data, at)
        out = np.frombuffer(data, np.int8, expected.size, at + 8)
        at += 8 + expected.size
        refused = i >= len(cases)
        ok = status == ARG_ERROR if refused else status == 0 and np.array_equal(out, expected)
        if not guards or not ok:
            failures.append(
                f"case {i}: {kind} {path} status {status} guards {guards} k={row_length(desc)} "
                f"c_out={channels_of(desc)} bias={desc['bias'] is not None}"
            )
    assert at == len(data)
    return failures
