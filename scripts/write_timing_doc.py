"""Write docs/timing-model.md from edgec/targets/timing.py, the one place the cycle model's costs live.

python scripts/write_timing_doc.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    from edgec.targets.timing import document

    path = ROOT / "docs" / "timing-model.md"
    path.write_text(document())
    print(f"wrote {path}")
