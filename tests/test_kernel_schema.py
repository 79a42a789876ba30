"""The kernel schema (edgec.ops.kernel) is the one description of every kernel's structs: the
header's generated regions are its print, every struct of the header is one of them, and the
emitted initializers and the ctypes mirrors follow it."""

from __future__ import annotations

import ctypes as C
import re
import subprocess

import pytest

from edgec.ops import KINDS, SCHEMA, binary, conv
from edgec.ops.base import OpDef, descriptor
from edgec.ops.c_header import REGION, header_path, regenerate
from edgec.ops.kernel import Struct, ints
from tests.kernel_lib import ROOT, BinaryDesc, ConvDesc, ConvDspWideDesc, DepthwiseConvDesc, ctypes_struct


def test_header_is_the_schema():
    text = header_path().read_text()
    assert regenerate(text) == text, "run python3 -m edgec.ops.c_header"
    assert sorted(m.group(2) for m in REGION.finditer(text)) == sorted(SCHEMA)


def test_check_command_names_a_stale_region(tmp_path, monkeypatch):
    text = (
        header_path()
        .read_text()
        .replace(
            "    int32_t pad_top;\n    int32_t pad_left;\n    int32_t dilation_h;",
            "    int32_t pad_left;\n    int32_t pad_top;\n    int32_t dilation_h;",
            1,
        )
    )
    stale = tmp_path / "edgec_nn.h"
    stale.write_text(text)
    monkeypatch.setattr("edgec.ops.c_header.header_path", lambda: stale)
    from edgec.ops.c_header import main

    assert main(["--check"]) == 1
    assert main([]) == 0 and stale.read_text() == header_path().read_text()


def test_every_struct_of_the_header_is_generated():
    """No hand-written struct is left outside the generated regions."""
    outside = REGION.sub("", header_path().read_text())
    assert re.findall(r"typedef struct \{", outside) == []


def test_array_sizes_are_the_header_constants():
    text = header_path().read_text()
    consts = {f.count for s in (*binary.STRUCTS, *conv.STRUCTS) for f in s.fields if f.count is not None}
    for const in consts:
        assert re.search(rf"#define {const.name} {const.value}\b", text), const


DIMS = Struct("probe_dims", ints("n h w c"))


def test_descriptor_refuses_fields_out_of_order():
    fields = dict(n=1, h=2, w=3, c=4)
    init = "{\n    .n = 1,\n    .h = 2,\n    .w = 3,\n    .c = 4,\n}"  # one field a line, as clang-format keeps it
    assert descriptor(DIMS, "d", fields).params == [("probe_dims", "d", init)]
    with pytest.raises(ValueError, match="probe_dims"):
        descriptor(DIMS, "d", dict(n=1, w=3, h=2, c=4))


def test_ctypes_mirror_has_the_c_layout(tmp_path):
    """sizeof and offsetof of the C structs, compiled against the header, equal the ctypes mirrors'."""
    probes = {
        "edgec_conv_desc": (ConvDesc, "shift"),
        "edgec_conv_dsp_wide_desc": (ConvDspWideDesc, "channel_table"),
        "edgec_depthwise_conv_desc": (DepthwiseConvDesc, "act_max"),
        "edgec_binary_desc": (BinaryDesc, "output_shift"),
    }
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "edgec_nn.h"', "int main(void) {"]
    lines += [
        f'    printf("%zu %zu\\n", sizeof({name}), offsetof({name}, {field}));' for name, (_, field) in probes.items()
    ]
    lines += ["    return 0;", "}"]
    (tmp_path / "probe.c").write_text("\n".join(lines))
    subprocess.run(
        [
            "cc",
            "-std=c99",
            f"-I{ROOT / 'runtime_c' / 'include'}",
            str(tmp_path / "probe.c"),
            "-o",
            str(tmp_path / "probe"),
        ],
        check=True,
    )
    out = subprocess.run([str(tmp_path / "probe")], check=True, capture_output=True, text=True).stdout.split("\n")
    for line, (cls, field) in zip(out, probes.values()):
        assert [int(v) for v in line.split()] == [C.sizeof(cls), getattr(cls, field).offset]
    assert C.sizeof(ctypes_struct(DIMS)) == 16


def test_every_unit_records_the_function_it_calls():
    """A unit that emits code names its C function for op.kernel: c_function, or its own
    kernel_function or specialize (pad, zeros, compare, logical and scalar_tensor are gone before code
    generation)."""
    silent = [
        kind
        for kind, unit in KINDS.items()
        if not unit.c_function
        and type(unit).kernel_function is OpDef.kernel_function
        and type(unit).specialize is OpDef.specialize
    ]
    assert sorted(silent) == ["compare", "logical", "pad", "scalar_tensor", "zeros"]
