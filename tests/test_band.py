"""Band stages (edgec.ops.band, edgec.backend.banding): chains of spatial layers run depth-first over row
bands equal the layer-by-layer run byte for byte -- in the golden simulator (which replays the C's
action table on the same overlapping memory) and in the generated C (host, sanitizers and every
layer's arena writes checked; QEMU Cortex-M4 and M55 runs) -- for chunks of 1 row, uneven last
chunks, stride 2, dilation, padding at both edges, a residual block, a stage ending in a pool, two
heads reading one map (branches, two stage outputs) and a streamed input (rows handed in by the
application, in order, each once); and a RAM budget is met with them, or refused in one line with
the smallest arena they reach."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch
from torch import nn

from edgec import sim
from edgec.backend.banding import (
    CALL_CYCLES,
    ELEMENTWISE_CALL_CYCLES,
    FETCH_CYCLES,
    MOVE_CYCLES_PER_BYTE,
    added_cycles,
    chains,
    fit_budget,
    stage_outputs,
)
from edgec.backend.codegen import _UnplannedNames
from edgec.backend.plan import check_plan
from edgec.backend.schedule import schedule_and_plan
from edgec.ops import KINDS
from edgec.ops.band import make_stage
from edgec.pipeline import compile_for, compile_model, emit, quantize_model
from edgec.targets.cores import get_target
from edgec.tools.verify import build_host, golden_outputs, output_bytes, quantized_inputs, run_host, run_on
from tests.device_support import needs_toolchain
from tests.test_cli import run_cli


class Chain(nn.Module):
    """conv 3x3 -> dilated conv (dilation 2, padding 2 at both edges) -> depthwise 3x3/2 -> 1x1
    expand -> max pool 2x2: a stage can end in a pool."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(8, 8, 3, padding=2, dilation=2),
            nn.ReLU6(),
            nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8),
            nn.ReLU(),
            nn.Conv2d(8, 16, 1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(16 * 5 * 4, 4),
        )

    def forward(self, x):
        return self.body(x)


class Residual(nn.Module):
    """An inverted residual block (expand 1x1, depthwise 5x5 padded 2 at both edges, project 1x1,
    + input: the add inside the stage, its output over its input) after a strided stem."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU())
        self.block = nn.Sequential(
            nn.Conv2d(8, 32, 1), nn.ReLU6(), nn.Conv2d(32, 32, 5, padding=2, groups=32), nn.ReLU6(), nn.Conv2d(32, 8, 1)
        )
        self.head = nn.Sequential(nn.AvgPool2d(2), nn.Flatten(), nn.Linear(8 * 5 * 4, 3))

    def forward(self, x):
        x = self.stem(x)
        return self.head(x + self.block(x))


class Detector(nn.Module):
    """PNet-shaped: unpadded convs with PReLU (elementwise layers, one descriptor per band height),
    a ceil-mode max pool whose last window hangs over the bottom edge, and two heads reading one
    map (a branch inside the stage: two stage outputs)."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 8, 3), nn.PReLU(8), nn.MaxPool2d(2, 2, ceil_mode=True), nn.Conv2d(8, 12, 3), nn.PReLU(12)
        )
        self.head = nn.Conv2d(12, 4, 1)
        self.boxes = nn.Conv2d(12, 2, 3, padding=1)

    def forward(self, x):
        y = self.body(x)
        return self.head(y), self.boxes(y)


class PlanePrelu(nn.Module):
    """A PReLU outside any stage whose plane has as many elements as its tables have bytes (16x16x4,
    4 slopes of 256 entries)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.prelu = nn.PReLU(4)

    def forward(self, x):
        return self.prelu(self.conv(x))


SHAPES = {Chain: (1, 3, 21, 16), Residual: (1, 3, 21, 16), Detector: (1, 3, 20, 15)}  # uneven last bands
SHAPES[PlanePrelu] = (1, 3, 16, 16)


def _compiled(model_class, target="host", ram=None):
    torch.manual_seed(0)
    model = model_class().eval()
    example = (torch.rand(SHAPES[model_class]),)
    calibration = np.random.default_rng(0).random((8, *SHAPES[model_class][1:]), dtype=np.float32)
    return compile_model(
        model,
        example_inputs=example,
        calibration=calibration,
        target=get_target(target).with_budget(ram),
        warn=lambda _: None,
    )


@pytest.fixture(scope="module")
def chain():
    return _compiled(Chain)


@pytest.fixture(scope="module")
def residual():
    return _compiled(Residual)


@pytest.fixture(scope="module")
def detector():
    return _compiled(Detector)


def _banded(compiled, first: int, last: int, chunk: int, stream: bool = False):
    """A copy of `compiled` with ops first..last as one band stage of `chunk` rows (writing what
    the rest of the graph reads; with `stream`, its input handed in rows), planned."""
    banded = copy.copy(compiled)
    graph = copy.copy(compiled.graph)
    stage = make_stage(graph.ops[first : last + 1], graph, chunk, stage_outputs(graph, first, last), stream)
    graph.ops = graph.ops[:first] + [stage] + graph.ops[last + 1 :]
    graph.streamed_inputs = list(graph.inputs) if stream else []
    banded.target = compiled.target.with_stream_input(stream)
    banded.graph, banded.plan = graph, schedule_and_plan(graph, banded.target)
    assert check_plan(graph, banded.plan, banded.target) == []
    return banded


def _sample(compiled, seed=1):
    shape = tuple(compiled.example_inputs[0].shape)
    return quantized_inputs(compiled.graph, np.random.default_rng(seed).random((2, *shape[1:]), dtype=np.float32))


@pytest.mark.parametrize(
    "model,first,last,stream",
    [
        ("chain", 0, 4, False),
        ("chain", 1, 3, False),
        ("chain", 2, 4, False),
        ("chain", 0, 3, True),
        ("detector", 0, 6, False),
        ("detector", 0, 6, True),
        ("detector", 3, 6, False),
        ("residual", 1, 4, False),
    ],
)
@pytest.mark.parametrize("chunk", [1, 2, 4, 7])
def test_banded_golden_equals_layer_by_layer(request, model, first, last, stream, chunk):
    """Chains, streamed inputs (fetched row by row into a window) and branches (two heads, two
    stage outputs) at every chunk height."""
    chain = request.getfixturevalue(model)
    graph = chain.graph
    x = _sample(chain)
    whole = golden_outputs(graph, x)
    values = sim.run(graph, [x[0].reshape(graph.tensors[graph.inputs[0]].shape)])
    stage = make_stage(graph.ops[first : last + 1], graph, chunk, stage_outputs(graph, first, last), stream)
    banded = KINDS[stage.kind].golden(stage, graph, [values[stage.inputs[0]]])
    banded = banded if isinstance(banded, list) else [banded]
    assert len(banded) == len(stage.outputs) == (2 if model == "detector" else 1)
    for result, name in zip(banded, stage.outputs):
        assert np.array_equal(result, values[name])
    assert np.array_equal(golden_outputs(_banded(chain, first, last, chunk, stream).graph, x), whole)


def test_a_streamed_input_is_fetched_in_order_once_and_never_whole():
    """The fetch actions ask for every input row once, in order; the input gets no arena bytes."""
    compiled = _compiled(Chain)
    banded = _banded(compiled, 0, 4, 2, stream=True)
    stage = banded.graph.ops[0]
    fetches = stage.attrs["actions"][stage.attrs["actions"][:, 0] == -1]
    assert fetches[:, 3].tolist() == np.concatenate([[0], np.cumsum(fetches[:, 4])[:-1]]).tolist()
    assert fetches[:, 4].sum() == SHAPES[Chain][2]
    assert banded.graph.inputs[0] not in banded.plan.offsets
    assert stage.attrs["window_rows"][0] < SHAPES[Chain][2] // 2


def test_chains_take_branches_and_stop_at_layers_that_cannot_band(residual, detector):
    graph = residual.graph
    kinds = [[graph.ops[i].kind for i in run] for run in chains(graph)]
    # the stem, the block with its residual add, the pool after it (the stem's output, read twice,
    # is an output of any stage ending inside the block)
    assert ["conv2d", "conv2d", "depthwise_conv2d", "conv2d", "add", "avg_pool2d"] in kinds
    # a stage ending after the add: the add writes where it reads the stage's input, so it must be an output
    assert [op.kind for op in graph.ops[1:6]][-2:] == ["add", "avg_pool2d"]
    with pytest.raises(ValueError, match="residual add"):
        make_stage(graph.ops[1:6], graph, 2)
    assert [len(run) for run in chains(detector.graph)] == [7]  # both heads


def test_a_prelu_runs_over_its_convolutions_window(detector):
    """PReLU, the only reader of a convolution's map, writes over that map's window rows (no window
    of its own): the maps 2 and 5 (PReLU outputs) live in the windows of maps 1 and 4."""
    graph = detector.graph
    stage = make_stage(graph.ops[:7], graph, 2, stage_outputs(graph, 0, 6), stream=True)
    assert stage.attrs["layout"].shared == ((2, 1), (5, 4))
    assert [stage.attrs["window_rows"][index] for index in (2, 5)] == [0, 0]
    assert sorted(KINDS[stage.kind].windows(stage, graph)) == [0, 1, 3, 4]
    assert sorted(stage_outputs(detector.graph, 0, 6)) == sorted(detector.graph.outputs)


def test_a_banded_prelu_reads_tables_made_once_and_costs_no_window_kernels_set_up(detector, tmp_path):
    """Each PReLU of a stage calls edgec_prelu_s8_lookup (never edgec_prelu_s8, which would rebuild
    its tables on every band) on one table constant (256 entries per channel) shared by its band
    heights; the planner counts its calls at the elementwise set-up cost."""
    graph = detector.graph
    stage = make_stage(graph.ops[:7], graph, 2, stage_outputs(graph, 0, 6), stream=True)
    code = KINDS[stage.kind].emit(stage, graph, _UnplannedNames("m", graph, None))
    prelus = [layer for layer in graph.ops[:7] if layer.kind == "prelu"]
    tables = [(symbol, values) for _, symbol, values in code.constants if symbol.endswith("tables")]
    assert [len(values) for _, values in tables] == [256 * layer.attrs["alpha"].values.size for layer in prelus]
    assert "edgec_prelu_s8(" not in code.code and code.code.count("edgec_prelu_s8_lookup(") >= len(prelus)
    actions = stage.attrs["actions"]
    calls = {i: int(np.count_nonzero(actions[:, 0] == i)) - 1 for i in range(7)}
    fetches = int(np.count_nonzero(actions[:, 0] < 0))
    expected = sum(
        n * (ELEMENTWISE_CALL_CYCLES if graph.ops[i].kind == "prelu" else CALL_CYCLES) for i, n in calls.items()
    )
    moved = (stage.attrs["moved_bytes"] + stage.attrs["fetched_bytes"]) * MOVE_CYCLES_PER_BYTE
    assert added_cycles(stage) == expected + fetches * FETCH_CYCLES + moved


@pytest.mark.parametrize(
    "model,first,last,chunk,stream",
    [
        ("chain", 0, 4, 1, False),
        ("chain", 0, 3, 4, False),
        ("chain", 0, 4, 3, True),
        ("residual", 1, 4, 3, False),
        ("detector", 0, 6, 2, False),
        ("detector", 0, 6, 1, True),
    ],
)
def test_host_c_equals_golden_with_every_write_checked(request, tmp_path, model, first, last, chunk, stream):
    """With a streamed input the host driver hands the rows in through <name>_invoke_streamed and
    fails unless they are asked for in order, each once, all of them."""
    compiled = request.getfixturevalue(model)
    kinds = {
        "residual": ["conv2d", "depthwise_conv2d", "conv2d", "add"],
        "detector": ["conv2d", "prelu", "max_pool2d", "conv2d", "prelu", "conv2d", "conv2d"],
    }
    if model in kinds:
        assert [op.kind for op in compiled.graph.ops[first : last + 1]] == kinds[model]
    banded = _banded(compiled, first, last, chunk, stream)
    emit(banded, tmp_path / "out", "m")
    x = _sample(compiled)
    exe = build_host(tmp_path / "out", "m", tmp_path / "build", sanitize=True)
    assert np.array_equal(run_host(exe, x, output_bytes(banded.graph)), golden_outputs(compiled.graph, x))


def test_a_budget_is_met_with_band_stages_and_a_model_that_fits_is_untouched(chain):
    target = get_target("host")
    graph = copy.copy(chain.graph)
    untouched, banding = fit_budget(graph, target.with_budget(chain.plan.arena_bytes), chain.plan)
    assert banding is None and untouched is chain.plan and graph.ops == chain.graph.ops
    budget = chain.plan.arena_bytes * 3 // 4
    plan, banding = fit_budget(graph, target.with_budget(budget), chain.plan)
    assert banding.fits and plan.arena_bytes <= budget < chain.plan.arena_bytes
    assert any(op.kind == "band_stage" for op in graph.ops) and check_plan(graph, plan, target) == []
    assert banding.summary().startswith(f"RAM budget {budget:,} B: arena {chain.plan.arena_bytes:,} B layer by layer")


def test_a_streamed_input_meets_a_budget_the_whole_input_cannot(chain):
    """Chain's smallest arena with its input in the arena is 2,192 B (below); streamed, 1,900 B fits,
    the stage at the input streams it and the input has no bytes in the plan."""
    target = get_target("host").with_budget(1900)
    graph = copy.copy(chain.graph)
    plan, banding = fit_budget(graph, target.with_stream_input(True), chain.plan)
    assert banding.fits and plan.arena_bytes <= 1900 and graph.streamed_inputs == graph.inputs
    assert graph.ops[0].kind == "band_stage" and graph.ops[0].attrs["layout"].stream
    assert graph.inputs[0] not in plan.offsets and check_plan(graph, plan, target) == []
    assert "the input streamed" in banding.summary()


def test_an_unreachable_budget_is_one_line_with_the_smallest_arena(tmp_path, capsys):
    """Through the CLI: --ram below anything band stages reach exits 2 with one line naming the
    smallest arena reached and the layer-by-layer one; a budget they reach builds and says so."""
    model = tmp_path / "chain.py"
    model.write_text(
        "import torch\nfrom tests.test_band import Chain, SHAPES\n\n"
        "def factory():\n    torch.manual_seed(0)\n    return Chain().eval(), (torch.rand(SHAPES[Chain]),)\n"
    )
    code, out, err = run_cli(
        "build", f"{model}:factory", "-o", tmp_path / "small", "--ram", "1500", "--quiet", capsys=capsys
    )
    assert code == 2 and not (tmp_path / "small").exists()
    line = err.strip().splitlines()[-1]
    assert "arena" in line and "> RAM budget 1,500 B" in line and "smallest arena band stages reach" in line
    code, out, _ = run_cli(
        "build", f"{model}:factory", "-o", tmp_path / "fits", "--ram", "2K", "--quiet", "--report", capsys=capsys
    )
    assert code == 0 and "RAM budget 2,048 B: arena 3,040 B layer by layer" in out and "depth-first (fits)" in out
    report = json.loads((tmp_path / "fits" / "report.json").read_text())
    banding = report["banding"]
    assert (
        banding["fits"]
        and report["arena_bytes"] == banding["arena_bytes"] <= 2048 < banding["layer_by_layer_arena_bytes"]
    )
    for stage in banding["stages"]:  # the trade-off: taller bands hold more bytes and add less work
        points = stage["trade_off"]
        assert [p["stage_bytes"] for p in points] == sorted(p["stage_bytes"] for p in points)
        assert [p["added_cycles"] for p in points] == sorted((p["added_cycles"] for p in points), reverse=True)
    assert [layer["op"] for layer in report["layers"]].count("band_stage") == len(banding["stages"])
    assert "RAM budget (band stages)" in (tmp_path / "fits" / "report.html").read_text()


def test_stream_input_of_a_model_without_an_image_input_is_one_line(tmp_path, capsys):
    model = tmp_path / "dense.py"
    model.write_text(
        "import torch\n\ndef factory():\n    torch.manual_seed(0)\n"
        "    return torch.nn.Linear(8, 2).eval(), (torch.rand(1, 8),)\n"
    )
    code, _, err = run_cli(
        "build", f"{model}:factory", "-o", tmp_path / "out", "--stream-input", "--quiet", capsys=capsys
    )
    assert code == 2 and not (tmp_path / "out").exists()
    assert (
        err.strip()
        .splitlines()[-1]
        .endswith(
            "--stream-input needs one int8 image input (batch 1, NHWC) and no --stream; the model takes int8 [1, 8]"
        )
    )


@needs_toolchain
@pytest.mark.parametrize(
    "model,target,first,last,chunk,stream",
    [
        (Residual, "cortex-m4", 1, 4, 2, False),
        (Chain, "cortex-m4", 0, 4, 3, True),
        (Detector, "cortex-m55", 0, 6, 2, True),
        (Detector, "cortex-m4", 0, 6, 3, True),
    ],
)
def test_qemu_equals_golden(tmp_path, model, target, first, last, chunk, stream):
    """A residual block on M4; a streamed input on M4; branches with a streamed input on M55 (Helium)
    and on M4 (PReLU through its compile-time tables on both)."""
    compiled = _compiled(model, target)
    banded = _banded(compiled, first, last, chunk, stream)
    emit(banded, tmp_path / "out", "m")
    x = _sample(compiled)
    assert np.array_equal(
        run_on(banded, tmp_path / "out", "m", x, tmp_path / "build"), golden_outputs(compiled.graph, x)
    )


def _random_chain(rng) -> tuple:
    """A graph of 2-4 random spatial layers (conv, depthwise, max pool) on one small image: kernel
    1-5, stride 1-2, dilation 1-2, padding 0..reach at both edges (bottom as the output size
    implies); its layers, and a random int8 input."""
    from edgec.ir import Graph, Op, Tensor
    from edgec.ops.conv import conv_output_size

    height, width, channels = int(rng.integers(4, 24)), int(rng.integers(3, 9)), int(rng.integers(1, 5))
    graph = Graph()
    name = "x"
    graph.add_tensor(Tensor(name, (1, height, width, channels), 0.05, int(rng.integers(-5, 5))))
    for index in range(int(rng.integers(2, 5))):
        kind = rng.choice(["conv2d", "depthwise_conv2d", "max_pool2d"])
        kernel, stride, dilation = int(rng.integers(1, 6)), int(rng.integers(1, 3)), int(rng.integers(1, 3))
        if kind == "max_pool2d":
            dilation = 1
        reach = (kernel - 1) * dilation
        pad = int(rng.integers(0, reach // 2 + 1)) if kind != "max_pool2d" else int(rng.integers(0, kernel // 2 + 1))
        try:
            out_h = conv_output_size(height, kernel, stride, pad, pad, dilation)
            out_w = conv_output_size(width, kernel, stride, pad, pad, dilation)
        except ValueError:
            break
        c_out = channels if kind != "conv2d" else int(rng.integers(1, 5))
        out = f"t{index}"
        graph.add_tensor(Tensor(out, (1, out_h, out_w, c_out), 0.05, int(rng.integers(-5, 5))))
        attrs = {"stride": (stride, stride), "pad": (pad, pad, pad, pad), "act_min": -128, "act_max": 127}
        if kind == "max_pool2d":
            graph.tensors[out].zero_point = graph.tensors[name].zero_point
            attrs.update(kernel=(kernel, kernel))
        else:
            shape = (c_out, kernel, kernel, channels) if kind == "conv2d" else (1, kernel, kernel, channels)
            attrs.update(
                weight=rng.integers(-127, 128, shape).astype(np.int8),
                dilation=(dilation, dilation),
                bias=rng.integers(-500, 500, c_out).astype(np.int32),
                groups=1,
                ch_mult=1,
                multiplier=np.full(c_out, 1 << 30, np.int32),
                shift=np.full(c_out, -6, np.int32),
            )
        graph.ops.append(Op(f"{kind}_{index}", str(kind), [name], [out], attrs))
        name, height, width, channels = out, out_h, out_w, c_out
    graph.inputs, graph.outputs = ["x"], [name]
    x = rng.integers(-128, 128, graph.tensors["x"].shape).astype(np.int8)
    return graph, x


def test_random_chains_banded_equal_layer_by_layer():
    """Random geometries (kernels 1-5, strides, dilations, padding at both edges, odd heights) at
    several chunk heights, half with a streamed input: the banded golden -- which replays the C's
    actions on the output written over the input at the planned offset, or on the fetched input
    rows -- equals the layers run whole."""
    rng = np.random.default_rng(24)
    checked = 0
    for _ in range(60):
        graph, x = _random_chain(rng)
        if len(graph.ops) < 2:
            continue
        whole = sim.run(graph, [x])
        for chunk, stream in ((1, False), (2, True), (3, False), (5, True)):
            try:
                stage = make_stage(graph.ops, graph, chunk, stream=stream)
            except ValueError:  # a chunk reading only padding
                continue
            banded = KINDS[stage.kind].golden(stage, graph, [x])
            assert np.array_equal(banded, whole[graph.outputs[0]]), ([op.kind for op in graph.ops], chunk, stream)
            checked += 1
    assert checked >= 100


@pytest.fixture(scope="module")
def plane_prelu():
    torch.manual_seed(0)
    return quantize_model(
        PlanePrelu().eval(),
        example_inputs=(torch.rand(SHAPES[PlanePrelu]),),
        calibration=np.random.default_rng(0).random((8, *SHAPES[PlanePrelu][1:]), dtype=np.float32),
        warn=lambda _: None,
    )


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", ["host", "cortex-m4", "cortex-m55"])
def test_a_prelu_outside_a_stage_reads_tables_made_at_compile_time(plane_prelu, tmp_path, target):
    """Prelu.specialize: a per-channel PReLU over a channels-last map runs through one table per
    slope made at compile time (edgec_lut_channels_s8: 4 slopes, 1 KiB of flash, within
    PRELU_TABLES_MAX_BYTES), bit-exact; --opt size keeps no table in flash (edgec_prelu_s8)."""
    compiled = compile_for(plane_prelu, target)
    assert [op.kernel.function for op in compiled.graph.ops if op.kind == "prelu"] == ["edgec_lut_channels_s8"]
    emit(compiled, tmp_path / "out", "m")
    x = _sample(compiled)
    assert np.array_equal(
        run_on(compiled, tmp_path / "out", "m", x, tmp_path / "build"), golden_outputs(compiled.graph, x)
    )
    small = compile_for(plane_prelu, get_target(target).with_opt("size"))
    assert [op.kernel.function for op in small.graph.ops if op.kind == "prelu"] == ["edgec_prelu_s8"]


class PreluForms(nn.Module):
    """A per-channel PReLU of the input, then one slope; with `wide` channels, a 1x1 convolution
    and a per-channel PReLU of its output (channels last). Without it no layer is spatial and the
    tensors stay in PyTorch order (channels outer), a layout the lookup kernels of edgec.ops.lut
    do not take."""

    def __init__(self, wide: int):
        super().__init__()
        self.first, self.one = nn.PReLU(3), nn.PReLU()
        self.tail = nn.Sequential(nn.Conv2d(3, wide, 1), nn.PReLU(wide)) if wide else nn.Identity()
        with torch.no_grad():
            self.first.weight.copy_(torch.tensor([0.1, -0.3, 0.7]))
            if wide:
                self.tail[1].weight.copy_(torch.linspace(-0.5, 0.5, wide))

    def forward(self, x):
        return self.tail(self.one(self.first(x)))


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize(
    "wide,opt,kernels",
    [
        (0, "auto", ["edgec_prelu_s8_lookup", "edgec_lut_s8"]),
        (8, "auto", ["edgec_lut_channels_s8", "edgec_lut_s8", "edgec_lut_channels_s8"]),
        (8, "size", ["edgec_prelu_s8", "edgec_prelu_s8", "edgec_prelu_s8"]),  # no table in flash
        # 65 tables: 16,640 B, above PRELU_TABLES_MAX_BYTES; and more entries than elements (6x5x65)
        (65, "auto", ["edgec_lut_channels_s8", "edgec_lut_s8", "edgec_prelu_s8"]),
    ],
)
def test_prelu_kernel_follows_layout_and_flash_bound(tmp_path, wide, opt, kernels):
    """The per-channel PReLU of a PyTorch-order tensor reads its tables through
    edgec_prelu_s8_lookup, one slope runs edgec_lut_s8, a channels-last one edgec_lut_channels_s8,
    and the tables' flash bound sends a wide PReLU to edgec_prelu_s8; each bit-exact on the host
    (UBSan)."""
    torch.manual_seed(0)
    quantized = quantize_model(
        PreluForms(wide).eval(),
        example_inputs=(torch.rand(1, 3, 6, 5),),
        calibration=np.random.default_rng(0).standard_normal((8, 3, 6, 5)).astype(np.float32),
        warn=lambda _: None,
    )
    compiled = compile_for(quantized, get_target("host").with_opt(opt))
    assert [op.kernel.function for op in compiled.graph.ops if op.kind == "prelu"] == kernels
    emit(compiled, tmp_path / "out", "m")
    x = _sample(compiled)
    exe = build_host(tmp_path / "out", "m", tmp_path / "build", sanitize=True)
    assert np.array_equal(run_host(exe, x, output_bytes(compiled.graph)), golden_outputs(compiled.graph, x))


@pytest.mark.parametrize("stream", [False, True])
def test_verify_checks_a_stages_layers_one_by_one_and_the_stage_against_them(detector, stream):
    """verify's layer check judges each layer of a band stage fed the program's values (judged as
    one, a chain of layers compounds its roundings: PNet's stage under --ram 26K showed 4 steps) and
    fails a stage that departs from its layers run whole: here one action's pad_top moved."""
    from edgec.tools.verify import layer_agreement, qdq_reference

    banded = _banded(detector, 0, 6, 2, stream)
    samples = [np.random.default_rng(seed).random(SHAPES[Detector], dtype=np.float32) for seed in (1, 2)]
    reference = qdq_reference(banded, samples)
    rows = layer_agreement(banded, reference)
    assert [row["layer"] for row in rows] == [op.name for op in detector.graph.ops]
    assert all(row["checked"] and row["failure"] is None for row in rows if row["op"] != "reshape")

    stage = banded.graph.ops[0]
    actions = stage.attrs["actions"].copy()
    first_layer = int(np.nonzero(actions[:, 0] >= 0)[0][0])
    actions[first_layer, 5] += 1  # that band's pad_top: its rows shift by one
    stage.attrs = {**stage.attrs, "actions": actions}
    failures = [row["failure"] for row in layer_agreement(banded, reference) if row["failure"]]
    assert failures and all("band stage" in failure for failure in failures), failures
