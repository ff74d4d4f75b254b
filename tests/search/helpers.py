"""Synthetic evaluations, landscapes and engine doubles for the search tests.

The engine tests use a synthetic operator and evaluator (a candidate's source just states its
fitness) so that policy and crash-recovery logic can be driven over hundreds of nodes in
milliseconds; the CLI tests use real Triton kernels and the real evaluator.
"""

from __future__ import annotations

import random
import re
import threading

from kernelevolve.evaluation.executors import EvaluationRequest, Executor
from kernelevolve.evaluation.result import EvalResult, Failure, ShapeResult
from kernelevolve.operators.base import BaseOperator, LLMCallRecord, Proposal
from kernelevolve.search.graph import Node, SearchGraph
from kernelevolve.search.policies import Policy


def result(fitness: float | None = 1.0, failure: str | None = None) -> EvalResult:
    """Timed when fitness is a number (speedup = fitness), untimed-correct when None."""
    shape = ShapeResult(label="N=8 float32", params={"N": 8}, dtype="float32")
    if failure is not None:
        shape.correct, shape.failure = False, failure
        return EvalResult.failed(Failure(failure), "synthetic failure", shapes=[shape])
    shape.correct = True
    if fitness is None:
        return EvalResult(correct=True, shapes=[shape])
    shape.latency_ms, shape.baseline_ms = 1.0, fitness
    return EvalResult(correct=True, timed=True, device="cuda", shapes=[shape])


def add(
    graph: SearchGraph,
    node_id: int,
    parents=(),
    fitness: float | None = 1.0,
    failure: str | None = None,
    pending: bool = False,
) -> Node:
    node = graph.add(Node(id=node_id, parents=tuple(parents), source=f"# node {node_id}"))
    if not pending:
        graph.set_evaluation(node_id, result(fitness, failure))
    return node


class Landscape:
    """Child fitness from parents: drafts ~U(0.5, 1.5), improve x U(0.8, 1.3), crossover mean x U(0.9, 1.2);
    a fraction `fail_rate` of new nodes fail, debugging succeeds with probability `fix_rate`."""

    def __init__(self, seed: int = 0, fail_rate: float = 0.0, fix_rate: float = 0.5) -> None:
        self.rng = random.Random(seed)
        self.fail_rate, self.fix_rate = fail_rate, fix_rate

    def grow(self, graph: SearchGraph, parents: tuple[int, ...]) -> Node:
        r = self.rng
        if parents and not graph[parents[0]].correct and len(parents) == 1:
            failed = r.random() >= self.fix_rate
            value = r.uniform(0.5, 1.5)
        else:
            failed = r.random() < self.fail_rate
            if not parents:
                value = r.uniform(0.5, 1.5)
            elif len(parents) == 1:
                value = graph[parents[0]].score * r.uniform(0.8, 1.3)
            else:
                value = sum(graph[p].score for p in parents) / len(parents) * r.uniform(0.9, 1.2)
        return add(graph, graph.next_id(), parents, fitness=value, failure="incorrect" if failed else None)


def drive(
    policy: Policy,
    landscape: Landscape,
    steps: int,
    k: int = 1,
    seed: int = 1,
    graph: SearchGraph | None = None,
    before_step=None,
) -> SearchGraph:
    """Select k, grow k nodes, observe them; `before_step(graph, expansions)` checks each step."""
    graph = graph if graph is not None else SearchGraph()
    rng = random.Random(seed)
    for _ in range(steps):
        expansions = policy.select(graph, k, rng)
        if before_step is not None:
            before_step(graph, expansions)
        for e in expansions:
            node = landscape.grow(graph, e.parents)
            policy.observe(graph, node.id)
    return graph


# -- engine doubles --------------------------------------------------------------------------

SOURCE = "FITNESS = {fitness!r}\nFAILS = {fails}\n"


class SyntheticOperator(BaseOperator):
    """Writes 'sources' that state their fitness; records one LLM call per proposal."""

    name = "synthetic"

    def __init__(self, fail_rate: float = 0.0, no_code_rate: float = 0.0, raise_always: bool = False) -> None:
        self.fail_rate, self.no_code_rate, self.raise_always = fail_rate, no_code_rate, raise_always
        self.contexts = []
        self._lock = threading.Lock()

    def _propose(self, context, base: float, note: str) -> Proposal:
        with self._lock:
            self.contexts.append(context)
        if self.raise_always:
            raise ConnectionError("provider unreachable")
        rng = context.rng
        prompt = f"{note} base={base:.6f} kind={context.kind}"
        context.record_llm_call(
            LLMCallRecord(
                provider="synthetic",
                model="m0",
                prompt=prompt,
                reply="...",
                input_tokens=10,
                output_tokens=5,
                cost_usd=0.01,
            )
        )
        if rng.random() < self.no_code_rate:
            return Proposal(source=None, failure="no_code", message="reply held no code", note=note)
        fitness = base * rng.uniform(0.8, 1.3)
        return Proposal(source=SOURCE.format(fitness=round(fitness, 6), fails=rng.random() < self.fail_rate), note=note)

    def draft(self, spec, context) -> Proposal:
        return self._propose(context, context.rng.uniform(0.5, 1.5), "draft")

    def improve(self, parents, context) -> Proposal:
        base = sum(_fitness_of(p.source) for p in parents) / len(parents)
        return self._propose(context, base, "improve " + ",".join(str(p.node_id) for p in parents))


def _fitness_of(source: str | None) -> float:
    if not source:
        return 1.0
    return float(re.search(r"FITNESS = ([0-9.e-]+)", source).group(1))


class SyntheticEvaluator(Executor):
    """Reads the fitness a synthetic source states; counts how often each source was evaluated (and
    keeps each request)."""

    device = "interpret"

    def __init__(self, parallelism: int = 2) -> None:
        self.parallelism = parallelism
        self.calls: list[str] = []
        self.requests: list[EvaluationRequest] = []
        self._lock = threading.Lock()

    def run(self, request: EvaluationRequest) -> EvalResult:
        source = request.source
        with self._lock:
            self.calls.append(source)
            self.requests.append(request)
        if "FAILS = True" in source:
            return result(failure="incorrect")
        return result(_fitness_of(source))


class SimulatedKill(BaseException):
    """Stands in for the process dying between two database writes (not an Exception)."""
