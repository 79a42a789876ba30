"""Int8 accuracy of the digits model next to the float model's, on its held-out test split.

    python examples/digits/evaluate.py [build/digits]

The model is compiled with edgec's Python API and evaluated with edgec.evaluate: the float model
and the int8 golden simulator on the same test images. Given the directory `edgec build` wrote, the
generated C is also compiled for the host with a small driver that feeds each float test image
through digits_quantize_input() -> digits_invoke() and reads the int8 scores back, exactly as
firmware would; its accuracy must equal the simulator's (the C is bit-exact to it).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

import edgec

HERE = Path(__file__).resolve().parent
DRIVER = r"""
#include <stdio.h>
#include "digits.h"
int main(void) {
    float x[DIGITS_INPUT_SIZE];
    while (fread(x, sizeof(float), DIGITS_INPUT_SIZE, stdin) == DIGITS_INPUT_SIZE) {
        digits_quantize_input(x);
        if (digits_invoke() != 0) return 1;
        fwrite(digits_output(), 1, DIGITS_OUTPUT_SIZE, stdout);
    }
    return 0;
}
"""


def evaluate(x: np.ndarray, y: np.ndarray) -> edgec.Evaluation:
    """Float vs int8 top-1 accuracy, with the calibration `make demo` builds with."""
    program = torch.export.load(str(HERE / "digits.pt2"))
    compiled = edgec.compile(
        program, calibration=np.load(HERE / "calib.npy"), target="host", name="digits", progress=False
    )
    return edgec.evaluate(compiled, (x, y))


def int8_accuracy(build_dir: Path, x: np.ndarray, y: np.ndarray) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        driver, exe = Path(tmp) / "main.c", Path(tmp) / "digits"
        driver.write_text(DRIVER)
        sources = sorted(str(p) for p in build_dir.glob("*.c")) + sorted(
            str(p) for p in build_dir.rglob("runtime/src/**/*.c")
        )
        subprocess.run(
            [
                "cc",
                "-std=c99",
                "-O2",
                "-Wall",
                "-Wextra",
                "-Werror",
                f"-I{build_dir}",
                f"-I{build_dir / 'runtime' / 'include'}",
                str(driver),
                *sources,
                "-o",
                str(exe),
            ],
            check=True,
        )
        nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1), dtype=np.float32)  # the C API is NHWC
        result = subprocess.run([str(exe)], input=nhwc.tobytes(), capture_output=True, check=True)
    scores = np.frombuffer(result.stdout, dtype=np.int8).reshape(len(x), -1)
    return float(np.mean(scores.argmax(axis=1) == y))


def main() -> int:
    test = np.load(HERE / "test.npz")
    x, y = test["x"].astype(np.float32), test["y"]
    result = evaluate(x, y)
    print(
        f"digits test set ({len(y)} images): float {result.float_value:.2%}, int8 {result.int8_value:.2%}, "
        f"difference {100 * result.difference:+.2f} points"
    )
    if len(sys.argv) > 1:
        c = int8_accuracy(Path(sys.argv[1]), x, y)
        print(f"int8 generated C ({sys.argv[1]}): {c:.2%}")
        if c != result.int8_value:
            return 1
    return 0 if -result.difference <= 0.01 else 1


if __name__ == "__main__":
    sys.exit(main())
