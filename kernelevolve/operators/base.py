"""The operator interface between the search engine and whatever writes kernels.

KernelEvolve has two operators: `draft` (a new candidate from the spec alone) and `improve`
(one parent: debug it when it failed, optimise it when it passed; two parents: crossover).
The search engine owns the graph and the database; an operator only turns context into source.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from kernelevolve.evaluation.result import EvalResult
from kernelevolve.spec import Spec


@dataclass
class ParentView:
    """What an operator may see of an evaluated node."""

    node_id: int
    source: str | None
    kind: str  # how the parent was made: draft | debug | improve | crossover
    evaluation: EvalResult | None
    note: str = ""  # the parent's own one-line description of its change

    @property
    def failed(self) -> bool:
        return self.evaluation is None or not self.evaluation.correct

    @property
    def fitness(self) -> float | None:
        return None if self.evaluation is None else self.evaluation.fitness


@dataclass
class LLMCallRecord:
    """One model call, for the experiment database (tokens and cost are the provider's)."""

    provider: str
    model: str
    prompt: str
    reply: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    cached: bool = False
    error: str | None = None


@dataclass
class OperatorContext:
    """Everything the engine hands an operator for one step.

    `rng` is the run's own random stream (restored on resume), so offline operators are
    reproducible. `record_llm_call` writes to the experiment database; `insights` are short
    analyses retrieved from the context memory; `ancestry` is a compact history
    (oldest first) of what was tried on the way to the parent(s).
    """

    spec: Spec
    run_id: str
    device: str
    rng: random.Random
    ancestry: list[ParentView] = field(default_factory=list)
    insights: list[str] = field(default_factory=list)
    record_llm_call: Callable[[LLMCallRecord], None] = lambda record: None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Proposal:
    """An operator's answer. `source is None` means the reply held no usable kernel: the engine
    records a failed node with `failure` (Failure.NO_CODE) so the debug path can work on it."""

    source: str | None
    note: str = ""
    failure: str | None = None
    message: str = ""
    tokens: int = 0
    cost_usd: float = 0.0


class Operator(Protocol):
    name: str

    def draft(self, spec: Spec, context: OperatorContext) -> Proposal: ...

    def improve(self, parents: list[ParentView], context: OperatorContext) -> Proposal:
        """One parent: debug (parent failed) or optimise (parent passed). Two: crossover."""
        ...
