"""How edgec's post-training quantization picks each activation's int8 range (`--calibration`).

  minmax      the observed minimum and maximum (the default; nothing is ever clipped);
  histogram   torchao's HistogramObserver: its search for the range that minimises the L2 error
              of quantizing the observed histogram (what litert-torch and XNNPACK calibrate with);
  percentile  the 0.01 % and 99.99 % points of the observed histogram (outliers clipped);
  mse         the pair of low/high quantiles of the histogram (0 to 1 % from each end) whose
              int8 grid gives the least mean squared error over the observed values.

All but minmax keep torchao's 2048-bin histogram of every activation. Weights are always min/max
(symmetric, per output channel for convolutions). The range always contains 0 (torchao's
_calculate_qparams), so a zero pad or a ReLU's floor is exact.
"""

from __future__ import annotations

import numpy as np
import torch
from torchao.quantization.pt2e import HistogramObserver, MinMaxObserver

EPS = 2**-20  # the smallest scale edgec's observers give (a constant activation)
PERCENTILE = 1e-4  # clipped from each end by --calibration percentile
MSE_QUANTILES = (0.0, 1e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2)  # --calibration mse's candidates


class _HistogramRange(HistogramObserver):
    """A HistogramObserver whose range is `choose_range(edges, counts)` of the histogram."""

    def calculate_qparams(self):
        if self.min_val == float("inf") or self.min_val == self.max_val:
            return super().calculate_qparams()
        counts = self.histogram.detach().double().numpy()
        edges = np.linspace(float(self.min_val), float(self.max_val), len(counts) + 1)
        low, high = self.choose_range(edges, counts)
        return self._calculate_qparams(torch.tensor(low, dtype=torch.float32), torch.tensor(high, dtype=torch.float32))

    def choose_range(self, edges: np.ndarray, counts: np.ndarray) -> tuple[float, float]:
        raise NotImplementedError


def _quantile_edges(edges: np.ndarray, counts: np.ndarray, fraction: float) -> tuple[float, float]:
    """The bin edges below which, and above which, at most `fraction` of the values lie."""
    cdf = np.cumsum(counts) / counts.sum()
    low = int(np.searchsorted(cdf, fraction, side="right"))  # first bin holding the quantile
    high = int(np.searchsorted(cdf, 1.0 - fraction, side="left"))
    return float(edges[min(low, len(counts) - 1)]), float(edges[min(high, len(counts) - 1) + 1])


class PercentileObserver(_HistogramRange):
    def choose_range(self, edges, counts):
        return _quantile_edges(edges, counts, PERCENTILE)


class MseObserver(_HistogramRange):
    def choose_range(self, edges, counts):
        centers = (edges[:-1] + edges[1:]) / 2
        best, best_error = (float(edges[0]), float(edges[-1])), np.inf
        for low_fraction in MSE_QUANTILES:
            for high_fraction in MSE_QUANTILES:
                low = _quantile_edges(edges, counts, low_fraction)[0]
                high = _quantile_edges(edges, counts, high_fraction)[1]
                error = _int8_squared_error(centers, counts, low, high)
                if error < best_error:
                    best, best_error = (low, high), error
        return best


def _int8_squared_error(values: np.ndarray, counts: np.ndarray, low: float, high: float) -> float:
    """Sum of count * (dequantize(quantize(value)) - value)^2 on the affine int8 grid of [low, high]
    (widened to hold 0, as the qparams will be)."""
    low, high = min(low, 0.0), max(high, 0.0)
    scale = max((high - low) / 255.0, EPS)
    zero_point = np.clip(np.round(-128 - low / scale), -128, 127)
    q = np.clip(np.round(values / scale) + zero_point, -128, 127)
    return float(np.sum(counts * ((q - zero_point) * scale - values) ** 2))


CALIBRATIONS = {
    "minmax": MinMaxObserver,
    "histogram": HistogramObserver,
    "percentile": PercentileObserver,
    "mse": MseObserver,
}
DEFAULT = "minmax"


def observer(method: str):
    """The activation observer constructor for `--calibration method`."""
    if method not in CALIBRATIONS:
        from edgec.errors import EdgecError

        raise EdgecError(f"unknown calibration '{method}' (one of {', '.join(CALIBRATIONS)})")
    return CALIBRATIONS[method].with_args(eps=EPS)


# Calibration data whose largest magnitude is this many times the example input's (or this many
# times smaller) was likely prepared unlike the data the model takes, e.g. raw 0..255 pixels for a
# model trained on normalised input: every int8 range would be chosen for the wrong data.
RANGE_MISMATCH = 10.0


def range_warnings(samples: list[tuple], example_inputs: tuple) -> list[str]:
    """One warning per model input whose calibration samples (tuples of tensors, one per input)
    span a range unlike its example input's. A constant example (zeros, ones) says nothing of the
    range, and is not compared with."""
    warnings = []
    for index, example in enumerate(example_inputs):
        if not isinstance(example, torch.Tensor) or not example.is_floating_point() or not example.numel():
            continue
        example_low, example_high = float(example.min()), float(example.max())
        if example_low == example_high:
            continue
        low = min(float(sample[index].min()) for sample in samples)
        high = max(float(sample[index].max()) for sample in samples)
        magnitude, example_magnitude = max(abs(low), abs(high)), max(abs(example_low), abs(example_high))
        if example_magnitude / RANGE_MISMATCH <= magnitude <= example_magnitude * RANGE_MISMATCH:
            continue
        integers = magnitude > 1 and all(bool(torch.equal(x[index], x[index].round())) for x in samples)
        which = f" for input {index}" if len(example_inputs) > 1 else ""
        warnings.append(
            f"WARNING: the calibration data{which} spans [{low:.4g}, {high:.4g}]"
            f"{' in integer values' if integers else ''}, over {RANGE_MISMATCH:g}x "
            f"{'larger' if magnitude > example_magnitude else 'smaller'} than the example input's "
            f"[{example_low:.4g}, {example_high:.4g}]: the int8 ranges are chosen from it, so prepare it "
            f"as the model's input (e.g. normalised as in training)"
        )
    return warnings
