"""A kernel's declared tunables: one literal `CONFIG = {...}` and `TUNABLES = {key: [values]}`.

Reference kernels in knowledge_base/kernels/ declare the configuration they launch with and the
values each knob may take. The offline operator searches that space by rewriting the values of
the knobs that move, in place: the CONFIG's layout (one knob per line), its comments and every
other byte of the file stay as they were, so a candidate's diff against its parent is exactly
the knobs that moved.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any
from kernelevolve import pysource


class TunablesError(ValueError):
    """The source does not declare a usable CONFIG / TUNABLES pair."""


Span = tuple[int, int, int, int]  # (lineno, col, end_lineno, end_col): 1-based lines, UTF-8 byte columns


@dataclass
class Declared:
    config: dict[str, Any]
    tunables: dict[str, list[Any]]
    span: Span  # the CONFIG assignment
    value_spans: dict[str, Span]  # each knob's value in it


def _literal_assignments(tree: ast.Module, name: str) -> list[ast.AST]:
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            found.append(node)
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == name
            and node.value
        ):
            found.append(node)
    return found


def read_declared(source: str) -> Declared:
    """CONFIG and TUNABLES of a kernel source (parsed, never executed)."""
    try:
        tree = pysource.parse(source)
    except SyntaxError as e:
        raise TunablesError(f"source does not parse (line {e.lineno}: {e.msg})") from None
    values = {}
    for name in ("CONFIG", "TUNABLES"):
        nodes = _literal_assignments(tree, name)
        if len(nodes) != 1:
            raise TunablesError(f"expected one module-level `{name} = {{...}}`, found {len(nodes)}")
        try:
            values[name] = (nodes[0], ast.literal_eval(nodes[0].value))
        except ValueError:
            raise TunablesError(f"`{name}` is not a literal dict") from None
        if not isinstance(values[name][1], dict):
            raise TunablesError(f"`{name}` is not a dict")
    node, config = values["CONFIG"]
    if not isinstance(node.value, ast.Dict):
        raise TunablesError("`CONFIG` is not a dict display ({...})")
    value_spans = {
        ast.literal_eval(k): (v.lineno, v.col_offset, v.end_lineno, v.end_col_offset)
        for k, v in zip(node.value.keys, node.value.values)
        if k is not None
    }
    tunables = {k: list(v) for k, v in values["TUNABLES"][1].items()}
    for key, allowed in tunables.items():
        if not allowed:
            raise TunablesError(f"TUNABLES[{key!r}] lists no values")
        if key not in config:
            raise TunablesError(f"TUNABLES[{key!r}] is not a key of CONFIG")
    return Declared(config, tunables, (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset), value_spans)


def rewrite_config(source: str, config: dict[str, Any]) -> str:
    """`source` with the values of `config`'s knobs replaced where they stand in CONFIG; every
    other byte (the layout, comments, the other knobs) unchanged."""
    declared = read_declared(source)
    unknown = set(config) - set(declared.config)
    if unknown:
        raise TunablesError(f"CONFIG has no key {', '.join(sorted(map(str, unknown)))}")
    data = source.encode()  # ast columns are UTF-8 byte offsets
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line.encode()))
    edits = []
    for key, value in config.items():
        if value == declared.config[key] and type(value) is type(declared.config[key]):
            continue
        lineno, col, end_lineno, end_col = declared.value_spans[key]
        edits.append((starts[lineno - 1] + col, starts[end_lineno - 1] + end_col, repr(value).encode()))
    for begin, end, text in sorted(edits, reverse=True):
        data = data[:begin] + text + data[end:]
    return data.decode()


def config_key(config: dict[str, Any]) -> tuple:
    """A hashable, order-independent identity for a configuration."""
    return tuple(sorted((str(k), repr(v)) for k, v in config.items()))


def describe_change(old: dict[str, Any], new: dict[str, Any]) -> str:
    """`BLOCK_N 1024->2048, num_warps 4->8` (keys in the new config's order)."""
    moved = [f"{k} {old.get(k)!r}->{v!r}" for k, v in new.items() if old.get(k) != v]
    return ", ".join(moved) or "no change"
