"""README's "From a notebook" example runs as written (train, compile, evaluate, save the C)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def notebook_example() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## From a notebook") :]
    section = section[: section.index("\n## ", 1)]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def test_readme_notebook_example_runs_as_written(tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "OMP_NUM_THREADS": "1",
    }  # a tiny model: threads only contend with the other tests' processes
    result = subprocess.run(
        [sys.executable, "-c", notebook_example()], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"top1_accuracy on 450 samples: float model 0\.9\d+, int8 0\.9\d+", result.stdout), result.stdout
    assert "most expensive layers" in result.stdout
    out = tmp_path / "build" / "digits_notebook"
    assert (out / "digits.c").is_file() and (out / "digits.h").is_file() and (out / "report.json").is_file()
