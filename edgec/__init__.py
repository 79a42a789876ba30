"""edgec: PyTorch -> int8 C99 for Arm Cortex-M.

From Python: edgec.compile(model, example_inputs, calibration=...) -> CompiledModel (save, run,
verify, bench, report), edgec.save([models], out_dir) (several models, one runtime),
edgec.evaluate(compiled, data) (float vs int8 metric), edgec.inspect(model).
They load on first use (module __getattr__), so `import edgec` and the CLI's start stay free of
torch.
"""

from edgec.errors import EdgecError
from edgec.version import __version__

_API = ("compile", "save", "evaluate", "inspect", "CompiledModel", "Evaluation", "VerifyResult", "top1_accuracy")
__all__ = ["EdgecError", "__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        from edgec import api

        return getattr(api, name)
    raise AttributeError(f"module 'edgec' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
