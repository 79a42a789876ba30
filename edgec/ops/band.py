"""Depth-first execution of a stage: a chain of spatial layers run over row bands (op unit).

Layer by layer, a whole activation map of the widest early layer must sit in the arena at once.
A band stage replaces a chain of spatial layers (convolution, depthwise, pooling, with their fused
activations) by one op that computes the chain a few rows at a time: each intermediate map keeps
only a window of the rows its consumer still needs (a line buffer in the op's scratch), and rows
are computed on demand, from the stage's last layer back to its first. No row is computed twice,
so the MACs are those of the layers; what is added is kernel calls (one per chunk of rows) and the
row shifts of the windows (memmove).

Each chunk calls the layer's own C kernel on a row window: the input pointer at the first input row
the chunk reads, input H = the rows it reads, output H = the chunk's rows, pad_top = what of the
top padding the chunk still sees. Every output element gets the same taps, in the same order, as
in the whole layer, so the arithmetic is unchanged and golden == C byte for byte. The whole run is
one table of actions (band_actions), which the C walks and the golden simulator replays on a flat
copy of the same memory (windows, input and output overlapping exactly as planned), so both do the
same thing.

The stage's output may be written over its input (InPlace at `input_offset`): an output row is
stored only after every input row below the first one a later chunk reads is dead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from edgec.ir import ARENA_ALIGNMENT, Graph, InPlace, KernelChoice, Op
from edgec.ops.base import CCall, OpDef, unit_of

# Fields of one action row (int16): the layer, its output window's shift (from row, rows; 0 rows:
# none), its input (row of the first row read in its storage, rows read, pad_top), its output (row
# in its storage, rows).
ACTION_FIELDS = ("layer", "shift_from", "shift_rows", "in_row", "in_rows", "pad_top", "out_row", "out_rows")
# params with pad_top + dims, or a descriptor with pad_top, input_h and output_h (pooling)
WINDOWED_KINDS = ("conv2d", "depthwise_conv2d", "max_pool2d", "avg_pool2d")
# Elementwise layers, whose descriptor describes the whole shape: emitted once per band height.
ELEMENTWISE_KINDS = ("prelu", "add")  # add: a residual add, the stage's last layer, over its input
BAND_KINDS = WINDOWED_KINDS + ELEMENTWISE_KINDS


def _align(value: int) -> int:
    return (value + ARENA_ALIGNMENT - 1) // ARENA_ALIGNMENT * ARENA_ALIGNMENT


@dataclass(frozen=True)
class RowGeometry:
    """How a layer's output rows read its input rows."""

    kernel: int
    stride: int
    pad_top: int
    dilation: int
    in_rows: int
    out_rows: int

    def reads(self, first: int, stop: int) -> tuple[int, int]:
        """[lo, hi): the input rows output rows [first, stop) read, clipped to the input."""
        lo = first * self.stride - self.pad_top
        hi = (stop - 1) * self.stride - self.pad_top + (self.kernel - 1) * self.dilation + 1
        return max(lo, 0), min(hi, self.in_rows)


def row_geometry(op: Op, graph: Graph) -> RowGeometry:
    a = op.attrs
    if op.kind in ELEMENTWISE_KINDS:
        kernel, stride, pad, dilation = 1, 1, 0, 1
    elif op.kind in ("conv2d", "depthwise_conv2d"):
        kernel, stride, pad, dilation = a["weight"].shape[1], a["stride"][0], a["pad"][0], a["dilation"][0]
    else:
        kernel, stride, pad, dilation = a["kernel"][0], a["stride"][0], a["pad"][0], 1
    return RowGeometry(
        kernel, stride, pad, dilation, graph.tensors[op.inputs[0]].shape[1], graph.tensors[op.outputs[0]].shape[1]
    )


def can_band(op: Op, graph: Graph) -> bool:
    """Whether `op` can run on row windows: a spatial int8 layer of one image whose C kernel takes
    (params with pad_top, input dims, output dims; or one descriptor with them) and whose golden
    reads the window shapes."""
    if op.kind not in BAND_KINDS or len(op.inputs) != (2 if op.kind == "add" else 1) or len(op.outputs) != 1:
        return False
    if op.kind == "add" and len({graph.tensors[name].shape for name in op.inputs + op.outputs}) != 1:
        return False
    if op.kind == "avg_pool2d" and op.attrs.get("divisor") != "in_bounds":
        return False
    x, y = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    return (
        len(x.shape) == 4
        and x.shape[0] == 1
        and x.dtype == y.dtype == "int8"
        and x.alias_of is None
        and y.alias_of is None
    )


def chain_input(layers: list[Op], index: int) -> str:
    """The input of layer `index` that the stage computes: the output of the layer before it (the
    stage's input for the first)."""
    return layers[index - 1].outputs[0] if index else layers[0].inputs[0]


def check_chain(layers: list[Op]) -> None:
    """ValueError unless each layer reads the one before, and only the last (a residual add) also
    reads the stage's input."""
    for index, layer in enumerate(layers):
        others = [name for name in layer.inputs if name != chain_input(layers, index)]
        if len(others) == len(layer.inputs) or (
            others and (index != len(layers) - 1 or set(others) != {layers[0].inputs[0]})
        ):
            raise ValueError(f"{layer.name} does not continue the chain")


def row_bytes(graph: Graph, name: str) -> int:
    _, _, w, c = graph.tensors[name].shape
    return w * c


@dataclass
class Schedule:
    actions: np.ndarray  # int16 [A, len(ACTION_FIELDS)]
    window_rows: list[int]  # per intermediate map (layer i's output, i < last): rows its window holds
    moved_bytes: int  # bytes the windows' shifts move per run


def band_actions(ops: list[Op], graph: Graph, chunk: int, window_rows: list[int] | None = None) -> Schedule:
    """The stage's run, rows computed on demand `chunk` rows per call. With `window_rows` None the
    windows are sized to the most rows held at once; else a window shifts only when full."""
    geometry = [row_geometry(op, graph) for op in ops]
    last = len(ops) - 1
    done = [0] * len(ops)  # rows of each layer's output computed so far
    first_held = [0] * len(ops)  # first row of each window
    needed_from = [0] * len(ops)  # first row of each window its consumer still reads
    sizes = [0] * last
    actions, moved = [], 0

    def ensure(index: int, stop: int) -> None:
        """Compute layer `index`'s output rows up to `stop`."""
        nonlocal moved
        while done[index] < stop:
            first = done[index]
            end = min(first + chunk, geometry[index].out_rows)
            lo, hi = geometry[index].reads(first, end)
            if index > 0:
                needed_from[index - 1] = lo
                ensure(index - 1, hi)
            shift_from = shift_rows = 0
            if index < last:
                capacity = None if window_rows is None else window_rows[index]
                if capacity is None or end - first_held[index] > capacity:
                    keep_from = min(needed_from[index], first)
                    shift_from, shift_rows = keep_from - first_held[index], max(0, first - keep_from)
                    if shift_from == 0:
                        shift_rows = 0
                    moved += shift_rows * row_bytes(graph, ops[index].outputs[0])
                    first_held[index] = keep_from
                sizes[index] = max(sizes[index], end - first_held[index])
                out_row = first - first_held[index]
            else:
                out_row = first
            in_row = lo if index == 0 else lo - first_held[index - 1]
            pad_top = max(geometry[index].pad_top - first * geometry[index].stride, 0)
            actions.append((index, shift_from, shift_rows, in_row, hi - lo, pad_top, out_row, end - first))
            done[index] = end

    ensure(last, geometry[last].out_rows)
    table = np.array(actions, dtype=np.int64)
    if np.any(table[:, 4] < 1):
        raise ValueError("a chunk reads no input row (only padding)")
    if table.max() > np.iinfo(np.int16).max:
        raise ValueError("a row index does not fit the int16 action table")
    return Schedule(table.astype(np.int16), sizes if window_rows is None else list(window_rows), moved)


def band_schedule(ops: list[Op], graph: Graph, chunk: int) -> Schedule:
    """The run with windows just large enough, shifted only when full."""
    return band_actions(ops, graph, chunk, band_actions(ops, graph, chunk).window_rows)


def input_offset(ops: list[Op], graph: Graph, actions: np.ndarray) -> int:
    """The smallest aligned offset of the input after the output's start at which storing every
    output chunk overwrites only input rows no later chunk reads (InPlace.input_offset), at least
    output bytes - input bytes (the two end together)."""
    in_row, out_row = row_bytes(graph, ops[0].inputs[0]), row_bytes(graph, ops[-1].outputs[0])
    last = len(ops) - 1
    needed = graph.tensors[ops[-1].outputs[0]].nbytes - graph.tensors[ops[0].inputs[0]].nbytes
    # A residual add reads input row r as it writes output row r, element by element, reading
    # before writing: safe when the input does not start before the output.
    skip = last > 0 and ops[0].inputs[0] in ops[-1].inputs
    if skip:
        needed = max(needed, 0)
    later_reads = graph.tensors[ops[0].inputs[0]].shape[1]  # first input row read after each action
    for layer, _, _, first_read, _, _, row, rows in actions[::-1].tolist():
        if layer == last:
            needed = max(needed, (row + rows) * out_row - later_reads * in_row)
            if skip:
                later_reads = min(later_reads, row)
        if layer == 0:
            later_reads = min(later_reads, first_read)
    return _align(needed)


def banded_layers(op: Op) -> list[Op]:
    """The layers a band stage runs; any other op: itself."""
    return op.attrs["ops"] if op.kind == BandStage.kind else [op]


def band_layer(layer: Op, graph: Graph, chain: str, in_rows: int, out_rows: int, pad_top: int) -> tuple[Op, Graph]:
    """`layer` on one band: a copy reading `in_rows` rows of its input `chain` (and, a residual
    add, `out_rows` rows of its other input) and writing `out_rows` rows, with `pad_top`, in a
    graph of band-shaped copies of its tensors; an elementwise layer's descriptor made for them."""
    attrs = dict(layer.attrs)
    if "pad" in attrs:
        attrs["pad"] = (pad_top, *attrs["pad"][1:])
    tensors = {}
    for name in layer.inputs + layer.outputs:
        tensor = graph.tensors[name]
        tensors[name] = replace(tensor, shape=(1, in_rows if name == chain else out_rows, *tensor.shape[2:]))
    band_op, band_graph = replace(layer, attrs=attrs), Graph(tensors=tensors)
    if layer.kind in ELEMENTWISE_KINDS:
        unit_of(layer).finalize(band_op, band_graph)
    return band_op, band_graph


class BandStage(OpDef):
    kind = "band_stage"
    family = "band stage (depth-first rows)"
    runtime_sources = ()

    @staticmethod
    def layers(op: Op) -> list[Op]:
        return op.attrs["ops"]

    def kernel_function(self, op: Op) -> str:
        """The kernels the stage's loop calls: each of its specialised layers' (once, in order)."""
        return " + ".join(dict.fromkeys(layer.kernel.function for layer in self.layers(op) if layer.kernel))

    def windows(self, op: Op, graph: Graph) -> list[tuple[int, int]]:
        """(scratch offset, bytes) of each intermediate map's window; the kernels' scratch follows."""
        result, offset = [], 0
        for layer, rows in zip(self.layers(op)[:-1], op.attrs["window_rows"]):
            size = _align(rows * row_bytes(graph, layer.outputs[0]))
            result.append((offset, size))
            offset += size
        return result

    def kernel_scratch_offset(self, op, graph) -> int:
        return sum(size for _, size in self.windows(op, graph))

    def scratch_bytes(self, op, graph, target) -> int:
        kernels = max((unit_of(layer).scratch_bytes(layer, graph, target) for layer in self.layers(op)), default=0)
        return self.kernel_scratch_offset(op, graph) + _align(kernels)

    def in_place(self, op, graph, target):
        if len(self.layers(op)) < 2:
            return ()
        return (InPlace(0, op.attrs["input_offset"], self.scratch_bytes(op, graph, target)),)

    def macs(self, op, graph) -> int:
        return sum(unit_of(layer).macs(layer, graph) for layer in self.layers(op))

    def finalize(self, op, graph) -> None:
        """The layers are finalized before they are banded."""

    def golden(self, op, graph, inputs):
        """The action table replayed on a flat copy of the stage's memory: the output and the
        input overlapping at `input_offset` (as in place), and each window."""
        layers = self.layers(op)
        x_t, y_t = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        d = op.attrs["input_offset"]
        out_at, in_at = max(0, -d), max(0, d)
        region = np.zeros(max(out_at + y_t.nbytes, in_at + x_t.nbytes), dtype=np.int8)
        region[in_at : in_at + x_t.nbytes] = np.asarray(inputs[0], dtype=np.int8).ravel()
        windows = [np.zeros(size, dtype=np.int8) for _, size in self.windows(op, graph)]
        storage = [region[in_at:]] + windows + [region[out_at:]]
        for index, shift_from, shift_rows, in_row, in_rows, pad_top, out_row, out_rows in op.attrs["actions"].tolist():
            layer, chain = layers[index], chain_input(layers, index)
            src_rb, dst_rb = row_bytes(graph, chain), row_bytes(graph, layer.outputs[0])
            if shift_rows:
                window = storage[index + 1]
                window[: shift_rows * dst_rb] = window[shift_from * dst_rb : (shift_from + shift_rows) * dst_rb].copy()
            band_op, band_graph = band_layer(layer, graph, chain, in_rows, out_rows, pad_top)
            # The chain input from its storage; a residual add's other input: the stage input's rows.
            rows = {chain: storage[index][in_row * src_rb : (in_row + in_rows) * src_rb]}
            for name in layer.inputs:
                if name != chain:
                    rows[name] = storage[0][out_row * src_rb : (out_row + out_rows) * src_rb]
            values = [rows[name].reshape(band_graph.tensors[name].shape).copy() for name in layer.inputs]
            y = unit_of(layer).golden(band_op, band_graph, values)
            storage[index + 1][out_row * dst_rb : (out_row + out_rows) * dst_rb] = np.asarray(y, np.int8).ravel()
        return region[out_at : out_at + y_t.nbytes].reshape(y_t.shape).copy()

    def emit(self, op, graph, names) -> CCall:
        """A loop over the action table; each layer's case calls its kernel with copies of its
        params and dims whose pad_top and heights are the action's."""
        layers = self.layers(op)
        table = names.symbol(op, "actions")
        windows = self.windows(op, graph)
        scratch = names.scratch(op)
        kernel_scratch = f"({scratch} + {self.kernel_scratch_offset(op, graph)})"
        storage = (
            [names.ptr(op.inputs[0])]
            + [f"({scratch} + {offset})" for offset, _ in windows]
            + [names.ptr(op.outputs[0])]
        )
        constants, params, cases, required = [("int16_t", table, op.attrs["actions"])], [], [], []
        for index, layer in enumerate(layers):
            chain = chain_input(layers, index)
            src_rb, dst_rb = row_bytes(graph, chain), row_bytes(graph, layer.outputs[0])
            ptrs = {name: "band_in" if name == chain else "band_skip" for name in layer.inputs}
            ptrs[layer.outputs[0]] = "band_y"
            body, layer_constants, layer_params, layer_required = (
                _elementwise_calls if layer.kind in ELEMENTWISE_KINDS else _windowed_call
            )(layer, graph, _BandNames(names, ptrs, kernel_scratch), op.attrs["actions"], index)
            constants += layer_constants
            params += layer_params
            required += layer_required
            shift = ""
            if index < len(layers) - 1:
                shift = (
                    f"            if (a[2] > 0) {{\n"
                    f"                memmove(band_window, band_window + a[1] * {dst_rb}, (size_t)a[2] * {dst_rb}u);\n"
                    f"            }}\n"
                )
            cases.append(
                f"        case {index}: {{ /* {layer.name}: {layer.kind} */\n"
                f"            int8_t *const band_in = {storage[index]} + a[3] * {src_rb};\n"
                f"            int8_t *const band_window = {storage[index + 1]};\n"
                f"            int8_t *const band_y = band_window + a[6] * {dst_rb};\n"
                + (
                    f"            int8_t *const band_skip = {storage[0]} + a[6] * {dst_rb};\n"
                    if "band_skip" in ptrs.values()
                    else ""
                )
                + f"{shift}{body}"
                f"            break;\n"
                f"        }}\n"
            )
        count = len(op.attrs["actions"])
        layer_id = names.graph.ops.index(op) if op in names.graph.ops else 0
        # Test builds check the writes of every band, not only of the whole stage.
        check = (
            f"#ifdef EDGEC_CHECK_WRITES\n        status |= {names.model}_check_writes(arena, {layer_id});\n"
            f"        {names.model}_snapshot_arena(arena);\n#endif\n"
        )
        code = (
            f"{{\n    int32_t band_step;\n"
            f"    for (band_step = 0; band_step < {count} && status == EDGEC_OK; ++band_step) {{\n"
            f"        const int16_t *const a = &{table}[band_step * {len(ACTION_FIELDS)}];\n"
            f"        switch (a[0]) {{\n"
            + "".join(cases)
            + f"        default:\n            status = EDGEC_ARG_ERROR;\n            break;\n        }}\n"
            f"{check}    }}\n}}"
        )
        largest = "0"
        for expression in required:
            largest = f"(({expression}) > ({largest}) ? ({expression}) : ({largest}))"
        return CCall(code, constants, params, f"{self.kernel_scratch_offset(op, graph)} + {largest}")


def _windowed_call(layer: Op, graph: Graph, names: "_BandNames", actions: np.ndarray, index: int):
    """(C, constants, params, scratch required) of a layer whose params (or descriptor) take
    pad_top and whose dims (or descriptor) the heights: its call on copies of them, set from the
    action."""
    call = unit_of(layer).emit(layer, graph, names)
    p = names.symbol(layer, "")
    desc = next((ctype for ctype, symbol, _ in call.params if symbol == f"{p}desc"), None)
    if desc is not None:  # one descriptor holding the window, input_h and output_h (pooling)
        body = (
            f"            {desc} band_desc = {p}desc;\n"
            f"            band_desc.pad_top = a[5];\n"
            f"            band_desc.input_h = a[4];\n"
            f"            band_desc.output_h = a[7];\n"
            f"            {call.code.replace(f'&{p}desc', '&band_desc')}\n"
        )
        return body, call.constants, call.params, [call.scratch_required] if call.scratch_required else []
    ctype = next(ctype for ctype, symbol, _ in call.params if symbol == f"{p}params")
    code = (
        call.code.replace(f"&{p}params", "&band_params")
        .replace(f"&{p}input_dims", "&band_input_dims")
        .replace(f"&{p}output_dims", "&band_output_dims")
    )
    body = (
        f"            {ctype} band_params = {p}params;\n"
        f"            edgec_dims band_input_dims = {p}input_dims, band_output_dims = {p}output_dims;\n"
        f"            band_params.pad_top = a[5];\n"
        f"            band_input_dims.h = a[4];\n"
        f"            band_output_dims.h = a[7];\n"
        f"            {code}\n"
    )
    return body, call.constants, call.params, [call.scratch_required] if call.scratch_required else []


def _elementwise_calls(layer: Op, graph: Graph, names: "_BandNames", actions: np.ndarray, index: int):
    """(C, constants, params, scratch required) of an elementwise layer: one call per band height
    it runs at, each with its own descriptor."""
    heights = sorted({int(rows) for rows in actions[actions[:, 0] == index][:, 7]})
    body, constants, params, required = "", [], [], []
    for number, rows in enumerate(heights):
        band_op, band_graph = band_layer(layer, graph, layer.inputs[0], rows, rows, 0)
        call = unit_of(layer).emit(band_op, band_graph, names.with_suffix(f"rows{rows}_"))
        constants += call.constants
        params += call.params
        required += [call.scratch_required] if call.scratch_required else []
        body += f"            {'} else ' if number else ''}if (a[7] == {rows}) {{\n                {call.code}\n"
    body += "            } else {\n                status = EDGEC_ARG_ERROR;\n            }\n"
    return body, constants, params, required


class _BandNames:
    """The names a banded layer's kernel call is emitted with: its input and output are the
    action's row windows, its scratch the stage's kernel scratch; everything else as the model's."""

    def __init__(self, names, ptrs: dict[str, str], scratch: str, suffix: str = ""):
        self._names, self._ptrs, self._scratch, self._suffix = names, ptrs, scratch, suffix

    def with_suffix(self, suffix: str) -> "_BandNames":
        """The same names, the layer's symbols told apart by `suffix` (one set per band height)."""
        return _BandNames(self._names, self._ptrs, self._scratch, suffix)

    def symbol(self, op, suffix):
        return self._names.symbol(op, self._suffix + suffix)

    def ptr(self, tensor: str) -> str:
        return self._ptrs[tensor]

    def scratch(self, op) -> str:
        return self._scratch

    def in_place(self, op) -> bool:
        return False

    def in_place_form(self, op):
        return None


def make_stage(ops: list[Op], graph: Graph, chunk: int) -> Op:
    """The band stage op that runs `ops` (a chain, each reading the one before) `chunk` rows per call."""
    check_chain(ops)
    schedule = band_schedule(ops, graph, chunk)
    stage = Op(
        f"band_{ops[0].name}",
        BandStage.kind,
        [ops[0].inputs[0]],
        [ops[-1].outputs[0]],
        {
            "ops": list(ops),
            "chunk": chunk,
            "actions": schedule.actions,
            "window_rows": schedule.window_rows,
            "moved_bytes": schedule.moved_bytes,
            "input_offset": input_offset(ops, graph, schedule.actions),
        },
        source=ops[0].source,
    )
    stage.kernel = KernelChoice(
        UNIT.kernel_function(stage),
        "band",
        f"band stage (--ram): {', '.join(op.name for op in ops)} run depth-first, {chunk} rows per kernel call",
    )
    return stage


UNIT = BandStage()
