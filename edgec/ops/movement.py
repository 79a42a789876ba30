"""Data movement and reductions: golden int8 kernels and the descriptors of their C kernels.

Data movement changes where bytes sit, never their values (so input and output share qparams):
  - a generic strided copy (permute, slice with any step, cat, expand, channel shuffle, flip),
    runtime_c/src/movement/edgec_movement_s8.c, edgec_copy_s8;
  - constant padding of any rank, edgec_pad_s8 (same file);
  - nearest upsampling by integer factors, edgec_upsample_nearest_s8 (same file);
  - bilinear resizing, TFLite's integer RESIZE_BILINEAR, edgec_resize_bilinear_s8.c.
Reductions over any set of axes: max/min of raw int8 and TFLite Micro's int8 SUM/MEAN
(requantizing), runtime_c/src/movement/edgec_reduce_s8.c.

Each C kernel takes one descriptor struct; `<kernel>_desc(...)` here returns its field values as a
dict whose keys are the struct's field names in declaration order (fixed-size array fields as
tuples of `rank` ints, the rest of the C array being zero; pointer fields as numpy arrays), and
the golden function takes that same dict, so C and golden provably run on the same constants.
Tensors are flat contiguous buffers described by the descriptor's dims and strides; strides and
offsets are in elements (= bytes, int8).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.fx import Node
from torchao.quantization.pt2e.quantizer import SharedQuantizationSpec

from edgec.errors import EdgecError
from edgec.frontend.export import source_line
from edgec.frontend.torch_ops import (
    COPIES,
    INDEXED_COPIES,
    MULTI_OUTPUT_COPIES,
    NEAREST_RESIZES,
    REDUCTIONS,
    RESIZES,
    aten,
)
from edgec.ir import Op, Tensor, same_bytes, to_stored, to_torch_order
from edgec.numerics import (
    INT8_MAX,
    INT8_MIN,
    activation_bounds,
    quantize_multiplier,
    requantize,
    round_half_away,
    saturate_int8,
    wrap_int32,
)
from edgec.ops.base import CCall, OpDef, descriptor
from edgec.ops.kernel import Const, Field, Struct, ints
from edgec.ops.qspec import ACTIVATION_QSPEC, activation_inputs, annotate, annotate_shared

MAX_DIMS = 6  # EDGEC_MAX_DIMS: the rank of a descriptor after simplification

# The C structs of this unit's kernels (edgec.ops.kernel); edgec_nn.h's are generated from these.
MOVEMENT_DIMS = Const("EDGEC_MAX_DIMS", MAX_DIMS)
COPY_DESC = Struct(
    "edgec_copy_desc",
    (
        *ints("rank"),
        Field("dims", count=MOVEMENT_DIMS),
        Field("input_strides", count=MOVEMENT_DIMS),
        Field("output_strides", count=MOVEMENT_DIMS),
        *ints("input_start output_start"),
        Field("input_elements", doc="size of the input buffer"),
        Field("output_elements", doc="size of the output buffer"),
    ),
)
PAD_DESC = Struct(
    "edgec_pad_desc",
    (
        *ints("rank"),
        Field("input_dims", count=MOVEMENT_DIMS),
        Field("pad_before", count=MOVEMENT_DIMS),
        Field("pad_after", count=MOVEMENT_DIMS),
        *ints("fill"),
    ),
)
UPSAMPLE_NEAREST_DESC = Struct(
    "edgec_upsample_nearest_desc", (*ints("batches input_h input_w channels scale_h scale_w"),)
)
RESIZE_BILINEAR_DESC = Struct(
    "edgec_resize_bilinear_desc",
    (
        *ints("batches input_h input_w channels output_h output_w"),
        Field("y_table", "const int16_t *", doc="output_h * 3"),
        Field("x_table", "const int16_t *", doc="output_w * 3"),
    ),
)
REDUCE_DESC = Struct(
    "edgec_reduce_desc",
    (
        *ints("op kept_rank"),
        Field("kept_dims", count=MOVEMENT_DIMS),
        Field("kept_strides", count=MOVEMENT_DIMS),
        *ints("reduced_rank"),
        Field("reduced_dims", count=MOVEMENT_DIMS),
        Field("reduced_strides", count=MOVEMENT_DIMS),
        *ints("sum_offset multiplier shift"),
        Field("output_offset", doc="output zero point (sum)"),
        *ints("act_min act_max"),
    ),
)
STRUCTS = (
    COPY_DESC,
    PAD_DESC,
    UPSAMPLE_NEAREST_DESC,
    RESIZE_BILINEAR_DESC,
    REDUCE_DESC,
)


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Element strides of a C-contiguous tensor of `shape`."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= int(size)
    return tuple(reversed(strides))


def _check_shape(shape: Sequence[int]) -> tuple[int, ...]:
    shape = tuple(int(d) for d in shape)
    if any(d < 1 for d in shape):
        raise ValueError(f"every dimension must be at least 1, got {list(shape)}")
    return shape


# -- strided copy ---------------------------------------------------------------------------------


def simplify_copy(dims, input_strides, output_strides) -> tuple[list[int], list[int], list[int]]:
    """The same element mapping in the fewest, longest loops.

    Drops size-1 dims; orders the dims by decreasing output stride (the output is then written in
    memory order); makes the innermost loop the longest run it can: if the dim written with stride
    1 is not also read with stride 1 and a dim read with stride +-1 is longer, that one goes
    innermost (a channel shuffle reads runs of C/g bytes instead of runs of g); then merges every
    pair of neighbours (outer k, inner k+1) with stride[k] == dims[k+1] * stride[k+1] on both sides.
    Rank 0 (one element) comes back as rank 1.
    """
    kept = [(int(d), int(i), int(o)) for d, i, o in zip(dims, input_strides, output_strides) if int(d) != 1]
    kept.sort(key=lambda dim: -abs(dim[2]))
    if kept:
        written = kept[-1]
        read = max((dim for dim in kept if abs(dim[1]) == 1), key=lambda dim: dim[0], default=None)
        if read is not None and abs(written[1]) != 1 and read[0] > written[0]:
            kept.remove(read)
            kept.append(read)
    merged: list[tuple[int, int, int]] = []
    for size, i_stride, o_stride in kept:
        if merged and merged[-1][1] == size * i_stride and merged[-1][2] == size * o_stride:
            outer = merged.pop()
            merged.append((outer[0] * size, i_stride, o_stride))
        else:
            merged.append((size, i_stride, o_stride))
    merged = merged or [(1, 0, 0)]
    return [m[0] for m in merged], [m[1] for m in merged], [m[2] for m in merged]


def _span(dims, strides, start) -> tuple[int, int]:
    """(lowest, highest) element offset the loops reach."""
    low = start + sum((d - 1) * s for d, s in zip(dims, strides) if s < 0)
    high = start + sum((d - 1) * s for d, s in zip(dims, strides) if s > 0)
    return low, high


def _disjoint(dims, strides) -> bool:
    """A sufficient condition for distinct offsets: in order of |stride|, each stride steps over
    everything the smaller ones reach (true of any layout cut from a contiguous tensor)."""
    reach = 0
    for size, stride in sorted(zip(dims, strides), key=lambda dim: abs(dim[1])):
        if size > 1 and abs(stride) <= reach:
            return False
        reach += (size - 1) * abs(stride)
    return True


def copy_desc(
    dims,
    input_strides,
    output_strides,
    *,
    input_elements: int,
    output_elements: int,
    input_start: int = 0,
    output_start: int = 0,
) -> dict:
    """edgec_copy_desc for: output[output_start + sum_k i_k * output_strides[k]] =
    input[input_start + sum_k i_k * input_strides[k]] for every index i < dims, simplified
    (simplify_copy). Input strides may be anything (0 broadcasts, negative reverses); the output
    must be written at distinct places (each element once). Raises ValueError if an access falls
    outside the buffers (input_elements, output_elements) or more than MAX_DIMS loops remain."""
    dims = _check_shape(dims)
    if not len(dims) == len(input_strides) == len(output_strides):
        raise ValueError("dims and strides differ in rank")
    d, i_s, o_s = simplify_copy(dims, input_strides, output_strides)
    if len(d) > MAX_DIMS:
        raise ValueError(f"the copy needs {len(d)} loops, more than {MAX_DIMS}: {d}")
    if not _disjoint(d, o_s):
        raise ValueError(f"the output must be written once per element: dims {d}, strides {o_s}")
    for name, strides, start, size in (
        ("input", i_s, input_start, input_elements),
        ("output", o_s, output_start, output_elements),
    ):
        low, high = _span(d, strides, start)
        if low < 0 or high >= size:
            raise ValueError(f"the copy reaches {name} elements {low}..{high} of {size}")
    return dict(
        rank=len(d),
        dims=tuple(d),
        input_strides=tuple(i_s),
        output_strides=tuple(o_s),
        input_start=int(input_start),
        output_start=int(output_start),
        input_elements=int(input_elements),
        output_elements=int(output_elements),
    )


def copy_desc_for_permute(shape, perm) -> dict:
    """torch.permute / np.transpose of a contiguous tensor into a contiguous output."""
    shape = _check_shape(shape)
    if sorted(perm) != list(range(len(shape))):
        raise ValueError(f"{perm} is not a permutation of {len(shape)} axes")
    out_shape = [shape[p] for p in perm]
    strides = contiguous_strides(shape)
    return copy_desc(
        out_shape,
        [strides[p] for p in perm],
        contiguous_strides(out_shape),
        input_elements=math.prod(shape),
        output_elements=math.prod(shape),
    )


def copy_desc_for_slice(shape, axis: int, start: int | None, stop: int | None, step: int = 1) -> dict:
    """x[..., start:stop:step, ...] on `axis` (Python/numpy slice semantics: negative indices
    count from the end, bounds are clipped, a negative step walks backwards) into a contiguous
    output. An empty slice is a ValueError (no kernel call is needed for it)."""
    shape = _check_shape(shape)
    axis = range(len(shape))[axis]
    first, _, step = slice(start, stop, step).indices(shape[axis])
    count = len(range(*slice(start, stop, step).indices(shape[axis])))
    if count == 0:
        raise ValueError(f"slice {start}:{stop}:{step} of a dim of {shape[axis]} is empty")
    out_shape = list(shape)
    out_shape[axis] = count
    strides = list(contiguous_strides(shape))
    input_start = first * strides[axis]
    strides[axis] *= step
    return copy_desc(
        out_shape,
        strides,
        contiguous_strides(out_shape),
        input_start=input_start,
        input_elements=math.prod(shape),
        output_elements=math.prod(out_shape),
    )


def copy_descs_for_cat(shapes, axis: int) -> list[dict]:
    """torch.cat / np.concatenate of contiguous tensors along `axis`: one edgec_copy_s8 call per
    input, each writing its block of the contiguous output at the block's offset."""
    shapes = [_check_shape(s) for s in shapes]
    rank = len(shapes[0])
    axis = range(rank)[axis]
    if any(len(s) != rank or s[:axis] + s[axis + 1 :] != shapes[0][:axis] + shapes[0][axis + 1 :] for s in shapes):
        raise ValueError(f"cannot concatenate {shapes} along axis {axis}")
    out_shape = list(shapes[0])
    out_shape[axis] = sum(s[axis] for s in shapes)
    out_strides = contiguous_strides(out_shape)
    descs, at = [], 0
    for shape in shapes:
        descs.append(
            copy_desc(
                shape,
                contiguous_strides(shape),
                out_strides,
                output_start=at * out_strides[axis],
                input_elements=math.prod(shape),
                output_elements=math.prod(out_shape),
            )
        )
        at += shape[axis]
    return descs


def copy_desc_for_expand(shape, out_shape) -> dict:
    """torch.expand / np.broadcast_to (numpy broadcasting: shapes aligned on the right, size-1
    dims repeat) of a contiguous tensor into a contiguous output: the input is read with stride 0
    along every repeated dim."""
    shape, out_shape = _check_shape(shape), _check_shape(out_shape)
    if len(shape) > len(out_shape):
        raise ValueError(f"cannot expand {list(shape)} to the lower rank {list(out_shape)}")
    lead = len(out_shape) - len(shape)
    padded = (1,) * lead + shape
    if any(s not in (1, o) for s, o in zip(padded, out_shape)):
        raise ValueError(f"cannot expand {list(shape)} to {list(out_shape)}")
    strides = (0,) * lead + contiguous_strides(shape)
    in_strides = [0 if s == 1 else st for s, st in zip(padded, strides)]
    return copy_desc(
        out_shape,
        in_strides,
        contiguous_strides(out_shape),
        input_elements=math.prod(shape),
        output_elements=math.prod(out_shape),
    )


def _offsets(dims, strides, start) -> np.ndarray:
    """The element offsets start + sum_k i_k * strides[k] of every index, in row-major order."""
    offsets = np.full((), start, dtype=np.int64)
    for size, stride in zip(dims, strides):
        offsets = offsets[..., None] + np.arange(size, dtype=np.int64) * stride
    return offsets.ravel()


def copy_s8(desc: dict, x: np.ndarray, output: np.ndarray) -> np.ndarray:
    """Golden edgec_copy_s8: a copy of `output` (the output buffer before the call, flat) with
    output[output_start + sum i_k*output_strides[k]] = x[input_start + sum i_k*input_strides[k]]
    for every index i < dims; every other output byte keeps its value."""
    x = np.asarray(x, dtype=np.int8).ravel()
    result = np.array(output, dtype=np.int8).ravel()
    if x.size != desc["input_elements"] or result.size != desc["output_elements"]:
        raise ValueError("buffer sizes differ from the descriptor's")
    dims = desc["dims"]
    result[_offsets(dims, desc["output_strides"], desc["output_start"])] = x[
        _offsets(dims, desc["input_strides"], desc["input_start"])
    ]
    return result


# -- constant padding ------------------------------------------------------------------------------


def pad_desc(shape, pad_before, pad_after, fill: int) -> dict:
    """edgec_pad_desc for constant padding of a contiguous tensor (torch.nn.functional.pad with
    mode='constant' / np.pad), `pad_before[k]` / `pad_after[k]` >= 0 elements on each side of dim k
    and `fill` the pad value already quantized (int8). Simplified: a dim without padding merges into
    its outer neighbour (NHWC padding of H and W becomes [N][H][W*C] with the W pads times C)."""
    shape = _check_shape(shape)
    if not len(shape) == len(pad_before) == len(pad_after):
        raise ValueError("shape and pads differ in rank")
    if any(int(p) < 0 for p in (*pad_before, *pad_after)):
        raise ValueError("padding amounts must be >= 0 (a crop is a slice: copy_desc_for_slice)")
    if not INT8_MIN <= int(fill) <= INT8_MAX:
        raise ValueError(f"fill {fill} is not an int8 value")
    groups: list[list[int]] = []
    for size, before, after in zip(shape, pad_before, pad_after):
        before, after = int(before), int(after)
        if before == after == 0 and size == 1:
            continue
        if before == after == 0 and groups:
            groups[-1] = [groups[-1][0] * size, groups[-1][1] * size, groups[-1][2] * size]
        else:
            groups.append([size, before, after])
    groups = groups or [[1, 0, 0]]
    if len(groups) > MAX_DIMS:
        raise ValueError(f"padding needs {len(groups)} loops, more than {MAX_DIMS}")
    return dict(
        rank=len(groups),
        input_dims=tuple(g[0] for g in groups),
        pad_before=tuple(g[1] for g in groups),
        pad_after=tuple(g[2] for g in groups),
        fill=int(fill),
    )


def pad_s8(desc: dict, x: np.ndarray) -> np.ndarray:
    """Golden edgec_pad_s8: the input (flat, contiguous, desc input_dims) with pad_before[k] and
    pad_after[k] elements of value `fill` on each side of dim k; the flat contiguous output."""
    x = np.asarray(x, dtype=np.int8).reshape(desc["input_dims"])
    return np.pad(x, list(zip(desc["pad_before"], desc["pad_after"])), constant_values=desc["fill"]).ravel()


# -- nearest upsampling ----------------------------------------------------------------------------


def upsample_nearest_desc(shape, out_hw) -> dict:
    """edgec_upsample_nearest_desc for an NHWC tensor `shape` resized to out_hw = (H*sh, W*sw),
    sh and sw positive integers: torch.nn.functional.interpolate(mode='nearest') /
    upsample_nearest2d with integer scales, which is TFLite RESIZE_NEAREST_NEIGHBOR with
    align_corners=False, half_pixel_centers=False (its float index formula
    min(floor(y * (float)H / Ho), H - 1) is y // sh at integer scales)."""
    n, h, w, c = _check_shape(shape)
    oh, ow = (int(v) for v in out_hw)
    if oh < 1 or ow < 1 or oh % h or ow % w:
        raise ValueError(f"nearest upsampling needs integer scale factors: {h}x{w} to {oh}x{ow}")
    return dict(batches=n, input_h=h, input_w=w, channels=c, scale_h=oh // h, scale_w=ow // w)


def upsample_nearest_s8(desc: dict, x: np.ndarray) -> np.ndarray:
    """Golden edgec_upsample_nearest_s8: output[n, y, x, c] = input[n, y // scale_h, x // scale_w, c]
    (NHWC, flat in and out)."""
    x = np.asarray(x, dtype=np.int8).reshape(desc["batches"], desc["input_h"], desc["input_w"], desc["channels"])
    return np.repeat(np.repeat(x, desc["scale_h"], axis=1), desc["scale_w"], axis=2).ravel()


# -- bilinear resizing -----------------------------------------------------------------------------

FRACTION_BITS = 10  # TFLite ResizeBilinearInteger's fixed point: positions in units of 1/1024
ONE = 1 << FRACTION_BITS


def _c_div(a: np.ndarray, b: int) -> np.ndarray:
    """C integer division (truncates toward zero) of an int64 array by a positive int."""
    return np.sign(a) * (np.abs(a) // b)


def _scale_10(in_size: int, out_size: int, align_corners: bool, scale_factor: float | None = None) -> int:
    """TFLite's height_scale_10 / width_scale_10: in/out (or (in-1)/(out-1) with align_corners
    and out > 1) in units of 1/1024, rounded half up. With a `scale_factor` (PyTorch's
    interpolate(scale_factor=...) without align_corners), 1/scale_factor: PyTorch's own source
    step, which differs from in/out where in * scale_factor is not an integer (5 x 1.5 -> 7)."""
    if align_corners and out_size > 1:
        return (ONE * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    if scale_factor is not None and not align_corners:
        return int(math.floor(ONE / scale_factor + 0.5))
    return (ONE * in_size + out_size // 2) // out_size


def bilinear_axis_table(
    in_size: int, out_size: int, align_corners: bool, half_pixel_centers: bool, scale_factor: float | None = None
) -> np.ndarray:
    """For each output position: (lower, upper, fraction) as TFLite's
    ComputeInterpolationValuesInteger gives them: scaled = y*s (+ s/2 - 512 with half-pixel
    centres), lower = max(scaled / 1024, 0), upper = min(ceil(scaled / 1024), in - 1) (C division),
    fraction = scaled - 1024*lower (negative near the start with half-pixel centres, where
    lower == upper == 0). int16 [out_size, 3]. Raises ValueError where TFLite would read past the
    input (lower > in - 1, possible only with extreme size ratios)."""
    s = _scale_10(in_size, out_size, align_corners, scale_factor)
    y = np.arange(out_size, dtype=np.int64)
    scaled = y * s + (s // 2 - ONE // 2 if half_pixel_centers else 0)
    lower = np.maximum(_c_div(scaled, ONE), 0)
    upper = np.minimum(_c_div(scaled + ONE - 1, ONE), in_size - 1)
    if (lower > in_size - 1).any():
        raise ValueError(f"TFLite's integer bilinear resize reads past the input from {in_size} to {out_size}")
    return np.stack([lower, upper, scaled - ONE * lower], axis=1).astype(np.int16)


def resize_bilinear_desc(
    shape, out_hw, *, align_corners: bool = False, half_pixel_centers: bool = True, scale_factors=(None, None)
) -> dict:
    """edgec_resize_bilinear_desc for an NHWC tensor resized to out_hw, TFLite's int8
    RESIZE_BILINEAR. PyTorch interpolate(mode='bilinear', align_corners=False) is
    half_pixel_centers=True (the default here); align_corners=True is align_corners=True,
    half_pixel_centers=False. Input and output share qparams. The row and column tables hold
    bilinear_axis_table's (lower, upper, fraction) triples."""
    n, h, w, c = _check_shape(shape)
    oh, ow = (int(v) for v in out_hw)
    if oh < 1 or ow < 1:
        raise ValueError(f"bad output size {out_hw}")
    if align_corners and half_pixel_centers:
        raise ValueError("half_pixel_centers needs align_corners=False (as in TFLite)")
    return dict(
        batches=n,
        input_h=h,
        input_w=w,
        channels=c,
        output_h=oh,
        output_w=ow,
        y_table=bilinear_axis_table(h, oh, align_corners, half_pixel_centers, scale_factors[0]).ravel(),
        x_table=bilinear_axis_table(w, ow, align_corners, half_pixel_centers, scale_factors[1]).ravel(),
    )


def resize_bilinear_s8(desc: dict, x: np.ndarray) -> np.ndarray:
    """Golden edgec_resize_bilinear_s8 (TFLite reference_ops::ResizeBilinearInteger, int8, the
    default double-rounding build): with (y0, y1, fy) = y_table[oy], (x0, x1, fx) = x_table[ox],
      v = x[y0,x0]*(1024-fy)*(1024-fx) + x[y1,x0]*fy*(1024-fx) + x[y0,x1]*(1024-fy)*fx + x[y1,x1]*fy*fx
      output = trunc_div(v + (v > 0 ? 2^19 : -2^19), 2^20)
    exact in int32 (|v| < 2^31 for fractions in -1024..1024). A fraction is in 0..1024, or
    negative only with lower == upper (TFLite's first half-pixel positions), so the result lies
    between the four inputs: no clamp. Raises ValueError for other tables (the C refuses them)."""
    n, h, w, c = desc["batches"], desc["input_h"], desc["input_w"], desc["channels"]
    for name, size in (("y_table", h), ("x_table", w)):
        lower, upper, fraction = np.asarray(desc[name], np.int64).reshape(-1, 3).T
        if (
            (lower < 0)
            | (lower >= size)
            | (upper < 0)
            | (upper >= size)
            | (np.abs(fraction) > ONE)
            | ((fraction < 0) & (lower != upper))
        ).any():
            raise ValueError(f"{name} is not a table of bilinear_axis_table's form")
    x = np.asarray(x, dtype=np.int8).reshape(n, h, w, c).astype(np.int64)
    y0, y1, fy = np.asarray(desc["y_table"], np.int64).reshape(-1, 3).T
    x0, x1, fx = np.asarray(desc["x_table"], np.int64).reshape(-1, 3).T
    fy, fx = fy[None, :, None, None], fx[None, None, :, None]
    top, bottom = x[:, y0], x[:, y1]
    v = (
        top[:, :, x0] * (ONE - fy) * (ONE - fx)
        + bottom[:, :, x0] * fy * (ONE - fx)
        + top[:, :, x1] * (ONE - fy) * fx
        + bottom[:, :, x1] * fy * fx
    )
    half = 1 << (2 * FRACTION_BITS - 1)
    return _c_div(np.where(v > 0, v + half, v - half), 1 << (2 * FRACTION_BITS)).astype(np.int8).ravel()


def _scale_factors(node) -> tuple:
    """(scale_h, scale_w) an upsample_bilinear2d node was given (PyTorch then steps the source by
    1/scale), or (None, None) for an output size."""
    if node.target == aten.upsample_bilinear2d.vec:
        scales = node.args[3] if len(node.args) > 3 else node.kwargs.get("scale_factors")
    else:
        scales = [node.args[i] if len(node.args) > i else None for i in (3, 4)]
    return tuple(float(v) if v is not None else None for v in scales) if scales else (None, None)


def nearest_sources(gather, torch_shape) -> tuple[list[int], list[int]]:
    """The input row and column each output row and column of a nearest resize copies, as
    PyTorch computes them (the resize run on index ramps); EdgecError if the resize is not one
    row map and one column map."""
    n, c, h, w = torch_shape
    with torch.no_grad():
        rows = gather(torch.arange(h, dtype=torch.float64).view(1, 1, h, 1).expand(n, c, h, w).contiguous())
        cols = gather(torch.arange(w, dtype=torch.float64).view(1, 1, 1, w).expand(n, c, h, w).contiguous())
    return rows[0, 0, :, 0].long().tolist(), cols[0, 0, 0, :].long().tolist()


def nearest_table_desc(shape, rows, cols) -> dict:
    """edgec_resize_bilinear_desc for a nearest resize by any factor: each output row (column)
    copies input row rows[o] (column cols[o]), a table entry (lower = upper = source, fraction 0),
    for which TFLite's bilinear arithmetic returns the input value exactly (x * 2^20, rounded
    back by 2^20)."""
    n, h, w, c = _check_shape(shape)

    def table(sources):
        return np.array([(s, s, 0) for s in sources], np.int16).ravel()

    return dict(
        batches=n,
        input_h=h,
        input_w=w,
        channels=c,
        output_h=len(rows),
        output_w=len(cols),
        y_table=table(rows),
        x_table=table(cols),
    )


# -- reductions ------------------------------------------------------------------------------------

REDUCE_OPS = {"max": 0, "min": 1, "sum": 2, "mean": 2}  # EDGEC_REDUCE_MAX, _MIN, _SUM (sum and mean)
MAX_REDUCED = 1 << 23  # elements per output: |sum - zp*n| <= 256*n stays inside int32


def simplify_reduce(shape, axes) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(kept, reduced): lists of (size, input stride) loops, outermost first. Neighbouring dims
    both kept or both reduced merge into one loop; size-1 dims vanish. The output is the kept
    loops in order, contiguous."""
    shape = _check_shape(shape)
    axes = {range(len(shape))[a] for a in axes}
    strides = contiguous_strides(shape)
    kept: list[list[int]] = []
    reduced: list[list[int]] = []
    last = None
    for axis, (size, stride) in enumerate(zip(shape, strides)):
        if size == 1:
            continue
        group = reduced if axis in axes else kept
        if last is group:
            group[-1] = [group[-1][0] * size, stride]
        else:
            group.append([size, stride])
        last = group
    return [tuple(k) for k in kept], [tuple(r) for r in reduced]


def reduce_desc(
    shape,
    axes,
    op: str,
    *,
    input_scale: float = 1.0,
    input_zero_point: int = 0,
    output_scale: float = 1.0,
    output_zero_point: int = 0,
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
) -> dict:
    """edgec_reduce_desc for torch.amax/amin/sum/mean (any keepdim: the output bytes are the same)
    over `axes` of a contiguous int8 tensor.

    max/min compare raw int8, so input and output must share qparams (as TFLite requires).
    sum/mean follow TFLite Micro's int8 SUM/MEAN (reduce_common.cc -> reference_ops::
    QuantizedMeanOrSum): (multiplier, shift) = QuantizeMultiplier(s_in / s_out); for the mean,
    with n reduced elements, k = min(floor(log2 n), 32, 31 + shift), multiplier =
    (multiplier << k) / n (int64, truncating), shift -= k. The same path serves equal qparams
    (multiplier 2^30, shift 1 before the division). TFLite proper (tensorflow/lite/kernels/reduce.cc)
    differs for MEAN in two cases TFLite Micro dropped in 2023 ("Align mean kernel to TFL"): a
    keep_dims 4-D mean over axes 1, 2 (reference_integer_ops::Mean: requantize, then a rounded
    division by n) and equal qparams (reference_ops::Mean: the raw sum divided by n, truncating).
    A mean over H, W with equal qparams is edgec_avgpool_s8's job (its own rounding: pool.py)."""
    if op not in REDUCE_OPS:
        raise ValueError(f"unknown reduction {op!r}")
    kept, reduced = simplify_reduce(shape, axes)
    if len(kept) > MAX_DIMS or len(reduced) > MAX_DIMS:
        raise ValueError("too many loops")
    count = math.prod(size for size, _ in reduced)
    if count > MAX_REDUCED:
        raise ValueError(f"{count} elements per output exceed {MAX_REDUCED}")
    if not INT8_MIN <= act_min <= act_max <= INT8_MAX:
        raise ValueError(f"bad activation range {act_min}..{act_max}")
    multiplier, shift, sum_offset = 0, 0, 0
    if op in ("max", "min"):
        if (input_scale, input_zero_point) != (output_scale, output_zero_point):
            raise ValueError(f"{op} must keep its input's qparams")
    else:
        multiplier, shift = quantize_multiplier(input_scale / output_scale)
        if op == "mean":
            k = min(count.bit_length() - 1, 32, 31 + shift)
            multiplier, shift = (multiplier << k) // count, shift - k
        sum_offset = -int(input_zero_point) * count
    return dict(
        op=REDUCE_OPS[op],
        kept_rank=len(kept),
        kept_dims=tuple(k[0] for k in kept),
        kept_strides=tuple(k[1] for k in kept),
        reduced_rank=len(reduced),
        reduced_dims=tuple(r[0] for r in reduced),
        reduced_strides=tuple(r[1] for r in reduced),
        sum_offset=sum_offset,
        multiplier=int(multiplier),
        shift=int(shift),
        output_offset=int(output_zero_point),
        act_min=int(act_min),
        act_max=int(act_max),
    )


def reduce_s8(desc: dict, x: np.ndarray) -> np.ndarray:
    """Golden edgec_reduce_s8. For each output element (the kept loops, in order, contiguous) over
    the input elements its reduced loops reach:
      max/min: clamp(max/min of the raw int8, act_min, act_max);
      sum:     clamp(requantize(sum + sum_offset, multiplier, shift) + output_offset, act_min, act_max),
    requantize being TFLite's MultiplyByQuantizedMultiplier (edgec.numerics.requantize)."""
    x = np.asarray(x, dtype=np.int8).ravel()
    kept = _offsets(desc["kept_dims"], desc["kept_strides"], 0)
    reduced = _offsets(desc["reduced_dims"], desc["reduced_strides"], 0)
    values = x[kept[:, None] + reduced[None, :]].astype(np.int64)
    if desc["op"] == REDUCE_OPS["max"]:
        return saturate_int8(values.max(axis=1), desc["act_min"], desc["act_max"])
    if desc["op"] == REDUCE_OPS["min"]:
        return saturate_int8(values.min(axis=1), desc["act_min"], desc["act_max"])
    scaled = requantize(wrap_int32(values.sum(axis=1) + desc["sum_offset"]), desc["multiplier"], desc["shift"])
    return saturate_int8(scaled + desc["output_offset"], desc["act_min"], desc["act_max"])


# == the op units ===================================================================================
#
# Data movement is defined by PyTorch itself: a "copy" op keeps the ATen call that made it, and at
# compile time that call runs on tensors of element ids (input k's elements numbered after the
# earlier inputs' ones, each id its byte's place in storage). The result says, for every stored
# output byte, which input byte it is; `strided_copies` fits those pairs to edgec_copy_s8 loop
# nests, one per input. So permute, transpose, slice, select, narrow, split, chunk, unbind, cat,
# stack, expand, repeat, flip, pixel_shuffle and a reshape that reorders bytes all run the same
# kernel, in any stored layout, and consecutive copies compose into one (passes/fuse.fuse_copies).


def _substitute(args, activations: list, ctx, node):
    """`args` with every activation Node replaced by a slot marker (collected in `activations`)."""
    if isinstance(args, (list, tuple)):
        return type(args)(_substitute(a, activations, ctx, node) for a in args)
    if isinstance(args, Node):
        if not ctx.is_tensor(args):
            return _indices(ctx, args, node)
        activations.append(ctx.tensor(args))
        return _Slot(len(activations) - 1)
    return args


def _is_integer(node: Node) -> bool:
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and not value.dtype.is_floating_point


def _indices(ctx, arg, node) -> torch.Tensor:
    """A constant integer tensor an op reads as indices (index_select's, x[:, i]'s), as the torch value."""
    value = ctx.values.get(arg.name)
    array = getattr(value, "value", None)
    if node.target not in INDEXED_COPIES or array is None or not np.issubdtype(np.asarray(array).dtype, np.integer):
        raise EdgecError(f"{source_line(node)}: {node.target} of a constant tensor is not supported")
    return torch.from_numpy(np.asarray(array, dtype=np.int64))


@dataclass(frozen=True)
class _Slot:
    index: int


def _fill(args, tensors):
    if isinstance(args, (list, tuple)):
        return type(args)(_fill(a, tensors) for a in args)
    return tensors[args.index] if isinstance(args, _Slot) else args


@dataclass(frozen=True)
class Gather:
    """An ATen call on the op's inputs (then item `item` of its result, for split-like ops)."""

    target: object
    args: tuple
    kwargs: dict
    item: int | None = None

    def __call__(self, *tensors):
        result = self.target(*_fill(self.args, tensors), **self.kwargs)
        return result if self.item is None else result[self.item]


@dataclass(frozen=True)
class Composed:
    """`outer` with its input `slot` computed by `inner` from `count` inputs in its place."""

    outer: object
    slot: int
    inner: object
    count: int

    def __call__(self, *tensors):
        inner = self.inner(*tensors[self.slot : self.slot + self.count])
        return self.outer(*tensors[: self.slot], inner, *tensors[self.slot + self.count :])


def compose_at(outer, slot: int, inner, count: int) -> Composed:
    return Composed(outer, slot, inner, count)


@dataclass(frozen=True)
class EdgePad:
    """F.pad(mode='reflect' | 'replicate') along one torch axis, as a cat of three views of the
    same input (one per op input, so each is one strided copy: a flipped slice or a repeated edge,
    the input, and the other edge). Inputs: the tensor once per non-empty piece, in order."""

    axis: int
    before: int
    after: int
    mode: str

    def __call__(self, *copies):
        copies = list(copies)
        length = copies[0].shape[self.axis]
        pieces = []
        if self.before:
            x = copies.pop(0)
            pieces.append(
                x.narrow(self.axis, 1, self.before).flip(self.axis)
                if self.mode == "reflect"
                else x.narrow(self.axis, 0, 1).repeat_interleave(self.before, self.axis)
            )
        pieces.append(copies.pop(0))
        if self.after:
            x = copies.pop(0)
            pieces.append(
                x.narrow(self.axis, length - 1 - self.after, self.after).flip(self.axis)
                if self.mode == "reflect"
                else x.narrow(self.axis, length - 1, 1).repeat_interleave(self.after, self.axis)
            )
        return torch.cat(pieces, self.axis)


def lower_edge_pad(ctx, node, x: Tensor, pad: list[int], mode: str) -> None:
    """Reflect or replicate padding (PyTorch's order of `pad`: the last axis first, (before, after)
    pairs) as one copy per padded axis: each reads its input up to three times, so each piece is
    one strided copy (a copy of every axis at once would not split into few strided copies)."""
    if min(pad, default=0) < 0:
        raise EdgecError(f"{source_line(node)}: negative padding (a crop) is not supported; slice instead")
    rank, current, shape = len(x.shape), x, list(x.shape)
    axes = [(rank - 1 - k, pad[2 * k], pad[2 * k + 1]) for k in range(len(pad) // 2) if pad[2 * k] or pad[2 * k + 1]]
    if not axes:
        ctx.add_op("copy", node, [x], [ctx.output(node, qparams_of=x)], gather=reshape_gather(x.shape))
        return
    for number, (axis, before, after) in enumerate(axes):
        shape[axis] += before + after
        last = number == len(axes) - 1
        out = (
            ctx.output(node, qparams_of=x)
            if last
            else ctx.graph.add_tensor(
                Tensor(f"{node.name}_axis{axis}", tuple(shape), x.scale, x.zero_point, dtype=x.dtype)
            )
        )
        inputs = [current] * (1 + (before > 0) + (after > 0))
        ctx.add_op("copy", node, inputs, [out], gather=EdgePad(axis, before, after, mode))
        current = out


def reshape_gather(shape) -> Gather:
    return Gather(torch.ops.aten.reshape.default, (_Slot(0), list(shape)), {})


def in_torch_order(op, graph, inputs, output: bool) -> None:
    """Give `op` its inputs at `inputs` (indices) and, if `output`, its output in PyTorch's axis
    order: each that the layout pass stores otherwise (channels last, tied to a convolution) goes
    through a copy inserted before (after) the op, for a kernel that reads rows in PyTorch order."""
    for index in (*inputs, *((None,) if output else ())):
        name = op.inputs[index] if index is not None else op.outputs[0]
        tensor = graph.tensors[name]
        if tensor.perm is None or same_bytes(tensor.torch_shape, tensor.perm, tensor.torch_shape, None):
            continue
        rows = graph.add_tensor(
            Tensor(
                f"{op.name}_rows{'_out' if index is None else index}",
                tensor.torch_shape,
                tensor.scale,
                tensor.zero_point,
                source=tensor.source,
                dtype=tensor.dtype,
            )
        )
        if index is None:
            graph.ops.insert(
                graph.ops.index(op) + 1, relayout_copy(f"{op.name}_output_copy", rows.name, name, graph, op.source)
            )
            op.outputs[0] = rows.name
        else:
            graph.ops.insert(
                graph.ops.index(op),
                relayout_copy(f"{op.name}_input_copy{index or ''}", name, rows.name, graph, op.source),
            )
            op.inputs[index] = rows.name


def relayout_copy(name: str, source: str, target: str, graph, where: str) -> Op:
    """A copy op moving tensor `source`'s values unchanged into `target`, stored another way."""
    return Op(name, "copy", [source], [target], {"gather": reshape_gather(graph.tensors[source].torch_shape)}, where)


def source_ids(graph, op) -> tuple[list, list[int]]:
    """Per input, its elements' ids in PyTorch order (a torch int64 tensor), and where each
    input's ids start."""
    tensors, starts, base = [], [], 0
    for name in op.inputs:
        t = graph.tensors[name]
        ids = np.arange(base, base + t.elements, dtype=np.int64).reshape(t.shape)
        tensors.append(torch.from_numpy(to_torch_order(t, ids)))
        starts.append(base)
        base += t.elements
    return tensors, starts


def gathered_ids(op, graph) -> np.ndarray:
    """For each stored output byte, the id of the input byte it copies. The ids travel as float64
    (exact below 2^53): ATen has no int64 kernel for some copies (upsample_nearest2d)."""
    tensors, _ = source_ids(graph, op)
    with torch.no_grad():
        result = op.attrs["gather"](*(t.to(torch.float64) for t in tensors))
    out = graph.tensors[op.outputs[0]]
    if tuple(result.shape) != out.torch_shape:
        raise EdgecError(f"{op.source}: the data movement gives {list(result.shape)}, expected {list(out.torch_shape)}")
    return to_stored(out, result.numpy().astype(np.int64)).ravel()


def fit_loops(outputs: np.ndarray, inputs: np.ndarray) -> tuple[list[int], list[int], list[int]] | None:
    """Loop dims and the output and input strides (outermost first) under which the pairs
    (outputs[i], inputs[i]), in order, are start + sum_k i_k * stride_k; None if there are none.
    Innermost first: the longest run that splits every row alike into arithmetic steps."""
    dims, out_strides, in_strides = [], [], []
    while len(outputs) > 1:
        steps = (int(outputs[1] - outputs[0]), int(inputs[1] - inputs[0]))
        run = 1
        while (
            run < len(outputs)
            and outputs[run] - outputs[run - 1] == steps[0]
            and inputs[run] - inputs[run - 1] == steps[1]
        ):
            run += 1
        for length in range(run, 1, -1):
            if len(outputs) % length:
                continue
            rows_out, rows_in = outputs.reshape(-1, length), inputs.reshape(-1, length)
            expected = np.arange(length, dtype=np.int64)
            if np.array_equal(rows_out, rows_out[:, :1] + expected * steps[0]) and np.array_equal(
                rows_in, rows_in[:, :1] + expected * steps[1]
            ):
                break
        else:
            return None
        dims.insert(0, length)
        out_strides.insert(0, steps[0])
        in_strides.insert(0, steps[1])
        outputs, inputs = outputs[::length], inputs[::length]
    return dims or [1], out_strides or [1], in_strides or [1]


# How many strided copies one input's movement may split into (a roll takes 2 per rolled axis).
MAX_PARTS = 8


def strided_parts(positions: np.ndarray, sources: np.ndarray, op, boxes=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (output positions, input positions) pairs as few strided copies: one if fit_loops fits
    them all, else one per distinct offset source - position (a roll: each part moves by one
    offset), each of which must fit, else the output boxes `boxes()` gives (a roll of a strided
    slice: its offsets differ everywhere, but each box between two wraps is one strided copy);
    EdgecError otherwise."""
    if fit_loops(positions, sources) is not None:
        return [(positions, sources)]
    offsets = sources - positions
    parts = [(positions[offsets == d], sources[offsets == d]) for d in np.unique(offsets)]
    if len(parts) > MAX_PARTS or any(fit_loops(*part) is None for part in parts):
        parts = boxes() if boxes is not None else None
    if parts is None or len(parts) > MAX_PARTS or any(fit_loops(*part) is None for part in parts):
        raise EdgecError(f"{op.source}: this data movement is not a strided copy edgec can run")
    return sorted(parts, key=lambda part: int(part[0][0]))


def affine_boxes(ids: np.ndarray, out: Tensor, start: int, size: int) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """The output (in PyTorch's axis order) cut, along each axis, where the step between
    neighbouring source ids changes (a roll's wrap, a cat's seam), into boxes on which the source
    id is affine in the output index; the (stored positions, input positions) of each box reading
    input ids [start, start + size), in stored order. None if a box mixes inputs."""
    where = to_torch_order(out, np.arange(out.elements, dtype=np.int64).reshape(out.shape))
    source = ids[where]
    cuts = [_affine_cuts(np.moveaxis(source, axis, 0)) for axis in range(source.ndim)]
    parts = []
    for box in np.ndindex(*(len(c) - 1 for c in cuts)):
        index = tuple(slice(c[i], c[i + 1]) for c, i in zip(cuts, box))
        positions, box_sources = where[index].ravel(), source[index].ravel()
        inside = (box_sources >= start) & (box_sources < start + size)
        if inside.any() and not inside.all():
            return None
        if inside.all():
            order = np.argsort(positions, kind="stable")
            parts.append((positions[order], box_sources[order] - start))
    return parts


def _affine_cuts(values: np.ndarray) -> list[int]:
    """Where to cut axis 0 of `values` so that each piece steps by one constant slice along it."""
    steps = np.diff(values, axis=0)
    cuts, begin = [0], 0
    for i in range(2, len(values)):
        if i - begin >= 2 and not np.array_equal(steps[i - 1], steps[i - 2]):
            cuts.append(i)
            begin = i
    return cuts + [len(values)]


def strided_copies(op, graph) -> list[tuple[int, dict]]:
    """(input index, edgec_copy_desc) for each input that reaches the output."""
    ids = gathered_ids(op, graph)
    _, starts = source_ids(graph, op)
    out = graph.tensors[op.outputs[0]]
    copies = []
    for index, name in enumerate(op.inputs):
        size = graph.tensors[name].elements
        positions = np.nonzero((ids >= starts[index]) & (ids < starts[index] + size))[0].astype(np.int64)
        if not len(positions):
            continue
        sources = ids[positions] - starts[index]
        boxes = lambda: affine_boxes(ids, out, starts[index], size)  # noqa: E731 (only when needed)
        for part_positions, part_sources in strided_parts(positions, sources, op, boxes):
            dims, out_strides, in_strides = fit_loops(part_positions, part_sources)
            try:
                desc = copy_desc(
                    dims,
                    in_strides,
                    out_strides,
                    input_elements=size,
                    output_elements=out.elements,
                    input_start=int(part_sources[0]),
                    output_start=int(part_positions[0]),
                )
            except ValueError as exc:
                raise EdgecError(f"{op.source}: {exc}") from None
            copies.append((index, desc))
    if sum(int(np.prod(desc["dims"][: desc["rank"]])) for _, desc in copies) != out.elements:
        raise EdgecError(f"{op.source}: the data movement leaves output bytes unwritten")
    return copies


class MultiOutput:
    """A split-like node's tuple result; each getitem of it lowers to its own copy."""

    def __init__(self, unit, node):
        self.unit, self.node = unit, node

    def lower_item(self, ctx, getitem, item: int) -> None:
        self.unit.lower_copy(ctx, self.node, getitem, item)


class Copy(OpDef):
    kind, c_function = "copy", "edgec_copy_s8"
    targets = frozenset(COPIES)
    runtime_sources = ("movement/edgec_movement_s8.c",)
    keeps_qparams = True
    layout_follows_input = True  # slices, chunks and cats of channels-last data stay channels last
    limits = f"a movement PyTorch defines that splits into at most {MAX_PARTS} strided copies per input"

    def annotate(self, node) -> None:
        """Inputs and output share the first input's qparams (a copy cannot requantize); so do the
        items a split-like op's getitems take. A tensor read more than once (torch.cat([y, y])) is
        annotated once: a second, shared spec of the first input would refer to itself. A join of
        several tensors is annotated as a join (_annotate_join). Index tensors (index_select's) are
        not activations."""
        sources = list(dict.fromkeys(a for a in _flatten_args(node.args) if isinstance(a, Node) and not _is_integer(a)))
        if node.target in JOINS and len(sources) > 1:
            _annotate_join(node, sources)
            return
        first = sources[0]
        inputs = {first: ACTIVATION_QSPEC}
        inputs.update({source: SharedQuantizationSpec((first, node)) for source in sources[1:]})
        annotate(node, inputs, SharedQuantizationSpec((first, node)))
        for user in node.users:
            if user.target is operator.getitem:
                annotate(user, {}, SharedQuantizationSpec((first, node)))

    def lower(self, ctx, node) -> None:
        if node.target in MULTI_OUTPUT_COPIES:
            ctx.alias(node, MultiOutput(self, node))
            return
        self.lower_copy(ctx, node, node, None)

    def lower_copy(self, ctx, node, result_node, item: int | None) -> None:
        if node.target in INDEXED_COPIES and any(ctx.is_tensor(arg) for arg in _flatten_args(node.args[1:])):
            raise EdgecError(
                f"{source_line(node)}: indexing by indices the model reads or computes is not supported "
                "(edgec compiles a constant index tensor, e.g. a buffer)"
            )
        activations: list = []
        args = _substitute(node.args, activations, ctx, node)
        joined = self._join_qparams(ctx, node, activations)
        out = ctx.output(result_node, qparams_of=joined or activations[0])
        op = ctx.add_op(self.kind, node, activations, [out], gather=Gather(node.target, args, dict(node.kwargs), item))
        if item is not None:  # a split's part: passes/fuse.py chain_split_requantizes reads this
            op.attrs["split_of_quantized"] = ctx.is_dequantized(node.args[0])

    @staticmethod
    def _join_qparams(ctx, node, activations: list):
        """A cat of differently quantized inputs runs at the qparams the program quantizes its
        output to, each input requantized once, straight to them (TFLite's CONCATENATION): at its
        first input's, a wider input would saturate before the cat's own requantize. Replaces the
        inputs in `activations`; returns the tensor whose qparams the output takes, or None."""
        qparams = {(tensor.scale, tensor.zero_point, tensor.dtype) for tensor in activations}
        output_qparams = ctx.quantized_as(node) if len(qparams) > 1 else None
        if output_qparams is None:
            return None
        args = [arg for arg in _flatten_args(node.args) if isinstance(arg, Node)]
        requantized: dict = {}  # torch.cat([y, y]) requantizes y once
        for index, (arg, tensor) in enumerate(zip(args, activations)):
            if (tensor.scale, tensor.zero_point, tensor.dtype) != output_qparams:
                if arg not in requantized:
                    requantized[arg] = ctx.requantize_input(node, arg, *output_qparams)
                activations[index] = requantized[arg]
        return next(t for t in activations if (t.scale, t.zero_point, t.dtype) == output_qparams)

    def finalize(self, op, graph) -> None:
        op.attrs["copies"] = strided_copies(op, graph)

    def golden(self, op, graph, inputs):
        out = graph.tensors[op.outputs[0]]
        result = np.zeros(out.elements, dtype=np.int8)
        for index, desc in op.attrs["copies"]:
            result = copy_s8(desc, inputs[index], result)
        return result.reshape(out.shape)

    def emit(self, op, graph, names) -> CCall:
        call = CCall("", [], [])
        for number, (index, desc) in enumerate(op.attrs["copies"]):
            p = names.symbol(op, f"desc{number}")
            part = descriptor(COPY_DESC, p, desc)
            call.params += part.params
            call.code += (
                " " if call.code else ""
            ) + f"status |= {op.kernel.function}(&{p}, {names.ptr(op.inputs[index])}, {names.ptr(op.outputs[0])});"
        return call


# Copies that join several tensors into one: quantized at their own output's range.
JOINS = frozenset({aten.cat.default, aten.concat.default, aten.stack.default, aten.hstack.default, aten.vstack.default})


def _annotate_join(node, sources) -> None:
    """A cat observes its own output, the union of its inputs' ranges (TFLite's CONCATENATION):
    an input whose producer feeds only the cat shares those qparams (the producer writes at the
    cat's scale, no requantize), an input read elsewhere too keeps its producer's own qparams and
    is requantized once to the cat's (Copy._join_qparams). Sharing one scale across all inputs and
    their producers instead gives a narrow tensor that other layers read the widest input's steps."""
    inputs = {
        source: SharedQuantizationSpec(node) if len(source.users) == 1 else ACTIVATION_QSPEC for source in sources
    }
    annotate(node, inputs, ACTIVATION_QSPEC)


def _flatten_args(args):
    for arg in args:
        if isinstance(arg, (list, tuple)):
            yield from _flatten_args(arg)
        else:
            yield arg


def make_copy(op, graph, gather: Gather) -> None:
    """Turn `op` (a reshape whose output is not a free view) into a copy."""
    op.kind = "copy"
    op.attrs["gather"] = gather
    graph.tensors[op.outputs[0]].alias_of = None


class ConstantPad(OpDef):
    """A constant pad that no convolution absorbs (passes/fuse.fold_pad folds the others)."""

    kind, c_function = "constant_pad", "edgec_pad_s8"
    runtime_sources = ("movement/edgec_movement_s8.c",)
    layout_follows_input = True
    keeps_qparams = True

    def finalize(self, op, graph) -> None:
        x, out = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        rank = len(x.torch_shape)
        before, after = [0] * len(x.shape), [0] * len(x.shape)
        pads = op.attrs["torch_pad"]  # PyTorch's order: the last axis first, (before, after) pairs
        for k in range(len(pads) // 2):
            stored = x.stored_axis(rank - 1 - k)
            before[stored], after[stored] = int(pads[2 * k]), int(pads[2 * k + 1])
        fill = int(np.clip(out.zero_point + round_half_away(op.attrs["value"] / out.scale), INT8_MIN, INT8_MAX))
        try:
            op.attrs["desc"] = pad_desc(x.shape, before, after, fill)
        except ValueError as exc:
            raise EdgecError(f"{op.source}: {exc}") from None

    def golden(self, op, graph, inputs):
        return pad_s8(op.attrs["desc"], inputs[0]).reshape(graph.tensors[op.outputs[0]].shape)

    def emit(self, op, graph, names) -> CCall:
        p = names.symbol(op, "desc")
        call = descriptor(PAD_DESC, p, op.attrs["desc"])
        call.code = f"status |= {op.kernel.function}(&{p}, {names.ptr(op.inputs[0])}, {names.ptr(op.outputs[0])});"
        return call


class Resize(OpDef):
    """upsample / interpolate: nearest by integer factors (edgec_upsample_nearest_s8), nearest
    downsampling by integer factors (a strided copy), nearest by any other factor (PyTorch's source
    rows and columns as edgec_resize_bilinear_s8's tables, fraction 0: an exact copy) and bilinear
    (TFLite's integer RESIZE_BILINEAR), NHWC."""

    kind = "resize"
    targets = frozenset(RESIZES)
    runtime_sources = ("movement/edgec_movement_s8.c", "movement/edgec_resize_bilinear_s8.c")
    spatial = True
    keeps_qparams = True

    def annotate(self, node) -> None:
        annotate_shared(node)

    def lower(self, ctx, node) -> None:
        x = ctx.tensor(node.args[0])
        out = ctx.output(node, qparams_of=x)
        if len(x.shape) != 4:
            raise EdgecError(f"{source_line(node)}: {node.target} needs an NCHW input")
        if node.target in NEAREST_RESIZES:
            if not any(o % i for o, i in zip(out.shape[2:], x.shape[2:])):
                ctx.add_op(self.kind, node, [x], [out], mode="nearest")
            elif not any(i % o for o, i in zip(out.shape[2:], x.shape[2:])):  # integer downsampling: a strided copy
                ctx.add_op(
                    "copy", node, [x], [out], gather=Gather(node.target, (_Slot(0), *node.args[1:]), dict(node.kwargs))
                )
            else:  # any other factor: PyTorch's source rows and columns, as the bilinear kernel's tables
                ctx.add_op(
                    self.kind,
                    node,
                    [x],
                    [out],
                    mode="nearest_rows",
                    sources=nearest_sources(
                        Gather(node.target, (_Slot(0), *node.args[1:]), dict(node.kwargs)), x.torch_shape
                    ),
                )
            return
        align_corners = bool(node.args[2]) if len(node.args) > 2 else bool(node.kwargs.get("align_corners", False))
        ctx.add_op(
            self.kind,
            node,
            [x],
            [out],
            mode="bilinear",
            align_corners=align_corners,
            scale_factors=_scale_factors(node),
        )

    def finalize(self, op, graph) -> None:
        x, out = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        try:
            if op.attrs["mode"] == "nearest":
                op.attrs["desc"] = upsample_nearest_desc(x.shape, out.shape[1:3])
            elif op.attrs["mode"] == "nearest_rows":
                op.attrs["desc"] = nearest_table_desc(x.shape, *op.attrs["sources"])
            else:
                align = op.attrs["align_corners"]
                op.attrs["desc"] = resize_bilinear_desc(
                    x.shape,
                    out.shape[1:3],
                    align_corners=align,
                    half_pixel_centers=not align,
                    scale_factors=op.attrs.get("scale_factors", (None, None)),
                )
        except ValueError as exc:
            raise EdgecError(f"{op.source}: {exc}") from None

    def golden(self, op, graph, inputs):
        kernel = upsample_nearest_s8 if op.attrs["mode"] == "nearest" else resize_bilinear_s8  # nearest_rows too
        return kernel(op.attrs["desc"], inputs[0]).reshape(graph.tensors[op.outputs[0]].shape)

    def kernel_function(self, op) -> str:
        # nearest_rows: edgec_resize_bilinear_s8 on its tables
        return "edgec_upsample_nearest_s8" if op.attrs["mode"] == "nearest" else "edgec_resize_bilinear_s8"

    def emit(self, op, graph, names) -> CCall:
        p = names.symbol(op, "desc")
        struct = UPSAMPLE_NEAREST_DESC if op.attrs["mode"] == "nearest" else RESIZE_BILINEAR_DESC
        call = descriptor(struct, p, op.attrs["desc"])
        call.code = f"status |= {op.kernel.function}(&{p}, {names.ptr(op.inputs[0])}, {names.ptr(op.outputs[0])});"
        return call


class Reduce(OpDef):
    """sum, mean (other than over the spatial axes: a pool), amax, amin over any axes."""

    kind, c_function = "reduce", "edgec_reduce_s8"
    targets = frozenset(REDUCTIONS)
    runtime_sources = ("movement/edgec_reduce_s8.c",)
    fuses_activation = True
    limits = "sum without a dtype"

    def annotate(self, node) -> None:
        if node.target in (aten.amax.default, aten.amin.default):
            annotate_shared(node)
        else:
            annotate(node, activation_inputs(node, 1), ACTIVATION_QSPEC)

    def check(self, node) -> str | None:
        if node.target == aten.sum.dim_IntList and node.kwargs.get("dtype") is not None:
            return "sum with a dtype"
        return None

    def lower(self, ctx, node) -> None:
        x = ctx.tensor(node.args[0])
        op = {aten.amax.default: "max", aten.amin.default: "min", aten.sum.dim_IntList: "sum"}.get(node.target, "mean")
        dims = node.args[1] if len(node.args) > 1 and node.args[1] not in (None, []) else list(range(len(x.shape)))
        ctx.add_op(
            self.kind,
            node,
            [x],
            [ctx.output(node)],
            reduction=op,
            dims=sorted({int(d) % len(x.shape) for d in dims}),
            clamp=(None, None),
        )

    def layout_ties(self, op, graph) -> list[str]:
        """Channels-last data reduced over spatial axes only (not batch or channels) stays channels
        last, keepdim or not: the kept axes are then stored in the input's order."""
        x, out = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        same_rank = len(out.shape) == len(x.shape)
        spatial_only = len(out.shape) >= 3 and not {0, 1} & set(op.attrs["dims"])
        return [op.inputs[0]] if same_rank or spatial_only else []

    def lower_mean(self, ctx, node, x, dims: list[int]) -> None:
        """A mean over `dims` standing for another op (a global average pool), at its input's
        qparams unless a quantize follows (across views: a program that leaves the mean in float,
        `mean -> flatten -> Q(b)`, rounds once, at b; kws_conv1d's AdaptiveAvgPool1d)."""
        out = ctx.output(node, qparams_of=None if ctx.quantized_through_views(node) else x)
        ctx.add_op(self.kind, node, [x], [out], reduction="mean", dims=dims, clamp=(None, None))

    def relayout(self, op, graph) -> None:
        x, out = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        op.attrs["stored_dims"] = [x.stored_axis(d) for d in op.attrs["dims"]]
        kept = [axis for axis in (x.perm or range(len(x.shape))) if axis is not None and axis not in op.attrs["dims"]]
        if len(out.torch_shape) == len(x.torch_shape):  # keepdim
            order = [
                axis
                for axis in (out.perm or range(len(out.shape)))
                if axis is not None and axis not in op.attrs["dims"]
            ]
        else:
            renumber = [axis for axis in range(len(x.torch_shape)) if axis not in op.attrs["dims"]]
            order = [renumber[axis] for axis in (out.perm or range(len(out.shape))) if axis is not None]
        if [a for a in kept if x.torch_shape[a] > 1] != [a for a in order if x.torch_shape[a] > 1]:
            raise EdgecError(f"{op.source}: the reduction's output is stored in another order than its input")

    def finalize(self, op, graph) -> None:
        x, out = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        bounds = activation_bounds(out.zero_point, out.scale, *op.attrs["clamp"])
        try:
            op.attrs["desc"] = reduce_desc(
                x.shape,
                op.attrs["stored_dims"],
                op.attrs["reduction"],
                input_scale=x.scale,
                input_zero_point=x.zero_point,
                output_scale=out.scale,
                output_zero_point=out.zero_point,
                act_min=bounds[0],
                act_max=bounds[1],
            )
        except ValueError as exc:
            raise EdgecError(f"{op.source}: {exc}") from None

    def golden(self, op, graph, inputs):
        return reduce_s8(op.attrs["desc"], inputs[0]).reshape(graph.tensors[op.outputs[0]].shape)

    def emit(self, op, graph, names) -> CCall:
        p = names.symbol(op, "desc")
        call = descriptor(REDUCE_DESC, p, op.attrs["desc"])
        call.code = f"status |= {op.kernel.function}(&{p}, {names.ptr(op.inputs[0])}, {names.ptr(op.outputs[0])});"
        return call


REDUCE = Reduce()
UNITS = (Copy(), ConstantPad(), Resize(), REDUCE)
