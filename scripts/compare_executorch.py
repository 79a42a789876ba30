"""edgec on programs quantized by ExecuTorch's Cortex-M quantizer: how many int8 output bytes of
edgec's build differ from the program's own semantics (its Q/DQ graph run in float, the output
quantized at the program's output qparams). Numbers in docs/quantization.md.

ExecuTorch is not an edgec dependency; to rerun:
    echo torch==2.13.0 > /tmp/torch-pin.txt
    pip install -c /tmp/torch-pin.txt executorch==1.5.1 tosa-tools==2026.5.0
    python scripts/compare_executorch.py [model ...]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from edgec.ir import to_torch_order  # noqa: E402
from edgec.pipeline import compile_model  # noqa: E402
from edgec.tools import verify  # noqa: E402
from edgec.zoo import mlperf  # noqa: E402

CALIBRATION_SAMPLES = 32
SAMPLES = 16


def channels_last(tensor: torch.Tensor) -> torch.Tensor:
    """The Cortex-M quantizer (legacy layout mode) wants channels-last convolution inputs."""
    return tensor.to(memory_format=torch.channels_last) if tensor.dim() == 4 else tensor


def executorch_program(name: str, path: Path) -> None:
    """export -> prepare_pt2e(CortexMQuantizer()) -> calibrate -> convert_pt2e -> torch.export.save."""
    from executorch.backends.cortex_m.quantizer.quantizer import CortexMQuantizer
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    model, example = mlperf.ZOO[name]()
    model, example = model.to(memory_format=torch.channels_last), tuple(channels_last(x) for x in example)
    # ExecuTorch's passes refuse the call_module input guards torch.export adds to .module()
    prepared = prepare_pt2e(torch.export.export(model, example).module(check_guards=False), CortexMQuantizer())
    with torch.no_grad():
        for sample in mlperf.calibration_data(name, CALIBRATION_SAMPLES, seed=0):
            prepared(channels_last(torch.from_numpy(sample[None])))
    torch.export.save(torch.export.export(convert_pt2e(prepared), example), path)


def mismatches(path: Path, name: str) -> tuple[int, int, int]:
    """(differing bytes, bytes, largest difference in steps) of edgec's golden int8 output against
    the program's Q/DQ graph, on SAMPLES inputs of the model's distribution."""
    compiled = compile_model(str(path), calibration=None, warn=lambda _: None)
    floats = mlperf.calibration_data(name, SAMPLES, seed=1)
    golden = verify.golden_outputs(compiled.graph, verify.quantized_inputs(compiled.graph, floats))
    out = compiled.graph.tensors[compiled.graph.outputs[0]]
    got = np.stack([to_torch_order(out, row.reshape(out.shape)).reshape(-1) for row in golden]).astype(np.int64)
    final = verify.final_nodes(compiled)[0]
    values = np.stack([verify._output_value(v, final).reshape(-1) for v in verify.qdq_reference(compiled, floats)])
    expected = np.clip(np.round(values / out.scale) + out.zero_point, -128, 127).astype(np.int64)
    diff = np.abs(got - expected)
    return int(np.count_nonzero(diff)), int(diff.size), int(diff.max())


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for name in sys.argv[1:] or sorted(mlperf.ZOO):
            path = Path(tmp) / f"{name}.pt2"
            executorch_program(name, path)
            differing, total, worst = mismatches(path, name)
            print(
                f"{name}: {differing} of {total} output bytes differ from the Q/DQ program (max {worst} steps)",
                flush=True,
            )


if __name__ == "__main__":
    main()
