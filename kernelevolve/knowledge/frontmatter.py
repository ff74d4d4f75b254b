"""Front matter: the small YAML header every knowledge-base document starts with.

Markdown documents open with it; reference kernels carry it at the top of their module
docstring. Every problem becomes a `KnowledgeError` whose one-line message names the file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import yaml
from kernelevolve import pysource

KINDS = ("hardware", "constraints", "guidance", "kernels")
LIST_FIELDS = ("tags", "hardware", "family")
REQUIRED = ("title", "kind", *LIST_FIELDS)


# libyaml's safe loader where PyYAML was built with it: every command reads every document's header, and
# the pure-Python loader is most of that time.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class KnowledgeError(ValueError):
    """A knowledge-base file that cannot be used; str() is one line naming the file."""


def split_front_matter(text: str, path: Path) -> tuple[dict, str]:
    """`---\\n<yaml>\\n---\\n<body>` -> (validated header, body)."""
    lines = text.lstrip("\ufeff").lstrip("\n").splitlines()
    if not lines or lines[0].strip() != "---":
        raise KnowledgeError(f"{path}: no front matter (the file must start with a `---` line)")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise KnowledgeError(f"{path}: front matter is not closed by a second `---` line") from None
    try:
        header = yaml.load("\n".join(lines[1:end]), Loader=_LOADER)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark else ""
        problem = str(getattr(e, "problem", None) or e).replace("\n", " ")
        raise KnowledgeError(f"{path}: front matter is not valid YAML{where}: {problem}") from None
    if not isinstance(header, dict):
        raise KnowledgeError(f"{path}: front matter must be a YAML mapping with {', '.join(REQUIRED)}")
    return _validated(header, path), "\n".join(lines[end + 1 :]).strip("\n")


def _validated(header: dict, path: Path) -> dict:
    missing = [f for f in REQUIRED if f not in header]
    if missing:
        raise KnowledgeError(f"{path}: front matter lacks {', '.join(missing)}")
    if not isinstance(header["title"], str) or not header["title"].strip():
        raise KnowledgeError(f"{path}: front matter `title` must be a non-empty string")
    if header["kind"] not in KINDS:
        raise KnowledgeError(f"{path}: front matter `kind` is {header['kind']!r}; use one of {', '.join(KINDS)}")
    out = dict(header)
    for field in LIST_FIELDS:
        value = header[field]
        if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
            raise KnowledgeError(f"{path}: front matter `{field}` must be a list of names, e.g. [{field}_a, {field}_b]")
        out[field] = [str(v).strip().lower() for v in value]
    for field in ("hardware", "family"):
        if not out[field]:
            raise KnowledgeError(f"{path}: front matter `{field}` is empty (write [any] if it applies everywhere)")
    if "spec" in header and not isinstance(header["spec"], str):
        raise KnowledgeError(f"{path}: front matter `spec` must be a spec name (a string)")
    return out


def kernel_docstring(source: str, path: Path) -> str:
    """The module docstring of a reference kernel, where its front matter lives."""
    try:
        tree = pysource.parse(source, filename=str(path))
    except SyntaxError as e:
        raise KnowledgeError(f"{path}: line {e.lineno}: {e.msg}") from None
    doc = ast.get_docstring(tree, clean=False)
    if doc is None:
        raise KnowledgeError(
            f"{path}: no module docstring (a reference kernel starts with a docstring holding `---` front matter)"
        )
    return doc
