"""Int8 accuracy of the generated C for the digits model, next to the float model's.

    python examples/digits/evaluate.py build/digits

Compiles the generated directory for the host with a small driver that feeds each float test
image through digits_quantize_input() -> digits_invoke() and reads the int8 scores back, exactly
as firmware would, then compares the predicted classes with the labels.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

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


def float_accuracy(x: np.ndarray, y: np.ndarray) -> float:
    model = torch.export.load(str(HERE / "digits.pt2")).module()
    with torch.no_grad():
        predictions = [int(model(torch.from_numpy(sample[None])).argmax()) for sample in x]
    return float(np.mean(np.array(predictions) == y))


def int8_accuracy(build_dir: Path, x: np.ndarray, y: np.ndarray) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        driver, exe = Path(tmp) / "main.c", Path(tmp) / "digits"
        driver.write_text(DRIVER)
        sources = sorted(str(p) for p in build_dir.glob("*.c")) + sorted(str(p) for p in build_dir.rglob("runtime/src/**/*.c"))
        subprocess.run(["cc", "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{build_dir}",
                        f"-I{build_dir / 'runtime' / 'include'}", str(driver), *sources, "-o", str(exe)], check=True)
        nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1), dtype=np.float32)  # the C API is NHWC
        result = subprocess.run([str(exe)], input=nhwc.tobytes(), capture_output=True, check=True)
    scores = np.frombuffer(result.stdout, dtype=np.int8).reshape(len(x), -1)
    return float(np.mean(scores.argmax(axis=1) == y))


def main() -> int:
    build_dir = Path(sys.argv[1] if len(sys.argv) > 1 else "build/digits")
    test = np.load(HERE / "test.npz")
    x, y = test["x"].astype(np.float32), test["y"]
    fp = float_accuracy(x, y)
    q = int8_accuracy(build_dir, x, y)
    print(f"digits test set ({len(y)} images): float {fp:.2%}, int8 generated C {q:.2%}, "
          f"difference {100 * (fp - q):+.2f} points")
    return 0 if fp - q <= 0.01 else 1


if __name__ == "__main__":
    sys.exit(main())
