"""edgec's command line: parse, call the pipeline, print. Errors are one line and a non-zero exit.

Only click and edgec's light modules load at start-up: torch (seconds to import) is loaded by
the commands that compile (_quiet_torch), so `edgec --help` and `edgec report` never import it.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import tempfile
import warnings
from pathlib import Path

import click

from edgec.errors import EdgecError
from edgec.naming import check_name, default_name

TARGET_HELP = "host, cortex-m0plus, cortex-m3, cortex-m4, cortex-m7, cortex-m33, cortex-m55"


def _progress(quiet: bool):
    if quiet:
        return None

    def bar(items):
        items = list(items)
        with click.progressbar(items, label="calibrating", file=sys.stderr) as wrapped:
            yield from wrapped

    return bar


def _warn(message: str) -> None:
    click.secho(message, fg="yellow", err=True)


def _size(_ctx, param, value: str | None) -> int | None:
    from edgec.targets.cores import parse_size

    try:
        return None if value is None else parse_size(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param=param) from None


def _target_options(command):
    """--ram/--flash: the memory budget of the user's part, replacing the target's typical one;
    --opt: whether to trade flash for speed; --flash-wait: the part's flash wait states, which
    --opt auto chooses for (and bench models the cycles at); --kernels: edgec's kernels or Arm's CMSIS-NN."""
    command = click.option(
        "--kernels",
        type=click.Choice(["edgec", "cmsis-nn"]),
        default="edgec",
        show_default=True,
        help="cmsis-nn: the layers Arm's CMSIS-NN has kernels for call it, linked from the "
        "checkout in $CMSIS_NN_DIR (edgec's kernels for the rest)",
    )(command)
    command = click.option(
        "--part",
        type=click.Choice(sorted(_part_names())),
        help="a named part (docs/timing-model.md): its clock, flash wait states and caches for "
        "--opt auto's layout choice and bench's cycle model, its SRAM and flash as the budget "
        "(default: the target's typical part)",
    )(command)
    command = click.option(
        "--flash-wait",
        type=click.IntRange(min=0),
        help="flash wait states of your part: --opt auto's layout choice and bench's cycle "
        "model (default: the target's typical part, docs/timing-model.md)",
    )(command)
    command = click.option(
        "--opt",
        type=click.Choice(["auto", "speed", "size"]),
        default="auto",
        show_default=True,
        help="speed: the fewest instructions where that takes more flash (DSP convolutions' "
        "filters widened to int16); size: the smallest constants; auto: per layer, the "
        "layout the timing model estimates faster at --flash-wait, within the flash budget",
    )(command)
    command = click.option(
        "--flash", callback=_size, help="flash budget for the constants, e.g. 1M (default: a typical part's)"
    )(command)
    command = click.option(
        "--stream-input",
        is_flag=True,
        help="the application hands the image input in row bands (<name>_invoke_streamed, "
        "docs/band-stages.md): under --ram, a band stage at the input never holds it whole",
    )(command)
    return click.option(
        "--ram", callback=_size, help="RAM budget for the arena, e.g. 256K (default: a typical part's)"
    )(command)


def _quantization_options(command):
    """--calibration and --per-channel-linear: how edgec quantizes a float model (docs/quantization.md);
    --activations / --int16-layers: int16 activations (the 16x8 scheme) for the whole model or for
    the listed nn.Module paths (int8 <-> int16 requantize ops where the precisions meet);
    --weights / --int4-layers: int4 weights for every linear, convolution (transposed too) and
    LSTM / GRU layer, or for the listed paths' (edgec.ops.int4)."""
    command = click.option(
        "--int4-rounding",
        type=click.Choice(["gptq", "mse", "nearest"]),
        default="gptq",
        show_default=True,
        help="how int4 weights are chosen on the calibration data: GPTQ "
        "rounding or round-to-nearest, at per-channel scales searched for the least output "
        "error, then bias correction; nearest: max |w| / 7 and round to nearest "
        "(docs/int4.md)",
    )(command)
    command = click.option(
        "--int4-layers",
        default="",
        help="comma-separated nn.Module paths whose linear, convolution and LSTM / GRU layers take int4 weights",
    )(command)
    command = click.option(
        "--weights",
        type=click.Choice(["int8", "int4"]),
        default="int8",
        show_default=True,
        help="weight precision of every linear, convolution and LSTM / GRU layer (int4: symmetric per "
        "output channel (LSTM / GRU: per gate), two per byte, CMSIS-NN's _s4 packing)",
    )(command)
    command = click.option(
        "--int16-layers",
        default="",
        help="comma-separated nn.Module paths (e.g. 'features.3,classifier') whose layers take int16 activations",
    )(command)
    command = click.option(
        "--activations",
        type=click.Choice(["int8", "int16", "auto"]),
        default="int8",
        show_default=True,
        help="activation precision of the whole model (int16: symmetric, int8 weights, "
        "int64 bias, CMSIS-NN's _s16 arithmetic); auto: int16 for the layers' outputs where it "
        "buys the most accuracy on the calibration data per byte, within --ram (the arena) and "
        "--flash, the model's input and output kept int8; prints the equivalent --int16-layers "
        "(docs/precision.md)",
    )(command)
    command = click.option(
        "--per-channel-linear", is_flag=True, help="linear weights per output channel (8 B of flash more per output)"
    )(command)
    return click.option(
        "--calibration",
        "method",
        type=click.Choice(["minmax", "percentile", "mse", "histogram"]),
        default="minmax",
        show_default=True,
        help="how activation ranges are chosen from the calibration data",
    )(command)


def _part_names():
    from edgec.targets.timing import PARTS

    return PARTS


def _target(
    name: str,
    ram: int | None = None,
    flash: int | None = None,
    opt: str = "auto",
    flash_wait: int | None = None,
    kernels: str = "edgec",
    part: str | None = None,
    stream_input: bool = False,
):
    from edgec.targets.cores import get_target
    from edgec.targets.timing import on_part

    return (
        on_part(get_target(name), part)
        .with_budget(ram, flash)
        .with_opt(opt)
        .with_flash_wait(flash_wait)
        .with_kernels(kernels)
        .with_stream_input(stream_input)
    )


@functools.cache
def _quiet_torch() -> None:
    """Imports torch, then silences what torch and torchao say at import time (optional CUDA
    extensions, deprecations) that does not concern a CPU-only compiler, to keep the user's
    terminal for edgec's output. torch first, so its logging set-up cannot undo these levels."""
    import torch  # noqa: F401

    for name in ("torchao", "torch", "torch.utils._pytree"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="torch")


def _compile(
    model: str,
    calib: str | None,
    target,
    quiet: bool,
    stream: bool = False,
    method: str = "minmax",
    per_channel_linear: bool = False,
    activations: str = "int8",
    int16_layers: str = "",
    weights: str = "int8",
    int4_layers: str = "",
    int4_rounding: str = "gptq",
    tflite_compatible: bool = False,
):
    from edgec.pipeline import compile_model, load_samples

    data = load_samples(calib) if calib else None
    return compile_model(
        model,
        calibration=data,
        target=target,
        stream=stream,
        progress=_progress(quiet),
        warn=_warn,
        method=method,
        per_channel_linear=per_channel_linear,
        activations=activations,
        int16_layers=[n for n in int16_layers.split(",") if n.strip()],
        weights=weights,
        int4_layers=[n for n in int4_layers.split(",") if n.strip()],
        int4_rounding=int4_rounding,
        tflite_compatible=tflite_compatible,
    )


TFLITE_COMPATIBLE_HELP = (
    "where TFLite Micro departs from a pre-quantized program's meaning (its TANH writes 1/128 steps "
    "whatever the output declares), compute TFLite Micro's bytes (docs/tflite-compatible.md)"
)
STREAM_HELP = (
    "recurrent models: one time step per <name>_invoke(), the hidden/cell state kept between "
    "invokes outside the arena (<name>_reset_state() starts a new sequence)"
)


def _quantized_samples(compiled, calib: str | None, count: int):
    """The first `count` --calib samples, else seeded random normal ones: as float samples (one
    array per model input) and as rows of the model's stored input bytes."""
    from edgec.pipeline import load_samples, per_input_samples, random_samples, token_rows
    from edgec.tools.verify import quantized_inputs

    if calib:
        floats = [
            x[:count] for x in per_input_samples(load_samples(calib), compiled.example_inputs, "verification data")
        ]
    else:
        floats = random_samples(
            compiled.example_inputs, count, seed=1, token_rows=token_rows(compiled.quantized_module)
        )
    return floats, quantized_inputs(compiled.graph, floats)


@click.group()
@click.version_option(package_name="edgec")
def cli():
    """edgec: compile PyTorch models to bit-exact int8 C99 for Arm Cortex-M."""


@cli.command()
@click.argument("models", metavar="MODEL...", nargs=-1, required=True)
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(file_okay=False), help="output directory")
@click.option(
    "--calib",
    multiple=True,
    type=click.Path(),
    help=".npy/.npz of float calibration samples: [N, *input shape] ([N, C, H, W] also for a "
    "[1, C, H, W] input); several models: once per model, in order",
)
@click.option(
    "--name",
    multiple=True,
    help="C symbol prefix (default: the model file's name; several models: once per model, in order)",
)
@click.option("--target", default="host", show_default=True, help=TARGET_HELP)
@_target_options
@_quantization_options
@click.option("--report", "html_report", is_flag=True, help="also write report.html (layer table, memory timeline)")
@click.option("--stream", is_flag=True, help=STREAM_HELP)
@click.option("--tflite-compatible", is_flag=True, help=TFLITE_COMPATIBLE_HELP)
@click.option(
    "--shared-arena",
    is_flag=True,
    help="several models: one arena for all of them, sized by the largest (models that never run at the same time)",
)
@click.option("--quiet", is_flag=True, help="no progress bar")
def build(
    models,
    out_dir,
    calib,
    name,
    target,
    ram,
    flash,
    opt,
    flash_wait,
    part,
    kernels,
    stream_input,
    method,
    per_channel_linear,
    activations,
    int16_layers,
    weights,
    int4_layers,
    int4_rounding,
    html_report,
    stream,
    tflite_compatible,
    shared_arena,
    quiet,
):
    """Compile MODEL (.pt2 or file.py:factory) into a self-contained C directory; several MODELs
    into one directory with one runtime (their kernels once) and, with --shared-arena, one arena."""
    names = [check_name(n) for n in (name or [default_name(m) for m in models])]
    for option, values in (("--name", name), ("--calib", calib)):
        if values and len(values) != len(models):
            times = "once" if len(values) == 1 else f"{len(values)} times"
            raise EdgecError(
                f"{option} given {times} for {len(models)} models: give it once per model, in the order of the models"
            )
    if shared_arena and len(models) == 1:
        raise EdgecError("--shared-arena shares one arena between several models: give two or more")
    _quiet_torch()
    from edgec.pipeline import check_output_dir, emit, emit_many, quantization_warnings

    check_output_dir(Path(out_dir))
    target_info = _target(target, ram, flash, opt, flash_wait, kernels, part, stream_input)
    compiled = []
    for model, model_calib in zip(models, calib or [None] * len(models)):
        compiled.append(
            _compile(
                model,
                model_calib,
                target_info,
                quiet,
                stream,
                method,
                per_channel_linear,
                activations,
                int16_layers,
                weights,
                int4_layers,
                int4_rounding,
                tflite_compatible,
            )
        )
        for warning in quantization_warnings(compiled[-1].graph):
            _warn(warning)
    if len(models) > 1:
        _echo_many(
            emit_many(list(zip(compiled, names)), Path(out_dir), shared_arena=shared_arena), Path(out_dir), html_report
        )
        return
    report = emit(compiled[0], Path(out_dir), names[0])
    from edgec.tools.report import text_summary

    click.echo(f"{out_dir}: {text_summary(report)}")
    for choice in compiled[0].choices:
        click.echo(choice)
    if report["state_bytes"]:
        click.echo(
            f"streaming state {report['state_bytes']:,} B outside the arena (RAM = arena + state = "
            f"{report['ram_bytes']:,} B); one time step per {names[0]}_invoke(), {names[0]}_reset_state()"
        )
    if html_report:
        from edgec.tools.report import write_html_report

        click.echo(f"report: {write_html_report(report, Path(out_dir) / 'report.html')}")


def _echo_many(summary: dict, out_dir: Path, html_report: bool) -> None:
    """What `edgec build` prints for several models: each one's summary, then the RAM of the arenas."""
    from edgec.tools.report import text_summary, write_html_report

    for report in summary["models"]:
        click.echo(f"{out_dir} ({report['name']}): {text_summary(report)}")
        if html_report:
            page = out_dir / f"report_{report['name']}.html"
            click.echo(f"report: {write_html_report(report, page)}")
    arenas = " + ".join(f"{r['name']} {r['arena_bytes']:,} B" for r in summary["models"])
    if summary["shared_arena_bytes"] is not None:
        click.echo(
            f"shared arena {summary['shared_arena_bytes']:,} B (the largest of {arenas}; "
            f"edgec_shared_arena.h): the models' simple-form invokes must never run at the same time"
        )
    else:
        click.echo(f"arenas {summary['arena_bytes']:,} B ({arenas}; --shared-arena: one arena, the largest)")


@cli.command()
@click.argument("out_dir", type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--out", "html", type=click.Path(dir_okay=False), help="HTML file (default: OUT_DIR/report.html)")
@click.option(
    "--bench",
    "bench_json",
    type=click.Path(exists=True, dir_okay=False),
    help="per-layer instructions from `edgec bench --json` (same model and target)",
)
@click.option(
    "--sqnr",
    "sqnr_json",
    type=click.Path(exists=True, dir_okay=False),
    help="per-layer SQNR from `edgec verify --layers-json`",
)
def report(out_dir, html, bench_json, sqnr_json):
    """Write the HTML report for a built directory: arena timeline, per-layer flash, kernel and
    why, and with --bench/--sqnr per-layer instructions and int8-vs-float SQNR, as inline SVG plots."""
    import json

    from edgec.tools.report import write_html_report

    bench = json.loads(Path(bench_json).read_text()) if bench_json else None
    sqnr = json.loads(Path(sqnr_json).read_text()) if sqnr_json else None
    click.echo(
        write_html_report(Path(out_dir), Path(html) if html else Path(out_dir) / "report.html", bench=bench, sqnr=sqnr)
    )


@cli.command()
@click.argument("model")
@click.option("--calib", type=click.Path(), help=".npy/.npz of float samples; also the verification inputs")
@click.option("--samples", default=20, show_default=True, help="how many samples to compare")
@click.option("--name", help="C symbol prefix")
@click.option("--target", default="host", show_default=True, help=f"{TARGET_HELP}; a Cortex-M target runs under QEMU")
@_target_options
@click.option("--quiet", is_flag=True, help="no progress bar")
@click.option("--per-layer", is_flag=True, help="also print each layer's int8-vs-float SQNR")
@click.option(
    "--layers-json",
    type=click.Path(dir_okay=False),
    help="write each layer's SQNR (as --per-layer prints it) to this JSON file, for edgec report --sqnr",
)
@click.option("--stream", is_flag=True, help=STREAM_HELP + "; the samples' frames run as one stream")
@click.option("--tflite-compatible", is_flag=True, help=TFLITE_COMPATIBLE_HELP)
@click.option(
    "--allow-unchecked",
    is_flag=True,
    help="accept layers that compute something but have no float counterpart to check against",
)
@click.option(
    "--class-output",
    "class_outputs",
    type=int,
    multiple=True,
    help="an output (index) of class scores to give top-1 agreement for (default: a softmax's, or a "
    "one-output model's [N, K] output)",
)
@_quantization_options
def verify(
    model,
    calib,
    samples,
    name,
    target,
    ram,
    flash,
    opt,
    flash_wait,
    part,
    kernels,
    stream_input,
    quiet,
    per_layer,
    layers_json,
    stream,
    tflite_compatible,
    allow_unchecked,
    class_outputs,
    method,
    per_channel_linear,
    activations,
    int16_layers,
    weights,
    int4_layers,
    int4_rounding,
):
    """Check that the generated C's output equals the golden simulator's, byte for byte, and test,
    on the samples, that every layer computes what the quantized program means (per output
    channel, within its tolerance of the Q/DQ graph; recurrent layers step by step)."""
    _quiet_torch()
    from edgec import sim
    from edgec.pipeline import emit
    from edgec.targets import device
    from edgec.tools import verify as checks

    name = check_name(name or default_name(model))
    target_info = _target(target, ram, flash, opt, flash_wait, kernels, part, stream_input)
    if not target_info.is_host:
        device.require_runnable(target_info)
    compiled = _compile(
        model,
        calib,
        target_info,
        quiet,
        method=method,
        per_channel_linear=per_channel_linear,
        activations=activations,
        int16_layers=int16_layers,
        weights=weights,
        int4_layers=int4_layers,
        int4_rounding=int4_rounding,
        tflite_compatible=tflite_compatible,
    )
    floats, inputs = _quantized_samples(compiled, calib, samples)
    if stream:
        _verify_stream(compiled, floats, inputs, name, target)
    with tempfile.TemporaryDirectory(prefix="edgec-verify-") as tmp:
        out_dir = Path(tmp) / name
        emit(compiled, out_dir, name)
        device = checks.run_on(compiled, out_dir, name, inputs, Path(tmp) / "build")
    result = checks.compare(checks.golden_outputs(compiled.graph, inputs), device)
    where = "host C" if target == "host" else f"{target} (QEMU)"
    if not result.exact:
        click.echo(
            f"MISMATCH: {result.mismatched_samples} of {result.samples} samples differ "
            f"({result.mismatched_bytes} bytes) between the golden simulator and {where}"
        )
        sys.exit(1)
    click.echo(f"OK: {result.samples} samples, golden simulator == {where}, 0 LSB")
    for output in checks.constant_outputs(compiled.graph, result.golden):
        _warn(
            f"WARNING: output '{output}' is the same on all {result.samples} samples: the model's output does not "
            f"follow its input (check the weights, the calibration data and the samples)"
        )
    floats_ref = checks.float_reference(compiled, floats)
    summary = checks.accuracy_summary(compiled, floats_ref, result.device, class_outputs or None)
    reference = "float model" if compiled.float_module is not None else "the program's own Q/DQ graph in float"
    click.echo(f"{checks.activation_precision(compiled.graph)} vs {reference}: {checks.describe_outputs(summary)}")
    if per_layer or layers_json:
        int8_values = [checks.golden_values(compiled.graph, row) for row in inputs]
        rows = sim.layer_sqnr(compiled.graph, floats_ref, int8_values)
        for row in rows:
            click.echo(f"  {row['layer']:<28} {row['op']:<18} SQNR {row['sqnr_db']:6.1f} dB")
        if layers_json:
            import json

            Path(layers_json).write_text(json.dumps(rows, indent=2) + "\n")
    checked = checks.check_against_reference(compiled, floats, allow_unchecked=allow_unchecked)
    click.echo(
        f"OK: {checked}; each within its tolerance of the program's Q/DQ graph run in float, fed its "
        f"values (per output channel, 1 step + M/2 where M = s_in*s_w/s_out; tested on {result.samples} samples)"
    )


def _verify_stream(whole, floats, whole_inputs, name: str, target: str) -> None:
    """The streaming build of the same quantized model: every sample's frames, one per invoke, as
    one stream, golden == C byte for byte; and its output after the first sample's last frame
    equals the whole-sequence model's on that sample."""
    from edgec.tools import verify as checks

    with tempfile.TemporaryDirectory(prefix="edgec-verify-") as tmp:
        result = checks.compare_stream(whole, floats, whole_inputs, name, Path(tmp))
    where = "host C" if target == "host" else f"{target} (QEMU)"
    if result.mismatched_bytes:
        click.echo(
            f"MISMATCH (stream): {result.mismatched_bytes} bytes differ between the golden simulator and {where}"
        )
        sys.exit(1)
    if not result.equals_whole_sequence:
        click.echo("MISMATCH: the stream's output after a whole sequence differs from the whole-sequence model's")
        sys.exit(1)
    click.echo(
        f"OK (stream): {result.steps} steps, golden simulator == {where}, 0 LSB; after "
        f"{result.sequence_steps} steps == {result.reference}"
    )


@cli.command()
@click.argument("model")
@click.option(
    "--target", default="cortex-m4", show_default=True, help="cortex-m3, cortex-m4, cortex-m7, cortex-m33, cortex-m55"
)
@click.option("--calib", type=click.Path(), help=".npy/.npz of float samples; the first is the benchmark input")
@click.option("--name", help="C symbol prefix")
@_target_options
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False), help="also keep the generated C directory")
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
@click.option("--quiet", is_flag=True, help="no progress bar")
@click.option("--profile", is_flag=True, help="also count the instructions of each function (whole run)")
@click.option(
    "--mhz",
    type=click.FloatRange(min=0, min_open=True),
    help="clock for the milliseconds (default: the target's typical part, docs/timing-model.md)",
)
@click.option("--stream", is_flag=True, help=STREAM_HELP + "; counts one time step")
@click.option("--tflite-compatible", is_flag=True, help=TFLITE_COMPATIBLE_HELP)
@click.option(
    "--sensitivity",
    is_flag=True,
    help="also the estimated total cycles with each uncertain part of "
    "the timing model varied (docs/timing-model.md); one more timed run each",
)
@click.option(
    "--cmsis-nn-opt",
    type=click.Choice(["O2", "Ofast"]),
    default="O2",
    show_default=True,
    help="with --kernels cmsis-nn: the optimisation CMSIS-NN is compiled with (-Ofast: Arm's recommendation)",
)
@_quantization_options
def bench(
    model,
    target,
    calib,
    name,
    ram,
    flash,
    opt,
    flash_wait,
    part,
    kernels,
    stream_input,
    out_dir,
    as_json,
    quiet,
    profile,
    mhz,
    stream,
    tflite_compatible,
    sensitivity,
    cmsis_nn_opt,
    method,
    per_channel_linear,
    activations,
    int16_layers,
    weights,
    int4_layers,
    int4_rounding,
):
    """Count the instructions one inference executes on an emulated Cortex-M, per layer and in
    total (exact, from QEMU), with MACs and the program's flash and RAM; on Cortex-M4/M7/M33/M55
    also the cycles of edgec's timing model (an estimate) and the milliseconds at --mhz."""
    _quiet_torch()
    import json

    from edgec.pipeline import emit
    from edgec.targets import device
    from edgec.tools import verify as checks

    name = check_name(name or default_name(model))
    target_info = _target(target, ram, flash, opt, flash_wait, kernels, part, stream_input).with_cmsis_nn_opt(
        f"-{cmsis_nn_opt}"
    )
    device.require_runnable(target_info)
    compiled = _compile(
        model,
        calib,
        target_info,
        quiet,
        method=method,
        per_channel_linear=per_channel_linear,
        activations=activations,
        int16_layers=int16_layers,
        weights=weights,
        int4_layers=int4_layers,
        int4_rounding=int4_rounding,
        tflite_compatible=tflite_compatible,
    )
    floats, sample = _quantized_samples(compiled, calib, 1)
    if stream:
        from edgec.pipeline import compile_for

        compiled = compile_for(compiled, target_info, stream=True, tflite_compatible=tflite_compatible)
        sample = checks.quantized_inputs(compiled.graph, [x[:1] for x in checks.stream_frames(compiled, floats)])
    with tempfile.TemporaryDirectory(prefix="edgec-bench-") as tmp:
        model_dir = Path(out_dir) if out_dir else Path(tmp) / name
        emit(compiled, model_dir, name)
        result = device.bench(
            target_info,
            model_dir,
            name,
            sample[0],
            Path(tmp) / "build",
            profile=profile,
            mhz=mhz,
            sensitivity=sensitivity,
        )
    if not checks.compare(checks.golden_outputs(compiled.graph, sample), result.output[None]).exact:
        raise EdgecError(
            f"the output on {target} differs from the golden simulator's; run edgec verify --target {target}"
        )
    click.echo(json.dumps(result.to_json(), indent=2) if as_json else device.format_table(result, name))


@cli.command()
@click.argument("model")
def inspect(model):
    """List MODEL's operators before any calibration: the supported ones (the edgec unit lowering
    each, any use beyond its limits) and the unsupported ones, with module path and source line.
    Exits 1 if some use cannot be compiled."""
    _quiet_torch()
    from edgec.tools.inspection import inspect_model

    result = inspect_model(model)
    click.echo(str(result))
    if not result.ok:
        sys.exit(1)


def main():
    try:
        cli.main(standalone_mode=False)
    except EdgecError as exc:
        click.secho(f"edgec: error: {exc}", fg="red", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("edgec: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except Exception as exc:  # never a traceback for the user; EDGEC_DEBUG=1 shows it
        if os.environ.get("EDGEC_DEBUG"):
            raise
        click.secho(
            f"edgec: internal error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} "
            f"(set EDGEC_DEBUG=1 for details)",
            fg="red",
            err=True,
        )
        sys.exit(3)


if __name__ == "__main__":
    main()
