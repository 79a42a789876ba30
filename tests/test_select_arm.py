"""edgec_select_s8 on Cortex-M4 under QEMU against the golden kernel, byte for byte, at -O0, -Os
and -O2: random broadcast layouts (up to 6-D, size-1 dims, every operand broadcast somewhere),
every comparison on raw bytes and the table form, in place over each unbroadcast operand, guard
bytes after every output (tests/data/port/select_kernels.c). The same run counts each call's
instructions: a conv map [1,8,8,64] thresholded against a scalar (table) and against a same-shape
tensor (printed with -s).
"""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from edgec.ops import select
from edgec.targets import toolchain
from tests.device_support import ROOT, needs_toolchain

DRIVER = ROOT / "tests" / "data" / "port" / "select_kernels.c"
RUNTIME = ROOT / "runtime_c"
SOURCES = [RUNTIME / "src" / "eltwise" / "edgec_select_s8.c"]
HEADER_WORDS = 48
INT_FIELDS = [f.name for f in select.SELECT_DESC.fields if not f.pointer]


def record(desc: dict, operands: list, table, in_place: int) -> bytes:
    """One case: header (payload, output bytes, in-place operand, operand sizes, the desc's int
    fields) then x1, x2, a, b, table, each padded to 4 bytes (x2 None: not passed)."""
    parts = [b"" if x is None else np.ascontiguousarray(x, np.int8).tobytes() for x in (*operands, table)]
    payload = b"".join(p + bytes(-len(p) % 4) for p in parts)
    fields = [int(v) for name in INT_FIELDS for v in np.atleast_1d(desc[name])]
    size = math.prod(desc["dims"][: desc["num_dims"]])
    header = [len(payload), size, in_place, *[len(p) for p in parts], *fields]
    return struct.pack(f"<{HEADER_WORDS}i", *header, *[0] * (HEADER_WORDS - len(header))) + payload


def random_case(rng):
    rank = int(rng.integers(1, 7))
    out = tuple(int(d) for d in rng.integers(1, 5, size=rank))
    shapes = [tuple(d if rng.random() < 0.6 else 1 for d in out[int(rng.integers(0, rank + 1)) :]) for _ in range(4)]
    full = np.broadcast_shapes(*shapes)
    operands = [(rng.integers(-2, 3, size=s) * 60).astype(np.int8) for s in shapes]  # ties for eq/ge/le
    table = rng.integers(0, 2, size=256).astype(np.int8) if rng.random() < 0.4 else None
    cmp = str(rng.choice(sorted(select.CMP_CODES)))
    desc = select.select_desc(cmp, full, dict(zip(select.ROLES, shapes)), table)
    unbroadcast = [k for k, s in enumerate(shapes) if s == full and not (k == 1 and table is not None)]
    in_place = int(rng.choice(unbroadcast)) if unbroadcast and rng.random() < 0.3 else -1
    expected = select.select_s8(*operands, desc)
    if table is not None:
        operands[1] = None
    return desc, operands, table, in_place, expected


def benchmark_cases(rng):
    shape = (8 * 8, 64)
    x = rng.integers(-128, 128, size=shape).astype(np.int8)
    y = rng.integers(-128, 128, size=shape).astype(np.int8)
    table = select.condition_table("gt", 0.5, 0.03, -5)
    scalar = np.array([3], np.int8)
    cases = []
    for label, desc, operands, tab in (
        (
            "scalar threshold (table)",
            select.select_desc("gt", shape, {"x1": shape, "x2": (1,), "a": shape, "b": (1,)}, table),
            [x, None, x, scalar],
            table,
        ),
        (
            "tensor threshold",
            select.select_desc("gt", shape, dict.fromkeys(select.ROLES, shape), None),
            [x, y, x, y],
            None,
        ),
    ):
        expected = select.select_s8(*[np.zeros(1, np.int8) if o is None else o for o in operands], desc)
        cases.append((label, (desc, operands, tab, -1, expected)))
    return cases


def run(cases, tmp_path, opt: str):
    elf = toolchain.cross_compile(
        "cortex-m4",
        [DRIVER, *SOURCES],
        [RUNTIME / "include"],
        tmp_path / "select.elf",
        opt=opt,
        extra_cflags=["-Wall", "-Wextra", "-Werror", "-pedantic"],
    )
    (tmp_path / "cases.bin").write_bytes(b"".join(record(*case[:4]) for case in cases))
    counts = toolchain.count_instructions("cortex-m4", elf, timeout=120, cwd=tmp_path)
    data, at, results = (tmp_path / "results.bin").read_bytes(), 0, []
    assert len(counts["insns"]) == len(cases)
    for case, insns in zip(cases, counts["insns"]):
        status, guards = struct.unpack_from("<2i", data, at)
        size = case[4].size
        results.append((status, bool(guards), np.frombuffer(data, np.int8, size, at + 8), insns))
        at += 8 + size
    assert at == len(data)
    return results


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("opt", ["-O0", "-Os", "-O2"])
def test_select_kernel_matches_golden_on_cortex_m4(opt, tmp_path):
    rng = np.random.default_rng(21)
    bench = benchmark_cases(rng)
    cases = [random_case(rng) for _ in range(120)] + [case for _, case in bench]
    results = run(cases, tmp_path, opt)
    failures = [
        f"status {status}, guards {guards}, desc {case[0]}, in place {case[3]}"
        for case, (status, guards, output, _) in zip(cases, results)
        if status != 0 or not guards or not np.array_equal(output, case[4].reshape(-1))
    ]
    assert not failures, f"{len(failures)} of {len(cases)} cases fail:\n" + "\n".join(failures[:5])
    per_element = {label: r[3] / case[4].size for (label, case), r in zip(bench, results[-len(bench) :])}
    print(f"\ncortex-m4 {opt} edgec_select_s8 instructions per element, [64, 64]: {per_element}")
