"""The generated regions of runtime_c/include/edgec_nn.h, from the kernel schema (edgec.ops.kernel).

Each descriptor struct and scratch macro of the header sits between two marker comments,
    /* generated from edgec/ops/<unit>.py: <name> */ ... /* end of <name> */
and is that unit's description printed as C; the doc comments of the functions around them stay
hand-written. `python3 -m edgec.ops.c_header` rewrites the regions, `--check` exits 1 (naming the
regions) when the header differs from the schema (tests/test_kernel_schema.py runs it).
"""

from __future__ import annotations

import re
import sys

from edgec.ops import SCHEMA
from edgec.resources import data_dir

REGION = re.compile(r"/\* generated from (\S+): (\w+) \*/\n(.*?)/\* end of \2 \*/", re.S)


def header_path():
    return data_dir("runtime_c") / "include" / "edgec_nn.h"


def regenerate(text: str) -> str:
    """`text` (the header) with every generated region printed anew from the schema; KeyError
    for a region the schema does not describe."""

    def region(match: re.Match) -> str:
        item, module = SCHEMA[match.group(2)]
        return f"/* generated from {module}: {match.group(2)} */\n{item}\n/* end of {match.group(2)} */"

    return REGION.sub(region, text)


def main(argv: list[str]) -> int:
    path = header_path()
    text = path.read_text()
    new = regenerate(text)
    missing = sorted(set(SCHEMA) - {m.group(2) for m in REGION.finditer(text)})
    if missing:
        print(f"{path}: no generated region for {', '.join(missing)}", file=sys.stderr)
        return 1
    if "--check" in argv:
        stale = [m.group(2) for m, n in zip(REGION.finditer(text), REGION.finditer(new)) if m.group(0) != n.group(0)]
        if stale:
            print(
                f"{path} differs from the kernel schema in {', '.join(stale)}: run python3 -m edgec.ops.c_header",
                file=sys.stderr,
            )
            return 1
        return 0
    if new != text:
        path.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
