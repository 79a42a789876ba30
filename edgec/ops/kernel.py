"""The kernel schema: each C kernel's ABI described once, in Python, beside its op unit.

A unit module (conv.py, pool.py, ...) describes its kernels' descriptor structs as `Struct`s of
`Field`s (STRUCTS) and their scratch-size rules as `Scratch` macros (SCRATCH). From that one
description come
 - the structs and scratch macros of runtime_c/include/edgec_nn.h (edgec.ops.c_header writes
   them into the header's generated regions; tests/test_kernel_schema.py fails when they differ),
 - the ctypes mirrors the kernel tests call the C through (tests/kernel_lib.py),
 - the initializers edgec emits (edgec.ops.base.descriptor and Struct.positional check a layer's
   values against it) and the scratch expressions its calls are checked with (Scratch.call).
Which variant of a kernel a layer runs, and why, is the unit's decision, recorded as the op's
edgec.ir.KernelChoice.

A new descriptor: `X_DESC = Struct("edgec_x_desc", (...))` in its unit's module, listed in the
module's STRUCTS (a unit module new to the schema is added to edgec.ops._SCHEMA_MODULES); an
empty region `/* generated from edgec/ops/<unit>.py: edgec_x_desc */` + `/* end of edgec_x_desc */`
where the struct goes in edgec_nn.h, then `python3 -m edgec.ops.c_header` prints it there; emit
with `descriptor(X_DESC, symbol, values)`; tests call the C with `ctypes_struct(unit.X_DESC)` and
`struct_from_desc` (tests/kernel_lib.py).

This module is a leaf: it imports nothing of edgec but the C layout (edgec.c_format, a leaf).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from edgec.c_format import COLUMNS, trailing_comments


@dataclass(frozen=True)
class Const:
    """A compile-time constant of the header (a #define its structs size arrays with)."""

    name: str
    value: int


@dataclass(frozen=True)
class Field:
    """One member of a descriptor: int32_t unless `ctype` says otherwise (a const pointer to
    flash, e.g. "const int8_t *"); `count`: a fixed array of that many entries."""

    name: str
    ctype: str = "int32_t"
    doc: str = ""
    count: Const | int | None = None

    @property
    def pointer(self) -> bool:
        return self.ctype.endswith("*")

    def declaration(self) -> str:
        count = self.count.name if isinstance(self.count, Const) else self.count
        space = "" if self.pointer else " "
        return f"{self.ctype}{space}{self.name}{'' if count is None else f'[{count}]'};"

    @property
    def length(self) -> int | None:
        return self.count.value if isinstance(self.count, Const) else self.count


def ints(names: str, **docs: str) -> tuple[Field, ...]:
    """int32_t fields named by a space-separated list, documented by keyword."""
    return tuple(Field(name, doc=docs.get(name, "")) for name in names.split())


@dataclass(frozen=True)
class Struct:
    """A C struct a kernel takes (its descriptor), field by field in declaration order."""

    name: str
    fields: tuple[Field, ...]

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def check(self, values: dict) -> None:
        """ValueError unless `values` has exactly this struct's fields, in order."""
        if list(values) != self.names:
            raise ValueError(f"{self.name}: fields {self.names}, got {list(values)}")

    def positional(self, values: dict) -> str:
        """A positional C initializer of `values` (checked), each value as str() gives it."""
        self.check(values)
        return "{" + ", ".join(str(v) for v in values.values()) + "}"

    def typedef(self) -> str:
        """The C typedef as clang-format lays it out: one member a line, its doc comment after it
        (consecutive ones aligned, trailing_comments) or, when the member's line would pass 110
        columns, above it."""
        rows: list[tuple[str, str | None]] = []
        for f in self.fields:
            decl = f"    {f.declaration()}"
            inline = len(decl) + len(f" /* {f.doc} */") <= 110
            if f.doc and not inline:
                wrapped = textwrap.wrap(f.doc, 92)
                rows.append((f"    /* {wrapped[0]}" + ("" if len(wrapped) > 1 else " */"), None))
                rows += [(f"     * {w}", None) for w in wrapped[1:-1]]
                if len(wrapped) > 1:
                    rows.append((f"     * {wrapped[-1]} */", None))
            rows.append((decl, f.doc if f.doc and inline else None))
        return "\n".join(["typedef struct {", *trailing_comments(rows), f"}} {self.name};"])


@dataclass(frozen=True)
class Scratch:
    """A kernel's scratch-size rule as the header's macro: MACRO(args) = expr (C)."""

    macro: str
    args: tuple[str, ...]
    expr: str

    def define(self) -> str:
        """The #define, on one line as clang-format joins it when it fits in COLUMNS, else its
        expression on a continuation line."""
        head = f"#define {self.macro}" + (f"({', '.join(self.args)})" if self.args else "")
        return f"{head} {self.expr}" if len(head) + 1 + len(self.expr) <= COLUMNS else f"{head} \\\n    {self.expr}"

    def value(self, *values, **constants) -> int:
        """The macro's value for a layer's integer arguments, its C expression evaluated as Python
        (`constants`: the header's constants it names): only for a rule of +, - and * on ints,
        where C's int arithmetic and Python's agree (ValueError for any other)."""
        if any(symbol in self.expr for symbol in "/%?<>&|^"):
            raise ValueError(f"{self.macro}: only a rule of +, - and * evaluates in Python")
        return int(eval(self.expr, {"__builtins__": {}}, {**dict(zip(self.args, values)), **constants}))

    def call(self, *values) -> str:
        """The macro applied to a layer's values: CCall.scratch_required's C expression."""
        return f"{self.macro}({', '.join(str(v) for v in values)})" if self.args else self.macro
