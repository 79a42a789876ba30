"""Load a model the user hands us and turn it into an exported FX graph module.

Accepted: a `torch.export.save`d ExportedProgram (`.pt2`), or `path/to/file.py:factory` where
`factory()` returns `(nn.Module, example_inputs)` (the command line's forms); or, from Python, an
in-memory `nn.Module` with its example inputs, or an `ExportedProgram` (float or PT2E-quantized).
Pickled modules (`torch.save(model)`) run arbitrary code when loaded, so they are refused with
instructions instead of being loaded.
"""
from __future__ import annotations

import importlib.util
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.fx import GraphModule, Node

from edgec.errors import EdgecError

HOW_TO_EXPORT = ("export it instead: torch.export.save(torch.export.export(model.eval(), "
                 "(example_input,)), 'model.pt2'), or pass 'file.py:factory'")


@dataclass
class LoadedModel:
    module: GraphModule  # exported graph module (training IR), parameters as get_attr
    example_inputs: tuple
    origin: str  # what the user passed, for messages


def load(model, example_inputs=None) -> LoadedModel:
    """`model` is a spec string (a .pt2 path or 'file.py:factory'), an ExportedProgram, or an
    nn.Module (then `example_inputs`, a tensor or a tuple of tensors, is required)."""
    if isinstance(model, torch.export.ExportedProgram):
        return _from_program(model, example_inputs, "ExportedProgram")
    if isinstance(model, torch.nn.Module):
        origin = type(model).__name__
        if example_inputs is None:
            raise EdgecError(f"{origin}: an nn.Module needs example inputs (a tensor shaped like one batch, "
                             f"or a tuple of them)")
        example = as_example_inputs(example_inputs, origin)
        return LoadedModel(export(model, example, origin), example, origin)
    if not isinstance(model, (str, Path)):
        raise EdgecError(f"cannot compile a {type(model).__name__}: expected an nn.Module, an ExportedProgram, "
                         f"a .pt2 path or 'file.py:factory'")
    spec = str(model)
    file_part, separator, factory = spec.rpartition(":")
    if separator and file_part.endswith(".py"):
        return _load_factory(Path(file_part), factory, spec)
    return _load_program(Path(spec))


def _load_program(path: Path) -> LoadedModel:
    if not path.is_file():
        raise EdgecError(f"{path}: no such file")
    if not zipfile.is_zipfile(path):
        raise EdgecError(f"{path}: not a torch.export program (.pt2); {HOW_TO_EXPORT}")
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
    if any(name.endswith("data.pkl") for name in names) and not any(n.endswith("archive_format") for n in names):
        raise EdgecError(f"{path}: is a pickled module (torch.save), which edgec will not unpickle "
                         f"because loading it runs arbitrary code; {HOW_TO_EXPORT}")
    try:
        program = torch.export.load(str(path))
    except Exception as exc:  # torch raises many types for a corrupt archive
        raise EdgecError(f"{path}: cannot load as a torch.export program: {_first_line(exc)}") from None
    return _from_program(program, None, str(path))


def _from_program(program, example_inputs, origin: str) -> LoadedModel:
    if example_inputs is not None:
        example = as_example_inputs(example_inputs, origin)
    elif program.example_inputs:
        example = tuple(program.example_inputs[0])
    else:
        example = _example_from_signature(program)
    return LoadedModel(program.module(), example, origin)


def as_example_inputs(example_inputs, origin: str) -> tuple:
    """A tensor, an array or a tuple/list of them, as a tuple of float tensors."""
    items = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    try:
        return tuple(x if isinstance(x, torch.Tensor) else torch.as_tensor(x) for x in items)
    except (TypeError, RuntimeError, ValueError) as exc:
        raise EdgecError(f"{origin}: example inputs must be tensors or arrays ({_first_line(exc)})") from None


def _example_from_signature(program) -> tuple:
    user_inputs = set(program.graph_signature.user_inputs)
    return tuple(torch.zeros(node.meta["val"].shape) for node in program.graph.nodes
                 if node.op == "placeholder" and node.name in user_inputs)


def _load_factory(path: Path, factory: str, spec: str) -> LoadedModel:
    if not path.is_file():
        raise EdgecError(f"{path}: no such file")
    module_spec = importlib.util.spec_from_file_location(f"edgec_user_{path.stem}", path)
    user_module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(user_module)
    except Exception as exc:
        raise EdgecError(f"{path}: failed to import: {_first_line(exc)}") from None
    fn = getattr(user_module, factory, None)
    if not callable(fn):
        raise EdgecError(f"{path}: has no function '{factory}'")
    result = fn()
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], torch.nn.Module)):
        raise EdgecError(f"{spec}: must return (nn.Module, example_inputs)")
    model, example = result
    example = tuple(example) if isinstance(example, (tuple, list)) else (example,)
    return LoadedModel(export(model, example, spec), example, spec)


def export(model: torch.nn.Module, example_inputs: tuple, origin: str) -> GraphModule:
    """The model's inference graph (exported in eval mode; a notebook's module is left in the mode
    it was in)."""
    training = model.training
    try:
        program = torch.export.export(model.eval(), example_inputs)
    except Exception as exc:
        raise EdgecError(f"{origin}: torch.export failed: {_first_line(exc)}") from None
    finally:
        model.train(training)
    return program.module()


def source_line(node: Node) -> str:
    """'file.py:LINE: code' of the user's frame that created `node` (skipping torch's own frames)."""
    lines = (node.meta.get("stack_trace") or "").strip().splitlines()
    frames = [(lines[i].strip(), lines[i + 1].strip() if i + 1 < len(lines) else "")
              for i in range(len(lines)) if lines[i].strip().startswith('File "')]
    user_frames = [f for f in frames if "/torch/" not in f[0]]
    if not user_frames:  # e.g. inside nn.Sequential: name the submodule instead
        if module_path(node) is not None:
            return f"module {module_path(node)}"
        if not frames:
            return "source unknown"
        user_frames = frames
    header, code = user_frames[-1]
    filename = header.split('"')[1].rsplit("/", 1)[-1]
    number = header.split("line ")[1].split(",")[0]
    return f"{filename}:{number}: {code}"


FOLDED_MODULES = "edgec_folded_modules"  # node.meta key: the module paths of what was folded into it


def module_paths(node: Node) -> list[str]:
    """The paths of the modules whose forward traced `node` (outermost first), then of the
    modules folded into it (a BatchNorm into its conv)."""
    return [path for path, _ in (node.meta.get("nn_module_stack") or {}).values()] + node.meta.get(FOLDED_MODULES, [])


def module_path(node: Node) -> str | None:
    """'features.3.block.1 (Hardswish)': the innermost nn.Module the node was traced in."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return None
    path, kind = list(stack.values())[-1]
    kind_name = getattr(kind, "__name__", str(kind).rsplit(".", 1)[-1])
    return f"{path} ({kind_name})" if path else kind_name


def node_location(node: Node) -> str:
    """Where a user finds the node: module path and source line, whichever are known."""
    path, line = module_path(node), source_line(node)
    if path is None or line.startswith("module ") or not list(node.meta["nn_module_stack"].values())[-1][0]:
        return line  # the top-level module: its source line says it all
    return f"{path} at {line}"


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
