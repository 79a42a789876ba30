"""Emit the self-contained C directory for a planned graph, or for several (emit_many).

The directory holds <name>.h/.c (the model), <name>_weights.h/.c (flash constants), runtime/
(only the kernels the models call, copied from runtime_c/, and edgec_runtime.c, the runtime's
identity), edgec.mk, CMakeLists.txt and report.json. The same graphs always render to
byte-identical files.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import jinja2
import numpy as np

from edgec.backend.plan import Buffer, MemoryPlan, occupied_bytes, offset_of, scratch_buffer_name
from edgec.c_format import INDENT, block, braced, commented_rows, long_lines
from edgec.ir import Graph, Op
from edgec.ops import unit_of
from edgec.ops.band import banded_layers
from edgec.ops.recurrent import held_state_notes
from edgec.ops.select import mask_input_notes
from edgec.resources import data_dir
from edgec.targets import cmsis_nn
from edgec.version import __version__

TEMPLATES = data_dir("templates")
RUNTIME = data_dir("runtime_c")
C_TYPES = {
    "int8_t": np.int8,
    "int16_t": np.int16,
    "int32_t": np.int32,
    "int64_t": np.int64,
    "uint8_t": np.uint8,
    "uint16_t": np.uint16,
}
SHARED_RUNTIME_FILES = ("include/edgec_nn.h", "src/support/edgec_support.h", "src/support/edgec_s4.h")
# Generated into runtime/src: defines runtime_symbol(), which every model's invoke reads.
RUNTIME_IDENTITY_SOURCE = "edgec_runtime.c"
SHARED_ARENA_FILES = ("edgec_shared_arena.h", "edgec_shared_arena.c")


@dataclass
class Names:
    """How the generated C refers to a graph's buffers and per-layer symbols."""

    model: str
    graph: Graph
    plan: MemoryPlan
    state_offsets: dict = None  # op name -> offset in <model>_state (streaming layers' state)

    def symbol(self, op: Op, suffix: str) -> str:
        return f"{self.model}_{op.name}_{suffix}"

    # The layers run in <model>_invoke_in, on the arena and state of the instance it is given.
    def ptr(self, tensor: str) -> str:
        return f"(arena + {offset_of(self.plan, self.graph, tensor)})"

    def state(self, op: Op) -> str:
        """The layer's persistent state (streaming), outside the arena."""
        return f"(state + {self.state_offsets[op.name]})"

    def scratch(self, op: Op) -> str:
        if op.name not in self.plan.scratch:
            return "NULL"
        return f"(arena + {self.plan.scratch[op.name][0]})"

    def in_place(self, op: Op) -> bool:
        """Whether the plan writes `op`'s output over one of its inputs (its in-place kernel then)."""
        return op.name in self.plan.in_place

    def in_place_form(self, op: Op):
        """The InPlace form the plan runs `op` in, or None."""
        return self.plan.in_place.get(op.name)


class _UnplannedNames(Names):
    """Names to emit a layer with before there is a plan, only to size its constants."""

    def ptr(self, tensor: str) -> str:
        return "NULL"

    def scratch(self, op: Op) -> str:
        return "NULL"

    def in_place(self, op: Op) -> bool:
        return False

    def in_place_form(self, op: Op):
        return None

    def state(self, op: Op) -> str:
        return "NULL"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=False,
    )
    env.filters["c_comment"] = c_comment
    return env


def c_comment(text: str) -> str:
    """User text (a source line, a file name) made safe inside a C block comment: nothing in it
    can end the comment, open a nested one (-Wcomment) or form a trigraph."""
    return " ".join(str(text).split()).replace("*/", "* /").replace("/*", "/ *").replace("??", "? ?")


def _float_literal(value: float) -> str:
    return f"{np.float32(value):.9e}f"


def _array_body(values: np.ndarray) -> str:
    """A constant array's values, 16 a line (fewer where they would pass 120 columns): data, which
    the weights file keeps out of clang-format's reach (`clang-format off`)."""
    rows = [[]]
    for value in (str(int(v)) for v in np.asarray(values).ravel()):
        if len(rows[-1]) == 16 or 4 + sum(len(v) + 2 for v in rows[-1]) + len(value) + 1 > 120:
            rows.append([])
        rows[-1].append(value)
    return "\n".join("    " + ", ".join(row) + "," for row in rows if row)


C_TYPE_OF = {"int8": "int8_t", "int16": "int16_t", "int32": "int32_t"}  # int32: token ids, argmax indices
# <name>_quantize_input clips the scaled value to +-this before converting it to an integer, so the
# conversion is always defined; beyond the dtype's range, then saturated (edgec.sim does the same).
QUANTIZE_CLIP = {"int8": 300, "int16": 70000, "int32": 0}  # int32: no quantize (token ids are copied)
INT_RANGE = {"int8": (-128, 127), "int16": (-32768, 32767), "int32": (-(2**31), 2**31 - 1)}


def io_entry(graph: Graph, plan: MemoryPlan, index: int, name: str) -> dict:
    """A model input or output as the header, the drivers and report.json describe it."""
    tensor = graph.tensors[name]
    channels_last = tensor.perm is not None and len(tensor.shape) == 4
    axes = ("N", "H", "W", "C") if channels_last else tuple(f"DIM{i}" for i in range(len(tensor.shape)))
    return {
        "index": index,
        "torch_name": tensor.source or name,
        "dtype": tensor.dtype,
        "ctype": C_TYPE_OF[tensor.dtype],
        "layout": "NHWC"
        if channels_last
        else "stored as " + ("permuted " + str(list(tensor.perm)) if tensor.perm else "in PyTorch order"),
        "shape": list(tensor.shape),
        "torch_shape": list(tensor.torch_shape),
        "perm": list(tensor.perm) if tensor.perm else None,
        "scale": tensor.scale,
        "scale_literal": _float_literal(tensor.scale),
        "zero_point": tensor.zero_point,
        "size": tensor.elements,
        "bytes": tensor.nbytes,
        "dims": list(zip(axes, tensor.shape)),
        "offset": None if name in graph.streamed_inputs else offset_of(plan, graph, name),
        "clip": QUANTIZE_CLIP[tensor.dtype],
        "reciprocal_literal": _float_literal(1.0 / tensor.scale),
        "qmin": INT_RANGE[tensor.dtype][0],
        "qmax": INT_RANGE[tensor.dtype][1],
        "note": "",  # io_entries: what a caller-held recurrent state input / output is
    }


def io_entries(graph: Graph, plan: MemoryPlan) -> dict:
    notes = held_state_notes(graph)  # a recurrent state the caller holds: which output feeds which input
    notes.update(mask_input_notes(graph))  # a bool condition the caller passes
    entries = {
        "input_rounding": graph.input_rounding,
        "inputs": [io_entry(graph, plan, i, name) for i, name in enumerate(graph.inputs)],
        "outputs": [io_entry(graph, plan, i, name) for i, name in enumerate(graph.outputs)],
    }
    for entry, name in zip(entries["inputs"] + entries["outputs"], graph.inputs + graph.outputs):
        entry["note"] = notes.get(name, "")
    return entries


def allowed_writes(op: Op, graph: Graph, plan: MemoryPlan, count: int = 2) -> list[tuple[int, int]]:
    """The arena bytes layer `op` may change: its outputs' and its scratch's [start, end), in
    address order after (0, 0) fillers, so there are always `count` (checked by EDGEC_CHECK_WRITES)."""
    ranges = []
    for name in op.outputs:
        out = graph.tensors[name]
        start = offset_of(plan, graph, name)
        ranges += [] if out.alias_of else [(start, start + out.nbytes)]  # a view writes nothing
    if op.name in plan.scratch:
        offset, size = plan.scratch[op.name]
        ranges.append((offset, offset + size))
    return [(0, 0)] * (count - len(ranges)) + sorted(ranges)


def write_ranges(graph: Graph) -> int:
    """How many arena ranges a layer may write, at most (outputs and scratch; at least 2)."""
    return max([2] + [len(op.outputs) + 1 for op in graph.ops])


def stream_input(graph: Graph, plan: MemoryPlan, target) -> dict | None:
    """A --stream-input build's input rows (report.json, header, drivers): rows, bytes per row, and
    its arena offset if no band stage streams it (then it is read whole before the first layer)."""
    if not target.stream_input:
        return None
    name = graph.inputs[0]
    _, rows, width, channels = graph.tensors[name].shape
    offset = None if name in graph.streamed_inputs else offset_of(plan, graph, name)
    return {"rows": rows, "row_bytes": width * channels, "offset": offset}


def runtime_sources(graph: Graph) -> list[str]:
    """The runtime_c/src files the model's kernels need, in a stable order."""
    return sorted(
        {
            source
            for op in graph.ops
            for layer in banded_layers(op)
            for source in unit_of(layer).runtime_sources_of(layer)
        }
    )


def state_layout(graph: Graph) -> tuple[dict[str, int], int]:
    """Offsets of the layers' persistent state (streaming) in one buffer, and its bytes."""
    offsets, total = {}, 0
    for op in graph.ops:
        size = unit_of(op).state_bytes(op)
        if size:
            offsets[op.name] = total
            total += (size + 3) // 4 * 4
    return offsets, total


def report(graph: Graph, plan: MemoryPlan, name: str, target, weights_bytes: int, calls: list) -> dict:
    """report.json. Per layer: live_bytes, the arena bytes in use while it runs; in_place, the
    input its output is written over (null: none); kernel, the C function it calls, and
    kernel_reason, why that one; constants_bytes, its share of the flash constants. Per buffer:
    overwrites, the buffer it is written over in place (null: none)."""
    layers = []
    overwritten = _overwritten(graph, plan)
    for index, (op, call) in enumerate(zip(graph.ops, calls)):
        out = graph.tensors[op.outputs[0]]
        layers.append(
            {
                "kernel": call.function or op.kernel.function,
                "kernel_reason": op.kernel.reason
                + ("; runs in place over its input" if op.name in plan.in_place else ""),
                "constants_bytes": constants_bytes(call.constants),
                "name": op.name,
                "op": op.kind,
                "macs": unit_of(op).macs(op, graph),
                "input_shape": list(graph.tensors[op.inputs[0]].shape),
                "output_shape": list(out.shape),
                "arena_offset": offset_of(plan, graph, op.outputs[0]),
                "output_bytes": 0 if out.alias_of else out.nbytes,
                "scratch_bytes": plan.scratch.get(op.name, (0, 0))[1],
                "source": op.source,
                "in_place": overwritten.get(graph.storage(op.outputs[0])) if op.name in plan.in_place else None,
                "live_bytes": occupied_bytes(plan, index),
            }
        )
    return {
        "name": name,
        "target": target.name,
        "macs": sum(layer["macs"] for layer in layers),
        **io_entries(graph, plan),
        "arena_bytes": plan.arena_bytes,
        "state_bytes": state_layout(graph)[1],
        "ram_bytes": plan.arena_bytes + state_layout(graph)[1],
        "lower_bound_bytes": plan.lower_bound_bytes,
        "lower_bound_without_in_place_bytes": plan.lower_bound_without_in_place_bytes,
        "in_place_layers": len(plan.in_place),
        "scratch_bytes": sum(size for _, size in plan.scratch.values()),
        "weights_bytes": weights_bytes,
        "planner": plan.strategy,
        "layers": layers,
        "buffers": [_buffer_entry(buffer, plan, len(graph.ops), overwritten) for buffer in plan.buffers],
        **({"banding": plan.banding} if plan.banding else {}),
        **({"stream_input": stream_input(graph, plan, target)} if target.stream_input else {}),
        **({"precision": plan.precision} if plan.precision else {}),
    }


def cmsis_nn_library(target) -> dict | None:
    """The CMSIS-NN checkout the generated code links (--kernels cmsis-nn): its path and commit."""
    if target.kernels != "cmsis-nn":
        return None
    return {"dir": target.cmsis_nn_dir, "commit": cmsis_nn.commit(Path(target.cmsis_nn_dir))}


def constants_bytes(constants: list) -> int:
    """The flash bytes of a layer's constant arrays ((ctype, symbol, values) as CCall holds them)."""
    return sum(int(np.asarray(values).size) * np.dtype(C_TYPES[ctype]).itemsize for ctype, _, values in constants)


def layer_constants(op: Op, graph: Graph) -> list:
    """One layer's flash constants, (ctype, symbol, values) as CCall holds them, as it is
    specialized now, before any plan."""
    return unit_of(op).emit(op, graph, _UnplannedNames("model", graph, None)).constants


def layer_constants_bytes(op: Op, graph: Graph) -> int:
    """The flash bytes of one layer's constants as it is specialized now, before any plan."""
    return constants_bytes(layer_constants(op, graph))


def scratch_checks(symbol: str, required) -> list[tuple[str, str]]:
    """A layer's compile-time scratch checks, (symbol, C expression of the bytes required): its
    one, or for a band stage one per layer ((layer, expression) pairs), each named for it."""
    if not required:
        return []
    if isinstance(required, str):
        return [(symbol, required)]
    return [(f"{symbol}_{layer}", expression) for layer, expression in required]


def _overwritten(graph: Graph, plan: MemoryPlan) -> dict[str, str]:
    """In-place output buffer -> the input buffer it is written over."""
    return {
        graph.storage(op.outputs[0]): graph.storage(op.inputs[plan.in_place[op.name].input])
        for op in graph.ops
        if op.name in plan.in_place
    }


def _buffer_entry(buffer: Buffer, plan: MemoryPlan, steps: int, overwritten: dict[str, str]) -> dict:
    """One arena buffer's bytes and lifetime; first_layer -1 / last_layer == len(layers) mean it is
    live before the first / after the last layer (the model's input / output)."""
    scratch = buffer.name in {scratch_buffer_name(op) for op in plan.scratch}
    kind = "scratch" if scratch else "input" if buffer.first < 0 else "output" if buffer.last >= steps else "activation"
    return {
        "name": buffer.name,
        "kind": kind,
        "offset": plan.offsets[buffer.name],
        "bytes": buffer.size,
        "first_layer": buffer.first,
        "last_layer": buffer.last,
        "overwrites": overwritten.get(buffer.name),
    }


@functools.cache
def runtime_id() -> str:
    """The identity of edgec's kernels: a hash of every runtime_c file a model directory may
    copy. Model directories link into one application only with the same runtime (edgec.mk and
    CMakeLists.txt check it; a model's invoke reads runtime_symbol(), so a hand-made build that
    mixes runtimes fails to link)."""
    digest = hashlib.sha256()
    for path in sorted(p for folder in ("include", "src") for p in (RUNTIME / folder).rglob("*") if p.is_file()):
        digest.update(path.relative_to(RUNTIME).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def runtime_symbol() -> str:
    return f"edgec_runtime_{runtime_id()}"


@dataclass
class _Model:
    """One model's files in a directory (what the build files list) and its report."""

    name: str
    report: dict
    runtime_sources: list[str]

    @property
    def sources(self) -> list[str]:
        return [f"{self.name}.c", f"{self.name}_weights.c"]


def emit(graph: Graph, plan: MemoryPlan, out_dir: Path, *, name: str, target, origin: str) -> dict:
    """Writes every file into `out_dir` (which must exist and be empty); returns the report."""
    model = _emit_model(graph, plan, out_dir, name=name, target=target, origin=origin, shared_arena=False)
    _emit_runtime_and_build_files(out_dir, [model], target, shared_arena_bytes=None)
    (out_dir / "report.json").write_text(json.dumps(model.report, indent=2) + "\n")
    return model.report


def emit_many(models: list[tuple], out_dir: Path, *, target, shared_arena: bool) -> dict:
    """Writes several models (graph, plan, name, origin), planned for the same `target`, into
    `out_dir` (which must exist and be empty) with one runtime; with `shared_arena`, one arena
    for all of them (edgec_shared_arena.h), sized by the largest. Returns the directory's report:
    {"models": each model's report, "runtime": runtime_id(), "shared_arena_bytes": (or None),
    "arena_bytes": the RAM of the arenas, shared or each model's own}."""
    emitted = [
        _emit_model(graph, plan, out_dir, name=name, target=target, origin=origin, shared_arena=shared_arena)
        for graph, plan, name, origin in models
    ]
    largest = max(model.report["arena_bytes"] for model in emitted)
    _emit_runtime_and_build_files(out_dir, emitted, target, shared_arena_bytes=largest if shared_arena else None)
    summary = {
        "models": [model.report for model in emitted],
        "target": target.name,
        "runtime": runtime_id(),
        "shared_arena_bytes": largest if shared_arena else None,
        "arena_bytes": largest if shared_arena else sum(model.report["arena_bytes"] for model in emitted),
    }
    (out_dir / "report.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def private_headers(runtime: list[str]) -> list[str]:
    """The headers beside the runtime sources: a kernel family's folder may keep the code its
    variants share (e.g. conv/edgec_conv_s8_packed.h) in a header private to that folder."""
    folders = sorted({Path(source).parent for source in runtime})
    return [
        f"src/{folder.as_posix()}/{h.name}"
        for folder in folders
        for h in sorted((RUNTIME / "src" / folder).glob("*.h"))
    ]


def _emit_runtime_and_build_files(out_dir: Path, models: list[_Model], target, shared_arena_bytes: int | None) -> None:
    """runtime/ (the kernels every model calls, once), the shared arena if any, edgec.mk and
    CMakeLists.txt."""
    runtime = sorted({source for model in models for source in model.runtime_sources})
    for relative in list(SHARED_RUNTIME_FILES) + [f"src/{s}" for s in runtime] + private_headers(runtime):
        destination = out_dir / "runtime" / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(RUNTIME / relative, destination)
    env = _environment()
    context = {
        "version": __version__,
        "runtime_id": runtime_id(),
        "runtime_symbol": runtime_symbol(),
        "target": target.name,
        "target_cflags": " ".join(target.cflags),
        "cmsis_nn": cmsis_nn_library(target),
        "models": models,
        "KEY": "_".join(model.name.upper() for model in models),
        "runtime_sources": [RUNTIME_IDENTITY_SOURCE, *runtime],
        "shared_arena_bytes": shared_arena_bytes,
        "sources": [source for model in models for source in model.sources]
        + (["edgec_shared_arena.c"] if shared_arena_bytes else []),
    }
    (out_dir / "runtime" / "src" / RUNTIME_IDENTITY_SOURCE).write_text(
        long_lines(env.get_template("edgec_runtime.c.j2").render(**context))
    )
    outputs = [("edgec.mk.j2", "edgec.mk"), ("CMakeLists.txt.j2", "CMakeLists.txt")]
    if shared_arena_bytes:
        outputs += [(f"{filename}.j2", filename) for filename in SHARED_ARENA_FILES]
    for template, filename in outputs:
        text = env.get_template(template).render(**context)
        (out_dir / filename).write_text(long_lines(text) if filename.endswith((".c", ".h")) else text)


def _emit_model(
    graph: Graph, plan: MemoryPlan, out_dir: Path, *, name: str, target, origin: str, shared_arena: bool
) -> _Model:
    """One model's header, C file and constants; its report."""
    state_offsets, state_bytes = state_layout(graph)
    names = Names(name, graph, plan, state_offsets)
    calls = [unit_of(op).emit(op, graph, names) for op in graph.ops]
    constants = [
        {
            "ctype": ctype,
            "symbol": symbol,
            "count": int(np.asarray(values).size),
            "body": _array_body(np.asarray(values).astype(C_TYPES[ctype])),
        }
        for call in calls
        for ctype, symbol, values in call.constants
    ]
    weights_bytes = sum(constants_bytes(call.constants) for call in calls)
    layers = [
        {
            "index": i,
            "name": op.name,
            "op": op.kind,
            "code": block(call.code, 4),
            "params": call.params,
            "shape": "x".join(str(v) for v in graph.tensors[op.outputs[0]].shape),
            "source": op.source,
            "writes": allowed_writes(op, graph, plan, write_ranges(graph)),
            "scratch_bytes": plan.scratch.get(op.name, (0, 0))[1],
            "scratch_checks": scratch_checks(f"{name}_{op.name}", call.scratch_required),
        }
        for i, (op, call) in enumerate(zip(graph.ops, calls))
    ]
    library = cmsis_nn_library(target)
    context = {
        "name": name,
        "NAME": name.upper(),
        "version": __version__,
        "origin": Path(origin).name,
        "target": target.name,
        "opt": target.opt,
        "target_cflags": " ".join(target.cflags),
        "arena_bytes": plan.arena_bytes,
        "dsp": target.dsp,
        "mve": target.mve,
        "macs": sum(unit_of(op).macs(op, graph) for op in graph.ops),
        **io_entries(graph, plan),
        "layers": layers,
        "constants": constants,
        "state_bytes": state_bytes,
        "state_reset": [block(call.state_reset, 4) for call in calls if call.state_reset],
        "cmsis_nn": library,
        "shared_arena": shared_arena,
        "runtime_symbol": runtime_symbol(),
        "write_ranges": write_ranges(graph),
        "layer_writes": commented_rows(
            [(braced(braced(pair) for pair in layer["writes"]) + ",", layer["name"]) for layer in layers], INDENT
        ),
        "stream_input": stream_input(graph, plan, target),
    }
    env = _environment()
    for template, filename in (
        ("model.h.j2", f"{name}.h"),
        ("model.c.j2", f"{name}.c"),
        ("weights.h.j2", f"{name}_weights.h"),
        ("weights.c.j2", f"{name}_weights.c"),
    ):
        (out_dir / filename).write_text(long_lines(env.get_template(template).render(**context)))
    summary = report(graph, plan, name, target, weights_bytes, calls)
    summary["cmsis_nn"] = library
    return _Model(name, summary, runtime_sources(graph))
