"""Module-level size constants of a KernelBench-style reference, and overriding them.

One place for both sides of a shape override: `kernelevolve.spec` checks `--shape` values and
spec shapes against the reference (parsed, never executed), and the sandboxed harness
(`kernelevolve.harness.runtime.modules.load_module`) rewrites the reference's top-level
assignments before its body runs, so constants derived from an overridden one follow it.

Real problem files write their sizes in several ways, all understood here:
`N = 2048 * 2` (a constant expression), `height = width = 128` (a chained assignment),
`M, N = 128, 256` (unpacking), `input_shape = (64,)` (a tuple), `bias_shape = (out_channels, 1, 1)`
(an expression over earlier constants). Standard library only: the harness imports it before
any candidate code exists.
"""

from __future__ import annotations

import ast
import operator
import re
from typing import Any
from kernelevolve import pysource

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_CALLS = {"int": int, "float": float, "min": min, "max": max, "abs": abs, "round": round}


class ShapeError(ValueError):
    """A shape override that cannot be applied; str() is one line."""


class _NotConstant(Exception):
    pass


def _eval(node: ast.expr, scope: dict[str, Any]) -> Any:
    """A constant expression: literals, arithmetic, tuples/lists, earlier constants, int/min/max."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)):
        return node.value
    if isinstance(node, ast.Name) and node.id in scope:
        return scope[node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_eval(e, scope) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand, scope))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left, scope), _eval(node.right, scope)
        if isinstance(node.op, ast.Pow) and isinstance(right, (int, float)) and abs(right) > 64:
            raise _NotConstant
        try:
            return _BINOPS[type(node.op)](left, right)
        except Exception:
            raise _NotConstant from None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALLS and not node.keywords:
        try:
            return _CALLS[node.func.id](*(_eval(a, scope) for a in node.args))
        except _NotConstant:
            raise
        except Exception:
            raise _NotConstant from None
    raise _NotConstant


def _bindings(stmt: ast.stmt) -> list[tuple[str, ast.expr | None]] | None:
    """(name, value expression) for each name a top-level assignment binds; None if it binds none.

    `a = b = 1` binds a and b to `1`; `a, b = 1, 2` binds a to `1` and b to `2`; an unpacking
    of anything else binds its names to None (unknown)."""
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [(stmt.target.id, stmt.value)]
    if not isinstance(stmt, ast.Assign):
        return None
    out: list[tuple[str, ast.expr | None]] = []
    for target in stmt.targets:
        if isinstance(target, ast.Name):
            out.append((target.id, stmt.value))
        elif isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in target.elts):
            value = stmt.value
            same = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
            out += [(e.id, value.elts[i] if same else None) for i, e in enumerate(target.elts)]
    return out or None


def constants(source: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Name -> value of the module-level constants of `source` (parsed, never executed), with
    `overrides` applied and derived constants following them."""
    scope: dict[str, Any] = {}
    overrides = overrides or {}
    for stmt in pysource.parse(source).body:
        for name, value in _bindings(stmt) or []:
            if name in overrides:
                scope[name] = overrides[name]
                continue
            try:
                scope[name] = _eval(value, scope) if value is not None else _unknown()
            except _NotConstant:
                scope.pop(name, None)  # rebound to something we cannot evaluate: not a constant any more
    return scope


def _unknown():
    raise _NotConstant


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (tuple, list)):
        return "tuple" if isinstance(value, tuple) else "list"
    return type(value).__name__


def _show(value: Any) -> str:
    if isinstance(value, tuple) and len(value) == 1:
        return f"({value[0]!r},)"
    return repr(tuple(value)) if isinstance(value, list) else repr(value)


def check(overrides: dict[str, Any], source: str, module_name: str, where: str = "--shape") -> None:
    """ShapeError (one line) unless every override names a constant of the module and has a
    value of the kind the module gives it (an int for an int, a tuple for a tuple, ...)."""
    consts = constants(source)
    unknown = sorted(set(overrides) - set(consts))
    if unknown:
        listed = ", ".join(sorted(consts)) or "none"
        raise ShapeError(
            f"{where}: {', '.join(unknown)} is not a module-level constant of {module_name}"
            f"{did_you_mean(unknown[0], consts)} (constants: {listed})"
        )
    for name, value in overrides.items():
        problem = _mismatch(name, value, consts[name]) or _unusable_size(name, value, consts[name])
        if problem:
            shown = _show(value) if isinstance(value, (list, tuple)) else repr(value)
            raise ShapeError(f"{where}: {name}={shown}: {problem} ({module_name} has {name} = {_show(consts[name])})")


def did_you_mean(name: str, known) -> str:
    """` (did you mean X?)` for the closest of `known` to a mistyped `name`, else ''."""
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


_NOT_SIZES = ("pad", "offset", "shift", "margin", "axis", "reduc")  # names whose 0 (or negative) means something


def _unusable_size(name: str, value: Any, original: Any) -> str | None:
    """Why `value` cannot stand for the module's size `original`: a negative number where the module
    has a positive one, or 0 for a size the module writes above 1 (an empty tensor checks nothing).
    Paddings, offsets and axes (`pad`, `axis`... in the name, or a `dim` of 8 or less: a dimension's
    index, not a size) may be 0 or negative."""
    lowered = name.lower()
    if any(word in lowered for word in _NOT_SIZES):
        return None
    if "dim" in lowered and _kind(original) == "int" and original <= 8:
        return None
    pairs = (
        zip(value, original)
        if isinstance(value, (list, tuple)) and isinstance(original, (list, tuple)) and len(value) == len(original)
        else [(value, original)]
    )
    for v, o in pairs:
        if not (_kind(v) == "int" and _kind(o) == "int"):
            continue
        if v < 0 <= o:
            return f"a size cannot be negative: give a positive {name}"
        if v == 0 and o > 1:
            return f"a size of 0 makes empty tensors, with nothing to check: give a positive {name}"
    return None


def _mismatch(name: str, value: Any, original: Any) -> str | None:
    want, got = _kind(original), _kind(value)
    if want in ("tuple", "list"):
        if got not in ("tuple", "list"):
            if got in ("int", "float"):
                return f"{_article(want)} is needed: write {name}=({value!r},) or {name}={value!r},"
            return f"{_article(want)} is needed, e.g. {name}=(64,), not a {got}"
        if not value:
            return "an empty tuple is not a shape"
        inner = [_kind(x) for x in original] or ["int"]
        for x in value:
            if _kind(x) not in inner and not (_kind(x) == "int" and "float" in inner):
                return f"element {x!r} is a {_kind(x)}, the module's are {'/'.join(sorted(set(inner)))}"
        return None
    if want == "int":
        return None if got == "int" else f"an integer is needed, not a {got}"
    if want == "float":
        return None if got in ("int", "float") else f"a number is needed, not a {got}"
    if want == "bool":
        return None if got == "bool" else f"True or False is needed, not a {got}"
    if want == "str":
        return None if got == "str" else f"a string is needed, not a {got}"
    return None


def _article(kind: str) -> str:
    return "a tuple" if kind == "tuple" else "a list"


def coerce(value: Any, original: Any) -> Any:
    """`value` in the container type the module uses (JSON turns tuples into lists)."""
    if isinstance(original, tuple) and isinstance(value, list):
        return tuple(value)
    if isinstance(original, list) and isinstance(value, tuple):
        return list(value)
    if isinstance(original, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _literal(value: Any, like: ast.AST) -> ast.expr:
    node = pysource.parse(repr(value), mode="eval").body
    return ast.copy_location(node, like)


def override_tree(tree: ast.Module, overrides: dict[str, Any]) -> ast.Module:
    """Rewrite the top-level assignments of the names in `overrides` (in place; also returned).

    Each value keeps the container type the module gave it. A chained or unpacking assignment
    is split so that only the overridden names change: `height = width = 128` with height=64
    becomes `height = width = 128; height = 64`."""
    if not overrides:
        return tree
    scope = constants(ast.unparse(tree))
    body: list[ast.stmt] = []
    for stmt in tree.body:
        bound = _bindings(stmt) or []
        hits = [name for name, _ in bound if name in overrides]
        if not hits:
            body.append(stmt)
            continue
        if isinstance(stmt, ast.AnnAssign) or (isinstance(stmt, ast.Assign) and len(bound) == 1):
            value = coerce(overrides[hits[0]], scope.get(hits[0]))
            stmt.value = _literal(value, stmt.value or stmt)
            body.append(stmt)
            continue
        body.append(stmt)  # the original binding first, then the overridden names
        for name in hits:
            value = coerce(overrides[name], scope.get(name))
            body.append(
                ast.copy_location(ast.Assign(targets=[ast.Name(name, ast.Store())], value=_literal(value, stmt)), stmt)
            )
    tree.body = body
    return ast.fix_missing_locations(tree)


# -- `--shape NAME=VALUE[,NAME=VALUE...]` ---------------------------------------------------

_ITEM_START = re.compile(r"^\s*[A-Za-z_]\w*\s*=(?!=)")


def _top_level_split(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return parts


def parse_option(text: str) -> dict[str, Any]:
    """`M=4096,N=512` -> {"M": 4096, "N": 512}. Values are Python literals or constant
    expressions (`N=2048*2`); a tuple is `input_shape=(64,)`, `input_shape=64,` or
    `input_shape=64,128` (a comma not followed by NAME= belongs to the value). Anything else
    is a string. ShapeError when an item has no NAME=."""
    items: list[str] = []
    for part in _top_level_split(text):
        if _ITEM_START.match(part) or not items:
            items.append(part)
        else:
            items[-1] += "," + part
    out: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name.isidentifier() or not value:
            raise ShapeError(f"--shape {text!r}: expected NAME=VALUE[,NAME=VALUE...] (a tuple: NAME=(64,) or NAME=64,)")
        out[name] = parse_value(value)
    return out


def parse_value(text: str) -> Any:
    try:
        value = _eval(pysource.parse(text, mode="eval").body, {})
    except (SyntaxError, _NotConstant, RecursionError):
        return text
    return value
