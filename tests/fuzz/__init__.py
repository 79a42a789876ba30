"""Differential fuzzing of edgec: random PyTorch models, compiled, run, compared byte for byte.

generator.py  the engine: a model is a list of layers drawn from operator families, rendered
              into a self-contained Python file (an nn.Module, a factory, its input data).
families.py   the operator families (one place to add new ones; see its docstring).
runner.py     compile one model, run the golden simulator and the C (host with sanitizers, or a
              Cortex-M board under QEMU), classify, write reproducers, minimise, summarise.
__main__.py   the command line (`python -m tests.fuzz --help`; `make fuzz`).

The fuzzer lives in the test tree, not in the edgec package: it is test tooling (it builds
nn.Modules, runs float models, writes reproducers), and the installed compiler never imports it.
"""
