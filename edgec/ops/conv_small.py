"""Specialised convolutions with a small receptive field: edgec_conv_s8_small_<KH>x<KW>x<C_in>.

The conv unit (edgec.ops.conv) asks `choose` whether a layer runs one of these instead of the
generic portable kernel: a first convolution of an image model (1-3 input channels, 3x3) or a
pointwise layer of 4-16 channels, on a Cortex-M core without packed kernels (M0+, M3). Each C function has its
window compiled in (runtime_c/src/conv/edgec_conv_s8_small.c), so im2col and the tap loop unroll;
the choice, with its reason, is the op's KernelChoice. Design and figures:
docs/specialised-kernels.md.
"""

from __future__ import annotations

import numpy as np

from edgec.ir import KernelChoice
from edgec.ops.base import CCall, descriptor
from edgec.ops.kernel import Field, Struct, ints
from edgec.ops.kernel_layout import blocked_bias, dsp_channel_table, widen_taps

# The window shapes (kernel_h, kernel_w, input_c) with a C function, edgec_conv_s8_small_<h>x<w>x<c>.
WINDOWS = ((3, 3, 1), (3, 3, 2), (3, 3, 3), (1, 1, 4), (1, 1, 8), (1, 1, 12), (1, 1, 16))

CONV_SMALL_DESC = Struct(
    "edgec_conv_small_desc",
    (
        *ints(
            "batches input_h input_w input_c output_h output_w output_c kernel_h kernel_w stride_h stride_w "
            "pad_top pad_left input_offset act_min act_max"
        ),
        Field("filter", "const int16_t *", doc="[output_c, even][K4]: taps widened, (w0, w2, w1, w3) per group of 4"),
        Field("channel_table", "const int32_t *", doc="8 words per channel pair (edgec_conv_s8_dsp_wide's)"),
    ),
)
STRUCTS = (CONV_SMALL_DESC,)


def window(attrs: dict) -> tuple[int, int, int]:
    """(kernel_h, kernel_w, input_c) of an OHWI conv filter."""
    _, kh, kw, c_in = attrs["weight"].shape
    return int(kh), int(kw), int(c_in)


def short_requantization(attrs: dict) -> bool:
    """Every channel's (multiplier, shift) admits the short requantization the kernel has
    (edgec_dsp_requant_short: multiplier >= 2^30, shift in [-24, -2])."""
    m, s = np.asarray(attrs["multiplier"], np.int64), np.asarray(attrs["shift"], np.int64)
    return bool(np.all((m >= 1 << 30) & (s <= -2) & (s >= -24)))


def choose(attrs: dict, isa: str | None, target) -> KernelChoice | None:
    """The specialised kernel for an int8 layer without a packed kernel (`isa` None: Cortex-M0+,
    M3), or None: ungrouped, undilated, with a window shape of WINDOWS, every channel admitting
    the short requantization. On the DSP extension the generic packed kernel's assembly stays as
    fast or faster (docs/specialised-kernels.md), so it keeps those layers; the host keeps the
    generic portable kernels (the reference the others are tested against; no speed to gain)."""
    if isa is not None or target.is_host or attrs["groups"] != 1 or attrs["dilation"] != (1, 1):
        return None
    if window(attrs) not in WINDOWS:
        return None
    if not short_requantization(attrs):
        return None
    kh, kw, c_in = window(attrs)
    what = "first convolution" if kh > 1 else "pointwise convolution"
    return KernelChoice(
        f"edgec_conv_s8_small_{kh}x{kw}x{c_in}",
        "portable small",
        f"specialised kernel: a {what} with {c_in} input channels ({kh * kw * c_in} taps per output), its "
        f"{kh}x{kw}x{c_in} window compiled in (the generic portable kernel walks the window at run time)",
    )


def wide_filter(weight: np.ndarray) -> np.ndarray:
    """[C_out rounded up to even][K4] int16: each channel's OHWI taps zero-padded to a multiple of
    4, widened in SXTB16's pair order (edgec.ops.kernel_layout.widen_taps); a zero row pairs an
    odd last channel."""
    rows = weight.reshape(weight.shape[0], -1)
    padded = np.zeros((-(-rows.shape[0] // 2) * 2, -(-rows.shape[1] // 4) * 4), dtype=np.int8)
    padded[: rows.shape[0], : rows.shape[1]] = rows
    return widen_taps(padded.reshape(-1))


def layer_desc(attrs: dict, input_shape, output_shape, input_zp: int, output_zp: int) -> dict:
    """The descriptor's values (CONV_SMALL_DESC's fields, in order) of a conv layer."""
    n, h, w, c = (int(v) for v in input_shape)
    kh, kw, _ = window(attrs)
    return {
        "batches": n,
        "input_h": h,
        "input_w": w,
        "input_c": c,
        "output_h": int(output_shape[1]),
        "output_w": int(output_shape[2]),
        "output_c": int(output_shape[3]),
        "kernel_h": kh,
        "kernel_w": kw,
        "stride_h": attrs["stride"][0],
        "stride_w": attrs["stride"][1],
        "pad_top": attrs["pad"][0],
        "pad_left": attrs["pad"][1],
        "input_offset": -input_zp,
        "act_min": attrs["act_min"],
        "act_max": attrs["act_max"],
        "filter": wide_filter(attrs["weight"]),
        "channel_table": dsp_channel_table(
            blocked_bias(attrs["bias"], attrs["weight"], input_zp, 2), attrs["multiplier"], attrs["shift"], output_zp
        ),
    }


def emit(op, graph, names) -> CCall:
    """The call of op.kernel's function with the layer's descriptor."""
    x_t, out_t = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    p = names.symbol(op, "desc")
    call = descriptor(
        CONV_SMALL_DESC, p, layer_desc(op.attrs, x_t.shape, out_t.shape, x_t.zero_point, out_t.zero_point)
    )
    call.code = f"status |= {op.kernel.function}(&{p}, {names.ptr(op.inputs[0])}, {names.ptr(op.outputs[0])});"
    return call
