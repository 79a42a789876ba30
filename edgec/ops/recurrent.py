"""Recurrent cells (LSTM, GRU): the golden integer kernels and their descriptors.

LSTM follows TFLite Micro's integer UNIDIRECTIONAL_SEQUENCE_LSTM without peephole, projection or
layer norm (8x8->16: int8 input and hidden state, int8 weights, int32 bias, int16 cell state with a
power-of-two scale, int16 gates), exactly as CMSIS-NN's arm_lstm_unidirectional_s8 computes it
(arm_nn_lstm_step_s8, arm_nn_lstm_calculate_gate_s8_s16, arm_nn_vec_mat_mul_result_acc_s8_s16,
arm_elementwise_mul_s16 / _acc_s16 / _s16_s8, arm_nn_activation_s16), with the scales TFLite Micro
derives in lstm_eval_common.cc (PrepareGateParametersInteger, CreateLstmCellStateInfo):

  gate pre-activation  int16, scale 2^-12 (Q3.12);  gate output  int16, scale 2^-15 (Q0.15)
  cell state           int16, scale 2^cell_power (a power of two chosen from the calibrated range)

GRU has no TFLite builtin; edgec defines its integer form with the same pieces (see gru_step).
C kernels: runtime_c/src/recurrent/edgec_recurrent_s8.c (edgec_lstm_s8, edgec_gru_s8).

The op unit lowers nn.LSTM / nn.GRU (aten.lstm.input / aten.gru.input, any number of layers,
batch_first or not, unidirectional or bidirectional) and nn.LSTMCell / nn.GRUCell (one step) to
one "recurrent" op per run (a layer's direction; a reverse run reads its input flipped in time by a
copy). Its hidden state and (LSTM) cell state are not graph tensors: in whole-sequence mode they
live in the op's scratch and start at zero on every invoke. A layer whose caller holds the state
reads h0 / c0 [runs, B, H] (model inputs, each run's op its row "state_slot": attrs "h0"/"c0" are
their input indices) and writes c_n (an int16 model output); h_n is each run's last step, stacked
by a copy as always. The C copies the run's rows of h0 / c0 into its state before the call; the
kernel keeps the last run's cell state in its row of c_n, the others' in a [B, H] part (output
"c_part") that the last run copies into c_n after its call (inputs "c_parts"): an int16 tensor
has no copy op. All runs share one hidden qparams (h0's) and one cell scale (the largest run's).
Calibration: the cell state's range and the hidden range of a layer feeding another are not graph
tensors either, so the unit's `observe` hook re-runs the float recurrence on each calibration
sample (edgec.frontend.quantize runs the hooks) and records them in the node's meta (OBSERVED_KEY).
"""

from __future__ import annotations

import math
import operator

import numpy as np
import torch
from torch.fx import Node
from torchao.quantization.pt2e.quantizer import SharedQuantizationSpec

from edgec.errors import EdgecError
from edgec.frontend.export import source_line
from edgec.ir import KernelChoice, Tensor
from edgec.numerics import (
    S64_SHIFT_MAX,
    add_bias_s64,
    quantize_bias_s64,
    quantize_multiplier,
    requantize,
    requantize_s64,
    wrap_int32,
)
from edgec.ops import int4
from edgec.ops.base import CCall, OpDef, descriptor
from edgec.ops.int16_units import RECURRENT_INT16_PROBLEM
from edgec.ops.kernel import Field, Scratch, Struct, ints
from edgec.ops.movement import Gather, _flatten_args, _Slot, in_torch_order
from edgec.ops.qspec import ACTIVATION_QSPEC, annotate, fixed_qspec

# The fields both recurrent descriptors begin with, and their per-gate requantization of W x and W h.
_SEQUENCE_FIELDS = (
    *ints("batches time_steps input_size hidden_size"),
    Field("time_major", doc="1: [T, B, features]; 0: [B, T, features]"),
    Field("reset_state", doc="1: start from a zero state (whole sequence); 0: continue (stream)"),
)


def _gate_scale_fields(how: str) -> tuple[Field, ...]:
    return (
        Field("input_multiplier", doc=f"per gate: s_x * s_wx / 2^-12{how}", count=4),
        Field("input_shift", count=4),
        Field("hidden_multiplier", doc=f"per gate: s_h * s_wh / 2^-12{how}", count=4),
        Field("hidden_shift", count=4),
    )


# The C structs of this unit's kernels (edgec.ops.kernel); edgec_nn.h's are generated from these.
RECURRENT_DESC = Struct(
    "edgec_recurrent_desc",
    (
        Field("cell", doc="EDGEC_RECURRENT_LSTM or EDGEC_RECURRENT_GRU: the number of gates"),
        *_SEQUENCE_FIELDS,
        Field("input_weights", "const int8_t *", doc="[cell * H, I], gate blocks in PyTorch order"),
        Field("hidden_weights", "const int8_t *", doc="[cell * H, H]"),
        Field("input_bias", "const int32_t *", doc="[cell * H]"),
        Field("hidden_bias", "const int32_t *", doc="[cell * H]"),
        *_gate_scale_fields(""),
        Field("forget_cell_multiplier", doc="LSTM f * c: 2^-15; GRU r * hn: 2^-15"),
        *ints("forget_cell_shift"),
        Field("input_cell_multiplier", doc="LSTM i * g: 2^-30 / s_c"),
        *ints("input_cell_shift"),
        Field("cell_tanh_shift", doc="LSTM: log2(s_c) + 12"),
        Field("output_multiplier", doc="2^-30 / s_h"),
        *ints("output_shift"),
        Field("output_offset", doc="the hidden state's (= output's) zero point"),
        Field("hidden_q15_multiplier", doc="GRU: s_h / 2^-15, the hidden state in Q0.15"),
        *ints("hidden_q15_shift"),
        Field("last_step_only", doc="1: output holds only the last step ([1, B, H] / [B, 1, H])"),
        Field(
            "tanh_linear",
            doc="1: the tanh gates are the identity (GRU: n = sat16(xn + rh); LSTM: g = pre_g, tanh(c') = c'), "
            "at the finer scales the multipliers give: a layer whose values stay where tanh(x) = x",
        ),
        Field("sigmoid_table", "const uint16_t *", doc="256 entries"),
        Field(
            "weight_bits",
            doc="8, or 4: input_weights and hidden_weights are int4 values in [-8, 7] packed as one stream "
            "each (edgec.ops.int4: element i in byte i / 2, the low nibble first)",
        ),
    ),
)
# The 16x8 LSTM (edgec_lstm_s16, CMSIS-NN's arm_lstm_unidirectional_s16): int16 input and hidden
# state (symmetric: no offsets), int8 weights, int64 bias, the same gates and cell state.
LSTM_S16_DESC = Struct(
    "edgec_lstm_s16_desc",
    (
        *_SEQUENCE_FIELDS,
        Field("input_weights", "const int8_t *", doc="[4 * H, I], gate blocks i, f, g, o (PyTorch's order)"),
        Field("hidden_weights", "const int8_t *", doc="[4 * H, H]"),
        Field("bias", "const int64_t *", doc="[4 * H]: b_ih + b_hh at s_x * s_wx (the input side's)"),
        *_gate_scale_fields(" (requantize_s64)"),
        Field("forget_cell_multiplier", doc="f * c: 2^-15"),
        *ints("forget_cell_shift"),
        Field("input_cell_multiplier", doc="i * g: 2^-30 / s_c"),
        *ints("input_cell_shift"),
        Field("cell_tanh_shift", doc="log2(s_c) + 12"),
        Field("output_multiplier", doc="2^-30 / s_h"),
        *ints("output_shift"),
        Field("last_step_only", doc="1: output holds only the last step ([1, B, H] / [B, 1, H])"),
        Field("sigmoid_table", "const uint16_t *", doc="256 entries"),
    ),
)
STRUCTS = (RECURRENT_DESC, LSTM_S16_DESC)
# The scratch-size rules of this unit's kernels: edgec_nn.h's macros are generated from these.
RECURRENT_SCRATCH = Scratch("EDGEC_RECURRENT_SCRATCH_BYTES", ("hidden_size",), "(16 * (hidden_size))")
LSTM_S16_SCRATCH = Scratch(
    "EDGEC_LSTM_S16_SCRATCH_BYTES",
    ("input_size", "hidden_size"),
    "(8 * (hidden_size) + 4 * (((input_size) + 1) / 2) + 4 * (((hidden_size) + 1) / 2))",
)
SCRATCH = (RECURRENT_SCRATCH, LSTM_S16_SCRATCH)

INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1


def lstm_s16_scratch_bytes(input_size: int, hidden_size: int) -> int:
    """EDGEC_LSTM_S16_SCRATCH_BYTES: the gates, then x and h as the dot products read them."""
    return 8 * hidden_size + 4 * ((input_size + 1) // 2) + 4 * ((hidden_size + 1) // 2)


GATE_INPUT_SCALE = 2.0**-12  # Q3.12: what the sigmoid/tanh tables take
GATE_OUTPUT_SCALE = 2.0**-15  # Q0.15: what they return
LSTM_GATES, GRU_GATES = 4, 3  # PyTorch's row blocks: LSTM i, f, g, o; GRU r, z, n
# A recurrent node's meta: its weight matrices int4 (--weights int4 / --int4-layers; the unit
# quantizes its weights itself, so no weight quantize node carries the choice).
INT4_KEY = "edgec_recurrent_int4"
INT4_QMAX = int4.INT4_QUANT_RANGE[1]
SIGMOID, TANH = 0, 1


def sigmoid_table() -> np.ndarray:
    """256 entries of sigmoid(i / 24) in unsigned 0.16 fixed point, rounded to nearest, the last
    one 65535 (1.0 saturated: the top of the interpolation, continuous with the saturated result
    beyond the table): the table arm_nn_activation_s16 interpolates (sigmoid_table_uint16).

    Built here from the definition; TFLite's published table differs from plain rounding by +1
    in 44 entries, so a gate can differ from TFLite's by one Q0.15 step (docs/numerics.md).
    """
    i = np.arange(256, dtype=np.float64)
    table = np.minimum(np.floor(65536.0 / (1.0 + np.exp(-i / 24.0)) + 0.5), 65535)
    table[255] = 65535
    return table.astype(np.uint16)


def activation_s16(x: np.ndarray, left_shift: int, function: int, table: np.ndarray) -> np.ndarray:
    """arm_nn_activation_s16: int16 sigmoid/tanh of x * 2^(left_shift) read as Q3.12, in Q0.15.

    v = (x * 3 * 2^max(ls,0) + rounding) >> max(-ls,0)   (input scaled to the table's i/24 grid)
    sigmoid: |v| split 9 bits of fraction; tanh(x) = 2 sigmoid(2x) - 1: 8 bits. Linear
    interpolation between table[u] and table[u+1]; |v| beyond the table saturates.
    """
    x = np.asarray(x, dtype=np.int64)
    multiplier = 3 if left_shift < 0 else 3 << left_shift
    right = -left_shift if left_shift < 0 else 0
    rounding = (1 << (right - 1)) if right > 0 else 0
    v = (x * multiplier + rounding) >> right
    a = np.abs(v)
    bits = 9 if function == SIGMOID else 8
    u = a >> bits
    table = np.asarray(table, dtype=np.int64)
    index = np.minimum(u, 254)
    ua, ub = table[index], table[index + 1]
    result = (ua << bits) + (a & ((1 << bits) - 1)) * (ub - ua)
    if function == SIGMOID:
        result = np.where(u >= 255, 0x7FFF << 10, result)
        result = np.where(v >= 0, result + (1 << 9), (1 << 25) - result + (1 << 9) - 1) >> 10
    else:
        result = np.where(u >= 255, 0xFFFF << 8, result)
        result = np.where(v >= 0, result - (1 << 23) + (1 << 7), -result + (1 << 23) + (1 << 7) - 1) >> 8
    low = result & 0xFFFF  # the C's (int16_t) cast of its uint32 result
    return np.where(low >= 32768, low - 65536, low)


def _sat16(x: np.ndarray) -> np.ndarray:
    return np.clip(x, INT16_MIN, INT16_MAX)


def _matmul_s16(x, weights, bias, multiplier, shift, accumulate):
    """arm_nn_vec_mat_mul_result_acc_s8_s16: sat16(requantize(bias + W x) + accumulate)."""
    acc = wrap_int32(bias + np.asarray(weights, np.int64) @ np.asarray(x, np.int64))  # the C's uint32 sum
    return _sat16(requantize(acc, multiplier, shift) + accumulate)


def _gate_pre(desc: dict, x, h, gate: int) -> tuple[np.ndarray, np.ndarray]:
    """Gate `gate`'s input part (sat16, Q3.12) and recurrent part requantized (not yet added)."""
    rows = slice(gate * desc["hidden_size"], (gate + 1) * desc["hidden_size"])
    x_part = _matmul_s16(
        x,
        desc["input_weights"][rows],
        desc["input_bias"][rows].astype(np.int64),
        desc["input_multiplier"][gate],
        desc["input_shift"][gate],
        0,
    )
    h_acc = wrap_int32(
        desc["hidden_bias"][rows].astype(np.int64)
        + desc["hidden_weights"][rows].astype(np.int64) @ np.asarray(h, np.int64)
    )
    return x_part, requantize(h_acc, desc["hidden_multiplier"][gate], desc["hidden_shift"][gate])


def lstm_step(desc: dict, x: np.ndarray, h: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One time step of one batch row: x int8 [I], h int8 [H], c int16 [H] -> (h', c').

        gate_k = act_k(sat16(requant(Wx_k x + bx_k) + requant(Wh_k h + bh_k)))   k = i, f, g, o
                 (bx_k = bias_k - zp_x * sum(Wx_k), bh_k = -zp_h * sum(Wh_k); act = sigmoid, tanh for g)
        c' = sat16(requant(f * c, m_fc, s_fc))            (scale 2^-15 * s_c / s_c)
        c' = sat16(requant(i * g, m_ic, s_ic) + c')       (scale 2^-30 / s_c)
        h' = sat8(requant(o * tanh_s16(c', cell_tanh_shift), m_out, s_out) + zp_h)
    With desc["tanh_linear"] (a layer whose g and cell stay where tanh(x) = x, linear_tanh_power)
    g = pre_g at a scale 2^P and tanh(c') = c' (the cell at 2^cell_power < 2^-15): the multipliers
    carry the scales (GRU: gru_step).
    """
    gates = []
    for gate in range(LSTM_GATES):
        x_part, h_part = _gate_pre(desc, x, h, gate)
        pre = _sat16(h_part + x_part)
        linear = gate == 2 and desc["tanh_linear"]
        gates.append(pre if linear else activation_s16(pre, 0, TANH if gate == 2 else SIGMOID, desc["sigmoid_table"]))
    i, f, g, o = gates
    c = _sat16(requantize(f * np.asarray(c, np.int64), desc["forget_cell_multiplier"], desc["forget_cell_shift"]))
    c = _sat16(requantize(i * g, desc["input_cell_multiplier"], desc["input_cell_shift"]) + c)
    t = c if desc["tanh_linear"] else activation_s16(c, desc["cell_tanh_shift"], TANH, desc["sigmoid_table"])
    h = np.clip(requantize(o * t, desc["output_multiplier"], desc["output_shift"]) + desc["output_offset"], -128, 127)
    return h.astype(np.int8), c.astype(np.int16)


def gru_step(desc: dict, x: np.ndarray, h: np.ndarray) -> np.ndarray:
    """One GRU time step of one batch row (edgec's definition): x int8 [I], h int8 [H] -> h'.

        r, z = sigmoid(sat16(requant(Wx x + bx) + requant(Wh h + bh)))   (bx holds b_i + b_h)
        xn   = sat16(requant(Wx_n x + bx_n))           Q3.12
        hn   = sat16(requant(Wh_n h + bh_n))           Q3.12 (bh_n = b_hn - zp_h * sum(Wh_n))
        n    = tanh(sat16(xn + sat16(requant(r * hn, m_rh, s_rh))))      (r * hn: 2^-15 -> 1)
        hq   = sat16(requant(h - zp_h, m_hq, s_hq))    h in Q0.15 (scale s_h / 2^-15)
        h'   = sat8(requant((32768 - z) * n + z * hq, m_out, s_out) + zp_h)
    The hidden state is int8 at the output's (calibrated) qparams, like the LSTM's; the products
    are Q0.30, |sum| <= 2^30, and requant by 2^-30 / s_h brings h' back to int8.

    With desc["tanh_linear"] (a layer whose n gate stays where tanh(x) = x to a fraction of the
    hidden state's step, linear_tanh_power), xn, hn, n and hq are at the finer scale 2^P instead of
    Q3.12 / Q0.15 and n = sat16(xn + rh) (no table): Q3.12 and the table's grid are coarser than
    such a layer's hidden step (a bias-free GRU on inputs ~1e-3: up to 41 steps off). The
    multipliers carry the scale; the arithmetic is otherwise the same.
    """
    table = desc["sigmoid_table"]
    x_r, h_r = _gate_pre(desc, x, h, 0)
    x_z, h_z = _gate_pre(desc, x, h, 1)
    x_n, h_n = _gate_pre(desc, x, h, 2)
    r = activation_s16(_sat16(h_r + x_r), 0, SIGMOID, table)
    z = activation_s16(_sat16(h_z + x_z), 0, SIGMOID, table)
    hn = _sat16(h_n)
    rh = _sat16(requantize(r * hn, desc["forget_cell_multiplier"], desc["forget_cell_shift"]))
    n = _sat16(x_n + rh) if desc["tanh_linear"] else activation_s16(_sat16(x_n + rh), 0, TANH, table)
    h_q15 = _sat16(
        requantize(
            np.asarray(h, np.int64) - desc["output_offset"], desc["hidden_q15_multiplier"], desc["hidden_q15_shift"]
        )
    )
    mixed = (32768 - z) * n + z * h_q15
    out = requantize(mixed, desc["output_multiplier"], desc["output_shift"]) + desc["output_offset"]
    return np.clip(out, -128, 127).astype(np.int8)


def unpacked(desc: dict) -> dict:
    """The descriptor with int4 weight matrices (weight_bits 4: packed, as the C reads them)
    unpacked to int8 [gates * H, I] / [gates * H, H]: the int8 goldens then run them."""
    if desc.get("weight_bits", 8) != 4:
        return desc
    rows = desc["cell"] * desc["hidden_size"]
    return {
        **desc,
        "input_weights": int4.unpack_int4(desc["input_weights"], rows * desc["input_size"]).reshape(rows, -1),
        "hidden_weights": int4.unpack_int4(desc["hidden_weights"], rows * desc["hidden_size"]).reshape(rows, -1),
    }


def recurrent_s8(
    desc: dict, x: np.ndarray, hidden: np.ndarray | None = None, cell: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Golden edgec_lstm_s8 / edgec_gru_s8 over a whole sequence (desc["cell"] says which).

    x: int8 [T, B, I] (time_major) or [B, T, I]. hidden int8 [B, H] / cell int16 [B, H]: the state
    before the first step; when desc["reset_state"] (or they are None) it starts at real zero
    (hidden = zp_h, cell = 0). Returns (outputs int8 like x with H features -- only the last step,
    a time axis of 1, when desc["last_step_only"] --, hidden', cell'). int4 weights: unpacked, then
    the same arithmetic.
    """
    desc = unpacked(desc)
    batches, steps, hidden_size = desc["batches"], desc["time_steps"], desc["hidden_size"]
    x = np.asarray(x, np.int8).reshape((steps, batches, -1) if desc["time_major"] else (batches, steps, -1))
    if desc["reset_state"] or hidden is None:
        hidden = np.full((batches, hidden_size), desc["output_offset"], np.int8)
        cell = np.zeros((batches, hidden_size), np.int16)
    hidden, cell = (
        np.array(hidden, np.int8).reshape(batches, hidden_size),
        np.zeros((batches, hidden_size), np.int16) if cell is None else np.array(cell, np.int16).reshape(batches, -1),
    )
    out = np.zeros(x.shape[:2] + (hidden_size,), np.int8)
    for t in range(steps):
        for b in range(batches):
            index = (t, b) if desc["time_major"] else (b, t)
            if desc["cell"] == LSTM_GATES:
                hidden[b], cell[b] = lstm_step(desc, x[index], hidden[b], cell[b])
            else:
                hidden[b] = gru_step(desc, x[index], hidden[b])
            out[index] = hidden[b]
    if desc["last_step_only"]:
        out = out[-1:] if desc["time_major"] else out[:, -1:]
    return out, hidden, cell


def _gate_pre_s16(desc: dict, x, h, gate: int) -> tuple[np.ndarray, np.ndarray]:
    """arm_nn_lstm_calculate_gate_s16 before the activation (arm_nn_vec_mat_mul_result_acc_s16 twice):
    gate `gate`'s input part sat16(requantize_s64(bias + Wx x)) and its recurrent part
    requantize_s64(Wh h) (int32, not yet added); the sums exact in int64."""
    rows = slice(gate * desc["hidden_size"], (gate + 1) * desc["hidden_size"])
    x_acc = add_bias_s64(
        np.asarray(desc["input_weights"][rows], np.int64) @ np.asarray(x, np.int64), desc["bias"][rows]
    )
    h_acc = np.asarray(desc["hidden_weights"][rows], np.int64) @ np.asarray(h, np.int64)
    x_part = _sat16(requantize_s64(x_acc, desc["input_multiplier"][gate], desc["input_shift"][gate]))
    return x_part, requantize_s64(h_acc, desc["hidden_multiplier"][gate], desc["hidden_shift"][gate])


def lstm_step_s16(desc: dict, x: np.ndarray, h: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One 16x8 time step of one batch row (arm_nn_lstm_step_s16): x int16 [I], h int16 [H],
    c int16 [H] -> (h', c'). As lstm_step with the matmuls of the 16x8 scheme (int64 sums,
    requantize_s64 of the Q31 multiplier reduced to Q15) and no offsets:

        gate_k = act_k(sat16(requant_s64(Wh_k h) + sat16(requant_s64(Wx_k x + b_k))))
        c' = sat16(requant(f * c, m_fc, s_fc));  c' = sat16(requant(i * g, m_ic, s_ic) + c')
        h' = sat16(requant(o * tanh_s16(c', cell_tanh_shift), m_out, s_out))
    """
    gates = []
    for gate in range(LSTM_GATES):
        x_part, h_part = _gate_pre_s16(desc, x, h, gate)
        function = TANH if gate == 2 else SIGMOID
        gates.append(activation_s16(_sat16(h_part + x_part), 0, function, desc["sigmoid_table"]))
    i, f, g, o = gates
    c = _sat16(requantize(f * np.asarray(c, np.int64), desc["forget_cell_multiplier"], desc["forget_cell_shift"]))
    c = _sat16(requantize(i * g, desc["input_cell_multiplier"], desc["input_cell_shift"]) + c)
    t = activation_s16(c, desc["cell_tanh_shift"], TANH, desc["sigmoid_table"])
    h = _sat16(requantize(o * t, desc["output_multiplier"], desc["output_shift"]))
    return h.astype(np.int16), c.astype(np.int16)


def is_lstm_s16(desc: dict) -> bool:
    """Whether `desc` is edgec_lstm_s16's (LSTM_S16_DESC: one cell kind, no zero points), not
    edgec_recurrent_desc's."""
    return list(desc) == LSTM_S16_DESC.names


def lstm_s16(
    desc: dict, x: np.ndarray, hidden: np.ndarray | None = None, cell: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Golden edgec_lstm_s16 over a whole sequence, as recurrent_s8 with int16 x, hidden and
    outputs (a zero state is all zeros: no zero point)."""
    batches, steps, hidden_size = desc["batches"], desc["time_steps"], desc["hidden_size"]
    x = np.asarray(x, np.int16).reshape((steps, batches, -1) if desc["time_major"] else (batches, steps, -1))
    zeros = np.zeros((batches, hidden_size), np.int16)
    if desc["reset_state"] or hidden is None:
        hidden, cell = zeros, zeros
    hidden = np.array(hidden, np.int16).reshape(batches, hidden_size)
    cell = zeros.copy() if cell is None else np.array(cell, np.int16).reshape(batches, hidden_size)
    out = np.zeros(x.shape[:2] + (hidden_size,), np.int16)
    for t in range(steps):
        for b in range(batches):
            index = (t, b) if desc["time_major"] else (b, t)
            hidden[b], cell[b] = lstm_step_s16(desc, x[index], hidden[b], cell[b])
            out[index] = hidden[b]
    if desc["last_step_only"]:
        out = out[-1:] if desc["time_major"] else out[:, -1:]
    return out, hidden, cell


# -- verify's reference: the program's float cell, one step at a time -------------------------------

# How far the integer step may land from the float cell on the same (dequantized) state, in real
# units (docs/numerics.md, "Recurrent layers (LSTM, GRU)"): each int16 gate pre-activation rounds twice by half
# a Q3.12 step; the 256-entry table (entries rounded to 2^-17, linear interpolation on a 1/24 grid,
# |sigmoid''| <= 0.0963) and the Q0.15 result add TABLE_ERROR (tanh reads sigmoid at 2x: twice that);
# a pre-activation saturating at +-8 loses up to 1 - sigmoid(8).
PRE_ROUNDING = 2.0**-12
SIGMOID_TABLE_ERROR = 2.0**-17 + (1 / 24) ** 2 / 8 * 0.0963 + GATE_OUTPUT_SCALE
TANH_TABLE_ERROR = 2 * (2.0**-17 + (1 / 24) ** 2 / 8 * 0.0963) + GATE_OUTPUT_SCALE
SIGMOID_SATURATION = 1 / (1 + math.exp(8.0))


def integer_steps(
    desc: dict, x: np.ndarray, hidden: np.ndarray | None = None, cell: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The golden step functions over the sequence from a zero state (or from hidden / cell, the
    caller's): per step the hidden state before and after it and the cell state before it,
    [T, B, H] each (int8, int8, int16; the 16x8 LSTM's, LSTM_S16_DESC: int16 throughout)."""
    desc = unpacked(desc)
    batches, steps, size = desc["batches"], desc["time_steps"], desc["hidden_size"]
    s16 = is_lstm_s16(desc)
    dtype = np.int16 if s16 else np.int8
    x = np.asarray(x, dtype).reshape((steps, batches, -1) if desc["time_major"] else (batches, steps, -1))
    if not desc["time_major"]:
        x = x.transpose(1, 0, 2)
    zero = 0 if s16 else desc["output_offset"]
    h = np.full((batches, size), zero, dtype) if hidden is None else np.array(hidden, dtype)
    c = np.zeros((batches, size), np.int16) if cell is None else np.array(cell, np.int16)
    before, after, cells = [], [], []
    for t in range(steps):
        before.append(h.copy())
        cells.append(c.copy())
        for b in range(batches):
            if s16:
                h[b], c[b] = lstm_step_s16(desc, x[t, b], h[b], c[b])
            elif desc["cell"] == LSTM_GATES:
                h[b], c[b] = lstm_step(desc, x[t, b], h[b], c[b])
            else:
                h[b] = gru_step(desc, x[t, b], h[b])
        after.append(h.copy())
    return np.stack(before), np.stack(after), np.stack(cells)


def float_step(cell: str, x, h, c, weights, cell_limit: float):
    """PyTorch's LSTM/GRU equations (float64) for one step from (x, h, c) [B, ...], the cell
    state clipped to what its int16 holds. Returns h', c' and the error bound of the integer step
    per element (real units, before the output rounding)."""
    w_ih, w_hh, b_ih, b_hh, e_bias = weights
    gx = x @ w_ih.T + b_ih
    gh = h @ w_hh.T + b_hh
    e_pre = PRE_ROUNDING + e_bias  # per gate row
    e_sig = 0.25 * e_pre + SIGMOID_TABLE_ERROR + SIGMOID_SATURATION
    e_tanh = e_pre + TANH_TABLE_ERROR
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    if cell == "lstm":
        i, f, g, o = (gx + gh).reshape(len(x), 4, -1).transpose(1, 0, 2)
        e_i, e_f, e_g, e_o = (e.reshape(1, -1) for e in np.split(e_sig, 4))
        e_g = np.split(e_tanh, 4)[2].reshape(1, -1)
        c_new = np.clip(sig(f) * c + sig(i) * np.tanh(g), -cell_limit, cell_limit)
        cell_round = cell_limit * 2.0**-15  # one int16 step of the cell state: two half-step roundings
        e_c = np.abs(c) * e_f + e_i + e_g + cell_round
        e_h = e_o + e_c + PRE_ROUNDING / 2 + TANH_TABLE_ERROR
        return sig(o) * np.tanh(c_new), c_new, e_h
    (xr, xz, xn), (hr, hz, hn) = (
        gx.reshape(len(x), 3, -1).transpose(1, 0, 2),
        gh.reshape(len(x), 3, -1).transpose(1, 0, 2),
    )
    e_r, e_z, _ = (e.reshape(1, -1) for e in np.split(e_sig, 3))
    e_xn = np.split(PRE_ROUNDING / 2 + e_bias, 3)[2].reshape(1, -1)
    r, z = sig(xr + hr), sig(xz + hz)
    n = np.tanh(xn + r * hn)
    e_rh = e_r * (np.abs(hn) + e_xn) + e_xn + PRE_ROUNDING / 2
    e_n = e_xn + e_rh + TANH_TABLE_ERROR
    e_h = e_z * (np.abs(n - h) + e_n) + e_n + GATE_OUTPUT_SCALE / 2
    return (1 - z) * n + z * h, c, e_h


def reference_weights(
    cell: str, w_ih, w_hh, b_ih, b_hh, input_scale: float, hidden_scale: float, weight_bits: int = 8
) -> tuple:
    """The program's weights: each gate block quantized as recurrent_desc quantizes it, back in
    float; the float biases, with half a step of their int32 grid (the rounding) as an error."""
    gates = LSTM_GATES if cell == "lstm" else GRU_GATES
    rows = np.asarray(w_hh).shape[0]
    qmax = INT4_QMAX if weight_bits == 4 else 127
    qx, sx = quantize_weights(np.asarray(w_ih, np.float64), gates, qmax)
    qh, sh = quantize_weights(np.asarray(w_hh, np.float64), gates, qmax)
    wx = qx.astype(np.float64) * np.repeat(sx, rows // gates)[:, None]
    wh = qh.astype(np.float64) * np.repeat(sh, rows // gates)[:, None]
    zeros = np.zeros(rows)
    e_bias = 0.5 * (np.repeat(sx, rows // gates) * input_scale + np.repeat(sh, rows // gates) * hidden_scale)
    return (
        wx,
        wh,
        zeros if b_ih is None else np.asarray(b_ih, np.float64),
        zeros if b_hh is None else np.asarray(b_hh, np.float64),
        e_bias,
    )


# -- descriptors --------------------------------------------------------------------------------

DESC_FIELDS = (
    "cell",
    "batches",
    "time_steps",
    "input_size",
    "hidden_size",
    "time_major",
    "reset_state",
    "input_weights",
    "hidden_weights",
    "input_bias",
    "hidden_bias",
    "input_multiplier",
    "input_shift",
    "hidden_multiplier",
    "hidden_shift",
    "forget_cell_multiplier",
    "forget_cell_shift",
    "input_cell_multiplier",
    "input_cell_shift",
    "cell_tanh_shift",
    "output_multiplier",
    "output_shift",
    "output_offset",
    "hidden_q15_multiplier",
    "hidden_q15_shift",
    "last_step_only",
    "tanh_linear",
    "sigmoid_table",
    "weight_bits",
)


def quantize_weights(w: np.ndarray, gates: int, qmax: int = 127) -> tuple[np.ndarray, np.ndarray]:
    """Float [gates*H, K] -> int8, symmetric per gate block (TFLite: one tensor per gate) in
    [-qmax, qmax] (127; int4 weights 7), scale max|w| / qmax, rounding half away from zero;
    returns (int8, scales[gates])."""
    blocks = np.asarray(w, np.float64).reshape(gates, -1, w.shape[-1])
    scales = np.maximum(np.abs(blocks).max(axis=(1, 2)), 2**-20) / qmax
    scaled = blocks / scales[:, None, None]
    q = np.clip(np.sign(scaled) * np.floor(np.abs(scaled) + 0.5), -qmax, qmax)
    return q.reshape(w.shape).astype(np.int8), scales


def cell_scale_power(max_abs: float) -> int:
    """The int16 cell state's scale is 2^power, the smallest power of two whose int16 range holds
    the calibrated max|c| (TFLite quantizes the cell state to a power-of-two scale), and at least
    2^-15 (|c| <= 1 representable)."""
    return max(math.ceil(math.log2(max(max_abs, 1.0))), 0) - 15


def _multipliers(scales) -> tuple[list[int], list[int]]:
    pairs = [quantize_multiplier(float(s)) for s in scales]
    return [m for m, _ in pairs] + [0] * (4 - len(pairs)), [s for _, s in pairs] + [0] * (4 - len(pairs))


def _folded_bias(
    bias_real: np.ndarray, scales: np.ndarray, weights: np.ndarray, zero_point: int, in_scale: float
) -> np.ndarray:
    """bias / (s_in * s_w) rounded half away, minus zp * sum of the row: the effective bias."""
    gates = len(scales)
    per_row = np.repeat(np.asarray(scales, np.float64), weights.shape[0] // gates) * in_scale
    real = np.asarray(bias_real, np.float64) / per_row
    q = np.sign(real) * np.floor(np.abs(real) + 0.5)
    folded = q - zero_point * weights.astype(np.int64).sum(axis=1)
    return np.clip(folded, -(2**31), 2**31 - 1).astype(np.int32)


def recurrent_desc(
    cell: str,
    *,
    batches: int,
    time_steps: int,
    time_major: bool,
    reset_state: bool,
    w_ih: np.ndarray,
    w_hh: np.ndarray,
    b_ih: np.ndarray | None,
    b_hh: np.ndarray | None,
    input_scale: float,
    input_zp: int,
    hidden_scale: float,
    hidden_zp: int,
    cell_power: int = 0,
    last_step_only: bool = False,
    n_power: int | None = None,
    weight_bits: int = 8,
) -> dict:
    """The descriptor of edgec_lstm_s8 (cell "lstm") / edgec_gru_s8 ("gru") from float PyTorch
    weights (weight_ih [G*H, I], weight_hh [G*H, H], biases [G*H] or None) and the qparams of the
    input and hidden state (and the LSTM cell state's scale power; a GRU's linear n gate's scale
    power, linear_tanh_power, or None for the tanh table); keys = C fields in order. weight_bits
    4: the weight matrices int4 per gate block in [-7, 7], packed (unpacked(desc) reads them)."""
    gates = LSTM_GATES if cell == "lstm" else GRU_GATES
    hidden_size = w_hh.shape[1]
    zeros = np.zeros(gates * hidden_size)
    b_ih = zeros if b_ih is None else np.asarray(b_ih, np.float64)
    b_hh = zeros if b_hh is None else np.asarray(b_hh, np.float64)
    qmax = INT4_QMAX if weight_bits == 4 else 127
    wx, sx = quantize_weights(w_ih, gates, qmax)
    wh, sh = quantize_weights(w_hh, gates, qmax)
    stored = int4.pack_int4 if weight_bits == 4 else (lambda w: w)
    if cell == "lstm":
        x_bias, h_bias = b_ih + b_hh, zeros
    else:  # r and z take both biases on the input side; n keeps b_hn inside r * (W_hn h + b_hn)
        n_rows = slice(2 * hidden_size, 3 * hidden_size)
        x_bias, h_bias = b_ih + b_hh, zeros.copy()
        x_bias[n_rows], h_bias[n_rows] = b_ih[n_rows], b_hh[n_rows]
    gate_scales = np.full(gates, GATE_INPUT_SCALE)
    n_scale = GATE_OUTPUT_SCALE if n_power is None else 2.0**n_power  # the GRU's n and h in the mix; the LSTM's g
    if n_power is not None:
        gate_scales[2] = n_scale
    in_m, in_s = _multipliers(input_scale * sx / gate_scales)
    h_m, h_s = _multipliers(hidden_scale * sh / gate_scales)
    if cell == "lstm":
        cell_scale = 2.0**cell_power
        fc_m, fc_s = quantize_multiplier(GATE_OUTPUT_SCALE)  # f * c: 2^-15 * s_c / s_c
        ic_m, ic_s = quantize_multiplier(GATE_OUTPUT_SCALE * n_scale / cell_scale)
        tanh_shift = cell_power + 12 if n_power is None else 0  # linear: no tanh of the cell
    else:
        fc_m, fc_s = quantize_multiplier(GATE_OUTPUT_SCALE * GATE_INPUT_SCALE / GATE_INPUT_SCALE)  # r * hn -> Q3.12
        ic_m, ic_s, tanh_shift = 0, 0, 0
    hq_m, hq_s = quantize_multiplier(hidden_scale / n_scale) if cell == "gru" else (0, 0)
    t_scale = (
        n_scale if cell == "gru" else GATE_OUTPUT_SCALE if n_power is None else 2.0**cell_power
    )  # what o (z) multiplies
    out_m, out_s = quantize_multiplier(GATE_OUTPUT_SCALE * t_scale / hidden_scale)
    return dict(
        zip(
            DESC_FIELDS,
            (
                gates,
                batches,
                time_steps,
                w_ih.shape[1],
                hidden_size,
                int(time_major),
                int(reset_state),
                stored(wx),
                stored(wh),
                _folded_bias(x_bias, sx, wx, input_zp, input_scale),
                _folded_bias(h_bias, sh, wh, hidden_zp, hidden_scale),
                in_m,
                in_s,
                h_m,
                h_s,
                fc_m,
                fc_s,
                ic_m,
                ic_s,
                tanh_shift,
                out_m,
                out_s,
                hidden_zp,
                hq_m,
                hq_s,
                int(last_step_only),
                int(n_power is not None),
                sigmoid_table(),
                weight_bits,
            ),
        )
    )


def _multipliers_s64(scales) -> tuple[list[int], list[int]]:
    """_multipliers for requantize_s64, whose shift must be at most S64_SHIFT_MAX (ValueError)."""
    multipliers, shifts = _multipliers(scales)
    if max(shifts) > S64_SHIFT_MAX:
        raise ValueError(
            f"a gate's effective scale s * s_w / 2^-12 must be below 2^{S64_SHIFT_MAX} (requantize_s64's shift)"
        )
    return multipliers, shifts


def lstm_s16_desc(
    *,
    batches: int,
    time_steps: int,
    time_major: bool,
    reset_state: bool,
    w_ih: np.ndarray,
    w_hh: np.ndarray,
    b_ih: np.ndarray | None,
    b_hh: np.ndarray | None,
    input_scale: float,
    hidden_scale: float,
    cell_power: int,
    last_step_only: bool = False,
) -> dict:
    """The descriptor of edgec_lstm_s16 from float PyTorch weights and the symmetric int16 scales of
    the input and hidden state, as TFLite Micro derives its 16x8 LSTM (lstm_eval_common.cc): the
    gates' matmuls to Q3.12 (s * s_w / 2^-12 per gate, weights per gate block as recurrent_desc's),
    the bias b_ih + b_hh in int64 at s_x * s_wx (quantize_bias_s64) on the input side, f * c at
    2^-15, i * g at 2^-30 / s_c, o * tanh(c) at 2^-30 / s_h; keys = C fields in order."""
    hidden_size = w_hh.shape[1]
    zeros = np.zeros(LSTM_GATES * hidden_size)
    bias = (zeros if b_ih is None else np.asarray(b_ih, np.float64)) + (
        zeros if b_hh is None else np.asarray(b_hh, np.float64)
    )
    wx, sx = quantize_weights(w_ih, LSTM_GATES)
    wh, sh = quantize_weights(w_hh, LSTM_GATES)
    in_m, in_s = _multipliers_s64(input_scale * sx / GATE_INPUT_SCALE)
    h_m, h_s = _multipliers_s64(hidden_scale * sh / GATE_INPUT_SCALE)
    fc_m, fc_s = quantize_multiplier(GATE_OUTPUT_SCALE)
    ic_m, ic_s = quantize_multiplier(GATE_OUTPUT_SCALE * GATE_OUTPUT_SCALE / 2.0**cell_power)
    out_m, out_s = quantize_multiplier(GATE_OUTPUT_SCALE * GATE_OUTPUT_SCALE / hidden_scale)
    values = (
        batches,
        time_steps,
        w_ih.shape[1],
        hidden_size,
        int(time_major),
        int(reset_state),
        wx,
        wh,
        quantize_bias_s64(bias, input_scale, np.repeat(sx, hidden_size)),
        in_m,
        in_s,
        h_m,
        h_s,
        fc_m,
        fc_s,
        ic_m,
        ic_s,
        cell_power + 12,
        out_m,
        out_s,
        int(last_step_only),
        sigmoid_table(),
    )
    return dict(zip(LSTM_S16_DESC.names, values))


def lstm_linear_powers(g_pre_max: float, cell_max: float, hidden_scale: float) -> tuple[int, int] | None:
    """(P, cell power) of an LSTM layer whose g gate and cell stay where tanh(x) = x to within a
    quarter of the hidden step up to 1.5 times their calibrated max (as linear_tanh_power), each
    power leaving a factor 2 of headroom in int16; None (the tables, TFLite's cell) otherwise or
    where the cell would be no finer than 2^-15."""
    reach = 1.5 * max(g_pre_max, cell_max)
    if reach**3 / 3 > hidden_scale / 4:
        return None
    g_power, cell_power = (math.ceil(math.log2(max(3 * v, 2.0**-40))) - 15 for v in (g_pre_max, cell_max))
    return (g_power, cell_power) if max(g_power, cell_power) < -15 else None


def linear_tanh_power(tanh_pre_max: float, hidden_scale: float, hidden_zp: int) -> int | None:
    """The scale power P of a GRU layer's linear n gate (n = xn + r * hn, no tanh), or None for
    the tanh table. Linear when tanh(x) = x to within a quarter of the hidden state's step up to
    1.5 times the calibrated max|xn + r*hn| (|x^3| / 3 bounds x - tanh(x)) and Q3.12 would be the
    coarser grid; P leaves n and the hidden state (hq) a factor 2 of headroom in int16."""
    reach = 1.5 * tanh_pre_max
    if reach**3 / 3 > hidden_scale / 4:
        return None
    hidden_max = hidden_scale * max(abs(-128 - hidden_zp), abs(127 - hidden_zp))
    power = math.ceil(math.log2(max(2 * reach, 2 * hidden_max, 2.0**-40))) - 15
    return power if power < -15 else None


# -- the op unit --------------------------------------------------------------------------------

aten = torch.ops.aten
SEQUENCES = {aten.lstm.input: "lstm", aten.gru.input: "gru"}
CELLS = {aten.lstm_cell.default: "lstm", aten.gru_cell.default: "gru"}
OBSERVED_KEY = "edgec_recurrent_observed"


def _parse(node: Node) -> dict:
    """What a recurrent node computes: cell kind, input, initial-state nodes, per-layer weights."""
    if node.target in SEQUENCES:
        x, hx, params, has_biases, layers, _dropout, _train, bidirectional, batch_first = node.args[:9]
        per_layer = 4 if has_biases else 2
        runs = int(layers) * (2 if bidirectional else 1)  # PyTorch's order: layer 0 forward, reverse, layer 1 ...
        weights = [
            tuple(params[run * per_layer : (run + 1) * per_layer]) + ((None, None) if not has_biases else ())
            for run in range(runs)
        ]
        return {
            "cell": SEQUENCES[node.target],
            "x": x,
            "hx": list(hx) if isinstance(hx, (list, tuple)) else [hx],
            "weights": weights,
            "layers": int(layers),
            "bidirectional": bool(bidirectional),
            "batch_first": bool(batch_first),
            "sequence": True,
            "proj": len(params) != runs * per_layer,
        }
    x, hx, w_ih, w_hh = node.args[:4]
    b_ih = node.args[4] if len(node.args) > 4 else None
    b_hh = node.args[5] if len(node.args) > 5 else None
    return {
        "cell": CELLS[node.target],
        "x": x,
        "hx": list(hx) if isinstance(hx, (list, tuple)) else [hx],
        "weights": [(w_ih, w_hh, b_ih, b_hh)],
        "layers": 1,
        "bidirectional": False,
        "batch_first": False,
        "sequence": False,
        "proj": False,
    }


def weight_nodes(node: Node) -> list[tuple[Node, Node]]:
    """The (weight_ih, weight_hh) nodes of each run (layer, direction) of a recurrent node."""
    return [(w_ih, w_hh) for w_ih, w_hh, _, _ in _parse(node)["weights"]]


def int4_reference(w_ih: np.ndarray, w_hh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float weights as the int4 build quantizes them (per gate block in [-7, 7]), back in float:
    what the --flash chooser measures a recurrent layer's sensitivity with."""
    gates = w_hh.shape[0] // w_hh.shape[1]
    rounded = []
    for w in (w_ih, w_hh):
        q, scales = quantize_weights(np.asarray(w, np.float64), gates, INT4_QMAX)
        rounded.append(q * np.repeat(scales, w.shape[0] // gates)[:, None])
    return rounded[0], rounded[1]


def _is_zero_state(arg) -> bool:
    return arg is None or (isinstance(arg, Node) and arg.target == aten.zeros.default)


def _cell_item(node: Node, spec: dict) -> Node | None:
    """The getitem reading an LSTM's final cell state c_n (item 2 of a sequence, 1 of a cell), if used."""
    index = 2 if spec["sequence"] else 1
    if spec["cell"] != "lstm":
        return None
    return next((u for u in node.users if u.target is operator.getitem and u.args[1] == index and u.users), None)


def _h0_qspec(spec: dict):
    """A caller-held h0's qspec, which the hidden state shares. A GRU's state stays in [-1, 1]
    (each step mixes h and tanh) and its kernel reads h in Q0.15: it is held at tanh's int8 steps
    (1/128, zero point 0), the program clamping an h0 beyond them as the kernel must; an LSTM's
    is observed (h0 and the outputs together)."""
    return fixed_qspec(1 / 128, 0) if spec["cell"] == "gru" else ACTIVATION_QSPEC


def _initial_state(spec: dict) -> tuple[Node | None, Node | None]:
    """The nodes of h0 and (LSTM) c0 given to the layer, None where they are omitted or zeros."""
    h0 = spec["hx"][0] if spec["hx"] else None
    c0 = spec["hx"][1] if spec["cell"] == "lstm" and len(spec["hx"]) > 1 else None
    return (None if _is_zero_state(h0) else h0), (None if _is_zero_state(c0) else c0)


def float_statistics(
    cell: str, x: torch.Tensor, weights: list, time_major: bool, directions: int = 1, initial: tuple = (None, None)
) -> list[dict]:
    """Per run (a layer's direction, in `weights`' order), max|c| (LSTM), what the tanh gate takes
    at most (LSTM: max|pre_g|, GRU: max|xn + r * hn|) and the hidden state's min/max of the float
    recurrence from a zero state, or from `initial` (h0, c0: [runs, B, H], each run its row) where
    the caller holds the state (PyTorch's equations); a reverse run reads the sequence backwards,
    and the next layer reads the directions' outputs concatenated."""
    seq = x if time_major else x.transpose(0, 1)
    rows = [None if state is None else state.reshape(-1, *state.shape[-2:]) for state in initial]
    stats = []
    for layer in range(len(weights) // directions):
        outputs = []
        for direction in range(directions):
            run = layer * directions + direction
            start = tuple(None if state is None else state[run] for state in rows)
            run, run_stats = _float_run(cell, seq.flip(0) if direction else seq, weights[run], start)
            outputs.append(run.flip(0) if direction else run)
            stats.append(run_stats)
        seq = torch.cat(outputs, -1)
    return stats


def _float_run(
    cell: str, seq: torch.Tensor, weights: tuple, initial: tuple = (None, None)
) -> tuple[torch.Tensor, dict]:
    """One direction of one layer over a time-major sequence (from the state `initial`, (h0, c0),
    zeros where None): its outputs and statistics (the initial cell state counts in max|c|)."""
    w_ih, w_hh, b_ih, b_hh = weights
    h = torch.zeros(seq.shape[1], w_hh.shape[1])
    c = torch.zeros_like(h)
    h = h if initial[0] is None else initial[0].reshape(h.shape)
    c = c if initial[1] is None else initial[1].reshape(c.shape)
    outputs, cell_max, tanh_pre_max = [], float(c.abs().max()), 0.0
    for x_t in seq:
        gx = x_t @ w_ih.T + (0 if b_ih is None else b_ih)
        gh = h @ w_hh.T + (0 if b_hh is None else b_hh)
        if cell == "lstm":
            i, f, g, o = (gx + gh).chunk(4, dim=-1)
            tanh_pre_max = max(tanh_pre_max, float(g.abs().max()))
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            cell_max = max(cell_max, float(c.abs().max()))
        else:
            (xr, xz, xn), (hr, hz, hn) = gx.chunk(3, dim=-1), gh.chunk(3, dim=-1)
            r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
            tanh_pre_max = max(tanh_pre_max, float((xn + r * hn).abs().max()))
            n = torch.tanh(xn + r * hn)
            h = (1 - z) * n + z * h
        outputs.append(h)
    seq = torch.stack(outputs)
    return seq, {
        "cell_max": cell_max,
        "hidden_min": float(seq.min()),
        "hidden_max": float(seq.max()),
        "tanh_pre_max": tanh_pre_max,
    }


class RecurrentResult:
    """A recurrent node's tuple result: getitem 0 is the output sequence (or a cell's h), 1 h_n:
    the last step of each run's output (`run_outputs`, a reverse run's in its own time order)."""

    def __init__(self, unit, node, layer_outputs: list[Tensor], spec: dict, run_outputs: list[Tensor]):
        self.unit, self.node, self.layer_outputs, self.spec = unit, node, layer_outputs, spec
        self.run_outputs = run_outputs

    def lower_item(self, ctx, getitem, item: int) -> None:
        last = self.layer_outputs[-1]
        if item == 0:
            ctx.alias(getitem, last)
        elif item == 1 and self.spec["sequence"]:
            axis = 1 if self.spec["batch_first"] else 0
            gather = Gather(_last_steps, (axis, *(_Slot(i) for i in range(len(self.run_outputs)))), {})
            out = ctx.output(getitem, qparams_of=last)
            ctx.add_op("copy", getitem, self.run_outputs, [out], gather=gather)
        # c_n (item 1 of a cell, 2 of a sequence): the layer's int16 output 1, mapped when lowered


def _hidden(ctx, names) -> int:
    """The hidden size of a run with weight nodes `names` (w_hh is [gates * hidden, hidden])."""
    return int(np.asarray(ctx.constant(names[1]).value).shape[1])


def _time_flip(ctx, node, source: Tensor, axis: int, name: str) -> Tensor:
    """`source` reversed along its time axis, by a copy."""
    out = ctx.graph.add_tensor(Tensor(name, source.shape, source.scale, source.zero_point, dtype=source.dtype))
    ctx.add_op("copy", node, [source], [out], gather=Gather(torch.flip, (_Slot(0), [axis]), {}))
    return out


def _last_steps(axis: int, *runs):
    """h_n from the runs' output sequences: each one's last step, stacked."""
    return torch.stack([y.select(axis, -1) for y in runs])


class Recurrent(OpDef):
    kind = "recurrent"
    family = "recurrent (LSTM, GRU)"
    targets = frozenset(SEQUENCES) | frozenset(CELLS)
    runtime_sources = ("recurrent/edgec_recurrent_s8.c",)
    limits = (
        "no proj_size, batched input; c0 a model input read by this layer only and c_n (int16) only returned; "
        "bidirectional: --stream only with h0/c0 as model inputs"
    )

    def check(self, node) -> str | None:
        spec = _parse(node)
        if spec["proj"]:
            return "LSTM with proj_size"
        _, c0 = _initial_state(spec)
        readers = [u for u in c0.users if u.op != "call_module"] if c0 is not None else []  # not export's guard
        if c0 is not None and (c0.op != "placeholder" or len(readers) != 1):
            return "an LSTM initial cell state c0 the model computes (c0 must be a model input read by this layer only)"
        cell_item = _cell_item(node, spec)
        if cell_item is not None and any(u.op != "output" for u in cell_item.users):
            return "an LSTM cell state c_n read inside the model (it may only be returned, as an int16 output)"
        rank = len(node.args[0].meta["val"].shape)
        if rank != (3 if spec["sequence"] else 2):
            return "an unbatched recurrent input (give it a batch dimension)"
        return None

    def int16_problem(self, node) -> str | None:
        return None if _parse(node)["cell"] == "lstm" else RECURRENT_INT16_PROBLEM

    def annotate(self, node) -> None:
        spec = _parse(node)
        qspec = ACTIVATION_QSPEC
        if node.target == aten.gru_cell.default:  # returns the tensor itself
            h0, _ = _initial_state(spec)
            inputs = {spec["x"]: ACTIVATION_QSPEC}
            if h0 is not None:  # h0 and h' share one observer (the caller feeds h' back as h0)
                inputs[h0], qspec = _h0_qspec(spec), SharedQuantizationSpec((h0, node))
            annotate(node, inputs, qspec)
            return
        items = {user.args[1]: user for user in node.users if user.target is operator.getitem}
        # h0 is read at the hidden state's qparams (the caller feeds h_n back as h0): one observer,
        # rooted at h0's edge, which the outputs share
        h0, _ = _initial_state(spec)
        inputs = {spec["x"]: ACTIVATION_QSPEC}
        if h0 is not None:
            inputs[h0] = _h0_qspec(spec)
            qspec = SharedQuantizationSpec((h0, node))
        annotate(node, inputs, None)
        if 0 in items:
            annotate(items[0], {}, qspec)
        if 1 in items and spec["sequence"]:
            shared = SharedQuantizationSpec(items[0]) if 0 in items else qspec
            annotate(items[1], {}, shared)

    def observe(self, node, args, result) -> None:
        """Calibration: the float recurrence's per-layer cell and hidden ranges."""
        spec = _parse(node)
        values = {id(n): v for n, v in zip(_flatten_args(node.args), _flatten_args(args))}
        weights = [tuple(None if w is None else values[id(w)] for w in layer) for layer in spec["weights"]]
        x = args[0] if spec["sequence"] else args[0].unsqueeze(0)
        h0, c0 = (None if n is None else values[id(n)].detach().float() for n in _initial_state(spec))
        stats = float_statistics(
            spec["cell"],
            x.detach().float(),
            weights,
            time_major=not spec["batch_first"] or not spec["sequence"],
            directions=2 if spec["bidirectional"] else 1,
            initial=(h0, c0),
        )
        seen = node.meta.setdefault(OBSERVED_KEY, stats)
        for old, new in zip(seen, stats):
            old["cell_max"] = max(old["cell_max"], new["cell_max"])
            old["hidden_min"] = min(old["hidden_min"], new["hidden_min"])
            old["hidden_max"] = max(old["hidden_max"], new["hidden_max"])
            old["tanh_pre_max"] = max(old["tanh_pre_max"], new["tanh_pre_max"])

    def lower(self, ctx, node) -> None:
        spec = _parse(node)
        x = ctx.tensor(spec["x"])
        observed = node.meta.get(OBSERVED_KEY)
        if observed is None:
            raise EdgecError(
                f"{source_line(node)}: this recurrent layer was not calibrated by edgec (a program "
                f"quantized elsewhere has no cell-state or inner-layer ranges); compile the float model"
            )
        time_major = not spec["batch_first"] or not spec["sequence"]  # a cell: one step, [B, features]
        # the float node holding the last layer's output (verify compares the two)
        sequence_node = next((u.name for u in node.users if u.target is operator.getitem and u.args[1] == 0), "")
        # h_n stacks every run's last step in one copy, and h0 gives every run its state: then all
        # runs share the output's qparams
        shared = spec["sequence"] and any(
            u.target is operator.getitem and u.args[1] == 1 and u.users for u in node.users
        )
        shared = shared or _initial_state(spec)[0] is not None
        if spec["bidirectional"]:
            outputs, runs, ops = self._lower_bidirectional(
                ctx, node, spec, x, observed, time_major, sequence_node, shared
            )
        else:
            outputs, ops = self._lower_layers(ctx, node, spec, x, observed, time_major, sequence_node, shared)
            runs = outputs
        self._held_state(ctx, node, spec, ops)
        if node.target != aten.gru_cell.default:
            ctx.alias(node, RecurrentResult(self, node, outputs, spec, runs))

    def _lower_layers(self, ctx, node, spec, x, observed, time_major, sequence_node, shared):
        """One run per layer, each reading the one before; returns their outputs and ops."""
        outputs, ops = [], []
        source = x
        for layer, names in enumerate(spec["weights"]):
            last = layer == spec["layers"] - 1
            if last and not spec["sequence"] and node.target == aten.gru_cell.default:
                out = ctx.output(node, source.shape[:-1] + (_hidden(ctx, names),))
            else:
                out = ctx.graph.add_tensor(
                    Tensor(
                        f"{node.name}_layer{layer}",
                        source.shape[:-1] + (_hidden(ctx, names),),
                        source=sequence_node if last else "",
                        dtype=x.dtype,
                    )
                )
                if not last and not shared:
                    out.scale, out.zero_point = _layer_qparams(
                        observed[layer]["hidden_min"], observed[layer]["hidden_max"], x.dtype
                    )
            ops.append(self._add_run(ctx, node, spec, layer, source, out, observed, time_major))
            outputs.append(out)
            source = out
        for op in ops:  # where a layer without qparams takes them (finalize)
            op.attrs["final_output"] = outputs[-1].name
        return outputs, ops

    def _held_state(self, ctx, node, spec: dict, ops: list) -> None:
        """Runs (`ops`, in PyTorch's order) whose caller holds the state: h0 (int8, the hidden
        state's qparams) and c0 (int16 at the cell state's power-of-two scale, one for all runs:
        the largest run's) become inputs of every run (attrs "h0"/"c0": their indices; each reads
        row "state_slot"), c_n an output of the last (attrs "c_n"), the others' final cell states
        its inputs "c_parts" (each one's output "c_part"); h_n is each run's last step, as without
        (RecurrentResult)."""
        h0, c0 = _initial_state(spec)
        cell_item = _cell_item(node, spec)
        held_cell = c0 is not None or cell_item is not None
        if held_cell and len(ops) > 1:  # one cell scale and one choice of the tanh form for all
            cell_power = max(op.attrs["cell_power"] for op in ops)
            group = [(op.attrs["tanh_pre_max"], op.attrs["cell_max"]) for op in ops]
            for op in ops:
                op.attrs.update(cell_power=cell_power, state_group=group)
        for slot, op in enumerate(ops):
            op.attrs.update(h0=None, c0=None, c_n=None, c_part=None, c_parts=None, state_slot=slot)
            if h0 is not None:
                op.attrs["h0"] = len(op.inputs)
                op.inputs.append(ctx.tensor(h0).name)
            if c0 is not None:
                tensor = ctx.tensor(c0)
                tensor.scale, tensor.zero_point, tensor.dtype = 2.0 ** op.attrs["cell_power"], 0, "int16"
                op.attrs["c0"] = len(op.inputs)
                op.inputs.append(tensor.name)
        if cell_item is None:
            return
        *others, last = ops
        for op in others:
            out = ctx.graph.tensors[op.outputs[0]]
            shape = (op.attrs["batches"], out.shape[-1])
            scale = 2.0 ** op.attrs["cell_power"]
            part = ctx.graph.add_tensor(Tensor(f"{op.name}_cell", shape, scale, 0, dtype="int16"))
            op.attrs["c_part"] = len(op.outputs)
            op.outputs.append(part.name)
        last.attrs["c_parts"] = list(range(len(last.inputs), len(last.inputs) + len(others)))
        last.inputs += [op.outputs[op.attrs["c_part"]] for op in others]
        tensor = ctx.output(cell_item)
        tensor.scale, tensor.zero_point, tensor.dtype = 2.0 ** last.attrs["cell_power"], 0, "int16"
        last.attrs["c_n"] = len(last.outputs)
        last.outputs.append(tensor.name)

    def _add_run(self, ctx, node, spec: dict, run: int, source: Tensor, out: Tensor, observed: list, time_major: bool):
        """The op of one run (a layer, or one direction of a bidirectional layer: index `run` of
        spec["weights"], whose float weights verify reads by it)."""
        w_ih, w_hh, b_ih, b_hh = (
            None if n is None else np.asarray(ctx.constant(n).value, np.float64) for n in spec["weights"][run]
        )
        shape = out.shape
        cell_power = cell_scale_power(observed[run]["cell_max"]) if spec["cell"] == "lstm" else 0
        steps, batches = (1, shape[0]) if not spec["sequence"] else shape[:2] if time_major else shape[1::-1]
        return ctx.add_op(
            self.kind,
            node,
            [source],
            [out],
            cell=spec["cell"],
            layer=run,
            time_major=time_major,
            float_node=node.name,
            batches=batches,
            time_steps=steps,
            w_ih=w_ih,
            w_hh=w_hh,
            b_ih=b_ih,
            b_hh=b_hh,
            cell_power=cell_power,
            cell_max=observed[run]["cell_max"],
            tanh_pre_max=observed[run]["tanh_pre_max"],
            stream=False,
            sequence=spec["sequence"],
            last_step_only=False,
            bidirectional=spec["bidirectional"],
            **({"weight_bits": 4} if node.meta.get(INT4_KEY) else {}),
        )

    def _lower_bidirectional(self, ctx, node, spec, x, observed, time_major, sequence_node, shared):
        """Each layer: the forward run on its input, the reverse run on its input reversed in time
        (a copy) with its output reversed back, both concatenated on the features (a copy), as
        PyTorch's bidirectional layer. Both runs write one qparams (the cat then only moves bytes):
        the union of their observed ranges, or the sequence output's for the last layer and for
        all where they are `shared` (the quantize that follows gives them through the copies). A
        last layer whose sequence nothing reads (h_n only) has no flip back and no cat: its output
        is its forward run's. Returns each layer's output, each run's (a reverse run's in its own
        time order), the ops."""
        time_axis = 0 if time_major else 1
        outputs, source, ops, run_outputs = [], x, [], []
        read = any(u.target is operator.getitem and u.args[1] == 0 and u.users for u in node.users)
        for layer in range(spec["layers"]):
            last = layer == spec["layers"] - 1
            hidden = _hidden(ctx, spec["weights"][2 * layer])
            shape = source.shape[:-1] + (hidden,)
            low = min(observed[2 * layer + d]["hidden_min"] for d in (0, 1))
            high = max(observed[2 * layer + d]["hidden_max"] for d in (0, 1))
            qparams = (None, 0) if last or shared else _layer_qparams(low, high, x.dtype)
            name = f"{node.name}_layer{layer}"
            runs = []
            for direction in (0, 1):
                run_in = (
                    source if direction == 0 else _time_flip(ctx, node, source, time_axis, f"{name}_reversed_input")
                )
                out = ctx.graph.add_tensor(
                    Tensor(f"{name}_{'reverse' if direction else 'forward'}", shape, *qparams, dtype=x.dtype)
                )
                ops.append(self._add_run(ctx, node, spec, 2 * layer + direction, run_in, out, observed, time_major))
                run_outputs.append(out)
                if direction == 0:
                    runs.append(out)
                elif read or not last:
                    runs.append(_time_flip(ctx, node, out, time_axis, f"{name}_reverse_in_time"))
            if last and not read:
                outputs.append(runs[0])
                break
            joined = ctx.graph.add_tensor(
                Tensor(name, shape[:-1] + (2 * hidden,), *qparams, source=sequence_node if last else "", dtype=x.dtype)
            )
            ctx.add_op("copy", node, runs, [joined], gather=Gather(torch.cat, ([_Slot(0), _Slot(1)], -1), {}))
            outputs.append(joined)
            source = joined
        for op in ops:
            op.attrs["final_output"] = outputs[-1].name
        return outputs, run_outputs, ops

    def relayout(self, op, graph) -> None:
        """The kernel reads and writes rows in PyTorch order: an input or output the layout pass
        stores otherwise (channels last, next to a Conv1d) goes through a copy."""
        in_torch_order(op, graph, [0], True)

    def finalize(self, op, graph) -> None:
        a = op.attrs
        _take_output_qparams(graph, op.outputs[0], a["final_output"])
        if a["bidirectional"]:
            _give_copies_qparams(graph, op.outputs[0])
        x, out = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        if a["cell"] == "lstm" and not -15 <= a["cell_power"] <= 2:
            raise EdgecError(
                f"{op.source}: the LSTM cell state reaches {2.0 ** (a['cell_power'] + 15):g}; "
                f"edgec's int16 cell state holds |c| <= 128"
            )
        cell_power, n_power = a["cell_power"], None
        if a["cell"] == "gru":
            n_power = linear_tanh_power(a["tanh_pre_max"], out.scale, out.zero_point)
        elif (powers := _held_linear_powers(a, out.scale)) is not None:
            n_power, cell_power = powers
        a["state_cell_power"] = cell_power  # the int16 cell state's scale the kernel runs at (verify reads it)
        _check_held_state(op, graph, out, cell_power)
        a["desc"] = recurrent_desc(
            a["cell"],
            batches=a["batches"],
            time_steps=a["time_steps"],
            time_major=a["time_major"],
            reset_state=not a["stream"] and not _reads_initial_state(op),
            w_ih=a["w_ih"],
            w_hh=a["w_hh"],
            b_ih=a["b_ih"],
            b_hh=a["b_hh"],
            input_scale=x.scale,
            input_zp=x.zero_point,
            hidden_scale=out.scale,
            hidden_zp=out.zero_point,
            cell_power=cell_power,
            last_step_only=a["last_step_only"],
            n_power=n_power,
            weight_bits=a.get("weight_bits", 8),
        )

    def golden(self, op, graph, inputs):
        a = op.attrs
        state = a.get("state")  # streaming: the persistent state, carried across invokes
        if state is None:
            out, _, cell = recurrent_s8(a["desc"], inputs[0], *initial_state(op, inputs))
        else:
            out, state["hidden"], state["cell"] = recurrent_s8(a["desc"], inputs[0], state["hidden"], state["cell"])
            cell = state["cell"]
        out = out.reshape(graph.tensors[op.outputs[0]].shape)
        key = "c_n" if a.get("c_n") is not None else "c_part"
        if a.get(key) is None:
            return out
        cells = [np.asarray(inputs[i], np.int16).ravel() for i in a.get("c_parts") or []] + [cell.ravel()]
        return [out, np.concatenate(cells).reshape(graph.tensors[op.outputs[a[key]]].shape)]

    def state_bytes(self, op) -> int:
        """Streaming: the hidden (int8) and cell (int16, LSTM) state persist between invokes."""
        return _state_size(op) if op.attrs["stream"] else 0

    def scratch_bytes(self, op, graph, target) -> int:
        """The gates' scratch; in whole-sequence mode the state too (after the gates')."""
        return 16 * op.attrs["w_hh"].shape[1] + (0 if op.attrs["stream"] else _align4(_state_size(op)))

    def kernel_function(self, op) -> str:
        return f"edgec_{op.attrs['cell']}_s8"

    def emit(self, op, graph, names) -> CCall:
        a = op.attrs
        p = names.symbol(op, "desc")
        call = descriptor(RECURRENT_DESC, p, a["desc"])
        hidden = a["w_hh"].shape[1]
        elements = a["batches"] * hidden
        scratch = names.scratch(op)
        if a["stream"]:
            base = names.state(op)
        else:
            base = f"({scratch} + {16 * hidden})"
        # c_n returned: the kernel keeps the cell state in that output (the run's row, or its part),
        # which then holds the final one
        cell_buffer = base
        if a.get("c_n") is not None:
            cell_buffer = f"({names.ptr(op.outputs[a['c_n']])} + {2 * elements * a['state_slot']})"
        elif a.get("c_part") is not None:
            cell_buffer = names.ptr(op.outputs[a["c_part"]])
        cell_arg = f"(int16_t *)(void *){cell_buffer}, " if a["cell"] == "lstm" else ""
        hidden_arg = f"({base} + {2 * elements if a['cell'] == 'lstm' else 0})"
        call.code = (
            f"{_initial_state_code(op, names, hidden_arg, cell_buffer, elements)}"
            f"status |= {op.kernel.function}(&{p}, {names.ptr(op.inputs[0])}, {names.ptr(op.outputs[0])}, "
            f"{hidden_arg}, {cell_arg}{scratch});{_cell_parts_code(op, names, elements)}"
        )
        call.scratch_required = RECURRENT_SCRATCH.call(hidden)
        if a["stream"]:  # real zero: the cell state 0, the hidden state its zero point
            cell_reset = f"memset({base}, 0, {2 * elements}); " if a["cell"] == "lstm" else ""
            call.state_reset = f"{cell_reset}memset({hidden_arg}, {a['desc']['output_offset']}, {elements});"
        return call

    def macs(self, op, graph) -> int:
        a = op.attrs
        return int(a["batches"] * a["time_steps"] * (a["w_ih"].size + a["w_hh"].size))


class RecurrentS16(Recurrent):
    """The 16x8 LSTM (int16 activations: --activations int16, --int16-layers): Recurrent's lowering,
    layout and state handling, edgec_lstm_s16's descriptor, golden and call. Always the tables'
    gates (TFLite's 16x8 LSTM; no linear tanh mode: int16 holds the fine steps it was for)."""

    kind = "recurrent_s16"
    targets = frozenset()  # lowered by Recurrent; chosen by edgec.ops.int16_units.select_int16_kernels
    runtime_sources = ("recurrent/edgec_lstm_s16.c",)

    def finalize(self, op, graph) -> None:
        a = op.attrs
        _take_output_qparams(graph, op.outputs[0], a["final_output"])
        x, out = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        if not -15 <= a["cell_power"] <= 2:
            raise EdgecError(
                f"{op.source}: the LSTM cell state reaches {2.0 ** (a['cell_power'] + 15):g}; "
                f"edgec's int16 cell state holds |c| <= 128"
            )
        a["state_cell_power"] = a["cell_power"]
        _check_held_state(op, graph, out, a["cell_power"])
        try:
            a["desc"] = lstm_s16_desc(
                batches=a["batches"],
                time_steps=a["time_steps"],
                time_major=a["time_major"],
                reset_state=not a["stream"] and not _reads_initial_state(op),
                w_ih=a["w_ih"],
                w_hh=a["w_hh"],
                b_ih=a["b_ih"],
                b_hh=a["b_hh"],
                input_scale=x.scale,
                hidden_scale=out.scale,
                cell_power=a["cell_power"],
                last_step_only=a["last_step_only"],
            )
        except ValueError as exc:
            raise EdgecError(f"{op.source}: int16 LSTM: {exc}; keep this layer int8 (--int16-layers)") from None

    def specialize(self, op, graph, target) -> None:
        op.kernel = KernelChoice(
            "edgec_lstm_s16", "int16", "int16 activations (TFLite's 16x8 kernel): portable kernel", unit=self.kind
        )

    def kernel_function(self, op) -> str:
        return "edgec_lstm_s16"

    def golden(self, op, graph, inputs):
        a = op.attrs
        state = a.get("state")
        if state is None:
            out, _, cell = lstm_s16(a["desc"], inputs[0], *initial_state(op, inputs))
        else:
            out, state["hidden"], state["cell"] = lstm_s16(a["desc"], inputs[0], state["hidden"], state["cell"])
            cell = state["cell"]
        out = out.reshape(graph.tensors[op.outputs[0]].shape)
        if a.get("c_n") is None:
            return out
        return [out, cell.reshape(graph.tensors[op.outputs[a["c_n"]]].shape)]

    def state_bytes(self, op) -> int:
        return _state_size(op, 2) if op.attrs["stream"] else 0

    def scratch_bytes(self, op, graph, target) -> int:
        """The gates' scratch; in whole-sequence mode the state too (after the gates')."""
        own = lstm_s16_scratch_bytes(op.attrs["w_ih"].shape[1], op.attrs["w_hh"].shape[1])
        return own + (0 if op.attrs["stream"] else _align4(_state_size(op, 2)))

    def emit(self, op, graph, names) -> CCall:
        a = op.attrs
        p = names.symbol(op, "desc")
        call = descriptor(LSTM_S16_DESC, p, a["desc"])
        hidden = a["w_hh"].shape[1]
        elements = a["batches"] * hidden
        scratch = names.scratch(op)
        own = lstm_s16_scratch_bytes(a["w_ih"].shape[1], hidden)
        base = names.state(op) if a["stream"] else f"({scratch} + {own})"
        cell_buffer = names.ptr(op.outputs[a["c_n"]]) if a.get("c_n") is not None else base
        hidden_buffer = f"({base} + {2 * elements})"
        code = _initial_state_code(op, names, hidden_buffer, cell_buffer, elements, hidden_bytes=2)
        call.code = (
            f"{code}status |= edgec_lstm_s16(&{p}, (const int16_t *)(const void *){names.ptr(op.inputs[0])}, "
            f"(int16_t *)(void *){names.ptr(op.outputs[0])}, (int16_t *)(void *){hidden_buffer}, "
            f"(int16_t *)(void *){cell_buffer}, {scratch});"
        )
        call.scratch_required = LSTM_S16_SCRATCH.call(a["w_ih"].shape[1], hidden)
        if a["stream"]:  # the zero state: all zeros (symmetric int16 hidden, int16 cell)
            call.state_reset = f"memset({base}, 0, {4 * elements});"
        return call


# -- streaming ------------------------------------------------------------------------------------


def recurrent_ops(graph) -> list:
    return [op for op in graph.ops if op.kind == Recurrent.kind]


def with_time_steps(graph, steps: int) -> None:
    """Give a graph whose recurrent layers read a model input directly `steps` time steps: the
    input, every layer's output sequence and the layers' step counts change; what reads the last
    layer must not depend on the sequence length (its last step, h_n), else EdgecError."""
    ops = recurrent_ops(graph)
    if any(op.attrs.get("bidirectional") for op in ops):
        raise EdgecError(
            f"{ops[0].source}: --stream cannot run a bidirectional recurrent layer: its reverse "
            f"direction starts from the end of the whole sequence"
        )
    firsts = [op for op in ops if op.attrs["layer"] == 0]
    for op in firsts:
        if op.inputs[0] not in graph.inputs:
            raise EdgecError(
                f"{op.source}: --stream needs the recurrent layer to read a model input "
                f"[batch, time, features] directly (one frame per invoke)"
            )
    if len(graph.inputs) != len(firsts) or any(len(graph.consumers(name)) != 1 for name in graph.inputs):
        raise EdgecError("--stream needs every model input to be read by one recurrent layer only")
    for op in ops:
        axis = 0 if op.attrs["time_major"] else 1
        names = ([] if op.attrs["last_step_only"] else op.outputs) + (op.inputs if op.attrs["layer"] == 0 else [])
        for name in names:
            tensor = graph.tensors[name]
            if len(tensor.shape) == 3:
                tensor.shape = tensor.shape[:axis] + (steps,) + tensor.shape[axis + 1 :]
        op.attrs["time_steps"] = steps if len(graph.tensors[op.inputs[0]].shape) == 3 else 1


def _reads_other_steps(graph, op, layers: dict) -> bool:
    """Whether copy `op` reads time steps other than the last of the recurrent outputs it reads
    (found on its gathered element ids)."""
    from edgec.ops.movement import gathered_ids

    ids, start = gathered_ids(op, graph), 0
    for name in op.inputs:
        tensor = graph.tensors[name]
        mine = ids[(ids >= start) & (ids < start + tensor.elements)] - start
        start += tensor.elements
        if name in layers:
            layer = layers[name].attrs
            steps = tensor.shape[0 if layer["time_major"] else 1] if len(tensor.shape) == 3 else 1
            step = mine // tensor.shape[-1] // (layer["batches"] if layer["time_major"] else 1) % steps
            if len(mine) and not np.all(step == steps - 1):
                return True
    return False


def _check_reads_last_step(graph, ops) -> None:
    """What reads a recurrent layer's output sequence (other than the next layer) must be a copy
    that reads only its last time step (output[:, -1], h_n): only that step exists per invoke."""
    layers = {op.outputs[0]: op for op in ops}
    for op in graph.ops:
        if op.kind == Recurrent.kind or not set(op.inputs) & set(layers):
            continue
        if op.kind != "copy":
            raise EdgecError(
                f"{op.source}: --stream: {op.kind} reads the whole output sequence of a recurrent "
                f"layer; a streaming model may read only its last step (output[:, -1] or h_n)"
            )
        if _reads_other_steps(graph, op, layers):
            raise EdgecError(
                f"{op.source}: --stream: this reads time steps other than the last of a "
                f"recurrent layer's output; a streaming model may read only the last"
            )


def keep_last_steps(graph) -> None:
    """A last layer whose readers take only its last step (output[:, -1], h_n) writes only that
    step: its output is [B, 1, H], not the whole sequence, in the arena."""
    ops = recurrent_ops(graph)
    layers = {op.outputs[0]: op for op in ops}
    for op in ops:
        out = graph.tensors[op.outputs[0]]
        readers = graph.consumers(op.outputs[0])
        if (
            len(out.shape) != 3
            or op.attrs["time_steps"] == 1
            or op.outputs[0] in graph.outputs
            or not readers
            or any(r.kind != "copy" or _reads_other_steps(graph, r, layers) for r in readers)
        ):
            continue
        axis = 0 if op.attrs["time_major"] else 1
        out.shape = out.shape[:axis] + (1,) + out.shape[axis + 1 :]
        op.attrs["last_step_only"] = True


def make_streaming(graph) -> None:
    """One time step per invoke, the state kept between invokes (in a persistent buffer outside
    the arena in C; in op.attrs["state"] for the golden simulator, reset by reset_state)."""
    ops = recurrent_ops(graph)
    if not ops:
        raise EdgecError("--stream needs a model with a recurrent layer (nn.LSTM, nn.GRU, a cell)")
    if any(_reads_initial_state(op) for op in ops):
        _keep_held_state(graph)
        return
    if any(op.attrs.get("c_n") is not None for op in ops):
        raise EdgecError(
            f"{ops[0].source}: --stream: c_n returned by a layer that starts from zero; give the "
            f"layer h0 and c0 as model inputs to hold its state (the stream then keeps it)"
        )
    _check_reads_last_step(graph, ops)
    with_time_steps(graph, 1)
    for op in recurrent_ops(graph):
        op.attrs["stream"] = True
    reset_state(graph)


def held_state_io(graph) -> list[tuple[str, str | None]]:
    """The state a caller holds, as (model input, model output) pairs: h0 with h_n (the layer's
    output step, or the copy of its last step), c0 with c_n; the output None where the model does
    not return it, the input None (zeros) where it returns a state it is not given. One pair of
    each per layer (its runs share them)."""
    return [pair for _, *pair in _held_pairs(graph)]


def _held_pairs(graph) -> list[tuple]:
    """held_state_io's pairs, each after the runs of its layer: (runs, model input, model output)."""
    pairs = []
    for runs in _layers(graph):
        first, last = runs[0].attrs, runs[-1].attrs
        h_n = next(
            (
                name
                for name in graph.outputs
                if (name == runs[0].outputs[0] and not first["sequence"]) or _is_last_step_copy(graph, name, runs)
            ),
            None,
        )
        h0 = runs[0].inputs[first["h0"]] if first.get("h0") is not None else None
        if h0 is not None and h0 in graph.inputs:
            pairs.append((runs, h0, h_n))
        c0 = runs[0].inputs[first["c0"]] if first.get("c0") is not None else None
        c_n = runs[-1].outputs[last["c_n"]] if last.get("c_n") is not None else None
        if c0 is not None or c_n is not None:
            pairs.append((runs, c0, c_n))
    return pairs


def _layers(graph) -> list[list]:
    """The recurrent ops grouped by the PyTorch layer they come from (its runs, in order)."""
    layers: dict[str, list] = {}
    for op in recurrent_ops(graph):
        layers.setdefault(op.attrs["float_node"], []).append(op)
    return list(layers.values())


def held_state_notes(graph) -> dict[str, str]:
    """What the header says of each model input and output that carries a caller-held state."""
    notes = {}
    for runs, state_in, state_out in _held_pairs(graph):
        tensor = graph.tensors[state_in or state_out]
        what = (
            f"the LSTM cell state (int16, scale 2^{round(math.log2(tensor.scale))})"
            if tensor.dtype == "int16"
            else f"the hidden state (int8, scale {tensor.scale:.9g}, zero point {tensor.zero_point})"
        )
        rows = ""
        if len(runs) > 1:  # [layers * directions, B, H], as PyTorch's h0 / h_n
            layers = len(runs) // (2 if runs[0].attrs["bidirectional"] else 1)
            rows = "; row layer" if layers == len(runs) else "; row 2 * layer + direction"
            rows += f" (of {layers} layers)" if layers == len(runs) else f" (of {layers} layers, 2 directions)"
        if state_in is not None:
            back = f": the previous invoke's output {graph.outputs.index(state_out)}" if state_out else ""
            notes[state_in] = f"{what} the caller holds{back}{rows}"
        if state_out is not None:
            into = f": give it back as input {graph.inputs.index(state_in)}" if state_in else ""
            notes[state_out] = f"{what} after this invoke{into}{rows}"
    return notes


def _is_last_step_copy(graph, name: str, runs: list) -> bool:
    """Whether tensor `name` is h_n of a sequence layer's `runs`: a copy of their outputs' last steps."""
    producer = graph.producer(name)
    return (
        runs[0].attrs["sequence"]
        and producer is not None
        and producer.kind == "copy"
        and producer.inputs == [op.outputs[0] for op in runs]
        and not _reads_other_steps(graph, producer, {op.outputs[0]: op for op in runs})
    )


def _keep_held_state(graph) -> None:
    """--stream of a model whose caller holds the state (h0/c0 inputs, h_n/c_n outputs): each
    invoke runs the layers on one input as the model is written, the state in <name>_state instead
    of the model's state inputs and outputs (dropped: the caller copies nothing; h_n stays an
    output when it is the model's only one). Records the dropped inputs' positions
    (attrs "held_inputs") for the stream's frames."""
    ops = recurrent_ops(graph)
    for op in ops:
        given = [op.inputs[op.attrs[k]] for k in ("h0", "c0") if op.attrs.get(k) is not None]
        if not given or any(name not in graph.inputs for name in given):
            raise EdgecError(
                f"{op.source}: --stream: every recurrent layer of a model that passes its state in "
                f"must take it as model inputs (h0/c0), or none"
            )
    pairs = held_state_io(graph)
    dropped = [graph.inputs.index(name) for name, _ in pairs if name is not None]
    cells = {op.outputs[op.attrs["c_n"]] for op in ops if op.attrs.get("c_n") is not None}
    for name, out in sorted(pairs, key=lambda pair: pair[1] not in cells):  # c_n first: it always goes
        if name is not None:
            graph.inputs.remove(name)
        if out is not None and (out in cells or len(graph.outputs) > 1):
            graph.outputs.remove(out)
    for op in ops:
        a = op.attrs
        op.inputs = op.inputs[:1]
        op.outputs = op.outputs[:1]
        a.update(h0=None, c0=None, c_n=None, c_part=None, c_parts=None, stream=True, held_inputs=sorted(dropped))
    graph.ops = [op for op in graph.ops if op.kind == Recurrent.kind or _is_read(graph, op)]
    graph.remove_unused_tensors()
    reset_state(graph)


def _is_read(graph, op) -> bool:
    return any(name in graph.outputs or graph.consumers(name) for name in op.outputs)


def held_inputs(graph) -> list[int]:
    """A held-state stream's dropped model inputs (positions in the model's), else []."""
    return next((op.attrs["held_inputs"] for op in recurrent_ops(graph) if "held_inputs" in op.attrs), [])


def reset_state(graph) -> None:
    """The golden simulator's streaming state back to zero (what <name>_reset_state() does)."""
    for op in recurrent_ops(graph):
        if op.attrs["stream"]:
            op.attrs["state"] = {"hidden": None, "cell": None}


def _take_output_qparams(graph, name: str, final: str) -> None:
    """A layer output without qparams: an inner layer whose stack's h_n is used takes the last
    layer's; a last layer whose sequence nothing reads takes those of h_n, copied from it (from
    the layer's output, or from a run's: a bidirectional layer's h_n reads its runs)."""
    tensor = graph.tensors[name]
    # A bidirectional stack's last output is a cat that copy fusion may have merged into its reader
    # (y[:, -1]): then the layer's own output leads, through copies, to the quantized one.
    source = graph.tensors.get(final) or tensor
    if not source.quantized:
        quantized = _quantized_through_copies(graph, [source.name, name])
        if quantized is None:
            raise EdgecError(f"recurrent output {final} has no quantization parameters")
        source.scale, source.zero_point = quantized.scale, quantized.zero_point
    if not tensor.quantized:
        tensor.scale, tensor.zero_point = source.scale, source.zero_point


def _quantized_through_copies(graph, names: list[str]):
    """The first quantized tensor that copies of `names` (and copies of those) write, or None."""
    pending = list(names)
    while pending:
        for consumer in graph.consumers(pending.pop(0)):
            if consumer.kind != "copy":
                continue
            out = graph.tensors[consumer.outputs[0]]
            if out.quantized:
                return out
            pending.append(out.name)
    return None


def _give_copies_qparams(graph, name: str) -> None:
    """The copies after a bidirectional run whose layers share one qparams (the flips and the cat
    of an inner layer, which no quantize reaches) take its output's."""
    source, pending = graph.tensors[name], [name]
    while pending:
        for op in graph.consumers(pending.pop()):
            out = graph.tensors[op.outputs[0]]
            if op.kind == "copy" and not out.quantized:
                out.scale, out.zero_point, out.dtype = source.scale, source.zero_point, source.dtype
                pending.append(out.name)


def _reads_initial_state(op) -> bool:
    """Whether the layer starts from a state its caller gives (h0 or c0 a model input)."""
    return op.attrs.get("h0") is not None or op.attrs.get("c0") is not None


def initial_state(op, inputs: list) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The golden's starting (hidden int8, or int16 for the 16x8 LSTM; cell int16) of a layer
    reading its caller's state: h0 / c0 where given, real zero (the hidden zero point, cell 0) for
    the other; (None, None)
    for a layer that starts from zero."""
    a = op.attrs
    if not _reads_initial_state(op):
        return None, None
    shape = (a["batches"], a["w_hh"].shape[1])
    slot = a["state_slot"]
    dtype = np.int16 if is_lstm_s16(a["desc"]) else np.int8
    zero = 0 if is_lstm_s16(a["desc"]) else a["desc"]["output_offset"]  # the 16x8 LSTM's: no zero point
    hidden = inputs[a["h0"]] if a.get("h0") is not None else np.full(shape, zero, dtype)
    cell = inputs[a["c0"]] if a.get("c0") is not None else np.zeros(shape, np.int16)
    rows = (np.asarray(state, kind).reshape(-1, *shape) for state, kind in ((hidden, dtype), (cell, np.int16)))
    return tuple(row[slot if len(row) > 1 else 0] for row in rows)


def _initial_state_code(op, names, hidden: str, cell: str, elements: int, hidden_bytes: int = 1) -> str:
    """The C that puts the caller's h0 / c0 (or real zero for one not given) where the kernel
    keeps the state, before a call with reset_state 0 (the hidden state int8, or int16 at zero
    point 0: hidden_bytes 2)."""
    a = op.attrs
    if a["stream"] or not _reads_initial_state(op):
        return ""
    slot = a["state_slot"]
    zero = 0 if hidden_bytes == 2 else a["desc"]["output_offset"]
    code = (
        f"memcpy({hidden}, {names.ptr(op.inputs[a['h0']])} + {hidden_bytes * elements * slot}, "
        f"{hidden_bytes * elements}); "
        if a.get("h0") is not None
        else f"memset({hidden}, {zero}, {hidden_bytes * elements}); "
    )
    if a["cell"] == "lstm":
        code += (
            f"memcpy({cell}, {names.ptr(op.inputs[a['c0']])} + {2 * elements * slot}, {2 * elements}); "
            if a.get("c0") is not None
            else f"memset({cell}, 0, {2 * elements}); "
        )
    return code


def _cell_parts_code(op, names, elements: int) -> str:
    """The last run of a layer returning c_n: the other runs' final cell states into their rows."""
    a = op.attrs
    if a["stream"] or not a.get("c_parts"):
        return ""
    c_n = names.ptr(op.outputs[a["c_n"]])
    return "".join(
        f" memcpy({c_n} + {2 * elements * row}, {names.ptr(op.inputs[index])}, {2 * elements});"
        for row, index in enumerate(a["c_parts"])
    )


def _held_linear_powers(a: dict, hidden_scale: float) -> tuple[int, int] | None:
    """lstm_linear_powers of a run, or None; runs sharing a held cell state ("state_group") are
    linear only all together, at the coarsest of their cell powers (one scale for c0 and c_n)."""
    group = [lstm_linear_powers(t, c, hidden_scale) for t, c in a.get("state_group") or []]
    own = lstm_linear_powers(a["tanh_pre_max"], a["cell_max"], hidden_scale)
    if own is None or None in group:
        return None
    return own[0], max([own[1]] + [p[1] for p in group])


def _check_held_state(op, graph, out: Tensor, cell_power: int) -> None:
    """h0 must be at the hidden state's qparams (the caller feeds h_n back as h0); c0 and c_n take
    the cell state's int16 scale 2^cell_power the kernel runs at."""
    a = op.attrs
    if a.get("h0") is not None:
        h0 = graph.tensors[op.inputs[a["h0"]]]
        if (h0.scale, h0.zero_point, h0.dtype) != (out.scale, out.zero_point, out.dtype):
            raise EdgecError(
                f"{op.source}: the initial hidden state h0 is quantized ({h0.scale:g}, {h0.zero_point}) "
                f"unlike the hidden state ({out.scale:g}, {out.zero_point}); it must share its qparams"
            )
    for key, names in (("c0", op.inputs), ("c_n", op.outputs), ("c_part", op.outputs)):
        if a.get(key) is not None:
            tensor = graph.tensors[names[a[key]]]
            tensor.scale, tensor.zero_point, tensor.dtype = 2.0**cell_power, 0, "int16"


def _state_size(op, hidden_bytes: int = 1) -> int:
    """The state's bytes: the hidden state (hidden_bytes an element) and an LSTM's int16 cell."""
    elements = op.attrs["batches"] * op.attrs["w_hh"].shape[1]
    return elements * (hidden_bytes + (2 if op.attrs["cell"] == "lstm" else 0))


def _align4(n: int) -> int:
    return (n + 3) // 4 * 4


def _layer_qparams(low: float, high: float, dtype: str) -> tuple[float, int]:
    """The qparams of an inner layer's output (no observer of PT2E's sees it): int8 asymmetric,
    int16 symmetric (max|h| / 32767, zero point 0, as INT16_ACTIVATION_QSPEC's observer)."""
    if dtype == "int16":
        return float(np.float32(max(abs(low), abs(high), 2**-20) / 32767)), 0
    return _asymmetric_qparams(low, high)


def _asymmetric_qparams(low: float, high: float) -> tuple[float, int]:
    """int8 qparams of [low, high] (widened to hold 0), as PT2E's MinMaxObserver chooses them."""
    low, high = min(low, 0.0), max(high, 0.0)
    scale = max((high - low) / 255.0, 2**-20)
    return float(np.float32(scale)), int(np.clip(-128 - round(low / scale), -128, 127))


class Zeros(OpDef):
    """aten.zeros: a recurrent layer's default initial state (a constant; only they read it)."""

    kind = "zeros"
    family = "zeros (a recurrent layer's initial state)"
    targets = frozenset({aten.zeros.default})

    def annotate(self, node) -> None:
        pass

    def lower(self, ctx, node) -> None:
        ctx.float_constant(node, np.zeros(tuple(node.meta["val"].shape), np.float32))


UNITS = (Recurrent(), RecurrentS16(), Zeros())
