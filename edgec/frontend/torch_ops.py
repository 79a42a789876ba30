"""The ATen operators edgec understands, grouped by how they quantize and lower.

Both spellings are listed where torch.export's training IR and the decomposed core-ATen IR differ
(a user's own PT2E program may come in either).
"""

import operator

import torch

aten = torch.ops.aten


def module_attribute(module: torch.nn.Module, target: str):
    """A get_attr node's value: `target` may be dotted (a submodule's buffer, "affine.shift")."""
    value = module
    for part in target.split("."):
        value = getattr(value, part)
    return value


CONVS = {aten.conv1d.default, aten.conv2d.default, aten.convolution.default}
CONV_TRANSPOSES = {aten.conv_transpose1d.default, aten.conv_transpose2d.input}
LINEARS = {aten.linear.default}
ADDS = {aten.add.Tensor}
SOFTMAXES = {aten.softmax.int, aten._softmax.default}
LOG_SOFTMAXES = {aten.log_softmax.int, aten._log_softmax.default}


@torch.library.custom_op("edgec::masked_softmax", mutates_args=())
def masked_softmax(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis of `x` among the elements where `keep` (bool, broadcast to x)
    is true, 0 elsewhere: attention with a mask (passes/normalize.py writes SDPA's constant
    attn_mask or is_causal as this). A row that keeps nothing is all 0 (PyTorch's gives NaN)."""
    return torch.nan_to_num(torch.softmax(x.masked_fill(~keep, float("-inf")), -1), nan=0.0)


@masked_softmax.register_fake
def _(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


MASKED_SOFTMAXES = {torch.ops.edgec.masked_softmax.default}


@torch.library.custom_op("edgec::input_masked_softmax", mutates_args=())
def input_masked_softmax(
    x: torch.Tensor, mask: torch.Tensor, ignore: bool, also: torch.Tensor | None = None
) -> torch.Tensor:
    """Softmax over the last axis of scores `x` ([B, ..., S]) among the keys a model input `mask`
    ([B, S], bool) keeps: those where it is False when `ignore` (MHA's key_padding_mask), True
    otherwise (a bool attn_mask); 0 elsewhere, a row keeping nothing all 0 (PyTorch: NaN). `also`:
    a constant bool mask (broadcast to x) that must keep an element too (a causal attn_mask added
    to the key_padding_mask, as nn.MultiheadAttention merges them)."""
    keep = (mask != 0) != ignore
    keep = keep.reshape(keep.shape[0], *([1] * (x.dim() - 2)), keep.shape[-1])
    if also is not None:
        keep = keep & also
    return torch.nan_to_num(torch.softmax(x.masked_fill(~keep, float("-inf")), -1), nan=0.0)


@input_masked_softmax.register_fake
def _(x: torch.Tensor, mask: torch.Tensor, ignore: bool, also: torch.Tensor | None = None) -> torch.Tensor:
    return torch.empty_like(x)


INPUT_MASKED_SOFTMAXES = {torch.ops.edgec.input_masked_softmax.default}


@torch.library.custom_op("edgec::l2_normalize", mutates_args=())
def l2_normalize(x: torch.Tensor, dim: int, eps: float) -> torch.Tensor:
    """F.normalize(x, 2, dim, eps): x over max(its L2 norm along dim, eps) (passes/normalize.py
    writes the exported norm -> clamp_min -> expand_as -> div chain as this; TFLite's
    L2_NORMALIZATION)."""
    return torch.nn.functional.normalize(x, 2.0, dim, eps)


@l2_normalize.register_fake
def _(x: torch.Tensor, dim: int, eps: float) -> torch.Tensor:
    return torch.empty_like(x)


L2_NORMALIZES = {torch.ops.edgec.l2_normalize.default}
ARGMAXES = {aten.argmax.default}
# torch target -> the comparison (edgec.ops.select: only ever the condition of a select below)
COMPARISONS = {
    getattr(getattr(aten, cmp), overload): cmp
    for cmp in ("gt", "ge", "lt", "le", "eq", "ne")
    for overload in ("Tensor", "Scalar")
}
# torch target -> how it selects: where(cond, a, b), or masked_fill(x, cond, v) = where(cond, v, x)
SELECTS = {
    aten.where.self: "where",
    aten.where.ScalarOther: "where",
    aten.where.ScalarSelf: "where",
    aten.where.Scalar: "where",
    aten.masked_fill.Scalar: "masked_fill",
    aten.masked_fill.Tensor: "masked_fill",
}
# torch target -> how it combines bool conditions (`&`, `|`, `~` on bools are the bitwise ops)
LOGICALS = {
    aten.logical_and.default: "and",
    aten.bitwise_and.Tensor: "and",
    aten.__and__.Tensor: "and",
    aten.logical_or.default: "or",
    aten.bitwise_or.Tensor: "or",
    aten.__or__.Tensor: "or",
    aten.logical_not.default: "not",
    aten.bitwise_not.default: "not",
}
SCALAR_TENSORS = {aten.scalar_tensor.default}  # the core-ATen IR's spelling of a select's Python scalar
EMBEDDINGS = {aten.embedding.default}  # token ids (an integer model input) -> rows of a table
ACTIVATIONS = {
    aten.relu.default,
    aten.relu_.default,
    aten.relu6.default,
    aten.hardtanh.default,
    aten.hardtanh_.default,
    aten.clamp.default,
}
MAX_POOLS = {
    aten.max_pool1d.default,
    aten.max_pool2d.default,
    aten.max_pool2d_with_indices.default,
    aten.max_pool1d_with_indices.default,
}
AVG_POOLS = {aten.avg_pool1d.default, aten.avg_pool2d.default}
ADAPTIVE_POOLS = {aten.adaptive_avg_pool1d.default, aten.adaptive_avg_pool2d.default}
MEANS = {aten.mean.dim}
POOLS = MAX_POOLS | AVG_POOLS | ADAPTIVE_POOLS | MEANS
VIEWS = {
    aten.flatten.using_ints,
    aten.view.default,
    aten.reshape.default,
    aten._unsafe_view.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.unsqueeze.default,
    aten.unflatten.int,
}
PADS = {aten.pad.default, aten.constant_pad_nd.default}
# Ops whose output keeps the input's qparams because their kernel does not requantize.
SHARED_QPARAMS = POOLS | VIEWS | PADS | {aten.dropout.default}
BATCH_NORMS = {aten.batch_norm.default, aten._native_batch_norm_legit_no_training.default}
# Ops that vanish at inference (passes/normalize.py removes them before anything else runs).
IDENTITIES = {
    aten.dropout.default,
    aten.feature_dropout.default,
    aten.alpha_dropout.default,
    aten.feature_alpha_dropout.default,
    aten.clone.default,
    aten.contiguous.default,
    aten.alias.default,
    aten.detach.default,
    aten.lift_fresh_copy.default,
    aten._assert_tensor_metadata.default,  # export's check of a .float() / .to(dtype); nothing reads it
}
GETITEM = operator.getitem
# Operators passes/normalize.py rewrites into the primitives edgec lowers (layer norm, batch norm,
# matmul, softmax).
GROUP_NORMS = {aten.group_norm.default, aten.instance_norm.default}
DECOMPOSED = GROUP_NORMS | {
    aten.clamp.Tensor,  # max then min
    aten.scaled_dot_product_attention.default,
    aten.conv1d.padding,  # padding="same" / "valid": numbers (and a zero pad where uneven)
    aten.conv2d.padding,
    aten.glu.default,  # a slice times the sigmoid of the other
    aten.linalg_vector_norm.default,  # F.normalize's chain: edgec.l2_normalize
    aten.square.default,  # x ** 2
    aten.upsample_nearest1d.vec,  # the 2-D resize of [N, C, 1, L]
    aten.upsample_linear1d.vec,
    aten.adaptive_max_pool1d.default,  # amax, or max pooling by equal windows
    aten.adaptive_max_pool2d.default,
    aten.var.dim,  # mean of squared deviations (and its sqrt for std)
    aten.var.correction,
    aten.std.dim,
    aten.std.correction,
    aten.einsum.default,  # PyTorch's own permutes, reshapes, bmm, mul and sum
    aten.max.dim,  # values amax, indices argmax
    aten.min.dim,  # values amin (its indices are refused)
    aten.mm.default,  # with one constant matrix: a linear layer (matmul and bmm likewise)
    aten.fft_rfft.default,  # |rfft(x)|: linear layers of DFT rows, sqrt(re^2 + im^2)
    aten.stft.default,  # |stft(x)|: strided 1-D convolutions of windowed DFT rows, likewise
}
# Other spellings of one operator (passes/normalize.py renames them): torch.clip, torch.max(a, b).
ALIASES = {
    aten.clip.default: aten.clamp.default,
    aten.clip.Tensor: aten.clamp.Tensor,
    aten.max.other: aten.maximum.default,
    aten.min.other: aten.minimum.default,
}

# Data movement run as strided copies (edgec.ops.movement.Copy); the multi-output ones return a
# tuple that getitem nodes pick from.
MULTI_OUTPUT_COPIES = {
    aten.split.Tensor,
    aten.split_with_sizes.default,
    aten.chunk.default,
    aten.unbind.int,
    aten.tensor_split.sections,
    aten.tensor_split.indices,
}
# Copies that pick elements by a constant index tensor.
# x.index_select(d, i), x[:, i], torch.gather(x, d, i)
INDEXED_COPIES = {aten.index_select.default, aten.index.Tensor, aten.gather.default}
COPIES = (
    {
        aten.cat.default,
        aten.concat.default,
        aten.stack.default,
        aten.permute.default,
        aten.transpose.int,
        aten.t.default,
        aten.slice.Tensor,
        aten.select.int,
        aten.narrow.default,
        aten.expand.default,
        aten.repeat.default,
        aten.flip.default,
        aten.roll.default,
        aten.pixel_shuffle.default,
        aten.pixel_unshuffle.default,
        aten.channel_shuffle.default,
        aten.movedim.int,
        aten.swapaxes.default,
        aten.tile.default,
        aten.hstack.default,
        aten.vstack.default,
    }
    | MULTI_OUTPUT_COPIES
    | INDEXED_COPIES
)
NEAREST_RESIZES = {aten.upsample_nearest2d.vec, aten.upsample_nearest2d.default}
RESIZES = NEAREST_RESIZES | {aten.upsample_bilinear2d.vec, aten.upsample_bilinear2d.default}
REDUCTIONS = {aten.sum.dim_IntList, aten.amax.default, aten.amin.default}
