"""2-D pooling (average and max, NHWC): golden int8 kernels and op units.

C kernels: runtime_c/src/pool/edgec_avgpool_s8.c and edgec_maxpool_s8.c, one descriptor
(edgec_pool2d_desc) for the average and max pools. Padding: pad_top/pad_left
are explicit, bottom/right padding is implied by out_hw; padded taps never contribute. Every
output window must overlap the input (the C kernels reject other geometries with EDGEC_ARG_ERROR).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from edgec.errors import EdgecError
from edgec.frontend.export import source_line
from edgec.frontend.torch_ops import ADAPTIVE_POOLS, AVG_POOLS, GETITEM, MAX_POOLS, MEANS, POOLS
from edgec.ir import Tensor
from edgec.numerics import INT8_MAX, INT8_MIN, activation_bounds, saturate_int8
from edgec.ops.base import CCall, OpDef, descriptor
from edgec.ops.kernel import Field, Struct, ints
from edgec.ops.qspec import annotate_shared

MAX_DIVISOR = 1 << 23  # EDGEC_AVG_POOL2D_MAX_DIVISOR: (divisor - taps) * zero point stays inside int32

# The C structs of this unit's kernels (edgec.ops.kernel); edgec_nn.h's are generated from these.
POOL2D_DESC = Struct(
    "edgec_pool2d_desc",
    (
        *ints("batches input_h input_w channels output_h output_w filter_h filter_w stride_h stride_w"),
        *ints("pad_top pad_left"),
        Field("count_include_pad", doc="edgec_avg_pool2d_s8: 0 or 1; else 0"),
        Field("divisor_override", doc="edgec_avg_pool2d_s8: 0 (none) to EDGEC_AVG_POOL2D_MAX_DIVISOR; else 0"),
        Field("zero_point", doc="edgec_avg_pool2d_s8: the input's, the value of a tap outside it (real 0)"),
        *ints("act_min act_max"),
    ),
)
ADAPTIVE_AVG_POOL_DESC = Struct(
    "edgec_adaptive_avg_pool_desc", (*ints("batches input_h input_w channels output_h output_w act_min act_max"),)
)
STRUCTS = (
    POOL2D_DESC,
    ADAPTIVE_AVG_POOL_DESC,
)


def _check_axis(name: str, in_size: int, out_size: int, k: int, s: int, p: int) -> None:
    """Same rule as the C pool_axis_valid: windows move monotonically, so check first and last."""
    if in_size < 1 or out_size < 1 or k < 1 or s < 1 or p < 0:
        raise ValueError(f"bad pool {name} geometry: in={in_size} out={out_size} kernel={k} stride={s} pad={p}")
    if p >= k or (out_size - 1) * s - p >= in_size:
        raise ValueError(
            f"pool {name}: some output window lies entirely in padding "
            f"(in={in_size} out={out_size} kernel={k} stride={s} pad={p})"
        )


def _taps(x: np.ndarray, kernel, stride, pad, out_hw) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield, for each kernel tap (ky, kx), the gathered values [N, Ho, Wo, C] and a [Ho, Wo]
    in-bounds mask. Vectorised over pixels; the Python loop is only over the kh*kw taps."""
    if x.dtype != np.int8 or x.ndim != 4:
        raise TypeError(f"pooling expects an int8 NHWC tensor, got {x.dtype} {x.shape}")
    _, h, w, _ = x.shape
    (kh, kw), (sh, sw), (pt, pl), (ho, wo) = kernel, stride, pad, out_hw
    _check_axis("height", h, ho, kh, sh, pt)
    _check_axis("width", w, wo, kw, sw, pl)
    oy = np.arange(ho) * sh - pt
    ox = np.arange(wo) * sw - pl
    for ky in range(kh):
        iy = oy + ky
        valid_y = (iy >= 0) & (iy < h)
        if not valid_y.any():
            continue
        rows = x[:, np.clip(iy, 0, h - 1)]
        for kx in range(kw):
            ix = ox + kx
            valid_x = (ix >= 0) & (ix < w)
            if not valid_x.any():
                continue
            yield rows[:, :, np.clip(ix, 0, w - 1)], valid_y[:, None] & valid_x[None, :]


def avg_pool2d_s8(
    x,
    *,
    kernel,
    stride,
    pad,
    out_hw,
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
    divisor: str | int = "in_bounds",
    zero_point: int = 0,
) -> np.ndarray:
    """Golden int8 average pool, bit-exact with edgec_avgpool_s8 (divisor "in_bounds") and
    edgec_avg_pool2d_s8 (any divisor).

    x int8 NHWC; kernel=(kh, kw), stride=(sh, sw), pad=(pad_top, pad_left), out_hw=(Ho, Wo).
    y = clamp(trunc_div(sum > 0 ? sum + n//2 : sum - n//2, n)), the sum over the in-bounds taps,
    n by `divisor`: "in_bounds" the number of those taps (TFLite); "include_pad" PyTorch's
    count_include_pad=True, (hend - hstart) * (wend - wstart) with hstart = oy*sh - pad_top and
    hend = min(hstart + kh, H + pad_top) (the window clipped to the padded input); an int > 0
    that value (PyTorch's divisor_override). ceil_mode is only an out_hw (pool_output_size).
    Taps a divisor counts outside the input hold real 0 (PyTorch pads with zeros), the value
    zero_point: the sum gains (n - in-bounds taps) * zero_point.
    """
    x = np.asarray(x)
    total = None
    count = None
    for values, valid in _taps(x, kernel, stride, pad, out_hw):
        contrib = np.where(valid[None, :, :, None], values.astype(np.int64), 0)
        total = contrib if total is None else total + contrib
        count = valid.astype(np.int64) if count is None else count + valid
    n = _divisor(divisor, count, x.shape[1:3], kernel, stride, pad, out_hw)[None, :, :, None]
    total = total + (n - count[None, :, :, None]) * int(zero_point)
    num = np.where(total > 0, total + n // 2, total - n // 2)
    mean = np.sign(num) * (np.abs(num) // n)  # C truncating division
    return saturate_int8(mean, act_min, act_max)


def adaptive_windows(in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's adaptive pooling windows along one axis: [start, end) of output o is
    [floor(o * in / out), ceil((o + 1) * in / out)) -- uneven where out does not divide in."""
    o = np.arange(out_size, dtype=np.int64)
    return o * in_size // out_size, ((o + 1) * in_size + out_size - 1) // out_size


def adaptive_avg_pool2d_s8(x, *, out_hw, act_min: int = INT8_MIN, act_max: int = INT8_MAX) -> np.ndarray:
    """Golden int8 adaptive average pool (PyTorch's windows, adaptive_windows), bit-exact with
    edgec_adaptive_avg_pool_s8: per window, y = clamp(trunc_div(sum > 0 ? sum + n/2 : sum - n/2, n))
    with n the window's taps (avg_pool2d_s8's rounding). x int8 NHWC; input and output share qparams."""
    x = np.asarray(x)
    if x.dtype != np.int8 or x.ndim != 4:
        raise TypeError(f"pooling expects an int8 NHWC tensor, got {x.dtype} {x.shape}")
    (hs, he), (ws, we) = (adaptive_windows(size, out) for size, out in zip(x.shape[1:3], out_hw))
    out = np.zeros((x.shape[0], len(hs), len(ws), x.shape[3]), np.int64)
    for i in range(len(hs)):
        for j in range(len(ws)):
            total = x[:, hs[i] : he[i], ws[j] : we[j]].astype(np.int64).sum(axis=(1, 2))
            n = (he[i] - hs[i]) * (we[j] - ws[j])
            num = np.where(total > 0, total + n // 2, total - n // 2)
            out[:, i, j] = np.sign(num) * (np.abs(num) // n)
    return saturate_int8(out, act_min, act_max)


def adaptive_avg_pool2d_desc(input_shape, *, out_hw, act_min: int = INT8_MIN, act_max: int = INT8_MAX) -> dict:
    """The field values of edgec_adaptive_avg_pool_desc in declaration order (NHWC input_shape)."""
    n, h, w, c = (int(v) for v in input_shape)
    return dict(
        batches=n,
        input_h=h,
        input_w=w,
        channels=c,
        output_h=int(out_hw[0]),
        output_w=int(out_hw[1]),
        act_min=int(act_min),
        act_max=int(act_max),
    )


def _divisor(divisor, in_bounds: np.ndarray, in_hw, kernel, stride, pad, out_hw) -> np.ndarray:
    """avg_pool2d_s8's [Ho, Wo] divisors."""
    if divisor == "in_bounds":
        return in_bounds
    if divisor == "include_pad":
        extents = []
        for size, k, s, p, o in zip(in_hw, kernel, stride, pad, out_hw):
            start = np.arange(o, dtype=np.int64) * s - p
            extents.append(np.minimum(start + k, size + p) - start)
        return extents[0][:, None] * extents[1][None, :]
    if isinstance(divisor, (int, np.integer)) and not isinstance(divisor, bool) and 0 < divisor <= MAX_DIVISOR:
        return np.full(in_bounds.shape, int(divisor), dtype=np.int64)
    raise ValueError(f"divisor must be 'in_bounds', 'include_pad' or an int in 1..2^23, got {divisor!r}")


def pool_output_size(in_size: int, kernel: int, stride: int, pad: int, ceil_mode: bool = False) -> int:
    """PyTorch's pooling output length: floor (or ceil) of (in + 2*pad - kernel) / stride, plus
    1, less the last window with ceil_mode when it would start in the bottom/right padding."""
    span = in_size + 2 * pad - kernel
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= in_size + pad:
        out -= 1
    return out


def pool2d_desc(
    input_shape,
    *,
    kernel,
    stride,
    pad,
    out_hw,
    divisor: str | int = "in_bounds",
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
    zero_point: int = 0,
) -> dict:
    """The field values of edgec_pool2d_desc in declaration order, for avg_pool2d_s8's (or
    max_pool2d_s8's) arguments (NHWC input_shape; divisor as there)."""
    n, h, w, c = (int(v) for v in input_shape)
    _divisor(divisor, np.zeros((1, 1), np.int64), (h, w), kernel, stride, pad, (1, 1))  # validates it
    return dict(
        batches=n,
        input_h=h,
        input_w=w,
        channels=c,
        output_h=int(out_hw[0]),
        output_w=int(out_hw[1]),
        filter_h=int(kernel[0]),
        filter_w=int(kernel[1]),
        stride_h=int(stride[0]),
        stride_w=int(stride[1]),
        pad_top=int(pad[0]),
        pad_left=int(pad[1]),
        count_include_pad=int(divisor == "include_pad"),
        divisor_override=divisor if isinstance(divisor, (int, np.integer)) else 0,
        zero_point=int(zero_point),
        act_min=int(act_min),
        act_max=int(act_max),
    )


def max_pool2d_s8(x, *, kernel, stride, pad, out_hw, act_min: int = INT8_MIN, act_max: int = INT8_MAX) -> np.ndarray:
    """Golden int8 max pool, bit-exact with edgec_maxpool_s8: max over in-bounds taps, then clamp.
    Arguments as avg_pool2d_s8."""
    x = np.asarray(x)
    best = None
    for values, valid in _taps(x, kernel, stride, pad, out_hw):
        # INT8_MIN is the identity of max over int8, so padded taps can simply take it.
        contrib = np.where(valid[None, :, :, None], values, np.int8(INT8_MIN))
        best = contrib if best is None else np.maximum(best, contrib)
    return saturate_int8(best, act_min, act_max)


# -- the op units -------------------------------------------------------------------------------


def _pair(v, default=None) -> tuple[int, int]:
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return default
    return (int(v[0]), int(v[-1])) if isinstance(v, (list, tuple)) else (int(v), int(v))


def _arg(node, index, default):
    return node.args[index] if len(node.args) > index else default


class Pool2d(OpDef):
    """avg/max pooling in 2-D and 1-D (as H = 1), global average (adaptive pooling to 1, mean over
    the spatial axes) included. A mean over other axes is a reduction (edgec.ops.movement)."""

    targets = frozenset(POOLS)
    family = "max_pool2d / avg_pool2d"
    runtime_sources = ("pool/edgec_avgpool_s8.c", "pool/edgec_maxpool_s8.c")
    fuses_activation = True
    spatial = True
    keeps_qparams = True
    limits = f"max pooling undilated, its values only (no indices); avg_pool2d divisor_override 1..{MAX_DIVISOR}"
    pooling = ""  # "avg" or "max": what the subclass's kernels compute (its kind may name a library's)

    def describe(self, node) -> str:
        if node.target in MEANS:
            spatial = is_spatial_mean(node, len(node.args[0].meta["val"].shape))
            return "global average pool (mean over the spatial axes)" if spatial else "reduce (mean)"
        return "max_pool2d" if node.target in MAX_POOLS else "avg_pool2d"

    def annotate(self, node) -> None:
        if node.target in MEANS and not is_spatial_mean(node, len(node.args[0].meta["val"].shape)):
            return reduction_unit().annotate(node)
        annotate_shared(node)

    def check(self, node) -> str | None:
        if node.target in MAX_POOLS and _pair(_arg(node, 4, 1)) != (1, 1):
            return "dilated max pooling"
        if any(user.target == GETITEM and user.args[1] != 0 for user in node.users):
            return "max pooling's indices (return_indices=True) used; only its values compile"
        if node.target in AVG_POOLS and not 0 < (_arg(node, 6, None) or 1) <= MAX_DIVISOR:
            return f"avg_pool2d with divisor_override {_arg(node, 6, None)} (1..{MAX_DIVISOR} supported)"
        return None

    def lower(self, ctx, node) -> None:
        if node.target in MEANS and not is_spatial_mean(node, len(ctx.tensor(node.args[0]).shape)):
            return reduction_unit().lower(ctx, node)
        x = ctx.tensor(node.args[0])
        if len(x.shape) not in (3, 4):
            raise EdgecError(f"{source_line(node)}: pooling needs an NCL or NCHW input, got {list(x.shape)}")
        kind, kernel, stride, padding, divisor = self._window(node, x.shape)
        spatial = tuple(x.shape[2:]) if len(x.shape) == 4 else (1, x.shape[2])
        if ctx.converter_semantics and node.target in MEANS | ADAPTIVE_POOLS and tuple(kernel) == spatial:
            # The TFLite converter makes a global average (a mean over H, W or L, or an adaptive pool
            # to 1x1 or 1) a MEAN, whose int8 arithmetic is edgec's mean reduction (one rescale), not
            # AVERAGE_POOL_2D's.
            return reduction_unit().lower_mean(ctx, node, x, dims=[2, 3] if len(x.shape) == 4 else [2])
        keep_dims = node.target not in MEANS or _arg(node, 2, False)
        if keep_dims:
            out = ctx.output(node, qparams_of=x)
        else:  # mean without keepdim: pool to [N,C,1(,1)], then view it as [N,C] for free
            pooled_shape = (*x.shape[:2], *(1,) * (len(x.shape) - 2))
            out = ctx.graph.add_tensor(
                Tensor(f"{node.name}_pooled", pooled_shape, x.scale, x.zero_point, source=node.name, dtype=x.dtype)
            )
        ctx.add_op(
            kind,
            node,
            [x],
            [out],
            kernel=kernel,
            stride=stride,
            pad=(padding[0], padding[1], padding[0], padding[1]),
            divisor=divisor,
            clamp=(None, None),
        )
        if not keep_dims:
            view = ctx.output(node, alias_of=out.name, qparams_of=x)
            ctx.add_op("reshape", node, [out], [view])

    @staticmethod
    def _window(node, shape):
        """(kind, kernel, stride, padding, divisor) in (H, W); a 1-D pool's H entries are neutral."""
        one_d = len(shape) == 3
        spatial = (1, shape[2]) if one_d else (shape[2], shape[3])

        def pair(value, neutral):
            pair_value = _pair(value)
            return (neutral, pair_value[1]) if one_d and pair_value is not None else pair_value

        if node.target in MAX_POOLS:
            kernel = pair(node.args[1], 1)
            return "max_pool2d", kernel, pair(_arg(node, 2, None), 1) or kernel, pair(_arg(node, 3, 0), 0), "in_bounds"
        if node.target in AVG_POOLS:
            kernel, padding = pair(node.args[1], 1), pair(_arg(node, 3, 0), 0)
            override = _arg(node, 6, None) if not one_d else None
            include_pad = _arg(node, 5, True) and padding != (0, 0)
            divisor = override if override is not None else "include_pad" if include_pad else "in_bounds"
            return "avg_pool2d", kernel, pair(_arg(node, 2, None), 1) or kernel, padding, divisor
        if node.target in ADAPTIVE_POOLS:
            out = pair(node.args[1], 1)
            if out[0] > spatial[0] or out[1] > spatial[1]:  # PyTorch repeats input pixels there
                raise EdgecError(
                    f"{source_line(node)}: adaptive average pooling from {spatial} to the larger {out} is not supported"
                )
            uniform = [_uniform_window(size, o) for size, o in zip(spatial, out)]
            if None not in uniform:  # every window one size, evenly spaced: a plain average pool
                return "avg_pool2d", (uniform[0][0], uniform[1][0]), (uniform[0][1], uniform[1][1]), (0, 0), "in_bounds"
            widest = tuple(
                int(max(end - start)) for start, end in (adaptive_windows(size, o) for size, o in zip(spatial, out))
            )
            return "avg_pool2d", widest, (1, 1), (0, 0), "adaptive"
        return "avg_pool2d", spatial, spatial, (0, 0), "in_bounds"  # mean over the spatial axes

    def finalize(self, op, graph) -> None:
        x_t, out_t = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        if (x_t.scale, x_t.zero_point) != (out_t.scale, out_t.zero_point):
            raise EdgecError(
                f"{op.source}: pooling must keep its input's qparams "
                f"({x_t.scale}, {x_t.zero_point}) != ({out_t.scale}, {out_t.zero_point})"
            )
        op.attrs["act_min"], op.attrs["act_max"] = activation_bounds(out_t.zero_point, out_t.scale, *op.attrs["clamp"])

    def golden(self, op, graph, inputs):
        a = op.attrs
        window = dict(
            kernel=a["kernel"],
            stride=a["stride"],
            pad=a["pad"][:2],
            out_hw=graph.tensors[op.outputs[0]].shape[1:3],
            act_min=a["act_min"],
            act_max=a["act_max"],
        )
        if self.pooling == "max":
            return max_pool2d_s8(inputs[0], **window)
        if a["divisor"] == "adaptive":
            return adaptive_avg_pool2d_s8(
                inputs[0], out_hw=window["out_hw"], act_min=a["act_min"], act_max=a["act_max"]
            )
        return avg_pool2d_s8(
            inputs[0], divisor=a["divisor"], zero_point=graph.tensors[op.inputs[0]].zero_point, **window
        )

    def kernel_function(self, op) -> str:
        divisor = op.attrs.get("divisor")
        if divisor == "adaptive":  # PyTorch's uneven adaptive windows
            return "edgec_adaptive_avg_pool_s8"
        if self.pooling == "avg" and divisor != "in_bounds":  # PyTorch's divisors
            return "edgec_avg_pool2d_s8"
        return "edgec_avgpool_s8" if self.pooling == "avg" else "edgec_maxpool_s8"

    def emit(self, op, graph, names) -> CCall:
        a = op.attrs
        x_t, out_t = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        bounds = dict(act_min=a["act_min"], act_max=a["act_max"])
        if a["divisor"] == "adaptive":  # PyTorch's uneven adaptive windows
            struct, values = (
                ADAPTIVE_AVG_POOL_DESC,
                adaptive_avg_pool2d_desc(x_t.shape, out_hw=out_t.shape[1:3], **bounds),
            )
        else:
            window = dict(kernel=a["kernel"], stride=a["stride"], pad=a["pad"][:2], out_hw=out_t.shape[1:3])
            # PyTorch's divisors count taps outside the input as its zero point; the in-bounds one reads none
            zero_point = 0 if a["divisor"] == "in_bounds" else x_t.zero_point
            struct, values = (
                POOL2D_DESC,
                pool2d_desc(x_t.shape, divisor=a["divisor"], zero_point=zero_point, **window, **bounds),
            )
        p = names.symbol(op, "desc")
        call = descriptor(struct, p, values)
        call.code = f"status |= {op.kernel.function}(&{p}, {names.ptr(op.inputs[0])}, {names.ptr(op.outputs[0])});"
        return call


def _uniform_window(in_size: int, out_size: int) -> tuple[int, int] | None:
    """(kernel, stride) when PyTorch's adaptive windows along an axis all have one size and are
    evenly spaced (e.g. 7 -> 3: windows of 3 every 2), else None."""
    start, end = adaptive_windows(in_size, out_size)
    sizes, steps = set((end - start).tolist()), set(np.diff(start).tolist())
    if len(sizes) != 1 or len(steps) > 1:
        return None
    kernel = sizes.pop()
    return kernel, steps.pop() if steps else kernel


def is_spatial_mean(node, rank: int) -> bool:
    """A mean over exactly the spatial axes (H, W of NCHW; L of NCL): a global average pool."""
    return rank in (3, 4) and sorted(d % rank for d in node.args[1]) == list(range(2, rank))


def reduction_unit():
    from edgec.ops.movement import REDUCE  # movement does not import pooling

    return REDUCE


class AvgPool2d(Pool2d):
    kind = "avg_pool2d"
    pooling = "avg"
    runtime_sources = ("pool/edgec_avgpool_s8.c",)


class MaxPool2d(Pool2d):
    kind = "max_pool2d"
    pooling = "max"
    targets = frozenset()
    runtime_sources = ("pool/edgec_maxpool_s8.c",)


UNITS = (AvgPool2d(), MaxPool2d())
