"""The int8 packed convolution kernels' layout (edgec_conv_s8_dsp/_dsp_wide/_mve): their blocking,
scratch rules, Helium's padded window rows and the assembly routines a layer links. The
convolution unit (edgec.ops.conv) and the int4 one (edgec.ops.int4, whose small filters run these
kernels unpacked) both read it.
"""

from __future__ import annotations

import numpy as np

from edgec.ops.kernel import Scratch
from edgec.ops.kernel_layout import DSP, MVE, RowBlocking

# The kernels' scratch-size rules (edgec.ops.conv lists them for edgec_nn.h's macros).
CONV_DSP_SCRATCH = Scratch(
    "EDGEC_CONV_S8_DSP_SCRATCH_BYTES", ("k", "c_in"), "(((c_in) % 4 == 0 ? 24 : 28) * (((k) + 3) / 4))"
)
# edgec_conv_s8_dsp_wide_1x1x8: a band of 24 pixels of 8 bytes (its generic path needs 48 bytes)
CONV_DSP_WIDE_1X1X8_SCRATCH = Scratch("EDGEC_CONV_S8_DSP_WIDE_1X1X8_SCRATCH_BYTES", (), "(8 * 24)")
CONV_MVE_SCRATCH = Scratch("EDGEC_CONV_S8_MVE_SCRATCH_BYTES", ("k",), "(32 * (((k) + 15) / 16))")
# The generic conv's packed kernels (edgec_conv_s8_dsp/_mve): channels per micro-kernel step and
# filter bytes per channel and step.
CONV_BLOCKING = {DSP: RowBlocking(rows=2, group=4), MVE: RowBlocking(rows=4, group=16)}


def mve_padded_runs(weight_shape) -> bool:
    """A 3x3 window whose rows are 8 to 15 taps (KW * C_in: an RGB stem) and C_out a multiple of 4
    (the direct reads' blocks): edgec_conv_s8_mve's filter has each row padded to 16 taps
    (mve_padded_runs in C, the same rule), so a field inside the input is three 16-byte reads."""
    c_out, kh, kw, c_in = weight_shape
    return kh == 3 and 8 <= kw * c_in < 16 and c_out % 4 == 0


def packed_conv_scratch_bytes(isa: str, weight_shape) -> int:
    """EDGEC_CONV_S8_DSP/MVE_SCRATCH_BYTES for an OHWI filter: DSP three receptive fields widened
    to int16, plus one as int8 when C_in is not a multiple of 4; MVE two int8 receptive fields."""
    k = CONV_BLOCKING[isa].padded_k(mve_packed_taps(weight_shape) if isa == MVE else int(np.prod(weight_shape[1:])))
    if isa == DSP:
        return 6 * k + (0 if weight_shape[3] % 4 == 0 else k)
    return 2 * k


def mve_routines(d: dict) -> tuple[str | None, str | None]:
    """The assembly routines edgec_conv_s8_mve runs for a layer (its descriptor's values), named to
    edgec_conv_s8_mve_with so that a model links only those: the choice mve_conv and
    mve_direct_setup make (edgec_conv_s8_mve.c lists the variants). The block routine by the
    groups of 16 taps per block and the output stage (None below 4 output channels: C only); the
    direct-read one when the fields may be read in place (None: never; the C checks the rest)."""
    shift = np.asarray(d["shift"])
    strict = bool((shift < 0).all())
    run_len = d["kernel_w"] * d["input_c"]
    padded = d["kernel_h"] == 3 and 8 <= run_len < 16 and d["output_c"] % 4 == 0  # mve_padded_runs
    groups = 3 if padded else -(-d["kernel_h"] * run_len // 16)
    stage = "_strict" if strict else "_right" if (shift <= 0).all() else ""
    quads = "_quads" if strict and groups // 2 >= 2 else ""
    blocks = f"edgec_conv_mve_blocks_{'odd' if groups % 2 else 'even'}{stage}{quads}"
    return (blocks if d["output_c"] >= 4 else None), _mve_direct_routine(d, strict, run_len, padded)


def _mve_direct_routine(d: dict, strict: bool, run_len: int, padded: bool) -> str | None:
    """mve_direct_layer_make's runs and mve_direct_setup's choice (whether a field lies inside the
    input, inside_x, is left to the C: a routine named but not needed is not run)."""
    kh, kw = d["kernel_h"], d["kernel_w"]
    if not strict or d["output_c"] % 4 or d["batches"] * d["output_h"] * d["output_w"] < 2:
        return None
    contiguous = (kh, kw, d["stride_h"], d["stride_w"], d["pad_top"], d["pad_left"]) == (1, 1, 1, 1, 0, 0)
    contiguous = contiguous and (d["output_h"], d["output_w"]) == (d["input_h"], d["input_w"])
    if contiguous:
        runs, run_groups = 1, -(-run_len // 16)
    elif (run_len % 16 == 0 or padded) and kh in (1, 3) and d["dilation_w"] == 1:
        runs, run_groups = kh, (16 if padded else run_len) // 16
    else:
        return None
    quads = run_groups // 2 >= 2 and run_groups % 2 == 0
    if run_groups == 1 or (run_groups == 3 and runs == 3):
        shape = "single" if run_groups == 1 else "triple"
    else:
        shape = "even" if quads or run_groups % 2 == 0 else "odd"
    return f"edgec_conv_mve_direct_{shape}{'_runs3' if runs == 3 else ''}{'_quads' if quads else ''}"


def mve_packed_taps(weight_shape) -> int:
    """Taps per output channel in edgec_conv_s8_mve's filter: KH * KW * C_in, or KH * 16 where
    mve_padded_runs."""
    return 16 * weight_shape[1] if mve_padded_runs(weight_shape) else int(np.prod(weight_shape[1:]))


def mve_filter_rows(weight: np.ndarray) -> np.ndarray:
    """An OHWI filter as [C_out, K] rows of edgec_conv_s8_mve's taps: each window row padded with
    zeros to 16 taps where mve_padded_runs, else as it is."""
    c_out, kh, kw, c_in = weight.shape
    if not mve_padded_runs(weight.shape):
        return weight.reshape(c_out, -1)
    padded = np.zeros((c_out, kh, 16), dtype=weight.dtype)
    padded[:, :, : kw * c_in] = weight.reshape(c_out, kh, kw * c_in)
    return padded.reshape(c_out, -1)
