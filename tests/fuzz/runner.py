"""Compile a fuzz model with edgec, run the golden simulator and the generated C on the same
inputs, compare byte for byte, and classify the result. Nothing is excused: a verdict is a
failure unless it says the model compiled, ran bit-exact and follows its quantized program.

  ok          the C equals the golden simulator, every layer follows the quantized program, and
              the int8 output is close to the float model;
  inaccurate  the same, but the int8 output's SQNR against the float model is below the threshold
              (quantization may legitimately lose a degenerate model: its layers still follow the
              program, so the loss is the program's, not edgec's) -- reported, not a failure;
  bounded     bit-exact, and the only departing layers depart within a bound documented for
              that exact case and computed for that layer (departure_bound: TFLite's bilinear
              positions in 1/1024, docs/numerics.md "Bilinear resize") -- not a failure;
  limit       a clean EdgecError naming a documented limit (DOCUMENTED_LIMITS: the README says
              such models are refused) -- counted, not a failure;
  refused     any other clean EdgecError: every family draws only forms the README lists as
              supported, so refusing one is a failure;
  mismatch    golden and C outputs differ in at least one byte;
  departs     bit-exact, but some layer's golden kernel, fed the quantized program's own values,
              departs from that program (edgec.tools.verify.layer_agreement / disagreeing_layers) beyond
              any documented bound -- the integer program is not the model, as edgec verify says;
  crash       any other exception while compiling or simulating (an internal error), or a C
              build or run failure (warnings, sanitizers, arena write checks, QEMU faults);
  invalid     the generated float model itself fails or gives non-finite values (a generator
              bug, not edgec's).

Every C build checks arena writes (EDGEC_CHECK_WRITES: canaries around the arena, each layer's
writes confined to its output and scratch), on the host and on the Cortex-M targets alike. On the
host the C is built with the flags of edgec.tools.verify.build_host(sanitize=True) (strict warnings,
ASan + UBSan, arena write checks), but through edgec.targets.toolchain's object cache: the runtime
kernels are compiled once per session, not once per model. Cortex-M targets run through
edgec.targets.device.run_model under QEMU, whose program is built for "verify" (the same write checks; a
violation fails the run). Every model is written to a file first and compiled from it
(`file.py:factory`), so a failing model's file is its reproducer.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import shutil
import sys
import time
import traceback
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import jinja2
import numpy as np
import torch

from edgec import sim
from edgec.backend.codegen import TEMPLATES
from edgec.errors import EdgecError
from edgec.ops import unit_of
from edgec.ops.movement import ONE
from edgec.ops.recurrent import reset_state
from edgec.pipeline import compile_for, compile_model, emit
from edgec.targets import device, toolchain
from edgec.targets.cores import get_target
from edgec.tools import verify
from tests.fuzz.generator import FAMILIES, GENERATOR_VERSION, ModelSpec, Unfit, generate, model_source

FAILURES = ("refused", "mismatch", "departs", "crash", "invalid")
VERDICTS = ("ok", "inaccurate", "bounded", "limit", *FAILURES)
COMPILED = ("ok", "inaccurate", "bounded", "mismatch", "departs")  # compiled (and emitted) models
# Refusals documented as limits of a model or a board, not of an operator form: the model does
# not fit the target's RAM/flash budget (--ram/--flash, the typical part's by default) or the
# program the QEMU board of a Cortex-M target; log_softmax over more than 4095 elements
# (docs/numerics.md, "Log-softmax": TFLite's int8 sum of exps overflows); a model that computes
# nothing (only views of its input: there is no program to emit); an int16 layer whose
# s_in*s_w/s_out reaches 2^7 (README, --activations int16: TFLite's int16 output stage).
DOCUMENTED_LIMITS = (
    re.compile(r"the model program does not fit QEMU's"),
    re.compile(r"^model does not fit [\w-]+: .* budget"),
    re.compile(r"log_softmax over \d+ elements( \(at most 4095\)|: TFLite's int8 sum of exps overflows beyond 4095)"),
    re.compile(r"the model computes nothing"),
    re.compile(r"an int16 layer's effective scale s_in \* s_w / s_out must be below 2\^7"),
)
MIN_SQNR_DB = 10.0
EPS_SCALE = 2.0**-20 * 1.001  # edgec.frontend.quantize's activation observer eps (and a rounding margin)
INT32_MAX = 2**31 - 1
MODEL_NAME = "m"
KERNEL_CALL = re.compile(r"\b(edgec_\w+?)\(\s*&")  # a long call may break after its parenthesis

# Never cache bytecode of model files: a rewritten file of the same size within the same second
# would otherwise run stale code.
sys.dont_write_bytecode = True


@dataclass
class Outcome:
    verdict: str
    phase: str  # the last step reached: float, compile, emit, golden, build, run, compare, agreement, accuracy
    message: str  # one line: the refusal, the error, the mismatch figures, the SQNR
    detail: str = ""  # traceback or tool output of a crash
    sqnr_db: float | None = None
    worst_layers: list = field(default_factory=list)  # (layer, op, SQNR) below the threshold, in order
    notes: list = field(default_factory=list)  # known causes of inaccuracy found in the compiled graph
    kinds: list = field(default_factory=list)  # IR op kinds of the compiled graph
    kernels: list = field(default_factory=list)  # C functions the generated code calls
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.verdict in FAILURES


# -- one model ----------------------------------------------------------------------------------


def load_model_file(path: Path):
    module_spec = importlib.util.spec_from_file_location(f"fuzz_{Path(path).stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def resolve_target(target: str):
    """A target named as edgec names it, with ":size" for --opt size (e.g. "cortex-m4:size")."""
    name, _, opt = target.partition(":")
    return get_target(name).with_opt(opt or "speed")


def target_options(target: str) -> str:
    """The command-line options that select `target`."""
    name, _, opt = target.partition(":")
    return f"--target {name}" + (f" --opt {opt}" if opt else "")


def check_spec(spec: ModelSpec, target: str, work: Path, min_sqnr_db: float = MIN_SQNR_DB) -> Outcome:
    """Render `spec` to work/seed_<seed>.py and check it (check_model_file)."""
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"seed_{spec.seed}.py"
    path.write_text(model_source(spec))
    try:
        return check_model_file(path, target, work, min_sqnr_db)
    finally:
        path.unlink(missing_ok=True)


def check_model_file(path: Path, target: str, work: Path, min_sqnr_db: float = MIN_SQNR_DB) -> Outcome:
    start = time.monotonic()
    outcome = _check(Path(path).resolve(), resolve_target(target), Path(work).resolve(), min_sqnr_db)
    outcome.seconds = round(time.monotonic() - start, 2)
    return outcome


def _check(path: Path, target, work: Path, min_sqnr_db: float) -> Outcome:
    try:
        model_file = load_model_file(path)
        calibration, floats = model_file.samples("calibration"), model_file.samples("verification")
        build = getattr(model_file, "BUILD", {})
        problem = _float_model_problem(model_file, floats)
    except Exception as exc:
        return _crash("invalid", "float", exc)
    if problem:
        return Outcome("invalid", "float", problem)

    phase, compiled = "compile", None
    try:
        compiled = compile_model(
            f"{path}:factory",
            calibration=calibration,
            target=target,
            warn=lambda _: None,
            int16_layers=build.get("int16_layers", ()),
        )
        phase = "emit"
        out_dir = work / "c"  # one path for every model: the object cache then reuses the kernels
        emit(compiled, out_dir, MODEL_NAME)
        phase = "golden"
        inputs = verify.quantized_inputs(compiled.graph, floats)
        golden = verify.golden_outputs(compiled.graph, inputs)
    except EdgecError as exc:
        if phase in ("compile", "emit"):
            return Outcome(refusal_verdict(_one_line(exc)), phase, _one_line(exc), kinds=_kinds(compiled))
        return _crash("crash", phase, exc, compiled)
    except Exception as exc:
        return _crash("crash", phase, exc, compiled)
    kinds, kernels = _kinds(compiled), sorted(set(KERNEL_CALL.findall((out_dir / f"{MODEL_NAME}.c").read_text())))

    try:
        output = build_and_run(compiled, target, out_dir, inputs, work / "build")
    except EdgecError as exc:
        if any(limit.search(str(exc)) for limit in DOCUMENTED_LIMITS):
            return Outcome("limit", "run", _one_line(exc), kinds=kinds, kernels=kernels)
        return _crash("crash", "run", exc, compiled, kernels)
    except Exception as exc:
        return _crash("crash", "run", exc, compiled, kernels)

    comparison = verify.compare(golden, output)
    if not comparison.exact:
        return Outcome("mismatch", "compare", _mismatch_message(comparison), kinds=kinds, kernels=kernels)
    if build.get("stream"):
        stream_failure = _check_stream(compiled, target, floats, inputs, golden, work)
        if stream_failure is not None:
            stream_failure.kinds, stream_failure.kernels = kinds, kernels
            return stream_failure

    # Agreement and accuracy over the samples drawn like the calibration (the wider ones saturate).
    typical = len(floats) - len(floats) // 4
    try:
        program = verify.qdq_reference(compiled, floats[:typical])
        departing = verify.disagreeing_layers(verify.layer_agreement(compiled, program))
        ops = {op.name: op for op in compiled.graph.ops}
        bounds = {row["layer"]: departure_bound(ops[row["layer"]], compiled.graph, program, row) for row in departing}
    except Exception as exc:
        return _crash("crash", "agreement", exc, compiled, kernels)
    unexplained = [row for row in departing if bounds[row["layer"]] is None or row["max_steps"] > bounds[row["layer"]]]
    if departing:
        message = "departs from its quantized program: " + "; ".join(
            f"{row['layer']} ({row['op']}): {row['failure']} (up to {row['max_steps']} steps"
            + ("" if bounds[row["layer"]] is None else f", bound {bounds[row['layer']]}")
            + ")"
            for row in departing
        )
        if unexplained:
            return Outcome(
                "departs", "agreement", message, notes=known_losses(compiled.graph), kinds=kinds, kernels=kernels
            )
        return Outcome("bounded", "agreement", message, kinds=kinds, kernels=kernels)
    try:
        references = verify.float_reference(compiled, floats[:typical])
        sqnr = verify.accuracy_summary(compiled, references, golden[:typical])["output_sqnr_db"]
        low = [] if sqnr >= min_sqnr_db else _low_layers(compiled, references, inputs[:typical], min_sqnr_db)
    except Exception as exc:
        return _crash("crash", "accuracy", exc, compiled, kernels)
    if sqnr >= min_sqnr_db:
        return Outcome(
            "ok", "accuracy", f"output SQNR {sqnr:.1f} dB", sqnr_db=round(sqnr, 2), kinds=kinds, kernels=kernels
        )
    return Outcome(
        "inaccurate",
        "accuracy",
        f"output SQNR {sqnr:.1f} dB",
        sqnr_db=round(sqnr, 2),
        worst_layers=low,
        notes=known_losses(compiled.graph),
        kinds=kinds,
        kernels=kernels,
    )


def build_and_run(compiled, target, out_dir: Path, inputs: np.ndarray, build_dir: Path) -> np.ndarray:
    """The emitted C in out_dir built (with the arena write checks) and run on `inputs`: on the
    host with the sanitizers, on a Cortex-M target under QEMU."""
    if target.is_host:
        exe = build_host_sanitized(out_dir, build_dir)
        return verify.run_host(exe, inputs, verify.output_bytes(compiled.graph))
    return device.run_model(target, out_dir, MODEL_NAME, inputs, build_dir)


def _mismatch_message(comparison, what: str = "samples") -> str:
    sample, byte = np.argwhere(comparison.golden != comparison.device)[0]
    return (
        f"{comparison.mismatched_samples} of {comparison.samples} {what} differ in {comparison.mismatched_bytes} "
        f"bytes; first: {what[:-1]} {sample} byte {byte}, golden {comparison.golden[sample, byte]}, "
        f"C {comparison.device[sample, byte]}"
    )


def _check_stream(
    whole, target, floats: np.ndarray, whole_inputs: np.ndarray, whole_golden: np.ndarray, work: Path
) -> Outcome | None:
    """--stream: the streaming build of the same quantized model (one time step per invoke), fed
    every sample's frames as one stream, must equal the golden simulator's stream byte for byte,
    and its output after the first sample's last frame the whole-sequence model's on that sample
    (the stream starts from the reset state). None when it does; else the failing Outcome."""
    phase = "stream"
    try:
        stream = compile_for(whole, target, stream=True)
        out_dir = work / "stream"
        emit(stream, out_dir, MODEL_NAME)
        inputs = verify.quantized_inputs(stream.graph, verify.stream_frames(stream, verify.per_input(floats)))
        reset_state(stream.graph)
        golden = verify.golden_outputs(stream.graph, inputs)
        phase = "stream run"
        output = build_and_run(stream, target, out_dir, inputs, work / "stream-build")
    except EdgecError as exc:
        if phase == "stream":
            return Outcome(refusal_verdict(_one_line(exc)), phase, "--stream: " + _one_line(exc))
        return _crash("crash", phase, exc, whole)
    except Exception as exc:
        return _crash("crash", phase, exc, whole)
    comparison = verify.compare(golden, output)
    if not comparison.exact:
        return Outcome("mismatch", "stream", "--stream: " + _mismatch_message(comparison, "steps"))
    steps = len(inputs) // len(whole_inputs)
    if not np.array_equal(golden[steps - 1], whole_golden[0]):
        differ = int(np.sum(golden[steps - 1] != whole_golden[0]))
        return Outcome(
            "mismatch",
            "stream",
            f"--stream: the output after the first sample's {steps} frames differs "
            f"from the whole-sequence model's in {differ} bytes",
        )
    return None


def _float_model_problem(model_file, floats: np.ndarray) -> str:
    model, _ = model_file.factory()
    with torch.no_grad():
        for x in floats:
            y = model(torch.from_numpy(x[None]))
            if not all(torch.isfinite(t).all() for t in (y if isinstance(y, tuple) else (y,))):
                return "the float model gives non-finite values"
    return ""


def _low_layers(compiled, references, inputs, min_sqnr_db: float) -> list:
    int8_values = [verify.golden_values(compiled.graph, row) for row in inputs]
    rows = sim.layer_sqnr(compiled.graph, references, int8_values)
    return [(row["layer"], row["op"], round(row["sqnr_db"], 1)) for row in rows if row["sqnr_db"] < min_sqnr_db]


def known_losses(graph) -> list[str]:
    """Possible causes of a departure or a low SQNR, noted in reproducers (they excuse nothing):
    a tensor at the activation observer's smallest scale (its values are below ~1e-4 or
    constant), an int32 bias saturated, an output step finer than the accumulator's."""
    notes = [
        f"{name}: scale at the observer's eps"
        for name, t in graph.tensors.items()
        if t.quantized and t.alias_of is None and t.scale <= EPS_SCALE
    ]
    return notes + [note for op in graph.ops for note in layer_losses(op)]


def layer_losses(op) -> list[str]:
    notes, bias, shift = [], op.attrs.get("bias"), op.attrs.get("shift")
    if bias is not None and op.attrs.get("weight") is not None:
        saturated = np.flatnonzero(np.abs(bias.astype(np.int64)) >= INT32_MAX)
        if len(saturated):
            notes.append(f"{op.name}: bias saturated in channels {saturated.tolist()[:8]}")
    if shift is not None and op.attrs.get("multiplier") is not None and np.max(shift) > 0:
        scale = np.asarray(op.attrs["multiplier"], np.float64) * 2.0 ** (np.asarray(shift, np.float64) - 31)
        notes.append(f"{op.name}: output step finer than the accumulator's (s_in*s_w/s_out up to {scale.max():.3g})")
    return notes


def refusal_verdict(message: str) -> str:
    return "limit" if any(limit.search(message) for limit in DOCUMENTED_LIMITS) else "refused"


def departure_bound(op, graph, program: list[dict], row: dict | None = None) -> int | None:
    """The most steps `op` may depart from its quantized program by a cause documented for that
    exact case, computed for this layer and these values; None if no such cause applies.

    Recurrent layer whose hidden state's step is finer than its int16 gates resolve (docs/numerics.md,
    "Recurrent layers"): verify caps its tolerance and fails it (the user is told); the fuzzer bounds
    it by the layer's own computed bound, 1 + floor(e / s_h) steps (recurrent.float_step's e, the
    largest over the layer's elements, verify's uncapped `tolerance`), plus verify's one step.

    Bilinear resize (docs/numerics.md, "Bilinear resize"): edgec samples at TFLite's source
    positions (1/1024 units, the scale rounded), the program at PyTorch's. Along an axis a bilinear
    value moves by at most d * |dp| for a position change dp, d the largest difference of two
    neighbouring inputs along that axis (in steps; input and output share qparams); both sides
    round once (half a step each). So |edgec - program| <= e_h * d_h + e_w * d_w + 1, e the largest
    position difference over the output rows (columns)."""
    if op.kind == "recurrent" and row is not None and row["tolerance"] > verify.LAYER_MAX_TOLERANCE_STEPS:
        return row["tolerance"] + 1
    if op.kind != "resize" or op.attrs.get("mode") != "bilinear":
        return None
    x = graph.tensors[op.inputs[0]]
    desc, align = op.attrs["desc"], op.attrs["align_corners"]
    factors = op.attrs.get("scale_factors", (None, None))
    errors = [
        _position_error(np.asarray(desc[table], np.int64).reshape(-1, 3), size, align, factor)
        for table, size, factor in (("y_table", desc["input_h"], factors[0]), ("x_table", desc["input_w"], factors[1]))
    ]
    steps = [np.rint(values[x.source].astype(np.float64) / x.scale) for values in program]  # zero point cancels
    d_h = max(float(np.abs(np.diff(q, axis=-2)).max(initial=0)) for q in steps)
    d_w = max(float(np.abs(np.diff(q, axis=-1)).max(initial=0)) for q in steps)
    return int(np.floor(errors[0] * d_h + errors[1] * d_w + 1 + 1e-9))


def _position_error(table: np.ndarray, in_size: int, align_corners: bool, scale_factor: float | None = None) -> float:
    """The largest difference between TFLite's effective source position (lower + f/1024; the
    lower input where lower == upper) and PyTorch's (align_corners=False: (o + 0.5) * in/out - 0.5,
    or 1/scale_factor for in/out when one was given, clamped to [0, in - 1]; True: o * (in - 1)/(out - 1))."""
    out_size = len(table)
    lower, upper, fraction = table.T
    tflite = np.where(lower == upper, lower, lower + fraction / ONE)
    o = np.arange(out_size, dtype=np.float64)
    if align_corners:
        torch_position = o * ((in_size - 1) / (out_size - 1)) if out_size > 1 else np.zeros(out_size)
    else:
        torch_position = (o + 0.5) * (in_size / out_size if scale_factor is None else 1 / scale_factor) - 0.5
    return float(np.abs(tflite - np.clip(torch_position, 0, in_size - 1)).max(initial=0))


def _kinds(compiled) -> list:
    """The unit compiling each layer (an int16 layer's is its int16 unit: conv2d_s16, ...)."""
    return [] if compiled is None else [unit_of(op).kind for op in compiled.graph.ops]


def _crash(verdict: str, phase: str, exc: BaseException, compiled=None, kernels=()) -> Outcome:
    return Outcome(
        verdict,
        phase,
        f"{type(exc).__name__}: {_first_line(exc)}",
        detail=traceback.format_exc(),
        kinds=_kinds(compiled),
        kernels=list(kernels),
    )


def _one_line(exc: BaseException) -> str:
    """The whole message on one line (an EdgecError may list several operators, a line each)."""
    return " | ".join(line.strip() for line in str(exc).strip().splitlines())


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""


def build_host_sanitized(out_dir: Path, build_dir: Path) -> Path:
    """What verify.build_host(out_dir, MODEL_NAME, build_dir, sanitize=True) builds -- the same
    driver, flags, sanitizers and arena write checks -- with the kernels' objects cached."""
    build_dir.mkdir(parents=True, exist_ok=True)
    driver = build_dir / "host_main.c"
    template = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES))).get_template("host_main.c.j2")
    report = json.loads((out_dir / "report.json").read_text())
    driver.write_text(
        template.render(name=MODEL_NAME, NAME=MODEL_NAME.upper(), inputs=report["inputs"], outputs=report["outputs"])
    )
    sources = [driver, *sorted(out_dir.glob("*.c")), *sorted((out_dir / "runtime" / "src").rglob("*.c"))]
    return toolchain.cross_compile(
        get_target("host"),
        sources,
        [out_dir, out_dir / "runtime" / "include"],
        build_dir / f"{MODEL_NAME}_host",
        defines=[verify.CHECK_WRITES[2:]],
        extra_cflags=(*verify.HOST_CFLAGS, *verify.SANITIZE_FLAGS),
        extra_ldflags=verify.SANITIZE_FLAGS,
    )


# -- reproducers and minimisation -----------------------------------------------------------------


def rerun_command(path: Path, target: str) -> str:
    return f"python -m tests.fuzz rerun {path} {target_options(target)}"


def write_reproducer(spec: ModelSpec, outcome: Outcome, target: str, out_dir: Path) -> Path:
    """out_dir/<verdict>/seed_<seed>.py: the model, its data, the result and how to rerun it."""
    path = out_dir / outcome.verdict / f"seed_{spec.seed}{'_min' if spec.note else ''}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    detail = "\n".join(f"    {line}" for line in outcome.detail.strip().splitlines()[-20:])
    header = (
        f"\nResult on {target}: {outcome.verdict} at {outcome.phase}: {outcome.message}\n"
        + (f"{detail}\n" if detail else "")
        + (f"Layers below {MIN_SQNR_DB} dB: {outcome.worst_layers}\n" if outcome.worst_layers else "")
        + (f"Known losses: {'; '.join(outcome.notes)}\n" if outcome.notes else "")
        + f"Op kinds: {' '.join(outcome.kinds)}\n"
        + f"Rerun (from the repository root): {rerun_command(path, target)}\n"
        + f"Regenerate: python -m tests.fuzz show {spec.seed}{_mode_option(spec.mode)}"
        + f"  (generator version {spec.version})\n"
        + f"Minimise:   python -m tests.fuzz minimise {path} {target_options(target)}\n"
    )
    path.write_text(model_source(spec, header.replace('"""', "'''")))
    return path


def _mode_option(mode: str) -> str:
    return "" if mode == "int8" else f" --mode {mode}"


def spec_from_file(path: Path) -> ModelSpec:
    return ModelSpec.from_literal(load_model_file(path).SPEC)


def same_failure(a: Outcome, b: Outcome) -> bool:
    """The minimiser keeps a change while the failure stays the same kind at the same step:
    for a crash, the same exception type; for an inaccurate model, an SQNR at most 3 dB better."""
    if (a.verdict, a.phase) != (b.verdict, b.phase):
        return False
    if a.verdict == "inaccurate":
        return b.sqnr_db <= a.sqnr_db + 3.0
    return a.verdict != "crash" or a.message.split(":")[0] == b.message.split(":")[0]


def minimise(
    spec: ModelSpec, target: str, work: Path, outcome: Outcome, budget: int = 150, log=lambda _: None
) -> tuple[ModelSpec, Outcome]:
    """Greedy reduction: drop layers, simplify each layer's parameters (family.simpler), shrink
    the input and the samples, as long as the failure stays the same (same_failure)."""
    best, best_outcome, trials = copy.deepcopy(spec), outcome, 0
    best.note = f"minimised from seed {spec.seed}"
    improved = True
    while improved and trials < budget:
        improved = False
        for candidate in _candidates(best, accuracy=outcome.verdict == "inaccurate"):
            try:
                model_source(candidate)
            except Unfit:
                continue
            trials += 1
            result = check_spec(candidate, target, work)
            if same_failure(outcome, result):
                best, best_outcome, improved = candidate, result, True
                log(f"  kept: {len(best.layers)} layers, input {best.input_shape}")
                break
            if trials >= budget:
                break
    return best, best_outcome


def _candidates(spec: ModelSpec, accuracy: bool):
    for i in reversed(range(len(spec.layers))):
        yield _replace(
            spec,
            layers=spec.layers[:i] + spec.layers[i + 1 :],
            outputs=_without(spec.outputs, i),
            int16=_without(spec.int16, i),
        )
    for i in spec.int16 if len(spec.int16) > 1 else ():
        yield _replace(spec, int16=[j for j in spec.int16 if j != i])
    for i, layer in enumerate(spec.layers):
        for params in FAMILIES[layer.family].simpler(layer.params):
            layers = copy.deepcopy(spec.layers)
            layers[i].params = params
            yield _replace(spec, layers=layers)
    if len(spec.input_shape) == 3:
        c, h, w = spec.input_shape
        shapes = ((1, h, w), (c, max(1, h // 2), w), (c, h, max(1, w // 2)), (c, h - 1, w), (c, h, w - 1))
    else:  # a stream's [T, F]
        t, f = spec.input_shape
        shapes = ((1, f), (max(1, t // 2), f), (t - 1, f))
    for shape in shapes:
        if min(shape) >= 1 and shape != spec.input_shape:
            yield _replace(spec, input_shape=shape)
    for key, smaller in (("verification", 2), ("calibration", 4)):
        if spec.data[key] > smaller and not accuracy:  # fewer samples alone make a model inaccurate
            yield _replace(spec, data={**spec.data, key: smaller})


def _without(indices: list[int], removed: int) -> list[int]:
    """Layer indices once layer `removed` is dropped."""
    return [i - (i > removed) for i in indices if i != removed]


def _replace(spec: ModelSpec, **changes) -> ModelSpec:
    candidate = copy.deepcopy(spec)
    for key, value in changes.items():
        setattr(candidate, key, copy.deepcopy(value))
    return candidate


# -- batches ------------------------------------------------------------------------------------


@dataclass
class Batch:
    target: str
    outcomes: dict = field(default_factory=dict)  # seed -> Outcome
    reproducers: dict = field(default_factory=dict)  # seed -> path
    families: dict = field(default_factory=dict)  # seed -> the families its layers come from
    mode: str = "int8"  # generator.MODES

    def counts(self) -> dict:
        counts = Counter(o.verdict for o in self.outcomes.values())
        return {verdict: counts.get(verdict, 0) for verdict in VERDICTS}

    def summary(self) -> dict:
        refusals = Counter(normalise_message(o.message) for o in self.outcomes.values() if o.verdict == "refused")
        limits = Counter(normalise_message(o.message) for o in self.outcomes.values() if o.verdict == "limit")
        checked = [o for o in self.outcomes.values() if o.verdict in COMPILED]
        return {
            "target": self.target,
            "mode": self.mode,
            "generator_version": GENERATOR_VERSION,
            "models": len(self.outcomes),
            "seeds": [min(self.outcomes, default=0), max(self.outcomes, default=-1)],
            "counts": self.counts(),
            "failures": {
                str(s): {
                    "verdict": o.verdict,
                    "phase": o.phase,
                    "message": o.message,
                    "notes": o.notes,
                    "reproducer": str(self.reproducers.get(s, "")),
                }
                for s, o in self.outcomes.items()
                if o.failed
            },
            "inaccurate": {
                str(s): {
                    "message": o.message,
                    "layers": o.worst_layers,
                    "notes": o.notes,
                    "reproducer": str(self.reproducers.get(s, "")),
                }
                for s, o in self.outcomes.items()
                if o.verdict == "inaccurate"
            },
            "refusals": dict(refusals.most_common()),
            "limits": dict(limits.most_common()),
            "families": self.family_rates(),
            "op_kinds": dict(Counter(k for o in checked for k in o.kinds).most_common()),
            "kernels": dict(Counter(k for o in checked for k in o.kernels).most_common()),
            "seconds": round(sum(o.seconds for o in self.outcomes.values()), 1),
        }

    def family_rates(self) -> dict:
        """Per family: the models using it, how many compiled, were refused, hit a documented limit."""
        rates = {}
        for seed, outcome in self.outcomes.items():
            for family in sorted(set(self.families.get(seed, ()))):
                row = rates.setdefault(family, {"models": 0, "compiled": 0, "refused": 0, "limit": 0})
                row["models"] += 1
                row["compiled"] += outcome.verdict in COMPILED
                row["refused"] += outcome.verdict == "refused"
                row["limit"] += outcome.verdict == "limit"
        return dict(sorted(rates.items()))


def normalise_message(message: str) -> str:
    """A refusal message without the per-model details (source lines, numbers), for counting."""
    message = re.sub(r"\S+\.py:factory\b", "<model>", message)
    message = re.sub(r"\S+\.py:\d+: .*?[)\]]: ", "<line>: ", message)  # file:line: code: message
    message = re.sub(r"\S+\.py:\d+: [^;]*", "<line>", message)
    message = re.sub(r"module '[^']*' \([^)]*\)", "<line>", message)
    return re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "N", message)


def run_batch(
    seeds,
    target: str,
    out_dir: Path,
    *,
    mode: str = "int8",
    minimise_failures: bool = False,
    min_sqnr_db: float = MIN_SQNR_DB,
    log=print,
) -> Batch:
    """Check every seed (generated in `mode`, generator.MODES); write reproducers of failures and
    inaccurate models, summary.json, summary.txt and results.jsonl (one line per seed) to out_dir."""
    out_dir = Path(out_dir).resolve()
    for verdict in (*FAILURES, "inaccurate"):  # the reproducers of an earlier run
        shutil.rmtree(out_dir / verdict, ignore_errors=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    work = out_dir / "work"
    batch = Batch(target, mode=mode)
    with open(out_dir / "results.jsonl", "w") as results:
        for seed in seeds:
            spec = generate(seed, mode)
            outcome = check_spec(spec, target, work, min_sqnr_db)
            batch.outcomes[seed] = outcome
            batch.families[seed] = [layer.family for layer in spec.layers]
            if outcome.failed or outcome.verdict == "inaccurate":
                batch.reproducers[seed] = write_reproducer(spec, outcome, target, out_dir)
                if minimise_failures and outcome.failed:
                    small, small_outcome = minimise(spec, target, work / "minimise", outcome)
                    batch.reproducers[seed] = write_reproducer(small, small_outcome, target, out_dir)
            results.write(json.dumps({"seed": seed, **asdict(outcome)}) + "\n")
            results.flush()
            log(f"seed {seed:5d} {outcome.verdict:10s} {outcome.seconds:5.1f}s  {outcome.message[:150]}")
    summary = batch.summary()
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out_dir / "summary.txt").write_text(format_summary(summary))
    shutil.rmtree(work, ignore_errors=True)
    return batch


def format_summary(summary: dict) -> str:
    lines = [
        f"edgec fuzz: {summary['models']} models (seeds {summary['seeds'][0]}..{summary['seeds'][1]}, generator "
        f"v{summary['generator_version']}, {summary.get('mode', 'int8')} mode) on {summary['target']} "
        f"in {summary['seconds']} s",
        "counts: " + ", ".join(f"{k} {v}" for k, v in summary["counts"].items()),
    ]
    for title, key in (("failures", "failures"), ("inaccurate (bit-exact, low SQNR)", "inaccurate")):
        if summary[key]:
            lines.append(f"{title}:")
            lines += [
                f"  seed {seed}: {entry.get('verdict', '')} {entry.get('phase', '')} {entry['message']}"
                + (f" [{'; '.join(entry['notes'])}]" if entry.get("notes") else "")
                + f"  -> {entry['reproducer']}"
                for seed, entry in summary[key].items()
            ]
    for title, key in (("refusals (failures)", "refusals"), ("documented limits", "limits")):
        if summary[key]:
            lines.append(f"{title}:")
            lines += [f"  {count:4d}  {message}" for message, count in summary[key].items()]
    lines.append("families (models: compiled / refused / limit):")
    lines += [
        f"  {family:15s} {row['models']:5d}: {row['compiled']:5d} / {row['refused']:4d} / {row['limit']:4d}"
        f"  ({row['compiled'] / row['models']:.0%} compiled)"
        for family, row in summary["families"].items()
    ]
    lines.append("op kinds checked: " + ", ".join(f"{k} {v}" for k, v in summary["op_kinds"].items()))
    lines.append("kernels checked: " + ", ".join(f"{k} {v}" for k, v in summary["kernels"].items()))
    return "\n".join(lines) + "\n"


def rerun_main(path: str, argv: list[str] | None = None) -> int:
    """A reproducer run as a script: check it again and print the outcome (exit 1 on failure)."""
    import argparse

    parser = argparse.ArgumentParser(description=f"rerun the fuzz model {path}")
    parser.add_argument("--target", default="host")
    parser.add_argument("--opt", choices=("speed", "size"), default="speed")
    args = parser.parse_args(argv)
    target = args.target + (":size" if args.opt == "size" else "")
    outcome = check_model_file(Path(path), target, Path("build/fuzz/rerun"))
    print(f"{outcome.verdict} at {outcome.phase}: {outcome.message}")
    if outcome.detail:
        print(outcome.detail)
    if outcome.worst_layers:
        print(f"layers below {MIN_SQNR_DB} dB: {outcome.worst_layers}")
    if outcome.notes:
        print(f"known losses: {'; '.join(outcome.notes)}")
    return 1 if outcome.failed else 0
