"""Depth-first execution of a stage: consecutive spatial layers run over row bands (op unit).

Layer by layer, a whole activation map of the widest early layer must sit in the arena at once.
A band stage replaces consecutive spatial layers (convolution, depthwise, pooling, with their fused
activations; each reading the stage's input or an earlier layer's map: a chain, or branches such
as two heads on one map) by one op that computes them a few rows at a time: each map the rest of
the model does not read keeps only a window of the rows its consumers still need (a line buffer in
the op's scratch), and rows are computed on demand, from the stage's outputs back to its input. A
streamed input (--stream-input) is one more window, its rows fetched from the application
(read_rows) in order, each once. No row is computed twice,
so the MACs are those of the layers; what is added is kernel calls (one per chunk of rows) and the
row shifts of the windows (memmove).

Each chunk calls the layer's own C kernel on a row window: the input pointer at the first input row
the chunk reads, input H = the rows it reads, output H = the chunk's rows, pad_top = what of the
top padding the chunk still sees. Every output element gets the same taps, in the same order, as
in the whole layer, so the arithmetic is unchanged and golden == C byte for byte. The whole run is
one table of actions (band_actions), which the C walks and the golden simulator replays on a flat
copy of the same memory (windows, input and output overlapping exactly as planned), so both do the
same thing.

A single output may be written over the stage's input (InPlace at `input_offset`): an output row
is stored only after every input row below the first one a later chunk reads is dead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from edgec.ir import ARENA_ALIGNMENT, Graph, InPlace, KernelChoice, Op
from edgec.ops.base import CCall, OpDef, unit_of
from edgec.ops.binary import PRELU_LOOKUP, lookup_tables, prelu_s8_lookup

# Fields of one action row (int16): the layer, its output window's shift (from row, rows; 0 rows:
# none), its input (row of the first row read in its storage, rows read, pad_top), its output (row
# in its storage, rows).
ACTION_FIELDS = ("layer", "shift_from", "shift_rows", "in_row", "in_rows", "pad_top", "out_row", "out_rows")
WINDOWED_KINDS = ("conv2d", "depthwise_conv2d", "max_pool2d", "avg_pool2d")  # pad_top + heights settable
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
    a descriptor with pad_top and the heights and whose golden reads the window shapes."""
    if op.kind not in BAND_KINDS or len(op.inputs) != (2 if op.kind == "add" else 1) or len(op.outputs) != 1:
        return False
    if op.kernel is not None and op.kernel.variant == "lookup" and op.kind == "depthwise_conv2d":
        return False  # a per-channel affine through its tables (edgec_lut_channels_s8): no row windows
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


def map_name(layers: list[Op], index: int) -> str:
    """The tensor of map `index` of a stage: 0 its input, i + 1 layer i's output."""
    return layers[index - 1].outputs[0] if index else layers[0].inputs[0]


def stage_sources(layers: list[Op]) -> list[int]:
    """Per layer, the map its rows are computed from (its chain input): the output of the latest
    earlier layer it reads, else the stage's input. ValueError unless every other input is a
    residual add's second read of the stage's input, and every layer reads an earlier one's map."""
    produced = {layer.outputs[0]: index + 1 for index, layer in enumerate(layers)}
    sources = []
    for index, layer in enumerate(layers):
        inside = [produced[name] for name in layer.inputs if produced.get(name, index + 1) <= index]
        source = max(inside) if inside else 0
        others = [name for name in layer.inputs if name != map_name(layers, source)]
        if (not inside and layers[0].inputs[0] not in layer.inputs) or (
            others and (layer.kind != "add" or set(others) != {layers[0].inputs[0]})
        ):
            raise ValueError(f"{layer.name} does not continue the stage")
        sources.append(source)
    return sources


def row_bytes(graph: Graph, name: str) -> int:
    _, _, w, c = graph.tensors[name].shape
    return w * c


@dataclass(frozen=True)
class StageLayout:
    """What a stage's layers read and where its maps live: per layer its source map (stage_sources),
    the layers whose maps are the stage's outputs (in the op's output order), and whether the input
    is streamed (handed in by the application row by row, held in a window like an intermediate)."""

    sources: tuple[int, ...]
    outputs: tuple[int, ...]  # layer indices
    stream: bool = False
    # Maps computed over their source's window rows (a PReLU, the only reader of a windowed map:
    # elementwise, in place), as (map, the map whose window it shares).
    shared: tuple[tuple[int, int], ...] = ()

    def windowed(self, index: int) -> bool:
        """Whether map `index` lives in a window of the stage's scratch (else in the arena, whole)."""
        return self.stream if index == 0 else index - 1 not in self.outputs

    def home(self, index: int) -> int:
        """The map whose window holds map `index`'s rows (itself, unless shared)."""
        homes = dict(self.shared)
        while index in homes:
            index = homes[index]
        return index

    def own_window(self, index: int) -> bool:
        return self.windowed(index) and self.home(index) == index


@dataclass
class Schedule:
    actions: np.ndarray  # int16 [A, len(ACTION_FIELDS)]
    window_rows: list[int]  # per map (0: the input, i + 1: layer i's output): rows its window holds (0: none)
    moved_bytes: int  # bytes the windows' shifts move per run


def band_actions(
    ops: list[Op], graph: Graph, chunk: int, layout: StageLayout, window_rows: list[int] | None = None
) -> Schedule:
    """The stage's run, rows computed on demand `chunk` rows per call (a streamed input's rows
    fetched as soon as a call reads them, each once, in order), the stage's outputs advanced
    together. With `window_rows` None the windows are sized to the most rows held at once; else a
    window shifts only when full."""
    geometry = [row_geometry(op, graph) for op in ops]
    maps = len(ops) + 1
    height = [graph.tensors[map_name(ops, index)].shape[1] for index in range(maps)]
    # The readers of each window: of its own map and of the maps sharing it.
    consumers = [
        [i for i, source in enumerate(layout.sources) if layout.home(source) == index] for index in range(maps)
    ]
    done = [0 if layout.stream else height[0]] + [0] * len(ops)  # rows of each map present so far
    first_held = [0] * maps  # first row of each window
    reads_from = [0] * len(ops)  # first row of its source map each layer still reads
    sizes = [0] * maps
    actions, moved = [], 0

    def store(index: int, first: int, end: int) -> tuple[int, int, int]:
        """(shift from, shift rows, row in storage) of rows [first, end) of map `index`."""
        nonlocal moved
        if not layout.windowed(index):
            return 0, 0, first
        if not layout.own_window(index):  # written over its source's rows, where they are
            return 0, 0, first - first_held[layout.home(index)]
        shift_from = shift_rows = 0
        capacity = None if window_rows is None else window_rows[index]
        if capacity is None or end - first_held[index] > capacity:
            keep_from = min([reads_from[i] for i in consumers[index]] + [first])
            shift_from, shift_rows = keep_from - first_held[index], max(0, first - keep_from)
            if shift_from == 0:
                shift_rows = 0
            moved += shift_rows * row_bytes(graph, map_name(ops, index))
            first_held[index] = keep_from
        sizes[index] = max(sizes[index], end - first_held[index])
        return shift_from, shift_rows, first - first_held[index]

    def ensure(index: int, stop: int) -> None:
        """Make rows up to `stop` of map `index` present (the input's: fetched; a layer's: computed)."""
        while done[index] < stop:
            first = done[index]
            if index == 0:  # the streamed input: every row read next, in one fetch
                shift_from, shift_rows, row = store(0, first, stop)
                actions.append((-1, shift_from, shift_rows, first, stop - first, 0, row, stop - first))
                done[0] = stop
                continue
            layer = index - 1
            end = min(first + chunk, geometry[layer].out_rows)
            lo, hi = geometry[layer].reads(first, end)
            source = layout.sources[layer]
            reads_from[layer] = lo
            ensure(source, hi)
            shift_from, shift_rows, out_row = store(index, first, end)
            in_row = lo - first_held[layout.home(source)]
            pad_top = max(geometry[layer].pad_top - first * geometry[layer].stride, 0)
            actions.append((layer, shift_from, shift_rows, in_row, hi - lo, pad_top, out_row, end - first))
            done[index] = end

    while True:  # the output furthest behind (as a fraction of its rows) advances one chunk
        behind = [
            (done[i + 1] / height[i + 1], n, i) for n, i in enumerate(layout.outputs) if done[i + 1] < height[i + 1]
        ]
        if not behind:
            break
        layer = min(behind)[2]
        ensure(layer + 1, min(done[layer + 1] + chunk, height[layer + 1]))
    table = np.array(actions, dtype=np.int64)
    if np.any(table[:, 4] < 1):
        raise ValueError("a chunk reads no input row (only padding)")
    if table.max() > np.iinfo(np.int16).max:
        raise ValueError("a row index does not fit the int16 action table")
    return Schedule(table.astype(np.int16), sizes if window_rows is None else list(window_rows), moved)


def band_schedule(ops: list[Op], graph: Graph, chunk: int, layout: StageLayout) -> Schedule:
    """The run with windows just large enough, shifted only when full."""
    return band_actions(ops, graph, chunk, layout, band_actions(ops, graph, chunk, layout).window_rows)


def input_offset(ops: list[Op], graph: Graph, layout: StageLayout, actions: np.ndarray) -> int | None:
    """The smallest aligned offset of the input after the output's start at which storing every
    output chunk overwrites only input rows no later chunk reads (InPlace.input_offset), at least
    output bytes - input bytes (the two end together); None for a stage with a streamed input or
    several outputs (not run in place)."""
    if layout.stream or len(layout.outputs) != 1 or len(ops) < 2:
        return None
    last = layout.outputs[0]
    in_row, out_row = row_bytes(graph, ops[0].inputs[0]), row_bytes(graph, ops[last].outputs[0])
    needed = graph.tensors[ops[last].outputs[0]].nbytes - graph.tensors[ops[0].inputs[0]].nbytes
    # A residual add reads input row r as it writes output row r, element by element, reading
    # before writing: safe when the input does not start before the output.
    skip = ops[0].inputs[0] in ops[last].inputs and layout.sources[last] != 0
    if skip:
        needed = max(needed, 0)
    later_reads = graph.tensors[ops[0].inputs[0]].shape[1]  # first input row read after each action
    for layer, _, _, first_read, _, _, row, rows in actions[::-1].tolist():
        if layer == last:
            needed = max(needed, (row + rows) * out_row - later_reads * in_row)
            if skip:
                later_reads = min(later_reads, row)
        if layer >= 0 and layout.sources[layer] == 0:
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

    @staticmethod
    def layout(op: Op) -> StageLayout:
        return op.attrs["layout"]

    def kernel_function(self, op: Op) -> str:
        """The kernels the stage's loop calls: each of its specialised layers' (once, in order), a
        PReLU's on its tables (_elementwise_calls)."""
        return " + ".join(
            dict.fromkeys(
                PRELU_LOOKUP if layer.kind == "prelu" else layer.kernel.function
                for layer in self.layers(op)
                if layer.kernel
            )
        )

    def windows(self, op: Op, graph: Graph) -> dict[int, tuple[int, int]]:
        """Map -> (scratch offset, bytes) of each windowed map; the kernels' scratch follows."""
        result, offset = {}, 0
        for index, rows in enumerate(op.attrs["window_rows"]):
            if self.layout(op).own_window(index):
                size = _align(rows * row_bytes(graph, map_name(self.layers(op), index)))
                result[index] = (offset, size)
                offset += size
        return result

    def kernel_scratch_offset(self, op, graph) -> int:
        return sum(size for _, size in self.windows(op, graph).values())

    def scratch_bytes(self, op, graph, target) -> int:
        kernels = max((unit_of(layer).scratch_bytes(layer, graph, target) for layer in self.layers(op)), default=0)
        return self.kernel_scratch_offset(op, graph) + _align(kernels)

    def in_place(self, op, graph, target):
        if op.attrs["input_offset"] is None:
            return ()
        return (InPlace(0, op.attrs["input_offset"], self.scratch_bytes(op, graph, target)),)

    def macs(self, op, graph) -> int:
        return sum(unit_of(layer).macs(layer, graph) for layer in self.layers(op))

    def finalize(self, op, graph) -> None:
        """The layers are finalized before they are banded."""

    def golden(self, op, graph, inputs):
        """The action table replayed on flat copies of the stage's memory: the input (whole, or
        fetched into its window), each window, the outputs -- a single output overlapping the input
        at `input_offset` (as in place)."""
        layers, layout = self.layers(op), self.layout(op)
        x = np.asarray(inputs[0], dtype=np.int8).ravel()
        storage = {index: np.zeros(size, dtype=np.int8) for index, (_, size) in self.windows(op, graph).items()}
        d = op.attrs["input_offset"]
        if d is not None:
            y_t = graph.tensors[op.outputs[0]]
            out_at, in_at = max(0, -d), max(0, d)
            region = np.zeros(max(out_at + y_t.nbytes, in_at + x.size), dtype=np.int8)
            region[in_at : in_at + x.size] = x
            storage[0], storage[layout.outputs[0] + 1] = region[in_at:], region[out_at:]
        else:
            if not layout.stream:
                storage[0] = x.copy()
            for layer in layout.outputs:
                storage[layer + 1] = np.zeros(graph.tensors[layers[layer].outputs[0]].nbytes, dtype=np.int8)
        for index, home in layout.shared:
            storage[index] = storage[home]
        tables = {index: lookup_tables(layer) for index, layer in enumerate(layers) if layer.kind == "prelu"}
        for index, shift_from, shift_rows, in_row, in_rows, pad_top, out_row, out_rows in op.attrs["actions"].tolist():
            source = 0 if index < 0 else layout.sources[index]
            src_rb, dst_rb = row_bytes(graph, map_name(layers, source)), row_bytes(graph, map_name(layers, index + 1))
            if shift_rows:
                window = storage[index + 1]
                window[: shift_rows * dst_rb] = window[shift_from * dst_rb : (shift_from + shift_rows) * dst_rb].copy()
            if index < 0:  # a streamed input's rows, as the application hands them in
                storage[0][out_row * dst_rb : (out_row + out_rows) * dst_rb] = x[
                    in_row * dst_rb : (in_row + in_rows) * dst_rb
                ]
                continue
            layer, chain = layers[index], map_name(layers, source)
            band_op, band_graph = band_layer(layer, graph, chain, in_rows, out_rows, pad_top)
            # The chain input from its storage; a residual add's other input: the stage input's rows.
            rows = {chain: storage[source][in_row * src_rb : (in_row + in_rows) * src_rb]}
            skip_rb = row_bytes(graph, map_name(layers, 0))
            for name in layer.inputs:
                if name != chain:
                    rows[name] = storage[0][out_row * skip_rb : (out_row + out_rows) * skip_rb]
            values = [rows[name].reshape(band_graph.tensors[name].shape).copy() for name in layer.inputs]
            if layer.kind == "prelu":  # as the C: through tables made once (edgec_prelu_s8_lookup)
                y = prelu_s8_lookup(values[0], tables[index], band_op.attrs["desc"])
            else:
                y = unit_of(layer).golden(band_op, band_graph, values)
            storage[index + 1][out_row * dst_rb : (out_row + out_rows) * dst_rb] = np.asarray(y, np.int8).ravel()
        results = [
            storage[layer + 1][: graph.tensors[name].nbytes].reshape(graph.tensors[name].shape).copy()
            for layer, name in zip(layout.outputs, op.outputs)
        ]
        return results[0] if len(results) == 1 else results

    def emit(self, op, graph, names) -> CCall:
        """A loop over the action table; each layer's case calls its kernel with a copy of its
        descriptor whose pad_top and heights are the action's; a streamed
        input's case asks the application for the next rows (read_rows, a parameter of the streamed
        invoke)."""
        layers, layout = self.layers(op), self.layout(op)
        table = names.symbol(op, "actions")
        scratch = names.scratch(op)
        kernel_scratch = f"({scratch} + {self.kernel_scratch_offset(op, graph)})"
        storage = {index: f"({scratch} + {offset})" for index, (offset, _) in self.windows(op, graph).items()}
        if not layout.stream:
            storage[0] = names.ptr(op.inputs[0])
        for layer, name in zip(layout.outputs, op.outputs):
            storage[layer + 1] = names.ptr(name)
        for index, home in layout.shared:
            storage[index] = storage[home]
        constants, params, cases, required = [("int16_t", table, op.attrs["actions"])], [], [], []
        if layout.stream:
            rb = row_bytes(graph, map_name(layers, 0))
            cases.append(
                f"        case -1: {{ /* the input's next rows, from the application */\n"
                f"            int8_t *const band_window = {storage[0]};\n"
                + _shift(rb)
                + f"            if (read_rows(read_rows_context, band_window + a[6] * {rb}, a[3], a[4]) != 0) {{\n"
                f"                status = EDGEC_ARG_ERROR;\n"
                f"            }}\n"
                f"            break;\n"
                f"        }}\n"
            )
        for index, layer in enumerate(layers):
            source = layout.sources[index]
            chain = map_name(layers, source)
            src_rb, dst_rb = row_bytes(graph, chain), row_bytes(graph, layer.outputs[0])
            ptrs = {name: "band_in" if name == chain else "band_skip" for name in layer.inputs}
            ptrs[layer.outputs[0]] = "band_y"
            body, layer_constants, layer_params, layer_required = (
                _elementwise_calls if layer.kind in ELEMENTWISE_KINDS else _windowed_call
            )(layer, graph, _BandNames(names, ptrs, kernel_scratch), op.attrs["actions"], index)
            constants += layer_constants
            params += layer_params
            required += layer_required
            cases.append(
                f"        case {index}: {{ /* {layer.name}: {layer.kind} */\n"
                f"            int8_t *const band_in = {storage[source]} + a[3] * {src_rb};\n"
                f"            int8_t *const band_window = {storage[index + 1]};\n"
                f"            int8_t *const band_y = band_window + a[6] * {dst_rb};\n"
                + (
                    f"            int8_t *const band_skip = {storage[0]} + a[6] * {dst_rb};\n"
                    if "band_skip" in ptrs.values()
                    else ""
                )
                + (_shift(dst_rb) if layout.own_window(index + 1) else "")
                + f"{body}"
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
            + "        default: status = EDGEC_ARG_ERROR; break;\n        }\n"
            f"{check}    }}\n}}"
        )
        offset = self.kernel_scratch_offset(op, graph)
        return CCall(code, constants, params, [(layer, f"{offset} + ({expression})") for layer, expression in required])


def _shift(row_bytes: int) -> str:
    """C: the action's window shift (a[2] rows from row a[1] to the window's top)."""
    return (
        f"            if (a[2] > 0) {{\n"
        f"                memmove(band_window, band_window + a[1] * {row_bytes}, (size_t)a[2] * {row_bytes}u);\n"
        f"            }}\n"
    )


def _windowed_call(layer: Op, graph: Graph, names: "_BandNames", actions: np.ndarray, index: int):
    """(C, constants, params, scratch required) of a layer whose descriptor takes pad_top and the
    heights: its call on a copy of it, set from the action."""
    call = unit_of(layer).emit(layer, graph, names)
    p = names.symbol(layer, "")
    desc = next(ctype for ctype, symbol, _ in call.params if symbol == f"{p}desc")
    body = (
        f"            {desc} band_desc = {p}desc;\n"
        f"            band_desc.pad_top = a[5];\n"
        f"            band_desc.input_h = a[4];\n"
        f"            band_desc.output_h = a[7];\n"
        f"            {call.code.replace(f'&{p}desc', '&band_desc')}\n"
    )
    return body, call.constants, call.params, [(layer.name, call.scratch_required)] if call.scratch_required else []


def _elementwise_calls(layer: Op, graph: Graph, names: "_BandNames", actions: np.ndarray, index: int):
    """(C, constants, params, scratch required) of an elementwise layer: one call per band height
    it runs at, each with its own descriptor."""
    heights = sorted({int(rows) for rows in actions[actions[:, 0] == index][:, 7]})
    body, constants, params, required = "", [], [], []
    tables = names.symbol(layer, "tables")
    if layer.kind == "prelu":  # tables made here, once: a call on a few rows would rebuild its own
        constants.append(("int8_t", tables, lookup_tables(layer).ravel()))
    for number, rows in enumerate(heights):
        band_op, band_graph = band_layer(layer, graph, layer.inputs[0], rows, rows, 0)
        band_names = names.with_suffix(f"rows{rows}_")
        if layer.kind == "prelu":
            call = unit_of(layer).emit_lookup(band_op, band_graph, band_names, tables)
        else:
            call = unit_of(layer).emit(band_op, band_graph, band_names)
        constants += call.constants
        params += call.params
        required += [(f"{layer.name}_rows{rows}", call.scratch_required)] if call.scratch_required else []
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


def make_stage(ops: list[Op], graph: Graph, chunk: int, outputs: list[str] | None = None, stream: bool = False) -> Op:
    """The band stage op that runs `ops` (each reading an earlier one or the stage's input)
    `chunk` rows per call, writing `outputs` (default: the last layer's) to the arena; with
    `stream`, its input is handed in by the application row by row (never whole in the arena)."""
    sources = stage_sources(ops)
    outputs = [ops[-1].outputs[0]] if outputs is None else list(outputs)
    produced = {layer.outputs[0]: index for index, layer in enumerate(ops)}
    if any(name not in produced for name in outputs):
        raise ValueError("a stage output is no output of its layers")
    out_layers = tuple(produced[name] for name in outputs)
    for index, layer in enumerate(ops):
        if index not in out_layers and index + 1 not in sources:
            raise ValueError(f"{layer.name}'s output is read by no layer of the stage and is no stage output")
    for index, layer in enumerate(ops):
        # A residual add reads the stage input's rows where it writes its own: whole maps both.
        if ops[0].inputs[0] in layer.inputs and sources[index] != 0 and (stream or index not in out_layers):
            raise ValueError(f"{layer.name}: a residual add of the stage's input must be a stage output, not streamed")
    shared = tuple(
        (index + 1, sources[index])
        for index, layer in enumerate(ops)
        if layer.kind == "prelu"
        and index not in out_layers
        and sources[index] > 0
        and sources[index] - 1 not in out_layers
        and sources.count(sources[index]) == 1
    )
    layout = StageLayout(tuple(sources), out_layers, stream, shared)
    schedule = band_schedule(ops, graph, chunk, layout)
    stage = Op(
        f"band_{ops[0].name}",
        BandStage.kind,
        [ops[0].inputs[0]],
        outputs,
        {
            "ops": list(ops),
            "chunk": chunk,
            "layout": layout,
            "actions": schedule.actions,
            "window_rows": schedule.window_rows,
            "moved_bytes": schedule.moved_bytes,
            "fetched_bytes": graph.tensors[ops[0].inputs[0]].nbytes if stream else 0,
            "input_offset": input_offset(ops, graph, layout, schedule.actions),
        },
        source=ops[0].source,
    )
    streamed = "; its input streamed in rows" if stream else ""
    stage.kernel = KernelChoice(
        UNIT.kernel_function(stage),
        "band",
        f"band stage (--ram): {', '.join(op.name for op in ops)} run depth-first, {chunk} rows per kernel call"
        + streamed,
    )
    return stage


UNIT = BandStage()
