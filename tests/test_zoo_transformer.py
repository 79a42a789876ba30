"""The transformers of edgec.zoo.seq through the whole compiler: real torch.export (nn.MultiheadAttention
with batch_first, F.scaled_dot_product_attention, LayerNorm, GELU, class token, positional
embedding, token mean) and PT2E, then the generated C on the host (ASan/UBSan, arena writes
checked), on Cortex-M4 and on Cortex-M55 under QEMU, byte for byte equal to the golden simulator;
every layer within its tolerance of the Q/DQ program; int8 close to float (floors = the measured
SQNR less a margin: random-weight networks)."""

from __future__ import annotations

import pytest
import torch

from edgec.pipeline import quantize_model
from edgec.targets.cores import get_target
from edgec.tools import verify
from edgec.zoo import seq
from tests.device_support import compile_and_run, needs_toolchain

TRANSFORMERS = sorted(seq.ZOO_TRANSFORMERS)
MIN_SQNR_DB = {"vit_tiny": 20, "kws_transformer": 23}
SAMPLES = {"host": 4, "cortex-m4": 2, "cortex-m55": 2}
# The op kinds each lowers to (so a regression to another kernel cannot pass silently).
KINDS = {"batch_matmul", "layer_norm", "fully_connected", "softmax", "lut", "add", "binary"}


@pytest.fixture(scope="module", params=TRANSFORMERS)
def quantized(request):
    name = request.param
    return name, quantize_model(f"{seq.__file__}:{name}", calibration=seq.calibration_data(name, 16, seed=0))


def _run(quantized, target_name, tmp_path):
    name, q = quantized
    floats = seq.calibration_data(name, SAMPLES[target_name], seed=1)
    compiled, outputs, result = compile_and_run(q, get_target(target_name), floats, tmp_path, name)
    return compiled, floats, outputs, result


def test_transformer_exports_attention_as_expected():
    """vit_tiny has one block of each attention spelling; both reach edgec as the same primitives."""
    model, example = seq.vit_tiny()
    targets = {node.target for node in torch.export.export(model, example).graph.nodes}
    aten = torch.ops.aten
    assert {
        aten.scaled_dot_product_attention.default,
        aten.layer_norm.default,
        aten.gelu.default,
        aten.cat.default,
        aten.select.int,
        aten.unflatten.int,
    } <= targets


def test_transformer_is_bit_exact_on_host(quantized, tmp_path):
    name, _ = quantized
    compiled, floats, outputs, result = _run(quantized, "host", tmp_path)
    assert result.exact, f"{name}: {result.mismatched_bytes} bytes differ"
    assert KINDS <= {op.kind for op in compiled.graph.ops}
    matmuls = [op for op in compiled.graph.ops if op.kind == "batch_matmul"]
    # q @ k^T reads k in place from the projection (contiguous along the depth: the DSP/Helium
    # paths); in the F.scaled_dot_product_attention block v is copied out transposed for attn @ v
    assert any("rhs_view" in op.attrs for op in matmuls)
    if name == "vit_tiny":
        assert any(op.attrs.get("rhs_transposed") for op in matmuls)
    # the 1/sqrt(d) scale is in the q @ k^T requantization, not a pass of its own
    assert sum("alpha" in op.attrs for op in matmuls) == len(matmuls) // 2
    assert not any(op.kind == "binary" and op.attrs["op"] == "mul" for op in compiled.graph.ops)
    summary = verify.accuracy_summary(compiled, verify.float_reference(compiled, floats), outputs)
    assert summary["output_sqnr_db"] >= MIN_SQNR_DB[name], summary
    verify.check_against_reference(compiled, floats)  # every layer within its tolerance of the Q/DQ program


@needs_toolchain
@pytest.mark.usefixtures("edgec_cache")
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
def test_transformer_is_bit_exact_on_cortex_m(quantized, target, tmp_path):
    name, _ = quantized
    *_, result = _run(quantized, target, tmp_path)
    assert result.exact, f"{name} on {target}: {result.mismatched_bytes} bytes differ"
