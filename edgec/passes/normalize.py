"""Normalise the exported float graph before anything reads it: in-place ATen spellings become
their functional form, eval-time no-ops disappear (and views become reshapes, which stay valid
without the `contiguous` that may have preceded them), so every later stage (and every op unit)
sees one spelling per operator and a user never has to rewrite `out += identity`.

Attention is decomposed into the primitives edgec quantizes one by one (each with its own
observer): scaled_dot_product_attention(q, k, v) becomes softmax((q @ k^T) * scale) @ v. Ops on
constants alone (the expand of a class token) are folded into constants; a cat that puts constant
rows before or after live ones (a class token) becomes a pad of the live part plus the constant
padded with zeros, and that add merges with a following add of a constant (positional embedding).
"""

from __future__ import annotations

import math
import operator

import torch
from torch.fx import GraphModule, Node
from torch.fx.experimental.proxy_tensor import make_fx

from edgec.frontend.export import take_location
from edgec.frontend.torch_ops import (
    ALIASES,
    COMPARISONS,
    GROUP_NORMS,
    IDENTITIES,
    MEANS,
    PADS,
    REDUCTIONS,
    SOFTMAXES,
    VIEWS,
    module_attribute,
)

aten = torch.ops.aten


def normalize(module: GraphModule) -> GraphModule:
    changed = False
    for node in list(module.graph.nodes):
        if node.op != "call_function":
            continue
        if (functional := functional_form(node.target)) is not None:
            _make_functional(module, node, functional)
            changed = True
        if node.target in ALIASES:
            node.target = ALIASES[node.target]
            changed = True
        if node.target == aten.convolution.default and node.args[6]:
            _as_conv_transpose(node)
            changed = True
        if node.target in (aten.view.default, aten._unsafe_view.default):
            node.target = aten.reshape.default  # stays valid once the no-op `contiguous` before it is gone
            changed = True
        elif node.target in IDENTITIES:
            node.replace_all_uses_with(node.args[0])
            module.graph.erase_node(node)
            changed = True
    changed |= _drop_no_ops(module)
    changed |= _fold_constants(module)
    changed |= _decompose_attention(module)
    changed |= _decompose_masked_baddbmm(module)
    changed |= _decompose_group_norms(module)
    changed |= _top1_as_max_and_argmax(module)
    changed |= _clamp_by_tensors_as_max_and_min(module)
    changed |= _string_padding_as_numbers(module)
    changed |= _glu_as_sigmoid_gate(module)
    changed |= _l2_normalize_chains(module)
    changed |= _square_as_power(module)
    changed |= _resize_1d_as_2d(module)
    changed |= _adaptive_max_as_max(module)
    changed |= _variance_as_mean_of_squares(module)
    changed |= _einsum_as_primitives(module)
    changed |= _spectrum_magnitudes_as_real(module)
    changed |= _constant_matmul_as_linear(module)
    changed |= _division_by_activation_as_reciprocal(module)
    changed |= _views_before_comparisons(module)
    changed |= _constant_cat_as_pad_and_add(module)
    changed |= _merge_constant_adds(module)
    if changed:
        module.graph.eliminate_dead_code()
        module.graph.lint()
        module.recompile()
    return module


def _as_conv_transpose(node: Node) -> None:
    """aten.convolution with transposed=True (core ATen's spelling) as aten.conv_transpose1d/2d, the
    form the transposed convolution unit reads."""
    x, weight, bias, stride, padding, dilation, _, output_padding, groups = node.args
    rank = len(weight.meta["val"].shape)
    node.target = aten.conv_transpose1d.default if rank == 3 else aten.conv_transpose2d.input
    node.args = (x, weight, bias, stride, padding, output_padding, groups, dilation)


def functional_form(target):
    """aten.add.Tensor for aten.add_.Tensor (any in-place `name_` overload), else None."""
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.is_mutable or not schema.name.startswith("aten::") or not schema.name.endswith("_"):
        return None
    packet = getattr(aten, schema.name[len("aten::") : -1], None)
    return getattr(packet, target._overloadname, None) if packet is not None else None


def _make_functional(module: GraphModule, node: Node, functional) -> None:
    """x.op_(...) mutates x: the node becomes x' = op(x, ...) and every later reader of x reads x'."""
    mutated = node.args[0]
    node.target = functional
    if not isinstance(mutated, Node):
        return
    order = {n: i for i, n in enumerate(module.graph.nodes)}
    for user in list(mutated.users):
        if user is not node and order[user] > order[node]:
            user.replace_input_with(mutated, node)


# -- no-ops --------------------------------------------------------------------------------------


def _drop_no_ops(module: GraphModule) -> bool:
    """Ops that leave their input's values as they are vanish before any kernel is chosen (so they
    never cost a layer or block int16): views and pads that keep the shape, identity permutes and
    transposes; a reduction over axes of size 1 becomes the view it is."""
    changed = False
    for node in list(module.graph.nodes):
        if (
            node.op != "call_function"
            or not node.args
            or not isinstance(node.args[0], Node)
            or "val" not in node.meta
            or not isinstance(node.meta["val"], torch.Tensor)
        ):
            continue
        source, result = node.args[0], node.meta["val"]
        if _keeps_values(node) and tuple(result.shape) == tuple(source.meta["val"].shape):
            node.replace_all_uses_with(source)
            module.graph.erase_node(node)
            changed = True
        elif _reduces_size_one_axes(node):
            with module.graph.inserting_before(node):
                view = module.graph.call_function(aten.reshape.default, (source, list(result.shape)))
            _derived(view, node)
            node.replace_all_uses_with(view)
            module.graph.erase_node(node)
            changed = True
    return changed


def _keeps_values(node: Node) -> bool:
    """Whether `node` returns its input's values in their order, if its shape is the input's."""
    if node.target in VIEWS:
        return True
    if node.target in PADS:
        return not any(node.args[1])
    if node.target == aten.permute.default:
        return list(node.args[1]) == sorted(node.args[1], key=lambda d: d % len(node.args[1]))
    if node.target == aten.transpose.int:
        rank = node.args[0].meta["val"].dim()
        return node.args[1] % rank == node.args[2] % rank
    return False


def _reduces_size_one_axes(node: Node) -> bool:
    if node.target not in MEANS | REDUCTIONS or node.kwargs.get("dtype") is not None or len(node.args) < 2:
        return False
    shape, dims = node.args[0].meta["val"].shape, node.args[1]
    return dims not in (None, []) and all(shape[d] == 1 for d in dims)


# -- attention and constants ---------------------------------------------------------------------

SDPA = {aten.scaled_dot_product_attention.default}


def _new_constant(module: GraphModule, before: Node, value: torch.Tensor, hint: str) -> Node:
    """A get_attr node holding `value` (a new buffer of the module), inserted before `before`."""
    index = 0
    while hasattr(module, f"_edgec_{hint}_{index}"):
        index += 1
    name = f"_edgec_{hint}_{index}"
    module.register_buffer(name, value.detach().clone().contiguous())
    with module.graph.inserting_before(before):
        node = module.graph.get_attr(name)
    node.meta["val"] = value
    return node


def _derived(new: Node, origin: Node) -> None:
    """`new` replaces part of `origin`: it takes origin's source location (for messages) and its
    own value metadata, computed from its inputs' (fake) values."""
    take_location(new, origin)

    def value(arg):
        if isinstance(arg, Node):
            return arg.meta["val"]
        return [value(a) for a in arg] if isinstance(arg, (list, tuple)) else arg

    new.meta["val"] = new.target(*[value(a) for a in new.args])


def _constant_value(module: GraphModule, node) -> torch.Tensor | None:
    if isinstance(node, Node) and node.op == "get_attr":
        value = module_attribute(module, node.target)
        return value if isinstance(value, torch.Tensor) else None
    return None


# Ops on constants alone that stay: units lower them (a recurrent layer's zero initial state, a
# Python scalar operand of where).
_KEPT_CONSTANT_OPS = {aten.zeros.default, aten.scalar_tensor.default}


def _foldable(module: GraphModule, node: Node) -> bool:
    """Whether `node` computes a constant from constants alone: an ATen op (not a program's
    quantize / dequantize of its weights, nor a random one) whose every input is a constant, or
    which creates a tensor from numbers (arange, ones, full: a detection head's grid)."""
    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload) or target in _KEPT_CONSTANT_OPS:
        return False
    if target.namespace != "aten" or torch.Tag.nondeterministic_seeded in target.tags:
        return False
    return all(_constant_value(module, arg) is not None for arg in node.all_input_nodes)


def _fold_constants(module: GraphModule) -> bool:
    """Ops on constants alone run now, each giving a constant: data movement of a parameter (a
    class token's expand), a grid from arange and meshgrid, arithmetic of buffers."""
    changed = False
    for node in list(module.graph.nodes):
        if not _foldable(module, node):
            continue
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda arg: _constant_value(module, arg))
        result = node.target(*args, **kwargs)
        if isinstance(result, torch.Tensor):
            node.replace_all_uses_with(_new_constant(module, node, result, "folded"))
        elif isinstance(result, (tuple, list)) and all(user.target is operator.getitem for user in node.users):
            for user in list(node.users):
                user.replace_all_uses_with(_new_constant(module, user, result[user.args[1]], "folded"))
                module.graph.erase_node(user)
        else:
            continue
        module.graph.erase_node(node)
        changed = True
    return changed


def _decompose_attention(module: GraphModule) -> bool:
    """F.scaled_dot_product_attention without dropout as matmuls and softmax; with a constant
    attn_mask (bool, or float holding only 0 and -inf) or is_causal, the softmax is the masked
    softmax of the elements the mask keeps (torch_ops.masked_softmax); with a key padding mask given
    as a model input (and a constant mask added to it, as nn.MultiheadAttention merges attn_mask and
    key_padding_mask), the softmax reads that input at run time (torch_ops.input_masked_softmax)."""
    changed = False
    for node in list(module.graph.nodes):
        if node.op != "call_function" or node.target not in SDPA:
            continue
        q, k, v = node.args[:3]
        options = dict(zip(("attn_mask", "dropout_p", "is_causal"), node.args[3:]), **node.kwargs)
        mask = options.get("attn_mask")
        rows, keys = q.meta["val"].shape[-2], k.meta["val"].shape[-2]
        masking = _attention_mask(module, (q.meta["val"].shape[0], rows, keys), mask, bool(options.get("is_causal")))
        if masking is None or options.get("dropout_p", 0.0) != 0.0 or options.get("enable_gqa"):
            continue  # left for check_supported to report (attention_refusal)
        scale = options.get("scale")
        if scale is None:
            scale = 1.0 / math.sqrt(q.meta["val"].shape[-1])
        graph = module.graph
        with graph.inserting_before(node):
            key_t = graph.call_function(aten.transpose.int, (k, -2, -1))
            scores = graph.call_function(aten.matmul.default, (q, key_t))
            scaled = graph.call_function(aten.mul.Tensor, (scores, float(scale)))
            weights = _masked_softmax(module, node, scaled, masking)
            out = graph.call_function(aten.matmul.default, (weights, v))
        for new in (key_t, scores, scaled, weights, out):
            _derived(new, node)
        node.replace_all_uses_with(out)
        graph.erase_node(node)
        if masking[1] is not None:
            _erase_unused_chain(graph, mask)
        changed = True
    return changed


def _decompose_masked_baddbmm(module: GraphModule) -> bool:
    """nn.MultiheadAttention with need_weights=True (its default) and a mask computes
    softmax(baddbmm(mask, q * scale, k^T)): the scores as a matmul, the softmax masked as for
    scaled_dot_product_attention (a constant mask, a key_padding_mask input, or both added)."""
    changed = False
    for node in list(module.graph.nodes):
        if node.op != "call_function" or node.target not in SOFTMAXES or node.args[1] not in (-1, 2):
            continue
        scores = node.args[0]
        if getattr(scores, "target", None) != aten.baddbmm.default or scores.kwargs or len(scores.users) != 1:
            continue
        mask, a, b = scores.args
        shape = scores.meta["val"].shape
        masking = _attention_mask(module, (shape[0], shape[-2], shape[-1]), mask, False)
        if masking is None or masking == (None, None):
            continue
        graph = module.graph
        with graph.inserting_before(node):
            product = graph.call_function(aten.matmul.default, (a, b))
            weights = _masked_softmax(module, node, product, masking)
        for new in (product, weights):
            _derived(new, node)
        node.replace_all_uses_with(weights)
        graph.erase_node(node)
        graph.erase_node(scores)
        _erase_unused_chain(graph, mask)
        changed = True
    return changed


def _masked_softmax(module: GraphModule, before: Node, scores: Node, masking) -> Node:
    """The softmax over the last axis of `scores` that `masking` ((keep, key): _attention_mask) says."""
    keep, key = masking
    graph = module.graph
    constant = None if keep is None else _new_constant(module, before, keep, "attention_keep")
    if key is not None:  # a padding mask given as a model input, read at run time
        return graph.call_function(torch.ops.edgec.input_masked_softmax.default, (scores, *key, constant))
    if keep is None:
        return graph.call_function(aten.softmax.int, (scores, -1))
    return graph.call_function(torch.ops.edgec.masked_softmax.default, (scores, constant))


_MASK_CHAIN = VIEWS | {aten.expand.default, aten.unsqueeze.default}


def _attention_mask(module: GraphModule, scores: tuple[int, int, int], mask, causal: bool):
    """How attention's softmax is masked, as (keep, key): keep a constant bool mask of the scores
    (None: none), key (model input, ignore) a key padding mask read at run time (None: none); or
    None for a mask edgec cannot take. `scores`: their leading size, rows and keys."""
    batch, rows, keys = scores
    keep = _attention_keep(module, mask, causal, rows, keys)
    if keep is not False:
        return keep, None
    if causal:
        return None  # attn_mask with is_causal: PyTorch raises on it (attention_refusal says so)
    key = _input_key_mask(batch, keys, mask)
    return (None, key) if key is not None else _key_mask_plus_constant(module, batch, keys, mask)


def _key_mask_plus_constant(module: GraphModule, batch: int, keys: int, mask):
    """(keep, key) for a float mask that adds a constant mask of 0 and -inf (a causal attn_mask) to
    a key padding mask given as a model input, then views it (nn.MultiheadAttention's merge of
    attn_mask and key_padding_mask), or None. keep is the constant's bool keep, viewed alike."""
    chain = []
    while isinstance(mask, Node) and mask.op == "call_function" and mask.target in _MASK_CHAIN:
        chain.append(mask)
        mask = mask.args[0]
    if not isinstance(mask, Node) or mask.target != aten.add.Tensor or len(mask.args) != 2 or mask.kwargs:
        return None
    for key_side, constant_side in (mask.args, mask.args[::-1]):
        key, value = _input_key_mask(batch, keys, key_side), _constant_value(module, constant_side)
        if key is None or value is None or value.dtype == torch.bool:
            continue
        if not bool(((value == 0) | (value == float("-inf"))).all()):
            continue
        keep = torch.broadcast_to(value == 0, mask.meta["val"].shape)
        for view in reversed(chain):  # the views SDPA's mask went through after the add
            keep = view.target(keep, *view.args[1:], **view.kwargs)
        return keep.contiguous(), key
    return None


def _input_key_mask(batch: int, keys: int, mask) -> tuple[Node, bool] | None:
    """(model input, ignore) when an attention mask is a bool model input [B, S] over the keys
    (`batch` a multiple of B), only viewed or broadcast: as itself (True keeps a key), or as
    nn.MultiheadAttention writes its key_padding_mask, zeros masked_fill'ed with -inf where the
    input is True (True ignores a key)."""
    while isinstance(mask, Node) and mask.op == "call_function" and mask.target in _MASK_CHAIN:
        mask = mask.args[0]
    ignore = False
    if (
        isinstance(mask, Node)
        and mask.target in (aten.masked_fill.Scalar, aten.masked_fill_.Scalar)
        and getattr(mask.args[0], "target", None) in (aten.zeros_like.default, aten.zeros.default)
        and mask.args[2] == float("-inf")
    ):
        mask, ignore = mask.args[1], True
    if not isinstance(mask, Node) or mask.op != "placeholder":
        return None
    value = mask.meta.get("val")
    if not isinstance(value, torch.Tensor) or value.dtype != torch.bool or value.dim() != 2:
        return None
    if value.shape[1] != keys or batch % value.shape[0] != 0:
        return None
    return mask, ignore


def _erase_unused_chain(graph, node) -> None:
    """Erase `node` and what only it read, back to the model input (the float mask MHA built)."""
    pending = [node]
    while pending:
        node = pending.pop()
        if isinstance(node, Node) and node.op in ("call_function", "get_attr") and not node.users:
            pending += [arg for arg in node.all_input_nodes]
            graph.erase_node(node)


def _attention_keep(module: GraphModule, mask, causal: bool, rows: int, keys: int):
    """The bool [.., L, S] mask of the scores SDPA keeps: None without a mask, False for a mask
    edgec cannot take as a constant (computed from the input, or a float mask with values other
    than 0 and -inf)."""
    keep = None
    if mask is not None:
        value = _constant_value(module, mask)
        if value is None:
            return False
        if value.dtype != torch.bool:
            if not bool(((value == 0) | (value == float("-inf"))).all()):
                return False
            value = value == 0
        keep = value
    if causal:
        causal_keep = torch.ones(rows, keys, dtype=torch.bool).tril()
        keep = causal_keep if keep is None else keep & causal_keep
    return keep


def attention_refusal(node: Node) -> str:
    """Why scaled_dot_product_attention `node` was left undecomposed (check_supported's message)."""
    options = dict(zip(("attn_mask", "dropout_p", "is_causal"), node.args[3:]), **node.kwargs)
    if options.get("dropout_p", 0.0) != 0.0:
        return "scaled_dot_product_attention with dropout_p > 0 (training only: pass 0.0 at inference)"
    if options.get("enable_gqa"):
        return "scaled_dot_product_attention with enable_gqa (repeat the key/value heads instead)"
    if options.get("attn_mask") is not None and options.get("is_causal"):
        return (
            "scaled_dot_product_attention with both attn_mask and is_causal=True (PyTorch raises on it too): "
            "put the causal mask into attn_mask"
        )
    return (
        "scaled_dot_product_attention's attn_mask: only a constant mask (bool, or float of 0 and -inf), a bool "
        "[batch, keys] model input (key_padding_mask) or a constant mask added to it compile"
    )


def _top1_as_max_and_argmax(module: GraphModule) -> bool:
    """torch.topk(x, 1, dim) (largest): its values are amax(x, dim, keepdim), its indices
    argmax(x, dim, keepdim); torch.max(x, dim, keepdim) (max over time) likewise, with its keepdim
    and torch.min(x, dim)'s values amin (its indices stay: refused by name)."""
    changed = False
    for node in list(module.graph.nodes):
        if node.op != "call_function" or (reduced := _top1_form(node)) is None:
            continue
        dim, keepdim, values_target, indices_target = reduced
        for unread in [user for user in node.users if user.target is operator.getitem and not user.users]:
            module.graph.erase_node(unread)  # export keeps the getitem of indices nothing reads
        users = list(node.users)
        if any(user.target is not operator.getitem for user in users) or (
            indices_target is None and any(user.args[1] == 1 for user in users)
        ):
            continue  # left for check_supported to report
        graph = module.graph
        for user in users:
            values = user.args[1] == 0
            with graph.inserting_before(user):
                new = graph.call_function(
                    values_target if values else indices_target, (node.args[0], [dim] if values else dim, keepdim)
                )
            _derived(new, node)
            user.replace_all_uses_with(new)
            graph.erase_node(user)
        graph.erase_node(node)
        changed = True
    return changed


def _top1_form(node: Node) -> tuple | None:
    """(dim, keepdim, values op, indices op or None) of a top-1 reduction, else None."""
    if node.target in (aten.max.dim, aten.min.dim):
        dim, keepdim = (*node.args[1:], node.kwargs.get("keepdim", False))[:2]
        if node.target == aten.max.dim:
            return dim, keepdim, aten.amax.default, aten.argmax.default
        return dim, keepdim, aten.amin.default, None
    if node.target != aten.topk.default:
        return None
    options = dict(zip(("k", "dim", "largest", "sorted"), node.args[1:]), **node.kwargs)
    if options["k"] != 1 or not options.get("largest", True):
        return None
    return options.get("dim", -1), True, aten.amax.default, aten.argmax.default


def _clamp_by_tensors_as_max_and_min(module: GraphModule) -> bool:
    """torch.clamp(x, lo, hi) with tensor bounds (or torch.clip): min(max(x, lo), hi), an omitted bound
    omitted, so the bounds broadcast (a per-channel clip) as maximum/minimum's operands do."""
    changed = False
    graph = module.graph
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target != aten.clamp.Tensor:
            continue
        options = dict(zip(("min", "max"), node.args[1:]), **node.kwargs)
        value = node.args[0]
        with graph.inserting_before(node):
            for bound, target in (
                (options.get("min"), aten.maximum.default),
                (options.get("max"), aten.minimum.default),
            ):
                if bound is not None:
                    value = graph.call_function(target, (value, bound))
                    _derived(value, node)
        node.replace_all_uses_with(value)
        graph.erase_node(node)
        changed = True
    return changed


_STRING_PADDED_CONVS = {aten.conv1d.padding: aten.conv1d.default, aten.conv2d.padding: aten.conv2d.default}


def _string_padding_as_numbers(module: GraphModule) -> bool:
    """nn.Conv1d/Conv2d(padding="same" | "valid") as numeric padding. "same" pads dilation * (k - 1)
    per axis, the smaller half before (PyTorch's rule); an odd total pads one more after, which an
    explicit zero pad in front of the convolution gives (the pad unit runs it, or it folds away)."""
    changed = False
    graph = module.graph
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in _STRING_PADDED_CONVS:
            continue
        defaults = (None, None, None, 1, "valid", 1, 1)  # the schema's, from bias on
        names = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
        x, weight, bias, stride, padding, dilation, groups = (
            node.args[i] if i < len(node.args) else node.kwargs.get(name, defaults[i]) for i, name in enumerate(names)
        )
        kernel = tuple(weight.meta["val"].shape[2:])
        stride, dilation = ([*v] if isinstance(v, (list, tuple)) else [v] * len(kernel) for v in (stride, dilation))
        before = [0] * len(kernel)
        after = [0] * len(kernel)
        if padding == "same":
            for axis, (k, d) in enumerate(zip(kernel, dilation)):
                before[axis] = d * (k - 1) // 2
                after[axis] = d * (k - 1) - before[axis]
        symmetric = [min(b, a) for b, a in zip(before, after)]
        if after != symmetric:
            # constant_pad_nd lists the last axis first, (before, after) per axis.
            extra = [v for axis in reversed(range(len(kernel))) for v in (0, after[axis] - symmetric[axis])]
            with graph.inserting_before(node):
                x = graph.call_function(aten.constant_pad_nd.default, (x, extra, 0.0))
            _derived(x, node)
        node.target = _STRING_PADDED_CONVS[node.target]
        node.args = (x, weight, bias, stride, symmetric, dilation, groups)
        changed = True
    return changed


def _glu_as_sigmoid_gate(module: GraphModule) -> bool:
    """F.glu(x, dim): the first half of x along dim times the sigmoid of the second half."""
    changed = False
    graph = module.graph
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target != aten.glu.default:
            continue
        x = node.args[0]
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", -1)
        half = x.meta["val"].shape[dim] // 2
        with graph.inserting_before(node):
            first = graph.call_function(aten.slice.Tensor, (x, dim, 0, half))
            second = graph.call_function(aten.slice.Tensor, (x, dim, half, 2 * half))
            gate = graph.call_function(aten.sigmoid.default, (second,))
            product = graph.call_function(aten.mul.Tensor, (first, gate))
        for created in (first, second, gate, product):
            _derived(created, node)
        node.replace_all_uses_with(product)
        graph.erase_node(node)
        changed = True
    return changed


_EXPANDS = {aten.expand_as.default, aten.expand.default}


def _l2_normalize_chains(module: GraphModule) -> bool:
    """F.normalize(x, dim=d) as torch.export gives it, x / clamp_min(linalg_vector_norm(x, 2, [d],
    keepdim), eps) (expanded to x's shape or broadcast; with or without the clamp), as one
    edgec.l2_normalize (TFLite's L2_NORMALIZATION: edgec.ops.l2_norm)."""
    changed = False
    graph = module.graph
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target != aten.div.Tensor or not isinstance(node.args[1], Node):
            continue
        x, divisor = node.args
        if divisor.target in _EXPANDS:
            divisor = divisor.args[0]
        eps = 0.0
        if divisor.target == aten.clamp_min.default:
            divisor, eps = divisor.args
        if divisor.target != aten.linalg_vector_norm.default or divisor.args[0] is not x:
            continue
        order, dims, keepdim = (list(divisor.args[1:]) + [2, None, False][len(divisor.args) - 1 :])[:3]
        if order != 2 or not keepdim or dims is None or len(dims) != 1:
            continue
        with graph.inserting_before(node):
            normalized = graph.call_function(torch.ops.edgec.l2_normalize.default, (x, int(dims[0]), float(eps)))
        _derived(normalized, node)
        node.replace_all_uses_with(normalized)
        graph.erase_node(node)
        changed = True
    return changed


def _replace(module: GraphModule, node: Node, build) -> None:
    """Replace `node` by the nodes `build(graph)` inserts before it (it returns the last): each takes
    node's source location and its own value metadata."""
    graph = module.graph
    before = set(graph.nodes)
    with graph.inserting_before(node):
        result = build(graph)
    for created in graph.nodes:
        if created not in before and created.op == "call_function":
            _derived(created, node)
    node.replace_all_uses_with(result)
    graph.erase_node(node)


def _square_as_power(module: GraphModule) -> bool:
    """torch.square(x) as x ** 2 (the table of each int8 value's square, one rounding)."""
    nodes = [n for n in module.graph.nodes if n.op == "call_function" and n.target == aten.square.default]
    for node in nodes:
        _replace(module, node, lambda g, n=node: g.call_function(aten.pow.Tensor_Scalar, (n.args[0], 2)))
    return bool(nodes)


_RESIZES_1D = {aten.upsample_nearest1d.vec, aten.upsample_linear1d.vec}


def _resize_1d_as_2d(module: GraphModule) -> bool:
    """F.interpolate of a [N, C, L] signal (nearest, linear) as the 2-D resize of [N, C, 1, L] by
    (1, factor); the scale factor is kept when given, since PyTorch's source index uses it."""
    nodes = [n for n in module.graph.nodes if n.op == "call_function" and n.target in _RESIZES_1D]
    for node in nodes:
        nearest = node.target == aten.upsample_nearest1d.vec
        x, size = node.args[0], node.args[1]
        scales = node.args[2] if nearest else node.args[3]
        size2d = None if size is None else [1, *size]
        scales2d = None if scales is None else [1.0, *scales]

        def build(g, x=x, size2d=size2d, scales2d=scales2d, nearest=nearest, node=node):
            plane = g.call_function(aten.unsqueeze.default, (x, 2))
            if nearest:
                resized = g.call_function(aten.upsample_nearest2d.vec, (plane, size2d, scales2d))
            else:
                resized = g.call_function(aten.upsample_bilinear2d.vec, (plane, size2d, node.args[2], scales2d))
            return g.call_function(aten.squeeze.dim, (resized, 2))

        _replace(module, node, build)
    return bool(nodes)


_ADAPTIVE_MAX_POOLS = {aten.adaptive_max_pool1d.default: 1, aten.adaptive_max_pool2d.default: 2}


def _adaptive_max_as_max(module: GraphModule) -> bool:
    """Adaptive max pooling whose indices nothing reads: to one value per channel, the max over
    the positions; with equal windows, max pooling by them. Other windows stay (refused by name)."""
    changed = False
    for node in list(module.graph.nodes):
        if node.op != "call_function" or node.target not in _ADAPTIVE_MAX_POOLS:
            continue
        if any(u.target is not operator.getitem or (u.args[1] != 0 and u.users) for u in node.users):
            continue  # the indices are read
        values = [u for u in node.users if u.args[1] == 0]
        rank = _ADAPTIVE_MAX_POOLS[node.target]
        x, size = node.args[0], list(node.args[1])
        positions = list(x.meta["val"].shape[-rank:])
        if all(s == 1 for s in size):
            dims = list(range(-rank, 0))
            build = lambda g, x=x, dims=dims: g.call_function(aten.amax.default, (x, dims, True))  # noqa: E731
        elif all(p % s == 0 for p, s in zip(positions, size)):
            window = [p // s for p, s in zip(positions, size)]
            pool = aten.max_pool1d.default if rank == 1 else aten.max_pool2d.default
            build = lambda g, x=x, w=window, pool=pool: g.call_function(pool, (x, w, w))  # noqa: E731
        else:
            continue
        for value in values:
            _replace(module, value, build)
        for unused in list(node.users):
            module.graph.erase_node(unused)
        module.graph.erase_node(node)
        changed = True
    return changed


_VARIANCES = {aten.var.dim, aten.var.correction, aten.std.dim, aten.std.correction}


def _variance_as_mean_of_squares(module: GraphModule) -> bool:
    """x.var(dims) / x.std(dims) as mean((x - mean(x))^2) over the dims, times n / (n - correction)
    (Bessel's by default), and its square root for std: ops edgec quantizes one by one."""
    nodes = [n for n in module.graph.nodes if n.op == "call_function" and n.target in _VARIANCES]
    for node in nodes:
        x = node.args[0]
        shape = list(x.meta["val"].shape)
        dims = node.args[1] if len(node.args) > 1 and node.args[1] is not None else list(range(len(shape)))
        dims = [dims] if isinstance(dims, int) else list(dims)
        if node.target in (aten.var.dim, aten.std.dim):
            correction = int(node.args[2] if len(node.args) > 2 else node.kwargs.get("unbiased", True))
            keepdim = node.args[3] if len(node.args) > 3 else node.kwargs.get("keepdim", False)
        else:
            correction = node.kwargs.get("correction")
            correction = 1 if correction is None else correction
            keepdim = node.kwargs.get("keepdim", False)
        count = math.prod(shape[d] for d in dims)
        factor = count / (count - correction) if count > correction else float("inf")

        def build(
            g, x=x, dims=dims, keepdim=keepdim, factor=factor, root=node.target in (aten.std.dim, aten.std.correction)
        ):
            mean = g.call_function(aten.mean.dim, (x, dims, True))
            deviation = g.call_function(aten.sub.Tensor, (x, mean))
            squared = g.call_function(aten.pow.Tensor_Scalar, (deviation, 2))
            value = g.call_function(aten.mean.dim, (squared, dims, keepdim))
            if factor != 1.0:
                value = g.call_function(aten.mul.Tensor, (value, factor))
            return g.call_function(aten.sqrt.default, (value,)) if root else value

        _replace(module, node, build)
    return bool(nodes)


def _einsum_as_primitives(module: GraphModule) -> bool:
    """torch.einsum as PyTorch's own implementation runs it (permutes, reshapes, bmm, mul, sum):
    traced on zeros of the operands' shapes and inlined, each op then quantized as written."""
    nodes = [n for n in module.graph.nodes if n.op == "call_function" and n.target == aten.einsum.default]
    for node in nodes:
        equation, operands = node.args[0], list(node.args[1])
        zeros = [torch.zeros(o.meta["val"].shape, dtype=o.meta["val"].dtype) for o in operands]
        traced = make_fx(lambda *xs, eq=equation: torch.einsum(eq, list(xs)))(*zeros)

        def build(g, traced=traced, operands=operands):
            values, inputs, result = {}, iter(operands), None
            for sub in traced.graph.nodes:
                if sub.op == "placeholder":
                    values[sub] = next(inputs)
                elif sub.op == "output":
                    result = values[sub.args[0]]
                else:
                    target = (
                        aten.reshape.default
                        if sub.target in (aten.view.default, aten._unsafe_view.default)
                        else sub.target
                    )
                    args = torch.fx.node.map_arg(sub.args, values.__getitem__)
                    values[sub] = g.call_function(target, args, torch.fx.node.map_arg(sub.kwargs, values.__getitem__))
            return result

        _replace(module, node, build)
    return bool(nodes)


_MATMULS = {aten.matmul.default, aten.mm.default, aten.bmm.default}


def _one_matrix(value: torch.Tensor | None, other: Node) -> torch.Tensor | None:
    """`value` as the [rows, cols] matrix a matmul with `other` applies to every one of other's
    matrices (its leading axes all 1, other of at least its rank), else None."""
    if value is None or value.dim() < 2 or any(size != 1 for size in value.shape[:-2]):
        return None
    return value.reshape(value.shape[-2:]) if other.meta["val"].dim() >= value.dim() else None


def _constant_matmul_as_linear(module: GraphModule) -> bool:
    """A matmul with one constant matrix is a linear layer (quantized as its weight): x @ W as
    linear(x, W^T) (a mel filterbank applied to spectrum frames), W @ x as the transpose of
    linear(x^T, W) (a DCT over the feature axis). A stack of different constant matrices stays a
    matmul (refused by name)."""
    changed = False
    for node in [n for n in module.graph.nodes if n.op == "call_function" and n.target in _MATMULS]:
        lhs, rhs = node.args[:2]
        if (right := _one_matrix(_constant_value(module, rhs), lhs)) is not None:
            weight = _new_constant(module, node, right.t(), "matmul_weight")
            _replace(module, node, lambda g, x=lhs, w=weight: g.call_function(aten.linear.default, (x, w)))
        elif (left := _one_matrix(_constant_value(module, lhs), rhs)) is not None:
            weight = _new_constant(module, node, left, "matmul_weight")

            def build(g, x=rhs, w=weight):
                rows = g.call_function(aten.transpose.int, (x, -2, -1))
                return g.call_function(aten.transpose.int, (g.call_function(aten.linear.default, (rows, w)), -2, -1))

            _replace(module, node, build)
        else:
            continue
        changed = True
    return changed


def _dft_bases(size: int, bins: int, scale: float, window: torch.Tensor | None = None):
    """The real and imaginary rows of the DFT of `size` samples, `bins` of them: cos(2 pi k t / N)
    and -sin(2 pi k t / N), times the window and `scale`, in float64 then float32."""
    t = torch.arange(size, dtype=torch.float64)
    k = torch.arange(bins, dtype=torch.float64).unsqueeze(1)
    angle = 2 * math.pi * k * t / size
    weight = scale * (torch.ones(size, dtype=torch.float64) if window is None else window.to(torch.float64))
    return (torch.cos(angle) * weight).float(), (-torch.sin(angle) * weight).float()


def _rfft_plan(module: GraphModule, node: Node):
    """torch.fft.rfft(x) over the last axis at its own length: ('linear', cos, sin), else None."""
    options = dict(zip(("n", "dim", "norm"), node.args[1:]), **node.kwargs)
    x = node.args[0]
    rank, size = x.meta["val"].dim(), int(x.meta["val"].shape[-1])
    if options.get("n") not in (None, size) or options.get("dim", -1) not in (-1, rank - 1):
        return None
    scale = {None: 1.0, "backward": 1.0, "ortho": size**-0.5, "forward": 1.0 / size}.get(options.get("norm"))
    return None if scale is None else ("linear", *_dft_bases(size, size // 2 + 1, scale))


def _stft_plan(module: GraphModule, node: Node):
    """torch.stft(x, n_fft, hop, win_length, window, normalized, onesided) of a real [B, T] or [T]
    signal, one-sided (export has already padded a centred one): ('conv', cos, sin, hop) with
    [bins, 1, n_fft] bases holding the window, else None."""
    names = ("n_fft", "hop_length", "win_length", "window", "normalized", "onesided", "return_complex")
    options = dict(zip(names, node.args[1:]), **node.kwargs)
    n_fft = int(options["n_fft"])
    hop, length = options.get("hop_length") or n_fft // 4, options.get("win_length") or n_fft
    window = options.get("window")
    window = None if window is None else _constant_value(module, window)
    if options.get("onesided") is False or (options.get("window") is not None and window is None):
        return None
    if window is not None and length < n_fft:
        left = (n_fft - length) // 2
        window = torch.nn.functional.pad(window, (left, n_fft - length - left))
    scale = n_fft**-0.5 if options.get("normalized") else 1.0
    cos, sin = _dft_bases(n_fft, n_fft // 2 + 1, scale, window)
    return "conv", cos.unsqueeze(1), sin.unsqueeze(1), int(hop)


def _spectrum_magnitudes_as_real(module: GraphModule) -> bool:
    """|torch.fft.rfft(x)| and |torch.stft(x, ...)| (an audio front end computing its spectrum in
    the model) as real ops: the real and imaginary parts are linear layers (rfft) or strided 1-D
    convolutions (stft) with constant DFT rows, then sqrt(re^2 + im^2), each quantized as written.
    A spectrum read otherwise than by abs (its phase, .real) stays complex (refused by name)."""
    plans = {aten.fft_rfft.default: _rfft_plan, aten.stft.default: _stft_plan}
    changed = False
    for node in [n for n in module.graph.nodes if n.op == "call_function" and n.target in plans]:
        users = list(node.users)
        if not users or any(user.target != aten.abs.default for user in users):
            continue
        plan = plans[node.target](module, node)
        if plan is None:
            continue
        kind, cos, sin, *hop = plan
        parts = [_new_constant(module, node, basis, "dft") for basis in (cos, sin)]
        x = node.args[0]
        one_signal = kind == "conv" and x.meta["val"].dim() == 1

        def build(g, x=x, parts=parts, kind=kind, hop=hop, one_signal=one_signal):
            if kind == "linear":
                re, im = (g.call_function(aten.linear.default, (x, part)) for part in parts)
            else:
                signal = g.call_function(aten.unsqueeze.default, (x, 0)) if one_signal else x
                signal = g.call_function(aten.unsqueeze.default, (signal, 1))
                re, im = (g.call_function(aten.conv1d.default, (signal, part, None, hop)) for part in parts)
            power = g.call_function(
                aten.add.Tensor, tuple(g.call_function(aten.pow.Tensor_Scalar, (part, 2)) for part in (re, im))
            )
            magnitude = g.call_function(aten.sqrt.default, (power,))
            return g.call_function(aten.squeeze.dim, (magnitude, 0)) if one_signal else magnitude

        for user in users:
            _replace(module, user, build)
        module.graph.erase_node(node)
        changed = True
    return changed


def _division_by_activation_as_reciprocal(module: GraphModule) -> bool:
    """a / b with b an activation (x / (x.std(...) + eps): feature normalisation inside a model) as
    a * reciprocal(b): the reciprocal a table over b's int8 values, each op quantized as written.
    A constant divisor stays a division (folded into the multiplication's constant); a quantized
    program's division by an activation is refused (binary.py: its program has no qparams for a
    reciprocal)."""
    nodes = [
        n
        for n in module.graph.nodes
        if n.op == "call_function"
        and n.target == aten.div.Tensor
        and not n.kwargs.get("rounding_mode")
        and isinstance(n.args[1], Node)
        and n.args[1].op != "get_attr"
        and "dequantize" not in str(n.args[1].target)  # a program's own Q/DQ: no reciprocal's qparams
    ]
    for node in nodes:

        def build(g, a=node.args[0], b=node.args[1]):
            return g.call_function(aten.mul.Tensor, (a, g.call_function(aten.reciprocal.default, (b,))))

        _replace(module, node, build)
    return bool(nodes)


def _views_before_comparisons(module: GraphModule) -> bool:
    """A view of a comparison with one value, (x > 0).unsqueeze(1), as the comparison of the view
    of x: a condition is never a tensor of its own, so the view moves to the compared values."""
    changed = False
    for node in list(module.graph.nodes):
        if node.op != "call_function" or node.target not in VIEWS:
            continue
        compared = node.args[0]
        if not isinstance(compared, Node) or compared.target not in COMPARISONS or len(compared.users) != 1:
            continue
        x, threshold = compared.args[:2]
        if isinstance(threshold, Node):
            continue

        def build(g, x=x, threshold=threshold, view=node, compared=compared):
            viewed = g.call_function(view.target, (x, *view.args[1:]), dict(view.kwargs))
            return g.call_function(compared.target, (viewed, threshold))

        _replace(module, node, build)
        module.graph.erase_node(compared)
        changed = True
    return changed


def _decompose_group_norms(module: GraphModule) -> bool:
    """GroupNorm / InstanceNorm (statistics of each sample's groups of channels, over the channels
    and all positions of a group) as the layer norm of the [N, groups, C/groups * positions] view
    (edgec's integer layer-norm kernel), reshaped back, then the per-channel affine as an inference
    batch norm (mean 0, variance 1, eps 0: exactly w * x + b), which fold_batchnorm folds or runs as
    a 1x1 depthwise convolution. An InstanceNorm that uses running statistics is that batch norm."""
    changed = False
    for node in list(module.graph.nodes):
        if node.op != "call_function" or node.target not in GROUP_NORMS:
            continue
        x = node.args[0]
        shape = tuple(x.meta["val"].shape)
        if node.target == aten.group_norm.default:
            groups, weight, bias, eps = (list(node.args[1:5]) + [None, None, None, 1e-5])[:4]
            running = None
        else:
            weight, bias, mean, var, use_input_stats, _, eps = node.args[1:8]
            groups, running = shape[1], None if use_input_stats else (mean, var)
        graph = module.graph
        with graph.inserting_before(node):
            new = []
            if running is None:
                grouped = graph.call_function(aten.reshape.default, (x, [shape[0], groups, -1]))
                features = math.prod(shape[1:]) // groups
                normed = graph.call_function(aten.layer_norm.default, (grouped, [features], None, None, float(eps)))
                x = graph.call_function(aten.reshape.default, (normed, list(shape)))
                new += [grouped, normed, x]
                mean = var = None
                eps = 0.0
            else:
                mean, var = running
            if weight is not None or bias is not None or running is not None:
                channels = shape[1]

                def constant(arg, fill, hint):
                    return arg if arg is not None else _new_constant(module, node, torch.full((channels,), fill), hint)

                affine = graph.call_function(
                    aten.batch_norm.default,
                    (
                        x,
                        constant(weight, 1.0, "norm_weight"),
                        constant(bias, 0.0, "norm_bias"),
                        constant(mean, 0.0, "norm_mean"),
                        constant(var, 1.0, "norm_var"),
                        False,
                        0.0,
                        float(eps),
                        False,
                    ),
                )
                new.append(affine)
                x = affine
        for created in new:
            _derived(created, node)
        node.replace_all_uses_with(x)
        graph.erase_node(node)
        changed = True
    return changed


def _constant_cat_as_pad_and_add(module: GraphModule) -> bool:
    """cat([c0, x, c1], dim) with constants only before and after one live run of inputs:
    constant_pad_nd(cat(live), zeros around) + cat([c0, 0, c1]) -- the pad and the add are ops
    edgec quantizes; a copy cannot carry a constant."""
    changed = False
    for node in list(module.graph.nodes):
        if node.op != "call_function" or node.target not in (aten.cat.default, aten.concat.default):
            continue
        parts = list(node.args[0])
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
        constant = [_constant_value(module, p) is not None for p in parts]
        if not any(constant) or all(constant):
            continue
        live = [i for i, c in enumerate(constant) if not c]
        if live != list(range(live[0], live[-1] + 1)):
            continue  # constants between live inputs: no pad expresses that
        rank = node.meta["val"].dim()
        dim = dim % rank
        sizes = [p.meta["val"].shape[dim] for p in parts]
        before, after = sum(sizes[: live[0]]), sum(sizes[live[-1] + 1 :])
        zeros = [torch.zeros(tuple(p.meta["val"].shape), dtype=p.meta["val"].dtype) for p in parts]
        filler = torch.cat([_constant_value(module, p) if c else z for p, c, z in zip(parts, constant, zeros)], dim)
        graph = module.graph
        with graph.inserting_before(node):
            live_nodes = [parts[i] for i in live]
            inner = live_nodes[0] if len(live_nodes) == 1 else graph.call_function(aten.cat.default, (live_nodes, dim))
            padding = [0] * (2 * (rank - dim))
            padding[-2], padding[-1] = before, after  # F.pad order: last dim first
            padded = graph.call_function(aten.constant_pad_nd.default, (inner, padding, 0.0))
            constant_node = _new_constant(module, node, filler, "cat_constant")
            added = graph.call_function(aten.add.Tensor, (padded, constant_node))
        for new in (inner, padded, added):
            if new is not live_nodes[0]:
                _derived(new, node)
        node.replace_all_uses_with(added)
        graph.erase_node(node)
        changed = True
    return changed


def _merge_constant_adds(module: GraphModule) -> bool:
    """(x + c1) + c2, the inner add's only user the outer one: x + (c1 + c2)."""
    changed = False
    for node in list(module.graph.nodes):
        if node.op != "call_function" or node.target != aten.add.Tensor or len(node.args) != 2 or node.kwargs:
            continue
        inner, outer_constant = node.args
        if _constant_value(module, outer_constant) is None:
            inner, outer_constant = outer_constant, inner
        c2 = _constant_value(module, outer_constant)
        if (
            c2 is None
            or not isinstance(inner, Node)
            or inner.target != aten.add.Tensor
            or len(inner.users) != 1
            or len(inner.args) != 2
            or inner.kwargs
        ):
            continue
        x, inner_constant = inner.args
        if _constant_value(module, inner_constant) is None:
            x, inner_constant = inner_constant, x
        c1 = _constant_value(module, inner_constant)
        if (
            c1 is None
            or not isinstance(x, Node)
            or tuple(torch.broadcast_shapes(c1.shape, c2.shape, x.meta["val"].shape)) != tuple(node.meta["val"].shape)
        ):
            continue
        merged = _new_constant(module, node, c1 + c2, "merged")
        node.args = (x, merged)
        module.graph.erase_node(inner)  # its only user now reads x
        changed = True
    return changed
