"""edgec from Python (a notebook, a training script): the same pipeline as the command line.

    import edgec
    compiled = edgec.compile(model, example_input, calibration=train_loader, target="cortex-m4")
    compiled.save("build/net")                     # the directory `edgec build` writes
    edgec.save([kws, vad], "build/app", shared_arena=True)  # several models, one runtime (and arena)
    int8_logits = compiled.run(x)                  # the golden int8 simulator, batched
    print(edgec.evaluate(compiled, val_loader))    # float vs int8 accuracy on your own data
    compiled.verify(x[:20])                        # generated C == golden, byte for byte
    compiled                                       # in Jupyter: the report (memory, time, flash, SQNR)

Errors are edgec.EdgecError with the command line's one-line messages.
"""

from __future__ import annotations

import contextlib
import copy
import html
import logging
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

import numpy as np
import torch

from edgec.errors import EdgecError
from edgec.ir import to_stored, to_torch_order
from edgec.naming import check_name, default_name
from edgec.targets.cores import Target, get_target, parse_size
from edgec.targets.timing import on_part

if TYPE_CHECKING:
    from edgec.tools.inspection import Inspection

# Float samples the report measures each layer's int8-vs-float SQNR on (from the calibration data).
REPORT_SAMPLES = 16
VERIFY_SAMPLES = 20


@dataclass
class VerifyResult:
    """What `edgec verify` prints: the generated C on `target` against the golden simulator (byte
    for byte), each output of the integer model against the float model, and the layer check
    (tested on `samples` samples)."""

    target: str
    samples: int
    output_sqnr_db: float  # the worst output's
    top1_agreement: float | None  # the first class-score output's (None: no output looks like class scores)
    max_abs_error: float  # the largest of any output
    layers_checked: int  # layers within their tolerance of the quantized program (verify's layer check)
    layer_sqnr: list[dict] = field(default_factory=list)  # per layer: layer, op, sqnr_db
    precision: str = "int8"  # the activations' dtypes ("int8", "int16" or "int16/int8")
    outputs: list[dict] = field(
        default_factory=list
    )  # per output: output, shape, sqnr_db, max_abs_error, top1_agreement
    layers_total: int = 0
    layers_skipped: list[dict] = field(default_factory=list)  # layer, op, skipped (why)
    stream_steps: int = 0  # a streaming build: the invokes of its stream (the samples' frames), as exact

    def __str__(self) -> str:
        where = "host C" if self.target == "host" else f"{self.target} (QEMU)"
        stream = f"; stream: {self.stream_steps} steps, 0 LSB, == the whole-sequence model" if self.stream_steps else ""
        layers = checks.LayerCheck(self.layers_checked, self.layers_total, self.layers_skipped)
        return (
            f"OK: {self.samples} samples, golden simulator == {where}, 0 LSB{stream}; {self.precision} vs float: "
            f"{checks.describe_outputs({'outputs': self.outputs})}; {layers}, each within its tolerance of "
            f"the quantized program"
        )


@dataclass
class Evaluation:
    """A metric of the float model and of the int8 model (golden simulator) on the same data."""

    float_value: float
    int8_value: float
    samples: int
    metric: str
    reference: str = "float model"

    @property
    def difference(self) -> float:
        return self.int8_value - self.float_value

    def __str__(self) -> str:
        return (
            f"{self.metric} on {self.samples} samples: {self.reference} {self.float_value:.4f}, "
            f"int8 {self.int8_value:.4f} ({self.difference:+.4f})"
        )


class CompiledModel:
    """A model compiled for one target: save its C, run the golden int8 simulator, verify the C,
    count its instructions, and report on it. Build one with edgec.compile."""

    def __init__(
        self,
        compiled: pipeline.Compiled,
        name: str,
        report_samples: list[np.ndarray] | None = None,
        module: torch.nn.Module | None = None,
        streaming: pipeline.Compiled | None = None,
    ):
        self.compiled = compiled
        self.name = name
        self.streaming = streaming  # stream=True: the build saved (one time step per invoke); `compiled` is
        # then the whole-sequence model, what run() and evaluate() compute
        self._report_samples = report_samples
        self._module = module  # a copy of the user's nn.Module, as compiled: runs whole batches
        self._report: dict | None = None
        self._bench: device.Bench | None = None
        self._layer_sqnr: list[dict] | None = None
        self._output_accuracy: list[dict] | None = None  # per output, from the last verify()

    @property
    def target(self) -> Target:
        return self.compiled.target

    @property
    def graph(self):
        return self.compiled.graph

    def __repr__(self) -> str:
        return f"<edgec.CompiledModel {self.name} for {self.target.name}: {len(self.graph.ops)} layers>"

    # --- the C directory --------------------------------------------------------------------

    def save(self, out_dir: str | Path) -> Path:
        """Writes the C directory `edgec build` writes (byte for byte, for the same model, data,
        target and name); refuses a model over the target's memory budget, as the CLI does."""
        out_dir = Path(out_dir)
        self._report = pipeline.emit(self._as_built(self.compiled), out_dir, self.name)
        return out_dir

    def build_report(self) -> dict:
        """report.json's content (memory plan, layers, kernels), without saving anything."""
        if self._report is None:
            built = self._as_built(self.compiled)
            with tempfile.TemporaryDirectory(prefix="edgec-report-") as tmp:
                self._report = codegen.emit(
                    built.graph, built.plan, Path(tmp), name=self.name, target=self.target, origin=built.origin
                )
        return self._report

    @property
    def stream(self) -> bool:
        return self.streaming is not None

    def _as_built(self, compiled: pipeline.Compiled) -> pipeline.Compiled:
        """What `edgec build` writes for `compiled`: with stream=True, its streaming build (its
        golden state reset, as the C's is at start-up)."""
        if not self.stream:
            return compiled
        if compiled is not self.compiled:
            return pipeline.compile_for(compiled, compiled.target, stream=True)
        reset_state(self.streaming.graph)
        return self.streaming

    # --- the golden simulator ---------------------------------------------------------------

    def run(self, *inputs):
        """The golden int8 simulator on a batch: float inputs are quantized as the generated
        <name>_quantize_input does, run through the int8 graph and the outputs dequantized (float
        in, float out); int8 inputs (the quantized values, PyTorch layout) give the int8 outputs.
        Each input is [N, *example shape] (N samples), exactly the example's shape (one sample) or,
        for an example with a batch of one, [N, ...] without that axis (pipeline.as_samples).
        Returns one output (or a tuple), as a tensor for tensor inputs, else a numpy array."""
        graph = self.graph
        if len(inputs) != len(graph.inputs):
            raise EdgecError(
                f"the model has {len(graph.inputs)} input{'s' if len(graph.inputs) != 1 else ''}, "
                f"run() got {len(inputs)}"
            )
        arrays = [pipeline.as_array(x) for x in inputs]
        integer = [a.dtype.kind in "iu" for a in arrays]
        if any(integer) and not all(integer):
            raise EdgecError("run(): give every input as float, or every input as int8 (quantized) values")
        tensors = [graph.tensors[name] for name in graph.inputs]
        if integer[0]:
            batches = [self._int_samples(a, t, i) for i, (a, t) in enumerate(zip(arrays, tensors))]
            rows = [
                [to_stored(t, batch[k].reshape(t.torch_shape)) for batch, t in zip(batches, tensors)]
                for k in range(len(batches[0]))
            ]
        else:
            batches = pipeline.per_input_samples(arrays, self.compiled.example_inputs, "run() input")
            rows = [
                [sim.quantize_input(graph, batch[k], i) for i, batch in enumerate(batches)]
                for k in range(len(batches[0]))
            ]
        outputs = [sim.invoke(graph, row) for row in rows]
        results = []
        for index, name in enumerate(graph.outputs):
            tensor = graph.tensors[name]
            stacked = _samples_array([to_torch_order(tensor, out[index]) for out in outputs])
            results.append(stacked if integer[0] else tensor.dequantize(stacked).astype(np.float32))
        if isinstance(inputs[0], torch.Tensor):
            results = [torch.from_numpy(np.ascontiguousarray(r)) for r in results]
        return results[0] if len(results) == 1 else tuple(results)

    def _int_samples(self, data: np.ndarray, tensor, index: int) -> np.ndarray:
        info = np.iinfo(sim.INT_DTYPES[tensor.dtype])
        if data.size and (data.min() < info.min or data.max() > info.max):
            raise EdgecError(f"run(): input {index} holds values outside {tensor.dtype}")
        shape, per_sample = tuple(tensor.torch_shape), pipeline.sample_shape(tensor.torch_shape)
        if data.shape == shape:
            data = data.reshape(1, *per_sample)
        if data.ndim == len(shape) + 1 and data.shape[1:] == shape:
            data = data.reshape(len(data), *per_sample)
        if data.shape[1:] != per_sample:
            raise EdgecError(
                f"run(): input {index} has shape {list(data.shape)}; expected [N, {', '.join(map(str, per_sample))}]"
            )
        return data.astype(sim.INT_DTYPES[tensor.dtype])

    def float_model(self) -> torch.nn.Module:
        """The float reference: the BN-folded float model (or, for a program that came quantized,
        its Q/DQ graph run in float)."""
        if self.compiled.float_module is not None:
            return self.compiled.float_module
        return self.compiled.quantized_module

    # --- the generated C, on the host or a board ----------------------------------------------

    def _for_target(self, target) -> pipeline.Compiled:
        """This model compiled for `target` (None or the compiled target: this one; another: with
        that target's typical memory budget and flash wait states, and this one's --opt)."""
        if target is None or get_target(target).name == self.target.name:
            return self.compiled
        return pipeline.compile_for(
            self.compiled,
            get_target(target).with_opt(self.target.opt).with_kernels(self.target.kernels, self.target.cmsis_nn_dir),
        )

    def verify(
        self, samples=None, target=None, count: int = VERIFY_SAMPLES, allow_unchecked: bool = False, class_outputs=None
    ) -> VerifyResult:
        """`edgec verify`: the generated C, built for the host or run on `target`'s emulated board
        (QEMU), must equal the golden simulator byte for byte on `count` of `samples` (float
        inputs: an array, a tensor or an iterable of batches; default seeded random normal ones),
        and every layer must stay within its tolerance of the quantized program on them (tested,
        per output channel; recurrent layers step by step); with stream=True, the streaming build
        too, as `edgec verify --stream` checks it. A layer that computes something but has no float
        counterpart fails too, unless `allow_unchecked`. `class_outputs`: the output indices that
        are class scores (top-1 agreement; default: verify.class_score_outputs). EdgecError
        otherwise."""
        compiled = self._for_target(target)
        if not compiled.target.is_host:
            device.require_runnable(compiled.target)
        floats = self._float_samples(samples, count, "verification data")
        inputs = checks.quantized_inputs(compiled.graph, floats)
        with tempfile.TemporaryDirectory(prefix="edgec-verify-") as tmp:
            out_dir = Path(tmp) / self.name
            pipeline.emit(compiled, out_dir, self.name)
            outputs = checks.run_on(compiled, out_dir, self.name, inputs, Path(tmp) / "build")
        result = checks.compare(checks.golden_outputs(compiled.graph, inputs), outputs)
        where = "host C" if compiled.target.is_host else f"{compiled.target.name} (QEMU)"
        if not result.exact:
            raise EdgecError(
                f"MISMATCH: {result.mismatched_samples} of {result.samples} samples differ "
                f"({result.mismatched_bytes} bytes) between the golden simulator and {where}"
            )
        stream_steps = self._verify_stream(compiled, floats, inputs, where) if self.stream else 0
        reference = checks.float_reference(compiled, floats)
        summary = checks.accuracy_summary(compiled, reference, result.device, class_outputs)
        int8_values = [checks.golden_values(compiled.graph, row) for row in inputs]
        layer_sqnr = sim.layer_sqnr(compiled.graph, reference, int8_values)
        checked = checks.check_against_reference(compiled, floats, allow_unchecked=allow_unchecked)
        if compiled is self.compiled:
            self._layer_sqnr = layer_sqnr
            self._output_accuracy = summary["outputs"]
        return VerifyResult(
            compiled.target.name,
            result.samples,
            summary["output_sqnr_db"],
            summary["top1_agreement"],
            summary["max_abs_error"],
            checked.checked,
            layer_sqnr,
            checks.activation_precision(compiled.graph),
            summary["outputs"],
            checked.total,
            checked.skipped,
            stream_steps,
        )

    def _verify_stream(
        self, compiled: pipeline.Compiled, floats: list[np.ndarray], inputs: np.ndarray, where: str
    ) -> int:
        """The streaming build of `compiled` on the same samples' frames (verify's stream check):
        the invokes it ran, or EdgecError."""
        with tempfile.TemporaryDirectory(prefix="edgec-verify-") as tmp:
            result = checks.compare_stream(compiled, floats, inputs, self.name, Path(tmp))
        if result.mismatched_bytes:
            raise EdgecError(
                f"MISMATCH (stream): {result.mismatched_bytes} bytes differ between the golden simulator and {where}"
            )
        if not result.equals_whole_sequence:
            raise EdgecError(
                "MISMATCH: the stream's output after a whole sequence differs from the whole-sequence model's"
            )
        return result.steps

    def bench(self, target=None, sample=None) -> device.Bench:
        """`edgec bench`: the exact instructions one inference executes on `target`'s emulated
        board (default: the compiled target), per layer, with flash and RAM. `sample`: one float
        input (default a seeded random normal one; with stream=True, its first time step, as
        `edgec bench --stream` counts). The report shows the per-layer counts."""
        whole = self._for_target(target)
        compiled = self._as_built(whole)
        device.require_runnable(compiled.target)
        floats = self._float_samples(sample, 1, "benchmark input")
        if self.stream:
            floats = [x[:1] for x in checks.stream_frames(compiled, floats)]
        inputs = checks.quantized_inputs(compiled.graph, floats)
        with tempfile.TemporaryDirectory(prefix="edgec-bench-") as tmp:
            out_dir = Path(tmp) / self.name
            pipeline.emit(compiled, out_dir, self.name)
            result = device.bench(compiled.target, out_dir, self.name, inputs[0], Path(tmp) / "build")
        if not checks.compare(checks.golden_outputs(compiled.graph, inputs), result.output[None]).exact:
            raise EdgecError(
                f"the output on {compiled.target.name} differs from the golden simulator's; "
                f"run verify(target={compiled.target.name!r})"
            )
        if whole is self.compiled:
            self._bench = result
        return result

    def _float_samples(self, samples, count: int, what: str) -> list[np.ndarray]:
        example = self.compiled.example_inputs
        if samples is None:
            rows = pipeline.token_rows(self.compiled.quantized_module)
            return pipeline.random_samples(example, count, seed=1, token_rows=rows)
        return [x[:count] for x in pipeline.per_input_samples(samples, example, what)]

    # --- the report ---------------------------------------------------------------------------

    def layer_sqnr(self, samples=None) -> list[dict]:
        """Per layer, the SQNR (dB) of its int8 output against the float model's value, over
        `samples` (default: the first calibration samples) run through the golden simulator."""
        if samples is None and self._layer_sqnr is not None:
            return self._layer_sqnr
        floats = self._report_samples if samples is None else self._float_samples(samples, REPORT_SAMPLES, "samples")
        if floats is None:
            return []
        inputs = checks.quantized_inputs(self.graph, floats)
        rows = sim.layer_sqnr(
            self.graph,
            checks.float_reference(self.compiled, floats),
            [checks.golden_values(self.graph, row) for row in inputs],
        )
        if samples is None:
            self._layer_sqnr = rows
        return rows

    def report_data(self) -> dict:
        """report.json, each layer with what has been measured: instructions (after bench()),
        sqnr_db (from the calibration samples or the last verify())."""
        from edgec.tools.report import merge_measurements

        bench = None if self._bench is None else self._bench.to_json()
        return merge_measurements(
            self.build_report(), bench=bench, sqnr=self.layer_sqnr(), outputs=self._output_accuracy
        )

    def report(self, path: str | Path | None = None) -> str:
        """The HTML report (self-contained; memory timeline, per-layer time, flash, kernel and
        SQNR with plots); written to `path` if given. Returns the HTML."""
        from edgec.tools.report import render_html_report

        page = render_html_report(self.report_data())
        if path is not None:
            Path(path).write_text(page, encoding="utf-8")
        return page

    def summary(self) -> str:
        """What `edgec build` prints, with the three most expensive layers."""
        from edgec.tools.report import text_summary

        return text_summary(self.report_data())

    def _repr_html_(self) -> str:
        """Jupyter shows the report in an iframe, so its page styles stay out of the notebook's."""
        return (
            f'<iframe srcdoc="{html.escape(self.report(), quote=True)}" '
            f'title="edgec report: {html.escape(self.name)}" '
            f'style="width: 100%; height: 900px; border: 1px solid #e4e7eb; border-radius: 6px"></iframe>'
        )


def compile(
    model,
    example_inputs=None,
    *,
    calibration=None,
    target: str | Target = "cortex-m4",
    opt: str = "auto",
    ram: int | str | None = None,
    flash: int | str | None = None,
    flash_wait: int | None = None,
    part: str | None = None,
    kernels: str = "edgec",
    name: str | None = None,
    progress: bool = True,
    calibration_method: str = "minmax",
    per_channel_linear: bool = False,
    activations: str = "int8",
    int16_layers=(),
    stream: bool = False,
    weights: str = "int8",
    int4_layers=(),
    int4_rounding: str = "gptq",
    stream_input: bool = False,
    tflite_compatible: bool = False,
) -> CompiledModel:
    """Quantize and compile `model` for `target`, as `edgec build` does.

    model: an nn.Module (with `example_inputs`: a tensor shaped like one input batch, or a tuple
        of them; Python scalars among them become constants), an ExportedProgram (float or
        PT2E-quantized; dynamic dimensions are specialised to its example inputs, with a note), or
        a .pt2 path / 'file.py:factory'. The program is compiled for the example's shapes as they
        are (any rank; a batch of 4 is 4 inferences per invoke).
    calibration: float samples: an array or tensor [N, *example shape] (one-input models; for an
        example with a batch of one, [1, C, H, W], also [N, C, H, W]), a list of them (one per
        input), or any iterable of batches, e.g. a DataLoader (a batch's first items are the inputs,
        labels after them are ignored). None: random data, with a warning.
    target, opt, ram, flash, flash_wait: as `edgec build --target/--opt/--ram/--flash/--flash-wait`
        (over a `flash` budget you give with int8 weights, int4 weights in the layers the chooser
        picks: docs/int4.md)
        (flash_wait: your part's flash wait states, which opt="auto" chooses the layouts for and
        bench() models the cycles at; None: the target's typical part's).
    part: as `edgec build --part`: a published part of the target's core (edgec.targets.timing.PARTS, e.g.
        "stm32l4r5"): its clock, wait states and caches for bench(), its SRAM and flash as budget.
    kernels: as `edgec build --kernels`: "cmsis-nn" calls Arm's CMSIS-NN for the layers it has
        kernels for, linked from the checkout in $CMSIS_NN_DIR.
    name: the C symbol prefix (default: the model class's name in snake case).
    progress: show the calibration progress on stderr.
    calibration_method: as `edgec build --calibration`: how activation ranges are chosen from the
        calibration data ("minmax", "percentile", "mse" or "histogram").
    per_channel_linear: as `edgec build --per-channel-linear`: linear weights per output channel.
    activations, int16_layers: as `edgec build --activations/--int16-layers` ("int16": the whole
        model with int16 activations; "auto": the layers the chooser picks within the `ram` and
        `flash` budgets, docs/precision.md; int16_layers: the nn.Module paths whose layers are int16).
    weights, int4_layers: as `edgec build --weights/--int4-layers` ("int4": every linear and
        convolution layer with int4 weights; int4_layers: the nn.Module paths whose layers are).
    int4_rounding: as `edgec build --int4-rounding` ("gptq", "mse" or "nearest"; docs/int4.md).
    stream: as `edgec build --stream`: save() writes a recurrent model as one time step per
        <name>_invoke(), its state kept between invokes. run() and evaluate() still take whole
        sequences (the model's meaning); verify() also checks the streaming build, as
        `edgec verify --stream` does, and bench() counts one time step, as `edgec bench --stream`.
    stream_input: as `edgec build --stream-input`: the generated C takes the image input in row
        bands from the application (<name>_invoke_streamed; docs/band-stages.md), so under a `ram`
        budget a band stage at the input never holds it whole.
    tflite_compatible: as `edgec build --tflite-compatible`: where TFLite Micro departs from a
        pre-quantized program's meaning, compute TFLite Micro's bytes (docs/tflite-compatible.md).
    """
    target_info = (
        on_part(get_target(target), part)
        .with_budget(_size(ram), _size(flash))
        .with_opt(opt)
        .with_flash_wait(flash_wait)
        .with_kernels(kernels)
        .with_stream_input(stream_input)
    )
    name = check_name(name or default_name(model))
    with _quiet_torch():
        loaded, module = pipeline.prepare(model, example_inputs)
        arrays = (
            None
            if calibration is None
            else pipeline.per_input_samples(calibration, loaded.example_inputs, "calibration data")
        )
        compiled = pipeline.compile_loaded(
            loaded,
            module,
            target_info,
            calibration=arrays,
            warn=_warn,
            progress=_progress if progress else None,
            method=calibration_method,
            per_channel_linear=per_channel_linear,
            activations=activations,
            int16_layers=int16_layers,
            weights=weights,
            int4_layers=int4_layers,
            int4_rounding=int4_rounding,
            tflite_compatible=tflite_compatible,
        )
        streaming = (
            pipeline.compile_for(compiled, target_info, stream=True, tflite_compatible=tflite_compatible)
            if stream
            else None
        )
    samples = None if arrays is None else [x[:REPORT_SAMPLES] for x in arrays]
    module = copy.deepcopy(model).eval() if isinstance(model, torch.nn.Module) else None
    return CompiledModel(compiled, name, samples, module, streaming)


def save(models: Iterable[CompiledModel], out_dir: str | Path, *, shared_arena: bool = False) -> dict:
    """Writes several compiled models (one target) into one directory, as `edgec build a.pt2 b.pt2`
    does: each model's files, one runtime/ with every kernel they call once, one edgec.mk and
    CMakeLists.txt; with `shared_arena`, one arena for all of them (for models that never run at
    the same time), sized by the largest. Returns report.json's content."""
    models = list(models)
    if not all(isinstance(model, CompiledModel) for model in models):
        raise EdgecError("edgec.save() takes the CompiledModels edgec.compile() returns")
    return pipeline.emit_many(
        [(model.compiled, model.name) for model in models], Path(out_dir), shared_arena=shared_arena
    )


def evaluate(compiled: CompiledModel, data, metric: Callable | None = None) -> Evaluation:
    """`metric` of the float model and of the int8 model (golden simulator) on `data`: a DataLoader
    or any iterable of (inputs..., target) batches, or one (inputs, targets) pair of arrays or
    tensors. `metric(outputs, targets) -> float` gets every sample's outputs at once: a tensor
    for a one-output model, else a tuple of every output's tensors; default (top1_accuracy): top-1
    accuracy of the first output."""
    count = len(compiled.graph.inputs)
    batches = (
        [(data[0], data[1])]
        if isinstance(data, tuple) and len(data) == 2 and count == 1 and not isinstance(data[0], (tuple, list))
        else data
    )
    inputs: list[list[np.ndarray]] = [[] for _ in range(count)]
    targets: list[np.ndarray] = []
    for batch in batches:
        items = list(batch)
        if len(items) != count + 1:
            raise EdgecError(
                f"evaluate(): a batch must hold the model's {count} input(s) and the targets, got {len(items)} items"
            )
        for per, item in zip(inputs, items[:count]):
            per.append(pipeline.as_array(item))
        targets.append(pipeline.as_array(items[count]))
    if not targets:
        raise EdgecError("evaluate(): no batches")
    floats = pipeline.per_input_samples(
        [np.concatenate(x) for x in inputs], compiled.compiled.example_inputs, "evaluation data"
    )
    labels = torch.from_numpy(np.concatenate(targets))
    int8 = compiled.run(*(torch.from_numpy(x) for x in floats))
    reference = _float_outputs(compiled, floats)
    metric = metric or top1_accuracy
    name = getattr(metric, "__name__", "metric")
    reference_name = "float model" if compiled.compiled.float_module is not None else "Q/DQ program in float"
    return Evaluation(float(metric(reference, labels)), float(metric(int8, labels)), len(labels), name, reference_name)


def top1_accuracy(outputs, targets: torch.Tensor) -> float:
    """The fraction of samples whose largest output is at the target's index (the first output's,
    for a model with several: a tuple)."""
    outputs = outputs[0] if isinstance(outputs, tuple) else outputs
    return float((outputs.reshape(len(outputs), -1).argmax(dim=1) == targets.reshape(-1)).double().mean())


def _float_outputs(compiled: CompiledModel, floats: list[np.ndarray]):
    """The float reference's outputs: the user's module (a copy, as compiled) on whole batches if
    it takes them, else the exported graph sample by sample (it has the example's batch size)."""
    with torch.no_grad():
        batch_first = all(tuple(x.shape[:1]) == (1,) for x in compiled.compiled.example_inputs)
        if compiled._module is not None and compiled.compiled.float_module is not None and batch_first:
            try:
                return _outputs_in_batches(compiled._module, floats)
            except Exception:  # noqa: BLE001 -- e.g. a model written for batch size 1: per sample then
                pass
        module = compiled.float_model()
        shapes = [tuple(x.shape) for x in compiled.compiled.example_inputs]
        outputs = [
            _as_tuple(module(*(torch.from_numpy(x[k]).reshape(shape) for x, shape in zip(floats, shapes))))
            for k in range(len(floats[0]))
        ]
    results = tuple(torch.from_numpy(_samples_array([o[i].numpy() for o in outputs])) for i in range(len(outputs[0])))
    return results[0] if len(results) == 1 else results


def _outputs_in_batches(module: torch.nn.Module, floats: list[np.ndarray], batch: int = 256):
    outputs = [
        _as_tuple(module(*(torch.from_numpy(x[k : k + batch]) for x in floats)))
        for k in range(0, len(floats[0]), batch)
    ]
    results = tuple(torch.cat([o[i] for o in outputs]) for i in range(len(outputs[0])))
    return results[0] if len(results) == 1 else results


def _samples_array(outputs: list[np.ndarray]) -> np.ndarray:
    """One output of every sample as one array: [N, ...] joined on the output's batch axis if it
    has a batch of one (as the samples' inputs did), else stacked on a new sample axis."""
    return np.concatenate(outputs) if outputs[0].shape[:1] == (1,) else np.stack(outputs)


def _as_tuple(output) -> tuple:
    return tuple(output) if isinstance(output, (tuple, list)) else (output,)


def inspect(model, example_inputs=None) -> "Inspection":
    """`edgec inspect`: the model's operators, supported or not (with module path and source
    line) and each use beyond a kernel's limits, before any calibration."""
    from edgec.tools.inspection import inspect_model

    with _quiet_torch():
        return inspect_model(model, example_inputs)


def _size(value) -> int | None:
    try:
        return None if value is None else parse_size(value)
    except ValueError as exc:
        raise EdgecError(str(exc)) from None


def _warn(message: str) -> None:
    print(message, file=sys.stderr)


def _progress(items: Iterable) -> Iterable:
    """A one-line progress count on stderr (a notebook shows it under the cell)."""
    items = list(items)
    every = max(1, len(items) // 20)
    for index, item in enumerate(items, start=1):
        yield item
        if index % every == 0 or index == len(items):
            print(
                f"\rcalibrating: {index}/{len(items)} samples",
                end="" if index < len(items) else "\n",
                file=sys.stderr,
                flush=True,
            )


@contextlib.contextmanager
def _quiet_torch():
    """What torch and torchao say that does not concern a CPU-only compiler (optional CUDA
    extensions, PT2E deprecations), silenced while edgec works, as the CLI does -- and only then:
    the notebook keeps its own warning filters and log levels."""
    loggers = [logging.getLogger(name) for name in ("torchao", "torch", "torch.utils._pytree")]
    levels = [logger.level for logger in loggers]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=UserWarning, module="torch")
        for logger in loggers:
            logger.setLevel(logging.CRITICAL)
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels):
                logger.setLevel(level)


with _quiet_torch():  # importing torchao logs about its optional CUDA extensions
    from edgec import pipeline, sim
    from edgec.backend import codegen
    from edgec.ops.recurrent import reset_state  # noqa: E402
    from edgec.targets import device  # noqa: E402
    from edgec.tools import verify as checks  # noqa: E402
