"""Write one test image of the digits example as a C header: its float pixels, NHWC as the
generated C API expects, and its label.

    python make_sample.py ../digits/test.npz INDEX sample.h
"""

import sys
from pathlib import Path

import numpy as np


def main(test_set: str, index: int, header: str) -> None:
    data = np.load(test_set)
    image = data["x"][index].transpose(1, 2, 0)  # CHW -> HWC
    values = [f"{v:.9e}f" for v in image.ravel()]  # exact for float32, and a valid C float literal
    rows = ",\n    ".join(", ".join(values[i : i + 8]) for i in range(0, len(values), 8))
    with open(header, "w") as f:
        f.write(
            f"/* Test image {index} of {Path(test_set).name}, written by make_sample.py. */\n"
            f"#define SAMPLE_LABEL {int(data['y'][index])}\n"
            f"static const float sample_pixels[{image.size}] = {{\n    {rows}\n}};\n"
        )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
