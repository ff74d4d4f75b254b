"""The search loop: select, propose (operator), write pending, evaluate, record; until a limit.

All graph and database writes happen on the calling thread; worker threads only run the
operator, the evaluator and the insight writer. Each node costs two transactions: it is written
as pending before evaluation, and its evaluation is written with the policy and random state
after, so a run killed at any instant resumes from the database without losing or redoing an
evaluated node (a pending node is simply evaluated again).
"""

from __future__ import annotations

import logging
import random
import time
import traceback
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from kernelevolve.evaluation import plausibility
from kernelevolve.evaluation.executors import WorkerLost, evaluating
from kernelevolve.evaluation.result import EvalResult, Failure
from kernelevolve.operators.base import LLMCallRecord, OperatorContext, ParentView, Proposal
from kernelevolve.search.graph import Node, SearchGraph
from kernelevolve.search.policies import Expansion, Policy
from kernelevolve.search.termination import stop_reason
from kernelevolve.spec import Budget

# (spec, child, parents, record_llm_call) -> insight text; model calls it makes are recorded run-level.
InsightWriter = Callable[[Any, ParentView, list[ParentView], Callable[[LLMCallRecord], Any]], "str | None"]
log = logging.getLogger(__name__)
ANCESTRY_LIMIT = 8
INSIGHT_LIMIT = 8
MAX_OPERATOR_ERRORS = 3  # in a row: the operator is broken (no key, no network), not unlucky


def _debug() -> bool:
    """KERNELEVOLVE_DEBUG=1: an operator's exception is printed with its traceback."""
    from kernelevolve.settings import SettingsError, settings

    try:
        return settings().debug
    except SettingsError:
        return False


def rng_state(rng: random.Random) -> dict:
    version, internal, gauss = rng.getstate()
    return {"version": version, "internal": list(internal), "gauss": gauss}


def restore_rng(state: dict) -> random.Random:
    rng = random.Random()
    rng.setstate((state["version"], tuple(state["internal"]), state["gauss"]))
    return rng


@dataclass(frozen=True)
class Best:
    id: int
    fitness: float | None  # None: correct but untimed (the interpreter)
    score: float


@dataclass(frozen=True)
class Progress:
    """Where a search stands (for progress displays; the cli draws it)."""

    nodes: int  # written, pending included
    evaluated: int
    max_nodes: int
    in_flight: int
    failures: dict[str, int]  # failure class -> evaluated nodes
    held: dict[str, int]  # mark -> nodes held for a person's review
    correct: int
    best: Best | None  # the best correct node not held back
    elapsed_s: float
    wall_clock_s: float | None
    tokens: int
    cost_usd: float


@dataclass
class _Task:
    stage: str  # propose | evaluate | recheck | insight | profile
    expansion: Expansion | None = None
    node_id: int | None = None
    calls: list[tuple[int, LLMCallRecord]] = field(default_factory=list)
    first: EvalResult | None = None  # recheck: the evaluation being confirmed
    lost: str | None = None  # evaluate/recheck: why its worker was lost once already (it is a retry)


class SearchEngine:
    def __init__(
        self,
        *,
        repo,
        run_id: str,
        spec,
        graph: SearchGraph,
        policy: Policy,
        operator,
        evaluator,
        limits: Budget,
        rng: random.Random,
        device: str,
        shapes: list[dict] | None = None,
        elapsed_s: float = 0.0,
        insight_writer: InsightWriter | None = None,
        on_event: Callable[[str, "SearchEngine", Node | None], None] | None = None,
        max_in_flight: int | None = None,
        profiler=None,
    ) -> None:
        self.repo, self.run_id, self.spec, self.graph = repo, run_id, spec, graph
        self.policy, self.operator, self.evaluator, self.limits = policy, operator, evaluator, limits
        self.rng, self.device, self.shapes = rng, device, shapes
        self.insight_writer, self.on_event = insight_writer, on_event
        self.max_in_flight = max(1, max_in_flight or int(getattr(evaluator, "parallelism", 1) or 1))
        self._elapsed_before, self._t0 = elapsed_s, time.monotonic()
        self.in_flight: dict[Future, _Task] = {}
        self.stop_reason: str | None = None
        self.operator_errors = 0
        self.warnings: list[str] = []
        # Promising nodes are profiled (search/profiling.py); their profiles reach the prompts.
        self.profiler = profiler
        self.profiles: dict = {}
        if profiler is not None:
            from kernelevolve.memory.profiles import load_profiles
            from kernelevolve.profiling.schema import NodeProfile

            self.profiles = {
                i: NodeProfile(summaries=r.summaries, seconds=r.seconds) for i, r in load_profiles(repo, run_id).items()
            }

    # -- state for progress displays ------------------------------------------------------
    @property
    def elapsed_s(self) -> float:
        return self._elapsed_before + time.monotonic() - self._t0

    def spent(self) -> tuple[int, float]:
        nodes = self.graph.nodes()
        return sum(n.tokens for n in nodes), sum(n.cost_usd for n in nodes)

    def progress(self) -> Progress:
        done = self.graph.evaluated()
        best = self.graph.best()
        tokens, cost = self.spent()
        return Progress(
            nodes=len(self.graph),
            evaluated=len(done),
            max_nodes=self.limits.max_nodes,
            in_flight=len(self.in_flight_work()),
            failures=dict(Counter(n.failure for n in done if n.failure)),
            held=dict(Counter(m for n in done if n.held for m in n.evaluation.marks)),
            correct=sum(1 for n in done if n.correct),
            best=None if best is None or not best.correct or best.held else Best(best.id, best.fitness, best.score),
            elapsed_s=self.elapsed_s,
            wall_clock_s=self.limits.wall_clock_s,
            tokens=tokens,
            cost_usd=cost,
        )

    def in_flight_work(self) -> list[_Task]:
        return [t for t in self.in_flight.values() if t.stage != "insight"]

    # -- the loop -------------------------------------------------------------------------
    def run(self) -> str:
        """Search until a limit; returns the termination reason (also written on the run)."""
        self.repo.update_run(self.run_id, status="running", termination_reason=None)
        pool = ThreadPoolExecutor(max_workers=2 * self.max_in_flight + 1, thread_name_prefix="kernelevolve")
        self._pool = pool
        try:
            for node in self.graph.pending():  # written before a crash, never evaluated: do it now
                self._submit(_Task("evaluate", node_id=node.id), self._evaluate, node.source, False, node.id)
            while True:
                if self.stop_reason is None:
                    self.stop_reason = self._check_limits()
                if self.stop_reason is None:
                    self._launch()
                if not self.in_flight:
                    if self.stop_reason is None:  # nothing running and nothing to start
                        self.stop_reason = "exhausted"
                    break
                done, _ = wait(list(self.in_flight), timeout=1.0, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=lambda f: self.in_flight[f].node_id or -1):
                    self._complete(future, self.in_flight.pop(future))
                self._emit("tick", None)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            self.repo.update_run(self.run_id, status="interrupted", elapsed_s=self.elapsed_s)
            raise
        pool.shutdown(wait=True)
        close = getattr(self.evaluator, "close", None)  # its warm processes wait for no more candidates
        if close is not None:
            close()
        log.info("run %s stops: %s (%d nodes, %.0fs)", self.run_id, self.stop_reason, len(self.graph), self.elapsed_s)
        self.repo.update_run(
            self.run_id, status="finished", termination_reason=self.stop_reason, elapsed_s=self.elapsed_s
        )
        self._emit("finished", None)
        return self.stop_reason

    def _check_limits(self) -> str | None:
        if self.operator_errors >= MAX_OPERATOR_ERRORS:
            return "operator_error"
        tokens, cost = self.spent()
        reason = stop_reason(self.limits, self.graph, self.elapsed_s, tokens, cost)
        if reason is None and self.profiler is not None and self.profiler.reached(self.graph, self.profiles):
            return "roofline"
        return reason

    def _launch(self) -> None:
        proposing = [t.expansion for t in self.in_flight.values() if t.stage == "propose"]
        free = min(
            self.max_in_flight - len(self.in_flight_work()), self.limits.max_nodes - len(self.graph) - len(proposing)
        )
        if free <= 0:
            return
        steps = self.policy.select(self.graph, free, self.rng, in_flight=proposing)
        if not steps:
            return
        insights = [i.text for i in self.repo.insights(self.spec.family, self.spec.hardware, INSIGHT_LIMIT)]
        # The whole graph, so an operator never re-proposes what was tried (after a resume too).
        evaluated = [self.view(n.id, compact=True) for n in self.graph.evaluated()]
        pending = [n.source for n in self.graph.pending() if n.source]
        for step in steps:
            task = _Task("propose", expansion=step)
            context = self._context(step, task, insights, evaluated, pending)
            parents = [self.view(p) for p in step.parents]
            self._submit(task, self._propose, parents, context)

    def _context(
        self, step: Expansion, task: _Task, insights: list[str], evaluated: list[ParentView], pending: list[str]
    ) -> OperatorContext:
        above: set[int] = set()
        for p in step.parents:
            above |= self.graph.ancestors(p)
        ancestry = [self.view(i, compact=True) for i in sorted(above)[-ANCESTRY_LIMIT:]]

        def record(call: LLMCallRecord) -> None:  # runs on the worker thread
            task.calls.append((self.repo.record_llm_call(self.run_id, None, call), call))

        # The operator gets its own stream seeded from the run's, so parallel workers stay reproducible.
        return OperatorContext(
            spec=self.spec,
            run_id=self.run_id,
            device=self.device,
            rng=random.Random(self.rng.getrandbits(64)),
            kind=self.graph.step_kind(step.parents),
            shapes=self.shapes,
            ancestry=ancestry,
            insights=insights,
            evaluated=evaluated,
            pending_sources=pending,
            record_llm_call=record,
        )

    def view(self, node_id: int, compact: bool = False) -> ParentView:
        node = self.graph[node_id]
        ev = node.evaluation
        if compact and ev is not None:
            ev = replace(ev, log="")
        return ParentView(
            node_id=node.id,
            source=node.source,
            kind=self.graph.kind(node.id),
            evaluation=ev,
            note=node.note,
            profile=self.profiles.get(node_id),
        )

    def _submit(self, task: _Task, fn, *args) -> None:
        self.in_flight[self._pool.submit(fn, *args)] = task

    # -- worker-side jobs -----------------------------------------------------------------
    def _propose(self, parents: list[ParentView], context: OperatorContext) -> Proposal:
        if not parents:
            return self.operator.draft(self.spec, context)
        return self.operator.improve(parents, context)

    def _evaluate(self, source: str, deep: bool = False, node_id: int | None = None) -> EvalResult:
        """`deep`: the re-evaluation of a would-be best also profiles where its kernels ran."""
        with evaluating(node_id):  # executors show the node on their workers' heartbeats
            return self.evaluator.evaluate(self.spec, source, shapes=self.shapes, deep=deep)

    # -- back on the loop thread ----------------------------------------------------------
    def _complete(self, future: Future, task: _Task) -> None:
        if task.stage == "insight":
            error = future.exception()
            if error is not None:
                self.warnings.append(f"insight writer failed: {error}")
                log.warning("run %s: insight writer failed on node %s: %s", self.run_id, task.node_id, error)
            elif future.result():
                node = self.graph[task.node_id]
                self.repo.add_insight(
                    self.run_id,
                    node.id,
                    self.spec.family,
                    self.spec.hardware,
                    future.result(),
                    source=getattr(self.insight_writer, "__name__", type(self.insight_writer).__name__),
                )
            return
        if task.stage == "profile":
            self._profiled(task, future)
            return
        if task.stage == "propose":
            self._proposed(task, future)
            return
        error = future.exception()
        if isinstance(error, WorkerLost):
            if task.lost is None:  # the worker died, not the candidate: once more, on a fresh worker
                log.warning("run %s: node %s: %s; evaluating it again", self.run_id, task.node_id, error)
                retry = replace(task, lost=str(error))
                self._submit(
                    retry, self._evaluate, self.graph[task.node_id].source, task.stage == "recheck", task.node_id
                )
                return
            result = EvalResult.failed(
                Failure.CRASH,
                f"the worker was lost twice while evaluating it: {task.lost}; then: {error}",
                device=self.device,
            )
        elif error is not None:
            result = EvalResult.failed(
                Failure.CRASH, f"evaluator error: {type(error).__name__}: {error}", device=self.device
            )
        else:
            result = future.result()
        if task.lost is not None:
            result.environment["worker_lost"] = task.lost  # retried once: say so with the result
        if task.stage == "recheck":
            self._record(self.graph[task.node_id], self._confirmed(task.first, result))
        elif self._would_lead(result):
            # A new best is evaluated again in a fresh process, with new seeds, before it counts.
            self._submit(
                _Task("recheck", node_id=task.node_id, first=result),
                self._evaluate,
                self.graph[task.node_id].source,
                True,
                task.node_id,
            )
        else:
            self._record(self.graph[task.node_id], result)

    def _would_lead(self, result: EvalResult) -> bool:
        fitness = result.fitness
        if not fitness or result.marks:  # untimed, failed, or already held for a person
            return False
        best = self.graph.best()
        return best is None or best.fitness is None or fitness > best.score

    @staticmethod
    def _confirmed(first: EvalResult, second: EvalResult) -> EvalResult:
        first.recheck = {
            "fitness": second.fitness,
            "failure": second.failure,
            "latency_ms": [s.latency_ms for s in second.shapes],
        }
        reason = plausibility.disagreement(first, second)
        if reason:
            first.marks["unstable"] = reason
        return first

    def _proposed(self, task: _Task, future: Future) -> None:
        error = future.exception()
        if error is not None:
            # The tool's error (building the prompt, calling the model), never charged to the model as no_code.
            self.operator_errors += 1
            trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            proposal = Proposal(
                source=None, failure=str(Failure.OPERATOR), message=f"operator error: {type(error).__name__}: {error}"
            )
            debug = _debug()  # KERNELEVOLVE_DEBUG=1: the traceback on stderr too; always in the run's log file
            log.warning(
                "run %s: the operator failed (%d in a row): %s%s",
                self.run_id,
                self.operator_errors,
                proposal.message,
                f"\n{trace}" if debug else "",
            )
            if not debug:
                log.debug("run %s: the operator's traceback:\n%s", self.run_id, trace)
        else:
            self.operator_errors = 0
            proposal = future.result()
            trace = ""
        calls = [c for _, c in task.calls]
        node = Node(
            id=self.graph.next_id(),
            parents=task.expansion.parents,
            source=proposal.source,
            note=proposal.note,
            tokens=proposal.tokens or sum(c.input_tokens + c.output_tokens for c in calls),
            cost_usd=proposal.cost_usd or sum(c.cost_usd for c in calls),
        )
        self.graph.add(node)
        self.repo.add_node(
            self.run_id,
            node,
            rng_state=rng_state(self.rng),
            elapsed_s=self.elapsed_s,
            llm_call_ids=[i for i, _ in task.calls],
        )
        log.debug(
            "run %s: node %d written (%s of %s): %s",
            self.run_id,
            node.id,
            self.graph.kind(node.id),
            list(node.parents),
            node.note or proposal.message,
        )
        self._emit("node", node)
        if node.source is None:
            failure = proposal.failure or str(Failure.NO_CODE)
            self._record(
                node,
                EvalResult.failed(
                    Failure.parse(failure),
                    proposal.message or "the reply held no kernel",
                    log=trace,
                    device=self.device,
                ),
            )
        else:
            self._submit(_Task("evaluate", node_id=node.id), self._evaluate, node.source, False, node.id)

    def _record(self, node: Node, result: EvalResult) -> None:
        self.graph.set_evaluation(node.id, result)
        self.policy.observe(self.graph, node.id)
        self.repo.record_evaluation(
            self.run_id,
            node.id,
            result,
            policy_state=self.policy.state_dict(),
            rng_state=rng_state(self.rng),
            elapsed_s=self.elapsed_s,
        )
        log.info(
            "run %s: node %d %s: %s%s",
            self.run_id,
            node.id,
            self.graph.kind(node.id),
            "correct" if result.correct else f"failed ({result.failure})",
            f", fitness {result.fitness:.3f}" if result.fitness else "",
        )
        if not result.correct:
            log.debug("run %s: node %d message: %s", self.run_id, node.id, result.message)
        self._emit("evaluated", node)
        if self.profiler is not None and self.profiler.wants(self.graph, node):
            self._submit(_Task("profile", node_id=node.id), self.profiler.run, node.source, result)
        if self.insight_writer is not None:
            child = self.view(node.id)
            parents = [self.view(p) for p in node.parents]
            record = lambda call: self.repo.record_llm_call(self.run_id, None, call)  # noqa: E731
            self._submit(_Task("insight", node_id=node.id), self.insight_writer, self.spec, child, parents, record)

    def _emit(self, event: str, node: Node | None) -> None:
        if self.on_event is not None:
            self.on_event(event, self, node)

    def _profiled(self, task: _Task, future: Future) -> None:
        """A profile came back: stored with the node, shown in its children's prompts."""
        error = future.exception()
        if error is not None:
            self.warnings.append(f"profiling node {task.node_id} failed: {type(error).__name__}: {error}")
            return
        from kernelevolve.memory.profiles import save_profile

        profile = future.result()
        self.profiles[task.node_id] = profile
        save_profile(self.repo, self.run_id, task.node_id, [s.model_dump() for s in profile.summaries], profile.seconds)
        self._emit("profiled", self.graph[task.node_id])
