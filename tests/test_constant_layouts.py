"""`--opt auto` (edgec/passes/constant_layouts.py): each DSP layer's filter widened to int16 only
where the timing model estimates it faster at the part's flash wait states, then narrowed back
(least reused first) to its widening allowance and the flash budget; the choice and its reasons
printed by `edgec build`; and, measured under QEMU, auto's estimated cycles against --opt speed and --opt size."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from edgec.backend.codegen import layer_constants_bytes
from edgec.passes import constant_layouts
from edgec.passes.constant_layouts import WIDENING_ALLOWANCE, WIDENING_FLOOR_BYTES, weight_reuse, widening
from edgec.pipeline import compile_for, emit, quantize_model
from edgec.targets import device, timing
from edgec.targets.cores import get_target
from edgec.tools.verify import quantized_inputs
from edgec.zoo import mlperf
from tests.device_support import DIGITS, ROOT, needs_toolchain
from tests.test_cli import run_cli

M4 = get_target("cortex-m4")


@pytest.mark.parametrize(
    "kind,filter_bytes,out_channels,target,flash_wait,wide,reason",
    [
        # no wait states: fewer instructions win, but for fully connected layers on the dual-issue M7
        ("conv2d", 4096, 64, "cortex-m4", 0, True, "no flash wait states"),
        ("fully_connected", 768, 12, "cortex-m4", 0, True, "no flash wait states"),
        ("conv2d", 4096, 64, "cortex-m33", 0, True, "no flash wait states"),
        ("fully_connected", 768, 12, "cortex-m7", 0, False, "dual-issue core"),
        # no flash data cache (the M33's part): every widened read pays the wait states
        (
            "conv2d",
            128,
            16,
            "cortex-m33",
            2,
            False,
            "no flash data cache on the part: every widened filter read pays the 2 wait states",
        ),
        # fully connected: each filter byte read once, even when it would fit the cache
        ("fully_connected", 48, 2, "cortex-m4", 1, False, "each filter byte is read once"),
        ("fully_connected", 16384, 128, "cortex-m7", 7, False, "each filter byte is read once"),
        # convolutions: widened filter + 16 B per channel within the data cache (M4: 8 lines of 16 B) ...
        ("conv2d", 48, 2, "cortex-m4", 7, True, "fit the 128 B flash data cache"),
        ("conv2d", 56, 2, "cortex-m4", 7, False, "over the 128 B flash data cache, and over 5 wait states"),
        ("conv2d", 4096, 64, "cortex-m7", 7, True, "fit the 16,384 B flash data cache"),
        ("conv2d", 8192, 128, "cortex-m7", 7, False, "over the 16,384 B flash data cache"),
        # ... or few wait states, or a few more for short rows (<= 128 B of filter per output channel)
        ("conv2d", 16384, 64, "cortex-m4", 3, True, "at most 3 wait states"),
        ("conv2d", 512, 32, "cortex-m4", 5, True, "at most 128 B of filter per output channel"),
        ("conv2d", 8192, 64, "cortex-m4", 5, True, "at most 128 B of filter per output channel"),
        ("conv2d", 8256, 64, "cortex-m4", 4, False, "over 128 B per output channel"),
        (
            "conv2d",
            9216,
            64,
            "cortex-m4",
            5,
            False,
            "over the 128 B flash data cache, and over 128 B per output channel",
        ),
        ("conv2d", 2048, 64, "cortex-m4", 6, False, "over 5 wait states"),
    ],
)
def test_widening_rule(kind, filter_bytes, out_channels, target, flash_wait, wide, reason):
    verdict = widening(kind, filter_bytes, out_channels, target, flash_wait)
    assert verdict.wide is wide and reason in verdict.reason, verdict


def test_widening_rule_reads_the_parts_memory_facts(monkeypatch):
    """The cache the rule checks is edgec.targets.timing.MEMORY's, not a copy of its numbers."""
    m4 = timing.MEMORY["cortex-m4"]
    assert widening("conv2d", 48, 2, "cortex-m4", 7).wide
    monkeypatch.setitem(timing.MEMORY, "cortex-m4", replace(m4, dcache_lines=0))
    assert not widening("conv2d", 48, 2, "cortex-m4", 7).wide
    assert not widening("conv2d", 512, 32, "cortex-m4", 1).wide
    monkeypatch.setitem(timing.MEMORY, "cortex-m4", replace(m4, dcache_lines=1024))
    assert widening("conv2d", 4096, 64, "cortex-m4", 7).wide


@pytest.fixture(scope="module")
def ds_cnn():
    return quantize_model(
        f"{ROOT / 'edgec' / 'zoo' / 'mlperf.py'}:ds_cnn",
        calibration=mlperf.calibration_data("ds_cnn", 16, 0),
        warn=lambda _: None,
    )


def test_auto_at_the_typical_wait_states_widens_ds_cnns_most_reused_convolutions_within_its_allowance(ds_cnn):
    """At the STM32F407's 5 wait states every DS-CNN convolution has at most 128 B of filter per
    output channel (measured faster widened), and its classifier is fully connected (compact).
    Widening all five would add 55 % to the constants: auto widens the most reused ones within its
    allowance (20 % of the compact constants, at least 8 KiB) and says which it kept compact."""
    auto, size = compile_for(ds_cnn, M4), compile_for(ds_cnn, M4.with_opt("size"))
    compact = constants_bytes(size)
    allowance = compact + max(int(WIDENING_ALLOWANCE * compact), WIDENING_FLOOR_BYTES)
    assert compact < constants_bytes(auto) <= allowance
    first, *reasons = auto.choices
    wide = _wide_reuse(auto, True)
    assert 0 < len(wide) < 5
    assert first.startswith(
        f"--opt auto: {len(wide)} of 6 DSP layers with int16-widened filters, chosen by the cycles "
        "estimated on cortex-m4 at 5 flash wait states (the typical part's; set yours with "
        "--flash-wait)"
    ), first
    assert reasons[0].startswith(
        f"  widened ({len(wide)}): at most 128 B of filter per output channel: up to 5 wait states the instructions "
        "saved outweigh twice the flash reads: "
    )
    assert reasons[1].startswith("  kept compact (1): fully connected: each filter byte is read once")
    assert reasons[2].startswith(
        f"  kept compact ({5 - len(wide)}) within --opt auto's widening allowance ({allowance:,} B of constants)"
    )
    assert max(_wide_reuse(auto, False, kind="conv2d")) <= min(wide)


def test_auto_without_wait_states_widens_the_most_reused_within_its_allowance(ds_cnn):
    """At 0 wait states every layer is faster widened: auto widens the most reused within its
    allowance, and a model that fits with --opt size is never refused."""
    zero_wait = M4.with_flash_wait(0)
    flash = {opt: constants_bytes(compile_for(ds_cnn, zero_wait.with_opt(opt))) for opt in ("size", "speed")}
    assert flash["speed"] > flash["size"]
    auto = compile_for(ds_cnn, zero_wait)
    allowance = flash["size"] + max(int(WIDENING_ALLOWANCE * flash["size"]), WIDENING_FLOOR_BYTES)
    assert flash["size"] < constants_bytes(auto) <= allowance < flash["speed"]
    assert auto.choices[0].startswith(
        f"--opt auto: {len(_wide_reuse(auto, True))} of 6 DSP layers with int16-widened filters, chosen by the "
        "cycles estimated on cortex-m4 at 0 flash wait states (--flash-wait)"
    )
    assert auto.choices[1].startswith("  widened (")
    assert "no flash wait states" in auto.choices[1]
    assert max(_wide_reuse(auto, False)) <= min(_wide_reuse(auto, True))

    at_size = compile_for(ds_cnn, zero_wait.with_budget(flash=flash["size"]))
    assert constants_bytes(at_size) == flash["size"]
    assert compile_for(ds_cnn, get_target("cortex-m55")).choices == []  # Helium: no layout to choose
    assert compile_for(ds_cnn, M4.with_opt("speed")).choices == []


def test_a_flash_budget_below_the_allowance_keeps_the_least_reused_layers_compact(ds_cnn, monkeypatch):
    """Under a flash budget tighter than the allowance (here made unbounded), the layers whose
    filter bytes are read the fewest times per inference stay compact first."""
    monkeypatch.setattr(constant_layouts, "WIDENING_ALLOWANCE", 10.0)
    zero_wait = M4.with_flash_wait(0)
    flash = {opt: constants_bytes(compile_for(ds_cnn, zero_wait.with_opt(opt))) for opt in ("size", "speed")}
    assert constants_bytes(compile_for(ds_cnn, zero_wait)) == flash["speed"]
    budget = (flash["size"] + flash["speed"]) // 2
    tight = compile_for(ds_cnn, zero_wait.with_budget(flash=budget))
    assert flash["size"] <= constants_bytes(tight) <= budget
    wide, narrow = _wide_reuse(tight, True), _wide_reuse(tight, False)
    assert wide and narrow and max(narrow) <= min(wide)
    assert tight.choices[-1].startswith(f"  kept compact ({len(narrow)}) to fit the {budget:,} B flash budget")
    assert all(
        op.attrs["layout_reason"] == f"kept compact to fit the {budget:,} B flash budget"
        for op in tight.graph.ops
        if op.attrs.get("isa") == "dsp" and "wide" in op.attrs and not op.attrs["wide"]
    )


def _wide_reuse(compiled, wide: bool, kind: str | None = None) -> list[float]:
    """The weight reuse of the DSP layers whose filter is (or is not) widened."""
    return [
        weight_reuse(op, compiled.graph)
        for op in compiled.graph.ops
        if op.attrs.get("isa") == "dsp" and "wide" in op.attrs and op.attrs["wide"] == wide
        if kind is None or op.kind == kind
    ]


def test_build_prints_the_choice_and_the_report_gives_each_layers_reason(tmp_path, small_digits_calib, capsys):
    args = ("build", DIGITS / "digits.pt2", "--calib", small_digits_calib, "--target", "cortex-m4", "--quiet")
    code, out, err = run_cli(*args, "-o", tmp_path / "typical", capsys=capsys)
    assert code == 0, err
    assert (
        "--opt auto: 3 of 4 DSP layers with int16-widened filters, chosen by the cycles estimated on cortex-m4 "
        "at 5 flash wait states (the typical part's; set yours with --flash-wait)"
    ) in out
    assert "  widened (3): at most 128 B of filter per output channel" in out
    assert "  kept compact (1): fully connected: each filter byte is read once" in out
    layers = {
        layer["name"]: layer for layer in json.loads((tmp_path / "typical" / "report.json").read_text())["layers"]
    }
    assert layers["conv2d_0"]["kernel"] == "edgec_conv_s8_dsp_wide"
    assert layers["fully_connected_10"]["kernel"] == "edgec_fully_connected_s8_dsp"
    assert "int8 filter (--opt auto: fully connected: each filter byte" in layers["fully_connected_10"]["kernel_reason"]
    assert "filter widened to int16 (--opt auto: at most 128 B" in layers["conv2d_0"]["kernel_reason"]

    code, out, err = run_cli(*args, "--flash-wait", "0", "-o", tmp_path / "zero_wait", capsys=capsys)
    assert code == 0, err
    assert (
        "--opt auto: 4 of 4 DSP layers with int16-widened filters" in out
        and "at 0 flash wait states (--flash-wait)" in out
    )
    report = json.loads((tmp_path / "zero_wait" / "report.json").read_text())
    assert all(
        layer["kernel"].endswith("_dsp_wide")
        for layer in report["layers"]
        if layer["op"] in ("conv2d", "fully_connected")
    )


def test_python_api_takes_the_flash_wait_states():
    import edgec

    calibration = np.load(DIGITS / "calib.npy")[:16]
    compiled = edgec.compile(
        str(DIGITS / "digits.pt2"), calibration=calibration, target="cortex-m4", flash_wait=0, progress=False
    )
    assert compiled.target.flash_wait == 0
    assert compiled.compiled.choices[0].startswith("--opt auto: 4 of 4 DSP layers with int16-widened filters")
    with pytest.raises(edgec.EdgecError, match="--flash-wait -1"):
        edgec.compile(
            str(DIGITS / "digits.pt2"), calibration=calibration, target="cortex-m4", flash_wait=-1, progress=False
        )


@pytest.mark.parametrize("command", ["build", "verify", "bench"])
def test_flash_wait_is_an_option_of_every_compiling_command(command, capsys):
    code, out, _ = run_cli(command, "--help", capsys=capsys)
    assert code == 0 and "--flash-wait" in out
    output = [] if command == "verify" else ["-o", "unused"]
    code, _, err = run_cli(command, DIGITS / "digits.pt2", "--flash-wait", "-1", *output, capsys=capsys)
    assert code == 2 and "Invalid value for '--flash-wait'" in err


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
def test_auto_is_estimated_between_speed_and_size(ds_cnn, tmp_path):
    """DS-CNN on cortex-m4 at its typical part's wait states, measured under QEMU: auto's estimated
    cycles (the bench's total) are no more than --opt size's and no fewer than --opt speed's, which
    spends 55 % more constants flash on them."""
    sample = quantized_inputs(compile_for(ds_cnn, M4).graph, [mlperf.calibration_data("ds_cnn", 1, 1)])[0]
    cycles = {}
    for opt in ("auto", "speed", "size"):
        compiled = compile_for(ds_cnn, M4.with_opt(opt))
        emit(compiled, tmp_path / opt, "model")
        result = device.bench(compiled.target, tmp_path / opt, "model", sample, tmp_path / f"build_{opt}")
        assert result.timing.flash_wait == timing.MEMORY["cortex-m4"].flash_wait
        cycles[opt] = result.total_cycles
    assert cycles["speed"] < cycles["auto"] < cycles["size"], cycles


def constants_bytes(compiled) -> int:
    return sum(layer_constants_bytes(op, compiled.graph) for op in compiled.graph.ops)
