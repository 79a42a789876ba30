"""The bundled example: the committed model compiles, and its int8 accuracy on the held-out digits
(edgec.evaluate, and the generated C's, equal) is within 1 point of the float model's (what `make
demo` prints)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from edgec.pipeline import compile_model, emit, load_samples

DIGITS = Path(__file__).resolve().parent.parent / "examples" / "digits"


def _evaluate_module():
    spec = importlib.util.spec_from_file_location("digits_evaluate", DIGITS / "evaluate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_int8_accuracy_within_one_point_of_float(tmp_path):
    compiled = compile_model(str(DIGITS / "digits.pt2"), calibration=load_samples(DIGITS / "calib.npy"))
    emit(compiled, tmp_path / "digits", "digits")
    test = np.load(DIGITS / "test.npz")
    x, y = test["x"].astype(np.float32), test["y"]
    evaluate = _evaluate_module()
    result = evaluate.evaluate(x, y)  # the Python API: float model vs golden int8 simulator
    int8_accuracy = evaluate.int8_accuracy(tmp_path / "digits", x, y)  # the generated C
    print(result, f"generated C {int8_accuracy:.4f}")
    assert result.samples == len(y) and result.reference == "float model"
    assert result.float_value >= 0.95
    assert result.float_value - result.int8_value <= 0.01
    assert int8_accuracy == result.int8_value  # the C is bit-exact to the simulator
