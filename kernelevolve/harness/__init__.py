"""Render harness_templates/<tool>.py.j2 into one standalone script per (candidate, tool).

The template holds only what differs per candidate (which tool, which files, which cases); the
harness is the importable package `kernelevolve.harness.runtime`, one module per tool.
Instrumentation lives there, never in the candidate.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from kernelevolve.harness.runtime.configs import HarnessConfig
from kernelevolve.paths import HARNESS_TEMPLATES

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the directory that holds kernelevolve/


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


def render(tool: str, config: HarnessConfig | dict[str, Any]) -> str:
    """The script for `tool` with `config` embedded as a Python literal of its JSON text: a typed
    configuration (runtime/configs.py: the harness parses it back at its entry) as its `to_dict()`, or the
    plain dict of a harness that reads one (the profiling and TritonBench tools)."""
    if tool not in available_tools():
        raise ValueError(f"no harness template for {tool!r} (have: {', '.join(available_tools())})")
    if isinstance(config, HarnessConfig):
        if config.TOOL != tool:
            raise ValueError(f"a {type(config).__name__} is not the {tool!r} harness's configuration")
        config = config.to_dict()
    template = _environment().get_template(f"{tool}.py.j2")
    return template.render(tool=tool, config_literal=repr(json.dumps(config)), package_root=repr(str(PACKAGE_ROOT)))
