"""The table in docs/quantization.md: int8 output SQNR against the float model per calibration
option, on the four reference models (edgec.zoo.mlperf) and the digits example (plus its test accuracy).

    python scripts/measure_quantization.py > /tmp/table.md

Calibration: 32 samples of each zoo model's input distribution (seed 0), evaluation on 32 others
(seed 1); digits: examples/digits/calib.npy, evaluated on the 450 held-out images. The int8 outputs
are the golden simulator's (equal to the generated C byte for byte, as the other tests show).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from edgec.pipeline import compile_for, emit, load_samples, quantize_model  # noqa: E402
from edgec.tools import verify  # noqa: E402
from edgec.zoo import mlperf  # noqa: E402

OPTIONS = [
    ("minmax", False),
    ("histogram", False),
    ("percentile", False),
    ("mse", False),
    ("minmax", True),
    ("mse", True),
]
DIGITS = ROOT / "examples" / "digits"


def models():
    """(name, spec, calibration, evaluation floats, labels or None)."""
    for name in sorted(mlperf.ZOO):
        yield (
            name,
            f"{mlperf.__file__}:{name}",
            mlperf.calibration_data(name, 32, seed=0),
            mlperf.calibration_data(name, 32, seed=1),
            None,
        )
    test = np.load(DIGITS / "test.npz")
    yield (
        "digits",
        str(DIGITS / "digits.pt2"),
        load_samples(DIGITS / "calib.npy"),
        test["x"].astype(np.float32),
        test["y"],
    )


def measure(spec, calibration, floats, labels, method, per_channel_linear) -> dict:
    quantized = quantize_model(
        spec, calibration=calibration, warn=lambda _: None, method=method, per_channel_linear=per_channel_linear
    )
    compiled = compile_for(quantized, "cortex-m4")
    with tempfile.TemporaryDirectory() as tmp:
        flash = emit(compiled, Path(tmp) / "m", "m")["weights_bytes"]
    outputs = verify.golden_outputs(compiled.graph, verify.quantized_inputs(compiled.graph, floats))
    summary = verify.accuracy_summary(compiled, verify.float_reference(compiled, floats), outputs)
    result = {"sqnr": summary["output_sqnr_db"], "flash": flash}
    if labels is not None:
        tensor = compiled.graph.tensors[compiled.graph.outputs[0]]
        result["accuracy"] = float(
            np.mean(outputs.reshape(len(floats), -1)[:, : tensor.elements].argmax(axis=1) == labels)
        )
    return result


def main() -> None:
    header = " | ".join(f"{m}{' + per-channel linear' if pc else ''}" for m, pc in OPTIONS)
    print(f"| model | {header} |")
    print("|---" * (len(OPTIONS) + 1) + "|")
    for name, spec, calibration, floats, labels in models():
        cells, base_flash = [], None
        for method, per_channel_linear in OPTIONS:
            r = measure(spec, calibration, floats, labels, method, per_channel_linear)
            base_flash = base_flash if base_flash is not None else r["flash"]
            cell = f"{r['sqnr']:.1f} dB"
            if "accuracy" in r:
                cell += f", {r['accuracy']:.1%}"
            if r["flash"] != base_flash:
                cell += f" ({r['flash'] - base_flash:+,} B flash)"
            cells.append(cell)
        print(f"| {name} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    main()
