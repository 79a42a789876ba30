"""`--opt auto`: per layer, the constant layout the timing model estimates faster, within the flash budget.

The DSP convolution and fully connected kernels read their filter either as packed int8 (compact)
or widened to int16 (`wide`: fewer instructions per multiply-accumulate, twice the filter's
flash). `--opt speed` widens every such layer and `--opt size` none. `--opt auto` widens a layer
only where edgec's timing model (edgec/targets/timing.py) estimates it faster on the part: with flash wait
states, the widened filter's twice as many bytes are twice as many flash reads, which the flash
accelerator's small data cache absorbs only when the filter fits it or the wait states are few
(`widening`). The rule was measured per layer with `edgec bench` on the four reference models
(edgec/zoo/mlperf.py) on Cortex-M4 at 0-7 wait states, M7 at 0 and 7, M33 at 0 and 2: its estimated
cycles were 0.03% above the per-layer optimum on average over those 44 model x part pairs, 0.58%
at worst (MobileNet on the cache-less M33 at 2 wait states), where widening all was 2.5% above on
average (30% at worst) and widening none 2.3% (9%). The DSP convolution's micro-kernel has since
grown to 2 channels x 3 pixels, which reads each filter byte for more outputs: measured again on
Cortex-M4 at its 5 wait states, widening now wins for every convolution with at most 128 B of
filter per output channel (it was 32 B), and loses for all with more (ResNet-8's 144 B and
over); with that threshold the rule picks the per-layer optimum of all four models there.

Then the flash: widening may add at most WIDENING_ALLOWANCE (20 %, or 8 KiB for a small model)
to the model's compact constants (a firmware image holds more than one model, and the last widened layers buy little:
on the Cortex-M4 VWW widening 13 layers took 402.6 KiB of program flash for 1 % fewer estimated
cycles than 260.2 KiB), and the widened constants must fit the flash budget. Over either, layers
are narrowed back, those whose filter bytes are each read the fewest times per inference first
(weight reuse = MACs / filter elements: what widening a byte speeds up), until they fit. A model
that fits with `--opt size` is never refused by `--opt auto`; `--opt speed` widens every layer.
The wait states are the target's typical part's (edgec.targets.timing.MEMORY) unless
`--flash-wait` gives the user's (Target.flash_wait).
"""

from __future__ import annotations

from typing import NamedTuple

from edgec.backend.codegen import constants_bytes, layer_constants, layer_constants_bytes
from edgec.ir import Graph
from edgec.ops import unit_of
from edgec.targets.timing import CORES, data_cache_bytes, flash_wait_states

# Measured thresholds (see the module docstring): a convolution whose widened filter does not fit
# the data cache still gains up to FEW_WAIT_STATES wait states, and up to SHORT_ROW_WAIT_STATES
# when its filter has at most SHORT_ROW_BYTES per output channel.
FEW_WAIT_STATES = 3
SHORT_ROW_WAIT_STATES = 5
SHORT_ROW_BYTES = 128
# edgec_conv_s8_dsp_wide's channel table: bias, multiplier, rounding term and shift per channel.
CHANNEL_TABLE_BYTES = 16
# The most widening may add to the compact constants under --opt auto: a fraction of them, or
# WIDENING_FLOOR_BYTES for a small model (a few KiB matter on no part).
WIDENING_ALLOWANCE = 0.2
WIDENING_FLOOR_BYTES = 8192
NAMES_SHOWN = 6


class Widening(NamedTuple):
    """Whether a layer's filter is widened to int16, and why, in a phrase shared by the layers the
    same reason decides."""

    wide: bool
    reason: str


def widening(
    kind: str, filter_bytes: int, out_channels: int, target: str, flash_wait: int, part: str | None = None
) -> Widening:
    """Whether widening a DSP layer's filter saves estimated cycles on `target`'s part (`part`,
    edgec.targets.timing.PARTS; None: the typical one) with `flash_wait` flash wait states.
    `filter_bytes` is its compact (packed int8) filter's size.

    The DSP convolution streams its whole filter and channel table from flash once per pair of
    output pixels; widened, that is twice the filter bytes. Without wait states a flash read costs
    nothing extra, so the fewer instructions win. With them, the part's data cache keeps the
    widened filter between passes only if it fits; otherwise each pass pays the wait states on
    twice the lines, which the saved instructions outweigh only at few wait states (or, for short
    filter rows, a few more). A fully connected layer reads each filter byte once, so no cache
    helps it. Without a data cache every widened read pays the wait states. On the dual-issue M7
    the model estimates widened fully connected layers slower even at zero wait states."""
    cache = data_cache_bytes(target, part)
    fully_connected = kind == "fully_connected"
    if flash_wait == 0:
        if fully_connected and CORES[target].dual_issue:
            return Widening(
                False, "fully connected on a dual-issue core: estimated slower widened even without wait states"
            )
        return Widening(True, "no flash wait states: fewer instructions, and twice the filter bytes cost no wait")
    if cache == 0:
        return Widening(
            False, f"no flash data cache on the part: every widened filter read pays the {flash_wait} wait states"
        )
    if fully_connected:
        return Widening(
            False,
            "fully connected: each filter byte is read once, so twice the bytes cost more wait "
            "states than the instructions saved",
        )
    if 2 * filter_bytes + CHANNEL_TABLE_BYTES * out_channels <= cache:
        return Widening(True, f"widened filter and channel table fit the {cache:,} B flash data cache")
    if flash_wait <= FEW_WAIT_STATES:
        return Widening(
            True, f"at most {FEW_WAIT_STATES} wait states: the instructions saved outweigh twice the flash reads"
        )
    short_rows = filter_bytes <= SHORT_ROW_BYTES * out_channels
    if short_rows and flash_wait <= SHORT_ROW_WAIT_STATES:
        return Widening(
            True,
            f"at most {SHORT_ROW_BYTES} B of filter per output channel: up to "
            f"{SHORT_ROW_WAIT_STATES} wait states the instructions saved outweigh twice the "
            f"flash reads",
        )
    beyond = (
        f"{SHORT_ROW_BYTES} B per output channel"
        if flash_wait <= SHORT_ROW_WAIT_STATES
        else f"{SHORT_ROW_WAIT_STATES} wait states"
    )
    return Widening(
        False,
        f"widened filter over the {cache:,} B flash data cache, and over {beyond}: twice the "
        f"flash reads cost more than the instructions saved",
    )


def choose_constant_layouts(graph: Graph, target) -> list[str]:
    """Sets op.attrs["wide"] (and op.attrs["layout_reason"]: why) for `--opt auto` (ops were
    specialized as for speed), and records the kernel that makes op.kernel; returns what it chose
    and why, one line each (nothing when no layer has a choice)."""
    choosable = [op for op in graph.ops if op.attrs.get("wide")]
    if target.opt != "auto" or not choosable:
        return []
    flash_wait = flash_wait_states(target.name, target.flash_wait, target.timing_part)
    sizes = {op.name: layer_constants_bytes(op, graph) for op in graph.ops}
    extra, verdicts = {}, {}
    for op in choosable:
        op.attrs["wide"] = False
        compact = layer_constants(op, graph)
        extra[op.name] = sizes[op.name] - constants_bytes(compact)
        verdict = widening(
            op.kind,
            packed_filter_bytes(compact),
            op.attrs["weight"].shape[0],
            target.name,
            flash_wait,
            target.timing_part,
        )
        op.attrs["wide"], op.attrs["layout_reason"] = verdict.wide, verdict.reason
        verdicts[op.name] = verdict
        if not verdict.wide:
            sizes[op.name] -= extra[op.name]
    total, budget = sum(sizes.values()), target.flash_bytes
    compact = total - sum(extra[op.name] for op in choosable if op.attrs["wide"])
    allowance = compact + max(int(WIDENING_ALLOWANCE * compact), WIDENING_FLOOR_BYTES)
    if budget is not None and budget <= allowance:
        limit, why = budget, f"to fit the {budget:,} B flash budget"
    else:
        limit, why = allowance, f"within --opt auto's widening allowance ({allowance:,} B of constants)"
    narrowed = []
    for op in sorted((op for op in choosable if op.attrs["wide"]), key=lambda op: (weight_reuse(op, graph), op.name)):
        if total <= limit:
            break
        op.attrs["wide"] = False
        op.attrs["layout_reason"] = f"kept compact {why}"
        total -= extra[op.name]
        narrowed.append(op)
    for op in choosable:
        op.kernel = unit_of(op).chosen_kernel(op, target)
    wide = [op for op in choosable if op.attrs["wide"]]
    narrowed_names = {op.name for op in narrowed}
    source = "--flash-wait" if target.flash_wait is not None else "the typical part's; set yours with --flash-wait"
    lines = [
        f"--opt auto: {len(wide)} of {len(choosable)} DSP layers with int16-widened filters, chosen by the "
        f"cycles estimated on {target.name} at {flash_wait} flash wait states ({source}); constants {total:,} B"
        + (f" of the {budget:,} B flash budget" if budget is not None else "")
    ]
    for wide_now, label in ((True, "widened"), (False, "kept compact")):
        groups: dict[str, list[str]] = {}
        for op in choosable:
            if verdicts[op.name].wide == wide_now and op.name not in narrowed_names:
                groups.setdefault(verdicts[op.name].reason, []).append(op.name)
        lines += [f"  {label} ({len(names)}): {reason}: {_names(names)}" for reason, names in groups.items()]
    if narrowed:
        lines.append(
            f"  kept compact ({len(narrowed)}) {why}, those whose filter bytes are read the fewest times "
            f"per inference first: {_names([op.name for op in narrowed])}"
        )
    return lines


def packed_filter_bytes(constants: list) -> int:
    """The bytes of a DSP layer's compact filter among its constants (as layer_constants gives
    them): packed int8, rows and taps zero-padded for the micro-kernel (a descriptor's filter, or
    the packed_weights array of a kernel that takes its constants as arguments)."""
    [values] = [values for _, symbol, values in constants if symbol.endswith(("_desc_filter", "packed_weights"))]
    return int(values.size)


def weight_reuse(op, graph: Graph) -> float:
    """How many times each filter element is read per inference (MACs / filter elements)."""
    return unit_of(op).macs(op, graph) / max(op.attrs["weight"].size, 1)


def _names(names: list[str]) -> str:
    return ", ".join(names[:NAMES_SHOWN]) + (
        f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else ""
    )
