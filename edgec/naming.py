"""The model's C name (`--name`, `name=`): the prefix of every generated symbol and file."""

from __future__ import annotations

from pathlib import Path

from edgec.errors import EdgecError


def default_name(model) -> str:
    """A C identifier from what the user handed over: 'file.py:factory' -> factory, a path -> its
    stem, a module -> its class name in snake case."""
    if isinstance(model, (str, Path)):
        file_part, _, factory = str(model).rpartition(":")
        stem = factory if file_part.endswith(".py") else Path(model).stem
    else:
        cls = type(model).__name__ if hasattr(model, "forward") else "model"
        stem = "".join(f"_{c.lower()}" if c.isupper() else c for c in cls).strip("_")
    name = "".join(c if c.isalnum() else "_" for c in stem).lower().strip("_") or "model"
    return name if name[0].isalpha() else f"m_{name}"


def check_name(name: str) -> str:
    if not name.replace("_", "a").isalnum() or not name[0].isalpha():
        raise EdgecError(f"--name '{name}' must be a C identifier (letters, digits, underscores)")
    return name
