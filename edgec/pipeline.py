"""The whole compiler, top to bottom:
load -> export -> normalize -> fold BN -> quantize -> lower -> fuse -> unify qparams -> layout ->
fuse copies -> finalize -> specialize -> kernel library (--kernels) -> constant layouts (--opt auto) ->
schedule + plan -> emit.
"""

from __future__ import annotations

import copy
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import torch
from torch.fx import GraphModule

from edgec.backend import codegen
from edgec.backend.banding import check_stream_input, fit_budget
from edgec.backend.plan import MemoryPlan
from edgec.backend.schedule import schedule_and_plan
from edgec.errors import EdgecError
from edgec.frontend import export
from edgec.frontend.calibration import DEFAULT as DEFAULT_CALIBRATION
from edgec.frontend.calibration import range_warnings
from edgec.frontend.lower import lower
from edgec.frontend.quantize import EdgecQuantizer, int4_weight_nodes, is_quantized, quantize
from edgec.frontend.torch_ops import GETITEM
from edgec.frontend.weight_rounding import DEFAULT as DEFAULT_INT4_ROUNDING
from edgec.frontend.weight_rounding import round_int4_weights
from edgec.ir import Graph
from edgec.ops import OPS, unit_of
from edgec.ops.cmsis_nn import select_cmsis_nn_kernels
from edgec.ops.int16_units import select_int16_kernels
from edgec.ops.matmul import fold_output_scales, place_right_operands
from edgec.ops.recurrent import keep_last_steps, make_streaming
from edgec.passes.constant_layouts import choose_constant_layouts
from edgec.passes.fold_batchnorm import fold_batchnorm
from edgec.passes.fuse import fold_double_requantize, fold_pad, fuse_activations, fuse_copies
from edgec.passes.layout import assign_layouts, relayout
from edgec.passes.normalize import normalize
from edgec.passes.qparams import unify_qparams
from edgec.targets.cores import TARGETS, Target, get_target

RANDOM_CALIBRATION_SAMPLES = 32


@dataclass
class Quantized:
    """A model quantized for edgec's kernels, before anything target-specific."""

    origin: str
    example_inputs: tuple
    float_module: GraphModule | None  # BN-folded float model; None for a pre-quantized program
    quantized_module: GraphModule


@dataclass
class Compiled(Quantized):
    graph: Graph = None
    plan: MemoryPlan = None
    target: Target = None
    choices: list[str] = field(default_factory=list)  # what target-level choices were made and why


def compile_model(
    spec,
    *,
    calibration,
    target: str | Target = "host",
    example_inputs=None,
    stream: bool = False,
    progress: Callable | None = None,
    warn: Callable[[str], None] = print,
    method: str = DEFAULT_CALIBRATION,
    per_channel_linear: bool = False,
    activations: str = "int8",
    int16_layers: Iterable[str] = (),
    weights: str = "int8",
    int4_layers: Iterable[str] = (),
    int4_rounding: str = DEFAULT_INT4_ROUNDING,
    tflite_compatible: bool = False,
) -> Compiled:
    return compile_for(
        quantize_model(
            spec,
            calibration=calibration,
            example_inputs=example_inputs,
            progress=progress,
            warn=warn,
            method=method,
            per_channel_linear=per_channel_linear,
            activations=activations,
            int16_layers=int16_layers,
            weights=weights,
            int4_layers=int4_layers,
            int4_rounding=int4_rounding,
        ),
        target,
        stream=stream,
        tflite_compatible=tflite_compatible,
    )


def quantize_model(
    spec,
    *,
    calibration,
    example_inputs=None,
    progress: Callable | None = None,
    warn: Callable[[str], None] = print,
    method: str = DEFAULT_CALIBRATION,
    per_channel_linear: bool = False,
    activations: str = "int8",
    int16_layers: Iterable[str] = (),
    weights: str = "int8",
    int4_layers: Iterable[str] = (),
    int4_rounding: str = DEFAULT_INT4_ROUNDING,
) -> Quantized:
    """load -> export -> normalize -> fold BN -> quantize (or keep a program's own Q/DQ).
    `spec`: anything export.load takes (a .pt2 path, 'file.py:factory', an ExportedProgram, or
    an nn.Module with `example_inputs`). `method` (edgec.frontend.calibration) and `per_channel_linear` are
    EdgecQuantizer's options, and so are `activations` ("int8" or "int16", the 16x8 scheme, for the
    whole model) and `int16_layers` (the nn.Module paths whose layers take int16 activations), and
    `weights` ("int8" or "int4": every linear and convolution layer) and `int4_layers` (the paths
    whose layers take int4 weights), chosen by `int4_rounding` (edgec.frontend.weight_rounding)."""
    loaded, module = prepare(spec, example_inputs)
    return quantize_loaded(
        loaded,
        module,
        calibration=calibration,
        progress=progress,
        warn=warn,
        method=method,
        per_channel_linear=per_channel_linear,
        activations=activations,
        int16_layers=int16_layers,
        weights=weights,
        int4_layers=int4_layers,
        int4_rounding=int4_rounding,
    )


def quantize_loaded(
    loaded: export.LoadedModel,
    module: GraphModule,
    *,
    calibration,
    progress: Callable | None = None,
    warn: Callable[[str], None] = print,
    method: str = DEFAULT_CALIBRATION,
    per_channel_linear: bool = False,
    activations: str = "int8",
    int16_layers: Iterable[str] = (),
    weights: str = "int8",
    int4_layers: Iterable[str] = (),
    int4_rounding: str = DEFAULT_INT4_ROUNDING,
) -> Quantized:
    """quantize_model after `prepare`: calibrate and quantize (or keep a program's own Q/DQ)."""
    for note in loaded.notes:
        warn(note)
    if is_quantized(module):
        if (
            method != DEFAULT_CALIBRATION
            or per_channel_linear
            or activations != "int8"
            or list(int16_layers)
            or weights != "int8"
            or list(int4_layers)
        ):
            warn(f"WARNING: {loaded.origin} is already quantized; calibration and precision options do not apply")
        return Quantized(loaded.origin, loaded.example_inputs, None, module)
    samples = calibration_samples(calibration, loaded.example_inputs, warn, module)
    if calibration is not None:
        for line in range_warnings(samples, loaded.example_inputs):
            warn(line)
    float_module = copy.deepcopy(module)
    if weights == "int4" or list(int4_layers):
        round_int4_weights(module, int4_weight_nodes(module, weights == "int4", int4_layers), samples, int4_rounding)
    quantizer = EdgecQuantizer(
        method,
        per_channel_linear,
        activations=activations,
        int16_layers=int16_layers,
        weights=weights,
        int4_layers=int4_layers,
    )
    return Quantized(loaded.origin, loaded.example_inputs, float_module, quantize(module, samples, progress, quantizer))


def prepare(spec, example_inputs=None) -> tuple[export.LoadedModel, GraphModule]:
    """load -> export -> normalize -> fold BN, and every unsupported operator reported at once:
    all that happens before calibration."""
    loaded = export.load(spec, example_inputs)
    module = normalize(loaded.module)  # first: an attention mask of 0 and -inf becomes a bool mask
    check_finite(module, loaded.origin)
    module = fold_batchnorm(module)
    check_supported(module, loaded.origin)
    return loaded, module


def compile_for(
    quantized: Quantized, target: str | Target = "host", *, stream: bool = False, tflite_compatible: bool = False
) -> Compiled:
    """lower -> (stream: one time step per invoke) -> fuse -> unify qparams -> layout -> fuse
    copies -> finalize -> specialize for `target` -> constant layouts -> schedule + plan -> over the
    RAM budget: band stages (edgec.backend.banding). `tflite_compatible`: where TFLite Micro departs
    from the program's literal meaning, compute what TFLite Micro computes (docs/tflite-compatible.md)."""
    target_info = get_target(target)
    graph = lower(
        quantized.quantized_module,
        converter_semantics=quantized.float_module is None,
        tflite_compatible=tflite_compatible,
    )
    if tflite_compatible:
        fold_double_requantize(graph)
    if stream:
        make_streaming(graph)
    else:
        keep_last_steps(graph)
    fold_pad(graph)
    fuse_activations(graph)
    fold_output_scales(graph)
    unify_qparams(graph)
    assign_layouts(graph)
    relayout(graph)
    fuse_copies(graph)
    place_right_operands(graph)
    select_int16_kernels(graph)
    for op in graph.ops:
        unit_of(op).finalize(op, graph)
        unit_of(op).specialize(op, graph, target_info)
    choices = []
    if target_info.kernels == "cmsis-nn":
        choices += select_cmsis_nn_kernels(graph, target_info, Path(target_info.cmsis_nn_dir))
    choices += choose_constant_layouts(graph, target_info)
    check_stream_input(graph, target_info, stream)
    plan, banding = fit_budget(graph, target_info, schedule_and_plan(graph, target_info))
    if banding is not None:
        plan.banding = banding.to_json()
        choices.append(banding.summary())
    return Compiled(
        quantized.origin,
        quantized.example_inputs,
        quantized.float_module,
        quantized.quantized_module,
        graph,
        plan,
        target_info,
        choices,
    )


def emit(compiled: Compiled, out_dir: Path, name: str) -> dict:
    """Writes the C directory atomically (see _write_atomically): a failure, or a model over the
    target's memory budget, never leaves an output directory."""

    def write(staging: Path) -> dict:
        report = codegen.emit(
            compiled.graph, compiled.plan, staging, name=name, target=compiled.target, origin=compiled.origin
        )
        check_memory_budget(report, compiled.target)
        return report

    return _write_atomically(Path(out_dir), write)


def _write_atomically(out_dir: Path, write: Callable[[Path], dict]) -> dict:
    """`write` fills a sibling temporary folder, which is then renamed into place: `out_dir` is
    either the whole new directory or left as it was. Returns what `write` returns."""
    check_output_dir(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        report = write(staging)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return report


def emit_many(models: list[tuple[Compiled, str]], out_dir: Path, *, shared_arena: bool = False) -> dict:
    """Several models (compiled for one target, each with its C name) into one directory with one
    runtime (and, with `shared_arena`, one arena sized by the largest), written atomically as
    emit writes one. Returns the directory's report (codegen.emit_many)."""
    if not models:
        raise EdgecError("no models to write")
    names = [name for _, name in models]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise EdgecError(f"two models are named {repeated[0]!r}: give each model its own name (--name)")
    target = models[0][0].target
    for compiled, name in models:
        if (compiled.target.name, compiled.target.cflags, compiled.target.kernels, compiled.target.cmsis_nn_dir) != (
            target.name,
            target.cflags,
            target.kernels,
            target.cmsis_nn_dir,
        ):
            raise EdgecError(
                f"model {name!r} is compiled for {compiled.target.name} (--kernels "
                f"{compiled.target.kernels}), {names[0]!r} for {target.name} (--kernels {target.kernels}): "
                f"models sharing one directory and runtime need the same target and kernels"
            )

    def write(staging: Path) -> dict:
        report = codegen.emit_many(
            [(c.graph, c.plan, name, c.origin) for c, name in models], staging, target=target, shared_arena=shared_arena
        )
        # The firmware holds them all: their arenas (shared: the largest) and all their constants.
        check_memory_budget(
            {
                "arena_bytes": report["arena_bytes"],
                "weights_bytes": sum(model["weights_bytes"] for model in report["models"]),
            },
            target,
        )
        return report

    return _write_atomically(Path(out_dir), write)


def quantization_warnings(graph: Graph) -> list[str]:
    """One line per layer whose int8 weights are all zero (its float weights below half a step of
    their scale, or a program's collapsed constants: the layer outputs its bias alone) or whose
    int32 bias saturates (too large for s_in * s_w): bit-exact, but not the model."""
    warnings = []
    for op in graph.ops:
        weight, bias = op.attrs.get("weight"), op.attrs.get("bias")
        if weight is None or np.asarray(weight).dtype != np.int8:
            continue
        where = f"{op.source or op.name} ({op.name})"
        if not np.asarray(weight).any():
            warnings.append(f"WARNING: {where}: every weight quantizes to 0; the layer outputs its bias alone")
        if bias is not None and np.asarray(bias).dtype == np.int32:
            saturated = np.flatnonzero(np.abs(np.asarray(bias, np.int64)) >= 2**31 - 1)
            if saturated.size:
                warnings.append(
                    f"WARNING: {where}: the int32 bias saturates in output channels "
                    f"{saturated.tolist()[:8]}{' ...' if saturated.size > 8 else ''} "
                    f"(too large for the layer's input and weight scales)"
                )
    return warnings


def check_memory_budget(report: dict, target: Target) -> None:
    """One error, with the figures, if the arena exceeds the target's RAM budget or the constants
    its flash budget. Targets without a budget (the host) accept any model."""
    excess = []
    if target.ram_bytes is not None and report["arena_bytes"] > target.ram_bytes:
        excess.append(f"arena {report['arena_bytes']:,} B > RAM budget {target.ram_bytes:,} B")
    if target.flash_bytes is not None and report["weights_bytes"] > target.flash_bytes:
        excess.append(f"constants {report['weights_bytes']:,} B > flash budget {target.flash_bytes:,} B")
    if excess:
        table = TARGETS.get(target.name)
        typical = table is not None and (target.ram_bytes, target.flash_bytes) == (table.ram_bytes, table.flash_bytes)
        origin = f"budget of {target.part}; set yours with --ram/--flash" if typical else target.part
        if (
            report["weights_bytes"] > (target.flash_bytes or 0)
            and target.opt == "speed"
            and target.dsp
            and not target.mve
        ):
            origin += "; --opt auto or size keeps the DSP kernels' constants smaller"
        if report.get("banding"):
            origin += (
                f"; {report['arena_bytes']:,} B is the smallest arena band stages reach, from "
                f"{report['banding']['layer_by_layer_arena_bytes']:,} B layer by layer"
            )
        raise EdgecError(f"model does not fit {target.name}: {'; '.join(excess)} ({origin})")


def check_output_dir(out_dir: Path) -> None:
    """An existing output directory is replaced only if edgec wrote it (it has a report.json)."""
    out_dir = Path(out_dir)
    if out_dir.exists() and (
        not out_dir.is_dir() or (any(out_dir.iterdir()) and not (out_dir / "report.json").is_file())
    ):
        raise EdgecError(f"{out_dir}: exists and is not an edgec output directory; refusing to replace it")


def check_finite(module: GraphModule, origin: str) -> None:
    """One error naming the first float parameter or buffer the graph reads that holds NaN or an
    infinity, which no int8 scale can represent (calibration would otherwise fail deep inside the
    observers)."""
    read = {node.target for node in module.graph.nodes if node.op == "get_attr"}
    for name, tensor in (*module.named_parameters(), *module.named_buffers()):
        if name in read and tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            what = "NaN" if bool(torch.isnan(tensor).any()) else "an infinite value"
            raise EdgecError(
                f"{origin}: {'parameter' if isinstance(tensor, torch.nn.Parameter) else 'buffer'} "
                f"'{name}' contains {what}; a model's weights and buffers must be finite"
            )


def check_supported(module: GraphModule, origin: str) -> None:
    """One error listing every operator edgec cannot compile and every use of a supported one
    beyond its limits (OpDef.check), grouped by operator and source line, before any work."""
    known = set(OPS) | {GETITEM}
    problems: dict[tuple[str, str], int] = {}
    for node in module.graph.nodes:
        if node.op != "call_function" or "quantized_decomposed" in str(node.target):
            continue
        if node.target not in known:
            problem = f"{node.target} (unsupported operator)"
        elif node.target == GETITEM or (problem := OPS[node.target].check(node)) is None:
            continue
        key = (problem, export.node_location(node))
        problems[key] = problems.get(key, 0) + 1
    if problems:
        lines = [
            f"  {problem}{f' x{count}' if count > 1 else ''}: {where}" for (problem, where), count in problems.items()
        ]
        raise EdgecError(
            f"{origin}: cannot compile {sum(problems.values())} operator use"
            f"{'s' if sum(problems.values()) > 1 else ''}:\n" + "\n".join(lines)
        )


def calibration_samples(calibration, example_inputs: tuple, warn, module: GraphModule | None = None) -> list[tuple]:
    """Calibration as one tuple of tensors per sample, each shaped (and typed: token ids stay
    integers) like its example input."""
    shapes = [tuple(x.shape) for x in example_inputs]
    if calibration is None:
        warn(
            f"WARNING: no --calib data given: calibrating on {RANDOM_CALIBRATION_SAMPLES} random normal "
            f"samples; int8 accuracy on real data will likely be poor. Pass --calib samples.npy."
        )
        rows = token_rows(module) if module is not None else ()
        calibration = random_samples(example_inputs, RANDOM_CALIBRATION_SAMPLES, seed=0, token_rows=rows)
    per = per_input_samples(calibration, example_inputs, "calibration data")
    return [
        tuple(
            torch.from_numpy(np.ascontiguousarray(x[i])).reshape(shape).to(example.dtype)
            for x, shape, example in zip(per, shapes, example_inputs)
        )
        for i in range(len(per[0]))
    ]


def sample_shape(input_shape: tuple) -> tuple:
    """The shape of one sample of a model input in edgec's [N, ...] sample arrays: the input's own
    shape, after a leading sample axis; for an input exported with a batch of one ([1, C, H, W])
    that batch axis is the sample axis ([N, C, H, W], the form every edgec release has taken)."""
    input_shape = tuple(input_shape)
    return input_shape[1:] if input_shape[:1] == (1,) else input_shape


def random_samples(example_inputs: tuple, count: int, seed: int, token_rows=()) -> list[np.ndarray]:
    """`count` seeded standard normal samples per model input, as per_input_samples gives them; for
    an integer input (token ids), ids drawn uniformly from [0, rows) with rows its entry of
    `token_rows` (token_rows(module)), as integer-valued floats."""
    rng = np.random.default_rng(seed)
    rows = list(token_rows) + [None] * (len(example_inputs) - len(token_rows))
    return [
        rng.integers(0, limit or 2, (count, *sample_shape(x.shape))).astype(np.float32)
        if not torch.is_floating_point(x)
        else rng.standard_normal((count, *sample_shape(x.shape)), dtype=np.float32)
        for x, limit in zip(example_inputs, rows)
    ]


def token_rows(module: GraphModule) -> list[int | None]:
    """Per model input: the table rows of the embeddings that read it (the fewest), or None."""
    from edgec.frontend.torch_ops import EMBEDDINGS, module_attribute

    rows = []
    for node in module.graph.nodes:
        if node.op == "placeholder":
            tables = [
                module_attribute(module, user.args[0].target).shape[0]
                for user in node.users
                if user.target in EMBEDDINGS and user.args[0].op == "get_attr"
            ]
            rows.append(min(tables) if tables else None)
    return rows


def per_input_samples(data, example_inputs: tuple, what: str) -> list[np.ndarray]:
    """Float samples as one [N, ...] array per model input: `data` is an array or a tensor (a
    one-input model), a list of them in input order, a dict of arrays (an .npz: its one known key
    for a one-input model, else one array per input in file order), or any other iterable of
    batches (a DataLoader: see batches_to_arrays)."""
    count = len(example_inputs)
    if _is_batch_iterable(data):
        data = batches_to_arrays(data, count, what)
    if isinstance(data, dict):
        if count == 1:
            key = next((k for k in ("x", "calib", "inputs", "data") if k in data), next(iter(data)))
            data = [data[key]]
        else:
            data = list(data.values())
    elif not isinstance(data, (list, tuple)):
        data = [data]
    if len(data) != count:
        raise EdgecError(
            f"{what} has {len(data)} array{'s' if len(data) != 1 else ''}; the model has {count} "
            f"inputs (give an .npz with one array per input, in input order)"
        )
    per = [
        as_samples(x, tuple(example.shape), f"{what}{f' for input {i}' if count > 1 else ''}")
        for i, (x, example) in enumerate(zip(data, example_inputs))
    ]
    if len({len(x) for x in per}) != 1:
        raise EdgecError(f"{what}: the inputs' arrays hold different numbers of samples ({[len(x) for x in per]})")
    return per


def _is_batch_iterable(data) -> bool:
    return not isinstance(data, (np.ndarray, torch.Tensor, dict, list, tuple, str, bytes)) and hasattr(data, "__iter__")


def batches_to_arrays(batches, count: int, what: str) -> list[np.ndarray]:
    """An iterable of batches (a DataLoader, a generator) as one [N, ...] array per model input.
    A batch is an array or tensor (a one-input model), or a tuple/list whose first `count` items
    are the model's inputs (what follows, e.g. the labels, is ignored)."""
    per: list[list[np.ndarray]] = [[] for _ in range(count)]
    for index, batch in enumerate(batches):
        items = list(batch)[:count] if isinstance(batch, (tuple, list)) else [batch]
        if len(items) != count:
            raise EdgecError(
                f"{what}: batch {index} has {len(items)} item{'s' if len(items) != 1 else ''}; "
                f"the model has {count} inputs"
            )
        for arrays, item in zip(per, items):
            arrays.append(as_array(item))
    if not per[0]:
        raise EdgecError(f"{what}: the iterable gave no batches")
    try:
        return [np.concatenate(arrays) for arrays in per]
    except ValueError as exc:
        raise EdgecError(f"{what}: batches of different sample shapes ({exc})") from None


def as_array(data) -> np.ndarray:
    """A tensor (on any device, with or without grad) or anything array-like, as a numpy array."""
    if isinstance(data, torch.Tensor):
        return data.detach().cpu().numpy()
    return np.asarray(data)


def as_samples(data: np.ndarray, input_shape: tuple, what: str) -> np.ndarray:
    """Float samples of a model input shaped `input_shape`, as [N, *sample_shape(input_shape)], or
    a clear error. Accepted: [N, *input_shape] (one more leading axis than the input: N samples,
    each a whole input, whatever its rank and batch), exactly `input_shape` (one sample), and for
    an input whose first dimension is 1, [N, *input_shape[1:]] (that batch axis as the sample axis)."""
    data = as_array(data)
    if data.dtype.kind not in "fiu":
        raise EdgecError(f"{what} must be numeric, got dtype {data.dtype}")
    input_shape, per_sample = tuple(input_shape), sample_shape(input_shape)
    if data.shape == input_shape:
        data = data[None]
    if data.ndim == len(input_shape) + 1 and data.shape[1:] == input_shape:
        data = data.reshape(data.shape[0], *per_sample)
    if data.ndim < 1 or data.shape[1:] != per_sample or data.shape[0] == 0:
        forms = f"[N, {', '.join(map(str, input_shape))}]"
        if per_sample != input_shape:
            forms += f" or [N, {', '.join(map(str, per_sample))}]"
        raise EdgecError(
            f"{what} has shape {list(data.shape)}; expected {forms} (N samples) for model input {list(input_shape)}"
        )
    if not np.all(np.isfinite(data)):
        raise EdgecError(f"{what} contains NaN or infinite values")
    return data.astype(np.float32)


def load_samples(path: str | Path):
    """A .npy file's array, or an .npz file's arrays as a dict (in file order)."""
    path = Path(path)
    if not path.is_file():
        raise EdgecError(f"{path}: no such file")
    try:
        with warnings.catch_warnings():
            loaded = np.load(path, allow_pickle=False)
    except Exception as exc:
        raise EdgecError(f"{path}: not a .npy/.npz file ({str(exc).splitlines()[0]})") from None
    if isinstance(loaded, np.lib.npyio.NpzFile):
        if not loaded.files:
            raise EdgecError(f"{path}: the .npz file is empty")
        return {key: loaded[key] for key in loaded.files}
    return loaded
