"""The C edgec generates is clang-format clean under the repository's own .clang-format: a firmware
team that formats its tree finds nothing to change in a model directory. edgec writes the layout
itself (edgec/c_format.py), so the output does not depend on clang-format being installed; this
checks it with clang-format on every generated .c/.h of builds that exercise the emitter's forms:
a CNN for host, a DSP core and a Helium core, int4 weights, int16 activations, a recurrent model
streamed step by step, an int16 LSTM holding its caller's state, a band stage with streamed input
and PReLU tables, a transformer, and a directory of two models (one over token ids) sharing an
arena (with CMSIS_NN_DIR, also the calls of Arm's CMSIS-NN kernels). The runtime's own files are
`make lint`'s (runtime/include/edgec_nn.h, partly generated from the kernel schema, aside)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from edgec.pipeline import compile_for, emit, emit_many, quantize_model
from edgec.targets.cores import get_target
from edgec.zoo import seq, vision

ROOT = Path(__file__).resolve().parent.parent
DIGITS = ROOT / "examples" / "digits"


def _quantize(model, calibration, **options):
    return quantize_model(model, calibration=calibration, progress=None, warn=lambda _: None, **options)


def _zoo(module, name: str, **options):
    model, example_inputs = getattr(module, name)()
    return _quantize(model, module.calibration_data(name, 8), example_inputs=example_inputs, **options)


def _tokens():
    sys.path.insert(0, str(ROOT / "tests"))
    from test_model_ops import TokenClassifier, _token_samples

    torch.manual_seed(0)
    return _quantize(
        TokenClassifier().eval(), _token_samples(16)[:-2], example_inputs=(torch.zeros(1, 8, dtype=torch.long),)
    )


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    """A directory of model directories, each made by the emitter in another form."""
    out = tmp_path_factory.mktemp("generated")
    calibration = np.load(DIGITS / "calib.npy")[:16]
    digits = _quantize(str(DIGITS / "digits.pt2"), calibration)
    for target in ("host", "cortex-m4", "cortex-m55"):
        emit(compile_for(digits, target), out / f"digits-{target}", "digits")
    int4 = _quantize(str(DIGITS / "digits.pt2"), calibration, weights="int4")
    emit(compile_for(int4, "cortex-m55"), out / "digits-int4", "digits")
    int16 = _quantize(str(DIGITS / "digits.pt2"), calibration, activations="int16")
    emit(compile_for(int16, "cortex-m4"), out / "digits-int16", "digits")
    emit(compile_for(_zoo(seq, "lstm_kws"), "cortex-m4", stream=True), out / "lstm-stream", "lstm_kws")
    model, example = seq.silero_vad()  # the 16x8 LSTM with its caller-held state, int16 sqrt and x ** 2
    vad = _quantize(model, seq.vad_samples(model, 4), example_inputs=example, activations="int16")
    emit(compile_for(vad, "cortex-m4"), out / "vad-int16", "vad")
    banded = get_target("cortex-m4").with_budget(26 * 1024).with_stream_input(True)
    emit(compile_for(_zoo(vision, "pnet"), banded), out / "pnet-band", "pnet")
    emit(compile_for(_zoo(seq, "kws_transformer"), "cortex-m55"), out / "transformer", "kws_transformer")
    models = [(compile_for(digits, "cortex-m4"), "digits"), (compile_for(_tokens(), "cortex-m4"), "tokens")]
    emit_many(models, out / "shared-arena", shared_arena=True)
    if os.environ.get("CMSIS_NN_DIR"):  # Arm's kernels' calls (a checkout, as tests/test_cmsis_nn.py's)
        emit(compile_for(digits, get_target("cortex-m4").with_kernels("cmsis-nn")), out / "cmsis-nn", "digits")
    shutil.copyfile(ROOT / ".clang-format", out / ".clang-format")
    return out


def generated_sources(out: Path) -> list[Path]:
    """Every .c/.h the emitter wrote from its templates: the models' files, the shared arena's and
    the runtime's identity (runtime/ holds copies of runtime_c/ besides)."""
    files = sorted(p for p in out.rglob("*.[ch]") if "runtime" not in p.relative_to(out).parts)
    return files + sorted(out.rglob("runtime/src/edgec_runtime.c"))


@pytest.mark.skipif(shutil.which("clang-format") is None, reason="clang-format not installed (make toolchain)")
def test_generated_c_is_clang_format_clean(generated):
    files = generated_sources(generated)
    kinds = {p.name.replace("digits", "<name>") for p in files}
    assert {"<name>.c", "<name>.h", "<name>_weights.c", "<name>_weights.h", "edgec_shared_arena.h"} <= kinds
    result = subprocess.run(
        ["clang-format", "--dry-run", "-Werror", *map(str, files)], capture_output=True, text=True, cwd=generated
    )
    assert result.returncode == 0, result.stderr[:4000]
