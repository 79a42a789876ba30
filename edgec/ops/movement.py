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
from collections.abc import Sequence

import numpy as np

from edgec.numerics import INT8_MAX, INT8_MIN, quantize_multiplier, requantize, saturate_int8, wrap_int32

MAX_DIMS = 6  # EDGEC_MAX_DIMS: the rank of a descriptor after simplification


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


def copy_desc(dims, input_strides, output_strides, *, input_elements: int, output_elements: int,
              input_start: int = 0, output_start: int = 0) -> dict:
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
    for name, strides, start, size in (("input", i_s, input_start, input_elements),
                                       ("output", o_s, output_start, output_elements)):
        low, high = _span(d, strides, start)
        if low < 0 or high >= size:
            raise ValueError(f"the copy reaches {name} elements {low}..{high} of {size}")
    return dict(rank=len(d), dims=tuple(d), input_strides=tuple(i_s), output_strides=tuple(o_s),
                input_start=int(input_start), output_start=int(output_start),
                input_elements=int(input_elements), output_elements=int(output_elements))


def copy_desc_for_permute(shape, perm) -> dict:
    """torch.permute / np.transpose of a contiguous tensor into a contiguous output."""
    shape = _check_shape(shape)
    if sorted(perm) != list(range(len(shape))):
        raise ValueError(f"{perm} is not a permutation of {len(shape)} axes")
    out_shape = [shape[p] for p in perm]
    strides = contiguous_strides(shape)
    return copy_desc(out_shape, [strides[p] for p in perm], contiguous_strides(out_shape),
                     input_elements=math.prod(shape), output_elements=math.prod(shape))


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
    return copy_desc(out_shape, strides, contiguous_strides(out_shape), input_start=input_start,
                     input_elements=math.prod(shape), output_elements=math.prod(out_shape))


def copy_descs_for_cat(shapes, axis: int) -> list[dict]:
    """torch.cat / np.concatenate of contiguous tensors along `axis`: one edgec_copy_s8 call per
    input, each writing its block of the contiguous output at the block's offset."""
    shapes = [_check_shape(s) for s in shapes]
    rank = len(shapes[0])
    axis = range(rank)[axis]
    if any(len(s) != rank or s[:axis] + s[axis + 1:] != shapes[0][:axis] + shapes[0][axis + 1:] for s in shapes):
        raise ValueError(f"cannot concatenate {shapes} along axis {axis}")
    out_shape = list(shapes[0])
    out_shape[axis] = sum(s[axis] for s in shapes)
    out_strides = contiguous_strides(out_shape)
    descs, at = [], 0
    for shape in shapes:
        descs.append(copy_desc(shape, contiguous_strides(shape), out_strides, output_start=at * out_strides[axis],
                               input_elements=math.prod(shape), output_elements=math.prod(out_shape)))
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
    return copy_desc(out_shape, in_strides, contiguous_strides(out_shape),
                     input_elements=math.prod(shape), output_elements=math.prod(out_shape))


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
    result[_offsets(dims, desc["output_strides"], desc["output_start"])] = \
        x[_offsets(dims, desc["input_strides"], desc["input_start"])]
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
    return dict(rank=len(groups), input_dims=tuple(g[0] for g in groups), pad_before=tuple(g[1] for g in groups),
                pad_after=tuple(g[2] for g in groups), fill=int(fill))


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


def _scale_10(in_size: int, out_size: int, align_corners: bool) -> int:
    """TFLite's height_scale_10 / width_scale_10: in/out (or (in-1)/(out-1) with align_corners
    and out > 1) in units of 1/1024, rounded half up."""
    if align_corners and out_size > 1:
        return (ONE * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    return (ONE * in_size + out_size // 2) // out_size


def bilinear_axis_table(in_size: int, out_size: int, align_corners: bool, half_pixel_centers: bool) -> np.ndarray:
    """For each output position: (lower, upper, fraction) as TFLite's
    ComputeInterpolationValuesInteger gives them: scaled = y*s (+ s/2 - 512 with half-pixel
    centres), lower = max(scaled / 1024, 0), upper = min(ceil(scaled / 1024), in - 1) (C division),
    fraction = scaled - 1024*lower (negative near the start with half-pixel centres, where
    lower == upper == 0). int16 [out_size, 3]. Raises ValueError where TFLite would read past the
    input (lower > in - 1, possible only with extreme size ratios)."""
    s = _scale_10(in_size, out_size, align_corners)
    y = np.arange(out_size, dtype=np.int64)
    scaled = y * s + (s // 2 - ONE // 2 if half_pixel_centers else 0)
    lower = np.maximum(_c_div(scaled, ONE), 0)
    upper = np.minimum(_c_div(scaled + ONE - 1, ONE), in_size - 1)
    if (lower > in_size - 1).any():
        raise ValueError(f"TFLite's integer bilinear resize reads past the input from {in_size} to {out_size}")
    return np.stack([lower, upper, scaled - ONE * lower], axis=1).astype(np.int16)


def resize_bilinear_desc(shape, out_hw, *, align_corners: bool = False, half_pixel_centers: bool = True) -> dict:
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
    return dict(batches=n, input_h=h, input_w=w, channels=c, output_h=oh, output_w=ow,
                y_table=bilinear_axis_table(h, oh, align_corners, half_pixel_centers).ravel(),
                x_table=bilinear_axis_table(w, ow, align_corners, half_pixel_centers).ravel())


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
        if ((lower < 0) | (lower >= size) | (upper < 0) | (upper >= size) | (np.abs(fraction) > ONE)
                | ((fraction < 0) & (lower != upper))).any():
            raise ValueError(f"{name} is not a table of bilinear_axis_table's form")
    x = np.asarray(x, dtype=np.int8).reshape(n, h, w, c).astype(np.int64)
    y0, y1, fy = np.asarray(desc["y_table"], np.int64).reshape(-1, 3).T
    x0, x1, fx = np.asarray(desc["x_table"], np.int64).reshape(-1, 3).T
    fy, fx = fy[None, :, None, None], fx[None, None, :, None]
    top, bottom = x[:, y0], x[:, y1]
    v = (top[:, :, x0] * (ONE - fy) * (ONE - fx) + bottom[:, :, x0] * fy * (ONE - fx)
         + top[:, :, x1] * (ONE - fy) * fx + bottom[:, :, x1] * fy * fx)
    half = 1 << (2 * FRACTION_BITS - 1)
    return _c_div(np.where(v > 0, v + half, v - half), 1 << (2 * FRACTION_BITS)).astype(np.int8).ravel()


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


def reduce_desc(shape, axes, op: str, *, input_scale: float = 1.0, input_zero_point: int = 0,
                output_scale: float = 1.0, output_zero_point: int = 0, act_min: int = INT8_MIN,
                act_max: int = INT8_MAX) -> dict:
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
    return dict(op=REDUCE_OPS[op], kept_rank=len(kept), kept_dims=tuple(k[0] for k in kept),
                kept_strides=tuple(k[1] for k in kept), reduced_rank=len(reduced),
                reduced_dims=tuple(r[0] for r in reduced), reduced_strides=tuple(r[1] for r in reduced),
                sum_offset=sum_offset, multiplier=int(multiplier), shift=int(shift),
                output_offset=int(output_zero_point),
                act_min=int(act_min), act_max=int(act_max))


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
