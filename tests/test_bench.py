"""edgec bench for real: exact per-layer instruction counts under QEMU, identical run to run,
mapped onto the layers that emit code, with the program's flash and RAM."""

from __future__ import annotations

import json

import pytest

from edgec.targets import device, timing
from edgec.targets.toolchain import elf_memory
from tests.device_support import ALL_OPS, DIGITS, needs_toolchain
from tests.test_cli import run_cli

pytestmark = [needs_toolchain, pytest.mark.usefixtures("edgec_cache")]
JSON_KEYS = ["target", "total_instructions", "macs", "flash_bytes", "ram_bytes", "ram_beyond_arena", "layers"]
# Added with the timing model, after the keys above (older readers keep working).
CYCLE_KEYS = ["total_cycles", "ms", "clock_mhz", "flash_wait_states", "cycle_model", "part"]


def bench_json(capsys, *args) -> dict:
    code, out, err = run_cli("bench", *args, "--json", "--quiet", capsys=capsys)
    assert code == 0, err
    return json.loads(out)


def test_bench_counts_are_identical_run_to_run(tmp_path, small_digits_calib, capsys):
    args = (DIGITS / "digits.pt2", "--calib", small_digits_calib, "--target", "cortex-m55")
    first = bench_json(capsys, *args, "-o", tmp_path / "digits")
    second = bench_json(capsys, *args)

    assert first == second
    assert list(first) == JSON_KEYS + CYCLE_KEYS
    assert first["target"] == "cortex-m55"
    assert all(list(layer) == ["name", "op", "macs", "instructions", "cycles"] for layer in first["layers"])


def test_bench_reports_modelled_cycles_and_milliseconds_next_to_exact_instructions(small_digits_calib, capsys):
    # --opt speed: the same kernels at every wait state (--opt auto chooses them by the wait states)
    args = (DIGITS / "digits.pt2", "--calib", small_digits_calib, "--target", "cortex-m4", "--opt", "speed")
    typical = bench_json(capsys, *args)
    zero_wait = bench_json(capsys, *args, "--flash-wait", "0", "--mhz", "120")
    # --flash-wait drives --opt auto's choice too: without wait states it widens every DSP filter
    assert bench_json(capsys, *args[:-2], "--flash-wait", "0", "--mhz", "120") == zero_wait

    assert (typical["clock_mhz"], typical["flash_wait_states"]) == (168, 5)  # STM32F407VG, edgec.targets.timing.MEMORY
    assert (zero_wait["clock_mhz"], zero_wait["flash_wait_states"]) == (120, 0)
    for result in (typical, zero_wait):
        assert result["total_cycles"] == sum(layer["cycles"] for layer in result["layers"])
        assert result["ms"] == round(result["total_cycles"] / (result["clock_mhz"] * 1e3), 4)
        assert "estimate" in result["cycle_model"]
    # wait states cost cycles, never instructions
    assert [layer["instructions"] for layer in zero_wait["layers"]] == [
        layer["instructions"] for layer in typical["layers"]
    ]
    assert all(
        slow["cycles"] >= fast["cycles"] >= fast["instructions"] * 0.5
        for slow, fast in zip(typical["layers"], zero_wait["layers"])
    )
    assert typical["total_cycles"] > zero_wait["total_cycles"]

    code, out, _ = run_cli("bench", *args, "--quiet", capsys=capsys)
    assert code == 0 and f"{typical['total_cycles']:,}" in out and f"{typical['ms']:.3f} ms at 168 MHz" in out


def test_bench_on_a_named_part_with_the_sensitivity_of_its_estimate(small_digits_calib, capsys):
    """--part takes the published part's clock and wait states (edgec.targets.timing.PARTS); --sensitivity
    re-estimates with each uncertain part varied: the refill bounds order the totals, and the
    instructions never change."""
    args = (DIGITS / "digits.pt2", "--calib", small_digits_calib, "--target", "cortex-m4", "--opt", "speed")
    typical = bench_json(capsys, *args)
    l4 = bench_json(capsys, *args, "--part", "stm32l4r5", "--sensitivity")

    assert (l4["clock_mhz"], l4["flash_wait_states"], l4["part_name"]) == (120, 5, "stm32l4r5")
    assert l4["part"].startswith("STM32L4R5")
    assert [layer["instructions"] for layer in l4["layers"]] == [layer["instructions"] for layer in typical["layers"]]
    varied = l4["sensitivity"]
    assert list(varied) == [a.name for a in timing.SENSITIVITY]
    assert varied["branch refill 1"] < l4["total_cycles"] < varied["branch refill 3"]
    assert varied["fetch never stalls"] <= l4["total_cycles"] <= varied["no prefetch"]
    assert varied["IT folded (0 cycles)"] <= l4["total_cycles"]
    code, _, err = run_cli("bench", *args, "--target", "cortex-m7", "--part", "stm32l4r5", capsys=capsys)
    assert code == 2 and "a cortex-m4 part, not a cortex-m7 one" in err


def test_bench_without_a_timing_model_reports_instructions_only(capsys, small_digits_calib):
    result = bench_json(capsys, DIGITS / "digits.pt2", "--calib", small_digits_calib, "--target", "cortex-m3")
    assert list(result) == JSON_KEYS and "cycles" not in result["layers"][0]


def test_bench_maps_markers_to_the_layers_that_emit_code(tmp_path, small_digits_calib, capsys):
    result = bench_json(
        capsys, DIGITS / "digits.pt2", "--calib", small_digits_calib, "--target", "cortex-m4", "-o", tmp_path / "digits"
    )

    report = json.loads((tmp_path / "digits" / "report.json").read_text())
    assert "reshape" in [layer["op"] for layer in report["layers"]]  # a view: no code, no markers
    expected = [(layer["name"], layer["op"], layer["macs"]) for layer in report["layers"] if layer["op"] != "reshape"]
    assert [(layer["name"], layer["op"], layer["macs"]) for layer in result["layers"]] == expected
    assert all(layer["instructions"] > layer["macs"] for layer in result["layers"])
    assert result["total_instructions"] == sum(layer["instructions"] for layer in result["layers"])
    assert result["macs"] == report["macs"]
    assert result["ram_bytes"] >= report["arena_bytes"] + 8192  # arena in bss, plus the stack
    assert result["flash_bytes"] >= report["weights_bytes"]


def test_bench_of_every_kernel_with_sizes_from_the_elf(tmp_path):
    from edgec.pipeline import compile_model, emit
    from edgec.tools.verify import golden_outputs, quantized_inputs
    from tests.data.models import all_ops_samples

    compiled = compile_model(ALL_OPS, calibration=all_ops_samples(16, 0), target="cortex-m3", warn=lambda _: None)
    emit(compiled, tmp_path / "model", "model")
    sample = quantized_inputs(compiled.graph, all_ops_samples(1, 1))

    result = device.bench(compiled.target, tmp_path / "model", "model", sample[0], tmp_path / "build")

    assert {layer.op for layer in result.layers} == {op.kind for op in compiled.graph.ops} - {"reshape"}
    assert (result.output == golden_outputs(compiled.graph, sample)[0]).all()
    memory = elf_memory(tmp_path / "build" / "model_bench.elf")
    assert result.flash_bytes == memory["text"] + memory["rodata"] + memory["data"]
    assert result.ram_bytes == memory["data"] + memory["bss"] + memory["stack"]
    table = device.format_table(result, "all_ops")
    assert f"{result.total_instructions:,}" in table and "counted:" in table
    assert all(layer.name in table for layer in result.layers)


def test_bench_needs_a_target_that_runs(capsys):
    code, out, err = run_cli("bench", DIGITS / "digits.pt2", "--target", "host", capsys=capsys)
    assert code == 2 and out == ""
    assert err.startswith("edgec: error: host has no emulated board to run on")


def test_bench_profile_counts_every_instruction_by_function(tmp_path, small_digits_calib, capsys):
    args = (DIGITS / "digits.pt2", "--calib", small_digits_calib, "--target", "cortex-m4")
    plain = bench_json(capsys, *args)
    profiled = bench_json(capsys, *args, "--profile")

    functions = profiled.pop("functions")
    assert profiled == plain  # profiling changes no count
    # The whole run: every counted layer instruction, plus start-up and the test driver.
    assert sum(functions.values()) > plain["total_instructions"]
    assert list(functions.values()) == sorted(functions.values(), reverse=True)
    # --opt auto (the default) at the typical part's 5 wait states: the DSP convolutions (short filter
    # rows) widened to int16, the fully connected classifier compact
    assert functions["edgec_conv_s8_dsp_wide"] > 0 and functions["edgec_fully_connected_s8_dsp"] > 0
    assert functions.get("?", 0) == 0
    hot = next(iter(functions))
    assert not hot.startswith(("main", "Reset_Handler", "semihost", "mem"))  # a kernel, not the driver
