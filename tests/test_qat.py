"""The documented QAT path (examples/digits/qat.py: edgec.frontend.quantize.prepare_qat -> fine-tune ->
convert_qat -> edgec build), run for a couple of steps: the program edgec compiles from it is
bit-exact on the host and keeps the float model's accuracy on the held-out digits."""

from __future__ import annotations

import importlib.util
import re

import numpy as np

from edgec.pipeline import compile_model
from edgec.tools import verify
from tests.device_support import DIGITS
from tests.test_cli import run_cli


def _qat_example():
    spec = importlib.util.spec_from_file_location("digits_qat", DIGITS / "qat.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_qat_program_compiles_bit_exact_and_accurate(tmp_path, capsys):
    program = _qat_example().main(["--steps", "2", "--out", str(tmp_path / "digits_qat.pt2")])
    compiled = compile_model(str(program), calibration=None, warn=lambda _: None)
    assert {op.kind for op in compiled.graph.ops} >= {"conv2d", "fully_connected"}
    test = np.load(DIGITS / "test.npz")
    x, y = test["x"].astype(np.float32), test["y"]
    outputs = verify.golden_outputs(compiled.graph, verify.quantized_inputs(compiled.graph, x))
    accuracy = float(np.mean(outputs.argmax(axis=1) == y))
    assert accuracy >= 0.95, accuracy  # the float model: 97.6 %
    code, out, err = run_cli("verify", program, "--samples", "8", "--quiet", capsys=capsys)
    assert code == 0 and "0 LSB" in out and re.search(r"OK: checked \d+ of \d+ layers", out), (out, err)
