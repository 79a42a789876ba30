"""<name>_quantize_input rounds as the program's own quantize does, and the simulator with it: a
PT2E program's quantize_per_tensor multiplies by float32(1/scale) and rounds halves to even; a
program read the TFLite way quantizes as TFLite's QUANTIZE (x / scale, halves away from zero).
Tie values are where the two differ, so they are the test's inputs."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
import torch

from edgec import sim
from edgec.pipeline import compile_model, emit
from edgec.tools.verify import HOST_CFLAGS, SANITIZE_FLAGS

DRIVER = r"""
#include <stdio.h>
#include "m.h"
int main(void) {
    float x[M_INPUT_0_SIZE];
    while (fread(x, sizeof(float), M_INPUT_0_SIZE, stdin) == M_INPUT_0_SIZE) {
        m_quantize_input_0(x);
        fwrite(m_input_0(), 1, M_INPUT_0_BYTES, stdout);
    }
    return 0;
}
"""
FEATURES = 16


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "model.py"
    path.write_text(
        "import torch\n\ndef factory():\n    torch.manual_seed(0)\n"
        f"    return torch.nn.Linear({FEATURES}, 3).eval(), (torch.zeros(1, {FEATURES}),)\n"
    )
    rng = np.random.default_rng(0)
    return compile_model(f"{path}:factory", calibration=rng.uniform(-1.3, 1.1, (8, 1, FEATURES)).astype(np.float32))


def _scaling_to(targets, scale: float, rounding: str) -> np.ndarray:
    """float32 inputs whose scaled value (float32 x * float32(1/scale), or x / float32(scale)) is
    exactly one of `targets` (float32), where such an input exists."""

    def scaled(x):
        return x * np.float32(1.0 / scale) if rounding == "multiply" else x / np.float32(scale)

    found = []
    for target in np.asarray(targets, dtype=np.float32):
        x = np.float32(float(target) * scale)
        candidates = x + np.spacing(x) * np.arange(-4, 5, dtype=np.float32)
        found += [c for c in candidates if scaled(c) == target][:1]
    return np.array(found, dtype=np.float32)


def _ties(scale: float, rounding: str) -> np.ndarray:
    return _scaling_to(np.arange(-140, 140) + 0.5, scale, rounding)


def _c_quantize(compiled, tmp_path, values: np.ndarray) -> np.ndarray:
    emit(compiled, tmp_path / "out", "m")
    (tmp_path / "main.c").write_text(DRIVER)
    out = tmp_path / "out"
    sources = [str(p) for p in sorted(out.glob("*.c"))] + [
        str(p) for p in sorted((out / "runtime" / "src").rglob("*.c"))
    ]
    subprocess.run(
        [
            "cc",
            *HOST_CFLAGS,
            *SANITIZE_FLAGS,
            f"-I{out}",
            f"-I{out / 'runtime' / 'include'}",
            str(tmp_path / "main.c"),
            *sources,
            "-o",
            str(tmp_path / "q"),
        ],
        check=True,
    )
    rows = values.reshape(-1, FEATURES)
    result = subprocess.run([str(tmp_path / "q")], input=rows.tobytes(), capture_output=True, check=True)
    return np.frombuffer(result.stdout, dtype=np.int8).reshape(rows.shape)


def _values(compiled, rounding: str) -> np.ndarray:
    """Ties, random values and the extremes (NaN, infinities, huge), in rows of the input's size."""
    scale = compiled.graph.tensors[compiled.graph.inputs[0]].scale
    ties = _ties(scale, rounding)
    special = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 0.0, -0.0], dtype=np.float32)
    below_half = np.float32(0.5) - np.float32(2.0**-25)  # where scaled + 0.5f would round up to 1.0f
    near_half = _scaling_to([below_half, -below_half], scale, rounding)
    assert len(near_half) == 2
    special = np.concatenate([special, near_half])
    random = np.random.default_rng(1).uniform(-2, 2, 200).astype(np.float32)
    values = np.concatenate([ties, special, random])
    return np.concatenate([values, np.zeros(-len(values) % FEATURES, np.float32)])


def _sim_quantize(compiled, values: np.ndarray) -> np.ndarray:
    return np.stack([sim.quantize_input(compiled.graph, row[None]).reshape(-1) for row in values.reshape(-1, FEATURES)])


def test_a_pt2e_program_quantizes_its_input_as_quantize_per_tensor(compiled, tmp_path):
    assert compiled.graph.input_rounding == "multiply"
    tensor = compiled.graph.tensors[compiled.graph.inputs[0]]
    values = _values(compiled, "multiply")
    assert len(_ties(tensor.scale, "multiply")) > 200  # enough ties to tell the roundings apart
    finite = np.isfinite(values)
    expected = torch.ops.quantized_decomposed.quantize_per_tensor(
        torch.from_numpy(values[finite]), tensor.scale, tensor.zero_point, -128, 127, torch.int8
    ).numpy()
    simulated = _sim_quantize(compiled, values)
    assert np.array_equal(simulated.reshape(-1)[finite], expected)
    assert np.array_equal(_c_quantize(compiled, tmp_path, values), simulated)


def test_a_program_read_the_tflite_way_quantizes_as_tflite(compiled, tmp_path):
    """At a power-of-two scale every float32 scaled value is reachable, 0.5 - 2^-25 included."""
    tensor = compiled.graph.tensors[compiled.graph.inputs[0]]
    program_scale = tensor.scale
    compiled.graph.input_rounding, tensor.scale = "divide", 2.0**-6
    try:
        values = _values(compiled, "divide")
        finite = np.isfinite(values)
        scaled = values[finite] / np.float32(tensor.scale)  # TFLite: std::round(x / scale) + zero point
        rounded = np.sign(scaled) * np.floor(np.abs(scaled.astype(np.float64)) + 0.5)  # std::round, exactly
        expected = np.clip(rounded + tensor.zero_point, -128, 127)
        simulated = _sim_quantize(compiled, values)
        assert np.array_equal(simulated.reshape(-1)[finite], expected.astype(np.int8))
        assert np.array_equal(_c_quantize(compiled, tmp_path, values), simulated)
    finally:
        compiled.graph.input_rounding, tensor.scale = "multiply", program_scale
