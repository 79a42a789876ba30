"""edgec_lstm_s8 / edgec_gru_s8 against their golden kernels (edgec.ops.recurrent), byte for byte.

1. hypothesis: random descriptors (any multiplier up to 2^31 - 1, shifts at their limits, zero
   points at -128/127, biases near the int32 limits, size-1 and odd sizes, time or batch major, a
   reset or a carried-over state) through the UBSan library; argument checks.
2. a slow, independent reference of one time step, per element in plain Python integers, written
   from TFLite's reference integer kernels (MultiplyByQuantizedMultiplier; the int16 logistic/tanh
   of reference_integer_ops/logistic.h and tanh.h; CMSIS-NN's LSTM step order), against the golden;
   and the int16 sigmoid/tanh against the float functions.
3. QEMU: the same random cases on cortex-m4 and cortex-m55 (tests/data/port/recurrent_kernels.c),
   and the instruction count of the keyword spotter's LSTM and GRU layers (49 x 10 -> 64).
"""

from __future__ import annotations

import ctypes as C
import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgec.ops.recurrent import (
    DESC_FIELDS,
    GRU_GATES,
    LSTM_GATES,
    SIGMOID,
    TANH,
    activation_s16,
    recurrent_desc,
    recurrent_s8,
    sigmoid_table,
)
from edgec.targets import toolchain
from tests.device_support import ROOT, needs_toolchain
from tests.kernel_lib import RecurrentDesc, pack_record, struct_from_desc

EDGEC_OK, ARG_ERROR = 0, -1
GUARD = 0x5A
SCRATCH = lambda hidden: 16 * hidden  # noqa: E731  (EDGEC_RECURRENT_SCRATCH_BYTES)
INT_FIELDS = [
    f for f in DESC_FIELDS if f not in ("input_weights", "hidden_weights", "input_bias", "hidden_bias", "sigmoid_table")
]


def random_desc(rng, cell: int | None = None, sizes: tuple | None = None) -> dict:
    """A random descriptor: random integer constants, not derived from float weights, with
    extremes mixed in (the kernel must be exact whatever its constants)."""
    cell = cell or int(rng.choice([LSTM_GATES, GRU_GATES]))
    batches, steps, inputs, hidden = sizes or (
        int(rng.choice([1, 1, 2, 3])),
        int(rng.choice([1, 2, 3, 5])),
        int(rng.choice([1, 2, 3, 7, 10, 17])),
        int(rng.choice([1, 2, 3, 5, 8, 13])),
    )

    def multiplier():
        return int(rng.choice([2**31 - 1, 2**30, int(rng.integers(2**30, 2**31))]))

    def shift(low=-31, high=4):
        return int(rng.choice([low, high, int(rng.integers(low, high + 1)), int(rng.integers(-14, 0))]))

    def weights(rows, cols):
        if rng.random() < 0.15:
            return rng.choice(np.array([-127, 127, -128], np.int8), (rows, cols))
        return rng.integers(-128, 128, (rows, cols), dtype=np.int8)

    def bias(rows):
        if rng.random() < 0.15:
            return rng.choice(np.array([2**31 - 1, -(2**31), 0], np.int64), rows).astype(np.int32)
        return rng.integers(-(2**20), 2**20, rows, dtype=np.int32)

    rows = cell * hidden
    values = {
        "cell": cell,
        "batches": batches,
        "time_steps": steps,
        "input_size": inputs,
        "hidden_size": hidden,
        "time_major": int(rng.integers(2)),
        "reset_state": int(rng.integers(2)),
        "input_weights": weights(rows, inputs),
        "hidden_weights": weights(rows, hidden),
        "input_bias": bias(rows),
        "hidden_bias": bias(rows),
        "input_multiplier": [multiplier() for _ in range(4)],
        "input_shift": [shift(-31, 1) for _ in range(4)],
        "hidden_multiplier": [multiplier() for _ in range(4)],
        "hidden_shift": [shift(-31, 1) for _ in range(4)],
        "forget_cell_multiplier": multiplier(),
        "forget_cell_shift": shift(-20, 2),
        "input_cell_multiplier": multiplier(),
        "input_cell_shift": shift(-20, 8),
        "cell_tanh_shift": int(rng.choice([-3, -1, 0, 1, 3, 14, int(rng.integers(-31, 15))])),
        "output_multiplier": multiplier(),
        "output_shift": shift(-31, 0),
        "output_offset": int(rng.choice([-128, 127, 0, int(rng.integers(-128, 128))])),
        "hidden_q15_multiplier": multiplier(),
        "hidden_q15_shift": shift(-4, 9),
        "last_step_only": int(rng.random() < 0.25),
        "tanh_linear": int(rng.random() < 0.3),
        "sigmoid_table": sigmoid_table(),
        "weight_bits": 8,  # int4: tests/test_int4_recurrent.py
    }
    return {name: values[name] for name in DESC_FIELDS}


def random_state(rng, desc):
    shape = (desc["batches"], desc["hidden_size"])
    return (
        rng.integers(-128, 128, shape, dtype=np.int8),
        rng.choice(np.array([-32768, 32767, 0, 1, -1], np.int16), shape)
        if rng.random() < 0.2
        else rng.integers(-32768, 32768, shape, dtype=np.int16),
    )


def run_c(lib, desc, x, hidden, cell, *, expect=EDGEC_OK, kernel: int | None = None):
    """The C kernel on copies of the state; returns (output, hidden', cell')."""
    keep: list = []
    steps, batches, hs = desc["time_steps"], desc["batches"], desc["hidden_size"]
    steps = 1 if desc["last_step_only"] else steps
    out = np.full(batches * steps * hs + 16, GUARD, np.uint8).view(np.int8)
    scratch = np.full(SCRATCH(hs) // 4 + 4, 0x5A5A5A5A, np.uint32)
    hidden, cell = np.ascontiguousarray(hidden.copy()), np.ascontiguousarray(cell.copy())
    x = np.ascontiguousarray(x, np.int8)
    s = struct_from_desc(RecurrentDesc, desc, keep)
    P8 = C.POINTER(C.c_int8)
    if (kernel or desc["cell"]) == LSTM_GATES:
        status = lib.edgec_lstm_s8(
            C.byref(s),
            x.ctypes.data_as(P8),
            out.ctypes.data_as(P8),
            hidden.ctypes.data_as(P8),
            cell.ctypes.data_as(C.POINTER(C.c_int16)),
            scratch.ctypes.data_as(C.c_void_p),
        )
    else:
        status = lib.edgec_gru_s8(
            C.byref(s),
            x.ctypes.data_as(P8),
            out.ctypes.data_as(P8),
            hidden.ctypes.data_as(P8),
            scratch.ctypes.data_as(C.c_void_p),
        )
    assert status == expect
    assert (out[-16:].view(np.uint8) == GUARD).all(), "wrote past the output"
    assert (scratch[SCRATCH(hs) // 4 :] == 0x5A5A5A5A).all(), "wrote past the scratch"
    return out[:-16], hidden, cell


def _shaped(desc, x):
    steps, batches = desc["time_steps"], desc["batches"]
    return x.reshape((steps, batches, -1) if desc["time_major"] else (batches, steps, -1))


# -- 1. golden vs C ----------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_recurrent_golden_equals_c(kernel_lib, seed):
    rng = np.random.default_rng(seed)
    desc = random_desc(rng)
    x = rng.integers(-128, 128, desc["time_steps"] * desc["batches"] * desc["input_size"], dtype=np.int8)
    hidden, cell = random_state(rng, desc)
    out, h, c = run_c(kernel_lib, desc, x, hidden, cell)
    g_out, g_h, g_c = recurrent_s8(desc, x, hidden, cell)
    np.testing.assert_array_equal(out, g_out.ravel())
    np.testing.assert_array_equal(h, g_h)
    if desc["cell"] == LSTM_GATES:
        np.testing.assert_array_equal(c, g_c)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), cell=st.sampled_from(["lstm", "gru"]))
def test_recurrent_from_float_weights_golden_equals_c(kernel_lib, seed, cell):
    """Descriptors as the unit derives them (recurrent_desc), zero points at the extremes."""
    rng = np.random.default_rng(seed)
    gates = LSTM_GATES if cell == "lstm" else GRU_GATES
    inputs, hidden, steps = int(rng.integers(1, 12)), int(rng.integers(1, 12)), int(rng.integers(1, 6))
    desc = recurrent_desc(
        cell,
        batches=1,
        time_steps=steps,
        time_major=bool(rng.integers(2)),
        reset_state=True,
        w_ih=rng.normal(0, 0.5, (gates * hidden, inputs)),
        w_hh=rng.normal(0, 0.5, (gates * hidden, hidden)),
        b_ih=rng.normal(0, 1, gates * hidden),
        b_hh=rng.normal(0, 1, gates * hidden),
        input_scale=float(2 ** rng.uniform(-8, -2)),
        input_zp=int(rng.choice([-128, 127, 3])),
        hidden_scale=float(2 ** rng.uniform(-8, -6)),
        hidden_zp=int(rng.choice([-128, 127, 0])),
        cell_power=int(rng.integers(-15, 3)),
    )
    x = rng.integers(-128, 128, steps * inputs, dtype=np.int8)
    state = (np.zeros((1, hidden), np.int8), np.zeros((1, hidden), np.int16))
    out, h, _ = run_c(kernel_lib, desc, x, *state)
    np.testing.assert_array_equal(out, recurrent_s8(desc, x)[0].ravel())


def test_reset_state_starts_from_real_zero(kernel_lib):
    rng = np.random.default_rng(3)
    desc = dict(random_desc(rng, LSTM_GATES), reset_state=1)
    x = rng.integers(-128, 128, desc["time_steps"] * desc["batches"] * desc["input_size"], dtype=np.int8)
    a = run_c(kernel_lib, desc, x, *random_state(rng, desc))
    b = run_c(kernel_lib, desc, x, *random_state(rng, desc))
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


def test_streaming_one_step_at_a_time_equals_the_sequence(kernel_lib):
    """reset_state 0: T calls of one step each == one call of T steps."""
    rng = np.random.default_rng(5)
    for cell in (LSTM_GATES, GRU_GATES):
        desc = dict(random_desc(rng, cell, (2, 6, 5, 7)), time_major=1, reset_state=0, last_step_only=0)
        x = rng.integers(-128, 128, 6 * 2 * 5, dtype=np.int8)
        hidden, state = random_state(rng, desc)
        whole, h_whole, c_whole = run_c(kernel_lib, desc, x, hidden, state)
        one = dict(desc, time_steps=1)
        outs = []
        for t in range(6):
            out, hidden, state = run_c(kernel_lib, one, x.reshape(6, -1)[t], hidden, state)
            outs.append(out)
        np.testing.assert_array_equal(np.concatenate(outs), whole)
        np.testing.assert_array_equal(hidden, h_whole)


def test_recurrent_rejects_bad_arguments(kernel_lib):
    rng = np.random.default_rng(1)
    good = random_desc(rng, LSTM_GATES, (1, 2, 3, 4))
    x = np.zeros(2 * 3, np.int8)
    state = random_state(rng, good)
    for bad in (
        dict(good, batches=0),
        dict(good, time_steps=0),
        dict(good, input_size=0),
        dict(good, hidden_size=-1),
        dict(good, cell=5),
        dict(good, output_offset=128),
        dict(good, cell_tanh_shift=15),
        dict(good, input_shift=[32, 0, 0, 0]),
        dict(good, hidden_shift=[0, 0, 0, -32]),
        dict(good, output_shift=32),
        dict(good, input_size=70000),
    ):
        run_c(kernel_lib, bad, x, *state, expect=ARG_ERROR)
    gru = random_desc(rng, GRU_GATES, (1, 2, 3, 4))
    run_c(kernel_lib, dict(gru, hidden_q15_shift=-32), x, *state, expect=ARG_ERROR)
    run_c(kernel_lib, gru, x, *state, expect=ARG_ERROR, kernel=LSTM_GATES)  # the other cell's function
    run_c(kernel_lib, good, x, *state, expect=ARG_ERROR, kernel=GRU_GATES)


# -- 2. slow independent reference ---------------------------------------------------------------


def ref_multiply(x: int, multiplier: int, shift: int) -> int:
    """TFLite MultiplyByQuantizedMultiplier (the left shift saturating, as edgec defines it)."""
    left, right = max(shift, 0), max(-shift, 0)
    x = max(-(2**31), min(2**31 - 1, x * (1 << left)))
    high = (x * multiplier + (1 << 30)) >> 31  # SaturatingRoundingDoublingHighMul (no int32 overflow case here)
    mask = (1 << right) - 1
    remainder, result = high & mask, high >> right
    return result + (1 if remainder > (mask >> 1) + (1 if result < 0 else 0) else 0)


def ref_activation(x: int, left_shift: int, function: int, table) -> int:
    """reference_integer_ops logistic/tanh int16: input scaled by 3 * 2^left_shift to the
    table's 1/24 grid (rounded), |x| split into table index and fraction, linear interpolation,
    the sign restored; saturates beyond the table."""
    if left_shift >= 0:
        v = x * 3 * 2**left_shift
    else:
        v = (x * 3 + (1 << (-left_shift - 1))) >> -left_shift
    a = abs(v)
    bits = 9 if function == SIGMOID else 8
    index, fraction = a >> bits, a & ((1 << bits) - 1)
    if index >= 255:
        value = (0x7FFF << 10) if function == SIGMOID else (0xFFFF << 8)
    else:
        value = (int(table[index]) << bits) + fraction * (int(table[index + 1]) - int(table[index]))
    if function == SIGMOID:
        result = (value + 512) >> 10 if v >= 0 else ((1 << 25) - value + 511) >> 10
    else:
        result = (value - (1 << 23) + 128) >> 8 if v >= 0 else (-value + (1 << 23) + 127) >> 8
    result &= 0xFFFF
    return result - 65536 if result >= 32768 else result


def sat(v: int, low: int, high: int) -> int:
    return max(low, min(high, v))


def wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def ref_step(desc, x, h, c):
    """One time step of one batch row, element by element."""
    hs, table = desc["hidden_size"], desc["sigmoid_table"]
    x_parts, h_parts = [], []
    for gate in range(desc["cell"]):
        xs, hs_ = [], []
        for k in range(hs):
            row = gate * hs + k
            acc_x = wrap32(
                int(desc["input_bias"][row]) + sum(int(w) * int(v) for w, v in zip(desc["input_weights"][row], x))
            )
            acc_h = wrap32(
                int(desc["hidden_bias"][row]) + sum(int(w) * int(v) for w, v in zip(desc["hidden_weights"][row], h))
            )
            xs.append(
                sat(ref_multiply(acc_x, desc["input_multiplier"][gate], desc["input_shift"][gate]), -32768, 32767)
            )
            hs_.append(ref_multiply(acc_h, desc["hidden_multiplier"][gate], desc["hidden_shift"][gate]))
        x_parts.append(xs)
        h_parts.append(hs_)
    h_new, c_new = [], []
    for k in range(hs):
        pre = [sat(h_parts[g][k] + x_parts[g][k], -32768, 32767) for g in range(desc["cell"])]
        if desc["cell"] == LSTM_GATES:
            i, f, o = (ref_activation(pre[g], 0, SIGMOID, table) for g in (0, 1, 3))
            g = pre[2] if desc["tanh_linear"] else ref_activation(pre[2], 0, TANH, table)
            cell = sat(
                ref_multiply(f * int(c[k]), desc["forget_cell_multiplier"], desc["forget_cell_shift"]), -32768, 32767
            )
            cell = sat(
                ref_multiply(i * g, desc["input_cell_multiplier"], desc["input_cell_shift"]) + cell, -32768, 32767
            )
            t = cell if desc["tanh_linear"] else ref_activation(cell, desc["cell_tanh_shift"], TANH, table)
            out = ref_multiply(o * t, desc["output_multiplier"], desc["output_shift"]) + desc["output_offset"]
            c_new.append(cell)
        else:
            r, z = (ref_activation(pre[g], 0, SIGMOID, table) for g in (0, 1))
            hn = sat(h_parts[2][k], -32768, 32767)
            rh = sat(ref_multiply(r * hn, desc["forget_cell_multiplier"], desc["forget_cell_shift"]), -32768, 32767)
            pre_n = sat(x_parts[2][k] + rh, -32768, 32767)
            n = pre_n if desc["tanh_linear"] else ref_activation(pre_n, 0, TANH, table)
            hq = sat(
                ref_multiply(
                    int(h[k]) - desc["output_offset"], desc["hidden_q15_multiplier"], desc["hidden_q15_shift"]
                ),
                -32768,
                32767,
            )
            out = (
                ref_multiply((32768 - z) * n + z * hq, desc["output_multiplier"], desc["output_shift"])
                + desc["output_offset"]
            )
        h_new.append(sat(out, -128, 127))
    return h_new, c_new


@pytest.mark.parametrize("seed", range(12))
def test_golden_step_equals_slow_reference(seed):
    rng = np.random.default_rng(100 + seed)
    desc = dict(random_desc(rng, LSTM_GATES if seed % 2 else GRU_GATES), batches=1, time_steps=1, reset_state=0)
    x = rng.integers(-128, 128, desc["input_size"], dtype=np.int8)
    hidden, cell = random_state(rng, desc)
    out, h, c = recurrent_s8(desc, x, hidden, cell)
    ref_h, ref_c = ref_step(desc, x, hidden[0], cell[0])
    assert h[0].tolist() == ref_h
    if desc["cell"] == LSTM_GATES:
        assert c[0].tolist() == ref_c


def test_activation_every_input_equals_reference_and_float():
    table = sigmoid_table()
    x = np.arange(-32768, 32768)
    sig, tanh = activation_s16(x, 0, SIGMOID, table), activation_s16(x, 0, TANH, table)
    for v in range(-32768, 32768, 97):
        assert sig[v + 32768] == ref_activation(v, 0, SIGMOID, table)
        assert tanh[v + 32768] == ref_activation(v, 0, TANH, table)
    real = x / 4096.0
    assert np.abs(sig / 32768.0 - 1 / (1 + np.exp(-real))).max() < 2e-4
    assert np.abs(tanh / 32768.0 - np.tanh(real)).max() < 4e-4


def test_sigmoid_table_is_the_published_function():
    table = sigmoid_table()
    assert table[0] == 32768 and table[255] == 65535
    assert all(abs(int(table[i]) - 65536 / (1 + math.exp(-i / 24))) <= 0.5 for i in range(255))


# -- 3. Cortex-M under QEMU -------------------------------------------------------------------
DRIVER = ROOT / "tests" / "data" / "port" / "recurrent_kernels.c"
SOURCES = [ROOT / "runtime_c" / "src" / "recurrent" / "edgec_recurrent_s8.c"]
HEADER_WORDS = 40
FLAG_BENCH = 1


def record(desc, x, hidden, cell, flags: int = 0) -> bytes:
    arrays = ("input_weights", "hidden_weights", "input_bias", "hidden_bias", "sigmoid_table")
    return pack_record(flags, desc, INT_FIELDS, HEADER_WORDS, (*(desc[name] for name in arrays), x, hidden, cell), 4)


def kws_cases(rng):
    """The keyword spotters' recurrent layers: 49 steps of 10 features, hidden 64."""
    cases = []
    for cell in ("lstm", "gru"):
        gates = LSTM_GATES if cell == "lstm" else GRU_GATES
        desc = recurrent_desc(
            cell,
            batches=1,
            time_steps=49,
            time_major=False,
            reset_state=True,
            w_ih=rng.normal(0, 0.3, (gates * 64, 10)),
            w_hh=rng.normal(0, 0.1, (gates * 64, 64)),
            b_ih=rng.normal(0, 0.1, gates * 64),
            b_hh=rng.normal(0, 0.1, gates * 64),
            input_scale=0.03,
            input_zp=3,
            hidden_scale=0.006,
            hidden_zp=-2,
            cell_power=-13,
        )
        cases.append(desc)
    return cases


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
def test_recurrent_on_cortex_m(target, tmp_path):
    rng = np.random.default_rng({"cortex-m4": 7, "cortex-m55": 8}[target])
    cases = []
    for k in range(60):
        desc = random_desc(rng)
        x = rng.integers(-128, 128, desc["time_steps"] * desc["batches"] * desc["input_size"], dtype=np.int8)
        cases.append((desc, x, *random_state(rng, desc), 0))
    for desc in kws_cases(rng):
        x = rng.integers(-128, 128, 49 * 10, dtype=np.int8)
        cases.append((desc, x, np.zeros((1, 64), np.int8), np.zeros((1, 64), np.int16), FLAG_BENCH))
    elf = toolchain.cross_compile(
        target,
        [DRIVER, *SOURCES],
        [ROOT / "runtime_c" / "include"],
        tmp_path / "rec.elf",
        extra_cflags=["-Wall", "-Wextra", "-Werror", "-pedantic"],
    )
    (tmp_path / "cases.bin").write_bytes(b"".join(record(*case[:4], case[4]) for case in cases))
    counts = toolchain.count_instructions(target, elf, timeout=300, cwd=tmp_path)
    data, at = (tmp_path / "results.bin").read_bytes(), 0
    for desc, x, hidden, cell, _ in cases:
        status, intact = struct.unpack_from("<2i", data, at)
        at += 8
        steps = 1 if desc["last_step_only"] else desc["time_steps"]
        sizes = (desc["batches"] * steps * desc["hidden_size"], hidden.size, cell.size * 2)
        parts = []
        for size in sizes:
            parts.append(np.frombuffer(data, np.uint8, size, at).copy())
            at += size + (-size % 4)
        g_out, g_h, g_c = recurrent_s8(desc, x, hidden, cell)
        assert status == EDGEC_OK and intact
        np.testing.assert_array_equal(parts[0].view(np.int8), g_out.ravel())
        np.testing.assert_array_equal(parts[1].view(np.int8), g_h.ravel())
        if desc["cell"] == LSTM_GATES:
            np.testing.assert_array_equal(parts[2].view(np.int16), g_c.ravel())
    assert at == len(data)
    lstm, gru = counts["insns"]
    print(f"{target}: LSTM 49x10->64 {lstm:,} instructions, GRU {gru:,}")
    assert lstm > 0 and gru > 0
