"""Make tests/data/tflm/: edgec's reference models quantized the litert-torch way, and what TFLite
Micro computes for them (the oracle of tests/test_tflm_reference.py).

Models: public architectures (edgec.zoo, or built small here: MobileNetV2, SqueezeNet, EfficientNet,
ShuffleNetV2 at 0.44-0.87 MB each) and tiny operator programs (OPERATOR_PROGRAMS: one or a few TFLite
operators each; a .pt2 of 70-240 KB, mostly the serialized graph, an .npz of a few KB).
For each: torch.export(strict=True) -> litert-torch's PT2EQuantizer (per-channel, its
HistogramObserver activations) -> prepare_pt2e -> calibrate -> convert_pt2e(fold_quantize=False), then
(a) litert_torch.convert -> .tflite -> TFLite Micro's Python interpreter runs the int8 inputs;
(b) the same converted program is saved as <name>.pt2 (what `edgec build` reads; the test compiles
some with --tflite-compatible, docs/tflite-compatible.md). Stored per model: <name>.pt2 and
<name>.npz (int8 inputs in PyTorch order, or int32 token ids, TFLite Micro's int8 outputs and,
for classifiers, the int8 logits feeding SOFTMAX, the I/O qparams), and versions.json.

The peer stack is NOT an edgec dependency; it is needed only to rerun this script:
    echo torch==2.13.0 > /tmp/torch-pin.txt
    pip install -c /tmp/torch-pin.txt litert-torch==0.10.0 ai-edge-litert==2.3.0 \\
        tflite-micro==0.dev20261023182759 typing_extensions==4.12.2
    python scripts/make_tflm_reference.py            # the stored models; prints edgec's mismatches
    python scripts/make_tflm_reference.py --out /tmp/x --models shufflenet_v2_x0_5   # one more, elsewhere
    python scripts/make_tflm_reference.py --out /tmp/x --models mobilenet_v2   # full width, 224x224: ~25 min
(in a venv made with --system-site-packages, so that pip never replaces the system torch).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from edgec.zoo import cnn, mlperf, seq, vision  # noqa: E402

OUT = ROOT / "tests" / "data" / "tflm"
CALIBRATION_SAMPLES = 64
# Half the inputs follow the model's data distribution, half are uniform over all int8 values
# (saturating every layer somewhere: the corners where arithmetic differences show).
REALISTIC_SAMPLES = 8
UNIFORM_SAMPLES = 8
# Generous: TFLite Micro segfaults on a too small arena instead of failing, and every tensor is kept
# (kPreserveAllTensors): the full-width mobilenet_v2 needs more than 8 MB.
TFLM_ARENA_BYTES = 64 << 20
PEER_PACKAGES = ("torch", "torchao", "litert-torch", "ai-edge-litert", "tflite-micro")


def _reduced(zoo_name: str, make):
    """A public architecture of edgec.zoo.cnn made smaller (fewer channels or blocks), so that its
    stored program stays a few hundred KB; its inputs are the full model's."""
    from functools import partial

    return lambda seed=0: mlperf.build_model(make, partial(cnn.calibration_data, zoo_name), seed)


def _reduced_calibration(zoo_name: str):
    return lambda name, n, seed=0: cnn.calibration_data(zoo_name, n, seed)


# The operator programs: PT2EQuantizer annotates only conv, linear, add, mul, cat, pools, sigmoid and
# softmax (and lets reshapes, slices, means share their input's qparams), so each other operator
# sits alone between two annotated ops: DQ -> op -> Q, which the converter makes an int8 op.
class _Gating(nn.Module):
    """LOGISTIC and MUL: a squeeze-excite style sigmoid gate."""

    def __init__(self):
        super().__init__()
        self.stem, self.gate, self.out = nn.Conv2d(4, 8, 1), nn.Conv2d(8, 8, 1), nn.Conv2d(8, 4, 1)

    def forward(self, x):
        y = self.stem(x)
        return self.out(y * torch.sigmoid(self.gate(y)))


class _Activations(nn.Module):
    """HARD_SWISH, LEAKY_RELU, MAXIMUM, MINIMUM, SUB, each between two convs."""

    def __init__(self):
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv2d(8 if i else 4, 8, 1) for i in range(6))

    def forward(self, x):
        stem, swish, leaky, larger, smaller, difference = self.convs
        y = stem(x)
        h, low = swish(F.hardswish(y)), leaky(F.leaky_relu(y, 0.2))
        return larger(torch.maximum(h, low)) + smaller(torch.minimum(h, low)) + difference(h - low)


class _Slicing(nn.Module):
    """SPLIT / STRIDED_SLICE and PACK: channel halves, cropped, stacked."""

    def __init__(self):
        super().__init__()
        self.stem, self.head = nn.Conv2d(4, 8, 1), nn.Linear(2 * 4 * 4 * 6, 10)

    def forward(self, x):
        first, second = self.stem(x).chunk(2, dim=1)
        return self.head(torch.stack([first[:, :, 1:5, :], second[:, :, 0:4, :]], dim=1).flatten(1))


class _TransformerBlock(nn.Module):
    """A transformer encoder block without its norms (TFLite Micro runs no quantized LayerNorm):
    BATCH_MATMUL x2, SOFTMAX, MUL by the 1/sqrt(d) constant, residual ADDs, a ReLU feed-forward."""

    def __init__(self, d=16, hidden=32):
        super().__init__()
        self.query, self.key, self.value, self.out = (nn.Linear(d, d) for _ in range(4))
        self.up, self.down = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        scores = (self.query(x) @ self.key(x).transpose(1, 2)) * 0.25
        h = x + self.out(torch.softmax(scores, dim=-1) @ self.value(x))
        return h + self.down(F.relu(self.up(h)))


class _Differences(nn.Module):
    """SUB then MUL (a squared difference), SUM over tokens."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.head = nn.Linear(16, 16), nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        difference = self.a(x) - self.b(x)
        return self.head((difference * difference).sum(dim=1))


class _Unary(nn.Module):
    """RELU (after a cat), ABS, each between two convs. Left out: ELU (the converter emits SELECT,
    which TFLite Micro lacks) and PReLU (PT2EQuantizer leaves its slope float: a float PRELU)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(4, 8, 1)
        self.convs = nn.ModuleList(nn.Conv2d(16 if i == 0 else 8, 8, 1) for i in range(2))

    def forward(self, x):
        y = self.stem(x)
        after_relu, after_abs = self.convs
        return after_relu(F.relu(torch.cat([y, y * y], dim=1))) + after_abs(torch.abs(y))


class _Lookups(nn.Module):
    """RSQRT of a sigmoid, RELU6 of a cat (a gather, index_select, edgec does not compile yet)."""

    def __init__(self):
        super().__init__()
        self.stem, self.gate = nn.Conv2d(4, 8, 1), nn.Conv2d(8, 8, 1)
        self.convs = nn.ModuleList(nn.Conv2d(16 if i == 1 else 8, 8, 1) for i in range(2))

    def forward(self, x):
        y = self.stem(x)
        after_rsqrt, after_relu6 = self.convs
        return after_rsqrt(torch.rsqrt(torch.sigmoid(self.gate(y)))) + after_relu6(
            F.relu6(torch.cat([y, y * y], dim=1))
        )


class _Splits(nn.Module):
    """SLICE x3 twice: a chunk of a conv's output (the program quantizes the split input: one
    requantize per part) and a chunk after a channel shuffle (it does not: the converter requantizes
    through the last part's qparams, docs/tflite-compatible.md)."""

    def __init__(self):
        super().__init__()
        self.stem, self.pair = nn.Conv2d(4, 12, 1), nn.ModuleList(nn.Conv2d(4, 6, 1) for _ in range(2))
        self.convs = nn.ModuleList(nn.Conv2d(4, 4, 3 if i % 3 == 2 else 1, padding=int(i % 3 == 2)) for i in range(5))

    def forward(self, x):
        first, second, third = self.stem(x).chunk(3, dim=1)
        a, b, c, d, e = self.convs
        y = torch.cat([self.pair[0](x), self.pair[1](x)], dim=1)
        shuffled = y.view(-1, 2, 6, 6, 6).transpose(1, 2).contiguous().view(-1, 12, 6, 6)
        p, q, r = shuffled.chunk(3, dim=1)
        return torch.cat([a(first) + b(second), c(third), p + d(q), e(r)], dim=1)


class _Gather(nn.Module):
    """GATHER: channels picked by a constant index list (index_select), between two convs."""

    def __init__(self):
        super().__init__()
        self.stem, self.head = nn.Conv2d(4, 8, 1), nn.Conv2d(6, 4, 1)
        self.register_buffer("picked", torch.tensor([5, 1, 2, 3, 7, 5]))

    def forward(self, x):
        return self.head(self.stem(x).index_select(1, self.picked))


class _Prelu(nn.Module):
    """PReLU with one slope per channel and with a single slope, each between two convs. PT2EQuantizer
    leaves the slopes float, so the converter keeps each PReLU float: DEQUANTIZE, RELU, MUL, MUL, SUB,
    QUANTIZE (no int8 PRELU)."""

    def __init__(self):
        super().__init__()
        self.stem, self.head = nn.Conv2d(4, 8, 1), nn.Conv2d(8, 4, 1)
        self.per_channel, self.single = nn.PReLU(8), nn.PReLU()
        self.side = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        y = self.stem(x)
        return self.head(self.per_channel(y)) + self.side(self.single(y))


class _Embedding(nn.Module):
    """EMBEDDING_LOOKUP: token ids (an int32 model input) pick rows of a constant table (float in the
    program: the converter looks them up in float and QUANTIZEs), then a linear layer."""

    def __init__(self):
        super().__init__()
        self.table, self.head = nn.Embedding(20, 8), nn.Linear(8, 4)

    def forward(self, ids):
        return self.head(self.table(ids))


class _Normalize(nn.Module):
    """L2_NORMALIZATION: F.normalize over the features of a linear layer, then another (litert-torch
    cannot convert it over a conv's channels: "non-NHWC compatible node")."""

    def __init__(self):
        super().__init__()
        self.stem, self.head = nn.Linear(16, 12), nn.Linear(12, 4)

    def forward(self, x):
        return self.head(F.normalize(self.stem(x), dim=-1))


def _token_ids(name, n, seed=0):
    """Token ids over every row of _Embedding's table (and the first and last rows)."""
    return np.random.default_rng(seed).integers(0, 20, size=(n, 6)).astype(np.int64)


def _operator_program(module: type[nn.Module], shape: tuple[int, ...]):
    """(factory, calibration data) of a tiny program of one or a few TFLite operators."""
    from functools import partial

    def calibration(name, n, seed=0):
        return mlperf.random_inputs(shape, "normal", n, seed)

    return (lambda seed=0: mlperf.build_model(module, partial(calibration, None), seed)), calibration


OPERATOR_PROGRAMS = {
    "op_gating": _operator_program(_Gating, (1, 4, 6, 6)),
    "op_activations": _operator_program(_Activations, (1, 4, 6, 6)),
    "op_slicing": _operator_program(_Slicing, (1, 4, 6, 6)),
    "transformer_block": _operator_program(_TransformerBlock, (1, 8, 16)),
    "op_differences": _operator_program(_Differences, (1, 8, 16)),
    "op_unary": _operator_program(_Unary, (1, 4, 6, 6)),
    "op_lookups": _operator_program(_Lookups, (1, 4, 6, 6)),
    "op_splits": _operator_program(_Splits, (1, 4, 6, 6)),
    "op_gather": _operator_program(_Gather, (1, 4, 6, 6)),
    "op_prelu": _operator_program(_Prelu, (1, 4, 6, 6)),
    "op_l2_norm": _operator_program(_Normalize, (1, 8, 16)),
    "op_embedding": (
        lambda seed=0: mlperf.build_model(_Embedding, lambda n, s: _token_ids(None, n, s), seed),
        _token_ids,
    ),
}


def _small_architecture(make, shape: tuple[int, ...]):
    """(factory, calibration data) of a public architecture built small (few channels, few blocks, a
    small image), so that its stored program stays well under 1 MB."""
    from functools import partial

    def calibration(name, n, seed=0):
        return mlperf.random_inputs(shape, "unit", n, seed)

    return (lambda seed=0: mlperf.build_model(make, partial(calibration, None), seed)), calibration


class _MobileNetV2Small(nn.Module):
    """MobileNetV2 (torchvision's InvertedResidual: ReLU6, linear bottleneck, `x + conv(x)`) with the
    first four of its seven stages at width 0.35 and a 128-channel last conv."""

    SETTING = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 2, 2), (6, 64, 2, 2))

    def __init__(self, width_mult: float = 0.35, last_channel: int = 128, num_classes: int = 10):
        super().__init__()
        channels = cnn.make_divisible(32 * width_mult)
        layers: list[nn.Module] = [cnn.ConvNormActivation(3, channels, stride=2, activation=nn.ReLU6)]
        for t, c, n, s in self.SETTING:
            out = cnn.make_divisible(c * width_mult)
            for i in range(n):
                layers.append(vision.InvertedResidual(channels, out, s if i == 0 else 1, t))
                channels = out
        layers.append(cnn.ConvNormActivation(channels, last_channel, kernel_size=1, activation=nn.ReLU6))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(p=0.2), nn.Linear(last_channel, num_classes))

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


class _SqueezeNetSmall(nn.Module):
    """SqueezeNet 1.1's layout (stem conv, ceil-mode max pools, Fire modules: 1x1 squeeze, then 1x1
    and 3x3 expands concatenated; conv classifier, ReLU, global average) at a quarter width."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        pool = lambda: nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True)  # noqa: E731
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2),
            nn.ReLU(inplace=True),
            pool(),
            cnn.Fire(16, 4, 16, 16),
            cnn.Fire(32, 4, 16, 16),
            pool(),
            cnn.Fire(32, 8, 32, 32),
            cnn.Fire(64, 8, 32, 32),
        )
        self.classifier = nn.Sequential(
            nn.Dropout(0.5), nn.Conv2d(64, num_classes, 1), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((1, 1))
        )

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)


class _EfficientNetSmall(nn.Module):
    """EfficientNet-B0's first stages at width 0.5 (MBConv: 1x1 expand, depthwise 3x3/5x5, squeeze-
    excite with SiLU and a sigmoid gate, linear projection, `+=` shortcut), a 96-channel SiLU head
    conv, pool, FC."""

    STAGES = ((1, 3, 1, 16, 8, 1), (6, 3, 2, 8, 16, 2), (6, 5, 2, 16, 24, 1))

    def __init__(self, num_classes: int = 10):
        super().__init__()
        layers: list[nn.Module] = [cnn.ConvNormActivation(3, 16, 3, 2, activation=nn.SiLU)]
        for ratio, kernel, stride, in_ch, out_ch, repeats in self.STAGES:
            for i in range(repeats):
                layers.append(
                    cnn.MBConv(ratio, kernel, stride if i == 0 else 1, in_ch if i == 0 else out_ch, out_ch, 0.0)
                )
        layers.append(cnn.ConvNormActivation(24, 96, 1, activation=nn.SiLU))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2, inplace=True), nn.Linear(96, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


# name -> (factory, calibration data): the MLPerf Tiny models, then small public architectures
# (each a few hundred KB as a stored .pt2) covering more TFLite operators.
ZOO = {
    "mobilenet_v2_small": _small_architecture(_MobileNetV2Small, (1, 3, 32, 32)),
    "squeezenet_small": _small_architecture(_SqueezeNetSmall, (1, 3, 34, 34)),
    "efficientnet_small": _small_architecture(_EfficientNetSmall, (1, 3, 32, 32)),
    "shufflenet_v2_tiny": _small_architecture(
        lambda: cnn.ShuffleNetV2(stage_repeats=(2, 2, 1), stage_channels=(16, 32, 64, 128, 128), num_classes=10),
        (1, 3, 32, 32),
    ),
    "mobilenet_v3_small_025": (
        _reduced("mobilenet_v3_small", lambda: cnn.MobileNetV3Small(width_mult=0.25, num_classes=10)),
        _reduced_calibration("mobilenet_v3_small"),
    ),
    **{name: (factory, mlperf.calibration_data) for name, factory in mlperf.ZOO.items()},
    **{
        name: (cnn.ZOO_CNN[name], cnn.calibration_data)
        for name in (
            "unet_nearest",
            "unet_transposed",
            "kws_conv1d",
            "lenet5_tanh",
            "binary_classifier",
            "mlp_log_softmax",
        )
    },
    "pnet": (vision.pnet, vision.calibration_data),
    # Full size, not stored (3-4 MB programs): `--out /tmp/x --models shufflenet_v2_x0_5`.
    **{name: (cnn.ZOO_CNN[name], cnn.calibration_data) for name in ("shufflenet_v2_x0_5", "efficientnet_b0")},
    "mobilenet_v2": _small_architecture(vision.MobileNetV2, (1, 3, 224, 224)),  # torchvision's, width 1.0, 1000 classes
    **{name: (seq.ZOO_TRANSFORMERS[name], seq.calibration_data) for name in ("vit_tiny", "kws_transformer")},
    **OPERATOR_PROGRAMS,
}


def quantized_program(name: str):
    """(quantizer, converted Q/DQ GraphModule, example inputs) of zoo model `name`."""
    from litert_torch.quantize import pt2e_quantizer
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    factory, calibration_data = ZOO[name]
    model, example = factory()
    module = torch.export.export(model, example, strict=True).module()
    softmax_as_litert_matches_it(module)
    quantizer = pt2e_quantizer.PT2EQuantizer().set_global(
        pt2e_quantizer.get_symmetric_quantization_config(is_per_channel=True)
    )
    prepared = prepare_pt2e(module, quantizer)
    with torch.no_grad():
        for sample in calibration_data(name, CALIBRATION_SAMPLES, seed=10):
            prepared(torch.from_numpy(sample[None]))
    return quantizer, convert_pt2e(prepared, fold_quantize=False), example


def softmax_as_litert_matches_it(module) -> None:
    """torch 2.13 exports F.softmax as aten.softmax.int; litert-torch's fixed-qparams annotator
    matches only aten._softmax.default (else the model ends in a float softmax)."""
    for node in module.graph.nodes:
        if node.target == torch.ops.aten.softmax.int:
            node.target = torch.ops.aten._softmax.default
            node.args = (node.args[0], node.args[1], False)
    module.recompile()


def int8_inputs(name: str, scale: float, zero_point: int, shape) -> np.ndarray:
    """[samples, *shape[1:]] int8 in PyTorch order: realistic floats quantized as TFLite's QUANTIZE
    does (float32 division, round half away from zero), then uniform random bytes."""
    floats = ZOO[name][1](name, REALISTIC_SAMPLES, seed=1000)
    v = floats / np.float32(scale)
    realistic = np.clip(np.trunc(np.where(v >= 0, v + 0.5, v - 0.5)) + zero_point, -128, 127)
    uniform = np.random.default_rng(2000).integers(-128, 128, size=(UNIFORM_SAMPLES, *shape[1:]))
    return np.concatenate([realistic, uniform]).astype(np.int8)


def softmax_input_index(tflite_path: Path) -> int | None:
    """The tensor index of the last SOFTMAX's input (the int8 logits), if the model has one."""
    from ai_edge_litert.interpreter import Interpreter

    ops = [op for op in Interpreter(model_path=str(tflite_path))._get_ops_details() if op["op_name"] == "SOFTMAX"]
    return int(ops[-1]["inputs"][0]) if ops else None


def run_tflm(tflite_path: Path, inputs_path: Path, outputs_path: Path, logits_index: int) -> None:
    """In this (child) process: TFLite Micro's outputs (and the tensor `logits_index`, -1: none)."""
    from tflite_micro.python.tflite_micro import runtime

    interpreter = runtime.Interpreter.from_file(
        str(tflite_path), arena_size=TFLM_ARENA_BYTES, intrepreter_config=runtime.InterpreterConfig.kPreserveAllTensors
    )
    outputs, logits = [], []
    for sample in np.load(inputs_path):
        interpreter.set_input(sample[None], 0)
        interpreter.invoke()
        outputs.append(interpreter.get_output(0).reshape(-1).copy())
        if logits_index >= 0:
            logits.append(interpreter.GetTensor(logits_index, 0)["tensor_data"].reshape(-1).copy())
    np.savez(outputs_path, outputs=np.stack(outputs), logits=np.stack(logits) if logits else np.zeros((0,), np.int8))


def make(name: str, out_dir: Path, work: Path) -> dict:
    import litert_torch
    from ai_edge_litert.interpreter import Interpreter
    from litert_torch.quantize.quant_config import QuantConfig

    quantizer, converted, example = quantized_program(name)
    tflite_path = work / f"{name}.tflite"
    litert_torch.convert(converted, example, quant_config=QuantConfig(pt2e_quantizer=quantizer)).export(
        str(tflite_path)
    )
    torch.export.save(torch.export.export(converted, example, strict=True), out_dir / f"{name}.pt2")

    interpreter = Interpreter(model_path=str(tflite_path))
    source, sink = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    if source["dtype"] not in (np.int8, np.int32) or sink["dtype"] != np.int8:
        raise SystemExit(f"{name}: the .tflite has {source['dtype']} -> {sink['dtype']} I/O, not int8")
    (out_scale,), (out_zp,) = sink["quantization_parameters"]["scales"], sink["quantization_parameters"]["zero_points"]
    if source["dtype"] == np.int32:  # token ids: the model's own, no qparams
        in_scale, in_zp = 0.0, 0
        inputs = ZOO[name][1](name, REALISTIC_SAMPLES + UNIFORM_SAMPLES, seed=1000).astype(np.int32)
    else:
        (in_scale,), (in_zp,) = (
            source["quantization_parameters"]["scales"],
            source["quantization_parameters"]["zero_points"],
        )
        inputs = int8_inputs(name, in_scale, in_zp, tuple(example[0].shape))
    np.save(work / f"{name}_in.npy", inputs)
    logits_index = softmax_input_index(tflite_path)
    subprocess.run(
        [
            sys.executable,
            __file__,
            "--run-tflm",
            str(tflite_path),
            str(work / f"{name}_in.npy"),
            str(work / f"{name}_out.npz"),
            str(-1 if logits_index is None else logits_index),
        ],
        check=True,
    )
    result = np.load(work / f"{name}_out.npz")
    np.savez_compressed(
        out_dir / f"{name}.npz",
        inputs=inputs,
        outputs=result["outputs"],
        logits=result["logits"],
        input_qparams=np.array([in_scale, in_zp], np.float64),
        output_qparams=np.array([out_scale, out_zp], np.float64),
    )
    return {"ops": [op["op_name"] for op in interpreter._get_ops_details()]}


def edgec_mismatches(name: str, out_dir: Path) -> str:
    """For the record: edgec's golden vs TFLite Micro, by default and with --tflite-compatible."""
    from tests.test_tflm_reference import golden_against_tflm

    return "; ".join(
        f"{reading}: {golden_against_tflm(out_dir, name, option)}"
        for reading, option in (("default", False), ("--tflite-compatible", True))
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--models", nargs="*", help=f"default: those tests/test_tflm_reference.py checks; any of {', '.join(ZOO)}"
    )
    parser.add_argument("--run-tflm", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_tflm:
        tflite, inputs, outputs, logits = args.run_tflm
        run_tflm(Path(tflite), Path(inputs), Path(outputs), int(logits))
        return
    if not args.models:
        from tests.test_tflm_reference import MODELS

        args.models = list(MODELS)
    args.out.mkdir(parents=True, exist_ok=True)
    record = {"packages": {p: metadata.version(p) for p in PEER_PACKAGES}, "models": {}}
    with tempfile.TemporaryDirectory(prefix="tflm-reference-") as tmp:
        for name in args.models:
            try:
                record["models"][name] = make(name, args.out, Path(tmp))
            except (SystemExit, Exception) as error:  # one model the peer stack cannot take: say so, go on
                print(f"{name}: not made: {type(error).__name__}: {str(error).splitlines()[0][:300]}", flush=True)
                continue
            try:
                print(f"{name}: {edgec_mismatches(name, args.out)}", flush=True)
            except Exception as error:
                print(f"{name}: edgec: {type(error).__name__}: {str(error).splitlines()[0][:300]}", flush=True)
    versions = args.out / "versions.json"
    if versions.exists():  # a run over some models keeps the others' record
        record["models"] = {**json.loads(versions.read_text())["models"], **record["models"]}
    versions.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    if args.out == OUT:
        from tests.test_tflm_reference import ARCHITECTURES, covered_operators

        operators = covered_operators(args.out)
        print(
            f"tests/data/tflm: {len(ARCHITECTURES)} architectures, {len(operators)} TFLite operators:",
            ", ".join(sorted(operators)),
        )


if __name__ == "__main__":
    main()
