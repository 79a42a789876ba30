"""The differential fuzzer (tests/fuzz) on a fixed batch of seeds: random models built from every
operator family, compiled for the host, run with ASan/UBSan and the arena write checks, compared
byte for byte with the golden simulator, each layer checked against the quantized program. Every
model of the batch must compile and run bit-exact, every layer following its program (or departing
within a documented, computed bound): the batch's compile rate is 100 % for every family, and each
family is in at least FAMILY_MODELS of its models -- a regression that makes a family refused,
moves a layer by a few steps or crashes fails here, with a reproducer written next to the test's
temporary files. Longer runs: `make fuzz N=1000 TARGET=host|cortex-m4|...`."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from edgec.ops import unit_of
from tests.device_support import needs_toolchain
from tests.fuzz import runner
from tests.fuzz.generator import FAMILIES, generate, model_source

BATCH = 16
FAMILY_MODELS = 2  # the fewest models of the batch each family is in


def _uses(seeds) -> Counter:
    return Counter(family for seed in seeds for family in {layer.family for layer in generate(seed).layers})


def batch_seeds() -> list[int]:
    """Seeds 0..BATCH-1, then each later seed using a family the batch has in fewer than
    FAMILY_MODELS models (a newly registered family joins the batch by itself)."""
    seeds = list(range(BATCH))
    seed = BATCH
    while any(_uses(seeds)[family] < FAMILY_MODELS for family in FAMILIES):
        if any(_uses(seeds)[layer.family] < FAMILY_MODELS for layer in generate(seed).layers):
            seeds.append(seed)
        seed += 1
    return seeds


SEEDS = batch_seeds()


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@pytest.mark.parametrize("seed", SEEDS)
def test_random_model_is_bit_exact_on_the_host(seed, fuzz_dir):
    spec = generate(seed)
    outcome = runner.check_spec(spec, "host", fuzz_dir / "work")
    if outcome.verdict not in ("ok", "inaccurate", "bounded"):  # compiled, bit-exact, following its program
        path = runner.write_reproducer(spec, outcome, "host", fuzz_dir)
        pytest.fail(
            f"seed {seed} ({', '.join(sorted({layer.family for layer in spec.layers}))}): {outcome.verdict} "
            f"at {outcome.phase}: {outcome.message}\nreproducer: {path}\n{outcome.detail}"
        )
    print(f"seed {seed}: {outcome.verdict} {outcome.message} ({' '.join(outcome.kinds)})")


def test_the_batch_compiles_mostly_and_covers_every_family():
    """Generation alone (cheap): every family in the batch, deterministic per seed."""
    specs = [generate(seed) for seed in SEEDS]
    assert min(_uses(SEEDS)[family] for family in FAMILIES) >= FAMILY_MODELS
    recurrent = [layer for spec in specs for layer in spec.layers if layer.family == "recurrent"]
    assert recurrent, "the batch runs a recurrent layer"
    assert [model_source(s) for s in specs] == [model_source(generate(seed)) for seed in SEEDS]
    assert len({model_source(s) for s in specs}) == len(specs)


def _write_model(tmp_path, forward: str) -> str:
    path = tmp_path / "model.py"
    path.write_text(
        "import numpy as np\nimport torch\nimport torch.nn as nn\n\n\n"
        "class FuzzModel(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.conv = nn.Conv2d(2, 4, 3)\n\n"
        f"    def forward(self, x):\n        return {forward}\n\n\n"
        "def factory():\n    torch.manual_seed(0)\n    return FuzzModel().eval(), (torch.zeros(1, 2, 5, 5),)\n\n\n"
        "def samples(stream):\n"
        "    return np.random.default_rng(len(stream)).standard_normal((4, 2, 5, 5)).astype(np.float32)\n"
    )
    return path


def test_a_refusal_is_a_failure_unless_a_documented_limit(tmp_path):
    """Every family draws forms the README lists: refusing one fails the run, counted per family;
    only a documented limit (the QEMU board's memory) is not a failure."""
    outcome = runner.check_model_file(_write_model(tmp_path, "torch.atan(self.conv(x))"), "host", tmp_path / "work")
    assert (outcome.verdict, outcome.phase) == ("refused", "compile") and outcome.failed
    assert "atan" in outcome.message
    batch = runner.Batch("host", {1: outcome}, families={1: ["conv", "lut"]})
    assert batch.counts()["refused"] == 1
    assert list(batch.summary()["refusals"]) == [
        "<model>: cannot compile N operator use: | aten.atan.default (unsupported operator): <line>"
    ]
    assert batch.family_rates()["lut"] == {"models": 1, "compiled": 0, "refused": 1, "limit": 0}
    limit = (
        "the model program does not fit QEMU's mps2-an385 board for cortex-m3: its RAM (4,194,304 B) overflows by 12 B"
    )
    assert runner.refusal_verdict(limit) == "limit" and not runner.Outcome("limit", "run", limit).failed


def test_a_bilinear_departure_passes_only_within_its_computed_bound():
    """TFLite's bilinear positions (1/1024, the scale rounded) against PyTorch's: the bound is
    e_h * d_h + e_w * d_w + 1 steps for this layer's position errors e and neighbour differences d."""
    from edgec.ops.movement import bilinear_axis_table

    table = bilinear_axis_table(5, 7, False, True)
    error = runner._position_error(table, 5, False)
    assert 0 < error < 3 / 1024  # the scale rounded to 1/1024, the error grows along the axis
    assert runner._position_error(bilinear_axis_table(4, 8, False, True), 4, False) == 0.0  # x2: exact


def test_an_internal_error_is_a_crash_with_a_reproducer_that_reruns(tmp_path, monkeypatch):
    def broken_golden(graph, inputs):
        raise IndexError("simulated internal error")

    monkeypatch.setattr(runner.verify, "golden_outputs", broken_golden)
    spec = generate(3)
    outcome = runner.check_spec(spec, "host", tmp_path / "work")
    assert (outcome.verdict, outcome.phase) == ("crash", "golden") and outcome.failed
    assert outcome.message == "IndexError: simulated internal error"
    path = runner.write_reproducer(spec, outcome, "host", tmp_path)
    assert path == tmp_path / "crash" / "seed_3.py"
    assert runner.spec_from_file(path) == spec
    assert runner.rerun_command(path, "host") in path.read_text()
    assert runner.check_model_file(path, "host", tmp_path / "work").message == outcome.message


def test_a_mismatch_is_reported_with_the_first_differing_byte(tmp_path, monkeypatch):
    run_host = runner.verify.run_host

    def off_by_one(exe, inputs, output_size):
        output = run_host(exe, inputs, output_size).copy()
        output[1, 0] = output[1, 0] + np.int8(1) if output[1, 0] < 127 else 126
        return output

    monkeypatch.setattr(runner.verify, "run_host", off_by_one)
    outcome = runner.check_model_file(_write_model(tmp_path, "self.conv(x)"), "host", tmp_path / "work")
    assert outcome.verdict == "mismatch" and outcome.failed
    assert outcome.message.startswith("1 of 4 samples differ in 1 bytes; first: sample 1 byte 0")


def _plant_arena_write(monkeypatch):
    """Every fuzz build checks arena writes: make layer 0 of each emitted model write the byte
    just below the arena (the guard's canary), which the check must report."""
    real_emit = runner.emit

    def emit_with_stray_write(compiled, out_dir, name):
        real_emit(compiled, out_dir, name)
        source = out_dir / f"{name}.c"
        source.write_text(
            source.read_text().replace("EDGEC_LAYER_BEGIN(0);", f"EDGEC_LAYER_BEGIN(0);\n    {name}_arena[-1] = 0;", 1)
        )

    monkeypatch.setattr(runner, "emit", emit_with_stray_write)


def test_a_write_outside_the_arena_is_a_crash_on_the_host(tmp_path, monkeypatch):
    _plant_arena_write(monkeypatch)
    outcome = runner.check_model_file(_write_model(tmp_path, "self.conv(x)"), "host", tmp_path / "work")
    assert (outcome.verdict, outcome.phase) == ("crash", "run")
    assert "layer 0 wrote arena byte -1, outside its output and scratch" in outcome.message + outcome.detail


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
def test_a_write_outside_the_arena_is_a_crash_on_a_device(tmp_path, monkeypatch):
    _plant_arena_write(monkeypatch)
    outcome = runner.check_model_file(_write_model(tmp_path, "self.conv(x)"), "cortex-m4", tmp_path / "work")
    assert (outcome.verdict, outcome.phase) == ("crash", "run")
    assert "layer 0 wrote arena byte -1" in outcome.message + outcome.detail


# -- the modes: int16 layers, --stream, several outputs; each passes a sound model and catches a
# planted bug of its own kind ---------------------------------------------------------------------

INT16_SEED, STREAM_SEED, MULTI_SEED = 1, 1, 1  # sound models of each mode, seconds each


def _with_emitted_change(monkeypatch, change):
    """Every emitted model's C source rewritten by change(source, name) (a planted codegen bug)."""
    real_emit = runner.emit

    def emit_changed(compiled, out_dir, name):
        real_emit(compiled, out_dir, name)
        source = out_dir / f"{name}.c"
        source.write_text(change(source.read_text(), name))

    monkeypatch.setattr(runner, "emit", emit_changed)


def test_int16_mode_builds_int16_layers_and_catches_a_shift_off_by_one(tmp_path, monkeypatch):
    spec = generate(INT16_SEED, "int16")
    assert spec.int16 and "BUILD = {'int16_layers': ['m" in model_source(spec)
    outcome = runner.check_spec(spec, "host", tmp_path / "work")
    assert outcome.verdict == "ok", outcome.message
    assert "conv2d_s16" in outcome.kinds

    real_compile = runner.compile_model

    def one_channel_shift_off(*args, **kwargs):  # a lowering bug in an int16 layer's output stage
        compiled = real_compile(*args, **kwargs)
        desc = next(op for op in compiled.graph.ops if unit_of(op).kind == "conv2d_s16").attrs["desc"]
        desc["shift"] = desc["shift"].copy()
        desc["shift"][0] -= 1
        return compiled

    monkeypatch.setattr(runner, "compile_model", one_channel_shift_off)
    outcome = runner.check_spec(spec, "host", tmp_path / "work")
    assert (outcome.verdict, outcome.phase) == ("departs", "agreement") and "conv2d_0" in outcome.message


def test_stream_mode_runs_the_streaming_build_and_catches_a_state_forgotten(tmp_path, monkeypatch):
    spec = generate(STREAM_SEED, "stream")
    assert spec.input_shape[0] > 1 and spec.layers[0].family == "recurrent"
    outcome = runner.check_spec(spec, "host", tmp_path / "work")
    assert outcome.verdict == "ok", outcome.message

    def forget_state(source, name):  # the streaming C resets its state at every invoke
        return (
            source.replace(
                "EDGEC_LAYER_BEGIN(0);", f"EDGEC_LAYER_BEGIN(0);\n    {name}_reset_state_in(state_memory);", 1
            )
            if "state_memory" in source
            else source
        )

    _with_emitted_change(monkeypatch, forget_state)
    outcome = runner.check_spec(spec, "host", tmp_path / "work")
    assert (outcome.verdict, outcome.phase) == ("mismatch", "stream") and outcome.message.startswith("--stream: ")


def test_multi_output_mode_checks_every_output_and_catches_one_freed_early(tmp_path, monkeypatch):
    spec = generate(MULTI_SEED, "multi")
    assert spec.outputs
    outcome = runner.check_spec(spec, "host", tmp_path / "work")
    assert outcome.verdict == "ok", outcome.message

    real_compile = runner.compile_model

    def first_output_freed_early(*args, **kwargs):  # the plan reuses an intermediate output's slot
        compiled = real_compile(*args, **kwargs)
        graph = compiled.graph
        first, last = (graph.storage(name) for name in (graph.outputs[0], graph.outputs[-1]))
        compiled.plan.offsets[first] = compiled.plan.offsets[last]
        return compiled

    monkeypatch.setattr(runner, "compile_model", first_output_freed_early)
    outcome = runner.check_spec(spec, "host", tmp_path / "work")
    assert (outcome.verdict, outcome.phase) == ("mismatch", "compare")
