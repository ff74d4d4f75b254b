"""kernelevolve/extensions.py names every extension point: what it lists is what the package registers
(found here from the package's own files, not from the registries), the README's table names its files
and they exist, and a policy and a provider added to the documented registries are used by name by a
real `kernelevolve run`."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path
from typing import Literal

from typer.testing import CliRunner

import kernelevolve.llm
import kernelevolve.search.policies
from kernelevolve import extensions
from kernelevolve.cli import app
from kernelevolve.knowledge.base import KnowledgeBase
from kernelevolve.languages import LANGUAGES, Language, of_document
from kernelevolve.llm.base import LLMReply, Provider
from kernelevolve.memory import Repository
from kernelevolve.operators import PROVIDER_CLASSES, providers_help
from kernelevolve.paths import BUNDLED_KNOWLEDGE_BASE
import kernelevolve.profiling.tools
from kernelevolve.profiling.tools import TOOLS, ProfilerTool
from kernelevolve.records.graph import SearchGraph
from kernelevolve.runs import POLICY_OPTIONS, PolicyOptions, RunConfig
from kernelevolve.search.policies import POLICIES, Expansion, Policy

ROOT = Path(__file__).resolve().parents[1]
SCALE = ROOT / "tests" / "search" / "fixtures" / "scale.yaml"


def _subclasses_in(package, base: type) -> set[type]:
    """Every subclass of `base` defined in a module of `package` (each module imported)."""
    found = set()
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, base) and obj is not base and obj.__module__ == module.__name__:
                found.add(obj)
    return found


def test_the_listing_is_what_the_package_registers():
    listed = extensions.registered()
    assert set(listed) == {"setting", "policy", "provider", "language", "profiler tool"}

    # policies: every Policy subclass of search/policies/, each with its options' model
    classes = _subclasses_in(kernelevolve.search.policies, Policy)
    assert {cls.name for cls in classes} == set(listed["policy"]) == set(POLICY_OPTIONS)
    for name in listed["policy"]:
        assert POLICIES[name].name == name and issubclass(POLICY_OPTIONS[name], PolicyOptions)
        assert POLICY_OPTIONS[name].model_fields["policy"].default == name

    # providers: every Provider subclass of kernelevolve/llm/, under its own name
    providers = _subclasses_in(kernelevolve.llm, Provider)
    assert {cls.name for cls in providers} == set(listed["provider"])
    assert all(PROVIDER_CLASSES[name].name == name for name in listed["provider"])

    # languages: every language the knowledge base writes documents in (front matter `language:`)
    used = {of_document(doc) for doc in KnowledgeBase.load(BUNDLED_KNOWLEDGE_BASE, fresh=True).documents}
    assert used == {"triton", "cute"}  # (what the bundled knowledge base holds today)
    assert used <= set(listed["language"]) == set(LANGUAGES)
    assert all(isinstance(lang, Language) and lang.name == name for name, lang in LANGUAGES.items())

    # profiler tools: every module of profiling/tools/ but base.py holds one record, TOOL, under its own
    # name, whose harness is kernelevolve/harness/runtime/profile_NAME.py
    records = {
        info.name: importlib.import_module(f"kernelevolve.profiling.tools.{info.name}").TOOL
        for info in pkgutil.iter_modules(kernelevolve.profiling.tools.__path__)
        if info.name != "base"
    }
    assert set(records) == set(listed["profiler tool"]) == set(TOOLS)
    for name, tool in records.items():
        assert isinstance(tool, ProfilerTool) and tool.name == name and TOOLS[name] is tool
        assert tool.harness.__name__ == f"kernelevolve.harness.runtime.profile_{name}"
        assert isinstance(tool.harness, extensions.ProfilerHarness)

    # the registries named are the package's own objects, not copies
    points = extensions.EXTENSION_POINTS
    assert points["policy"].registries[0] is POLICIES and points["policy"].registries[1] is POLICY_OPTIONS
    assert points["provider"].registries[0] is PROVIDER_CLASSES
    assert points["language"].registries[0] is LANGUAGES
    assert points["profiler tool"].registries[0] is TOOLS


def _readme_rows() -> dict[str, set[str]]:
    """The README's extension table: first cell -> the paths its last cell names."""
    text = (ROOT / "README.md").read_text()
    table = text[text.index("| to add a |") :].split("\n\n", 1)[0]
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = {p for p in re.findall(r"`([^`]+)`", cells[-1]) if "/" in p or p.endswith(".toml")}
    return rows


def test_the_readme_table_names_the_files_and_they_exist():
    rows = _readme_rows()
    points = extensions.EXTENSION_POINTS
    assert set(rows) == set(points)
    for name, point in points.items():
        assert rows[name] == set(point.files), f"README's row for {name} and kernelevolve/extensions.py differ"
        for path in point.files:
            # NAME: the new one's name; every one registered now has that file
            for actual in {path.replace("NAME", n) for n in point.registered()} if "NAME" in path else {path}:
                assert (ROOT / actual).exists(), f"{name}: {actual} does not exist"


# -- adding one: a policy and a provider through the documented registries ---------------------------

KERNEL = """```python
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * alpha + 1.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _scale_kernel[(triton.cdiv(n, 256),)](x, y, self.alpha, n, BLOCK=256)
        return y
```
"""


class Newest(Policy):
    """Improve the newest correct node."""

    name = "newest"

    def choose(self, graph: SearchGraph, rng, planned: list[Expansion]) -> Expansion | None:
        correct = [n for n in graph.nodes() if n.correct]
        return Expansion((correct[-1].id,)) if correct else None


class NewestOptions(PolicyOptions):
    policy: Literal["newest"] = "newest"


class Canned(Provider):
    """A provider whose every reply is the same correct kernel (no service to reach)."""

    name = "canned"

    def _send(self, prompt: str, system: str | None, max_tokens: int) -> LLMReply:
        return LLMReply(text=KERNEL, input_tokens=len(prompt) // 4, output_tokens=len(KERNEL) // 4)


def test_a_policy_and_a_provider_added_to_the_registries_run_by_name(tmp_path, monkeypatch):
    monkeypatch.setitem(POLICIES, "newest", Newest)
    monkeypatch.setitem(POLICY_OPTIONS, "newest", NewestOptions)
    monkeypatch.setitem(PROVIDER_CLASSES, "canned", Canned)
    monkeypatch.setenv("KERNELEVOLVE_LLM_INSIGHTS", "0")
    assert "newest" in extensions.registered()["policy"] and "canned" in extensions.registered()["provider"]
    assert "canned:MODEL" in providers_help()

    url = f"sqlite:///{tmp_path / 'ext.db'}"
    runner = CliRunner()
    args = ["run", str(SCALE), "--device", "interpret", "--db", url, "--budget", "2", "--drafts", "1", "--json"]
    out = runner.invoke(app, [*args, "--policy", "newest", "--model", "canned:any"])
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout)
    assert [(n["kind"], n["parents"], n["failure"]) for n in summary["nodes"]] == [
        ("draft", [], None),
        ("improve", [0], None),
    ]
    repo = Repository(url)
    calls = repo.llm_calls(summary["id"])  # the provider wrote both kernels (the check asks it too)
    assert {(c.provider, c.model) for c in calls} == {("canned", "any")} and len(calls) >= 2
    row = repo.run(summary["id"])
    assert row.settings["policy"] == "newest" and row.settings["model"] == "canned:any"
    saved = RunConfig.from_row(row.settings)  # what resume reads back
    assert isinstance(saved.policy, NewestOptions) and isinstance(saved.policy.make(), Newest)

    # unknown names are still one line naming the registered ones
    bad = runner.invoke(app, [*args, "--policy", "oldest"])
    assert bad.exit_code == 2 and "use one of greedy, mcts, evolutionary, newest" in bad.output
    bad = runner.invoke(app, [*args, "--model", "nothere:x"])
    assert bad.exit_code == 2 and "canned:MODEL" in bad.output


# -- the command line's help names what the registries hold -----------------------------------------

REGISTER_AND_ASK_FOR_HELP = """
import dataclasses
import sys
from typing import Literal

from kernelevolve.llm.base import Provider
from kernelevolve.operators import PROVIDER_CLASSES
from kernelevolve.profiling.tools import TOOLS
from kernelevolve.runs import POLICY_OPTIONS, PolicyOptions
from kernelevolve.search.policies import POLICIES, Policy


class Newest(Policy):
    name = "newest"


class NewestOptions(PolicyOptions):
    policy: Literal["newest"] = "newest"


class Canned(Provider):
    name = "canned"


POLICIES["newest"] = Newest
POLICY_OPTIONS["newest"] = NewestOptions
PROVIDER_CLASSES["canned"] = Canned
TOOLS["nsys"] = dataclasses.replace(TOOLS["torch"], name="nsys", what="Nsight Systems", output="nsys report")

from kernelevolve.cli import app  # noqa: E402  (the command line, made after the registries)

app([sys.argv[1], "--help"], prog_name="kernelevolve")
"""


def _help_after_registering(command: str) -> str:
    """`kernelevolve COMMAND --help` in a process that registered a policy, a provider and a profiler tool
    in the package's registries before the command line was made, as a new module of the package does."""
    import os
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", REGISTER_AND_ASK_FOR_HELP, command],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def _option(text: str, option: str) -> tuple[str, str]:
    """(metavar, help) of `option` in click's help text (its help wrapped over the lines up to the next option)."""
    options = text[text.index("\nOptions:") :]  # not the command's description, which may name options too
    found = re.search(rf"^ +{option} (\S+)(.*?)(?=^ +-|^\S|\Z)", options, re.MULTILINE | re.DOTALL)
    assert found is not None, text
    return found.group(1), " ".join(found.group(2).split())


def test_the_help_names_a_registered_policy_provider_and_profiler_tool():
    policies = [*POLICIES, "newest"]
    for command in ("run", "suite"):
        text = _help_after_registering(command)
        metavar, policy_help = _option(text, "--policy")
        assert metavar.split("|") == policies and ", ".join(policies) in policy_help
        _, model_help = _option(text, "--model")
        assert "canned:MODEL" in model_help and all(f"{name}:" in model_help for name in PROVIDER_CLASSES)
    _, profile_help = _option(_help_after_registering("run"), "--profile")
    assert f"a list of {', '.join((*TOOLS, 'nsys'))}" in profile_help
    profile_text = _help_after_registering("profile")
    metavar, tool_help = _option(profile_text, "--tool")
    assert metavar.split("|") == [*TOOLS, "nsys", "all"]
    assert tool_help.startswith(
        "torch (torch.profiler), ncu (Nsight Compute), proton (triton.profiler), nsys (Nsight Systems) or all"
    )
    assert "(Chrome trace, ncu CSV, Proton hatchet, nsys report)" in _option(profile_text, "--keep")[1]
