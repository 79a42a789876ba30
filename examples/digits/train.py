"""Train the bundled example: a small CNN on scikit-learn's 8x8 digits (no download needed).

Writes next to this file:
  digits.pt2  the trained float model, exported with torch.export (input [1,1,8,8], output logits [1,10])
  calib.npy   200 training images, float32 [200,1,8,8], for int8 calibration
  test.npz    the held-out split: x float32 [N,1,8,8] in 0..1, y int64 [N]

Deterministic: fixed seeds, one thread, deterministic algorithms.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

HERE = Path(__file__).resolve().parent
SEED = 0
EPOCHS = 40
BATCH_SIZE = 64
LEARNING_RATE = 1e-2
CALIBRATION_SAMPLES = 200
DIGITS_MAX_PIXEL = 16.0  # load_digits pixels are integers 0..16


def load_splits() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, x_test, y_train, y_test); x float32 [N,1,8,8] scaled to 0..1, y int64 [N]."""
    digits = load_digits()
    x = (digits.images / DIGITS_MAX_PIXEL).astype(np.float32)[:, None, :, :]
    y = digits.target.astype(np.int64)
    return train_test_split(x, y, test_size=0.25, random_state=SEED, stratify=y)


def conv_bn_relu(in_ch: int, out_ch: int, kernel: int, stride: int = 1, groups: int = 1) -> list[nn.Module]:
    return [
        nn.Conv2d(in_ch, out_ch, kernel, stride=stride, padding=kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(out_ch),
        nn.ReLU(),
    ]


def make_model() -> nn.Module:
    """8x8 -> conv 8 -> strided conv 16 (4x4) -> depthwise 3x3 -> pointwise 32 -> global avg pool -> 10 logits."""
    return nn.Sequential(
        *conv_bn_relu(1, 8, 3),
        *conv_bn_relu(8, 16, 3, stride=2),
        *conv_bn_relu(16, 16, 3, groups=16),
        *conv_bn_relu(16, 32, 1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )


def train(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
    generator = torch.Generator().manual_seed(SEED)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=EPOCHS)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for _ in range(EPOCHS):
        order = torch.randperm(len(x), generator=generator)
        for batch in order.split(BATCH_SIZE):
            optimizer.zero_grad()
            loss_fn(model(x[batch]), y[batch]).backward()
            optimizer.step()
        schedule.step()


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item()


def main() -> None:
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    x_train, x_test, y_train, y_test = load_splits()
    model = make_model()
    train(model, torch.from_numpy(x_train), torch.from_numpy(y_train))
    model.eval()
    test_accuracy = accuracy(model, torch.from_numpy(x_test), torch.from_numpy(y_test))

    example = torch.from_numpy(x_test[:1])
    torch.export.save(torch.export.export(model, (example,)), HERE / "digits.pt2")
    np.save(HERE / "calib.npy", x_train[:CALIBRATION_SAMPLES])
    np.savez_compressed(HERE / "test.npz", x=x_test, y=y_test)
    print(f"float test accuracy: {test_accuracy:.4f} ({len(y_test)} held-out images)")


if __name__ == "__main__":
    main()
