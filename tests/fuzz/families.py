"""The operator families the fuzzer builds models from: every operator form the README lists as
supported (a refusal of one is a failure of the run).

To add a family (say, elementwise mul once edgec lowers it): subclass generator.Family, give it a
`name`, the input `ranks` it takes (4: [1, C, H, W]; 2: [1, F]) and a `weight`, implement
`sample(rng, shape)` (parameters that fit `shape`, using only forms the README lists; None when the
family cannot follow that input) and `render(code, params, shape)` (append modules and forward
statements to `code`, return the output shape, raise Unfit when the parameters do not fit), then
call `register(YourFamily())` at the bottom of this file. Parameters must be plain literals
(ints, floats, strings, lists, dicts, None): they are stored in every reproducer. The helpers
below (channel counts, activations, extreme weights, batch norm, conv geometry) are shared.
Bump generator.GENERATOR_VERSION with any change that alters the model an old seed gives.
"""

from __future__ import annotations

import random

from tests.fuzz.generator import Code, Family, Unfit, register

# Channel counts around the kernels' SIMD widths (4 for SMLAD pairs, 16 for Helium).
CHANNELS = (1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33)
FEATURES = CHANNELS + (10, 64)
MAX_LAYER_MACS = 600_000


# -- shared pieces ------------------------------------------------------------------------------


def sample_activation(rng: random.Random, none_probability: float = 0.4) -> dict | None:
    """A ReLU / ReLU6 / hardtanh / clamp in one of its spellings, or None."""
    if rng.random() < none_probability:
        return None
    kind = rng.choice(("relu", "relu", "relu6", "hardtanh", "clamp", "clamp_min", "clamp_max"))
    act = {"kind": kind, "style": rng.randrange(3)}
    if kind in ("hardtanh", "clamp"):
        low = rng.choice((-2.0, -1.0, -0.5, 0.0, 0.25))
        act["bounds"] = [low, low + rng.choice((0.5, 1.0, 2.0, 4.0, 6.0))]
    elif kind == "clamp_min":
        act["bounds"] = [rng.choice((-1.0, -0.25, 0.0, 0.5)), None]
    elif kind == "clamp_max":
        act["bounds"] = [None, rng.choice((-0.5, 0.0, 0.5, 1.0, 3.0))]
    return act


def render_activation(code: Code, act: dict | None) -> None:
    if act is None:
        return
    x, kind, low, high = code.x, act["kind"], *(act.get("bounds") or (None, None))
    keywords = ", ".join(f"{k}={v}" for k, v in (("min", low), ("max", high)) if v is not None)
    spellings = {
        "relu": (lambda: f"F.relu({x})", lambda: f"torch.relu({x})", lambda: f"{code.module('nn.ReLU()')}({x})"),
        "relu6": (
            lambda: f"F.relu6({x})",
            lambda: f"F.hardtanh({x}, 0.0, 6.0)",
            lambda: f"{code.module('nn.ReLU6()')}({x})",
        ),
        "hardtanh": (
            lambda: f"F.hardtanh({x}, {low}, {high})",
            lambda: f"torch.clamp({x}, {low}, {high})",
            lambda: f"{code.module(f'nn.Hardtanh({low}, {high})')}({x})",
        ),
        "clamp": (
            lambda: f"torch.clamp({x}, {keywords})",
            lambda: f"{x}.clamp({keywords})",
            lambda: f"torch.clamp({x}, {low}, {high})",
        ),
    }
    code.let(spellings["clamp" if kind.startswith("clamp") else kind][act["style"]]())


def sample_weights(rng: random.Random) -> dict | None:
    """Extreme weights, or None for PyTorch's default initialisation: the whole filter scaled
    tiny or huge, one output channel scaled apart from the others, an all-zero output channel,
    a large bias."""
    if rng.random() < 0.6:
        return None
    extremes = {}
    if rng.random() < 0.5:
        extremes["scale"] = rng.choice((1e-6, 1e-4, 1e-2, 1e2, 1e3))
    if rng.random() < 0.3:
        extremes["channel_scale"] = [rng.randrange(64), rng.choice((1e-4, 1e-2, 1e2))]
    if rng.random() < 0.4:
        extremes["zero_channel"] = rng.randrange(64)
    if rng.random() < 0.2:
        extremes["bias_scale"] = rng.choice((10.0, 100.0))
    return extremes or {"zero_channel": 0}


def render_weights(
    code: Code, module: str, extremes: dict | None, out_channels: int, bias: bool, channel_index: str = "[{}]"
) -> None:
    """`channel_index` selects one output channel of the weight ("[:, {}]" for a transposed
    convolution, whose weight is [C_in, C_out / groups, ...]); out_channels counts them."""
    if not extremes:
        return
    if "scale" in extremes:
        code.setup.append(f"{module}.weight.mul_({extremes['scale']!r})")
    if "channel_scale" in extremes:
        channel, scale = extremes["channel_scale"]
        code.setup.append(f"{module}.weight{channel_index.format(channel % out_channels)}.mul_({scale!r})")
    if "zero_channel" in extremes:
        code.setup.append(f"{module}.weight{channel_index.format(extremes['zero_channel'] % out_channels)}.zero_()")
    if "bias_scale" in extremes and bias:
        code.setup.append(f"{module}.bias.mul_({extremes['bias_scale']!r})")


def sample_batch_norm(rng: random.Random, probability: float = 0.25) -> dict | None:
    """A batch norm (folded into the conv or linear before it), sometimes with an extreme
    channel: a tiny or huge running variance, or a zero gamma (a zero channel after folding)."""
    if rng.random() >= probability:
        return None
    affine = rng.random() < 0.8
    extremes = ("tiny_var", "huge_var") + (("zero_gamma",) if affine else ())
    return {
        "affine": affine,
        "extreme": rng.choice(extremes) if rng.random() < 0.3 else None,
        "channel": rng.randrange(64),
    }


def render_batch_norm(code: Code, bn: dict | None, channels: int, dims: int) -> None:
    """BatchNorm{dims}d with random running statistics (and affine parameters, some negative)."""
    if bn is None:
        return
    module = code.module(f"nn.BatchNorm{dims}d({channels}" + ("" if bn["affine"] else ", affine=False") + ")")
    code.setup += [f"{module}.running_mean.uniform_(-1.0, 1.0)", f"{module}.running_var.uniform_(0.25, 4.0)"]
    if bn["affine"]:
        code.setup += [f"{module}.weight.uniform_(-1.5, 1.5)", f"{module}.bias.uniform_(-1.0, 1.0)"]
    channel = bn.get("channel", 0) % channels
    code.setup += {
        None: [],
        "tiny_var": [f"{module}.running_var[{channel}] = 1e-6"],
        "huge_var": [f"{module}.running_var[{channel}] = 1e6"],
        "zero_gamma": [f"{module}.weight[{channel}] = 0.0"],
    }[bn.get("extreme")]
    code.let(f"{module}({code.x})")


def conv_out(size: int, kernel: int, stride: int, pad_total: int, dilation: int) -> int:
    return (size + pad_total - dilation * (kernel - 1) - 1) // stride + 1


def pool_out(size: int, kernel: int, stride: int, pad: int, ceil_mode: bool) -> int:
    """PyTorch's pooling output length (a ceil-mode window must start inside the input or its
    left padding)."""
    span = size + 2 * pad - kernel
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _pair_text(pair) -> str:
    return str(pair[0]) if pair[0] == pair[1] else f"({pair[0]}, {pair[1]})"


def _kwargs(**values) -> str:
    """', k=v' for every argument that is not None (PyTorch defaults stay implicit, so the
    exported graph carries the short argument lists a user's model does)."""
    return "".join(f", {k}={v}" for k, v in values.items() if v is not None)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


# -- convolutions -----------------------------------------------------------------------------


def sample_conv_geometry(rng: random.Random, h: int, w: int, *, tall_kernels: bool = False) -> dict | None:
    """Kernel, stride, dilation, symmetric padding and an optional asymmetric F.pad for an
    H x W input, with a non-empty output."""
    for _ in range(20):
        kh = rng.choice((1, 1, 2, 3, 3, 3, 4, 5))
        if tall_kernels and rng.random() < 0.1:
            kh = rng.choice((7, 16, 17))
        kw = kh if rng.random() < 0.75 else rng.choice((1, 2, 3, 5))
        stride = rng.choice((1, 1, 1, 2, 2, 3))
        strides = [stride, stride if rng.random() < 0.85 else rng.choice((1, 2, 3))]
        dilation = rng.choice((1, 1, 1, 1, 2, 3))
        dilations = [dilation, dilation if rng.random() < 0.85 else rng.choice((1, 2))]
        padding = [rng.randint(0, dilations[0] * (kh - 1)), rng.randint(0, dilations[1] * (kw - 1))]
        if rng.random() < 0.3:
            padding = [dilations[0] * (kh - 1) // 2, dilations[1] * (kw - 1) // 2]  # "same" for odd kernels
        pre_pad = [rng.randint(0, 2) for _ in range(4)] if rng.random() < 0.2 else None
        geometry = {
            "kernel": [kh, kw],
            "stride": strides,
            "padding": padding,
            "dilation": dilations,
            "pre_pad": pre_pad,
        }
        if min(conv_output_hw(geometry, h, w)) >= 1:
            return geometry
    return None


def conv_output_hw(p: dict, h: int, w: int) -> tuple[int, int]:
    left, right, top, bottom = p["pre_pad"] or (0, 0, 0, 0)
    return (
        conv_out(h, p["kernel"][0], p["stride"][0], top + bottom + 2 * p["padding"][0], p["dilation"][0]),
        conv_out(w, p["kernel"][1], p["stride"][1], left + right + 2 * p["padding"][1], p["dilation"][1]),
    )


def render_conv(code: Code, p: dict, shape: tuple, groups: int, out_channels: int) -> tuple:
    """An nn.Conv2d (after an F.pad if p["pre_pad"]), its extreme weights, batch norm and
    activation. Shared by the conv and depthwise families and the add family's branches."""
    c, h, w = shape
    oh, ow = conv_output_hw(p, h, w)
    if min(oh, ow) < 1 or c % groups or out_channels % groups:
        raise Unfit(f"conv {p} on {shape}")
    if p.get("pre_pad"):
        code.let(f"F.pad({code.x}, {tuple(p['pre_pad'])})")
    module = code.module(
        f"nn.Conv2d({c}, {out_channels}, {_pair_text(p['kernel'])}"
        + _kwargs(
            stride=None if p["stride"] == [1, 1] else _pair_text(p["stride"]),
            padding=None if p["padding"] == [0, 0] else _pair_text(p["padding"]),
            dilation=None if p["dilation"] == [1, 1] else _pair_text(p["dilation"]),
            groups=None if groups == 1 else groups,
            bias=None if p["bias"] else False,
        )
        + ")"
    )
    render_weights(code, module, p.get("weights"), out_channels, p["bias"])
    code.let(f"{module}({code.x})")
    code.macs += oh * ow * out_channels * p["kernel"][0] * p["kernel"][1] * (c // groups)
    render_batch_norm(code, p.get("bn"), out_channels, 2)
    render_activation(code, p.get("act"))
    return (out_channels, oh, ow)


def _conv_macs(p: dict, shape: tuple, groups: int, out_channels: int) -> int:
    oh, ow = conv_output_hw(p, shape[1], shape[2])
    return oh * ow * out_channels * p["kernel"][0] * p["kernel"][1] * (shape[0] // groups)


class Conv(Family):
    """nn.Conv2d, ungrouped or grouped (a group count dividing both channel counts)."""

    name = "conv"
    int16 = True
    weight = 4.0

    def sample(self, rng, shape):
        c, h, w = shape
        for _ in range(10):
            geometry = sample_conv_geometry(rng, h, w)
            if geometry is None:
                return None
            out_channels = rng.choice(CHANNELS)
            groups = 1
            if rng.random() < 0.2:
                common = [d for d in _divisors(c) if d > 1 and d < c and out_channels % d == 0]
                groups = rng.choice(common) if common else 1
            p = {
                **geometry,
                "out_channels": out_channels,
                "groups": groups,
                "bias": rng.random() < 0.7,
                "bn": sample_batch_norm(rng),
                "act": sample_activation(rng),
                "weights": sample_weights(rng),
            }
            if _conv_macs(p, shape, groups, out_channels) <= MAX_LAYER_MACS:
                return p
        return None

    def render(self, code, p, shape):
        return render_conv(code, p, shape, p["groups"], p["out_channels"])


class Depthwise(Family):
    """Depthwise nn.Conv2d (groups = input channels) with a channel multiplier; now and then a
    filter taller than the packed kernels' 16 rows."""

    name = "depthwise"
    int16 = True
    weight = 2.0

    def sample(self, rng, shape):
        c, h, w = shape
        geometry = sample_conv_geometry(rng, h, w, tall_kernels=True)
        if geometry is None:
            return None
        return {
            **geometry,
            "multiplier": rng.choice((1, 1, 1, 2, 3)),
            "bias": rng.random() < 0.7,
            "bn": sample_batch_norm(rng),
            "act": sample_activation(rng),
            "weights": sample_weights(rng),
        }

    def render(self, code, p, shape):
        return render_conv(code, p, shape, shape[0], shape[0] * p["multiplier"])


# -- pooling ------------------------------------------------------------------------------------


class Pool(Family):
    """max_pool2d / avg_pool2d: kernel, stride, padding, ceil_mode, PyTorch's average divisors
    (count_include_pad, divisor_override); functional or module spelling; now and then a fused
    activation."""

    name = "pool"
    weight = 2.0

    def sample(self, rng, shape):
        _, h, w = shape
        for _ in range(20):
            kind = rng.choice(("max", "avg"))
            k = rng.choice((1, 2, 2, 3, 3, 4, 5))
            kernel = [k, k if rng.random() < 0.8 else rng.choice((1, 2, 3))]
            stride = None if rng.random() < 0.4 else [rng.randint(1, max(kernel) + 1), 0]
            if stride is not None:
                stride[1] = stride[0] if rng.random() < 0.8 else rng.randint(1, 3)
            padding = [rng.randint(0, kernel[0] // 2), rng.randint(0, kernel[1] // 2)] if rng.random() < 0.4 else [0, 0]
            p = {
                "kind": kind,
                "kernel": kernel,
                "stride": stride,
                "padding": padding,
                "ceil_mode": rng.random() < 0.3,
                "module": rng.random() < 0.3,
                "count_include_pad": rng.random() < 0.5,
                "divisor_override": rng.choice((1, 3, 7, 16)) if kind == "avg" and rng.random() < 0.1 else None,
                "act": sample_activation(rng, none_probability=0.85),
            }
            if min(self._out_hw(p, h, w)) >= 1:
                return p
        return None

    @staticmethod
    def _out_hw(p, h, w):
        stride = p["stride"] or p["kernel"]
        return tuple(
            pool_out(size, p["kernel"][i], stride[i], p["padding"][i], p["ceil_mode"]) for i, size in enumerate((h, w))
        )

    def render(self, code, p, shape):
        c, h, w = shape
        if min(self._out_hw(p, h, w)) < 1 or any(2 * p["padding"][i] > p["kernel"][i] for i in range(2)):
            raise Unfit(f"pool {p} on {shape}")
        args = _pair_text(p["kernel"]) + _kwargs(
            stride=None if p["stride"] is None else _pair_text(p["stride"]),
            padding=None if p["padding"] == [0, 0] else _pair_text(p["padding"]),
            ceil_mode=p["ceil_mode"] or None,
            count_include_pad=False if p["kind"] == "avg" and not p["count_include_pad"] else None,
            divisor_override=p.get("divisor_override") if p["kind"] == "avg" else None,
        )
        if p["module"]:
            code.let(
                f"{code.module(('nn.MaxPool2d(' if p['kind'] == 'max' else 'nn.AvgPool2d(') + args + ')')}({code.x})"
            )
        else:
            code.let(f"F.{p['kind']}_pool2d({code.x}, {args})")
        render_activation(code, p.get("act"))
        return (c, *self._out_hw(p, h, w))


class GlobalPool(Family):
    """adaptive_avg_pool2d to any size up to H x W (PyTorch's windows, uneven where the size does
    not divide), or mean over H and W (keepdim or not)."""

    name = "global_pool"
    weight = 1.0

    def sample(self, rng, shape):
        _, h, w = shape
        if rng.random() < 0.5:
            size = [1, 1] if rng.random() < 0.5 else [rng.randint(1, h), rng.randint(1, w)]
            return {"kind": "adaptive", "size": size, "module": rng.random() < 0.3}
        return {
            "kind": "mean",
            "dims": rng.choice(([2, 3], [-1, -2], [3, 2], [-2, -1])),
            "keepdim": rng.random() < 0.4,
            "style": rng.randrange(2),
        }

    def render(self, code, p, shape):
        c, h, w = shape
        if p["kind"] == "adaptive":
            oh, ow = p["size"]
            if oh > h or ow > w:
                raise Unfit(f"adaptive pool to {p['size']} from {h}x{w}")
            size = _pair_text(p["size"])
            call = (
                f"{code.module(f'nn.AdaptiveAvgPool2d({size})')}({code.x})"
                if p["module"]
                else f"F.adaptive_avg_pool2d({code.x}, {size})"
            )
            code.let(call)
            return (c, oh, ow)
        dims = tuple(p["dims"])
        keep = _kwargs(keepdim=p["keepdim"] or None)
        code.let((f"{code.x}.mean({dims}{keep})", f"torch.mean({code.x}, dim={list(dims)}{keep})")[p["style"]])
        return (c, 1, 1) if p["keepdim"] else (c,)


# -- flatten, linear, unsqueeze ------------------------------------------------------------------


def sample_linear(rng: random.Random, out_features: int | None = None) -> dict:
    return {
        "out_features": out_features or rng.choice(FEATURES),
        "bias": rng.random() < 0.75,
        "bn": sample_batch_norm(rng, 0.15),
        "act": sample_activation(rng),
        "weights": sample_weights(rng),
    }


def render_linear(code: Code, p: dict, features: int) -> tuple:
    module = code.module(
        f"nn.Linear({features}, {p['out_features']}" + _kwargs(bias=None if p["bias"] else False) + ")"
    )
    render_weights(code, module, p.get("weights"), p["out_features"], p["bias"])
    code.let(f"{module}({code.x})")
    code.macs += features * p["out_features"]
    render_batch_norm(code, p.get("bn"), p["out_features"], 1)
    render_activation(code, p.get("act"))
    return (p["out_features"],)


class Flatten(Family):
    """[1, C, H, W] -> [1, C*H*W] (flatten / view / reshape / nn.Flatten / squeeze), then nothing,
    one linear layer, or two whose outputs are added."""

    name = "flatten"
    weight = 1.0
    STYLES = (
        "torch.flatten({x}, 1)",
        "{x}.flatten(1)",
        "{x}.view({x}.size(0), -1)",
        "{x}.reshape(1, -1)",
        "{module}({x})",
    )

    def sample(self, rng, shape):
        c, h, w = shape
        heads = rng.choice((0, 1, 1, 1, 2))
        style = rng.randrange(len(self.STYLES) + (1 if h * w == 1 else 0))
        out_features = rng.choice(FEATURES)
        if c * h * w * heads * out_features > MAX_LAYER_MACS:
            return None
        return {
            "style": style,
            "heads": [sample_linear(rng, out_features) for _ in range(heads)],
            "post_act": sample_activation(rng, 0.6) if heads == 2 else None,
        }

    def render(self, code, p, shape):
        c, h, w = shape
        if p["style"] < len(self.STYLES):
            module = code.module("nn.Flatten()") if "{module}" in self.STYLES[p["style"]] else None
            code.let(self.STYLES[p["style"]].format(x=code.x, module=module))
        elif h * w == 1:
            code.let(f"{code.x}.squeeze(3).squeeze(2)")
        else:
            raise Unfit("squeeze needs H = W = 1")
        features, outputs = c * h * w, []
        flat = code.x
        for head in p["heads"]:
            code.x = flat
            render_linear(code, head, features)
            outputs.append(code.x)
        if len(outputs) == 2:
            code.let(f"{outputs[0]} + {outputs[1]}")
            render_activation(code, p.get("post_act"))
        return (p["heads"][-1]["out_features"],) if p["heads"] else (features,)

    def simpler(self, params):
        yield from super().simpler(params)
        if len(params["heads"]) == 2:
            yield {**params, "heads": params["heads"][:1], "post_act": None}
        for i, head in enumerate(params["heads"]):
            for key in ("act", "bn", "weights"):
                if head.get(key) is not None:
                    heads = [dict(h) for h in params["heads"]]
                    heads[i][key] = None
                    yield {**params, "heads": heads}


class Linear(Family):
    name = "linear"
    int16 = True
    ranks = (2,)
    weight = 4.0

    def sample(self, rng, shape):
        p = sample_linear(rng)
        return p if shape[0] * p["out_features"] <= MAX_LAYER_MACS else None

    def render(self, code, p, shape):
        return render_linear(code, p, shape[0])


class Unsqueeze(Family):
    """[1, F] -> [1, F, 1, 1] (view / reshape / indexing / unsqueeze), so convolutions follow."""

    name = "unsqueeze"
    ranks = (2,)
    weight = 0.5
    STYLES = (
        "{x}.view(1, {f}, 1, 1)",
        "{x}.reshape(1, -1, 1, 1)",
        "{x}[:, :, None, None]",
        "{x}.unsqueeze(-1).unsqueeze(-1)",
    )

    def sample(self, rng, shape):
        return {"style": rng.randrange(len(self.STYLES))}

    def render(self, code, p, shape):
        code.let(self.STYLES[p["style"]].format(x=code.x, f=shape[0]))
        return (shape[0], 1, 1)


# -- elementwise --------------------------------------------------------------------------------


class Activation(Family):
    """A ReLU / ReLU6 / hardtanh / clamp on its own: fused into the op before it when that op
    can take it and has no other user, else a standalone clamp."""

    name = "activation"
    ranks = (4, 3, 2)
    weight = 1.0

    def sample(self, rng, shape):
        return {"act": sample_activation(rng, none_probability=0.0)}

    def render(self, code, p, shape):
        if p["act"] is None:
            raise Unfit("an activation layer needs an activation")
        render_activation(code, p["act"])
        return shape

    def simpler(self, params):
        return iter(())


class Add(Family):
    """out = a(x) + b(x) [+ activation] (or -, *, minimum, maximum), each branch the identity or a
    chain of one or two same-shape steps: a convolution or depthwise convolution (padding keeping
    H x W, an F.pad for even kernels), a pool, a linear layer (2-D), an activation -- which runs
    standalone when x has another user. Covers residual blocks (two convolutions, or depthwise
    then pointwise), x + x, and binary ops between two computed branches."""

    name = "add"
    ranks = (4, 2)
    weight = 2.0
    STEPS_4D = ("conv", "conv", "depthwise", "pool", "activation")
    STEPS_2D = ("linear", "linear", "activation")

    def sample(self, rng, shape):
        kinds = self.STEPS_4D if len(shape) == 3 else self.STEPS_2D
        branches = [
            [self._step(rng, rng.choice(kinds), shape) for _ in range(rng.choice((0, 0, 1, 1, 1, 2)))] for _ in range(2)
        ]
        op = "add" if rng.random() < 0.6 else rng.choice(("sub", "mul", "minimum", "maximum"))
        return {"branches": branches, "op": op, "style": rng.randrange(3), "post_act": sample_activation(rng, 0.5)}

    @staticmethod
    def _step(rng, kind, shape):
        if kind in ("conv", "depthwise"):
            k = rng.choice((1, 2, 3, 3, 5))
            dilation = rng.choice((1, 1, 2))
            span = dilation * (k - 1)
            step = {
                "kind": kind,
                "kernel": [k, k],
                "stride": [1, 1],
                "dilation": [dilation, dilation],
                "padding": [span // 2] * 2,
                "pre_pad": None,
                "bias": rng.random() < 0.7,
                "bn": sample_batch_norm(rng),
                "act": sample_activation(rng),
                "weights": sample_weights(rng),
            }
            if span % 2:  # an even receptive field: "same" needs one more pixel on one side
                step["padding"] = [0, 0]
                step["pre_pad"] = [span // 2, span - span // 2, span // 2, span - span // 2]
            if kind == "conv":
                step["groups"] = rng.choice([d for d in _divisors(shape[0]) if d < shape[0]] or [1])
            return step
        if kind == "pool":
            return {
                "kind": "pool",
                "pool": rng.choice(("max", "avg")),
                "kernel": rng.choice((1, 3)),
                "act": sample_activation(rng, 0.8),
            }
        if kind == "linear":
            return {"kind": "linear", **sample_linear(rng, shape[0])}
        return {"kind": "activation", "act": sample_activation(rng, 0.0)}

    def render(self, code, p, shape):
        source, outputs = code.x, []
        for branch in p["branches"]:
            code.x = source
            for step in branch:
                self._render_step(code, step, shape)
            outputs.append(code.x)
        a, b = outputs
        op = p.get("op", "add")
        code.let(
            {
                "add": (f"{a} + {b}", f"torch.add({a}, {b})", f"{b} + {a}"),
                "sub": (f"{a} - {b}", f"torch.sub({a}, {b})", f"{b} - {a}"),
                "mul": (f"{a} * {b}", f"torch.mul({a}, {b})", f"{b} * {a}"),
                "minimum": (f"torch.minimum({a}, {b})",) * 3,
                "maximum": (f"torch.maximum({a}, {b})",) * 3,
            }[op][p["style"]]
        )
        render_activation(code, p.get("post_act"))
        return shape

    @staticmethod
    def _render_step(code, step, shape):
        kind = step["kind"]
        if kind in ("conv", "depthwise"):
            if len(shape) != 3:
                raise Unfit("a conv step needs a 4-D input")
            groups = shape[0] if kind == "depthwise" else step["groups"]
            out = render_conv(code, step, shape, groups, shape[0])
            if out != shape:
                raise Unfit(f"step {step} changes the shape {shape} -> {out}")
        elif kind == "pool":
            if len(shape) != 3:
                raise Unfit("a pool step needs a 4-D input")
            k = step["kernel"]
            extra = (
                ""
                if k == 1
                else f", stride=1, padding={k // 2}" + (", count_include_pad=False" if step["pool"] == "avg" else "")
            )
            code.let(f"F.{step['pool']}_pool2d({code.x}, {k}{extra})")
            render_activation(code, step.get("act"))
        elif kind == "linear":
            if len(shape) != 1:
                raise Unfit("a linear step needs a 2-D input")
            render_linear(code, step, shape[0])
        else:
            render_activation(code, step["act"])

    def simpler(self, params):
        yield from super().simpler(params)
        for i, branch in enumerate(params["branches"]):
            for j, step in enumerate(branch):
                yield self._with_branch(params, i, branch[:j] + branch[j + 1 :])
                for key in ("act", "bn", "weights"):  # not pre_pad: an even kernel's "same" padding
                    if step.get(key) is not None and not (step["kind"] == "activation" and key == "act"):
                        yield self._with_branch(params, i, branch[:j] + [{**step, key: None}] + branch[j + 1 :])

    @staticmethod
    def _with_branch(params, index, branch):
        branches = list(params["branches"])
        branches[index] = branch
        return {**params, "branches": branches}


class Softmax(Family):
    """softmax or log_softmax over any axis, as a head or in the middle of a model."""

    name = "softmax"
    ranks = (4, 3, 2)
    weight = 0.3
    head = True

    def sample(self, rng, shape):
        dims = {1: (1, -1), 2: (1, 2, -1, -2), 3: (1, 1, -3, 2, 3, -1, -2)}[len(shape)]
        return {"dim": rng.choice(dims), "style": rng.randrange(4), "log": rng.random() < 0.2}

    def render(self, code, p, shape):
        x, dim, name = code.x, p["dim"], "log_softmax" if p.get("log") else "softmax"
        module = "LogSoftmax" if p.get("log") else "Softmax"
        spellings = (
            lambda: f"torch.{name}({x}, dim={dim})",
            lambda: f"F.{name}({x}, dim={dim})",
            lambda: f"{x}.{name}({dim})",
            lambda: f"{code.module(f'nn.{module}(dim={dim})')}({x})",
        )
        code.let(spellings[p["style"]]())
        return shape


class Identity(Family):
    """Ops that vanish at inference: clone, contiguous, dropout in eval mode."""

    name = "identity"
    ranks = (4, 3, 2)
    weight = 0.3
    STYLES = ("{x}.clone()", "{x}.contiguous()", "F.dropout({x}, 0.5, training=False)", "{module}({x})")

    def sample(self, rng, shape):
        return {"style": rng.randrange(len(self.STYLES))}

    def render(self, code, p, shape):
        style = self.STYLES[p["style"]]
        module = code.module("nn.Dropout(0.25)") if "{module}" in style else None
        code.let(style.format(x=code.x, module=module))
        return shape


# -- the operator families added with edgec's wider operator coverage ------------------------------

LUT_FUNCTIONS = {  # name -> (functional spelling, module spelling); {x} is the input
    "sigmoid": ("torch.sigmoid({x})", "nn.Sigmoid()"),
    "tanh": ("torch.tanh({x})", "nn.Tanh()"),
    "hardswish": ("F.hardswish({x})", "nn.Hardswish()"),
    "hardsigmoid": ("F.hardsigmoid({x})", "nn.Hardsigmoid()"),
    "silu": ("F.silu({x})", "nn.SiLU()"),
    "gelu": ("F.gelu({x})", "nn.GELU()"),
    "gelu_tanh": ("F.gelu({x}, approximate='tanh')", "nn.GELU(approximate='tanh')"),
    "elu": ("F.elu({x}, alpha=0.7)", "nn.ELU(alpha=0.7)"),
    "softplus": ("F.softplus({x})", "nn.Softplus()"),
    "mish": ("F.mish({x})", "nn.Mish()"),
    "leaky_relu": ("F.leaky_relu({x}, 0.1)", "nn.LeakyReLU(0.1)"),
    "log_sigmoid": ("F.logsigmoid({x})", "nn.LogSigmoid()"),
    "abs": ("torch.abs({x})", None),
    "neg": ("-{x}", None),
    "sin": ("torch.sin({x})", None),
    "cos": ("torch.cos({x})", None),
    "erf": ("torch.erf({x})", None),
}


class LutActivation(Family):
    """A lookup-table activation (sigmoid, tanh, hardswish, SiLU, GELU, ELU, ...)."""

    name = "lut"
    ranks = (4, 3, 2)
    weight = 1.0

    def sample(self, rng, shape):
        return {"function": rng.choice(sorted(LUT_FUNCTIONS)), "module": rng.random() < 0.3}

    def render(self, code, p, shape):
        functional, module = LUT_FUNCTIONS[p["function"]]
        if p["module"] and module is not None:
            code.let(f"{code.module(module)}({code.x})")
        else:
            code.let(functional.format(x=code.x))
        return shape


class ScalarOp(Family):
    """x op c with a Python scalar: +, -, * (also c - x), / by a constant."""

    name = "scalar_op"
    ranks = (4, 3, 2)
    weight = 0.7
    FORMS = ("{x} + {c}", "{x} - {c}", "{c} - {x}", "{x} * {c}", "{x} / {c}", "torch.mul({x}, {c})")

    def sample(self, rng, shape):
        return {"form": rng.randrange(len(self.FORMS)), "c": rng.choice((-2.0, -0.5, 0.25, 0.5, 1.5, 3.0, 100.0))}

    def render(self, code, p, shape):
        code.let(self.FORMS[p["form"]].format(x=code.x, c=p["c"]))
        return shape


class Broadcast(Family):
    """A binary op against a broadcast operand: a per-channel gate computed from x (squeeze and
    excitation: mean, 1x1 conv, sigmoid, then x * gate), or a constant tensor of shape [C, 1, 1],
    [1, H, W] or [1, 1, W] (an nn.Parameter), or a PReLU."""

    name = "broadcast"
    weight = 1.0

    def sample(self, rng, shape):
        return {
            "kind": rng.choice(("gate", "constant", "constant", "prelu")),
            "op": rng.choice(("mul", "add", "sub", "minimum", "maximum")),
            "operand": rng.choice(("channel", "plane", "row")),
            "per_channel": rng.random() < 0.5,
            "reduction": rng.choice((1, 2, 4)),
        }

    def render(self, code, p, shape):
        c, h, w = shape
        x = code.x
        if p["kind"] == "prelu":
            slopes = c if p["per_channel"] else 1
            code.let(f"{code.module(f'nn.PReLU({slopes})')}({x})")
            return shape
        if p["kind"] == "gate":
            hidden = max(1, c // p["reduction"])
            squeeze = code.module(f"nn.Conv2d({c}, {hidden}, 1)")
            excite = code.module(f"nn.Conv2d({hidden}, {c}, 1)")
            pooled = code.let(f"F.relu({squeeze}({x}.mean((2, 3), keepdim=True)))")
            other = code.let(f"torch.sigmoid({excite}({pooled}))")
        else:
            dims = {"channel": (c, 1, 1), "plane": (1, h, w), "row": (1, 1, w)}[p["operand"]]
            name = code.module(f"nn.Parameter(torch.randn{dims})")
            other = name
        op = p["op"]
        code.let(
            {
                "mul": f"{x} * {other}",
                "add": f"{x} + {other}",
                "sub": f"{other} - {x}",
                "minimum": f"torch.minimum({x}, {other})",
                "maximum": f"torch.maximum({x}, {other})",
            }[op]
        )
        return shape


class Movement(Family):
    """Data movement: cat of x with a transformed copy of itself or with itself (also as a stack),
    channel slices, strided slices,
    flip, transpose of H and W, permute (the axes move: the next layers see the new shape),
    channel and pixel shuffles, roll, and constant padding with a value."""

    name = "movement"
    weight = 1.0
    KINDS = (
        "cat",
        "slice",
        "stride_slice",
        "flip",
        "transpose",
        "permute",
        "channel_shuffle",
        "pixel_shuffle",
        "roll",
        "pad_value",
        "chunk_swap",
        "cat_self",
        "stack_self",
    )

    def sample(self, rng, shape):
        c, h, w = shape
        kind = rng.choice(self.KINDS)
        p = {
            "kind": kind,
            "dim": rng.choice((1, 2, 3)),
            "value": rng.choice((0.0, -1.0, 0.5)),
            "pads": [rng.randint(0, 2) for _ in range(4)],
            "perm": rng.choice(([0, 2, 3, 1], [0, 3, 1, 2], [0, 1, 3, 2])),
        }
        if kind == "channel_shuffle" and not [g for g in _divisors(c) if 1 < g < c]:
            return None
        if kind == "pixel_shuffle" and c % 4:
            return None
        if kind in ("slice", "chunk_swap") and shape[p["dim"] - 1] < 2:
            return None
        p["groups"] = rng.choice([g for g in _divisors(c) if 1 < g < c] or [1])
        return p

    def render(self, code, p, shape):
        c, h, w = shape
        x, dim, kind = code.x, p["dim"], p["kind"]
        size = shape[dim - 1]
        if kind in ("cat", "cat_self", "stack_self"):
            other = code.let(f"torch.relu({x})") if kind == "cat" else x
            code.let(
                f"torch.cat([{x}, {other}], dim={dim})"
                if kind != "stack_self"
                else f"torch.stack([{x}, {other}], dim={dim + 1}).flatten({dim}, {dim + 1})"
            )
            out = list(shape)
            out[dim - 1] *= 2
            return tuple(out)
        if kind in ("slice", "chunk_swap"):
            if size < 2:
                raise Unfit("nothing to slice")
            index = ", ".join([":"] * dim)
            if kind == "chunk_swap":
                first, second = code.let(f"{x}.chunk(2, dim={dim})[0]"), code.let(f"{x}.chunk(2, dim={dim})[1]")
                code.let(f"torch.cat([{second}, {first}], dim={dim})")
                return shape
            code.let(f"{x}[{index}, 1:]")
            out = list(shape)
            out[dim - 1] = size - 1
            return tuple(out)
        if kind == "stride_slice":
            index = ", ".join([":"] * dim)
            code.let(f"{x}[{index}, ::2]")
            out = list(shape)
            out[dim - 1] = (size + 1) // 2
            return tuple(out)
        if kind == "flip":
            code.let(f"torch.flip({x}, [{dim}])")
            return shape
        if kind == "transpose":
            code.let(f"{x}.transpose(2, 3)")
            return (c, w, h)
        if kind == "permute":
            code.let(f"{x}.permute({', '.join(map(str, p['perm']))})")
            full = (1, *shape)
            return tuple(full[i] for i in p["perm"][1:])
        if kind == "channel_shuffle":
            if c % p["groups"] or p["groups"] == 1:
                raise Unfit("channel shuffle needs a group count dividing C")
            groups = p["groups"]
            code.let(f"{code.module(f'nn.ChannelShuffle({groups})')}({x})")
            return shape
        if kind == "pixel_shuffle":
            if c % 4:
                raise Unfit("pixel shuffle by 2 needs C divisible by 4")
            code.let(f"F.pixel_shuffle({x}, 2)")
            return (c // 4, 2 * h, 2 * w)
        if kind == "roll":
            code.let(f"torch.roll({x}, 1, {dim})")
            return shape
        left, right, top, bottom = p["pads"]
        code.let(f"F.pad({x}, ({left}, {right}, {top}, {bottom}), value={p['value']})")
        return (c, h + top + bottom, w + left + right)


class Resize(Family):
    """F.interpolate: nearest or bilinear (align_corners either way), by a scale factor (integer or
    not) or to a size."""

    name = "resize"
    weight = 0.6

    def sample(self, rng, shape):
        _, h, w = shape
        if h * w > 144:
            return None
        return {
            "mode": rng.choice(("nearest", "bilinear")),
            "align": rng.random() < 0.3,
            "scale": rng.choice(([2, 2], [2, 1], [3, 3], [1.5, 1.5], [1.5, 2])) if rng.random() < 0.7 else None,
            "size": [rng.randint(1, 2 * h + 1), rng.randint(1, 2 * w + 1)],
        }

    def render(self, code, p, shape):
        c, h, w = shape
        how = f"scale_factor={tuple(p['scale'])}" if p["scale"] else f"size={tuple(p['size'])}"
        align = f", align_corners={p['align']}" if p["mode"] == "bilinear" else ""
        code.let(f"F.interpolate({code.x}, {how}, mode='{p['mode']}'{align})")
        return (c, int(h * p["scale"][0]), int(w * p["scale"][1])) if p["scale"] else (c, *p["size"])


class ConvTranspose(Family):
    """nn.ConvTranspose2d: kernel, stride, padding, output_padding, dilation, groups, bias."""

    name = "conv_transpose"
    weight = 0.8

    def sample(self, rng, shape):
        c, h, w = shape
        for _ in range(20):
            k = rng.choice((1, 2, 3, 4))
            stride = rng.choice((1, 2, 2, 3))
            dilation = rng.choice((1, 1, 2))
            padding = rng.randint(0, dilation * (k - 1))
            output_padding = rng.randint(0, max(stride, dilation) - 1)
            groups = rng.choice([g for g in _divisors(c)][:3])
            out_channels = groups * rng.choice((1, 2, 3, 8))
            p = {
                "kernel": k,
                "stride": stride,
                "padding": padding,
                "output_padding": output_padding,
                "dilation": dilation,
                "groups": groups,
                "out_channels": out_channels,
                "bias": rng.random() < 0.7,
                "act": sample_activation(rng),
                "weights": sample_weights(rng),
            }
            oh, ow = self._out_hw(p, h, w)
            if min(oh, ow) >= 1 and oh * ow * out_channels * k * k * c // groups <= MAX_LAYER_MACS and oh * ow <= 2500:
                return p
        return None

    @staticmethod
    def _out_hw(p, h, w):
        return tuple(
            (size - 1) * p["stride"] - 2 * p["padding"] + p["dilation"] * (p["kernel"] - 1) + p["output_padding"] + 1
            for size in (h, w)
        )

    def render(self, code, p, shape):
        c, h, w = shape
        oh, ow = self._out_hw(p, h, w)
        if min(oh, ow) < 1 or c % p["groups"] or p["out_channels"] % p["groups"]:
            raise Unfit(f"conv transpose {p} on {shape}")
        module = code.module(
            f"nn.ConvTranspose2d({c}, {p['out_channels']}, {p['kernel']}"
            + _kwargs(
                stride=p["stride"] if p["stride"] > 1 else None,
                padding=p["padding"] or None,
                output_padding=p["output_padding"] or None,
                groups=p["groups"] if p["groups"] > 1 else None,
                bias=None if p["bias"] else False,
                dilation=p["dilation"] if p["dilation"] > 1 else None,
            )
            + ")"
        )
        render_weights(code, module, p.get("weights"), p["out_channels"] // p["groups"], p["bias"], "[:, {}]")
        code.let(f"{module}({code.x})")
        code.macs += h * w * p["out_channels"] * p["kernel"] ** 2 * (c // p["groups"])
        render_activation(code, p.get("act"))
        return (p["out_channels"], oh, ow)


class Reduce(Family):
    """sum / amax / amin / mean over one axis or two, keepdim or not (4-D kept: the reduced axes
    stay as size 1, so the model goes on)."""

    name = "reduce"
    weight = 0.5

    def sample(self, rng, shape):
        return {"op": rng.choice(("sum", "amax", "amin", "mean")), "dims": rng.choice(([1], [2], [3], [2, 3], [1, 3]))}

    def render(self, code, p, shape):
        dims = tuple(p["dims"])
        code.let(f"{code.x}.{p['op']}({dims if len(dims) > 1 else dims[0]}, keepdim=True)")
        return tuple(1 if i + 1 in dims else size for i, size in enumerate(shape))


# -- sequences: [1, T, F] tokens (rank 3) ------------------------------------------------------------

MAX_TOKENS = 32
TOKEN_FEATURES = (1, 2, 3, 4, 5, 7, 8, 12, 16, 17, 24, 32)


class Tokens(Family):
    """Into a token sequence [1, T, F]: an image's pixels as tokens (x.flatten(2).transpose(1, 2):
    T = H*W, F = C), its channels as tokens (x.flatten(2): the operand a convolution stores
    channels last), or a feature vector cut into T tokens (view)."""

    name = "tokens"
    ranks = (4, 2)
    weight = 3.0

    def sample(self, rng, shape):
        if len(shape) == 1:
            splits = [t for t in _divisors(shape[0]) if 1 < t <= MAX_TOKENS]
            return {"style": "split", "tokens": rng.choice(splits)} if splits else None
        c, h, w = shape
        styles = [s for s, (t, f) in (("pixels", (h * w, c)), ("channels", (c, h * w))) if t <= MAX_TOKENS and f <= 64]
        return {"style": rng.choice(styles)} if styles else None

    def render(self, code, p, shape):
        if p["style"] == "split":
            if len(shape) != 1 or shape[0] % p["tokens"]:
                raise Unfit("a split into tokens needs a feature vector they divide")
            code.let(f"{code.x}.view(1, {p['tokens']}, {shape[0] // p['tokens']})")
            return (p["tokens"], shape[0] // p["tokens"])
        if len(shape) != 3:
            raise Unfit("pixels or channels as tokens need a 4-D input")
        c, h, w = shape
        if p["style"] == "pixels":
            code.let(f"{code.x}.flatten(2).transpose(1, 2)")
            return (h * w, c)
        code.let(f"{code.x}.flatten(2)")
        return (c, h * w)


class TokenLinear(Family):
    """nn.Linear over the last axis of the tokens (and an activation)."""

    name = "token_linear"
    int16 = True
    ranks = (3,)
    weight = 2.0

    def sample(self, rng, shape):
        return {
            "out_features": rng.choice(TOKEN_FEATURES),
            "bias": rng.random() < 0.75,
            "act": sample_activation(rng),
            "weights": sample_weights(rng),
        }

    def render(self, code, p, shape):
        t, f = shape
        module = code.module(f"nn.Linear({f}, {p['out_features']}" + _kwargs(bias=None if p["bias"] else False) + ")")
        render_weights(code, module, p.get("weights"), p["out_features"], p["bias"])
        code.let(f"{module}({code.x})")
        code.macs += t * f * p["out_features"]
        render_activation(code, p.get("act"))
        return (t, p["out_features"])


class LayerNorm(Family):
    """nn.LayerNorm / F.layer_norm over the token features, with or without affine parameters."""

    name = "layer_norm"
    ranks = (3,)
    weight = 1.5

    def sample(self, rng, shape):
        return {"affine": rng.random() < 0.7, "module": rng.random() < 0.6, "eps": rng.choice((1e-5, 1e-6))}

    def render(self, code, p, shape):
        f = shape[-1]
        if p["module"]:
            module = code.module(
                f"nn.LayerNorm({f}, eps={p['eps']}" + ("" if p["affine"] else ", elementwise_affine=False") + ")"
            )
            if p["affine"]:
                code.setup += [f"{module}.weight.uniform_(-1.5, 1.5)", f"{module}.bias.uniform_(-1.0, 1.0)"]
            code.let(f"{module}({code.x})")
        else:
            code.let(f"F.layer_norm({code.x}, ({f},), eps={p['eps']})")
        return shape


class Recurrent(Family):
    """nn.LSTM / nn.GRU (batch_first) over every token (T >= 1), with or without biases, one or two
    layers: then all steps' outputs, the last step's, or the final hidden state."""

    name = "recurrent"
    ranks = (3,)
    weight = 2.0

    def sample(self, rng, shape):
        return {
            "cell": rng.choice(("LSTM", "GRU")),
            "hidden": rng.choice((1, 3, 4, 8, 16, 20, 32)),
            "bias": rng.random() < 0.6,
            "layers": rng.choice((1, 1, 1, 2)),
            "output": rng.choice(("sequence", "sequence", "last", "hidden")),
        }

    def render(self, code, p, shape):
        t, f = shape
        module = code.module(
            f"nn.{p['cell']}({f}, {p['hidden']}, batch_first=True"
            + _kwargs(num_layers=p["layers"] if p["layers"] > 1 else None, bias=None if p["bias"] else False)
            + ")"
        )
        gates = 4 if p["cell"] == "LSTM" else 3
        code.macs += t * gates * p["hidden"] * (f + p["hidden"] + (p["layers"] - 1) * 2 * p["hidden"])
        if p["output"] == "sequence":
            code.let(f"{module}({code.x})[0]")
            return (t, p["hidden"])
        if p["output"] == "last":
            code.let(f"{module}({code.x})[0][:, -1]")
        else:
            state = "[1][0]" if p["cell"] == "LSTM" else "[1]"
            code.let(f"{module}({code.x}){state}[-1]")
        return (p["hidden"],)

    def simpler(self, params):
        yield from super().simpler(params)
        if params["layers"] > 1:
            yield {**params, "layers": 1}
        if params["bias"]:
            yield {**params, "bias": False}


class MatMul(Family):
    """matmul / bmm of two activations: the tokens' Gram matrix (x @ x^T), scores of two
    projections (q @ k^T, scaled), or a whole attention head (softmax(q k^T) @ v)."""

    name = "matmul"
    ranks = (3,)
    weight = 1.0

    def sample(self, rng, shape):
        return {
            "form": rng.choice(("gram", "scores", "head")),
            "style": rng.randrange(3),
            "width": rng.choice(TOKEN_FEATURES),
        }

    def render(self, code, p, shape):
        t, f = shape
        x = code.x
        if p["form"] == "gram":
            q = k = x
            width = f
        else:
            width = p["width"]
            q = code.let(f"{code.module(f'nn.Linear({f}, {width})')}({x})")
            k = code.let(f"{code.module(f'nn.Linear({f}, {width})')}({x})")
        kt = f"{k}.transpose(1, 2)"
        product = (f"torch.matmul({q}, {kt})", f"{q} @ {kt}", f"torch.bmm({q}, {kt})")[p["style"]]
        code.macs += t * t * width + 2 * t * f * width
        if p["form"] != "head":
            code.let(product if p["form"] == "gram" else f"{product} * {1 / width**0.5:.4f}")
            return (t, t)
        v = code.let(f"{code.module(f'nn.Linear({f}, {width})')}({x})")
        scores = code.let(f"torch.softmax({product} * {1 / width**0.5:.4f}, dim=-1)")
        code.let(f"torch.matmul({scores}, {v})")
        code.macs += t * t * width + t * f * width
        return (t, width)


class Attention(Family):
    """nn.MultiheadAttention(batch_first=True) as self-attention or as cross-attention (key and
    value from another tensor than the query), or F.scaled_dot_product_attention."""

    name = "attention"
    ranks = (3,)
    weight = 1.0

    def sample(self, rng, shape):
        f = shape[-1]
        return {
            "kind": rng.choice(("self", "self", "cross", "sdpa")),
            "heads": rng.choice([h for h in (1, 2, 4) if f % h == 0]),
        }

    def render(self, code, p, shape):
        t, f = shape
        x = code.x
        if f % p["heads"]:
            raise Unfit("the heads must divide the features")
        code.macs += 4 * t * f * f + 2 * t * t * f
        if p["kind"] == "sdpa":
            q, k, v = (code.let(f"{code.module(f'nn.Linear({f}, {f})')}({x})") for _ in range(3))
            code.let(f"F.scaled_dot_product_attention({q}, {k}, {v})")
            return shape
        module = code.module(f"nn.MultiheadAttention({f}, {p['heads']}, batch_first=True)")
        memory = x if p["kind"] == "self" else code.let(f"{code.module(f'nn.Linear({f}, {f})')}({x})")
        code.let(f"{module}({x}, {memory}, {memory}, need_weights=False)[0]")
        return shape


class TokenReduce(Family):
    """Out of the token sequence into a feature vector: the mean over the tokens (or over the
    features), the first token, or all of them flattened."""

    name = "token_reduce"
    ranks = (3,)
    weight = 0.7

    def sample(self, rng, shape):
        return {"kind": rng.choice(("mean_tokens", "mean_tokens", "mean_features", "first", "flatten"))}

    def render(self, code, p, shape):
        t, f = shape
        kind = p["kind"]
        if kind == "mean_tokens":
            code.let(f"{code.x}.mean(1)")
            return (f,)
        if kind == "mean_features":
            code.let(f"torch.mean({code.x}, 2)")
            return (t,)
        if kind == "first":
            code.let(f"{code.x}[:, 0]")
            return (f,)
        code.let(f"{code.x}.flatten(1)")
        return (t * f,)


for _family in (
    Conv(),
    Depthwise(),
    Pool(),
    GlobalPool(),
    Flatten(),
    Linear(),
    Unsqueeze(),
    Activation(),
    Add(),
    Softmax(),
    Identity(),
    LutActivation(),
    ScalarOp(),
    Broadcast(),
    Movement(),
    Resize(),
    ConvTranspose(),
    Reduce(),
    Tokens(),
    TokenLinear(),
    LayerNorm(),
    Recurrent(),
    MatMul(),
    Attention(),
    TokenReduce(),
):
    register(_family)
