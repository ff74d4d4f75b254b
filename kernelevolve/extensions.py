"""Every way to extend KernelEvolve, named in one place: run settings, search policies, model
providers, kernel languages and profiling tools.

For each extension point: what a new one is (the class it subclasses, the record it is an instance
of, or the protocol its module follows), the registries it is added to (the package's own objects,
imported here, never a copy), the names registered now, and every file of the repository that adding
one touches, with what each file gets (`NAME` in a path is the new one's name). The README's
"Extension points" table lists the same files; tests/test_extensions.py checks that they agree, that
they exist and that every registered name is listed here.

Not listed, because nothing registers it: an operator of one's own, `--model plugin:PATH.py:CLASS`
(a class with `draft` and `improve`, see kernelevolve.operators.Operator), written outside the package.

This module imports the registries from their rooms, so it sits above them in the README's layers; nothing
in the package imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable, Iterable, Protocol, runtime_checkable

from kernelevolve import languages
from kernelevolve.languages import LANGUAGES, Language
from kernelevolve.llm.base import Provider
from kernelevolve.operators import PROVIDER_CLASSES
from kernelevolve.profiling.tools import TOOLS, ProfilerTool
from kernelevolve.runs.config import POLICY_OPTIONS, PolicyOptions, RunConfig, RunOptions
from kernelevolve.search.policies import POLICIES, Policy


@runtime_checkable
class ProfilerHarness(Protocol):
    """A profiling tool's harness module (kernelevolve/harness/runtime/profile_NAME.py), run in the
    sandbox by harness_templates/profile.py.j2: `main(config)` profiles each of config["cases"], writes
    one raw output per case under config["output_dir"] and names it in the result's `cases` (see
    profile_torch.py)."""

    def main(self, config: dict) -> None: ...


@dataclass(frozen=True)
class ExtensionPoint:
    name: str
    interface: tuple[Any, ...]  # what a new one subclasses, is an instance of, or follows
    registries: tuple[Any, ...]  # the package's registries themselves (a new one is added to each)
    where: str  # where they are written
    files: dict[str, str]  # repository path -> what adding one changes there
    listing: Callable[[], Iterable[str]]  # the names registered now

    def registered(self) -> tuple[str, ...]:
        return tuple(self.listing())


EXTENSION_POINTS: dict[str, ExtensionPoint] = {
    point.name: point
    for point in (
        ExtensionPoint(
            name="setting",
            interface=(RunConfig,),
            registries=(RunOptions,),
            where="kernelevolve/runs/config.py: RunOptions, and its section of RunConfig",
            files={
                "kernelevolve/cli/run_cmd.py": "its option on `run`, handed to RunOptions",
                "kernelevolve/runs/config.py": "its RunOptions field, checked in `resolve`; its field in a section "
                "of RunConfig; saved with the run: its RunSettings field, `from_row` and `settings`",
                "kernelevolve/runs/lifecycle.py": "handed to what uses it (engine, executor, operator, profiler)",
                "kernelevolve/settings.py": "only with an environment variable: its Settings field, read in `resolve`",
                "kernelevolve/cli/suite_cmd.py": "only if campaigns take it: its option on `suite`",
                "kernelevolve/campaign/runner.py": "only if campaigns take it: CampaignSettings (`of`, `run_config`)",
                "kernelevolve/runs/ray_executor.py": "only if the evaluator takes it: handed to each Ray worker",
                "kernelevolve/runs/ray_worker.py": "only if the evaluator takes it: the Ray workers build their own",
            },
            listing=lambda: (f.name for f in fields(RunOptions)),
        ),
        ExtensionPoint(
            name="policy",
            interface=(Policy, PolicyOptions),
            registries=(POLICIES, POLICY_OPTIONS),
            where="kernelevolve/search/policies/__init__.py: POLICIES; kernelevolve/runs/config.py: POLICY_OPTIONS",
            files={
                "kernelevolve/search/policies/NAME.py": "its Policy subclass: `name`, `choose`; `options`, "
                "`state_dict` and `load_state_dict` when it has options or state of its own",
                "kernelevolve/search/policies/__init__.py": "its class in POLICIES",
                "kernelevolve/runs/config.py": "its options' model (a PolicyOptions with `policy: Literal[NAME]`) "
                "in POLICY_OPTIONS; command-line options of its own in RunOptions and `resolve`",
                "kernelevolve/cli/run_cmd.py": "only with command-line options of its own (as mcts's --exploration); "
                "--policy's help names the policies of POLICIES by itself",
            },
            listing=lambda: POLICIES,
        ),
        ExtensionPoint(
            name="provider",
            interface=(Provider,),
            registries=(PROVIDER_CLASSES,),
            where="kernelevolve/operators/__init__.py: PROVIDER_CLASSES (`--model NAME:MODEL`)",
            files={
                "kernelevolve/llm/providers.py": "its Provider subclass (or a module of its own beside it, as "
                "file_provider.py): `name` and `_send`, one request with the service's errors turned into "
                "LLMError / RetryableError; `endpoint`, `cost` and `check` where they differ",
                "kernelevolve/operators/__init__.py": "its class in PROVIDER_CLASSES",
                "kernelevolve/llm/pricing.py": "only if it charges: its models' prices",
                "pyproject.toml": "only with an SDK: its dependency",
            },
            listing=lambda: PROVIDER_CLASSES,
        ),
        ExtensionPoint(
            name="language",
            interface=(Language,),
            registries=(LANGUAGES,),
            where="kernelevolve/languages.py: LANGUAGES",
            files={
                "kernelevolve/languages.py": "its Language (modules imported, whether the interpreter runs it, the "
                "language whose spec entry also allows it, prompt line) in LANGUAGES",
                "kernelevolve/harness/runtime/screen.py": "its top-level modules in ALLOWED_IMPORTS, unless they are "
                "there already (Gluon's are Triton's)",
                "kernelevolve/harness/runtime/kernel_calls.py": "its launcher classes beside CUTE_LAUNCHERS, whose "
                "calls KernelMonitor counts (a call that launches no kernel of the spec's language fails), unless "
                "they go through Triton's",
                "knowledge_base/constraints/": "its constraints, front matter `language: NAME`",
                "knowledge_base/guidance/": "its guidance, front matter `language: NAME`",
            },
            listing=languages.names,
        ),
        ExtensionPoint(
            name="profiler tool",
            interface=(ProfilerTool, ProfilerHarness),
            registries=(TOOLS,),
            where="kernelevolve/profiling/tools/__init__.py: TOOLS",
            files={
                "kernelevolve/profiling/tools/NAME.py": "its ProfilerTool record `TOOL` and what the record "
                "names: its part's schema (a pydantic model, stored in ProfileSummary under NAME), the parser of "
                "its raw output, its lines in an optimise prompt and in `kernelevolve profile`'s output (Line, "
                "Plain, Table), its config keys, the program it needs, the latency it measures",
                "kernelevolve/profiling/tools/__init__.py": "its TOOL in TOOLS (the order `all` runs them in)",
                "kernelevolve/harness/runtime/profile_NAME.py": "its harness module (ProfilerHarness), run in the "
                "sandbox by the one template harness_templates/profile.py.j2",
            },
            listing=lambda: TOOLS,
        ),
    )
}


def registered() -> dict[str, tuple[str, ...]]:
    """Extension point -> the names registered now, e.g. {"policy": ("greedy", "mcts", "evolutionary"), ...}."""
    return {name: point.registered() for name, point in EXTENSION_POINTS.items()}


__all__ = ["EXTENSION_POINTS", "ExtensionPoint", "ProfilerHarness", "registered"]
