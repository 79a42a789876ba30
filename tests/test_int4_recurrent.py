"""int4 weights for LSTM / GRU layers: edgec_lstm_s8 / edgec_gru_s8 with weight_bits 4 against the golden.

The golden unpacks the packed matrices (edgec.ops.recurrent.unpacked) and runs the int8 step
functions. The kernels run on the host (UBSan, ctypes: random descriptors, odd sizes so rows
start on either nibble), under QEMU on Cortex-M4 (the SMLAD nibble path) and Cortex-M55 at -O2,
-Os and -O0 (tests/data/port/recurrent_kernels.c), and in models: `--weights int4` makes the
keyword spotters' recurrent layers int4 (golden == sanitized host C == QEMU, verify's layer check),
`--int4-layers rnn` selects one, and the --flash chooser may choose it.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from edgec.frontend import precision
from edgec.ops import int4
from edgec.ops.recurrent import GRU_GATES, LSTM_GATES, recurrent_desc, recurrent_s8, unpacked
from edgec.pipeline import compile_for, prepare, quantize_model
from edgec.targets import toolchain
from edgec.tools.verify import check_against_reference
from edgec.zoo import seq
from tests.device_support import ROOT, needs_toolchain
from tests.test_int4 import _bit_exact, _int4_kinds
from tests.test_kernels_recurrent import (
    DRIVER,
    EDGEC_OK,
    FLAG_BENCH,
    SOURCES,
    random_desc,
    random_state,
    record,
    run_c,
)

OPTS = ("-O2", "-Os", "-O0")
SEQ = ROOT / "edgec" / "zoo" / "seq.py"


def int4_desc(rng, **options) -> dict:
    """random_desc with int4 weights (often at -8 and 7), packed, weight_bits 4."""
    desc = random_desc(rng, **options)
    for name in ("input_weights", "hidden_weights"):
        shape = desc[name].shape
        if rng.random() < 0.15:
            w = rng.choice(np.array([-8, 7], np.int8), shape)
        else:
            w = rng.integers(-8, 8, shape).astype(np.int8)
        desc[name] = int4.pack_int4(w)
    desc["weight_bits"] = 4
    return desc


def _input(rng, desc) -> np.ndarray:
    return rng.integers(-128, 128, desc["time_steps"] * desc["batches"] * desc["input_size"], dtype=np.int8)


def _check(lib, desc, x, hidden, cell) -> None:
    out, h, c = run_c(lib, desc, x, hidden, cell)
    g_out, g_h, g_c = recurrent_s8(desc, x, hidden, cell)
    np.testing.assert_array_equal(out, g_out.ravel())
    np.testing.assert_array_equal(h, g_h)
    if desc["cell"] == LSTM_GATES:
        np.testing.assert_array_equal(c, g_c)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_int4_golden_equals_c(kernel_lib, seed):
    rng = np.random.default_rng(seed)
    desc = int4_desc(rng)
    _check(kernel_lib, desc, _input(rng, desc), *random_state(rng, desc))


def _from_float(rng, cell: str, inputs: int, hidden: int, steps: int) -> dict:
    gates = LSTM_GATES if cell == "lstm" else GRU_GATES
    return recurrent_desc(
        cell,
        batches=1,
        time_steps=steps,
        time_major=False,
        reset_state=True,
        w_ih=rng.normal(0, 0.3, (gates * hidden, inputs)),
        w_hh=rng.normal(0, 0.1, (gates * hidden, hidden)),
        b_ih=rng.normal(0, 0.1, gates * hidden),
        b_hh=rng.normal(0, 0.1, gates * hidden),
        input_scale=0.03,
        input_zp=3,
        hidden_scale=0.006,
        hidden_zp=-2,
        cell_power=-13,
        weight_bits=4,
    )


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("inputs,hidden", [(10, 64), (7, 5), (300, 3), (16, 9)])
def test_int4_from_float_weights_golden_equals_c(kernel_lib, cell, inputs, hidden):
    """As the unit derives them: each gate block in [-7, 7], packed; the DSP path's chunks (300)."""
    rng = np.random.default_rng(inputs * 100 + hidden)
    desc = _from_float(rng, cell, inputs, hidden, 3)
    weights = unpacked(desc)["input_weights"]
    assert desc["input_weights"].size == (weights.size + 1) // 2 and np.abs(weights).max() == 7
    _check(kernel_lib, desc, _input(rng, desc), np.zeros((1, hidden), np.int8), np.zeros((1, hidden), np.int16))


def test_weight_bits_other_than_8_and_4_are_refused(kernel_lib):
    rng = np.random.default_rng(1)
    desc = dict(random_desc(rng), weight_bits=2)
    run_c(kernel_lib, desc, _input(rng, desc), *random_state(rng, desc), expect=-1)


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
@pytest.mark.parametrize("opt", OPTS)
def test_int4_recurrent_on_cortex_m(target, opt, tmp_path):
    rng = np.random.default_rng(len(target) * 10 + len(opt))
    cases = [(d := int4_desc(rng), _input(rng, d), *random_state(rng, d), 0) for _ in range(40)]
    for cell in ("lstm", "gru"):  # the keyword spotters' layer: 49 steps of 10 features, hidden 64
        desc = _from_float(rng, cell, 10, 64, 49)
        cases.append((desc, _input(rng, desc), np.zeros((1, 64), np.int8), np.zeros((1, 64), np.int16), FLAG_BENCH))
    elf = toolchain.cross_compile(
        target,
        [DRIVER, *SOURCES],
        [ROOT / "runtime_c" / "include"],
        tmp_path / "rec.elf",
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
        for size in (desc["batches"] * steps * desc["hidden_size"], hidden.size, cell.size * 2):
            parts.append(np.frombuffer(data, np.uint8, size, at).copy())
            at += size + (-size % 4)
        g_out, g_h, g_c = recurrent_s8(desc, x, hidden, cell)
        assert status == EDGEC_OK and intact
        np.testing.assert_array_equal(parts[0].view(np.int8), g_out.ravel())
        np.testing.assert_array_equal(parts[1].view(np.int8), g_h.ravel())
        if desc["cell"] == LSTM_GATES:
            np.testing.assert_array_equal(parts[2].view(np.int16), g_c.ravel())
    assert at == len(data)
    print(f"{target} {opt} int4 KWS layers (49 x 10 -> 64), instructions: lstm, gru", counts["insns"][-2:])


# -- models ------------------------------------------------------------------------------------


def _kws(name: str, **options):
    return quantize_model(
        f"{SEQ}:{name}", warn=lambda _: None, calibration=seq.calibration_data(name, 16, 0), **options
    )


@pytest.mark.parametrize("name", ["lstm_kws", "conv_gru_kws"])
def test_kws_int4_is_bit_exact_on_host_and_passes_the_layer_check(name, tmp_path):
    compiled = compile_for(_kws(name, weights="int4"))
    kinds = _int4_kinds(compiled)
    assert kinds["recurrent"] == (1 if name == "lstm_kws" else 2) and kinds["fully_connected"] == 1
    floats = seq.calibration_data(name, 4, 1)
    _bit_exact(compiled, floats, tmp_path)
    assert check_against_reference(compiled, floats).checked >= sum(kinds.values())


def test_int4_layers_selects_a_recurrent_layer():
    compiled = compile_for(_kws("lstm_kws", int4_layers=["rnn"]))
    assert _int4_kinds(compiled) == {"recurrent": 1}


def test_the_chooser_measures_a_recurrent_layer_with_its_int4_weights():
    """The recurrent layer is choosable, and its sensitivity is that of its per-gate int4 weights
    (not zero: its weights are not the linear layers' get_attr arguments)."""
    _, module = prepare(f"{SEQ}:lstm_kws")
    layers = precision.choosable_layers(module)
    assert [layer.path for layer in layers] == ["rnn", "classifier"]
    samples = [(torch.from_numpy(x[None]),) for x in seq.calibration_data("lstm_kws", 4, 0)]
    precision.measure_sensitivities(module, layers, samples, "gptq")
    assert all(0 < layer.noise < 1 for layer in layers), [layer.noise for layer in layers]


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
def test_lstm_kws_int4_is_bit_exact_on_cortex_m(target, tmp_path):
    _bit_exact(compile_for(_kws("lstm_kws", weights="int4"), target), seq.calibration_data("lstm_kws", 2, 1), tmp_path)
