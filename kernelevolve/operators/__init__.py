"""Operators that write kernels, chosen by name with `--model PROVIDER:MODEL`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from kernelevolve.operators.base import Operator, OperatorContext, ParentView, Proposal


class OperatorError(ValueError):
    """The chosen operator cannot be used (unknown provider, missing key, no reference kernel)."""


def resolve_operator(model: str | None, **options) -> Operator:
    """`plugin:PATH.py:NAME` loads a user-written operator class from a file (trusted code).

    The LLM providers and the offline operator are added by kernelevolve.llm (issue 5).
    """
    if model and model.startswith("plugin:"):
        path, _, name = model[len("plugin:"):].rpartition(":")
        if not path or not name or not Path(path).exists():
            raise OperatorError(f"--model {model!r}: expected plugin:PATH.py:CLASS with an existing file")
        mod_spec = importlib.util.spec_from_file_location(f"kernelevolve_plugin_{Path(path).stem}", path)
        module = importlib.util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(module)
        cls = getattr(module, name, None)
        if cls is None:
            raise OperatorError(f"--model {model!r}: {path} defines no {name}")
        return cls(**options)
    raise OperatorError(f"--model {model!r}: no such operator (available: plugin:PATH.py:CLASS)")


__all__ = ["Operator", "OperatorContext", "OperatorError", "ParentView", "Proposal", "resolve_operator"]
