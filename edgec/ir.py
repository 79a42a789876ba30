"""edgec's small graph IR: plain dataclasses, no torch, no edgec imports.

A Graph is a list of Ops in execution order over named activation Tensors. Constants (weights,
bias, requantization arrays) live in each Op's attrs as numpy arrays; only activations are
Tensors, because only activations occupy the arena.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

import numpy as np

ARENA_ALIGNMENT = 4  # every arena offset is a multiple: kernels may read activations 32 bits at a time
ITEMSIZE = {"int8": 1, "int16": 2, "int32": 4}  # bytes per element of each activation dtype


@dataclass
class Tensor:
    name: str
    shape: tuple[int, ...]
    scale: float | None = None  # None until the quantized graph gives it qparams
    zero_point: int = 0
    alias_of: str | None = None  # a view (reshape/flatten) shares its base tensor's bytes
    source: str = ""  # name of the float graph node whose value this tensor quantizes
    dtype: str = "int8"  # a key of ITEMSIZE
    # The PyTorch axis each stored axis holds: shape[i] is the float graph's dimension perm[i], or
    # 1 where perm[i] is None (an axis of size 1 the storage adds). Channels-last NHWC data of an
    # NCHW tensor: (0, 2, 3, 1); of an NCL tensor, stored as N,1,L,C: (0, None, 2, 1).
    # None: stored in PyTorch order.
    perm: tuple[int | None, ...] | None = None

    @property
    def quantized(self) -> bool:
        return self.scale is not None

    @property
    def elements(self) -> int:
        return prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.elements * ITEMSIZE[self.dtype]

    @property
    def torch_shape(self) -> tuple[int, ...]:
        """The shape in the float graph's axis order."""
        if self.perm is None:
            return self.shape
        return tuple(
            size for _, size in sorted((axis, size) for axis, size in zip(self.perm, self.shape) if axis is not None)
        )

    def stored_axis(self, axis: int) -> int:
        """Where PyTorch axis `axis` (negative counts from the end) is stored."""
        axis %= len(self.torch_shape)
        return axis if self.perm is None else self.perm.index(axis)

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        return (q.astype(np.float64) - self.zero_point) * self.scale


def stored_offsets(shape: tuple[int, ...], perm) -> np.ndarray:
    """For each element in PyTorch (C) order of a tensor of torch `shape` stored with `perm`, its
    element offset in storage."""
    if perm is None:
        return np.arange(prod(shape))
    axes = [axis for axis in perm if axis is not None]
    stored_shape = tuple(shape[axis] for axis in axes)
    return np.arange(prod(shape)).reshape(stored_shape).transpose(np.argsort(axes)).ravel()


def to_stored(tensor: "Tensor", value: np.ndarray) -> np.ndarray:
    """A value in the float graph's axis order, laid out as `tensor` is stored (e.g. NHWC)."""
    value = np.asarray(value)
    if tensor.perm is None:
        return value
    axes = [axis for axis in tensor.perm if axis is not None]
    return np.ascontiguousarray(value.transpose(axes)).reshape(stored_shape(value.shape, tensor.perm))


def to_torch_order(tensor: "Tensor", value: np.ndarray) -> np.ndarray:
    """A stored value (shaped as `tensor` is stored) back in the float graph's axis order."""
    value = np.asarray(value)
    if tensor.perm is None:
        return value
    axes = [axis for axis in tensor.perm if axis is not None]
    squeezed = value.reshape([tensor.shape[i] for i, axis in enumerate(tensor.perm) if axis is not None])
    return np.ascontiguousarray(squeezed.transpose(np.argsort(axes)))


def stored_shape(torch_shape: tuple[int, ...], perm) -> tuple[int, ...]:
    return torch_shape if perm is None else tuple(1 if axis is None else torch_shape[axis] for axis in perm)


def same_bytes(source_shape, source_perm, target_shape, target_perm) -> bool:
    """Whether a reshape of a tensor (torch shape, perm) into another moves no byte."""
    return np.array_equal(
        stored_offsets(tuple(source_shape), source_perm), stored_offsets(tuple(target_shape), target_perm)
    )


@dataclass(frozen=True)
class InPlace:
    """One way an op's kernel can write its output over one of its inputs (see OpDef.in_place).

    The planner may use it only when nothing reads that input's bytes after the op; then the two
    tensors share bytes, the input starting `input_offset` bytes after the output's start
    (0: head-aligned; output size - input size: tail-aligned, the two end together), and the
    kernel needs `scratch_bytes` of scratch instead of its usual scratch.
    """

    input: int  # index into op.inputs
    input_offset: int  # bytes, a multiple of the arena alignment; may be negative
    scratch_bytes: int = 0


@dataclass(frozen=True)
class KernelChoice:
    """The kernel a layer runs and why (Op.kernel), recorded by its unit's decision function when
    it chooses (OpDef.specialize; int16 and CMSIS-NN selection): the emitted call, the report,
    report.json and `edgec build`'s summary read it. The in-place form of a kernel is the
    planner's choice on top (the emitted CCall names it)."""

    function: str  # the C function the layer calls ("" for a view: no code)
    variant: str  # portable, dsp, dsp wide, mve, int16, int16 dsp, int16 mve, cmsis-nn or view
    reason: str  # why, in one phrase
    unit: str = ""  # the kind of the unit that compiles it when not the op's own (int16, CMSIS-NN)


@dataclass
class Op:
    name: str
    kind: str  # the op unit (edgec.ops.KINDS); the kernel variant is `kernel`'s
    inputs: list[str]
    outputs: list[str]
    attrs: dict = field(default_factory=dict)
    source: str = ""  # user's Python source line, for messages
    kernel: KernelChoice | None = None  # set when the unit chooses its kernel (after finalize)


@dataclass
class Graph:
    tensors: dict[str, Tensor] = field(default_factory=dict)
    ops: list[Op] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    # How <name>_quantize_input turns floats into the input tensor, as the program's own quantize
    # does: "multiply" (PT2E's quantize_per_tensor, also ExecuTorch's: x * float32(1/scale),
    # halves to even) or "divide" (TFLite's QUANTIZE: x / scale, halves away from zero).
    input_rounding: str = "multiply"
    # Inputs the application hands in row by row (a band stage's streamed input, --stream-input):
    # never whole in the arena, so the plan gives them no bytes.
    streamed_inputs: list[str] = field(default_factory=list)

    def add_tensor(self, tensor: Tensor) -> Tensor:
        if tensor.name in self.tensors:
            raise ValueError(f"duplicate tensor {tensor.name}")
        self.tensors[tensor.name] = tensor
        return tensor

    def storage(self, name: str) -> str:
        """The tensor that owns `name`'s bytes (follows view aliases)."""
        while self.tensors[name].alias_of is not None:
            name = self.tensors[name].alias_of
        return name

    def producer(self, name: str) -> Op | None:
        return next((op for op in self.ops if name in op.outputs), None)

    def consumers(self, name: str) -> list[Op]:
        return [op for op in self.ops if name in op.inputs]

    def replace_uses(self, old: str, new: str) -> None:
        for op in self.ops:
            op.inputs = [new if t == old else t for t in op.inputs]
        self.outputs = [new if t == old else t for t in self.outputs]

    def remove_unused_tensors(self) -> None:
        used = set(self.inputs) | set(self.outputs)
        for op in self.ops:
            used.update(op.inputs)
            used.update(op.outputs)
        used |= {self.storage(name) for name in used}
        for name in list(self.tensors):
            if name not in used:
                del self.tensors[name]
