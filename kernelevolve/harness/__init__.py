"""Render harness_templates/<tool>.py.j2 into one standalone script per (candidate, tool).

The script reads nothing but its own embedded configuration and the files it names, and writes
one JSON result; instrumentation lives in the templates, never in the candidate.
"""

from __future__ import annotations

import json
from pathlib import Path
from functools import lru_cache
from typing import Any

import jinja2

from kernelevolve.evaluation import interpreter_compat
from kernelevolve.paths import HARNESS_TEMPLATES


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(HARNESS_TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


def available_tools() -> list[str]:
    """Tools are found by convention: every non-underscore template in harness_templates/."""
    return sorted(p.name[: -len(".py.j2")] for p in HARNESS_TEMPLATES.glob("*.py.j2") if not p.name.startswith("_"))


def render(tool: str, config: dict[str, Any]) -> str:
    """The script for `tool` with `config` embedded as a Python literal of its JSON text."""
    if tool not in available_tools():
        raise ValueError(f"no harness template for {tool!r} (have: {', '.join(available_tools())})")
    template = _environment().get_template(f"{tool}.py.j2")
    return template.render(
        config_literal=repr(json.dumps(config)),
        interpreter_compat_source=Path(interpreter_compat.__file__).read_text(),
    )
