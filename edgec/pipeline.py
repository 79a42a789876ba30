"""The whole compiler, top to bottom:
load -> export -> fold BN -> quantize -> lower -> fuse -> layout -> finalize -> schedule + plan -> emit.
"""
from __future__ import annotations

import copy
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch.fx import GraphModule

from edgec import codegen, frontend
from edgec.errors import EdgecError
from edgec.ir import Graph
from edgec.lower import lower
from edgec.ops import KINDS, OPS
from edgec.passes.fold_batchnorm import fold_batchnorm
from edgec.passes.fuse import fold_pad, fuse_activations
from edgec.passes.to_nhwc import to_nhwc
from edgec.plan import MemoryPlan
from edgec.quantize import is_quantized, quantize
from edgec.schedule import schedule_and_plan
from edgec.targets import TARGETS, Target, get_target
from edgec.torch_ops import GETITEM, IDENTITIES

RANDOM_CALIBRATION_SAMPLES = 32


@dataclass
class Compiled:
    graph: Graph
    plan: MemoryPlan
    target: Target
    origin: str
    example_inputs: tuple
    float_module: GraphModule | None  # BN-folded float model; None for a pre-quantized program
    quantized_module: GraphModule


def compile_model(spec: str, *, calibration: np.ndarray | None, target: str = "host",
                  progress: Callable | None = None, warn: Callable[[str], None] = print) -> Compiled:
    target_info = get_target(target)
    loaded = frontend.load(spec)
    check_finite(loaded.module, loaded.origin)
    module = fold_batchnorm(loaded.module)
    check_supported(module, loaded.origin)
    if is_quantized(module):
        float_module, quantized_module = None, module
    else:
        samples = calibration_samples(calibration, loaded.example_inputs, warn)
        float_module = copy.deepcopy(module)
        quantized_module = quantize(module, samples, progress)
    graph = lower(quantized_module)
    fold_pad(graph)
    fuse_activations(graph)
    to_nhwc(graph)
    for op in graph.ops:
        KINDS[op.kind].finalize(op, graph)
        KINDS[op.kind].specialize(op, graph, target_info)
    plan = schedule_and_plan(graph, target_info)
    return Compiled(graph, plan, target_info, loaded.origin, loaded.example_inputs, float_module, quantized_module)


def emit(compiled: Compiled, out_dir: Path, name: str) -> dict:
    """Writes the C directory atomically: to a sibling temporary folder, then renamed into place,
    so a failure (or a model over the target's memory budget) never leaves an output directory."""
    out_dir = Path(out_dir)
    check_output_dir(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        report = codegen.emit(compiled.graph, compiled.plan, staging, name=name,
                              target=compiled.target, origin=compiled.origin)
        check_memory_budget(report, compiled.target)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return report


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
        if report["weights_bytes"] > (target.flash_bytes or 0) and target.opt == "speed" and target.dsp and not target.mve:
            origin += "; --opt size keeps the DSP kernels' constants smaller"
        raise EdgecError(f"model does not fit {target.name}: {'; '.join(excess)} ({origin})")


def check_output_dir(out_dir: Path) -> None:
    """An existing output directory is replaced only if edgec wrote it (it has a report.json)."""
    out_dir = Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or (any(out_dir.iterdir()) and not (out_dir / "report.json").is_file())):
        raise EdgecError(f"{out_dir}: exists and is not an edgec output directory; refusing to replace it")


def check_finite(module: GraphModule, origin: str) -> None:
    """One error naming the first float parameter or buffer that holds NaN or an infinity, which
    no int8 scale can represent (calibration would otherwise fail deep inside the observers)."""
    for name, tensor in (*module.named_parameters(), *module.named_buffers()):
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            what = "NaN" if bool(torch.isnan(tensor).any()) else "an infinite value"
            raise EdgecError(f"{origin}: {'parameter' if isinstance(tensor, torch.nn.Parameter) else 'buffer'} "
                             f"'{name}' contains {what}; a model's weights and buffers must be finite")


def check_supported(module: GraphModule, origin: str) -> None:
    """One error naming every operator edgec cannot compile, with the user's source line."""
    known = set(OPS) | IDENTITIES | {GETITEM}
    problems = []
    for node in module.graph.nodes:
        if node.op != "call_function" or node.target in known or "quantized_decomposed" in str(node.target):
            continue
        problems.append(f"{node.target} at {frontend.source_line(node)}")
    if problems:
        raise EdgecError(f"{origin}: unsupported operator{'s' if len(problems) > 1 else ''}: " + "; ".join(problems))


def calibration_samples(calibration: np.ndarray | None, example_inputs: tuple, warn) -> list[tuple]:
    shape = tuple(example_inputs[0].shape)
    if calibration is None:
        warn(f"WARNING: no --calib data given: calibrating on {RANDOM_CALIBRATION_SAMPLES} random normal "
             f"samples; int8 accuracy on real data will likely be poor. Pass --calib samples.npy.")
        rng = np.random.default_rng(0)
        calibration = rng.standard_normal((RANDOM_CALIBRATION_SAMPLES, *shape[1:]), dtype=np.float32)
    return [(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).reshape(shape),)
            for x in as_samples(calibration, shape, "calibration data")]


def as_samples(data: np.ndarray, input_shape: tuple, what: str) -> np.ndarray:
    """[N, *input_shape[1:]] (or [N, *input_shape]) float samples, or a clear error."""
    data = np.asarray(data)
    if data.dtype.kind not in "fiu":
        raise EdgecError(f"{what} must be numeric, got dtype {data.dtype}")
    per_sample = tuple(input_shape[1:])
    if data.shape[1:] == tuple(input_shape):
        data = data.reshape(data.shape[0], *per_sample)
    if data.ndim < 1 or data.shape[1:] != per_sample or data.shape[0] == 0:
        raise EdgecError(f"{what} has shape {list(data.shape)}; expected [N, {', '.join(map(str, per_sample))}] "
                         f"for model input {list(input_shape)}")
    if not np.all(np.isfinite(data)):
        raise EdgecError(f"{what} contains NaN or infinite values")
    return data.astype(np.float32)


def load_samples(path: str | Path) -> np.ndarray:
    path = Path(path)
    if not path.is_file():
        raise EdgecError(f"{path}: no such file")
    try:
        with warnings.catch_warnings():
            loaded = np.load(path, allow_pickle=False)
    except Exception as exc:
        raise EdgecError(f"{path}: not a .npy/.npz file ({str(exc).splitlines()[0]})") from None
    if isinstance(loaded, np.lib.npyio.NpzFile):
        keys = list(loaded.keys())
        if not keys:
            raise EdgecError(f"{path}: the .npz file is empty")
        key = next((k for k in ("x", "calib", "inputs", "data") if k in keys), keys[0])
        return loaded[key]
    return loaded
