"""What the benchmark scripts under bench/ share: the repository's paths, loading a module from its file,
and sweep spaces read from a kernel's TUNABLES.

A script at any depth under bench/ puts this folder on its path and imports what it needs:

    sys.path.insert(0, str(Path(__file__).resolve().parents[N]))  # N: how deep the script is below bench/
    from benchlib import KERNELS, REPO, load_module
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
KERNELS = REPO / "knowledge_base" / "kernels"
SPECS = REPO / "specs"

# The package (kernelevolve.*) and the kernels' shared modules (_launch_heuristics, _row_io, ...), which the
# kernel files import by name.
for _path in (KERNELS, REPO):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))


def load_module(path: Path | str, name: str, overrides: dict | None = None) -> types.ModuleType:
    """Execute the module file `path` as module `name` (registered in sys.modules: triton.jit and Gluon read a
    kernel's source through its module). `overrides` replace top-level constant assignments before the body
    runs, so that constants derived from them follow (a spec reference's shape parameters: the evaluator's
    rule, kernelevolve.shapes.override_tree)."""
    path = Path(path)
    tree = ast.parse(path.read_text(), filename=str(path))
    if overrides:
        from kernelevolve.shapes import override_tree

        override_tree(tree, overrides)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    exec(compile(tree, str(path), "exec"), module.__dict__)
    return module


def declared(kernel: str | Path):
    """CONFIG and TUNABLES of a knowledge-base kernel (a name or a file), read without running it."""
    from kernelevolve.operators.tunables import read_declared

    path = Path(kernel) if str(kernel).endswith(".py") else KERNELS / f"{kernel}.py"
    return read_declared(path.read_text())


def one_knob_moves(kernel: str | Path, knobs: list[str] | None = None) -> list[dict]:
    """Every CONFIG change of one knob to another value its TUNABLES allow (`knobs`: only these, in this order;
    default: every declared knob), each as {knob: value}: the neighbourhood of the kernel's default that the
    offline operator searches, and the sweep a script times around the default."""
    d = declared(kernel)
    moves = []
    for knob in knobs if knobs is not None else list(d.tunables):
        if knob not in d.tunables:
            raise KeyError(f"{kernel}: {knob!r} is not among its TUNABLES ({', '.join(d.tunables)})")
        moves += [{knob: value} for value in d.tunables[knob] if value != d.config[knob]]
    return moves


def outside_tunables(kernel: str | Path, variants: list[dict]) -> list[str]:
    """The KEY=VALUE settings of `variants` that the kernel's TUNABLES do not declare (empty: every variant is
    a point of the declared space)."""
    tunables = declared(kernel).tunables
    return sorted(
        {f"{k}={v!r}" for variant in variants for k, v in variant.items() if k not in tunables or v not in tunables[k]}
    )
