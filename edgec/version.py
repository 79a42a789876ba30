"""edgec's version: one place, read by pyproject.toml, the package and the generated files."""

__version__ = "0.1.0"
