"""The model generator's engine: a model is an input shape, a list of layers and a recipe for its
input data, all drawn from one seed; it renders to a self-contained Python file that edgec
compiles (`file.py:factory`) and that doubles as the reproducer.

A layer is (family name, parameters). The families (families.py) sample parameters that fit the
shape they are given and render them into code; the engine only picks families, keeps the models
small (a MAC budget) and writes the file. Everything is deterministic from the seed and
GENERATOR_VERSION: change the version whenever a change to the engine or a family makes an old
seed produce a different model.
"""

from __future__ import annotations

import copy
import pprint
import random
from dataclasses import asdict, dataclass, field

GENERATOR_VERSION = 4

MAX_BODY_LAYERS = 7
MAX_MACS = 1_500_000  # keeps every model at about a second end to end, and QEMU runs short
SAMPLE_TRIES = 30
HEAD_PROBABILITY = 0.3  # a final "head" layer (softmax) after the body
CALIBRATION_SAMPLES = 16
VERIFICATION_SAMPLES = 8


class Unfit(Exception):
    """A layer's parameters do not fit its input shape. Families sample parameters for the shape
    they are given, so this happens only when the minimiser removes or changes an earlier layer."""


@dataclass
class Layer:
    family: str
    params: dict


@dataclass
class ModelSpec:
    seed: int
    input_shape: tuple  # (C, H, W); the batch is 1
    layers: list[Layer]
    data: dict  # how the input samples are drawn (see sample_data)
    version: int = GENERATOR_VERSION
    note: str = ""  # e.g. "minimised from seed 17"
    mode: str = "int8"  # MODES: how the model is built and checked
    int16: list = field(default_factory=list)  # layers (indices) whose modules take int16 activations
    outputs: list = field(default_factory=list)  # layers (indices) whose output is also a model output

    def to_literal(self) -> dict:
        return asdict(self)

    @classmethod
    def from_literal(cls, value: dict) -> "ModelSpec":
        value = dict(value)
        value["layers"] = [Layer(**layer) for layer in value["layers"]]
        value["input_shape"] = tuple(value["input_shape"])
        return cls(**value)


@dataclass
class Code:
    """What layers render into: module constructors (self.mN = ...), set-up statements run
    under torch.no_grad() once all modules exist (weight scaling, BN statistics), and the
    forward pass as straight-line assignments. `x` names the current activation."""

    modules: list = field(default_factory=list)
    setup: list = field(default_factory=list)
    forward: list = field(default_factory=list)
    x: str = "x"
    macs: int = 0
    outputs: list = field(default_factory=list)  # what forward returns (render)
    int16_layers: list = field(default_factory=list)  # modules built with --int16-layers (render)

    def module(self, constructor: str) -> str:
        name = f"m{len(self.modules)}"
        self.modules.append((name, constructor))
        return f"self.{name}"

    def let(self, expression: str) -> str:
        """Assign `expression` to a fresh variable, which becomes the current activation."""
        name = f"x{len(self.forward)}"
        self.forward.append(f"{name} = {expression}")
        self.x = name
        return name


class Family:
    """One operator family. Subclasses set `name`, `ranks` and `weight` and implement sample
    and render; register them with families.register."""

    name = ""
    ranks: tuple[int, ...] = (4,)  # input ranks accepted: 4 is [1, C, H, W], 3 is [1, T, F], 2 is [1, F]
    weight = 1.0  # relative frequency among the families that accept the current input
    head = False  # may be appended as the model's last layer (after the body)
    int16 = False  # its modules have int16 kernels (the int16 mode may build them with --int16-layers)

    def sample(self, rng: random.Random, shape: tuple) -> dict | None:
        """Parameters that fit an input of `shape` ((C, H, W) or (F,)), or None if this family
        cannot follow such an input. Only forms the README lists as supported: the runner counts
        a refusal as a failure."""
        raise NotImplementedError

    def render(self, code: Code, params: dict, shape: tuple) -> tuple:
        """Append the layer to `code` (input code.x); return the output shape. Raise Unfit if
        `params` do not fit `shape`."""
        raise NotImplementedError

    def simpler(self, params: dict):
        """Simpler variants of `params`, for the minimiser: by default every optional feature
        (activation, batch norm, extreme weights, explicit padding) dropped one at a time."""
        for key in ("act", "bn", "weights", "pre_pad", "post_act"):
            if params.get(key) is not None:
                yield {**params, key: None}


FAMILIES: dict[str, Family] = {}


def register(family: Family) -> Family:
    if family.name in FAMILIES:
        raise ValueError(f"family {family.name!r} registered twice")
    FAMILIES[family.name] = family
    return family


def rank(shape: tuple) -> int:
    return len(shape) + 1


def sample_input_shape(rng: random.Random) -> tuple:
    side = (1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 16, 17, 24)
    h = rng.choice(side)
    w = h if rng.random() < 0.5 else rng.choice(side)
    return (rng.choice((1, 1, 2, 3, 3, 3)), h, w)


def sample_data(rng: random.Random) -> dict:
    """Input samples are offset + scale * noise: non-zero means and scales far from 1 move the
    input zero point and scale away from the easy case."""
    return {
        "distribution": rng.choice(("normal", "normal", "uniform", "positive")),
        "offset": round(rng.uniform(-3, 3), 3) if rng.random() < 0.5 else 0.0,
        "scale": float(f"{10 ** rng.uniform(-2, 2):.3g}"),
        "calibration": CALIBRATION_SAMPLES,
        "verification": VERIFICATION_SAMPLES,
    }


# The fuzzer's modes (python -m tests.fuzz run --mode): int8 models; int16, some layers' modules
# built with --int16-layers (only families with int16 kernels, Family.int16); stream, a recurrent
# model over a [1, T, F] input built with --stream (one time step per invoke) and checked as a
# stream against the whole-sequence model; multi, a model returning some intermediate layers'
# outputs besides its last.
MODES = ("int8", "int16", "stream", "multi")
INT16_PROBABILITY = 0.6  # each int16-capable layer's chance to be int16 (at least one is)
STREAM_STEPS = (1, 2, 3, 4, 5, 8, 12, 16)
# Families whose output may be a view of their input: an extra output is taken only after a layer
# of another family with another such layer after it (edgec refuses a model returning one tensor
# twice or its input unchanged).
VIEW_FAMILIES = ("identity", "flatten", "tokens", "unsqueeze", "movement")


def generate(seed: int, mode: str = "int8") -> ModelSpec:
    if mode not in MODES:
        raise ValueError(f"unknown fuzz mode {mode!r} (one of {', '.join(MODES)})")
    rng = random.Random(f"edgec-fuzz-{GENERATOR_VERSION}-{seed}" + ("" if mode == "int8" else f"-{mode}"))
    for _ in range(SAMPLE_TRIES):
        spec = _generate_stream(rng, seed) if mode == "stream" else _generate(rng, seed)
        spec.mode = mode
        if mode == "int16":
            capable = [i for i, layer in enumerate(spec.layers) if FAMILIES[layer.family].int16]
            if not capable:
                continue
            spec.int16 = [i for i in capable if rng.random() < INT16_PROBABILITY] or [rng.choice(capable)]
        if mode == "multi":
            computes = [FAMILIES[layer.family].name not in VIEW_FAMILIES for layer in spec.layers]
            branches = [i for i in range(len(spec.layers) - 1) if computes[i] and any(computes[i + 1 :])]
            if not branches:
                continue
            spec.outputs = sorted(rng.sample(branches, min(len(branches), rng.choice((1, 1, 2)))))
        return spec
    raise RuntimeError(f"seed {seed}: no {mode} model in {SAMPLE_TRIES} tries")


def _generate_stream(rng: random.Random, seed: int) -> ModelSpec:
    """A recurrent layer reading the model input [1, T, F], read at its last step (what --stream
    builds), then a rank-2 body (and maybe a head)."""
    from tests.fuzz.families import TOKEN_FEATURES

    input_shape = (rng.choice(STREAM_STEPS), rng.choice(TOKEN_FEATURES))
    recurrent = FAMILIES["recurrent"]
    params = {**recurrent.sample(rng, input_shape), "output": rng.choice(("last", "hidden"))}
    layers = [Layer("recurrent", params)]
    code = Code()
    shape = recurrent.render(code, params, input_shape)
    return _grow(rng, seed, input_shape, code, shape, layers, rng.randint(0, 3), rank_limit=2)


def _generate(rng: random.Random, seed: int) -> ModelSpec:
    input_shape = sample_input_shape(rng)
    return _grow(rng, seed, input_shape, Code(), input_shape, [], rng.randint(1, MAX_BODY_LAYERS))


def _grow(
    rng: random.Random,
    seed: int,
    input_shape: tuple,
    code: Code,
    shape: tuple,
    layers: list,
    count: int,
    rank_limit: int = 4,
) -> ModelSpec:
    """`count` more body layers after `layers`, maybe a head; the input data's recipe. Only
    families whose outputs stay within `rank_limit` (a stream's body stays [1, F]: a second
    recurrent layer over a split vector does not read the model input)."""
    for _ in range(count):
        layer = _next_layer(
            rng,
            code,
            shape,
            [f for f in FAMILIES.values() if rank(shape) in f.ranks and (rank_limit >= 4 or f.name != "tokens")],
        )
        if layer is None:
            break
        layers.append(layer)
        shape = FAMILIES[layer.family].render(code, layer.params, shape)
    if rng.random() < HEAD_PROBABILITY:
        layer = _next_layer(rng, code, shape, [f for f in FAMILIES.values() if f.head and rank(shape) in f.ranks])
        if layer is not None:
            layers.append(layer)
    return ModelSpec(seed, input_shape, layers, sample_data(rng))


def _next_layer(rng: random.Random, code: Code, shape: tuple, candidates: list[Family]) -> Layer | None:
    """A layer of a family drawn by weight whose parameters fit `shape` and the MAC budget."""
    for _ in range(SAMPLE_TRIES):
        if not candidates:
            return None
        family = rng.choices(candidates, weights=[f.weight for f in candidates])[0]
        params = family.sample(rng, shape)
        if params is None:
            continue
        trial = copy.deepcopy(code)
        family.render(trial, params, shape)
        if trial.macs <= MAX_MACS:
            return Layer(family.name, params)
    return None


def render(spec: ModelSpec) -> Code:
    """All layers rendered in order (Unfit if one does not fit its input); code.outputs are the
    model's outputs (spec.outputs' layers' and the last), code.int16_layers the modules of
    spec.int16's layers."""
    code, shape, results, modules = Code(), spec.input_shape, [], []
    for layer in spec.layers:
        family = FAMILIES[layer.family]
        if rank(shape) not in family.ranks:
            raise Unfit(f"{layer.family} does not take a rank-{rank(shape)} input")
        before = len(code.modules)
        shape = family.render(code, layer.params, shape)
        results.append(code.x)
        modules.append([name for name, _ in code.modules[before:]])
    if any(i >= len(spec.layers) - 1 for i in spec.outputs) or any(i >= len(spec.layers) for i in spec.int16):
        raise Unfit("an extra output or an int16 layer beyond the model's layers")
    code.outputs = [results[i] for i in spec.outputs] + [code.x]
    code.int16_layers = [name for i in spec.int16 for name in modules[i]]
    if spec.int16 and not code.int16_layers:
        raise Unfit("the int16 layers have no modules")
    return code


MODEL_FILE = '''"""edgec fuzz model {label}, generator version {version}.
{header}
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = {seed}
INPUT_SHAPE = {input_shape}
DATA = {data}
BUILD = {build}  # edgec build options: int16_layers (--int16-layers), stream (--stream)


class FuzzModel(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, x):
{forward}
        return {output}


def factory():
    torch.manual_seed(SEED)
    return FuzzModel().eval(), (torch.zeros(INPUT_SHAPE),)


def samples(stream: str) -> np.ndarray:
    """float32 [N, C, H, W] inputs, "calibration" or "verification": offset + scale * noise; the
    last quarter of the verification samples reach 1.5 times further than the calibration."""
    count = DATA[stream]
    rng = np.random.default_rng([SEED, 0 if stream == "calibration" else 1])
    shape = (count, *INPUT_SHAPE[1:])
    noise = {{"normal": lambda: rng.standard_normal(shape), "uniform": lambda: rng.uniform(-1, 1, shape),
             "positive": lambda: np.abs(rng.standard_normal(shape))}}[DATA["distribution"]]()
    if stream == "verification":
        noise[count - count // 4:] *= 1.5
    return (DATA["offset"] + DATA["scale"] * noise).astype(np.float32)


SPEC = {spec}

if __name__ == "__main__":
    import sys

    from tests.fuzz.runner import rerun_main
    sys.exit(rerun_main(__file__))
'''


def model_source(spec: ModelSpec, header: str = "") -> str:
    """The model as a Python file: `factory()` for edgec, `samples()` for its data, `SPEC` for the
    minimiser; run as a script from the repository root it checks itself (runner.rerun_main)."""
    code = render(spec)
    init = [f"self.{name} = {constructor}" for name, constructor in code.modules]
    if code.setup:
        init += ["with torch.no_grad():", *(f"    {line}" for line in code.setup)]
    label = (
        f"seed {spec.seed}"
        + (f" ({spec.note})" if spec.note else "")
        + ("" if spec.mode == "int8" else f", {spec.mode} mode")
    )
    build = {
        **({"int16_layers": code.int16_layers} if code.int16_layers else {}),
        **({"stream": True} if spec.mode == "stream" else {}),
    }
    return MODEL_FILE.format(
        label=label,
        version=spec.version,
        header=header.rstrip(),
        seed=spec.seed,
        input_shape=(1, *spec.input_shape),
        data=repr(spec.data),
        build=repr(build),
        init=_indent(init or ["pass"], 8),
        forward=_indent(code.forward, 8),
        output=", ".join(code.outputs),
        spec=pprint.pformat(spec.to_literal(), width=100, sort_dicts=False),
    )


def _indent(lines: list[str], spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in lines)


from tests.fuzz import families as _families  # noqa: E402,F401  (registers the families)
