"""edgec on ExecuTorch's Cortex-M operator tests, each model and example input as its test file
builds it: every case must compile and verify bit-exact on the host, or be refused with one line
(EdgecError); anything else is an internal error. Prints one line per case that is not verified and
the counts.

ExecuTorch is not an edgec dependency and none of its code is in this repository: the test files
are executed from the user's checkout. Their `executorch.*` imports resolve to the checkout's own
files for the operator test modules (backends/cortex_m/test/ops, backends/test/suite/operators),
to a two-definition stand-in for the tester (McuTestCase, ramp_tensor: what the cases are made of)
and to inert placeholders for the rest (the test harness, quantizer and dialect objects the test
functions use, which this script never calls). Run by hand, not in CI:

    git clone https://github.com/pytorch/executorch    # or any checkout
    PYTHONPATH=. python3 scripts/executorch_op_cases.py /path/to/executorch [name-filter]

Calibration is the example input itself (as ExecuTorch's tester calibrates) and 15 samples drawn
uniformly within each example input's range; verification runs the example input and 7 other such
samples. The models' random initial weights are seeded (torch.manual_seed(0) before the test files
are executed), so a run is repeatable.
"""

from __future__ import annotations

import copy
import importlib.abc
import importlib.util
import re
import sys
import types
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import edgec  # noqa: E402
import edgec.api  # noqa: E402
from edgec.errors import EdgecError  # noqa: E402

OPS_DIR = "backends/cortex_m/test/ops"
REAL_PACKAGES = ("executorch.backends.cortex_m.test.ops", "executorch.backends.test.suite.operators")
TESTER = "executorch.backends.cortex_m.test.tester"
VERIFY_SAMPLES = 8
CALIBRATION_SAMPLES = 16


@dataclass
class McuTestCase:
    """A case as the test files write it: a model and its example inputs (or a function giving them)."""

    model: torch.nn.Module
    example_inputs: Any

    def get_example_inputs(self) -> tuple:
        return self.example_inputs() if callable(self.example_inputs) else self.example_inputs


def ramp_tensor(start: float, end: float, shape: tuple[int, ...]) -> torch.Tensor:
    """`shape` filled with evenly spaced values from start to end, in C order."""
    return torch.linspace(start, end, steps=int(np.prod(shape))).reshape(shape)


class _Placeholder:
    """Anything the tests use but this script never runs: every attribute, call, subscript and
    base class works and does nothing; used as a decorator it leaves the function as it is."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return args[0] if len(args) == 1 and callable(args[0]) and not kwargs else _Placeholder()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Placeholder()

    def __getitem__(self, key):
        return _Placeholder()

    def __mro_entries__(self, bases):
        return (_Placeholder,)


class _PlaceholderModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Placeholder()


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, checkout: Path):
        self.checkout = checkout

    def find_spec(self, name, path=None, target=None):
        if name != "executorch" and not name.startswith("executorch."):
            return None
        relative = Path(*name.split(".")[1:])
        if name.startswith(REAL_PACKAGES) and (self.checkout / relative).with_suffix(".py").is_file():
            return importlib.util.spec_from_file_location(name, (self.checkout / relative).with_suffix(".py"))
        return importlib.util.spec_from_loader(name, self, is_package=True)

    def create_module(self, spec):
        module = _PlaceholderModule(spec.name)
        module.__path__ = []
        if spec.name == TESTER:
            module.McuTestCase, module.ramp_tensor = McuTestCase, ramp_tensor
        return module

    def exec_module(self, module):
        pass


def load_cases(checkout: Path) -> dict[str, McuTestCase]:
    """Every McuTestCase in a module-level dict of the checkout's Cortex-M operator test files."""
    sys.meta_path.insert(0, _Finder(checkout))
    torch.manual_seed(0)
    cases = {}
    for path in sorted((checkout / OPS_DIR).glob("test_*.py")):
        module = importlib.import_module(f"executorch.{OPS_DIR.replace('/', '.')}.{path.stem}")
        for table_name, table in vars(module).items():
            if isinstance(table, dict) and table and all(isinstance(_case(v), McuTestCase) for v in table.values()):
                cases.update({f"{path.stem}:{table_name}:{key}": _case(v) for key, v in table.items()})
    return cases


def _case(value):
    """A table's value: a McuTestCase, or a variant holding one as `.case` (test_linear.py)."""
    return value if isinstance(value, McuTestCase) else getattr(value, "case", None)


def samples_like(example: tuple, count: int, seed: int) -> list[np.ndarray]:
    """The example input and `count - 1` samples uniform within its range, per tensor input."""
    rng = np.random.default_rng(seed)
    samples = []
    for x in example:
        x = x.detach().float().numpy()
        low, high = float(x.min()), float(x.max())
        drawn = rng.uniform(low, high, (count - 1, *x.shape)).astype(np.float32)
        samples.append(np.concatenate([x[None], drawn]))
    return samples


def run_case(case: McuTestCase) -> tuple[str, str]:
    """('verified' | 'refused' | 'verify failed' | 'internal error', detail): refused is an
    EdgecError before any C ran, verify failed one from verify (a mismatch, a layer off the program)."""
    stage = "refused"
    try:
        example = case.get_example_inputs()
        example = tuple(example) if isinstance(example, (tuple, list)) else (example,)
        tensors = tuple(x for x in example if isinstance(x, torch.Tensor))
        compiled = edgec.compile(
            copy.deepcopy(case.model),
            example,
            target="host",
            progress=False,
            calibration=samples_like(tensors, CALIBRATION_SAMPLES, seed=0) or None,
        )
        stage = "verify failed"
        result = compiled.verify(samples_like(tensors, VERIFY_SAMPLES, seed=1), count=VERIFY_SAMPLES)
        return "verified", str(result)
    except EdgecError as exc:
        return stage, str(exc)
    except Exception as exc:  # noqa: BLE001 -- what this script counts
        return "internal error", f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"


def reason(message: str) -> str:
    """A refusal's kind: its problem (a "cannot compile" list's first entry) without the place,
    numbers and shapes."""
    lines = message.splitlines()
    problem = (lines[1] if len(lines) > 1 else lines[0]).strip()
    problem = re.split(r" at |: module |: \w+\.py:\d+", problem)[0]
    return re.sub(r"\d+", "#", re.sub(r"\[[^\]]*\]", "[..]", problem))[:110]


def main(argv: list[str]) -> int:
    if not argv or not (Path(argv[0]) / OPS_DIR).is_dir():
        print(__doc__)
        return 2
    import logging
    import warnings

    logging.getLogger("torchao").setLevel(logging.CRITICAL)
    warnings.filterwarnings("ignore")
    edgec.api._warn = lambda message: None  # the random-calibration warning does not apply
    cases = load_cases(Path(argv[0]))
    selected = {name: case for name, case in cases.items() if len(argv) < 2 or argv[1] in name}
    outcomes: dict[str, str] = {}
    refusals: Counter[str] = Counter()
    for name, case in selected.items():
        outcome, detail = run_case(case)
        outcomes[name] = outcome
        if outcome != "verified":
            print(
                f"{outcome:>14}  {name}: {detail.splitlines()[0]}"
                + (f" / {detail.splitlines()[1].strip()}" if len(detail.splitlines()) > 1 else ""),
                flush=True,
            )
        if outcome == "refused":
            refusals[reason(detail)] += 1
    counts = Counter(outcomes.values())
    print(
        f"\n{len(selected)} cases: {counts['verified']} compiled and verified bit-exact (host), "
        f"{counts['refused']} refused with one line, {counts['verify failed']} failed verification, "
        f"{counts['internal error']} internal errors"
    )
    for text, count in refusals.most_common():
        print(f"  refused x{count}: {text}")
    return 1 if counts["internal error"] or counts["verify failed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
