"""RAM on the device, for real (generated C, arm-none-eabi-gcc, QEMU, host ASan/UBSan builds):
the reference models need at most 1 KiB besides the arena, with nothing per layer in RAM; test
builds check every layer's writes against the plan and catch a plan the kernels do not keep."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from edgec.backend.plan import check_plan
from edgec.errors import EdgecError
from edgec.ops.conv import is_pointwise
from edgec.pipeline import compile_model, emit
from edgec.targets import device
from edgec.tools.verify import compare, golden_outputs, quantized_inputs, run_on
from edgec.zoo import mlperf
from tests.data.models import all_ops_samples
from tests.device_support import ALL_OPS, needs_toolchain

RAM_BEYOND_ARENA_GOAL = 1024


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("model", sorted(mlperf.ZOO))
def test_ram_beyond_the_arena_is_under_1_kib_and_nothing_per_layer_is_in_ram(model, tmp_path):
    compiled = compile_model(
        f"{mlperf.__file__}:{model}",
        calibration=mlperf.calibration_data(model, 8, seed=0),
        target="cortex-m4",
        warn=lambda _: None,
    )
    emit(compiled, tmp_path / "model", "model")
    sample = quantized_inputs(compiled.graph, mlperf.calibration_data(model, 1, seed=1))[0]

    ram = device.ram_beyond_arena(compiled.target, tmp_path / "model", "model", sample, tmp_path / "build")

    # Weights, biases, requantization arrays and layer parameters are all const: flash only.
    assert ram.writable_sections == [".bss.model_arena"] and ram.data_bytes == ram.bss_bytes == 0
    assert 0 < ram.invoke_stack_bytes and ram.total_bytes <= RAM_BEYOND_ARENA_GOAL


def _all_ops(target: str):
    return compile_model(ALL_OPS, calibration=all_ops_samples(16, 0), target=target, warn=lambda _: None)


def _run(compiled, tmp_path) -> None:
    emit(compiled, tmp_path / "model", "model")
    inputs = quantized_inputs(compiled.graph, all_ops_samples(2, 1))
    outputs = run_on(compiled, tmp_path / "model", "model", inputs, tmp_path / "build")
    assert compare(golden_outputs(compiled.graph, inputs), outputs).exact


def _written_byte(error: EdgecError, layer: int) -> int:
    """The arena offset the write check reported for `layer` (the first byte it found changed)."""
    found = re.search(rf"model: layer {layer} wrote arena byte (-?\d+), outside its output and scratch", str(error))
    assert found, str(error)
    return int(found.group(1))


def _in_place_pointwise(compiled):
    return next(
        op
        for op in compiled.graph.ops
        if op.name in compiled.plan.in_place and op.kind == "conv2d" and is_pointwise(op.attrs)
    )


@pytest.mark.parametrize("target", ["host", pytest.param("cortex-m4", marks=needs_toolchain)])
@pytest.mark.usefixtures("edgec_cache")
def test_a_scratch_smaller_than_the_kernel_writes_is_caught(target, tmp_path):
    compiled = _all_ops(target)
    op = _in_place_pointwise(compiled)
    offset, size = compiled.plan.scratch[op.name]
    compiled.plan.scratch[op.name] = (offset, size - 8)
    assert check_plan(compiled.graph, compiled.plan, compiled.target) == [
        f"{op.name} needs {size} bytes of scratch, planned {size - 8}"
    ]

    with pytest.raises(EdgecError) as failure:
        _run(compiled, tmp_path)

    if target == "host":  # the portable 1x1 in-place kernel's scratch (C_out bytes): caught as it runs
        assert offset + size - 8 <= _written_byte(failure.value, compiled.graph.ops.index(op)) < offset + size
    else:  # the packed kernel's has an edgec_nn.h size: the generated C does not compile, naming the layer
        assert f"size of array 'model_{op.name}_scratch_too_small' is negative" in str(failure.value)


@pytest.mark.parametrize("target", ["host", pytest.param("cortex-m55", marks=needs_toolchain)])
@pytest.mark.usefixtures("edgec_cache")
def test_a_buffer_past_the_arena_end_hits_the_canary(target, tmp_path):
    compiled = _all_ops(target)
    last = compiled.graph.ops[-1]
    end = compiled.plan.arena_bytes
    compiled.plan = replace(compiled.plan, offsets={**compiled.plan.offsets, last.outputs[0]: end - 4})
    assert any("ends past" in p for p in check_plan(compiled.graph, compiled.plan, compiled.target))

    with pytest.raises(EdgecError) as failure:
        _run(compiled, tmp_path)

    assert end <= _written_byte(failure.value, len(compiled.graph.ops) - 1) < end + 6  # in the canary


@pytest.mark.usefixtures("edgec_cache")
def test_the_write_check_passes_a_correct_plan(tmp_path):
    _run(_all_ops("host"), tmp_path)
