"""Where edgec's own files are: templates/ (Jinja templates of the generated C, the test drivers
and the HTML report) and runtime_c/ (the kernels and the bare-metal port). Imports nothing heavy.

A wheel ships them inside the package, as edgec/templates and edgec/runtime_c (pyproject.toml maps
the checkout's top-level folders there); a source checkout and an editable install read them
where they are, at the checkout's top level, next to edgec/.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """The folder `name` ("templates" or "runtime_c"): the installed package's copy, else the checkout's."""
    installed = PACKAGE / name
    return installed if installed.is_dir() else PACKAGE.parent / name
