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
    return {"distribution": rng.choice(("normal", "normal", "uniform", "positive")),
            "offset": round(rng.uniform(-3, 3), 3) if rng.random() < 0.5 else 0.0,
            "scale": float(f"{10 ** rng.uniform(-2, 2):.3g}"),
            "calibration": CALIBRATION_SAMPLES, "verification": VERIFICATION_SAMPLES}


def generate(seed: int) -> ModelSpec:
    rng = random.Random(f"edgec-fuzz-{GENERATOR_VERSION}-{seed}")
    input_shape = sample_input_shape(rng)
    code, shape, layers = Code(), input_shape, []
    for _ in range(rng.randint(1, MAX_BODY_LAYERS)):
        layer = _next_layer(rng, code, shape, [f for f in FAMILIES.values() if rank(shape) in f.ranks])
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
    """All layers rendered in order (Unfit if one does not fit its input)."""
    code, shape = Code(), spec.input_shape
    for layer in spec.layers:
        family = FAMILIES[layer.family]
        if rank(shape) not in family.ranks:
            raise Unfit(f"{layer.family} does not take a rank-{rank(shape)} input")
        shape = family.render(code, layer.params, shape)
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
    label = f"seed {spec.seed}" + (f" ({spec.note})" if spec.note else "")
    return MODEL_FILE.format(
        label=label, version=spec.version, header=header.rstrip(), seed=spec.seed,
        input_shape=(1, *spec.input_shape), data=repr(spec.data),
        init=_indent(init or ["pass"], 8), forward=_indent(code.forward, 8), output=code.x,
        spec=pprint.pformat(spec.to_literal(), width=100, sort_dicts=False))


def _indent(lines: list[str], spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in lines)


from tests.fuzz import families as _families  # noqa: E402,F401  (registers the families)
