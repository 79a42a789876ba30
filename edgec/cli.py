"""edgec's command line: parse, call the pipeline, print. Errors are one line and a non-zero exit."""
from __future__ import annotations

import logging
import os
import sys
import tempfile
import warnings
from pathlib import Path

import click

# torch and torchao chatter at import time (optional CUDA extensions, deprecations) about
# things that do not concern a CPU-only compiler; keep the user's terminal for edgec's output.
for _logger in ("torchao", "torch"):
    logging.getLogger(_logger).setLevel(logging.CRITICAL)
warnings.filterwarnings("ignore", category=FutureWarning)
warnings.filterwarnings("ignore", category=UserWarning, module="torch")

from edgec.errors import EdgecError  # noqa: E402

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


def _compile(model: str, calib: str | None, target: str, quiet: bool):
    from edgec.pipeline import compile_model, load_samples
    data = load_samples(calib) if calib else None
    return compile_model(model, calibration=data, target=target, progress=_progress(quiet), warn=_warn)


def _default_name(model: str) -> str:
    stem = Path(model.split(":")[0]).stem
    name = "".join(c if c.isalnum() else "_" for c in stem).lower().strip("_") or "model"
    return name if not name[0].isdigit() else f"m_{name}"


def _check_name(name: str) -> str:
    if not name.replace("_", "a").isalnum() or not name[0].isalpha():
        raise EdgecError(f"--name '{name}' must be a C identifier (letters, digits, underscores)")
    return name


@click.group()
@click.version_option(package_name="edgec")
def cli():
    """edgec: compile PyTorch models to bit-exact int8 C99 for Arm Cortex-M."""


@cli.command()
@click.argument("model")
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(file_okay=False), help="output directory")
@click.option("--calib", type=click.Path(), help=".npy/.npz of float calibration samples shaped like the input")
@click.option("--name", help="C symbol prefix (default: the model file's name)")
@click.option("--target", default="host", show_default=True, help=TARGET_HELP)
@click.option("--quiet", is_flag=True, help="no progress bar")
def build(model, out_dir, calib, name, target, quiet):
    """Compile MODEL (.pt2 or file.py:factory) into a self-contained C directory."""
    from edgec.pipeline import emit
    name = _check_name(name or _default_name(model))
    compiled = _compile(model, calib, target, quiet)
    report = emit(compiled, Path(out_dir), name)
    click.echo(f"{out_dir}: {name} for {report['target']}: {len(report['layers'])} layers, "
               f"{report['macs']:,} MACs, arena {report['arena_bytes']:,} B "
               f"(liveness bound {report['lower_bound_bytes']:,} B), constants {report['weights_bytes']:,} B")


@cli.command()
@click.argument("model")
@click.option("--calib", type=click.Path(), help=".npy/.npz of float samples; also the verification inputs")
@click.option("--samples", default=20, show_default=True, help="how many samples to compare")
@click.option("--name", help="C symbol prefix")
@click.option("--target", default="host", show_default=True, help=TARGET_HELP)
@click.option("--quiet", is_flag=True, help="no progress bar")
@click.option("--per-layer", is_flag=True, help="also print each layer's int8-vs-float SQNR")
def verify(model, calib, samples, name, target, quiet, per_layer):
    """Check that the generated C's output equals the golden simulator's, byte for byte."""
    import numpy as np

    from edgec import sim
    from edgec import verify as checks
    from edgec.pipeline import as_samples, emit
    name = _check_name(name or _default_name(model))
    compiled = _compile(model, calib, target, quiet)
    shape = tuple(compiled.example_inputs[0].shape)
    if calib:
        from edgec.pipeline import load_samples
        floats = as_samples(load_samples(calib), shape, "verification data")[:samples]
    else:
        floats = np.random.default_rng(1).standard_normal((samples, *shape[1:]), dtype=np.float32)
    inputs = checks.quantized_inputs(compiled.graph, floats)
    with tempfile.TemporaryDirectory(prefix="edgec-verify-") as tmp:
        out_dir = Path(tmp) / name
        emit(compiled, out_dir, name)
        device = checks.run_on(compiled, out_dir, name, inputs, Path(tmp) / "build")
    result = checks.compare(checks.golden_outputs(compiled.graph, inputs), device)
    where = "host C" if target == "host" else f"{target} (QEMU)"
    if not result.exact:
        click.echo(f"MISMATCH: {result.mismatched_samples} of {result.samples} samples differ "
                   f"({result.mismatched_bytes} bytes) between the golden simulator and {where}")
        sys.exit(1)
    click.echo(f"OK: {result.samples} samples, golden simulator == {where}, 0 LSB")
    floats_ref = checks.float_reference(compiled, floats)
    summary = checks.accuracy_summary(compiled, floats_ref, result.device)
    reference = "float model" if compiled.float_module is not None else "the program's own Q/DQ graph in float"
    click.echo(f"int8 vs {reference}: output SQNR {summary['output_sqnr_db']:.1f} dB, "
               f"top-1 agreement {summary['top1_agreement']:.0%}, max |error| {summary['max_abs_error']:.4f}")
    if per_layer:
        int8_values = [sim.run(compiled.graph, x) for x in inputs]
        for row in sim.layer_sqnr(compiled.graph, floats_ref, int8_values):
            click.echo(f"  {row['layer']:<28} {row['op']:<18} SQNR {row['sqnr_db']:6.1f} dB")


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
        click.secho(f"edgec: internal error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} "
                    f"(set EDGEC_DEBUG=1 for details)", fg="red", err=True)
        sys.exit(3)


if __name__ == "__main__":
    main()
