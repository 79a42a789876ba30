"""Load a model the user hands us and turn it into an exported FX graph module.

Accepted: a `torch.export.save`d ExportedProgram (`.pt2`), or `path/to/file.py:factory` where
`factory()` returns `(nn.Module, example_inputs)` (the command line's forms); or, from Python, an
in-memory `nn.Module` with its example inputs, or an `ExportedProgram` (float or PT2E-quantized).
Pickled modules (`torch.save(model)`) run arbitrary code when loaded, so they are refused with
instructions instead of being loaded.
"""

from __future__ import annotations

import copy
import importlib.util
import inspect
import sysconfig
import traceback
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.fx import GraphModule, Node

from edgec.errors import EdgecError

HOW_TO_EXPORT = (
    "export it instead: torch.export.save(torch.export.export(model.eval(), "
    "(example_input,)), 'model.pt2'), or pass 'file.py:factory'"
)


@dataclass
class LoadedModel:
    module: GraphModule  # exported graph module (training IR), parameters as get_attr
    example_inputs: tuple  # the graph's inputs: tensors only (Python scalars are bound into the graph)
    origin: str  # what the user passed, for messages
    notes: list[str] = field(
        default_factory=list
    )  # one line each: what edgec decided for the user (specialised shapes)


def load(model, example_inputs=None) -> LoadedModel:
    """`model` is a spec string (a .pt2 path or 'file.py:factory'), an ExportedProgram, or an
    nn.Module (then `example_inputs`, a tensor or a tuple of tensors, is required)."""
    if isinstance(model, torch.export.ExportedProgram):
        return _from_program(model, example_inputs, "ExportedProgram")
    if isinstance(model, torch.nn.Module):
        origin = type(model).__name__
        if example_inputs is None:
            raise EdgecError(
                f"{origin}: an nn.Module needs example inputs (a tensor shaped like one batch, or a tuple of them)"
            )
        example = as_example_inputs(example_inputs, origin)
        return LoadedModel(export(model, example, origin), tensors_of(example), origin)
    if not isinstance(model, (str, Path)):
        raise EdgecError(
            f"cannot compile a {type(model).__name__}: expected an nn.Module, an ExportedProgram, "
            f"a .pt2 path or 'file.py:factory'"
        )
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
        raise EdgecError(
            f"{path}: is a pickled module (torch.save), which edgec will not unpickle "
            f"because loading it runs arbitrary code; {HOW_TO_EXPORT}"
        )
    try:
        program = torch.export.load(str(path))
    except Exception as exc:  # torch raises many types for a corrupt archive
        raise EdgecError(f"{path}: cannot load as a torch.export program: {_first_line(exc)}") from None
    return _from_program(program, None, str(path))


def _from_program(program, example_inputs, origin: str) -> LoadedModel:
    """A program's graph module, its dynamic dimensions (torch.export.Dim) and Python scalar
    inputs specialised to the example inputs (the user's, else the program's own) by exporting it
    again with them: edgec compiles one static shape."""
    if example_inputs is not None:
        example = as_example_inputs(example_inputs, origin)
    elif program.example_inputs:
        example = tuple(program.example_inputs[0])
    else:
        example = _example_from_signature(program, origin)
    dynamic = dynamic_inputs(program)
    if not dynamic and all(isinstance(x, torch.Tensor) for x in example):
        return LoadedModel(program.module(), example, origin)
    notes = [
        f"note: {origin}: input {index} has dynamic dimensions {shape}; compiled for the example input's "
        f"{list(example[index].shape)} (one static shape per build)"
        for index, shape in dynamic.items()
        if index < len(example) and isinstance(example[index], torch.Tensor)
    ]
    return LoadedModel(export_static(program.module(), example, origin), tensors_of(example), origin, notes)


def dynamic_inputs(program) -> dict[int, str]:
    """{user input index: its shape with symbols, e.g. '[s0, 3, 16, 16]'} for every input of the
    program exported with dynamic dimensions."""
    user_inputs = list(program.graph_signature.user_inputs)
    dynamic = {}
    for node in program.graph.nodes:
        shape = getattr(node.meta.get("val"), "shape", ())
        if node.op == "placeholder" and node.name in user_inputs and any(isinstance(d, torch.SymInt) for d in shape):
            dynamic[user_inputs.index(node.name)] = f"[{', '.join(str(d) for d in shape)}]"
    return dynamic


def as_example_inputs(example_inputs, origin: str) -> tuple:
    """A tensor, an array or a tuple/list of them, as a tuple of float tensors; Python scalars
    (and None) stay as they are: torch.export makes them constants of the graph."""
    items = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    try:
        return tuple(
            x if isinstance(x, (torch.Tensor, bool, int, float)) or x is None else torch.as_tensor(x) for x in items
        )
    except (TypeError, RuntimeError, ValueError) as exc:
        raise EdgecError(f"{origin}: example inputs must be tensors or arrays ({_first_line(exc)})") from None


def tensors_of(example: tuple) -> tuple:
    return tuple(x for x in example if isinstance(x, torch.Tensor))


def _example_from_signature(program, origin: str) -> tuple:
    """Zero tensors shaped like the program's inputs (dynamic dimensions at their traced size)."""
    user_inputs = set(program.graph_signature.user_inputs)
    example = []
    for node in program.graph.nodes:
        if node.op != "placeholder" or node.name not in user_inputs:
            continue
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor):
            example.append(value)
            continue
        hints = [d if isinstance(d, int) else d.node.hint for d in value.shape]
        if any(hint is None for hint in hints):
            raise EdgecError(
                f"{origin}: input {node.name} has dynamic dimensions {list(value.shape)} and the program "
                f"carries no example inputs; export it with a static example input"
            )
        example.append(torch.zeros(hints))
    return tuple(example)


def _load_factory(path: Path, factory: str, spec: str) -> LoadedModel:
    if not path.is_file():
        raise EdgecError(f"{path}: no such file")
    module_spec = importlib.util.spec_from_file_location(f"edgec_user_{path.stem}", path)
    user_module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(user_module)
    except Exception as exc:
        raise EdgecError(f"{path}: failed to import: {user_error(exc)}") from None
    fn = getattr(user_module, factory, None)
    if not callable(fn):
        raise EdgecError(f"{path}: has no function '{factory}'")
    try:
        result = fn()
    except Exception as exc:
        raise EdgecError(f"{spec}: {factory}() raised {user_error(exc)}") from None
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], torch.nn.Module)):
        raise EdgecError(f"{spec}: must return (nn.Module, example_inputs)")
    model, example = result
    example = as_example_inputs(example, spec)
    return LoadedModel(export(model, example, spec), tensors_of(example), spec)


def export(model: torch.nn.Module, example_inputs: tuple, origin: str) -> GraphModule:
    """The model's inference graph (exported in eval mode; a notebook's module is left in the mode
    it was in), Python scalars among the example inputs bound into it as constants."""
    training = model.training
    try:
        return export_static(model.eval(), example_inputs, origin)
    finally:
        model.train(training)


def export_static(model: torch.nn.Module, example_inputs: tuple, origin: str) -> GraphModule:
    """torch.export of `model` (an nn.Module in eval mode, or a program's module) for exactly the
    example inputs' shapes, its Python scalars bound as constants (bind_scalars)."""
    try:
        program = torch.export.export(bind_scalars(model, example_inputs), tensors_of(example_inputs))
    except Exception as exc:
        raise EdgecError(f"{origin}: torch.export failed: {user_error(exc)}") from None
    return program.module()


def bind_scalars(model: torch.nn.Module, example_inputs: tuple) -> torch.nn.Module:
    """`model` itself if every example input is a tensor; else a shallow copy (same submodules and
    parameters, so the same module paths) whose forward takes the tensors alone and passes the
    Python scalars (a float, an int, None) where the example had them: torch.export would make them
    constants anyway, and the compiled program's inputs are its tensors."""
    if all(isinstance(x, torch.Tensor) for x in example_inputs):
        return model
    scalars = {i: x for i, x in enumerate(example_inputs) if not isinstance(x, torch.Tensor)}
    bound = copy.copy(model)
    forward = type(model).forward.__get__(bound)

    def forward_tensors(*tensors):
        given = iter(tensors)
        return forward(*(scalars[i] if i in scalars else next(given) for i in range(len(example_inputs))))

    names = [
        p
        for p in inspect.signature(forward).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if len(names) >= len(example_inputs):  # the graph's inputs keep the user's names (x, not tensors_0)
        forward_tensors.__signature__ = inspect.Signature(
            [
                names[i].replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD, default=inspect.Parameter.empty)
                for i, x in enumerate(example_inputs)
                if isinstance(x, torch.Tensor)
            ]
        )
    bound.forward = forward_tensors
    return bound


# Where the frames of an exception's traceback are not the user's: torch, edgec, Python's library.
_NOT_USER_CODE = tuple(
    f"{Path(folder).resolve()}/"
    for folder in (Path(torch.__file__).parent, Path(__file__).parent.parent, sysconfig.get_paths()["stdlib"])
)


def user_error(exc: BaseException) -> str:
    """'Type: first line (at file.py:LINE)': an exception raised by the user's code (a factory,
    a model's forward), located at the innermost frame of the traceback outside torch, edgec and
    Python's own library (where it left the user's code); torch may re-raise it as the cause or
    context of its own exception, whose traceback stops short of the user's frames."""
    chain, cause = [], exc
    while cause is not None and cause not in chain:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    for raised in reversed(chain):  # the original exception first: its traceback is the deepest
        for frame in reversed(traceback.extract_tb(raised.__traceback__)):
            if not frame.filename.startswith("<") and not str(Path(frame.filename).resolve()).startswith(
                _NOT_USER_CODE
            ):
                return (
                    f"{type(exc).__name__}: {_first_line(exc)} (at {Path(frame.filename).name}:{frame.lineno}: "
                    f"{(frame.line or '').strip()})"
                )
    return f"{type(exc).__name__}: {_first_line(exc)}"


def source_line(node: Node) -> str:
    """'file.py:LINE: code' of the user's frame that created `node` (skipping torch's own frames)."""
    lines = (node.meta.get("stack_trace") or "").strip().splitlines()
    frames = [
        (lines[i].strip(), lines[i + 1].strip() if i + 1 < len(lines) else "")
        for i in range(len(lines))
        if lines[i].strip().startswith('File "')
    ]
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


def take_location(new: Node, origin: Node) -> None:
    """`new` stands for (part of) `origin`: it takes origin's source line and module path, which
    every message about it names."""
    new.meta.update({key: origin.meta[key] for key in ("stack_trace", "nn_module_stack") if key in origin.meta})


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
