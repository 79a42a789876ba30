"""The bundled example: the committed model compiles, and the generated C's int8 accuracy on the
held-out digits is within 1 point of the float model's (what `make demo` prints)."""
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
    float_accuracy = evaluate.float_accuracy(x, y)
    int8_accuracy = evaluate.int8_accuracy(tmp_path / "digits", x, y)
    print(f"float {float_accuracy:.4f} int8 {int8_accuracy:.4f}")
    assert float_accuracy >= 0.95
    assert float_accuracy - int8_accuracy <= 0.01
