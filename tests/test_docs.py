"""docs/numerics.md, the arithmetic every kernel shares, is in the repository, names every kernel
of the public header, and the sections the sources cite exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NUMERICS = ROOT / "docs" / "numerics.md"


def test_every_public_kernel_is_specified():
    text = NUMERICS.read_text()
    header = (ROOT / "runtime_c" / "include" / "edgec_nn.h").read_text()
    kernels = set(re.findall(r"^edgec_status (edgec_\w+_s8)\(", header, re.MULTILINE))
    assert kernels >= {"edgec_conv_s8", "edgec_softmax_s8", "edgec_add_s8"}
    assert sorted(k for k in kernels if k not in text) == []


def test_citations_point_at_existing_sections():
    headings = set(re.findall(r"^#+ (.+)$", NUMERICS.read_text(), re.MULTILINE))
    sources = [
        p
        for d in ("edgec", "runtime_c", "tests")
        for p in (ROOT / d).rglob("*")
        if p.suffix in (".py", ".c", ".h") and p.name != Path(__file__).name
    ]
    cited = 0
    for path in sources:
        for reference in re.finditer(r"(\S*)numerics\.md(?:, \"([^\"]+)\")?", path.read_text()):
            assert reference.group(1).endswith("docs/"), (path, reference.group(0))
            assert reference.group(2) is None or reference.group(2) in headings, (path, reference.group(2))
            cited += 1
    assert cited >= 8


def test_readme_operator_table_is_generated_from_the_op_units():
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    from write_operator_table import with_table

    readme = (ROOT / "README.md").read_text()
    assert with_table(readme) == readme, "run python scripts/write_operator_table.py"
