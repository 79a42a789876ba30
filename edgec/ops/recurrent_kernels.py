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
"""
from __future__ import annotations

import math

import numpy as np

from edgec.numerics import quantize_multiplier, requantize, wrap_int32

INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1
GATE_INPUT_SCALE = 2.0**-12  # Q3.12: what the sigmoid/tanh tables take
GATE_OUTPUT_SCALE = 2.0**-15  # Q0.15: what they return
GRU_HIDDEN_SCALE = 2.0**-7  # a GRU's hidden state is a convex mix of tanh outputs: |h| <= 1
LSTM_GATES, GRU_GATES = 4, 3  # PyTorch's row blocks: LSTM i, f, g, o; GRU r, z, n
SIGMOID, TANH = 0, 1


def sigmoid_table() -> np.ndarray:
    """256 entries of sigmoid(i / 24) in unsigned 0.16 fixed point, rounded to nearest, the last
    clamped to 65535: the table arm_nn_activation_s16 interpolates (sigmoid_table_uint16).

    Built from the definition here; TFLite's published table differs from this rounding by +1 in
    44 entries (it is not plain rounding), so a gate can differ from TFLite by one Q0.15 step.
    """
    i = np.arange(256, dtype=np.float64)
    return np.minimum(np.floor(65536.0 / (1.0 + np.exp(-i / 24.0)) + 0.5), 65535).astype(np.uint16)


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
    x_part = _matmul_s16(x, desc["input_weights"][rows], desc["input_bias"][rows].astype(np.int64),
                         desc["input_multiplier"][gate], desc["input_shift"][gate], 0)
    h_acc = wrap_int32(desc["hidden_bias"][rows].astype(np.int64)
                       + desc["hidden_weights"][rows].astype(np.int64) @ np.asarray(h, np.int64))
    return x_part, requantize(h_acc, desc["hidden_multiplier"][gate], desc["hidden_shift"][gate])


def lstm_step(desc: dict, x: np.ndarray, h: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One time step of one batch row: x int8 [I], h int8 [H], c int16 [H] -> (h', c').

        gate_k = act_k(sat16(requant(Wx_k x + bx_k) + requant(Wh_k h + bh_k)))   k = i, f, g, o
                 (bx_k = bias_k - zp_x * sum(Wx_k), bh_k = -zp_h * sum(Wh_k); act = sigmoid, tanh for g)
        c' = sat16(requant(f * c, m_fc, s_fc))            (scale 2^-15 * s_c / s_c)
        c' = sat16(requant(i * g, m_ic, s_ic) + c')       (scale 2^-30 / s_c)
        h' = sat8(requant(o * tanh_s16(c', cell_tanh_shift), m_out, s_out) + zp_h)
    """
    gates = []
    for gate in range(LSTM_GATES):
        x_part, h_part = _gate_pre(desc, x, h, gate)
        pre = _sat16(h_part + x_part)
        gates.append(activation_s16(pre, 0, TANH if gate == 2 else SIGMOID, desc["sigmoid_table"]))
    i, f, g, o = gates
    c = _sat16(requantize(f * np.asarray(c, np.int64), desc["forget_cell_multiplier"], desc["forget_cell_shift"]))
    c = _sat16(requantize(i * g, desc["input_cell_multiplier"], desc["input_cell_shift"]) + c)
    t = activation_s16(c, desc["cell_tanh_shift"], TANH, desc["sigmoid_table"])
    h = np.clip(requantize(o * t, desc["output_multiplier"], desc["output_shift"]) + desc["output_offset"], -128, 127)
    return h.astype(np.int8), c.astype(np.int16)


def gru_step(desc: dict, x: np.ndarray, h: np.ndarray) -> np.ndarray:
    """One GRU time step of one batch row (edgec's definition): x int8 [I], h int8 [H] -> h'.

        r, z = sigmoid(sat16(requant(Wx x + bx) + requant(Wh h + bh)))   (bx holds b_i + b_h)
        xn   = sat16(requant(Wx_n x + bx_n))           Q3.12
        hn   = sat16(requant(Wh_n h + bh_n))           Q3.12 (bh_n = b_hn - zp_h * sum(Wh_n))
        n    = tanh(sat16(xn + sat16(requant(r * hn, m_rh, s_rh))))      (r * hn: 2^-15 -> 1)
        h'   = sat8(requant((32768 - z) * n + z * ((h - zp_h) << 8), m_out, s_out) + zp_h)
    The hidden state is int8 with scale 2^-7 (h <= 1 always), so h in Q0.15 is (h - zp_h) << 8;
    the products are Q0.30, |sum| <= 2^30, and requant by 2^-30 / s_h brings h' back to int8.
    """
    table = desc["sigmoid_table"]
    x_r, h_r = _gate_pre(desc, x, h, 0)
    x_z, h_z = _gate_pre(desc, x, h, 1)
    x_n, h_n = _gate_pre(desc, x, h, 2)
    r = activation_s16(_sat16(h_r + x_r), 0, SIGMOID, table)
    z = activation_s16(_sat16(h_z + x_z), 0, SIGMOID, table)
    hn = _sat16(h_n)
    rh = _sat16(requantize(r * hn, desc["forget_cell_multiplier"], desc["forget_cell_shift"]))
    n = activation_s16(_sat16(x_n + rh), 0, TANH, table)
    h_q15 = (np.asarray(h, np.int64) - desc["output_offset"]) << 8
    mixed = (32768 - z) * n + z * h_q15
    out = requantize(mixed, desc["output_multiplier"], desc["output_shift"]) + desc["output_offset"]
    return np.clip(out, -128, 127).astype(np.int8)


def recurrent_s8(desc: dict, x: np.ndarray, hidden: np.ndarray | None = None,
                 cell: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Golden edgec_lstm_s8 / edgec_gru_s8 over a whole sequence (desc["cell"] says which).

    x: int8 [T, B, I] (time_major) or [B, T, I]. hidden int8 [B, H] / cell int16 [B, H]: the state
    before the first step; when desc["reset_state"] (or they are None) it starts at real zero
    (hidden = zp_h, cell = 0). Returns (outputs int8 like x with H features, hidden', cell').
    """
    batches, steps, hidden_size = desc["batches"], desc["time_steps"], desc["hidden_size"]
    x = np.asarray(x, np.int8).reshape((steps, batches, -1) if desc["time_major"] else (batches, steps, -1))
    if desc["reset_state"] or hidden is None:
        hidden = np.full((batches, hidden_size), desc["output_offset"], np.int8)
        cell = np.zeros((batches, hidden_size), np.int16)
    hidden, cell = np.array(hidden, np.int8).reshape(batches, hidden_size), np.array(cell, np.int16).reshape(batches, hidden_size)
    out = np.zeros(x.shape[:2] + (hidden_size,), np.int8)
    for t in range(steps):
        for b in range(batches):
            index = (t, b) if desc["time_major"] else (b, t)
            if desc["cell"] == LSTM_GATES:
                hidden[b], cell[b] = lstm_step(desc, x[index], hidden[b], cell[b])
            else:
                hidden[b] = gru_step(desc, x[index], hidden[b])
            out[index] = hidden[b]
    return out, hidden, cell


# -- descriptors --------------------------------------------------------------------------------

DESC_FIELDS = ("cell", "batches", "time_steps", "input_size", "hidden_size", "time_major", "reset_state",
               "input_weights", "hidden_weights", "input_bias", "hidden_bias", "input_multiplier", "input_shift",
               "hidden_multiplier", "hidden_shift", "forget_cell_multiplier", "forget_cell_shift",
               "input_cell_multiplier", "input_cell_shift", "cell_tanh_shift", "output_multiplier",
               "output_shift", "output_offset", "sigmoid_table")


def quantize_weights(w: np.ndarray, gates: int) -> tuple[np.ndarray, np.ndarray]:
    """Float [gates*H, K] -> int8, symmetric per gate block (TFLite: one tensor per gate) in
    [-127, 127], scale max|w| / 127, rounding half away from zero; returns (int8, scales[gates])."""
    blocks = np.asarray(w, np.float64).reshape(gates, -1, w.shape[-1])
    scales = np.maximum(np.abs(blocks).max(axis=(1, 2)), 2**-20) / 127.0
    scaled = blocks / scales[:, None, None]
    q = np.clip(np.sign(scaled) * np.floor(np.abs(scaled) + 0.5), -127, 127)
    return q.reshape(w.shape).astype(np.int8), scales


def cell_scale_power(max_abs: float) -> int:
    """The int16 cell state's scale is 2^power, the smallest power of two whose int16 range holds
    the calibrated max|c| (TFLite quantizes the cell state to a power-of-two scale), and at least
    2^-15 (|c| <= 1 representable)."""
    return max(math.ceil(math.log2(max(max_abs, 1.0))), 0) - 15


def _multipliers(scales) -> tuple[list[int], list[int]]:
    pairs = [quantize_multiplier(float(s)) for s in scales]
    return [m for m, _ in pairs] + [0] * (4 - len(pairs)), [s for _, s in pairs] + [0] * (4 - len(pairs))


def _folded_bias(bias_real: np.ndarray, scales: np.ndarray, weights: np.ndarray, zero_point: int, in_scale: float) -> np.ndarray:
    """bias / (s_in * s_w) rounded half away, minus zp * sum of the row: the effective bias."""
    gates = len(scales)
    per_row = np.repeat(np.asarray(scales, np.float64), weights.shape[0] // gates) * in_scale
    real = np.asarray(bias_real, np.float64) / per_row
    q = np.sign(real) * np.floor(np.abs(real) + 0.5)
    folded = q - zero_point * weights.astype(np.int64).sum(axis=1)
    return np.clip(folded, -(2**31), 2**31 - 1).astype(np.int32)


def recurrent_desc(cell: str, *, batches: int, time_steps: int, time_major: bool, reset_state: bool,
                   w_ih: np.ndarray, w_hh: np.ndarray, b_ih: np.ndarray | None, b_hh: np.ndarray | None,
                   input_scale: float, input_zp: int, hidden_scale: float, hidden_zp: int,
                   cell_power: int = 0) -> dict:
    """The descriptor of edgec_lstm_s8 (cell "lstm") / edgec_gru_s8 ("gru") from float PyTorch
    weights (weight_ih [G*H, I], weight_hh [G*H, H], biases [G*H] or None) and the qparams of the
    input and hidden state (and the LSTM cell state's scale power); keys = C fields in order."""
    gates = LSTM_GATES if cell == "lstm" else GRU_GATES
    hidden_size = w_hh.shape[1]
    if cell == "gru" and (hidden_scale, hidden_zp) != (GRU_HIDDEN_SCALE, 0):
        raise ValueError(f"a GRU's hidden state is int8 with scale 2^-7, zero point 0, got {hidden_scale}, {hidden_zp}")
    zeros = np.zeros(gates * hidden_size)
    b_ih = zeros if b_ih is None else np.asarray(b_ih, np.float64)
    b_hh = zeros if b_hh is None else np.asarray(b_hh, np.float64)
    wx, sx = quantize_weights(w_ih, gates)
    wh, sh = quantize_weights(w_hh, gates)
    if cell == "lstm":
        x_bias, h_bias = b_ih + b_hh, zeros
    else:  # r and z take both biases on the input side; n keeps b_hn inside r * (W_hn h + b_hn)
        n_rows = slice(2 * hidden_size, 3 * hidden_size)
        x_bias, h_bias = b_ih + b_hh, zeros.copy()
        x_bias[n_rows], h_bias[n_rows] = b_ih[n_rows], b_hh[n_rows]
    in_m, in_s = _multipliers(input_scale * sx / GATE_INPUT_SCALE)
    h_m, h_s = _multipliers(hidden_scale * sh / GATE_INPUT_SCALE)
    if cell == "lstm":
        cell_scale = 2.0**cell_power
        fc_m, fc_s = quantize_multiplier(GATE_OUTPUT_SCALE)  # f * c: 2^-15 * s_c / s_c
        ic_m, ic_s = quantize_multiplier(GATE_OUTPUT_SCALE * GATE_OUTPUT_SCALE / cell_scale)
        tanh_shift = cell_power + 12
    else:
        fc_m, fc_s = quantize_multiplier(GATE_OUTPUT_SCALE * GATE_INPUT_SCALE / GATE_INPUT_SCALE)  # r * hn -> Q3.12
        ic_m, ic_s, tanh_shift = 0, 0, 0
    out_m, out_s = quantize_multiplier(GATE_OUTPUT_SCALE * GATE_OUTPUT_SCALE / hidden_scale)
    return dict(zip(DESC_FIELDS, (
        gates, batches, time_steps, w_ih.shape[1], hidden_size, int(time_major), int(reset_state),
        wx, wh, _folded_bias(x_bias, sx, wx, input_zp, input_scale), _folded_bias(h_bias, sh, wh, hidden_zp, hidden_scale),
        in_m, in_s, h_m, h_s, fc_m, fc_s, ic_m, ic_s, tanh_shift, out_m, out_s, hidden_zp, sigmoid_table())))
