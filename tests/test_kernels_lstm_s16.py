"""edgec_lstm_s16 (the 16x8 LSTM) against its golden kernel (edgec.ops.recurrent.lstm_s16), byte for byte.

1. hypothesis: random descriptors (multipliers up to 2^31 - 1, shifts at their limits, int64
   biases up to the saturation of the 16x8 sums, size-1 and odd sizes, time or batch major, a reset
   or a carried-over state, the last step only) through the UBSan library; descriptors as the unit
   derives them from float weights (lstm_s16_desc); argument checks.
2. a slow, independent reference of one step in plain Python integers (CMSIS-NN's step order,
   arm_nn_requantize_s64 written out), against the golden.
3. QEMU: the same random cases on cortex-m4 and cortex-m55 at -O2, -Os and -O0
   (tests/data/port/lstm_s16_kernels.c), and the instruction count of a 128 -> 128 step (the VAD's).
4. CMSIS-NN's own arm_lstm_unidirectional_s16, built on the host from CMSIS_NN_DIR (skipped
   without a checkout), on the same descriptors: equal to the golden.
"""

from __future__ import annotations

import ctypes as C
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgec.numerics import reduce_multiplier
from edgec.ops.recurrent import (
    LSTM_S16_DESC,
    SIGMOID,
    TANH,
    lstm_s16,
    lstm_s16_desc,
    lstm_s16_scratch_bytes,
    sigmoid_table,
)
from edgec.targets import toolchain
from tests.device_support import ROOT, needs_toolchain
from tests.kernel_lib import LstmS16Desc, pack_record, struct_from_desc
from tests.test_kernels_recurrent import ref_activation, ref_multiply, sat

EDGEC_OK, ARG_ERROR = 0, -1
GUARD = 0x5A
ARRAYS = ("input_weights", "hidden_weights", "bias", "sigmoid_table")
INT_FIELDS = [name for name in LSTM_S16_DESC.names if name not in ARRAYS]


def random_desc(rng, sizes: tuple | None = None) -> dict:
    """Random integer constants, not derived from float weights, extremes mixed in."""
    batches, steps, inputs, hidden = sizes or (
        int(rng.choice([1, 1, 2, 3])),
        int(rng.choice([1, 2, 3, 5])),
        int(rng.choice([1, 2, 3, 7, 10, 17])),
        int(rng.choice([1, 2, 3, 5, 8, 13])),
    )

    def multiplier():
        return int(rng.choice([2**31 - 1, 2**30, 0x7FFF0000, int(rng.integers(2**30, 2**31))]))

    def shift(low, high):
        return int(rng.choice([low, high, int(rng.integers(low, high + 1)), int(rng.integers(-14, 0))]))

    def weights(rows, cols):
        if rng.random() < 0.15:
            return rng.choice(np.array([-127, 127, -128], np.int8), (rows, cols))
        return rng.integers(-128, 128, (rows, cols), dtype=np.int8)

    rows = 4 * hidden
    if rng.random() < 0.15:
        bias = rng.choice(np.array([2**63 - 1, -(2**63), 2**47, -(2**47), 0], np.int64), rows)
    else:
        bias = rng.integers(-(2**36), 2**36, rows, dtype=np.int64)
    values = {
        "batches": batches,
        "time_steps": steps,
        "input_size": inputs,
        "hidden_size": hidden,
        "time_major": int(rng.integers(2)),
        "reset_state": int(rng.integers(2)),
        "input_weights": weights(rows, inputs),
        "hidden_weights": weights(rows, hidden),
        "bias": bias,
        "input_multiplier": [multiplier() for _ in range(4)],
        "input_shift": [shift(-31, 7) for _ in range(4)],
        "hidden_multiplier": [multiplier() for _ in range(4)],
        "hidden_shift": [shift(-31, 7) for _ in range(4)],
        "forget_cell_multiplier": multiplier(),
        "forget_cell_shift": shift(-20, 2),
        "input_cell_multiplier": multiplier(),
        "input_cell_shift": shift(-20, 8),
        "cell_tanh_shift": int(rng.choice([-3, -1, 0, 1, 3, 14, int(rng.integers(-31, 15))])),
        "output_multiplier": multiplier(),
        "output_shift": shift(-31, 8),
        "last_step_only": int(rng.random() < 0.25),
        "sigmoid_table": sigmoid_table(),
    }
    return {name: values[name] for name in LSTM_S16_DESC.names}


def random_input(rng, desc) -> np.ndarray:
    size = desc["time_steps"] * desc["batches"] * desc["input_size"]
    if rng.random() < 0.2:
        return rng.choice(np.array([-32768, 32767, 0], np.int16), size)
    return rng.integers(-32768, 32768, size, dtype=np.int16)


def random_state(rng, desc):
    shape = (desc["batches"], desc["hidden_size"])

    def one():
        if rng.random() < 0.2:
            return rng.choice(np.array([-32768, 32767, 0, 1, -1], np.int16), shape)
        return rng.integers(-32768, 32768, shape, dtype=np.int16)

    return one(), one()


def float_desc(rng, *, batches=1, steps=None, reset_state=True) -> dict:
    """A descriptor as the unit derives it (lstm_s16_desc) from random float weights and scales."""
    inputs, hidden = int(rng.integers(1, 12)), int(rng.integers(1, 12))
    return lstm_s16_desc(
        batches=batches,
        time_steps=steps or int(rng.integers(1, 6)),
        time_major=bool(rng.integers(2)),
        reset_state=reset_state,
        w_ih=rng.normal(0, 0.5, (4 * hidden, inputs)),
        w_hh=rng.normal(0, 0.5, (4 * hidden, hidden)),
        b_ih=rng.normal(0, 1, 4 * hidden),
        b_hh=rng.normal(0, 1, 4 * hidden),
        input_scale=float(2 ** rng.uniform(-16, -10)),
        hidden_scale=float(2 ** rng.uniform(-15, -14)),
        cell_power=int(rng.integers(-15, 3)),
    )


def run_c(lib, desc, x, hidden, cell, *, expect=EDGEC_OK):
    """The C kernel on copies of the state; returns (output, hidden', cell')."""
    keep: list = []
    steps = 1 if desc["last_step_only"] else desc["time_steps"]
    size = desc["batches"] * steps * desc["hidden_size"]
    out = np.full(size + 8, GUARD * 0x101, np.uint16).view(np.int16)
    scratch_bytes = lstm_s16_scratch_bytes(desc["input_size"], desc["hidden_size"])
    scratch = np.full(scratch_bytes // 4 + 4, 0x5A5A5A5A, np.uint32)
    hidden, cell = np.ascontiguousarray(hidden.copy()), np.ascontiguousarray(cell.copy())
    x = np.ascontiguousarray(x, np.int16)
    P16 = C.POINTER(C.c_int16)
    status = lib.edgec_lstm_s16(
        C.byref(struct_from_desc(LstmS16Desc, desc, keep)),
        x.ctypes.data_as(P16),
        out.ctypes.data_as(P16),
        hidden.ctypes.data_as(P16),
        cell.ctypes.data_as(P16),
        scratch.ctypes.data_as(C.c_void_p),
    )
    assert status == expect
    assert (out[-8:].view(np.uint16) == GUARD * 0x101).all(), "wrote past the output"
    assert (scratch[scratch_bytes // 4 :] == 0x5A5A5A5A).all(), "wrote past the scratch"
    return out[:-8], hidden, cell


def check_case(lib, desc, x, hidden, cell):
    out, h, c = run_c(lib, desc, x, hidden, cell)
    g_out, g_h, g_c = lstm_s16(desc, x, hidden, cell)
    np.testing.assert_array_equal(out, g_out.ravel())
    np.testing.assert_array_equal(h, g_h)
    np.testing.assert_array_equal(c, g_c)


# -- 1. golden vs C ----------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_lstm_s16_golden_equals_c(kernel_lib, seed):
    rng = np.random.default_rng(seed)
    desc = random_desc(rng)
    check_case(kernel_lib, desc, random_input(rng, desc), *random_state(rng, desc))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_lstm_s16_from_float_weights_golden_equals_c(kernel_lib, seed):
    rng = np.random.default_rng(seed)
    desc = float_desc(rng, batches=int(rng.integers(1, 3)), reset_state=bool(rng.integers(2)))
    check_case(kernel_lib, desc, random_input(rng, desc), *random_state(rng, desc))


def test_reset_state_starts_from_zero(kernel_lib):
    rng = np.random.default_rng(3)
    desc = dict(random_desc(rng), reset_state=1)
    x = random_input(rng, desc)
    a = run_c(kernel_lib, desc, x, *random_state(rng, desc))
    b = run_c(
        kernel_lib, desc, x, np.zeros((desc["batches"], desc["hidden_size"]), np.int16), *random_state(rng, desc)[1:]
    )
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


def test_streaming_one_step_at_a_time_equals_the_sequence(kernel_lib):
    """reset_state 0: T calls of one step each == one call of T steps."""
    rng = np.random.default_rng(5)
    desc = dict(random_desc(rng, (2, 6, 5, 7)), time_major=1, reset_state=0, last_step_only=0)
    x = random_input(rng, desc)
    hidden, cell = random_state(rng, desc)
    whole, h_whole, c_whole = run_c(kernel_lib, desc, x, hidden, cell)
    one = dict(desc, time_steps=1)
    outs = []
    for t in range(6):
        out, hidden, cell = run_c(kernel_lib, one, x.reshape(6, -1)[t], hidden, cell)
        outs.append(out)
    np.testing.assert_array_equal(np.concatenate(outs), whole)
    np.testing.assert_array_equal(hidden, h_whole)
    np.testing.assert_array_equal(cell, c_whole)


def test_lstm_s16_rejects_bad_arguments(kernel_lib):
    rng = np.random.default_rng(1)
    good = random_desc(rng, (1, 2, 3, 4))
    x = np.zeros(2 * 3, np.int16)
    state = random_state(rng, good)
    for bad in (
        dict(good, batches=0),
        dict(good, time_steps=0),
        dict(good, input_size=0),
        dict(good, hidden_size=-1),
        dict(good, input_size=70000),
        dict(good, cell_tanh_shift=15),
        dict(good, input_shift=[8, 0, 0, 0]),
        dict(good, hidden_shift=[0, 0, 0, -32]),
        dict(good, hidden_multiplier=[0, -1, 0, 0]),
        dict(good, output_shift=32),
        dict(good, forget_cell_shift=-32),
        dict(good, bias=None),
    ):
        run_c(kernel_lib, bad, x, *state, expect=ARG_ERROR)


# -- 2. slow independent reference ---------------------------------------------------------------


def ref_requantize_s64(x: int, multiplier: int, shift: int) -> int:
    """arm_nn_requantize_s64 with REDUCE_MULTIPLIER, written out (saturated to int32)."""
    reduced = (multiplier + (1 << 15)) >> 16 if multiplier < 0x7FFF0000 else 0x7FFF
    return sat(((x * reduced >> (14 - shift)) + 1) >> 1, -(2**31), 2**31 - 1)


def ref_step(desc, x, h, c):
    """One step of one batch row, element by element, in CMSIS-NN's order (f, then the cell's
    first term, i, g, the cell, o, the hidden state)."""
    hs, table = desc["hidden_size"], desc["sigmoid_table"]

    def gate(g, function):
        out = []
        for k in range(hs):
            row = g * hs + k
            acc_x = int(desc["bias"][row]) + sum(int(w) * int(v) for w, v in zip(desc["input_weights"][row], x))
            acc_x = sat(acc_x, -(2**47), 2**47 - 1)
            acc_h = sum(int(w) * int(v) for w, v in zip(desc["hidden_weights"][row], h))
            x_part = sat(ref_requantize_s64(acc_x, desc["input_multiplier"][g], desc["input_shift"][g]), -32768, 32767)
            h_part = ref_requantize_s64(acc_h, desc["hidden_multiplier"][g], desc["hidden_shift"][g])
            out.append(ref_activation(sat(h_part + x_part, -32768, 32767), 0, function, table))
        return out

    f = gate(1, SIGMOID)
    cell = [
        sat(ref_multiply(f[k] * int(c[k]), desc["forget_cell_multiplier"], desc["forget_cell_shift"]), -32768, 32767)
        for k in range(hs)
    ]
    i, g = gate(0, SIGMOID), gate(2, TANH)
    cell = [
        sat(ref_multiply(i[k] * g[k], desc["input_cell_multiplier"], desc["input_cell_shift"]) + cell[k], -32768, 32767)
        for k in range(hs)
    ]
    o = gate(3, SIGMOID)
    t = [ref_activation(v, desc["cell_tanh_shift"], TANH, table) for v in cell]
    h_new = [
        sat(ref_multiply(o[k] * t[k], desc["output_multiplier"], desc["output_shift"]), -32768, 32767)
        for k in range(hs)
    ]
    return h_new, cell


@pytest.mark.parametrize("seed", range(12))
def test_golden_step_equals_slow_reference(seed):
    rng = np.random.default_rng(200 + seed)
    desc = dict(random_desc(rng), batches=1, time_steps=1, reset_state=0)
    x = random_input(rng, desc)
    hidden, cell = random_state(rng, desc)
    _, h, c = lstm_s16(desc, x, hidden, cell)
    ref_h, ref_c = ref_step(desc, x, hidden[0], cell[0])
    assert h[0].tolist() == ref_h
    assert c[0].tolist() == ref_c


def test_reduce_multiplier_is_cmsis_nn_s():
    assert reduce_multiplier(np.array([0x7FFF0000, 0x7FFEFFFF, 2**30])).tolist() == [0x7FFF, 0x7FFF, 2**14]


# -- 3. Cortex-M under QEMU -------------------------------------------------------------------
DRIVER = ROOT / "tests" / "data" / "port" / "lstm_s16_kernels.c"
SOURCES = [ROOT / "runtime_c" / "src" / "recurrent" / "edgec_lstm_s16.c"]
HEADER_WORDS = 32
FLAG_BENCH = 1


def record(desc, x, hidden, cell, flags: int = 0) -> bytes:
    return pack_record(flags, desc, INT_FIELDS, HEADER_WORDS, (*(desc[name] for name in ARRAYS), x, hidden, cell), 8)


def vad_case(rng):
    """One step of the VAD's LSTMCell: 128 features -> hidden 128, a held state."""
    desc = lstm_s16_desc(
        batches=1,
        time_steps=1,
        time_major=True,
        reset_state=False,
        w_ih=rng.normal(0, 0.1, (512, 128)),
        w_hh=rng.normal(0, 0.1, (512, 128)),
        b_ih=rng.normal(0, 0.1, 512),
        b_hh=rng.normal(0, 0.1, 512),
        input_scale=2.0**-12,
        hidden_scale=2.0**-15,
        cell_power=-13,
    )
    return desc, random_input(rng, desc), *random_state(rng, desc)


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("opt", ["-O2", "-Os", "-O0"])
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
def test_lstm_s16_on_cortex_m(target, opt, tmp_path):
    rng = np.random.default_rng({"cortex-m4": 7, "cortex-m55": 8}[target] + {"-O2": 0, "-Os": 10, "-O0": 20}[opt])
    cases = []
    for k in range(40):
        desc = random_desc(rng) if k % 4 else float_desc(rng)
        cases.append((desc, random_input(rng, desc), *random_state(rng, desc), 0))
    cases.append((*vad_case(rng), FLAG_BENCH))
    elf = toolchain.cross_compile(
        target,
        [DRIVER, *SOURCES],
        [ROOT / "runtime_c" / "include"],
        tmp_path / "lstm.elf",
        opt=opt,
        extra_cflags=["-Wall", "-Wextra", "-Werror", "-pedantic"],
    )
    (tmp_path / "cases.bin").write_bytes(b"".join(record(*case[:4], case[4]) for case in cases))
    counts = toolchain.count_instructions(target, elf, timeout=300, cwd=tmp_path)
    data, at = (tmp_path / "results.bin").read_bytes(), 0
    for desc, x, hidden, cell, _ in cases:
        status, intact = struct.unpack_from("<2i", data, at)
        at += 8
        steps = 1 if desc["last_step_only"] else desc["time_steps"]
        parts = []
        for size in (2 * desc["batches"] * steps * desc["hidden_size"], 2 * hidden.size, 2 * cell.size):
            parts.append(np.frombuffer(data, np.int16, size // 2, at).copy())
            at += size + (-size % 4)
        g_out, g_h, g_c = lstm_s16(desc, x, hidden, cell)
        assert status == EDGEC_OK and intact
        np.testing.assert_array_equal(parts[0], g_out.ravel())
        np.testing.assert_array_equal(parts[1], g_h.ravel())
        np.testing.assert_array_equal(parts[2], g_c.ravel())
    assert at == len(data)
    (step,) = counts["insns"]
    print(f"{target} {opt}: LSTM s16 step 128 -> 128: {step:,} instructions")
    assert step > 0


# -- 4. CMSIS-NN's arm_lstm_unidirectional_s16 ---------------------------------------------------
CHECKOUT = os.environ.get("CMSIS_NN_DIR")
CMSIS_SOURCES = (
    "LSTMFunctions/arm_lstm_unidirectional_s16.c",
    "NNSupportFunctions/arm_nn_lstm_step_s16.c",
    "NNSupportFunctions/arm_nn_lstm_calculate_gate_s16.c",
    "NNSupportFunctions/arm_nn_vec_mat_mul_result_acc_s16.c",
    "BasicMathFunctions/arm_elementwise_mul_s16.c",
    "BasicMathFunctions/arm_elementwise_mul_acc_s16.c",
    "BasicMathFunctions/arm_elementwise_mul_s16_batch_offset.c",
    "ActivationFunctions/arm_nn_activation_s16.c",
)


class Gate(C.Structure):
    _fields_ = [
        ("input_multiplier", C.c_int32),
        ("input_shift", C.c_int32),
        ("input_weights", C.c_void_p),
        ("input_effective_bias", C.c_void_p),
        ("hidden_multiplier", C.c_int32),
        ("hidden_shift", C.c_int32),
        ("hidden_weights", C.c_void_p),
        ("hidden_effective_bias", C.c_void_p),
        ("bias", C.c_void_p),
        ("activation_type", C.c_int),
    ]


class LstmParams(C.Structure):
    _fields_ = [
        *((name, C.c_int32) for name in ("time_major", "batch_size", "time_steps", "input_size", "hidden_size")),
        ("input_offset", C.c_int32),
        *((name, C.c_int32) for name in ("forget_to_cell_multiplier", "forget_to_cell_shift")),
        *((name, C.c_int32) for name in ("input_to_cell_multiplier", "input_to_cell_shift")),
        *((name, C.c_int32) for name in ("cell_clip", "cell_scale_power")),
        *((name, C.c_int32) for name in ("output_multiplier", "output_shift", "output_offset")),
        *((name, Gate) for name in ("forget_gate", "input_gate", "cell_gate", "output_gate")),
    ]


class LstmContext(C.Structure):
    _fields_ = [(name, C.c_void_p) for name in ("temp1", "temp2", "cell_state", "hidden_state")]


@pytest.fixture(scope="module")
def cmsis_lstm(tmp_path_factory):
    """CMSIS-NN's s16 LSTM (plain C) with edgec's sigmoid table in place of arm_nntables.c's (the
    kernels take the table a descriptor carries; TFLite's differs by one in 44 entries)."""
    if not CHECKOUT:
        pytest.skip(
            "CMSIS_NN_DIR is not set: no CMSIS-NN checkout to build (git clone https://github.com/ARM-software/CMSIS-NN)"
        )
    root, out = Path(CHECKOUT), tmp_path_factory.mktemp("cmsis_nn_lstm_s16")
    table = out / "table.c"
    entries = ", ".join(str(int(v)) for v in sigmoid_table())
    table.write_text(f"#include <stdint.h>\nconst uint16_t sigmoid_table_uint16[256] = {{{entries}}};\n")
    lib = out / "libcmsis_nn_lstm_s16.so"
    subprocess.run(
        [
            "cc",
            "-std=c99",
            "-O1",
            "-fPIC",
            "-shared",
            f"-I{root / 'Include'}",
            str(table),
            *[str(root / "Source" / source) for source in CMSIS_SOURCES],
            "-o",
            str(lib),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return C.CDLL(str(lib))


def run_cmsis(lib, desc, x, hidden, cell):
    """arm_lstm_unidirectional_s16 from the caller's state (hidden_state given), gate parameters
    from edgec's descriptor: gate blocks i, f, g, o; the bias on the input side, none on the
    hidden side; no cell clip."""
    hs, size = desc["hidden_size"], desc["input_size"]
    keep = []

    def pointer(array):
        array = np.ascontiguousarray(array)
        keep.append(array)
        return array.ctypes.data

    zeros = np.zeros(hs, np.int64)
    gates = []
    for g, activation in ((1, 0), (0, 0), (2, 1), (3, 0)):  # forget, input, cell, output; ARM_SIGMOID 0, ARM_TANH 1
        rows = slice(g * hs, (g + 1) * hs)
        gates.append(
            Gate(
                desc["input_multiplier"][g],
                desc["input_shift"][g],
                pointer(desc["input_weights"][rows]),
                pointer(desc["bias"][rows]),
                desc["hidden_multiplier"][g],
                desc["hidden_shift"][g],
                pointer(desc["hidden_weights"][rows]),
                pointer(zeros),
                None,
                activation,
            )
        )
    params = LstmParams(
        desc["time_major"], desc["batches"], desc["time_steps"], size, hs, 0,
        desc["forget_cell_multiplier"], desc["forget_cell_shift"],
        desc["input_cell_multiplier"], desc["input_cell_shift"],
        0, desc["cell_tanh_shift"] - 12,
        desc["output_multiplier"], desc["output_shift"], 0,
        *gates,
    )  # fmt: skip
    hidden, cell = np.array(hidden, np.int16), np.array(cell, np.int16)
    temp = [np.zeros(desc["batches"] * hs, np.int16) for _ in range(2)]
    context = LstmContext(pointer(temp[0]), pointer(temp[1]), cell.ctypes.data, hidden.ctypes.data)
    out = np.zeros(desc["time_steps"] * desc["batches"] * hs, np.int16)
    x = np.ascontiguousarray(x, np.int16)
    P16 = C.POINTER(C.c_int16)
    status = lib.arm_lstm_unidirectional_s16(
        x.ctypes.data_as(P16), out.ctypes.data_as(P16), C.byref(params), C.byref(context)
    )
    assert status == 0
    return out, hidden, cell


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_golden_equals_cmsis_nn_arm_lstm_unidirectional_s16(cmsis_lstm, seed):
    """Descriptors from float weights (lstm_s16_desc) and random ones whose sums stay where CMSIS-NN's
    arithmetic is defined (|bias + sum| < 2^47, requantize_s64's int32 result before rounding)."""
    rng = np.random.default_rng(seed)
    if seed % 2:
        desc = float_desc(rng, batches=int(rng.integers(1, 3)), reset_state=False)
    else:
        desc = dict(random_desc(rng), reset_state=0)
        desc["bias"] = rng.integers(-(2**30), 2**30, 4 * desc["hidden_size"], dtype=np.int64)
        desc["input_shift"] = [min(s, -8) for s in desc["input_shift"]]
        desc["hidden_shift"] = [min(s, -8) for s in desc["hidden_shift"]]
        for name in ("forget_cell_shift", "input_cell_shift", "output_shift"):  # arm_nn_requantize's left
            desc[name] = min(desc[name], 0)  # shift wraps in int32 where edgec's saturates
    desc["last_step_only"] = 0
    x = random_input(rng, desc)
    hidden, cell = random_state(rng, desc)
    out, h, c = run_cmsis(cmsis_lstm, desc, x, hidden, cell)
    g_out, g_h, g_c = lstm_s16(desc, x, hidden, cell)
    np.testing.assert_array_equal(out, g_out.ravel())
    np.testing.assert_array_equal(h, g_h)
    np.testing.assert_array_equal(c, g_c)
