"""Constants laid out for the Cortex-M DSP (SMLAD) and Helium (MVE) kernels, at compile time.

Those kernels (edgec_conv_s8_dsp/_mve, edgec_fully_connected_s8_dsp/_mve in runtime_c) read a
filter re-laid into the order their inner loops consume it, and a bias with the input offset
folded in. Neither changes the arithmetic: the golden kernels stay the specification.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgec.ir import KernelChoice
from edgec.numerics import wrap_int32

DSP = "dsp"
MVE = "mve"
ISA_NAMES = {DSP: "DSP extension (SMLAD)", MVE: "Helium (MVE)"}


@dataclass(frozen=True)
class RowBlocking:
    """How a micro-kernel walks a [rows, K] filter: `rows` output rows at once, `group` bytes of
    each row per step (a word of 4 int8 for SXTB16/SMLAD, a 16-byte vector for VMLADAVA)."""

    rows: int
    group: int

    def padded_k(self, k: int) -> int:
        return -(-k // self.group) * self.group

    def padded_rows(self, rows: int) -> int:
        return -(-rows // self.rows) * self.rows


def kernel_isa(target) -> str | None:
    """The packed kernel family `target` runs: Helium, else the DSP extension, else None (the
    portable kernels, as on the host, Cortex-M0+ and M3)."""
    if target.mve:
        return MVE
    if target.dsp:
        return DSP
    return None


def packed_choice(
    function: str, isa: str | None, target, attrs: dict, portable_reason: str = "portable kernel"
) -> KernelChoice:
    """The record of a family with packed kernels choosing `function`: the packed one for `isa`
    (with the DSP filter widened to int16 or not where attrs has "wide", and why: --opt and
    attrs["layout_reason"]), else the portable one, for `portable_reason` when the target has a
    packed family."""
    if isa in ISA_NAMES:
        reason = f"packed kernel: {target.name} has the {ISA_NAMES[isa]}"
        if isa == DSP and "wide" in attrs:
            why = f"--opt {target.opt}" + (f": {attrs['layout_reason']}" if "layout_reason" in attrs else "")
            reason += (
                f"; filter widened to int16 ({why}; twice the flash)" if attrs["wide"] else f"; int8 filter ({why})"
            )
        return KernelChoice(function, isa + (" wide" if attrs.get("wide") else ""), reason)
    if not (target.dsp or target.mve):
        portable_reason = f"portable kernel: {target.name} has neither the DSP extension nor Helium"
    return KernelChoice(function, "portable", portable_reason)


def interleave_rows(weights: np.ndarray, blocking: RowBlocking) -> np.ndarray:
    """A [rows, K] int8 filter as the micro-kernel reads it, flat: K zero-padded to a multiple of
    `group`, rows zero-padded to a multiple of `rows`, then per block of `rows` rows, per group of
    `group` taps, each row's `group` bytes in turn."""
    rows, k = weights.shape
    padded = np.zeros((blocking.padded_rows(rows), blocking.padded_k(k)), dtype=np.int8)
    padded[:rows, :k] = weights
    blocks, groups = padded.shape[0] // blocking.rows, padded.shape[1] // blocking.group
    return padded.reshape(blocks, blocking.rows, groups, blocking.group).transpose(0, 2, 1, 3).reshape(-1)


def folded_bias(bias: np.ndarray | None, weights: np.ndarray, input_zero_point: int) -> np.ndarray:
    """bias[o] - zp_in * sum_k w[o, k], wrapped to int32 like the C accumulator: then
    bias + sum w * (x - zp) == folded + sum w * x (mod 2^32) and the kernels skip the offset."""
    sums = weights.reshape(weights.shape[0], -1).astype(np.int64).sum(axis=1)
    base = np.zeros(weights.shape[0], dtype=np.int64) if bias is None else np.asarray(bias, dtype=np.int64)
    return wrap_int32(base - int(input_zero_point) * sums).astype(np.int32)


def blocked_bias(bias: np.ndarray | None, weights: np.ndarray, input_zero_point: int, rows: int) -> np.ndarray:
    """folded_bias, zero-padded like the filter's rows to a multiple of `rows`: a micro-kernel
    block (or a depthwise kernel's channel group) then loads its biases whole."""
    folded = folded_bias(bias, weights, input_zero_point)
    return np.concatenate([folded, np.zeros(-len(folded) % rows, dtype=np.int32)])


def widen_taps(packed: np.ndarray) -> np.ndarray:
    """A DSP-packed filter (groups of 4 int8 taps) as edgec_conv_s8_dsp_wide reads it: each
    group's taps (w0, w1, w2, w3) as the int16 values (w0, w2, w1, w3), the pairs SXTB16 and
    SXTB16 ROR #8 make."""
    return np.asarray(packed, dtype=np.int8).reshape(-1, 4)[:, [0, 2, 1, 3]].astype(np.int16).reshape(-1)


def dsp_channel_table(
    folded: np.ndarray, multiplier: np.ndarray, shift: np.ndarray, output_zero_point: int
) -> np.ndarray:
    """edgec_conv_s8_dsp_wide's channel table: per channel pair, its two folded biases,
    multipliers, round_high = (1 + 2 * zp_out) * 2^(r-2) and r - 1 (r = -shift) of the short
    requantization (edgec_dsp_requant; zeros where a channel does not admit it), so one LDRD and
    one LDM fetch a pair's constants. `folded` is already padded to whole pairs."""
    pairs = len(folded) // 2
    m = np.zeros(2 * pairs, dtype=np.int64)
    s = np.zeros(2 * pairs, dtype=np.int64)
    m[: len(multiplier)], s[: len(shift)] = multiplier, shift
    short = (m >= 1 << 30) & (s <= -2) & (s >= -24)
    r = np.where(short, -s, 2)
    round_high = wrap_int32(np.where(short, (1 + 2 * int(output_zero_point)) * 2 ** (r - 2), 0))
    columns = [folded, np.where(short, m, 0), round_high, np.where(short, r - 1, 0)]
    return (
        np.stack([np.asarray(c, dtype=np.int64).reshape(pairs, 2) for c in columns], axis=1)
        .reshape(-1)
        .astype(np.int32)
    )
