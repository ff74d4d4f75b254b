"""The operator interface between the search engine and whatever writes kernels.

KernelEvolve has two operators: `draft` (a new candidate from the spec alone) and `improve`
(one parent: debug it when it failed, optimise it when it passed; two parents: crossover).
The search engine owns the graph and the database; an operator only turns context into source.
Everything else an operator may do (check a spec or its endpoint before a run, replay recorded
calls, keep a cache in the run's database, write insights) is a hook declared on `Operator`;
`BaseOperator` gives each a do-nothing default.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

from kernelevolve.records.calls import LLMCallRecord
from kernelevolve.records.result import EvalResult
from kernelevolve.spec import Spec
from kernelevolve.steps import StepKind

if TYPE_CHECKING:
    from kernelevolve.memory.models import LLMCallRow
    from kernelevolve.memory.repository import Repository


@dataclass
class ParentView:
    """What an operator may see of an evaluated node."""

    node_id: int
    source: str | None
    kind: str  # how the parent was made: draft | debug | improve | crossover
    evaluation: EvalResult | None
    note: str = ""  # the parent's own one-line description of its change
    # The node's profile summary where one was taken (the search's profiler fills it; the prompts show it).
    profile: object | None = None

    @property
    def failed(self) -> bool:
        return self.evaluation is None or not self.evaluation.correct

    @property
    def fitness(self) -> float | None:
        return None if self.evaluation is None else self.evaluation.fitness


@dataclass
class OperatorContext:
    """Everything the engine hands an operator for one step.

    `rng` is the run's own random stream (restored on resume), so offline operators are
    reproducible. `record_llm_call` writes to the experiment database; `insights` are short
    analyses retrieved from the context memory; `ancestry` is a compact history
    (oldest first) of what was tried on the way to the parent(s); `evaluated` and
    `pending_sources` are the whole graph, so an operator never proposes what was tried.
    """

    spec: Spec
    run_id: str
    device: str
    rng: random.Random
    kind: StepKind = "draft"  # kernelevolve.steps.step_kind of this step's parents
    shapes: list[dict] | None = None  # the run's --shape overrides; None: the spec's own
    ancestry: list[ParentView] = field(default_factory=list)
    insights: list[str] = field(default_factory=list)
    evaluated: list[ParentView] = field(default_factory=list)  # every evaluated node (logs left out)
    pending_sources: list[str] = field(default_factory=list)  # written, not evaluated yet
    record_llm_call: Callable[[LLMCallRecord], None] = lambda record: None


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

    def check(self, spec: Spec) -> None:
        """Raise OperatorError (one line) before a run starts if this spec cannot be served."""
        ...

    def check_endpoint(self) -> None:
        """One cheap request to the model before a run (OperatorError with its message)."""
        ...

    def replay(self, calls: Sequence[LLMCallRow]) -> int:
        """A resumed run's recorded calls, to answer identical requests unpaid; how many were taken."""
        ...

    def attach(self, repo: Repository) -> None:
        """The run's experiment database, for state an operator keeps there (the reply cache)."""
        ...

    def write_insight(
        self,
        spec: Spec,
        child: ParentView,
        parents: list[ParentView],
        record_llm_call: Callable[[LLMCallRecord], object] | None = None,
    ) -> str | None:
        """One short analysis of an evaluated step for the context memory; None: nothing to say."""
        ...


class BaseOperator:
    """The hooks' defaults: nothing to check, replay or attach, no insights. Subclass it and write
    `draft` and `improve`."""

    name = "operator"

    def draft(self, spec: Spec, context: OperatorContext) -> Proposal:
        raise NotImplementedError

    def improve(self, parents: list[ParentView], context: OperatorContext) -> Proposal:
        raise NotImplementedError

    def check(self, spec: Spec) -> None:
        return None

    def check_endpoint(self) -> None:
        return None

    def replay(self, calls: Sequence[LLMCallRow]) -> int:
        return 0

    def attach(self, repo: Repository) -> None:
        return None

    def write_insight(
        self,
        spec: Spec,
        child: ParentView,
        parents: list[ParentView],
        record_llm_call: Callable[[LLMCallRecord], object] | None = None,
    ) -> str | None:
        return None
