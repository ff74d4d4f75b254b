"""Small shapes for problem files written for large GPUs, so that a CPU (interpreter) campaign runs.

The rule, applied to a reference module without `interpret_shapes` and without `--shape`:

1. Only *root* size constants change: module-level integers (or tuples or lists of integers) written
   as literals (`N = 4096`, `M = 1024 * 2`, `input_shape = (128, 4096)`, `layer_sizes = [16384, 16384]`). Constants computed from other
   constants (`hidden = dim * 4`, `bias_shape = (out_channels, 1, 1)`) are left alone and follow.
2. Each value above KEEP shrinks to about its square root, at least KEEP and at most MAX_SIZE; values
   at or below KEEP (kernel sizes, strides, small channel, head or group counts, and 16, the least
   `tl.dot` dimension) stay. A power of two stays one (2**ceil(log2(v) / 2)); any other size stays
   another (one more when its root is a power of two), so that a kernel written for ragged sizes meets a
   ragged tail here too. The square root keeps the order of the sizes (a long row stays longer than a
   short one) while a 4096^3 matmul becomes 64^3.
3. Divisibility the code relies on is kept: when one original value divides another (groups and
   channels, heads and width, a tile and a length), the scaled larger one is raised to the next
   multiple of the scaled smaller one. A model width over a head count (`n_embd` and `n_head`, by their
   names) keeps a head size of at least MIN_QUOTIENT where it had one (16, not 4: `tl.dot` over it must be
   legal), as long as the width stays within MAX_RAISED.

A module whose root sizes are all at most MAX_SIZE is small already and keeps them. Nothing else
(floats, flags, strings, negatives) changes. The result is a shape override like
`--shape`, stored with the campaign's problem and printed, so the shapes used are always known.
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any

from kernelevolve import pysource
from kernelevolve.shapes import constants

MAX_SIZE = 64  # the largest scaled size (before rule 3)
KEEP = 16  # sizes up to this stay as written; larger ones scale to no less
MIN_QUOTIENT = 16  # rule 3: a head size at least this on the GPU keeps at least this
HEADS = re.compile(r"head", re.IGNORECASE)  # a head count, and the widths it divides into heads
WIDTH = re.compile(r"emb|hidden|model|width", re.IGNORECASE)
MAX_RAISED = 128  # rule 3 raises a size for a quotient no further than this


def _is_literal(node: ast.expr) -> bool:
    """A value written without naming other constants (a number, a tuple of numbers, arithmetic)."""
    return not any(isinstance(n, ast.Name) and n.id not in ("int",) for n in ast.walk(node))


def _root_constants(source: str) -> dict[str, Any]:
    """Name -> value of the root size constants (rule 1)."""
    values = constants(source)
    roots: dict[str, Any] = {}
    for stmt in pysource.parse(source).body:
        if not isinstance(stmt, ast.Assign) or not _is_literal(stmt.value):
            continue
        names = []
        for target in stmt.targets:
            if isinstance(target, ast.Name):
                names.append(target.id)
            elif isinstance(target, (ast.Tuple, ast.List)):
                names += [e.id for e in target.elts if isinstance(e, ast.Name)]
        for name in names:
            value = values.get(name)
            if _is_size(value) or (isinstance(value, (tuple, list)) and value and all(_is_size(v) for v in value)):
                roots[name] = value
    return roots


def _is_size(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _power_of_two(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def _shrink(v: int) -> int:
    if v <= KEEP:
        return v
    if _power_of_two(v):
        return min(MAX_SIZE, max(KEEP, 1 << math.ceil(math.log2(v) / 2)))
    root = min(MAX_SIZE - 1, max(KEEP + 1, math.ceil(math.sqrt(v))))
    return root + 1 if _power_of_two(root) else root  # ragged stays ragged


def scaled_shape(source: str) -> dict[str, Any]:
    """The overrides the rule gives for a reference module's source ({} when nothing is large)."""
    roots = _root_constants(source)
    originals = sorted(
        set(v for value in roots.values() for v in (value if isinstance(value, (tuple, list)) else (value,)))
    )
    if not originals or originals[-1] <= MAX_SIZE:
        return {}  # small already: a module written for the interpreter keeps its sizes
    scaled = {v: _shrink(v) for v in originals}
    originals = [v for v in originals if v > 1]
    counts = {v for name, v in roots.items() if isinstance(v, int) and HEADS.search(name)}
    heads = {(c, v) for c in counts for name, v in roots.items() if isinstance(v, int) and WIDTH.search(name)}
    for i, small in enumerate(originals):  # rule 3, smallest first so that chains a | b | c hold
        for big in originals[i + 1 :]:
            if big % small:
                continue
            quotient = math.ceil(scaled[big] / scaled[small])
            if (small, big) in heads and big // small >= MIN_QUOTIENT and scaled[small] * MIN_QUOTIENT <= MAX_RAISED:
                quotient = max(quotient, MIN_QUOTIENT)  # a head size stays a legal tl.dot dimension
            scaled[big] = scaled[small] * quotient
    out: dict[str, Any] = {}
    for name, value in roots.items():
        if isinstance(value, (tuple, list)):
            new = type(value)(scaled.get(v, v) for v in value)  # a list stays a list (an MLP's layer sizes)
        else:
            new = scaled.get(value, value)
        if new != value:
            out[name] = new
    return out


SCALED = "scaled for the interpreter"
RULE_TEXT = (
    f"each size constant above {KEEP} to about its square root, at most {MAX_SIZE}, a ragged size staying ragged; "
    "--shape NAME=VALUE chooses others"
)


def shapes_for(spec, device: str, overrides: list[dict[str, Any]] | None) -> tuple[list[dict[str, Any]] | None, str]:
    """(the shapes to evaluate, where they came from), as `suite` chooses them for each problem and
    `eval`/`run` for theirs: --shape; the spec's shapes on a GPU, its interpret_shapes or shapes on
    the interpreter; for a module without such shapes under the interpreter, the scaling rule when its
    sizes are large. None: the spec's (or the module's) own shapes."""
    if overrides:
        return overrides, "--shape"
    if device != "interpret":
        return None, "the spec's shapes" if spec.path is not None else "the module's constants"
    if spec.interpret_shapes:
        return None, "the spec's interpret_shapes"
    if spec.path is not None and spec.shapes != [{}]:
        return None, "the spec's shapes (it has no interpret_shapes)"
    scaled = scaled_shape(spec.reference_source)
    if scaled:
        return [scaled], SCALED
    return None, "the module's constants (small already)"
