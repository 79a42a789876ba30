"""The differential fuzzer (tests/fuzz) on a fixed batch of seeds: random models built from every
operator family, compiled for the host, run with ASan/UBSan and the arena write checks, compared
byte for byte with the golden simulator, each layer checked against the quantized program. Any
mismatch, unexplained departure or crash fails, with a reproducer written next to the test's
temporary files. Longer runs: `make fuzz N=1000 TARGET=host|cortex-m4|...`."""
from __future__ import annotations

import numpy as np
import pytest

from tests.fuzz import runner
from tests.fuzz.generator import FAMILIES, generate, model_source

BATCH = 16


def batch_seeds() -> list[int]:
    """Seeds 0..BATCH-1, then the first later seed using each family the batch has not used yet
    (a newly registered family joins the batch by itself)."""
    seeds = list(range(BATCH))
    missing = set(FAMILIES) - {layer.family for seed in seeds for layer in generate(seed).layers}
    seed = BATCH
    while missing:
        used = {layer.family for layer in generate(seed).layers}
        if used & missing:
            seeds.append(seed)
            missing -= used
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
    if outcome.failed:
        path = runner.write_reproducer(spec, outcome, "host", fuzz_dir)
        pytest.fail(f"seed {seed}: {outcome.verdict} at {outcome.phase}: {outcome.message}\n"
                    f"reproducer: {path}\n{outcome.detail}")
    print(f"seed {seed}: {outcome.verdict} {outcome.message} ({' '.join(outcome.kinds)})")


def test_the_batch_compiles_mostly_and_covers_every_family():
    """Generation alone (cheap): every family in the batch, deterministic per seed."""
    specs = [generate(seed) for seed in SEEDS]
    assert {layer.family for spec in specs for layer in spec.layers} == set(FAMILIES)
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
        "def samples(stream):\n    return np.random.default_rng(len(stream)).standard_normal((4, 2, 5, 5)).astype(np.float32)\n")
    return path


def test_a_clean_refusal_is_counted_apart_from_failures(tmp_path):
    outcome = runner.check_model_file(_write_model(tmp_path, "torch.atan(self.conv(x))"), "host", tmp_path / "work")
    assert (outcome.verdict, outcome.phase) == ("refused", "compile") and not outcome.failed
    assert "atan" in outcome.message
    batch = runner.Batch("host", {1: outcome})
    assert batch.counts()["refused"] == 1
    assert list(batch.summary()["refusals"]) == ["<model>: cannot compile N operator use: | aten.atan.default (unsupported operator): <line>"]


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
