"""Operators that write kernels, chosen by name with `--model`.

- `anthropic:MODEL` (ANTHROPIC_API_KEY; ANTHROPIC_BASE_URL honoured), e.g. anthropic:claude-opus-4-5
- `openai:MODEL` (OPENAI_API_KEY; OPENAI_BASE_URL for vLLM, Ollama, llama.cpp: no key needed there)
- `file:DIR` (air-gapped: prompts written to DIR, replies read back from DIR)
- `offline` (no model: the knowledge base's reference kernel and its declared tunables)
- `plugin:PATH.py:CLASS` (a user-written operator class, trusted code)

No `--model` means offline (the CLI reads $KERNELEVOLVE_MODEL first): an API key in the
environment alone never starts paid calls. Options (temperature, max_tokens, timeout_s,
max_retries, token_budget, llm_insights, use_cache, wait_s, price) come from the caller only:
the CLI resolves them from its options and kernelevolve.settings once, and saves them with the
run, so a resumed run gets the same ones whatever the environment says then.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from kernelevolve.llm.base import LLMError, Provider
from kernelevolve.llm.file_provider import FileProvider
from kernelevolve.llm.providers import AnthropicProvider, OpenAIProvider
from kernelevolve.operators.base import BaseOperator, Operator, OperatorContext, ParentView, Proposal
from kernelevolve.operators.errors import OperatorError

# `--model NAME:ARG` -> the provider class built as cls(ARG, **options); a new provider: its class and a line here
PROVIDER_CLASSES: dict[str, type[Provider]] = {
    "anthropic": AnthropicProvider,
    "openai": OpenAIProvider,
    "file": FileProvider,
}


def providers_help() -> str:
    """What --model takes, e.g. `anthropic:MODEL, openai:MODEL, file:DIR, offline, plugin:PATH.py:CLASS`."""
    named = [f"{name}:{'DIR' if cls is FileProvider else 'MODEL'}" for name, cls in PROVIDER_CLASSES.items()]
    return ", ".join([*named, "offline", "plugin:PATH.py:CLASS"])


_PROVIDER_OPTIONS = {"temperature", "max_tokens", "timeout_s", "max_retries", "backoff_s", "max_backoff_s", "price"}
_OPERATOR_OPTIONS = {"token_budget", "llm_insights", "use_cache", "cache", "knowledge"}


def resolve_operator(model: str | None, **options) -> Operator:
    """The operator named by `model` (see the module docstring); OperatorError in one line."""
    model = (model or "").strip() or "offline"
    if model.startswith("plugin:"):
        return _plugin(model, options)
    if model == "offline":
        from kernelevolve.operators.offline import OfflineOperator

        # --kernel: saved with the run, so resume keeps it; knowledge: the run's knowledge base (not saved)
        return OfflineOperator(knowledge=options.get("knowledge"), kernel=options.get("kernel"))
    provider_name, sep, rest = model.partition(":")
    if not sep or not rest:
        raise OperatorError(f"--model {model!r}: expected one of {providers_help()}")
    cls = PROVIDER_CLASSES.get(provider_name)
    if cls is None:
        raise OperatorError(f"--model {model!r}: unknown provider {provider_name!r} (use {providers_help()})")
    opts = {k: v for k, v in options.items() if v is not None}
    provider_opts = {k: v for k, v in opts.items() if k in _PROVIDER_OPTIONS}
    operator_opts = {k: v for k, v in opts.items() if k in _OPERATOR_OPTIONS}
    if cls is FileProvider:
        if "wait_s" in opts:
            provider_opts["wait_s"] = opts["wait_s"]
        operator_opts.setdefault("use_cache", False)  # the folder is its own cache
    try:
        provider = cls(rest, **provider_opts)
    except LLMError as e:
        raise OperatorError(f"--model {model}: {e}") from None
    from kernelevolve.operators.llm_operator import LLMOperator

    return LLMOperator(provider, **operator_opts)


def _plugin(model: str, options: dict) -> Operator:
    path, _, name = model[len("plugin:") :].rpartition(":")
    if not path or not name or not Path(path).exists():
        raise OperatorError(f"--model {model!r}: expected plugin:PATH.py:CLASS with an existing file")
    mod_spec = importlib.util.spec_from_file_location(f"kernelevolve_plugin_{Path(path).stem}", path)
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    cls = getattr(module, name, None)
    if cls is None:
        raise OperatorError(f"--model {model!r}: {path} defines no {name}")
    operator = cls(**options)
    return operator if isinstance(operator, BaseOperator) else PluginOperator(operator)


class PluginOperator(BaseOperator):
    """A user's operator class that does not subclass BaseOperator: its `draft` and `improve`, and
    those of the Operator hooks it defines (the others keep BaseOperator's defaults). The only place
    that looks at which methods an operator has, because a plugin is not ours to change."""

    HOOKS = ("check", "check_endpoint", "replay", "attach", "write_insight")

    def __init__(self, inner) -> None:
        self.inner = inner
        self.name = str(getattr(inner, "name", type(inner).__name__))
        for hook in self.HOOKS:
            method = getattr(inner, hook, None)
            if callable(method):
                setattr(self, hook, method)

    def draft(self, spec, context: OperatorContext) -> Proposal:
        return self.inner.draft(spec, context)

    def improve(self, parents: list[ParentView], context: OperatorContext) -> Proposal:
        return self.inner.improve(parents, context)


__all__ = [
    "BaseOperator",
    "Operator",
    "OperatorContext",
    "OperatorError",
    "ParentView",
    "PluginOperator",
    "PROVIDER_CLASSES",
    "Proposal",
    "providers_help",
    "resolve_operator",
]
