"""Attention-family kernels: batch matmul of two activations and layer norm (edgec.ops.matmul,
edgec.ops.layer_norm; runtime_c/src/matmul/, runtime_c/src/norm/).

Three layers, as for the other kernel families:
  1. the golden kernels against slow independent references: per-element Python-int loops written
     from TFLite Micro's reference BatchMatMul (int8, with MultiplyByQuantizedMultiplier spelled
     out from gemmlowp's SaturatingRoundingDoublingHighMul and RoundingDivideByPOT), and from the
     layer norm's documented integer definition (Python ints, math.isqrt); the layer norm also
     against float LayerNorm of the dequantized input (within one output step);
  2. hypothesis: golden == C (UBSan library) byte for byte, extremes included, guard tail checked;
  3. QEMU: the same kernels cross-compiled for cortex-m4 and cortex-m55 against the golden, with
     their instruction counts on an attention-sized case.
"""

from __future__ import annotations

import ctypes as C
import math
import struct

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgec.ops.layer_norm import layer_norm_desc, layer_norm_s8
from edgec.ops.matmul import batch_matmul_desc, batch_matmul_s8
from edgec.targets import toolchain
from tests.device_support import ROOT, needs_toolchain
from tests.kernel_lib import BatchMatmulDesc, LayerNormDesc, struct_from_desc

EDGEC_OK, EDGEC_ARG_ERROR = 0, -1
GUARD = 16
GUARD_BYTE = 0x5A
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
P8 = C.POINTER(C.c_int8)


@pytest.fixture(scope="module")
def lib(kernel_lib):
    kernel_lib.edgec_batch_matmul_s8.argtypes = [C.POINTER(BatchMatmulDesc), P8, P8, P8]
    kernel_lib.edgec_batch_matmul_s8.restype = C.c_int
    kernel_lib.edgec_layer_norm_s8.argtypes = [C.POINTER(LayerNormDesc), P8, P8]
    kernel_lib.edgec_layer_norm_s8.restype = C.c_int
    return kernel_lib


def _guarded_call(call, size: int) -> tuple[int, np.ndarray]:
    buf = np.concatenate([np.zeros(size, np.int8), np.full(GUARD, GUARD_BYTE, np.int8)])
    status = call(buf.ctypes.data_as(P8))
    assert (buf[-GUARD:] == GUARD_BYTE).all(), "C kernel wrote past the end of its output"
    return status, buf[:-GUARD]


def c_matmul(lib, desc: dict, lhs: np.ndarray, rhs: np.ndarray, size: int):
    keep: list = []
    c_desc = struct_from_desc(BatchMatmulDesc, desc, keep)
    lhs, rhs = (np.ascontiguousarray(a, dtype=np.int8).ravel() for a in (lhs, rhs))
    return _guarded_call(
        lambda out: lib.edgec_batch_matmul_s8(C.byref(c_desc), lhs.ctypes.data_as(P8), rhs.ctypes.data_as(P8), out),
        size,
    )


def c_layer_norm(lib, desc: dict, x: np.ndarray):
    keep: list = []
    c_desc = struct_from_desc(LayerNormDesc, desc, keep)
    x = np.ascontiguousarray(x, dtype=np.int8).ravel()
    return _guarded_call(lambda out: lib.edgec_layer_norm_s8(C.byref(c_desc), x.ctypes.data_as(P8), out), x.size)


# -- slow independent references ---------------------------------------------------------------


def _srdhm(a: int, b: int) -> int:
    """gemmlowp SaturatingRoundingDoublingHighMul, as written there (int32 in, int32 out)."""
    if a == b == -(2**31):
        return 2**31 - 1
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    return int((ab + nudge) / (1 << 31))  # C division truncates toward zero


def _rounding_divide_by_pot(x: int, exponent: int) -> int:
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def _multiply_by_quantized_multiplier(x: int, multiplier: int, shift: int) -> int:
    """TFLite MultiplyByQuantizedMultiplier (double rounding), the left shift saturating (edgec's
    documented extension where the int32 product would overflow)."""
    left, right = max(shift, 0), max(-shift, 0)
    x = max(-(2**31), min(2**31 - 1, x * (1 << left)))
    return _rounding_divide_by_pot(_srdhm(x, multiplier), right)


def slow_batch_matmul(lhs: np.ndarray, rhs: np.ndarray, s: dict) -> np.ndarray:
    """TFLite Micro reference BatchMatMul (int8) over NumPy-broadcast batches, one element at a time:
    lhs [..., M, K], rhs [..., K, N] (already transposed back if it was stored [..., N, K])."""
    batch = np.broadcast_shapes(lhs.shape[:-2], rhs.shape[:-2])
    lhs_b, rhs_b = np.broadcast_to(lhs, batch + lhs.shape[-2:]), np.broadcast_to(rhs, batch + rhs.shape[-2:])
    m_size, k_size, n_size = lhs.shape[-2], lhs.shape[-1], rhs.shape[-1]
    out = np.zeros(batch + (m_size, n_size), dtype=np.int8)
    for b in np.ndindex(*batch):
        for m in range(m_size):
            for n in range(n_size):
                total = 0
                for k in range(k_size):
                    total += (int(lhs_b[b][m, k]) + s["lhs_offset"]) * (int(rhs_b[b][k, n]) + s["rhs_offset"])
                total = (total + 2**31) % 2**32 - 2**31
                value = _multiply_by_quantized_multiplier(total, s["multiplier"], s["shift"]) + s["output_offset"]
                out[b][m, n] = min(max(value, s["act_min"]), s["act_max"])
    return out


def slow_layer_norm(x: np.ndarray, desc: dict) -> np.ndarray:
    """The layer norm's integer definition (edgec.ops.layer_norm docstring), one element at a time
    in Python integers."""
    n = desc["features"]
    eps_term = (desc["eps_term_hi"] << 32) + (desc["eps_term_lo"] & 0xFFFFFFFF)
    offsets = [(int(h) << 32) + (int(lo) & 0xFFFFFFFF) for h, lo in zip(desc["offset_hi"], desc["offset_lo"])]
    out = []
    for row in np.asarray(x, dtype=np.int64).reshape(-1, n).tolist():
        total = sum(row)
        d = [n * q - total for q in row]
        fraction = max(0, (30 - 3 * math.ceil(math.log2(n))) // 2)  # eps_term's fraction bits
        v = sum(e * e for e in d) * 4**fraction + eps_term
        t = 0
        while v and v * 4**t < 2**60:
            t += 1
        r = math.isqrt(v * 4**t) if v else 0
        for i, e in enumerate(d):
            u = (e * 2 ** (t + fraction) * ((2**61 - 1) // r) + 2**36) // 2**37 if v else 0
            y = (u * int(desc["scale"][i]) + offsets[i] + 2 ** (desc["shift"] - 1)) // 2 ** desc["shift"]
            out.append(min(max(y + desc["output_offset"], desc["act_min"]), desc["act_max"]))
    return np.array(out, dtype=np.int8)


# -- random cases ------------------------------------------------------------------------------


def int8_data(rng, shape) -> np.ndarray:
    return rng.integers(-128, 128, size=shape, dtype=np.int64).astype(np.int8)


def random_matmul(rng, extreme: bool = False):
    rows, cols, depth = (int(v) for v in rng.integers(1, 9, 3))
    rank = int(rng.integers(0, 4))
    batch = [int(v) for v in rng.integers(1, 4, rank)]
    lhs_batch = [1 if rng.random() < 0.3 else b for b in batch]
    rhs_batch = [1 if rng.random() < 0.3 else b for b in batch][int(rng.integers(0, rank + 1)) :]
    transposed = bool(rng.random() < 0.5)
    lhs = int8_data(rng, lhs_batch + [rows, depth])
    rhs_logical = int8_data(rng, rhs_batch + [depth, cols])
    rhs_stored = np.ascontiguousarray(np.swapaxes(rhs_logical, -1, -2)) if transposed else rhs_logical
    zps = [int(rng.choice([-128, 127])) if extreme else int(rng.integers(-128, 128)) for _ in range(3)]
    scales = [float(2.0 ** rng.uniform(-8, 0)) for _ in range(2)]
    out_scale = scales[0] * scales[1] * float(2.0 ** rng.uniform(4 if extreme else 6, 14))
    lo = int(rng.integers(-128, 0)) if rng.random() < 0.2 else -128
    desc = batch_matmul_desc(
        lhs.shape,
        rhs_stored.shape,
        (scales[0], zps[0]),
        (scales[1], zps[1]),
        (out_scale, zps[2]),
        lo,
        127,
        rhs_transposed=transposed,
    )
    return desc, lhs, rhs_stored, rhs_logical


def random_layer_norm(rng, extreme: bool = False):
    rows, features = int(rng.integers(1, 5)), int(rng.choice([1, 2, 3, 7, 16, 33, 64]))
    x = int8_data(rng, (rows, features))
    if rng.random() < 0.2:
        x[0] = x[0, 0]  # a constant row: only eps keeps the variance positive
    s_x, s_y = float(2.0 ** rng.uniform(-8, 0)), float(2.0 ** rng.uniform(-7, -2))
    zp_x, zp_y = (
        (int(rng.choice([-128, 127])) for _ in range(2)) if extreme else (int(v) for v in rng.integers(-128, 128, 2))
    )
    gamma = rng.uniform(-2, 2, features) * (100.0 if extreme and rng.random() < 0.5 else 1.0)
    beta = rng.uniform(-1, 1, features)
    eps = float(rng.choice([0.0, 1e-5, 1e-2]))
    desc = layer_norm_desc(rows, features, gamma, beta, eps, (s_x, zp_x), (s_y, zp_y))
    return desc, x, (gamma, beta, eps, s_x, zp_x, s_y, zp_y)


# -- 1. golden against the slow references and float -------------------------------------------


def test_batch_matmul_golden_matches_tflite_reference():
    rng = np.random.default_rng(0)
    for case in range(150):
        desc, lhs, rhs_stored, rhs_logical = random_matmul(rng, extreme=case % 3 == 0)
        expected = slow_batch_matmul(lhs, rhs_logical, desc)
        assert np.array_equal(batch_matmul_s8(lhs, rhs_stored, desc), expected.ravel()), desc


def test_batch_matmul_golden_matches_torch_in_float():
    """Dequantized, the golden is torch.matmul of the dequantized operands, within half an output
    step plus the requantization rounding."""
    rng = np.random.default_rng(1)
    lhs, rhs = int8_data(rng, (2, 1, 5, 16)), int8_data(rng, (3, 16, 4))
    (s1, z1), (s2, z2), (s3, z3) = (0.02, 3), (0.05, -7), (0.5, 1)
    desc = batch_matmul_desc(lhs.shape, rhs.shape, (s1, z1), (s2, z2), (s3, z3))
    got = (batch_matmul_s8(lhs, rhs, desc).astype(np.float64) - z3) * s3
    want = (
        torch.matmul(torch.tensor((lhs.astype(np.float64) - z1) * s1), torch.tensor((rhs.astype(np.float64) - z2) * s2))
        .numpy()
        .ravel()
    )
    assert np.abs(got - np.clip(want, (-128 - z3) * s3, (127 - z3) * s3)).max() <= 0.5 * s3 + 1e-9


def test_layer_norm_golden_matches_integer_definition():
    rng = np.random.default_rng(2)
    for case in range(150):
        desc, x, _ = random_layer_norm(rng, extreme=case % 3 == 0)
        assert np.array_equal(layer_norm_s8(x, desc), slow_layer_norm(x, desc)), desc


def test_layer_norm_golden_is_within_one_step_of_float():
    """Against torch's float layer_norm of the dequantized input: every output within one step,
    and (the fixed point carrying 24 bits) correctly rounded on nearly all of them."""
    rng = np.random.default_rng(3)
    exact = total = 0
    for _ in range(100):
        desc, x, (gamma, beta, eps, s_x, zp_x, s_y, zp_y) = random_layer_norm(rng)
        real = torch.nn.functional.layer_norm(
            torch.tensor((x.astype(np.float64) - zp_x) * s_x),
            (x.shape[1],),
            torch.tensor(gamma),
            torch.tensor(beta),
            eps,
        ).numpy()
        want = np.clip(np.floor(real / s_y + 0.5) + zp_y, -128, 127).ravel()
        got = layer_norm_s8(x, desc).astype(np.float64)
        defined = np.isfinite(want)  # float gives NaN for a constant row with eps 0 (edgec: beta)
        got, want = got[defined], want[defined]
        assert np.abs(got - want).max(initial=0) <= 1, (desc, got, want)
        exact += int((got == want).sum())
        total += got.size
    assert exact >= 0.99 * total


def test_layer_norm_desc_limits():
    with pytest.raises(ValueError):
        layer_norm_desc(1, 5000, None, None, 1e-5, (0.1, 0), (0.1, 0))
    with pytest.raises(ValueError):
        layer_norm_desc(1, 4, np.full(4, 1e12), None, 1e-5, (0.1, 0), (1e-6, 0))
    desc = layer_norm_desc(1, 4, None, None, 1e3, (1e-9, 0), (0.1, 0))  # eps_term capped at 2^60
    assert (desc["eps_term_hi"] << 32) + (desc["eps_term_lo"] & 0xFFFFFFFF) == 1 << 60


# -- 2. golden == C ----------------------------------------------------------------------------


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), extreme=st.booleans())
def test_batch_matmul_c_matches_golden(lib, seed, extreme):
    rng = np.random.default_rng(seed)
    desc, lhs, rhs, _ = random_matmul(rng, extreme)
    if extreme and rng.random() < 0.5:
        desc["multiplier"], desc["shift"] = 2**31 - 1, int(rng.choice([-31, 0, 1, 31]))
    expected = batch_matmul_s8(lhs, rhs, desc)
    status, out = c_matmul(lib, desc, lhs, rhs, expected.size)
    assert status == EDGEC_OK and np.array_equal(out, expected)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), extreme=st.booleans())
def test_layer_norm_c_matches_golden(lib, seed, extreme):
    rng = np.random.default_rng(seed)
    desc, x, _ = random_layer_norm(rng, extreme)
    expected = layer_norm_s8(x, desc)
    status, out = c_layer_norm(lib, desc, x)
    assert status == EDGEC_OK and np.array_equal(out, expected)


def test_layer_norm_largest_row_and_extremes(lib):
    """4096 features alternating -128/127 (the largest variance), a zero-variance row with eps 0,
    and gamma at the top of the multiplier range: golden == C == the integer definition."""
    rng = np.random.default_rng(4)
    x = np.tile(np.array([-128, 127], np.int8), (1, 2048))
    desc = layer_norm_desc(1, 4096, rng.uniform(-1, 1, 4096), rng.uniform(-1, 1, 4096), 0.0, (1.0, 0), (2**-5, 0))
    for data, d in (
        (x, desc),
        (np.full((2, 8), 7, np.int8), layer_norm_desc(2, 8, None, None, 0.0, (1.0, 7), (0.1, 0))),
    ):
        expected = layer_norm_s8(data, d)
        assert np.array_equal(expected, slow_layer_norm(data, d))
        status, out = c_layer_norm(lib, d, data)
        assert status == EDGEC_OK and np.array_equal(out, expected)


def test_invalid_descriptors_are_refused(lib):
    rng = np.random.default_rng(5)
    desc, lhs, rhs, _ = random_matmul(rng)
    for field, value in (
        ("rows", 0),
        ("depth", -1),
        ("batch_rank", 5),
        ("lhs_offset", 300),
        ("shift", 40),
        ("act_min", 100),
        ("rhs_col_stride", -1),
    ):
        bad = dict(desc, **{field: value})
        if field == "act_min":
            bad["act_max"] = 0
        assert c_matmul(lib, bad, lhs, rhs, 1)[0] == EDGEC_ARG_ERROR, field
    ln, x, _ = random_layer_norm(rng)
    for field, value in (
        ("rows", 0),
        ("features", 5000),
        ("shift", 31),
        ("shift", 63),
        ("eps_term_hi", -1),
        ("output_offset", 200),
    ):
        assert c_layer_norm(lib, dict(ln, **{field: value}), x)[0] == EDGEC_ARG_ERROR, field
    too_big = dict(ln, offset_hi=np.full_like(ln["offset_hi"], 1 << 25))
    assert c_layer_norm(lib, too_big, x)[0] == EDGEC_ARG_ERROR


# -- 3. QEMU: cortex-m4 and cortex-m55 ---------------------------------------------------------

DRIVER = ROOT / "tests" / "data" / "port" / "attention_kernels.c"
SOURCES = [
    ROOT / "runtime_c" / "src" / "matmul" / "edgec_batch_matmul_s8.c",
    ROOT / "runtime_c" / "src" / "norm" / "edgec_layer_norm_s8.c",
]
HEADER_WORDS = 40


def _padded(data: bytes) -> bytes:
    return data + bytes(-len(data) % 4)


def record(kind: int, desc: dict, arrays: list[np.ndarray], output_bytes: int) -> bytes:
    words, tables = [], []
    for value in desc.values():
        if isinstance(value, tuple):
            words += list(value)
        elif isinstance(value, np.ndarray):
            tables.append(np.ascontiguousarray(value, dtype=np.int32).tobytes())
        else:
            words.append(int(value))
    payload = b"".join(_padded(np.ascontiguousarray(a, np.int8).tobytes()) for a in arrays) + b"".join(tables)
    header = [kind, len(payload), output_bytes, *words]
    return struct.pack(f"<{HEADER_WORDS}i", *(header + [0] * (HEADER_WORDS - len(header)))) + payload


def device_cases(seed: int) -> list:
    """(name, kind, desc, arrays, expected) -- random cases plus attention-sized benchmarks:
    q @ k^T and attn @ v of 2 heads x 65 tokens x 16, a 65 x 32 layer norm."""
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(30):
        desc, lhs, rhs, _ = random_matmul(rng, extreme=i % 3 == 0)
        cases.append((f"matmul_{i}", 1, desc, [lhs, rhs], batch_matmul_s8(lhs, rhs, desc)))
        ln, x, _ = random_layer_norm(rng, extreme=i % 3 == 0)
        cases.append((f"layer_norm_{i}", 2, ln, [x], layer_norm_s8(x, ln)))
    q, k, v = int8_data(rng, (1, 2, 65, 16)), int8_data(rng, (1, 2, 65, 16)), int8_data(rng, (1, 2, 65, 16))
    scores = batch_matmul_desc(q.shape, k.shape, (0.05, 3), (0.05, -2), (0.5, 0), rhs_transposed=True)
    cases.append(("bench_q_kT", 1, scores, [q, k], batch_matmul_s8(q, k, scores)))
    weights = int8_data(rng, (1, 2, 65, 65))
    mix = batch_matmul_desc(weights.shape, v.shape, (1 / 256, -128), (0.05, 1), (0.05, 2))
    cases.append(("bench_attn_v", 1, mix, [weights, v], batch_matmul_s8(weights, v, mix)))
    x = int8_data(rng, (65, 32))
    ln = layer_norm_desc(65, 32, rng.uniform(0.5, 1.5, 32), rng.uniform(-0.2, 0.2, 32), 1e-5, (0.05, 3), (0.03, -1))
    cases.append(("bench_layer_norm", 2, ln, [x], layer_norm_s8(x, ln)))
    return cases


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
def test_attention_kernels_on_device(target, tmp_path, capsys):
    cases = device_cases(seed=12)
    elf = toolchain.cross_compile(
        target,
        [DRIVER, *SOURCES],
        [ROOT / "runtime_c" / "include"],
        tmp_path / "attention.elf",
        extra_cflags=["-Wall", "-Wextra", "-Werror", "-pedantic"],
    )
    (tmp_path / "cases.bin").write_bytes(
        b"".join(record(kind, desc, arrays, expected.size) for _, kind, desc, arrays, expected in cases)
    )
    counts = toolchain.count_instructions(target, elf, timeout=300, cwd=tmp_path)
    data, at, failures = (tmp_path / "results.bin").read_bytes(), 0, []
    for name, _, desc, _, expected in cases:
        status, guard = struct.unpack_from("<2i", data, at)
        out = np.frombuffer(data, np.int8, expected.size, at + 8)
        at += 8 + expected.size
        if status != EDGEC_OK or not guard or not np.array_equal(out, expected):
            failures.append(f"{name}: status {status}, guard {guard}")
    assert at == len(data) and len(counts["insns"]) == len(cases)
    assert not failures, f"{len(failures)} of {len(cases)} cases fail:\n" + "\n".join(failures[:10])
    with capsys.disabled():
        print(
            f"\n{target} instructions: "
            + ", ".join(
                f"{case[0]} {count}" for case, count in zip(cases, counts["insns"]) if case[0].startswith("bench")
            )
        )
