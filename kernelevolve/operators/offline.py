"""The offline operator: no model, no key, no network.

It drafts the knowledge base's reference kernel for the spec and improves it by moving the
kernel's declared tunables (see tunables.py): a local search that optimises a passing parent,
walks a failing one back toward the last configuration that passed, and crosses two parents'
knobs. All randomness comes from `context.rng`, so a run is reproducible and resumable.

What it knows of the graph: the parents and the ancestry, what it proposed earlier in the same
process, every evaluated node (`context.evaluated`) and the sources written but not yet
evaluated (`context.pending_sources`). From the evaluated nodes it also learns which one-knob
moves paid off elsewhere in the graph, and tries those first (see config_search.knob_effects).
"""

from __future__ import annotations

import threading
from typing import Any

from kernelevolve.languages import detect
from kernelevolve.operators import config_search as search
from kernelevolve.operators.base import BaseOperator, OperatorContext, ParentView, Proposal
from kernelevolve.operators.errors import OperatorError
from kernelevolve.operators.insights import rule_insight
from kernelevolve.operators.profile_guidance import spill_step
from kernelevolve.operators.tunables import (
    Declared,
    TunablesError,
    config_key,
    describe_change,
    read_declared,
    rewrite_config,
)
from kernelevolve.spec import Spec

PROVIDER_HINT = (
    "use an LLM provider instead: --model anthropic:claude-opus-4-5 (ANTHROPIC_API_KEY), "
    "--model openai:gpt-5 (OPENAI_API_KEY; OPENAI_BASE_URL for a compatible server), or --model file:DIR"
)


def reference_kernel_source(spec: Spec, knowledge=None, name: str | None = None) -> str:
    """The reference kernel for `spec` (or the knowledge base's kernel `name`) from the knowledge base
    (default: the process's, paths.knowledge_base()), or OperatorError in one line."""
    from kernelevolve import paths
    from kernelevolve.knowledge import KnowledgeBase, KnowledgeError

    name = name or spec.kernel_name
    try:
        doc = (knowledge or KnowledgeBase.load()).reference_kernel(name)
    except KnowledgeError as e:
        raise OperatorError(f"offline operator: knowledge base unusable ({e}); {PROVIDER_HINT}") from None
    if doc is None or not doc.source:
        root = getattr(knowledge, "root", None) or paths.knowledge_base()  # the run's, when it gave one
        where = root / "kernels" / f"{name}.py"
        if name != spec.kernel_name:
            raise OperatorError(f"--kernel {name}: the knowledge base has no such kernel ({where} does not exist)")
        raise OperatorError(
            f"offline operator: spec {spec.name!r} has no reference kernel ({where} does not exist); {PROVIDER_HINT}"
        )
    return doc.source


class OfflineOperator(BaseOperator):
    name = "offline"

    def __init__(self, knowledge=None, kernel: str | None = None, **_options: Any):
        self._knowledge = knowledge  # a KnowledgeBase; None: the default one
        self._kernel = kernel  # the knowledge base's kernel to start from; None: the spec's `kernel:`
        self._proposed: set[tuple] = set()
        self._declared: dict[str, tuple[str, Declared]] = {}
        # The engine runs proposals on worker threads: one at a time here, so two concurrent
        # steps never pick the same untried configuration.
        self._lock = threading.RLock()

    def write_insight(
        self, spec: Spec, child: ParentView, parents: list[ParentView], record_llm_call=None
    ) -> str | None:
        """The engine's insight_writer hook: rule-based analysis of one evaluated step."""
        return rule_insight(spec, child, parents)

    # -- the reference kernel ---------------------------------------------------------------
    def check(self, spec: Spec) -> None:
        """Raise OperatorError now, before a run starts, if this spec cannot be served."""
        self._reference(spec)

    def _kernel_name(self, spec: Spec) -> str:
        return self._kernel or spec.kernel_name

    def _reference(self, spec: Spec) -> tuple[str, Declared]:
        name = self._kernel_name(spec)
        if name not in self._declared:
            source = reference_kernel_source(spec, self._knowledge, name)
            language = detect(source)
            if language.language is not None and language.language not in spec.languages:
                raise OperatorError(
                    f"offline operator: kernel {name!r} is {language.describe()}, which spec {spec.name!r} does not "
                    f"allow (languages: {', '.join(spec.languages)})"
                )
            try:
                declared = read_declared(source)
            except TunablesError as e:
                raise OperatorError(f"offline operator: reference kernel {name!r}: {e}; {PROVIDER_HINT}") from None
            self._declared[name] = (source, declared)
        return self._declared[name]

    # -- what has been tried ----------------------------------------------------------------
    def _tried(self, context: OperatorContext, parents: list[ParentView] = ()) -> set[tuple]:
        tried = set(self._proposed)
        sources = [v.source for v in [*context.ancestry, *parents, *context.evaluated]] + context.pending_sources
        for source in sources:
            config = _config_of(source)
            if config is not None:
                tried.add(config_key(config))
        return tried

    def _propose(self, base_source: str, old: dict, new: dict | None, note: str) -> Proposal:
        if new is None:
            return Proposal(
                source=None,
                failure="no_code",
                message="offline operator: every configuration in the tunable space was tried",
                note="tunable space exhausted",
            )
        self._proposed.add(config_key(new))
        change = describe_change(old, new)
        return Proposal(source=rewrite_config(base_source, new), note=f"{note}: {change}" if note else change)

    # -- operator ---------------------------------------------------------------------------
    def draft(self, spec: Spec, context: OperatorContext) -> Proposal:
        with self._lock:
            return self._draft(spec, context)

    def improve(self, parents: list[ParentView], context: OperatorContext) -> Proposal:
        with self._lock:
            if not parents:
                return self._draft(context.spec, context)
            return self._improve(parents, context)

    def _draft(self, spec: Spec, context: OperatorContext) -> Proposal:
        source, declared = self._reference(spec)
        tried = self._tried(context)
        if config_key(declared.config) not in tried:
            self._proposed.add(config_key(declared.config))
            return Proposal(source=source, note=f"reference kernel {self._kernel_name(spec)} with its own CONFIG")
        new = search.local_move(declared.config, declared.tunables, tried, context.rng)
        return self._propose(source, declared.config, new, "reference kernel, another configuration")

    def _improve(self, parents: list[ParentView], context: OperatorContext) -> Proposal:
        spec = context.spec
        ref_source, declared = self._reference(spec)
        tunables = declared.tunables
        tried = self._tried(context, parents)
        usable = [p for p in parents if _config_of(p.source) is not None]
        if len(usable) >= 2:
            return self._crossover(usable[0], usable[1], tunables, tried, context)
        if not usable:
            # No parseable kernel to mutate (no code, or a rewritten file): restart from the reference.
            base = declared.config
            new = base if config_key(base) not in tried else search.local_move(base, tunables, tried, context.rng)
            return self._propose(ref_source, base, new, "restart from the reference kernel")
        parent = usable[0]
        config = _config_of(parent.source)
        if parent.failed:
            passing = _last_passing(context.ancestry, exclude=parent.node_id)
            if passing is not None:
                new = search.toward(config, _config_of(passing.source), tunables, tried, context.rng)
                why = f"toward #{passing.node_id} (last passing)"
            else:
                new = search.smaller_first(config, tunables, tried, context.rng)
                why = f"smaller after {parent.evaluation.failure if parent.evaluation else 'no evaluation'}"
            return self._propose(parent.source, config, new, why)
        new = spill_step(parent.profile, config, tunables, tried, context.rng)  # its profile shows spills
        if new is not None:
            return self._propose(parent.source, config, new, "its profile shows register spills: smaller")
        new = search.local_move(
            config,
            tunables,
            tried,
            context.rng,
            momentum=_momentum(parent, context.ancestry, tunables),
            effects=search.knob_effects(_timed_configs(context, parents)),
        )
        return self._propose(parent.source, config, new, "")

    def _crossover(self, a: ParentView, b: ParentView, tunables, tried, context) -> Proposal:
        # The fitter parent gives the body of the file (they normally share it anyway).
        if (b.fitness or 0) > (a.fitness or 0):
            a, b = b, a
        ca, cb = _config_of(a.source), _config_of(b.source)
        child, from_b = search.crossover(ca, cb, tunables, tried, context.rng)
        if child is None:
            child = search.local_move(ca, tunables, tried, context.rng)
            return self._propose(a.source, ca, child, f"nothing new from #{b.node_id}")
        return self._propose(a.source, ca, child, f"{', '.join(from_b)} from #{b.node_id}")


def _config_of(source: str | None) -> dict | None:
    if not source:
        return None
    try:
        return read_declared(source).config
    except TunablesError:
        return None


def _timed_configs(context: OperatorContext, parents: list[ParentView]) -> list[tuple[dict, float]]:
    """(config, fitness) of every timed, correct node the operator can see, each once."""
    seen: dict[tuple, tuple[dict, float]] = {}
    for view in [*context.evaluated, *context.ancestry, *parents]:
        config = _config_of(view.source)
        if config is not None and not view.failed and view.fitness:
            seen.setdefault(config_key(config), (config, view.fitness))
    return list(seen.values())


def _last_passing(ancestry: list[ParentView], exclude: int) -> ParentView | None:
    for view in reversed(ancestry):
        if view.node_id != exclude and not view.failed and _config_of(view.source) is not None:
            return view
    return None


def _momentum(parent: ParentView, ancestry: list[ParentView], tunables: dict) -> tuple[str, int] | None:
    """(knob, direction) when the parent moved one knob away from a passing ancestor and got
    faster by it: the next step tries the same direction first."""
    before = _last_passing(ancestry, exclude=parent.node_id)
    if before is None or parent.fitness is None or before.fitness is None or parent.fitness <= before.fitness:
        return None
    old, new = _config_of(before.source), _config_of(parent.source)
    moved = [k for k in tunables if old.get(k) != new.get(k)]
    if len(moved) != 1:
        return None
    key = moved[0]
    allowed = tunables[key]
    if old[key] not in allowed or new[key] not in allowed:
        return None
    return key, 1 if allowed.index(new[key]) > allowed.index(old[key]) else -1
