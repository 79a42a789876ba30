"""int4 weights: fully connected, convolution and depthwise layers whose weights are 4-bit.

A layer's weights are int4 when its quantize node's range lies within [-8, 7] (edgec's quantizer
makes them symmetric per output channel in [-7, 7], as TFLite's int4 scheme; a user's PT2E
program may use the whole [-8, 7]). Lowering records it as op.attrs["weight_bits"] = 4 on the
int8 unit's op (op.kind stays fully_connected / conv2d / depthwise_conv2d), which keeps the
weights unpacked (int8 values in [-8, 7]) for every pass and delegates the kernel choice, emit,
scratch and in-place here (each family keeps its int4 golden beside its int8 one).

Packing (CMSIS-NN's _s4 kernels, TFLite's int4 tensors): the filter in the int8 kernel's order
([C_out][C_in] for fully connected, OHWI for convolution, [KH][KW][C_out] for depthwise) as one
flat stream, element i in byte i / 2, the low nibble first; an odd count leaves the last high
nibble 0. Arithmetic: exactly the int8 kernels' (acc = bias + sum w * (x + input_offset) in int32,
per-channel requantize, offset, clamp), as CMSIS-NN's _s4 kernels compute it; so the goldens
unpack and run the int8 goldens.
"""

from __future__ import annotations

import numpy as np

from edgec.ir import KernelChoice
from edgec.ops import conv_packed  # the int8 packed kernels small filters run on, unpacked
from edgec.ops.base import CCall, descriptor
from edgec.ops.conv_packed import mve_padded_runs, mve_routines, packed_conv_scratch_bytes
from edgec.ops.conv_small import short_requantization
from edgec.ops.kernel import Field, Scratch, Struct, ints
from edgec.ops.kernel_layout import blocked_bias, dsp_channel_table, folded_bias

INT4_MIN, INT4_MAX = -8, 7
# edgec's own quantizer: symmetric, narrow range (zero point 0, -8 never used), as TFLite's.
INT4_QUANT_RANGE = (-7, 7)

KERNELS = {
    "fully_connected": "edgec_fully_connected_s4",
    "conv2d": "edgec_conv_s4",
    "depthwise_conv2d": "edgec_depthwise_conv_s4",
}
SOURCES = {
    "fully_connected": "fc/edgec_fully_connected_s4.c",
    "conv2d": "conv/edgec_conv_s4.c",
    "depthwise_conv2d": "depthwise/edgec_depthwise_conv_s4.c",
}


def _weights(filter_doc: str, channels: str) -> tuple[Field, ...]:
    """The constant fields every int4 descriptor ends with: the packed filter, bias, requantization."""
    return (
        Field("filter", "const int8_t *", doc=f"packed int4 {filter_doc}"),
        Field("bias", "const int32_t *", doc=f"[{channels}] or NULL"),
        Field("multiplier", "const int32_t *", doc=f"[{channels}]"),
        Field("shift", "const int32_t *", doc=f"[{channels}]"),
    )


# The C structs of the int4 kernels (edgec.ops.kernel); edgec_nn.h's are generated from these.
_QUANT = "input_offset output_offset act_min act_max"
_WINDOW = "kernel_h kernel_w stride_h stride_w pad_top pad_left dilation_h dilation_w"
FULLY_CONNECTED_S4_DESC = Struct(
    "edgec_fully_connected_s4_desc",
    (*ints(f"batches input_c output_c {_QUANT}"), *_weights("[output_c][input_c]", "output_c")),
)
CONV_S4_DESC = Struct(
    "edgec_conv_s4_desc",
    (
        *ints(f"batches input_h input_w input_c output_h output_w output_c {_WINDOW} groups {_QUANT}"),
        *_weights("[output_c][kernel_h][kernel_w][input_c / groups]", "output_c"),
    ),
)
DEPTHWISE_CONV_S4_DESC = Struct(
    "edgec_depthwise_conv_s4_desc",
    (
        *ints(f"batches input_h input_w input_c output_h output_w ch_mult {_WINDOW} {_QUANT}"),
        *_weights("[kernel_h][kernel_w][input_c * ch_mult]", "input_c * ch_mult"),
    ),
)
STRUCTS = (FULLY_CONNECTED_S4_DESC, CONV_S4_DESC, DEPTHWISE_CONV_S4_DESC)
FC_DSP_SCRATCH = Scratch("EDGEC_FULLY_CONNECTED_S4_DSP_SCRATCH_BYTES", ("input_c",), "(2 * ((input_c) / 8 * 8))")
FC_MVE_SCRATCH = Scratch("EDGEC_FULLY_CONNECTED_S4_MVE_SCRATCH_BYTES", ("input_c",), "(32 * (((input_c) + 31) / 32))")
# An odd K: two pixels' columns widened with a 0 appended and with one prepended (B = (K + 8) / 8
# blocks each), the filter's last rows padded with 0s (8 * B + 2 * K + 4 bytes), two gathered
# columns (8 * B + 4 each).
CONV_DSP_SCRATCH = Scratch(
    "EDGEC_CONV_S4_DSP_SCRATCH_BYTES",
    ("k",),
    "((k) % 2 ? 88 * (((k) + 8) / 8) + 2 * (k) + 12 : 4 * ((k) / 8 * 8) + 2 * (k))",
)
# An odd K (rows read from their first nibble's byte, K + 1 weights each): two pairs of
# deinterleaved columns of K + 1 inputs, and two gathered columns with a byte before and 16 after.
CONV_MVE_SCRATCH = Scratch(
    "EDGEC_CONV_S4_MVE_SCRATCH_BYTES", ("k",), "((k) % 2 ? 192 * (((k) + 32) / 32) + 32 : 128 * (((k) + 31) / 32))"
)
# edgec_depthwise_conv_s4_packed's unpacked filter (edgec_depthwise_conv_s8_packed's layout: per group
# of 4 channels, C padded, its taps of 4 int8); its row cache follows (the depthwise unit's rule).
DEPTHWISE_FILTER_SCRATCH = Scratch(
    "EDGEC_DEPTHWISE_CONV_S4_FILTER_BYTES", ("taps", "c"), "(4 * (((c) + 3) / 4) * (taps))"
)
# edgec_conv_s4_dsp_unpacked's / _mve_unpacked's filter ahead of the int8 kernel's scratch:
# edgec_conv_s8_dsp_wide's (int16 taps, K padded to a multiple of 4, rows to a pair) and
# edgec_conv_s8_mve's (T taps padded to a multiple of 16, rows to a multiple of 4).
CONV_DSP_UNPACKED_FILTER = Scratch(
    "EDGEC_CONV_S4_DSP_UNPACKED_FILTER_BYTES", ("k", "c_out"), "(4 * (((c_out) + 1) / 2) * (((k) + 3) / 4 * 4))"
)
# edgec_conv_s4_dsp_unpacked_narrow's: edgec_conv_s8_dsp's (int8 taps, K to a multiple of 4, rows to a pair).
CONV_DSP_NARROW_FILTER = Scratch(
    "EDGEC_CONV_S4_DSP_NARROW_FILTER_BYTES", ("k", "c_out"), "(2 * (((c_out) + 1) / 2) * (((k) + 3) / 4 * 4))"
)
CONV_MVE_UNPACKED_FILTER = Scratch(
    "EDGEC_CONV_S4_MVE_UNPACKED_FILTER_BYTES",
    ("taps", "c_out"),
    "(4 * (((c_out) + 3) / 4) * (((taps) + 15) / 16 * 16))",
)
SCRATCH = (
    FC_DSP_SCRATCH,
    FC_MVE_SCRATCH,
    CONV_DSP_SCRATCH,
    CONV_MVE_SCRATCH,
    CONV_DSP_UNPACKED_FILTER,
    CONV_DSP_NARROW_FILTER,
    CONV_MVE_UNPACKED_FILTER,
    DEPTHWISE_FILTER_SCRATCH,
)
# edgec_depthwise_conv_s8_packed's limit on filter rows (EDGEC_DEPTHWISE_PACKED_MAX_K).
DEPTHWISE_PACKED_MAX_K = 16
# A convolution's filter unpacked for the int8 packed kernel, in scratch, at most (bytes):
# MobileNet's RGB stem (8 channels) takes 448 on the DSP path (int16), 384 on Helium; its 1x1
# layers up to 32 -> 64 channels (4,096 on the DSP path) or 64 -> 64 (4,096 on Helium).
UNPACKED_FILTER_MAX = 4096
# conv_unpacked_layout's int8-tap DSP layout (edgec_conv_s8_dsp's filter), where int16 taps pass the above.
DSP_NARROW = "dsp_narrow"
# The DSP and Helium paths' longest rows (their 4096x / 16x sums stay exact; longer fully connected
# rows run the portable loop, longer convolution rows the portable kernel).
MAX_ROW = 65536
STRUCT_OF = {
    "fully_connected": FULLY_CONNECTED_S4_DESC,
    "conv2d": CONV_S4_DESC,
    "depthwise_conv2d": DEPTHWISE_CONV_S4_DESC,
}


def is_int4(op) -> bool:
    return op.attrs.get("weight_bits") == 4


def weight_bits(quant_range: tuple[int, int] | None) -> int:
    """4 for a weight whose quantize range lies within int4's, else 8."""
    return 4 if quant_range is not None and quant_range[0] >= INT4_MIN and quant_range[1] <= INT4_MAX else 8


def pack_int4(values: np.ndarray) -> np.ndarray:
    """int8 values in [-8, 7] (any shape, read flat in C order) as CMSIS-NN's packed int4 bytes:
    element i in byte i // 2, low nibble first; (count + 1) // 2 bytes, as int8."""
    flat = np.asarray(values).ravel()
    if flat.dtype != np.int8 or flat.min(initial=0) < INT4_MIN or flat.max(initial=0) > INT4_MAX:
        raise ValueError("pack_int4 needs int8 values in [-8, 7]")
    nibbles = np.zeros(flat.size + flat.size % 2, dtype=np.uint8)
    nibbles[: flat.size] = flat.astype(np.uint8) & 0x0F
    return (nibbles[0::2] | (nibbles[1::2] << 4)).view(np.int8)


def unpack_int4(packed: np.ndarray, count: int) -> np.ndarray:
    """The first `count` int4 values of packed bytes, sign-extended to int8."""
    raw = np.asarray(packed).view(np.uint8)
    if raw.size != (count + 1) // 2:
        raise ValueError(f"{count} int4 values take {(count + 1) // 2} bytes, got {raw.size}")
    nibbles = np.empty(raw.size * 2, dtype=np.uint8)
    nibbles[0::2], nibbles[1::2] = raw & 0x0F, raw >> 4
    return ((nibbles[:count].astype(np.int16) ^ 8) - 8).astype(np.int8)


# -- descriptors (the dicts edgec.ops.base.descriptor emits; field order = the C structs') ------


def _quant_fields(a: dict) -> dict:
    return {
        "bias": None if a["bias"] is None else np.asarray(a["bias"], np.int32),
        "multiplier": np.asarray(a["multiplier"], np.int32),
        "shift": np.asarray(a["shift"], np.int32),
    }


def fully_connected_s4_desc(a: dict, input_zp: int, output_zp: int, batches: int) -> dict:
    output_c, input_c = a["weight"].shape
    return {
        "batches": batches,
        "input_c": input_c,
        "output_c": output_c,
        "input_offset": -input_zp,
        "output_offset": output_zp,
        "act_min": a["act_min"],
        "act_max": a["act_max"],
        "filter": pack_int4(a["weight"]),
        **_quant_fields(a),
    }


def conv_s4_desc(a: dict, input_shape, output_shape, input_zp: int, output_zp: int) -> dict:
    n, h, w, c = input_shape
    c_out, kh, kw, _ = a["weight"].shape
    return {
        "batches": n,
        "input_h": h,
        "input_w": w,
        "input_c": c,
        "output_h": output_shape[1],
        "output_w": output_shape[2],
        "output_c": c_out,
        "kernel_h": kh,
        "kernel_w": kw,
        "stride_h": a["stride"][0],
        "stride_w": a["stride"][1],
        "pad_top": a["pad"][0],
        "pad_left": a["pad"][1],
        "dilation_h": a["dilation"][0],
        "dilation_w": a["dilation"][1],
        "groups": a["groups"],
        "input_offset": -input_zp,
        "output_offset": output_zp,
        "act_min": a["act_min"],
        "act_max": a["act_max"],
        "filter": pack_int4(a["weight"]),
        **_quant_fields(a),
    }


def depthwise_conv_s4_desc(a: dict, input_shape, output_shape, input_zp: int, output_zp: int) -> dict:
    n, h, w, c = input_shape
    _, kh, kw, _ = a["weight"].shape
    return {
        "batches": n,
        "input_h": h,
        "input_w": w,
        "input_c": c,
        "output_h": output_shape[1],
        "output_w": output_shape[2],
        "ch_mult": a["ch_mult"],
        "kernel_h": kh,
        "kernel_w": kw,
        "stride_h": a["stride"][0],
        "stride_w": a["stride"][1],
        "pad_top": a["pad"][0],
        "pad_left": a["pad"][1],
        "dilation_h": a["dilation"][0],
        "dilation_w": a["dilation"][1],
        "input_offset": -input_zp,
        "output_offset": output_zp,
        "act_min": a["act_min"],
        "act_max": a["act_max"],
        "filter": pack_int4(a["weight"]),
        **_quant_fields(a),
    }


# -- what the int8 units delegate to for an int4 op ------------------------------------------------


def layer_desc(op, graph) -> dict:
    """The descriptor of int4 op `op` (built once, after finalize, in `specialize`)."""
    x_t, out_t = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    a = op.attrs
    if op.kind == "fully_connected":
        return fully_connected_s4_desc(a, x_t.zero_point, out_t.zero_point, x_t.elements // x_t.shape[-1])
    build = conv_s4_desc if op.kind == "conv2d" else depthwise_conv_s4_desc
    return build(a, x_t.shape, out_t.shape, x_t.zero_point, out_t.zero_point)


def specialize(op, graph, target) -> None:
    """No packed int8 layout, no widened filter: the filter stays CMSIS-NN's packing. A fully
    connected or convolution layer whose rows have an even length (K) runs the Helium kernel
    (`_mve`) on Helium cores, with K of at least 8 the DSP one (`_dsp`) on cores with the DSP
    extension; an ungrouped convolution of odd K either too (each row read from the byte of its
    first nibble against the column with a 0 appended or prepended); a depthwise layer
    depthwise_fits, on either, edgec_depthwise_conv_s4_packed (the filter unpacked per call into
    the int8 packed kernel's layout) (op.attrs["s4_isa"]); the rest the portable kernels. With
    --opt auto or speed, a convolution of a small filter (conv_unpacked_layout) is unpacked per
    call for the int8 packed kernel instead (op.attrs["s4_unpacked"]: the layout)."""
    op.attrs["isa"], op.attrs["wide"] = None, False
    op.attrs["desc"] = desc = layer_desc(op, graph)
    isa = None
    if op.kind == "depthwise_conv2d":
        isa = ("mve" if target.mve else "dsp" if target.dsp else None) if depthwise_fits(desc) else None
    elif row_length(desc) % 2 == 0 and row_length(desc) <= MAX_ROW:
        isa = "mve" if target.mve else "dsp" if target.dsp and row_length(desc) >= 8 else None
    elif op.kind == "conv2d" and desc["groups"] == 1 and row_length(desc) <= MAX_ROW:
        isa = "mve" if target.mve else "dsp" if target.dsp else None
    op.attrs["s4_isa"] = isa
    # --opt size keeps the filter packed: the int8 packed kernel it would link is 6-8 KiB of code
    op.attrs["s4_unpacked"] = unpacked = (
        conv_unpacked_layout(desc, isa) if op.kind == "conv2d" and isa is not None and target.fast_layouts else None
    )
    core = {None: "", "dsp": "DSP extension (SMLAD)", "mve": "Helium"}[isa]
    if op.kind == "depthwise_conv2d" and isa is not None:
        function = KERNELS[op.kind] + "_packed"
        reason = f"int4 weights, CMSIS-NN's s4 packing, unpacked per call for the int8 packed depthwise kernel; {core}"
    elif unpacked:
        function = f"{KERNELS[op.kind]}_{isa}_unpacked" + ("_narrow" if unpacked == DSP_NARROW else "")
        int8_kernel = {
            "dsp": "edgec_conv_s8_dsp_wide",
            DSP_NARROW: "edgec_conv_s8_dsp",
            "mve": "edgec_conv_s8_mve_with",
        }[unpacked]
        reason = f"int4 weights, CMSIS-NN's s4 packing, a small filter unpacked per call for {int8_kernel}; {core}"
    else:
        function = KERNELS[op.kind] + ("" if isa is None else f"_{isa}")
        reason = "int4 weights, CMSIS-NN's s4 packing" + ("" if isa is None else f"; {core}")
    op.kernel = KernelChoice(function, "int4" + ("" if isa is None else f" {isa}"), reason)


def conv_unpacked_taps(desc: dict, isa: str) -> int:
    """Taps a row of the int8 packed kernel's filter has before its own padding to a group: K, or
    on Helium 48 where edgec_conv_s8_mve pads each window row to 16 (mve_padded_runs)."""
    shape = (desc["output_c"], desc["kernel_h"], desc["kernel_w"], desc["input_c"])
    return 48 if isa == "mve" and mve_padded_runs(shape) else row_length(desc)


def conv_unpacked_filter_bytes(desc: dict, layout: str) -> int:
    """EDGEC_CONV_S4_{DSP,MVE}_UNPACKED_FILTER_BYTES, EDGEC_CONV_S4_DSP_NARROW_FILTER_BYTES:
    edgec_conv_s8_dsp_wide's filter (layout "dsp": int16 taps, K padded to a multiple of 4, rows to
    a pair), edgec_conv_s8_dsp's (DSP_NARROW: the same in int8) or edgec_conv_s8_mve's ("mve": taps
    padded to 16, rows to 4)."""
    taps, rows = conv_unpacked_taps(desc, layout), desc["output_c"]
    if layout != "mve":
        return (4 if layout == "dsp" else 2) * -(-rows // 2) * -(-taps // 4) * 4
    return 4 * -(-rows // 4) * -(-taps // 16) * 16


def conv_unpacked_layout(desc: dict, isa: str) -> str | None:
    """The layout an ungrouped convolution's filter is unpacked to once per call, for the int8
    packed kernel to run the layer (edgec_conv_s4_{dsp,mve}_unpacked[_narrow]), where it takes at
    most UNPACKED_FILTER_MAX bytes of scratch: RGB and one-channel stems, the first pointwise
    layers, a 3x3 of few channels. The int8 kernel has none of the int4 paths' per-pixel costs on
    short rows (a block of 32 or 8 barely filled, a gather and deinterleave per pixel pair). On the
    DSP path int16 taps ("dsp", edgec_conv_s8_dsp_wide: the faster kernel), else int8 ones
    (DSP_NARROW, edgec_conv_s8_dsp: half the bytes). None: the filter stays packed (the odd-K
    walk, or the even-K rows). On the DSP path an even K also needs every channel's short
    requantization (shift -2 .. -24), which the int8 kernel's assembly needs, where the int4 rows
    take shift -1 too (int4 layers, their weight scales ~16x int8's, often have it: DS-CNN's first
    pointwise layer ran 2.4x slower unpacked); and a 1x1 layer of 8 input channels keeps the rows:
    its int8 layers have a band routine of their own (edgec_conv_s8_dsp_wide_1x1x8), the wide
    kernel's general path takes 8.8 instructions a MAC there (MobileNetV1 0.25's first pointwise
    layer), the int4 rows 4.9."""
    if desc["groups"] != 1:
        return None
    if isa == "dsp" and row_length(desc) % 2 == 0:
        pointwise8 = desc["kernel_h"] == desc["kernel_w"] == 1 and desc["input_c"] == 8
        if pointwise8 or not short_requantization(desc):
            return None
    layouts = ("dsp", DSP_NARROW) if isa == "dsp" else (isa,)
    return next((x for x in layouts if conv_unpacked_filter_bytes(desc, x) <= UNPACKED_FILTER_MAX), None)


def depthwise_fits(desc: dict) -> bool:
    """edgec_depthwise_conv_s4_packed's shapes (edgec_depthwise_conv_s8_packed's): channel
    multiplier 1, a filter at most DEPTHWISE_PACKED_MAX_K rows high."""
    return desc["ch_mult"] == 1 and desc["kernel_h"] <= DEPTHWISE_PACKED_MAX_K


def row_length(desc: dict) -> int:
    """Weights per output channel of a fully connected or convolution descriptor."""
    if "kernel_h" in desc:
        return desc["kernel_h"] * desc["kernel_w"] * desc["input_c"] // desc["groups"]
    return desc["input_c"]


def mve_folded_bias(desc: dict) -> np.ndarray:
    """The Helium kernels' bias: bias[o] + input_offset * sum of row o's weights, wrapped to int32."""
    rows, length = desc["output_c"], row_length(desc)
    weights = unpack_int4(desc["filter"], rows * length).reshape(rows, length)
    return folded_bias(desc["bias"], weights, -desc["input_offset"])


def mve_desc(desc: dict) -> dict:
    """The descriptor a Helium kernel takes: the input offset folded into the bias."""
    return {**desc, "bias": mve_folded_bias(desc)}


def depthwise_packed_desc(desc: dict) -> dict:
    """edgec_depthwise_conv_s4_packed's descriptor: edgec_depthwise_conv_s8_packed's folded bias
    (bias - zp * the sum of each channel's taps, zero-padded to a multiple of 4 channels)."""
    taps, channels = desc["kernel_h"] * desc["kernel_w"], desc["input_c"]
    weights = unpack_int4(desc["filter"], taps * channels).reshape(taps, channels).T
    return {**desc, "bias": blocked_bias(desc["bias"], weights, -desc["input_offset"], 4)}


def depthwise_filter_bytes(desc: dict) -> int:
    """EDGEC_DEPTHWISE_CONV_S4_FILTER_BYTES: the unpacked filter at the start of the scratch."""
    return 4 * -(-desc["input_c"] // 4) * desc["kernel_h"] * desc["kernel_w"]


def scratch_bytes(op, row_cache: int = 0) -> int:
    """The DSP path's widened input column, the Helium path's deinterleaved one; a convolution's
    also its gathered receptive fields (two pixels' of each; Helium: whole blocks of 32), or for an
    unpacked filter the int8 packed kernel's filter and scratch; a packed
    depthwise layer's unpacked filter and the int8 kernel's `row_cache` (the depthwise unit's rule)."""
    isa = op.attrs.get("s4_isa")
    if op.kind == "depthwise_conv2d":
        return 0 if isa is None else depthwise_filter_bytes(op.attrs["desc"]) + row_cache
    desc = op.attrs["desc"]
    k = row_length(desc)
    layout = op.attrs.get("s4_unpacked")
    if layout:  # the unpacked filter, then EDGEC_CONV_S8_{DSP,MVE}_SCRATCH_BYTES
        shape = (desc["output_c"], desc["kernel_h"], desc["kernel_w"], desc["input_c"])
        return conv_unpacked_filter_bytes(desc, layout) + packed_conv_scratch_bytes(isa, shape)
    if op.kind == "conv2d" and isa == "mve" and k % 2:  # an odd K's two column pairs (K + 1 inputs)
        return 192 * ((k + 32) // 32) + 32
    if op.kind == "conv2d" and isa == "dsp" and k % 2:  # two widened columns, the filter's end, one column
        return 88 * ((k + 8) // 8) + 2 * k + 12
    if op.kind == "conv2d":  # two pixels' columns
        return {None: 0, "dsp": 4 * (k // 8 * 8) + 2 * k, "mve": 128 * ((k + 31) // 32)}[isa]
    return {None: 0, "dsp": 2 * (k // 8 * 8), "mve": 32 * ((k + 31) // 32)}[isa]


_SCRATCH_OF = {
    ("fully_connected", "dsp"): FC_DSP_SCRATCH,
    ("fully_connected", "mve"): FC_MVE_SCRATCH,
    ("conv2d", "dsp"): CONV_DSP_SCRATCH,
    ("conv2d", "mve"): CONV_MVE_SCRATCH,
}


def emit(op, graph, names, row_cache: str = "") -> CCall:
    """The call; a packed depthwise layer's scratch adds `row_cache` (the int8 kernel's rule, C)."""
    p = names.symbol(op, "desc")
    isa = op.attrs.get("s4_isa")
    desc = op.attrs["desc"]
    args = f"&{p}, {names.ptr(op.inputs[0])}, {names.ptr(op.outputs[0])}"
    if isa is None:
        call = descriptor(STRUCT_OF[op.kind], p, desc)
        call.code = f"status |= {op.kernel.function}({args});"
        return call
    if op.kind == "depthwise_conv2d":
        call = descriptor(STRUCT_OF[op.kind], p, depthwise_packed_desc(desc))
        call.code = f"status |= {op.kernel.function}({args}, (int8_t *){names.scratch(op)});"
        taps = desc["kernel_h"] * desc["kernel_w"]
        call.scratch_required = f"{DEPTHWISE_FILTER_SCRATCH.call(taps, desc['input_c'])} + {row_cache}"
        return call
    if op.attrs.get("s4_unpacked"):
        return _emit_unpacked(op, names, p, args)
    call = descriptor(STRUCT_OF[op.kind], p, mve_desc(desc) if isa == "mve" else desc)
    scratch_type = "int16_t" if isa == "dsp" else "int8_t"
    call.code = f"status |= {op.kernel.function}({args}, ({scratch_type} *){names.scratch(op)});"
    call.scratch_required = _SCRATCH_OF[op.kind, isa].call(row_length(desc))
    return call


def unpacked_desc(desc: dict, layout: str) -> dict:
    """edgec_conv_s4_{dsp,mve}_unpacked[_narrow]'s descriptor: the bias the int8 packed kernel
    takes, folded over the unpacked rows (edgec_conv_s8_dsp_wide's channel table; edgec_conv_s8_dsp's
    folded bias, zero-padded to a pair, edgec_conv_s8_mve's to a multiple of 4)."""
    rows, length = desc["output_c"], row_length(desc)
    weights = unpack_int4(desc["filter"], rows * length).reshape(rows, length)
    zero_point = -desc["input_offset"]
    if layout != "dsp":
        return {**desc, "bias": blocked_bias(desc["bias"], weights, zero_point, 4 if layout == "mve" else 2)}
    folded = blocked_bias(desc["bias"], weights, zero_point, 2)
    return {**desc, "bias": dsp_channel_table(folded, desc["multiplier"], desc["shift"], desc["output_offset"])}


def _emit_unpacked(op, names, p: str, args: str) -> CCall:
    """edgec_conv_s4_{dsp,mve}_unpacked's call: Helium's names the int8 kernel's routines
    (edgec.ops.conv_packed.mve_routines), so that only those are linked."""
    isa, layout, desc = op.attrs["s4_isa"], op.attrs["s4_unpacked"], op.attrs["desc"]
    call = descriptor(STRUCT_OF[op.kind], p, unpacked_desc(desc, layout))
    scratch = f"(int8_t *){names.scratch(op)}"
    taps = conv_unpacked_taps(desc, isa)
    if isa == "dsp":
        call.code = f"status |= {op.kernel.function}({args}, {scratch});"
        kernel = conv_packed.CONV_DSP_SCRATCH.call(row_length(desc), desc["input_c"])
        filter_bytes = CONV_DSP_UNPACKED_FILTER if layout == "dsp" else CONV_DSP_NARROW_FILTER
        call.scratch_required = f"{filter_bytes.call(row_length(desc), desc['output_c'])} + {kernel}"
        return call
    routines = ", ".join(f"&{r}" if r else "NULL" for r in mve_routines(desc))
    data = args.split(", ", 1)[1]
    call.code = f"status |= {op.kernel.function}(&{p}, {routines}, {data}, {scratch});"
    call.scratch_required = (
        f"{CONV_MVE_UNPACKED_FILTER.call(taps, desc['output_c'])} + {conv_packed.CONV_MVE_SCRATCH.call(taps)}"
    )
    return call


def runtime_sources(op) -> tuple[str, ...]:
    return (SOURCES[op.kind],)
