"""Fusion on the IR: zero padding into the following conv, activations into their producer.

After these passes a zero `pad` before convolutions is part of their padding, a `clamp` op
survives only where its producer has other users (then it runs alone, in place on a copy), and no
copy feeds only another copy.
"""

from __future__ import annotations

import math

from edgec.errors import EdgecError
from edgec.ir import Graph, Op, Tensor
from edgec.ops import KINDS
from edgec.ops.movement import compose_at

CONV_KINDS = {"conv2d", "depthwise_conv2d"}


def fold_pad(graph: Graph) -> None:
    """A zero pad of the spatial axes that only convolutions read becomes their padding; any other
    pad runs as a constant_pad op."""
    for pad in [op for op in graph.ops if op.kind == "pad"]:
        consumers = graph.consumers(pad.outputs[0])
        rank = len(graph.tensors[pad.inputs[0]].shape)
        torch_pad = pad.attrs["torch_pad"] + [0] * (2 * (rank - 2) - len(pad.attrs["torch_pad"]))
        foldable = (
            pad.attrs["value"] == 0.0
            and rank in (3, 4)
            and len(torch_pad) == 2 * (rank - 2)
            and consumers
            and all(op.kind in CONV_KINDS for op in consumers)
            and pad.outputs[0] not in graph.outputs
        )
        if not foldable:
            pad.kind = "constant_pad"
            continue
        left, right, top, bottom = (*torch_pad, 0, 0)[:4]
        for conv in consumers:
            conv.attrs["pad"] = tuple(a + b for a, b in zip(conv.attrs["pad"], (top, left, bottom, right)))
        graph.replace_uses(pad.outputs[0], pad.inputs[0])
        graph.ops.remove(pad)
    graph.remove_unused_tensors()


def fuse_copies(graph: Graph) -> None:
    """A copy whose output only one copy reads, and that is no model output, merges into it: the
    reader gathers straight from the first one's inputs (a channel shuffle's reshape, transpose
    and reshape become one pass; a chunk feeding a cat reads the chunked tensor)."""
    changed = True
    while changed:
        changed = False
        for first in [op for op in graph.ops if op.kind == "copy"]:
            readers = graph.consumers(first.outputs[0])
            if len(readers) != 1 or readers[0].kind != "copy" or first.outputs[0] in graph.outputs:
                continue
            second = readers[0]
            if second.inputs.count(first.outputs[0]) != 1:
                continue
            slot = second.inputs.index(first.outputs[0])
            second.attrs["gather"] = compose_at(second.attrs["gather"], slot, first.attrs["gather"], len(first.inputs))
            second.inputs[slot : slot + 1] = first.inputs
            graph.ops.remove(first)
            changed = True
            break
    graph.remove_unused_tensors()


def fuse_activations(graph: Graph) -> None:
    _absorb_requantize_after_activations(graph)
    for clamp in [op for op in graph.ops if op.kind == "clamp"]:
        source = clamp.inputs[0]
        producer = graph.producer(source)
        fusable = (
            producer is not None
            and KINDS[producer.kind].fuses_activation
            and len(graph.consumers(source)) == 1
            and source not in graph.outputs
        )
        if fusable:
            producer.attrs["clamp"] = _compose(producer.attrs["clamp"], clamp.attrs["clamp"])
            producer.outputs = list(clamp.outputs)
            graph.ops.remove(clamp)
        elif not graph.tensors[source].quantized:
            raise EdgecError(f"{clamp.source}: this activation follows an op it cannot be fused into")
    graph.remove_unused_tensors()


def _absorb_requantize_after_activations(graph: Graph) -> None:
    """A program quantized by another tool may quantize a producer's output, then its activation's
    at other qparams (`conv -> Q/DQ -> relu -> Q`), which lowers as producer -> clamp -> requantize.
    When the clamp will fuse into the producer, the producer writes the requantize's qparams
    directly, as the TFLite converter fuses such a chain (the intermediate rounding disappears)."""
    for requantize in [op for op in graph.ops if op.kind == "lut" and op.attrs["function"] == "requantize"]:
        clamp = graph.producer(requantize.inputs[0])
        if graph.tensors[requantize.inputs[0]].dtype != graph.tensors[requantize.outputs[0]].dtype:
            continue  # int8 <-> int16: the int16 kernels read and write one dtype
        if (
            clamp is None
            or clamp.kind != "clamp"
            or len(graph.consumers(clamp.outputs[0])) != 1
            or clamp.outputs[0] in graph.outputs
        ):
            continue
        producer = graph.producer(clamp.inputs[0])
        if (
            producer is None
            or not KINDS[producer.kind].fuses_activation
            or len(graph.consumers(clamp.inputs[0])) != 1
            or clamp.inputs[0] in graph.outputs
        ):
            continue
        clamp.outputs = list(requantize.outputs)
        graph.ops.remove(requantize)


def _compose(first, then):
    """The one clamp equal to clamping to `first`, then to `then` ((low, high), None: unbounded):
    both bounds of `first` clamped into `then`. Overlapping intervals give their intersection,
    disjoint ones a constant (an empty intersection would be an invalid act_min > act_max)."""

    def into_then(value: float) -> float:
        if then[0] is not None:
            value = max(value, then[0])
        return value if then[1] is None else min(value, then[1])

    low = into_then(-math.inf if first[0] is None else first[0])
    high = into_then(math.inf if first[1] is None else first[1])
    return (None if low == -math.inf else low), (None if high == math.inf else high)


# Ops whose kernel rescales to its output's qparams (a multiplier from them, computed at finalize):
# such a producer can write a following requantize's qparams itself.
_RESCALING_PRODUCERS = {"reduce", "conv2d", "depthwise_conv2d", "fully_connected"}


def fold_double_requantize(graph: Graph) -> None:
    """--tflite-compatible: a program that quantizes a rescaling op's output twice (`mean -> Q(a) ->
    DQ -> flatten -> Q(b)`, `conv -> Q(a) -> DQ -> upsample -> Q(b) -> cat`) lowers as producer ->
    (views, ops that keep qparams) -> requantize; the TFLite converter drops the first quantize, so
    the producer writes b's qparams directly (one rounding, not two) and the ops between keep them.
    Where nothing at all stands between the two quantizes (`DQ(a) -> Q(b)`) it drops the second
    instead (_dropped_by_converter). The program's literal reading (the default) keeps both roundings."""
    for requantize in [op for op in graph.ops if op.kind == "lut" and op.attrs["function"] == "requantize"]:
        chain, name = [], requantize.inputs[0]
        while (view := graph.producer(name)) is not None and len(view.inputs) == 1 and _keeps_qparams(view, graph):
            chain.append(view)
            name = view.inputs[0]
        producer = graph.producer(name)
        middle = [name] + [view.outputs[0] for view in chain]
        source, target = graph.tensors[name], graph.tensors[requantize.outputs[0]]
        if _dropped_by_converter(requantize, graph):
            for reader in graph.consumers(requantize.outputs[0]):  # verify: the program's reference is not its
                reader.attrs["tflite_departure"] = "it reads the bytes of a requantize the converter drops"
            graph.replace_uses(requantize.outputs[0], requantize.inputs[0])
            graph.ops.remove(requantize)
            continue
        if (
            producer is None
            or producer.kind not in _RESCALING_PRODUCERS
            or source.dtype != target.dtype
            or any(len(graph.consumers(t)) != 1 or t in graph.outputs for t in middle)
        ):
            continue
        for t in middle:
            graph.tensors[t].scale, graph.tensors[t].zero_point = target.scale, target.zero_point
        graph.replace_uses(requantize.outputs[0], requantize.inputs[0])
        graph.ops.remove(requantize)
    graph.remove_unused_tensors()


def _dropped_by_converter(requantize, graph: Graph) -> bool:
    """`Q(a) -> DQ -> Q(b)` with no op between (`sigmoid -> Q(1/256, -128) -> DQ -> Q(b) -> mul` in
    squeeze-excite; `mean -> Q(a) -> DQ -> flatten -> Q(a) -> DQ -> dropout -> Q(b) -> linear` once
    the dropout vanished): the converter drops Q(b), and the consumer reads a's bytes at a's qparams."""
    return (
        requantize.attrs.get("of_dequantize", False)
        and graph.tensors[requantize.inputs[0]].dtype == graph.tensors[requantize.outputs[0]].dtype
        and requantize.outputs[0] not in graph.outputs
    )


def chain_split_requantizes(graph: Graph) -> None:
    """--tflite-compatible: the parts of a split whose input the program does not quantize itself
    (ShuffleNetV2: `cat -> Q(c) -> DQ -> view, transpose, view -> chunk`), the last requantized to
    other qparams. The converter's quantization driver gives the whole split input the last part's
    qparams (one requantize from c), then requantizes each other part from those: `c -> b_last ->
    b_i`, two roundings where the program has one, and `c -> b_last -> c` for a part the program
    reads at c. A split of a tensor the program quantizes (a conv's output) keeps one requantize per
    part, as the program says (tests/data/tflm: shufflenet_v2_tiny, op_splits)."""
    splits: dict[str, list] = {}
    for op in graph.ops:
        if op.kind == "copy" and op.attrs.get("split_of_quantized") is False:
            splits.setdefault(op.inputs[0], []).append(op)
    for source, parts in splits.items():
        last = max(parts, key=lambda part: part.attrs["gather"].item)
        claimed_by = _sole_requantize(last, graph)
        if len(parts) < 2 or len(graph.consumers(source)) != len(parts) or claimed_by is None:
            continue
        claimed = graph.tensors[claimed_by.outputs[0]]
        for part in parts:
            requantize = _sole_requantize(part, graph)
            if part is last or (requantize is None and not _read_as_held(part, graph)):
                continue
            target = graph.tensors[(requantize or part).outputs[0]]
            if (target.scale, target.zero_point) == (claimed.scale, claimed.zero_point):
                continue
            if requantize is not None:
                via = _requantize_op(graph, part.outputs[0], claimed, f"{requantize.name}_via", requantize)
                graph.ops.insert(graph.ops.index(requantize), via)
                requantize.inputs = [via.outputs[0]]
                continue
            held = graph.tensors[part.outputs[0]]  # read at c: c -> b_last -> c
            there = _requantize_op(graph, held.name, claimed, f"{part.name}_via", claimed_by)
            back = _requantize_op(graph, there.outputs[0], held, f"{part.name}_back", claimed_by)
            graph.replace_uses(held.name, back.outputs[0])
            there.inputs = [held.name]
            index = graph.ops.index(part) + 1
            graph.ops[index:index] = [there, back]


def _requantize_op(graph: Graph, name: str, qparams, op_name: str, like) -> Op:
    """A requantize of tensor `name` to `qparams`'s scale and zero point (at `like`'s source line)."""
    held = graph.tensors[name]
    out = graph.add_tensor(
        Tensor(f"{op_name}_out", held.shape, qparams.scale, qparams.zero_point, source=held.source, perm=held.perm)
    )
    return Op(op_name, "lut", [name], [out.name], {"function": "requantize", "function_attrs": {}}, like.source)


def _read_as_held(op, graph: Graph) -> bool:
    """Whether no requantize reads `op`'s output (every reader takes it at its qparams)."""
    readers = graph.consumers(op.outputs[0])
    return (
        bool(readers)
        and op.outputs[0] not in graph.outputs
        and all(reader.attrs.get("function") != "requantize" for reader in readers)
    )


def _sole_requantize(op, graph: Graph):
    """The int8 requantize that alone reads `op`'s output, or None."""
    readers = graph.consumers(op.outputs[0])
    if len(readers) != 1 or op.outputs[0] in graph.outputs:
        return None
    reader = readers[0]
    if reader.kind != "lut" or reader.attrs.get("function") != "requantize":
        return None
    tensors = (graph.tensors[reader.inputs[0]], graph.tensors[reader.outputs[0]])
    return reader if all(t.dtype == "int8" for t in tensors) else None


def _keeps_qparams(op, graph: Graph) -> bool:
    """A view, or an op that keeps qparams on 2-D images (resize, max pool): the converter moves a
    requantize across those into the producer. On 1-D data (NCL) its TFLite form has a TRANSPOSE
    around the pool, which keeps a separate QUANTIZE (kws_conv1d's max pool); an average pool, whose
    rounding a requantize does not commute with, keeps it too (ds_cnn's AVERAGE_POOL_2D, QUANTIZE)."""
    if op.kind == "reshape":
        return True
    four_d = len(graph.tensors[op.inputs[0]].torch_shape) == 4
    unit = KINDS[op.kind]
    averages = getattr(unit, "pooling", "") == "avg"
    return unit.keeps_qparams and op.attrs.get("function") != "requantize" and four_d and not averages
