"""Depthwise 2-D convolution with channel multiplier: golden int8 kernel and op unit.

The golden kernel is the specification edgec_depthwise_conv_s8 (runtime_c/src/depthwise/) is
tested against, byte for byte. Arithmetic: docs/numerics.md, "Depthwise".
"""

from __future__ import annotations

from math import lcm

import numpy as np

from edgec.ir import ARENA_ALIGNMENT, InPlace, KernelChoice
from edgec.numerics import INT8_MAX, INT8_MIN
from edgec.ops import int4
from edgec.ops.base import CCall, OpDef, descriptor
from edgec.ops.conv import (
    QUANT_FIELDS,
    as_2d_filter,
    check_conv_args,
    conv_output_stage,
    emit_desc_call,
    finalize_output_stage,
    padded_input,
    tap_view,
)
from edgec.ops.kernel import Field, Scratch, Struct, ints
from edgec.ops.kernel_layout import DSP, MVE, blocked_bias, kernel_isa, packed_choice
from edgec.ops.lut import LUT_CHANNELS_DESC, LUT_SIZE

# The depthwise kernels' descriptor (edgec.ops.kernel); edgec_nn.h's is generated from it.
DEPTHWISE_CONV_DESC = Struct(
    "edgec_depthwise_conv_desc",
    (
        *ints(
            "batches input_h input_w input_c output_h output_w ch_mult kernel_h kernel_w stride_h stride_w pad_top "
            "pad_left dilation_h dilation_w input_offset output_offset act_min act_max",
            ch_mult="output_c = input_c * ch_mult",
            input_offset="-input_zero_point, in [-127, 128]",
            output_offset="output_zero_point, in [-128, 127]",
        ),
        Field("filter", "const int8_t *", "[kernel_h][kernel_w][output_c], or the packed layout"),
        Field("bias", "const int32_t *", "[output_c] or NULL; packed kernels: the folded bias"),
        *QUANT_FIELDS,
    ),
)
STRUCTS = (DEPTHWISE_CONV_DESC,)
# Channels edgec_depthwise_conv_s8_in_place computes per pass (EDGEC_DEPTHWISE_IN_PLACE_CHANNELS in
# edgec_nn.h), each into its own N*Ho*Wo-byte scratch plane; the packed kernels' group too.
IN_PLACE_CHANNELS = 4
# edgec_depthwise_conv_s8_packed's limit on filter rows (EDGEC_DEPTHWISE_PACKED_MAX_K).
PACKED_MAX_K = 16
# Bytes per cached pixel of the packed kernels (EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES, by the build's
# -mcpu): DSP builds cache 4 channels as int16 pairs; Helium and portable C the 4 int8.
PACKED_PIXEL_BYTES = {DSP: 8}
# Groups of 4 channels the packed kernels' row cache holds at once (EDGEC_DEPTHWISE_PACKED_CACHED_GROUPS):
# Helium runs 16 channels a pass where it can.
PACKED_CACHED_GROUPS = {MVE: 4}
# The scratch-size rules of this unit's kernels: edgec_nn.h's macros are generated from these, and
# packed_scratch_bytes evaluates the packed kernels' two.
IN_PLACE_SCRATCH = Scratch(
    "EDGEC_DEPTHWISE_IN_PLACE_SCRATCH_BYTES",
    ("pixels", "c"),
    "((pixels) * ((c) < EDGEC_DEPTHWISE_IN_PLACE_CHANNELS ? (c) : EDGEC_DEPTHWISE_IN_PLACE_CHANNELS))",
)
PACKED_ROW_PIXELS = Scratch(
    "EDGEC_DEPTHWISE_PACKED_ROW_PIXELS",
    ("out_w", "stride_w", "k_w", "dilation_w"),
    "(((out_w)-1) * (stride_w) + ((k_w)-1) * (dilation_w) + 1)",  # spaced as clang-format spaces it
)
PACKED_SCRATCH = Scratch(
    "EDGEC_DEPTHWISE_PACKED_SCRATCH_BYTES",
    ("k_h", "row_pixels"),
    # parenthesized: not read as a cast
    "((k_h) * (row_pixels) * (EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES) * (EDGEC_DEPTHWISE_PACKED_CACHED_GROUPS))",
)
SCRATCH = (IN_PLACE_SCRATCH, PACKED_ROW_PIXELS, PACKED_SCRATCH)


def depthwise_conv2d_s8(
    x: np.ndarray,
    w: np.ndarray,
    bias,
    multiplier,
    shift,
    *,
    input_zp: int,
    output_zp: int,
    stride=(1, 1),
    pad=(0, 0),
    dilation=(1, 1),
    ch_mult: int = 1,
    out_hw,
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
) -> np.ndarray:
    """Golden int8 depthwise conv. x int8 NHWC [N,H,W,C_in], w int8 [1, KH, KW, C_in*ch_mult]
    (output channel ic*ch_mult + m reads input channel ic), bias int32 [C_out] or None,
    multiplier/shift [C_out]; pad = (pad_top, pad_left), bottom/right implied by out_hw.
    Returns int8 [N, Ho, Wo, C_in*ch_mult] (edgec_depthwise_conv_s8 bit for bit)."""
    x = np.asarray(x)
    w = np.asarray(w)
    _, kh, kw, c_out = w.shape
    check_conv_args(
        x, multiplier, shift, bias, c_out, input_zp, output_zp, stride, pad, dilation, out_hw, act_min, act_max
    )
    if w.dtype != np.int8 or w.shape[0] != 1 or ch_mult < 1 or c_out != x.shape[3] * ch_mult:
        raise ValueError(f"int8 filter {w.shape} does not fit C_in={x.shape[3]}, ch_mult={ch_mult}")
    xp = padded_input(x, input_zp, pad, (kh, kw), stride, dilation, out_hw)
    if ch_mult > 1:
        # Output channel ic*ch_mult + m reads input channel ic: repeat each channel ch_mult times.
        xp = np.repeat(xp, ch_mult, axis=3)
    acc = np.zeros((x.shape[0], out_hw[0], out_hw[1], c_out), dtype=np.int64)
    for ky in range(kh):
        for kx in range(kw):
            # int32 products are exact (|w * (x - zp)| <= 128 * 255); the sum is int64.
            acc += tap_view(xp, ky, kx, stride, dilation, out_hw) * w[0, ky, kx].astype(np.int32)
    return conv_output_stage(acc, bias, multiplier, shift, output_zp, act_min, act_max)


def depthwise_conv_s4(desc: dict, x: np.ndarray) -> np.ndarray:
    """Golden edgec_depthwise_conv_s4: int8 NHWC x -> int8 [N, Ho, Wo, C_in * ch_mult]."""
    d = desc
    c_out = d["input_c"] * d["ch_mult"]
    w = int4.unpack_int4(d["filter"], d["kernel_h"] * d["kernel_w"] * c_out).reshape(
        1, d["kernel_h"], d["kernel_w"], c_out
    )
    x = np.asarray(x).reshape(d["batches"], d["input_h"], d["input_w"], d["input_c"])
    return depthwise_conv2d_s8(
        x,
        w,
        d["bias"],
        d["multiplier"],
        d["shift"],
        input_zp=-d["input_offset"],
        output_zp=d["output_offset"],
        stride=(d["stride_h"], d["stride_w"]),
        pad=(d["pad_top"], d["pad_left"]),
        dilation=(d["dilation_h"], d["dilation_w"]),
        ch_mult=d["ch_mult"],
        out_hw=(d["output_h"], d["output_w"]),
        act_min=d["act_min"],
        act_max=d["act_max"],
    )


# -- the op unit (lowered from torch by conv.Conv2d when groups == C_in) ------------------------


AFFINE_LOOKUP = "edgec_lut_channels_s8"  # a per-channel affine through compile-time tables
# A channel's 256-byte table saves about 30 instructions an element on every core (the 1x1
# depthwise costs 34 on the M4, the lookup 4-5): from 64 pixels, at least 7.5 instructions per
# inference for each byte of flash it adds.
AFFINE_LOOKUP_MIN_PIXELS = 64


def _is_affine(op, graph) -> bool:
    """A 1x1, stride-1, unpadded int8 layer with one output channel per input channel: output
    element (p, c) depends on input element (p, c) alone, so the layer is one int8 -> int8 table
    per channel (a BatchNorm no layer absorbs runs as such a layer, passes/fold_batchnorm.py)."""
    a = op.attrs
    return (
        a["ch_mult"] == 1
        and a["weight"].shape[1:3] == (1, 1)
        and tuple(a["stride"]) == (1, 1)
        and not any(a["pad"])
        and graph.tensors[op.inputs[0]].dtype == graph.tensors[op.outputs[0]].dtype == "int8"
    )


def _is_lookup(op) -> bool:
    return op.kernel is not None and op.kernel.function == AFFINE_LOOKUP


def _golden_s8(op, graph, x, out_hw) -> np.ndarray:
    """The int8 layer's golden kernel on `x`, its output `out_hw` pixels."""
    a, x_t, out_t = op.attrs, graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    return depthwise_conv2d_s8(
        x,
        a["weight"],
        a["bias"],
        a["multiplier"],
        a["shift"],
        input_zp=x_t.zero_point,
        output_zp=out_t.zero_point,
        stride=a["stride"],
        pad=a["pad"][:2],
        dilation=a["dilation"],
        ch_mult=a["ch_mult"],
        out_hw=out_hw,
        act_min=a["act_min"],
        act_max=a["act_max"],
    )


def affine_tables(op, graph) -> np.ndarray:
    """int8 [C][256]: channel c's output for each input value -128..127, computed by the layer's
    own golden arithmetic (so the lookup equals it by construction)."""
    channels = op.attrs["weight"].shape[3]
    values = np.arange(INT8_MIN, INT8_MAX + 1, dtype=np.int8)
    x = np.ascontiguousarray(np.broadcast_to(values[:, None], (LUT_SIZE, channels))).reshape(1, 1, LUT_SIZE, channels)
    out = _golden_s8(op, graph, x, (1, LUT_SIZE))  # the layer is 1x1, stride 1, unpadded
    return np.ascontiguousarray(np.asarray(out, np.int8).reshape(LUT_SIZE, channels).T)


def _emit_lookup(op, graph, names) -> CCall:
    out_t = graph.tensors[op.outputs[0]]
    channels = out_t.shape[3]
    p, tables = names.symbol(op, "desc"), names.symbol(op, "tables")
    call = descriptor(LUT_CHANNELS_DESC, p, {"pixels": out_t.elements // channels, "channels": channels})
    call.constants.append(("int8_t", tables, affine_tables(op, graph).ravel()))
    call.code = f"status |= {AFFINE_LOOKUP}(&{p}, {tables}, {names.ptr(op.inputs[0])}, {names.ptr(op.outputs[0])});"
    return call


class DepthwiseConv2d(OpDef):
    kind = "depthwise_conv2d"
    runtime_sources = (
        "depthwise/edgec_depthwise_conv_s8.c",
        "depthwise/edgec_depthwise_conv_s8_packed.c",
        "depthwise/edgec_depthwise_conv_s8_packed_dsp.c",
        "depthwise/edgec_depthwise_conv_s8_packed_dsp_wide.c",
        "depthwise/edgec_depthwise_conv_s8_packed_mve.c",
        "depthwise/edgec_depthwise_conv_s8_packed_portable.c",
    )
    fuses_activation = True
    spatial = True

    def relayout(self, op, graph) -> None:
        weight = as_2d_filter(op.attrs["weight"])  # [C_in*mult, 1, KH, KW] -> [1, KH, KW, C_in*mult]
        op.attrs["weight"] = np.ascontiguousarray(weight.transpose(1, 2, 3, 0))
        op.attrs["ch_mult"] = weight.shape[0] // op.attrs["groups"]

    def finalize(self, op, graph) -> None:
        weight = op.attrs["weight"]  # [1, KH, KW, C_out]
        finalize_output_stage(op, graph, weight.reshape(-1, weight.shape[3]).T)

    def golden(self, op, graph, inputs):
        if int4.is_int4(op):
            return depthwise_conv_s4(op.attrs["desc"], inputs[0]).reshape(graph.tensors[op.outputs[0]].shape)
        return _golden_s8(op, graph, inputs[0], graph.tensors[op.outputs[0]].shape[1:3])

    def specialize(self, op, graph, target) -> None:
        """On cores with the DSP extension or Helium a ch_mult-1 layer runs the packed kernel. A
        per-channel affine (_is_affine) runs through one table per channel made at compile time
        where each channel has at least AFFINE_LOOKUP_MIN_PIXELS pixels and --opt is not size."""
        if int4.is_int4(op):
            return int4.specialize(op, graph, target)
        channels = op.attrs["weight"].shape[3]
        pixels = graph.tensors[op.outputs[0]].elements // channels
        if _is_affine(op, graph) and target.opt != "size" and pixels >= AFFINE_LOOKUP_MIN_PIXELS:
            op.attrs["isa"] = None
            op.kernel = KernelChoice(
                AFFINE_LOOKUP,
                "lookup",
                f"a per-channel affine (1x1, stride 1): {channels} tables made at compile time, "
                f"{LUT_SIZE * channels:,} B of flash (--opt {target.opt})",
            )
            return
        fits = op.attrs["ch_mult"] == 1 and op.attrs["weight"].shape[1] <= PACKED_MAX_K
        isa = op.attrs["isa"] = kernel_isa(target) if fits else None
        op.kernel = packed_choice(
            "edgec_depthwise_conv_s8" + ("" if isa is None else "_packed"),
            isa,
            target,
            op.attrs,
            f"portable kernel: the packed one needs channel multiplier 1 and a filter at most {PACKED_MAX_K} rows high",
        )

    def scratch_bytes(self, op, graph, target) -> int:
        # An int4 layer on the packed kernel: its unpacked filter, then this kernel's row cache.
        isa = op.attrs.get("s4_isa") if int4.is_int4(op) else op.attrs.get("isa")
        if isa is None:
            return 0
        out_w = graph.tensors[op.outputs[0]].shape[2]
        rows = packed_scratch_bytes(
            isa, op.attrs["weight"].shape, out_w, op.attrs["stride"][1], op.attrs["dilation"][1]
        )
        return int4.scratch_bytes(op, rows) if int4.is_int4(op) else rows

    def runtime_sources_of(self, op) -> tuple[str, ...]:
        if _is_lookup(op):
            return ("activation/edgec_lut_s8.c",)
        if int4.is_int4(op):  # edgec_depthwise_conv_s4.c's packed kernel calls the int8 packed one
            return int4.runtime_sources(op) + self.runtime_sources
        return self.runtime_sources

    @staticmethod
    def _rows_call(op, graph) -> str:
        """EDGEC_DEPTHWISE_PACKED_SCRATCH_BYTES for the layer (C): the packed kernel's row cache."""
        a = op.attrs
        _, kh, kw, _ = a["weight"].shape
        wo = graph.tensors[op.outputs[0]].shape[2]
        return PACKED_SCRATCH.call(kh, PACKED_ROW_PIXELS.call(wo, a["stride"][1], kw, a["dilation"][1]))

    def emit(self, op, graph, names) -> CCall:
        if int4.is_int4(op):
            return int4.emit(op, graph, names, self._rows_call(op, graph))
        if _is_lookup(op):
            return _emit_lookup(op, graph, names)
        a = op.attrs
        form = names.in_place_form(op)
        n, ho, wo, c = graph.tensors[op.outputs[0]].shape
        planes = IN_PLACE_SCRATCH.call(n * ho * wo, c)
        if a.get("isa") is None:
            staged = form is not None
            return emit_desc_call(
                DEPTHWISE_CONV_DESC,
                op.kernel.function + ("_in_place" if staged else ""),
                op,
                names,
                depthwise_desc(op, graph, a["weight"], a["bias"]),
                scratch=staged,
                scratch_required=planes if staged else None,
            )
        # The plain packed kernel runs unstaged in place too; the staged form's scratch adds the planes.
        staged = form is not None and form.scratch_bytes != self.scratch_bytes(op, graph, None)
        rows = self._rows_call(op, graph)
        zero_point = graph.tensors[op.inputs[0]].zero_point
        desc = depthwise_desc(
            op,
            graph,
            packed_depthwise_filter(a["weight"]),
            packed_depthwise_bias(a["bias"], a["weight"], zero_point),
        )
        return emit_desc_call(
            DEPTHWISE_CONV_DESC,
            op.kernel.function + ("_in_place" if staged else ""),
            op,
            names,
            desc,
            scratch=True,
            scratch_required=f"{rows} + {planes}" if staged else rows,
        )

    def in_place(self, op, graph, target):
        """With one output channel per input channel (ch_mult 1), output and input element (p, c)
        sit at p*C + c: an output channel overlaps only the same input channel as long as the two
        tensors start a multiple of C bytes apart. The _in_place kernels compute IN_PLACE_CHANNELS
        channels at a time into N*Ho*Wo-byte scratch planes, then scatter them into the output,
        over the input channels they no longer need. The input is tail-aligned (the two end
        together, rounded to a multiple of C and of the alignment): a stride-2 layer's smaller
        output then ends where the expanding 1x1 conv after it ends too, so a chain of in-place
        layers keeps one end and stays compact. The packed kernel first offers to run without the
        planes (see _unstaged)."""
        if op.attrs["ch_mult"] != 1 or int4.is_int4(op):
            return ()
        if _is_lookup(op):
            return (InPlace(0, 0),)  # element i is read before its output is written
        x_t, out_t = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        step = lcm(x_t.shape[3], ARENA_ALIGNMENT)
        n, ho, wo, channels = out_t.shape
        scratch = self.scratch_bytes(op, graph, target)
        staged = InPlace(
            0, (out_t.nbytes - x_t.nbytes) // step * step, n * ho * wo * min(IN_PLACE_CHANNELS, channels) + scratch
        )
        if op.attrs.get("isa") is None:
            return (staged,)
        return (self._unstaged(op, x_t, out_t, step, scratch), staged)

    @staticmethod
    def _unstaged(op, x_t, out_t, step, scratch) -> InPlace:
        """edgec_depthwise_conv_s8_packed itself over its input: it stores output row oy only after
        caching every input row it reads, and reads no input row again once cached (undilated; a
        dilated layer re-reads rows from (oy+1)*stride on). So with the input starting k*C bytes
        after the output, storing row oy must not reach the first input pixel read after it:
        k >= (its last pixel + 1) - that pixel, for every row. Of the safe k the one nearest tail
        alignment is taken, rounded up to a multiple of C and of the alignment."""
        n, h, w, c = x_t.shape
        _, ho, wo, _ = out_t.shape
        kh, stride, pad_top = op.attrs["weight"].shape[1], op.attrs["stride"][0], op.attrs["pad"][0]
        keeps_rows = op.attrs["dilation"][0] == 1 and stride < kh
        needed = out_t.nbytes - x_t.nbytes
        for b in range(n):
            for oy in range(ho if b < n - 1 else ho - 1):
                next_row = (oy * stride + kh if keeps_rows else (oy + 1) * stride) - pad_top
                next_read = (b * h + max(next_row, 0)) * w if next_row < h and oy + 1 < ho else (b + 1) * h * w
                needed = max(needed, ((b * ho + oy + 1) * wo - next_read) * c)
        return InPlace(0, -(-needed // step) * step, scratch)

    def macs(self, op, graph) -> int:
        out = graph.tensors[op.outputs[0]].shape
        return int(np.prod(out) * np.prod(op.attrs["weight"].shape[1:3]))


def packed_depthwise_filter(weight: np.ndarray) -> np.ndarray:
    """A [1, KH, KW, C] filter as edgec_depthwise_conv_s8_packed reads it, flat: C zero-padded to
    a multiple of 4, then per group of 4 channels its KH*KW taps of 4 bytes."""
    _, kh, kw, c = weight.shape
    groups = -(-c // IN_PLACE_CHANNELS)
    padded = np.zeros((kh * kw, groups * IN_PLACE_CHANNELS), dtype=np.int8)
    padded[:, :c] = weight.reshape(kh * kw, c)
    return padded.reshape(kh * kw, groups, IN_PLACE_CHANNELS).transpose(1, 0, 2).reshape(-1)


def packed_depthwise_bias(bias, weight: np.ndarray, input_zero_point: int) -> np.ndarray:
    """The packed kernel's folded bias: bias - zp * the sum of each channel's taps, zero-padded to a
    multiple of 4 channels."""
    return blocked_bias(bias, weight.reshape(-1, weight.shape[3]).T, input_zero_point, IN_PLACE_CHANNELS)


def packed_scratch_bytes(isa: str, weight_shape, out_w: int, stride_w: int, dilation_w: int) -> int:
    """EDGEC_DEPTHWISE_PACKED_SCRATCH_BYTES: a cached input row per filter row."""
    _, kh, kw, _ = weight_shape
    row_pixels = PACKED_ROW_PIXELS.value(out_w, stride_w, kw, dilation_w)
    return PACKED_SCRATCH.value(
        kh,
        row_pixels,
        EDGEC_DEPTHWISE_PACKED_PIXEL_BYTES=PACKED_PIXEL_BYTES.get(isa, 4),
        EDGEC_DEPTHWISE_PACKED_CACHED_GROUPS=PACKED_CACHED_GROUPS.get(isa, 1),
    )


def depthwise_desc(op, graph, weights: np.ndarray, bias: np.ndarray | None) -> dict:
    """The values of a depthwise layer's edgec_depthwise_conv_desc: its geometry and quantization
    from op.attrs, the given filter and bias arrays (op.attrs' own, or the packed layout)."""
    a = op.attrs
    x_t, out_t = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    _, kh, kw, _ = a["weight"].shape
    ints = (
        (*x_t.shape, *out_t.shape[1:3], a["ch_mult"], kh, kw, *a["stride"], *a["pad"][:2], *a["dilation"])
        + (-x_t.zero_point, out_t.zero_point, a["act_min"], a["act_max"])
        + (weights, bias, a["multiplier"], a["shift"])
    )
    return dict(zip(DEPTHWISE_CONV_DESC.names, ints, strict=True))


UNIT = DepthwiseConv2d()
