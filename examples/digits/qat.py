"""Quantization-aware training of the digits model with edgec's quantizer, then `edgec build`.

    python examples/digits/qat.py --steps 200 --out build/digits_qat.pt2
    edgec build build/digits_qat.pt2 -o build/digits_qat      # a quantized program: no --calib
    python examples/digits/evaluate.py build/digits_qat        # (name the C prefix digits: --name digits)

The flow (edgec.frontend.quantize.prepare_qat / convert_qat; torchao's PT2E QAT underneath):
  1. load digits.pt2, fold BatchNorm into the convolutions (trainable folded weights);
  2. prepare_qat_pt2e with EdgecQuantizer(qat=True): fake quantization on exactly the int8 grids
     edgec's kernels use (per-tensor affine activations, per-channel symmetric conv weights);
  3. fine-tune on the training split (a few hundred steps of Adam at a small learning rate);
  4. convert_pt2e -> an int8 Q/DQ program, saved with torch.export.save: edgec compiles it as it
     is (its qparams are the ones training settled on).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from edgec.frontend.quantize import convert_qat, prepare_qat  # noqa: E402

SEED = 0
BATCH_SIZE = 64
LEARNING_RATE = 1e-4
RANGE_SAMPLES = 64


def training_split() -> tuple[torch.Tensor, torch.Tensor]:
    sys.path.insert(0, str(HERE))
    from train import load_splits

    x_train, _, y_train, _ = load_splits()
    return torch.from_numpy(x_train), torch.from_numpy(y_train)


def fine_tune(module, x: torch.Tensor, y: torch.Tensor, steps: int) -> None:
    """`steps` Adam steps of cross-entropy on batches of one sample each (the exported program's
    batch size is 1: gradients are accumulated over BATCH_SIZE samples per step)."""
    generator = torch.Generator().manual_seed(SEED)
    optimizer = torch.optim.Adam(module.parameters(), lr=LEARNING_RATE)
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(steps):
        optimizer.zero_grad()
        for i in torch.randint(len(x), (BATCH_SIZE,), generator=generator):
            (loss_fn(module(x[i : i + 1]), y[i : i + 1]) / BATCH_SIZE).backward()
        optimizer.step()


def main(argv=None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("build") / "digits_qat.pt2")
    parser.add_argument(
        "--weights",
        choices=["int8", "int4"],
        default="int8",
        help="int4: 4-bit weights fake-quantized in training (docs/int4.md)",
    )
    args = parser.parse_args(argv)
    torch.manual_seed(SEED)
    module, example = prepare_qat(str(HERE / "digits.pt2"), weights=args.weights)
    x, y = training_split()
    with torch.no_grad():  # a first pass over some samples sets the fake quantizers' ranges
        for i in range(RANGE_SAMPLES):
            module(x[i : i + 1])
    fine_tune(module, x, y, args.steps)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.export.save(convert_qat(module, example), args.out)
    print(
        f"{args.out}: {args.weights}-weight QAT program after {args.steps} steps; build it with edgec build "
        f"{args.out} -o DIR"
    )
    return args.out


if __name__ == "__main__":
    main()
