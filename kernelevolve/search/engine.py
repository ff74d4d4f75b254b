"""The search loop: select, propose (operator), write pending, evaluate, record; until a limit.

All graph and database writes happen on the calling thread; worker threads only run the
operator, the evaluator, the profiler and the insight writer. Each node costs two transactions: it
is written as pending when it gets a place to be evaluated in, and its evaluation is written with
the policy and random state after, so a run killed at any instant resumes from the database without
losing or redoing an evaluated node (a pending node is simply evaluated again).

Keeping the evaluator fed: `max_in_flight` (--parallel, default the evaluator's
parallelism) evaluations run at once, and as many proposals are made ahead while they run; a
finished proposal waits in order for the next free place, and is written then. A would-be best's
re-evaluation (recheck) takes the place its first evaluation freed. Profiles (search/profiling.py)
never queue ahead of evaluations: the best node's may take the next free place, others only a place
nobody waits for, all within the run's profile share. Where the places' time goes is counted
(search/timing.py) and stored with the run (runs.settings["time_spent"]).

This module is the loop and its writes; what it uses but does not decide lives beside it: the
units of work and their order (search/tasks.py), what the operator is shown and what its errors
become (search/proposals.py), confirming a would-be best (search/recheck.py), insights
(search/insights.py), where a search stands (search/progress.py) and the random stream's stored
form (search/random_state.py).
"""

from __future__ import annotations

import logging
import random
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from itertools import count
from typing import Callable

from kernelevolve.evaluation.executors import EvaluationKind, EvaluationRequest, Executor, WorkerLost
from kernelevolve.operators.base import OperatorContext, ParentView
from kernelevolve.records.calls import LLMCallRecord
from kernelevolve.records.graph import Node, SearchGraph
from kernelevolve.records.result import EvalResult, Failure
from kernelevolve.search import proposals, recheck
from kernelevolve.search.insights import INSIGHT_LIMIT, InsightWriter, insight_family, store_insight
from kernelevolve.search.policies import Expansion, Policy
from kernelevolve.search.progress import Progress, progress_of, spent
from kernelevolve.search.random_state import rng_state
from kernelevolve.search.tasks import EVALUATOR_STAGES, Task, completion_order, proposed_source, timed
from kernelevolve.search.termination import stop_reason
from kernelevolve.search.timing import TimeLedger, TimeSpent
from kernelevolve.spec import Budget

log = logging.getLogger(__name__)


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
        evaluator: Executor,
        limits: Budget,
        rng: random.Random,
        device: str,
        shapes: list[dict] | None = None,
        elapsed_s: float = 0.0,
        insight_writer: InsightWriter | None = None,
        on_event: Callable[[str, "SearchEngine", Node | None], None] | None = None,
        max_in_flight: int | None = None,
        profiler=None,
        time_spent: dict | None = None,
        close_evaluator: bool = True,
    ) -> None:
        self.repo, self.run_id, self.spec, self.graph = repo, run_id, spec, graph
        self.policy, self.operator, self.evaluator, self.limits = policy, operator, evaluator, limits
        self.rng, self.device, self.shapes = rng, device, shapes
        self.insight_writer, self.on_event = insight_writer, on_event
        self.close_evaluator = close_evaluator  # False: its owner closes it (kernelevolve.runs.Run)
        # Evaluations at once (--parallel; default what the evaluator takes), and as many proposals ahead.
        self.max_in_flight = max(1, max_in_flight or evaluator.parallelism)
        self._elapsed_before, self._t0 = elapsed_s, time.monotonic()
        self.in_flight: dict[Future, Task] = {}
        self.waiting: deque[Task] = deque()  # pending nodes and finished proposals, waiting for a place
        self._seq = count()
        self.stop_reason: str | None = None
        self.operator_errors = 0
        self.warnings: list[str] = []
        # Promising nodes are profiled (search/profiling.py) within a share of the GPU time; their
        # profiles reach the prompts.
        self.profiler = profiler
        self.profiles: dict = {}
        self.plan = None
        if profiler is not None:  # after a resume: the promising nodes not profiled yet are offered again
            from kernelevolve.search.profiling import resume_plan

            self.profiles, self.plan = resume_plan(repo, run_id, profiler, evaluator.gpu_count, graph)
        share = profiler.settings.share if profiler is not None else None
        self.ledger = TimeLedger(self.max_in_flight, evaluator.gpu_count, share, TimeSpent.from_dict(time_spent))

    # -- state for progress displays ------------------------------------------------------
    @property
    def elapsed_s(self) -> float:
        return self._elapsed_before + time.monotonic() - self._t0

    def spent(self) -> tuple[int, float]:
        return spent(self.graph)

    def time_spent(self) -> TimeSpent:
        """Where the evaluator's places' time went so far (all sessions of the run)."""
        return self.ledger.spent(self.elapsed_s)

    def progress(self) -> Progress:
        return progress_of(
            self.graph,
            self.limits,
            in_flight=len(self.in_flight_work()),
            elapsed_s=self.elapsed_s,
            time=self.time_spent(),
        )

    def in_flight_work(self) -> list[Task]:
        """Nodes on their way: proposals being made or waiting for a place, evaluations and rechecks."""
        running = [t for t in self.in_flight.values() if t.stage in ("propose", "evaluate", "recheck")]
        return running + list(self.waiting)

    def _evaluations(self) -> int:
        return sum(1 for t in self.in_flight.values() if t.stage in ("evaluate", "recheck"))

    def _busy(self) -> int:
        """The evaluator's places taken now (evaluations, rechecks, profiles)."""
        return sum(1 for t in self.in_flight.values() if t.stage in EVALUATOR_STAGES)

    # -- the loop -------------------------------------------------------------------------
    def run(self) -> str:
        """Search until a limit; returns the termination reason (also written on the run)."""
        self.repo.update_run(self.run_id, status="running", termination_reason=None)
        n = self.max_in_flight
        # Pools of their own, so that slow insight writers or proposals never delay an evaluation's start.
        self._pools = {
            "propose": ThreadPoolExecutor(max_workers=n, thread_name_prefix="kernelevolve-propose"),
            "evaluate": ThreadPoolExecutor(
                max_workers=n + self.ledger.gpus + 1, thread_name_prefix="kernelevolve-evaluate"
            ),
            "insight": ThreadPoolExecutor(max_workers=n, thread_name_prefix="kernelevolve-insight"),
        }
        self.ledger.tick(0)
        try:
            for node in self.graph.pending():  # written before a crash, never evaluated: first in line
                self.waiting.append(Task("evaluate", node_id=node.id, seq=next(self._seq)))
            while True:
                if self.stop_reason is None:
                    self.stop_reason = self._check_limits()
                self._launch()
                self.ledger.tick(self._busy())
                if not self.in_flight and not self.waiting:
                    if self.stop_reason is None:  # nothing running and nothing to start
                        self.stop_reason = "exhausted"
                    break
                done, _ = wait(list(self.in_flight), timeout=1.0, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=lambda f: completion_order(self.in_flight[f])):
                    self._complete(future, self.in_flight.pop(future))
                self.ledger.tick(self._busy())
                self._emit("tick", None)
        except BaseException:
            for pool in self._pools.values():
                pool.shutdown(wait=False, cancel_futures=True)
            self.repo.update_run(self.run_id, status="interrupted", elapsed_s=self.elapsed_s)
            try:
                self._save_time()
            except Exception as e:  # noqa: BLE001 (the interruption's own error is the one to raise)
                log.warning("run %s: could not store its time breakdown: %s", self.run_id, e)
            raise
        for pool in self._pools.values():
            pool.shutdown(wait=True)
        if self.close_evaluator:  # its warm processes wait for no more candidates
            self.evaluator.close()
        spent = self.time_spent()
        log.info(
            "run %s stops: %s (%d nodes, %.0fs); %s",
            self.run_id,
            self.stop_reason,
            len(self.graph),
            self.elapsed_s,
            spent.summary(),
        )
        self.repo.update_run(
            self.run_id, status="finished", termination_reason=self.stop_reason, elapsed_s=self.elapsed_s
        )
        self._save_time()
        self._emit("finished", None)
        return self.stop_reason

    def _save_time(self) -> None:
        """The run's time breakdown into its stored settings (runs.settings["time_spent"])."""
        run = self.repo.run(self.run_id)
        if run is not None:
            self.repo.update_run(self.run_id, settings={**run.settings, "time_spent": self.time_spent().to_dict()})

    def _check_limits(self) -> str | None:
        if self.operator_errors >= proposals.MAX_OPERATOR_ERRORS:
            return "operator_error"
        tokens, cost = self.spent()
        reason = stop_reason(self.limits, self.graph, self.elapsed_s, tokens, cost)
        if reason is None and self.profiler is not None and self.profiler.reached(self.graph, self.profiles):
            return "roofline"
        return reason

    def _launch(self) -> None:
        """Fill the free places (pending nodes, then finished proposals, in order), propose ahead, and
        start the profiles the plan allows now."""
        written = False
        while self.waiting and self._evaluations() < self.max_in_flight:
            task = self.waiting.popleft()
            if task.stage == "evaluate":  # a pending node, after a resume
                self._submit_evaluation(task)
            else:
                self._write(task)  # a proposal: written now (and evaluated, unless it holds no kernel)
                written = True
        if written and self.stop_reason is None:  # what was written may end the search (a broken operator)
            self.stop_reason = self._check_limits()
        if self.stop_reason is None:
            self._propose_ahead()
        self._start_profiles()

    def _proposals(self) -> list[Expansion]:
        """The steps proposed and not yet written (being made, or waiting for a place)."""
        making = [t.expansion for t in self.in_flight.values() if t.stage == "propose"]
        return making + [t.expansion for t in self.waiting if t.stage == "propose"]

    def _insight_family(self) -> str:
        """The family insights are filed under and read from (search/insights.py), found once."""
        if not hasattr(self, "_family"):
            self._family = insight_family(self.spec)
        return self._family

    def _propose_ahead(self) -> None:
        proposing = self._proposals()
        free = min(self.max_in_flight - len(proposing), self.limits.max_nodes - len(self.graph) - len(proposing))
        if free <= 0:
            return
        steps = self.policy.select(self.graph, free, self.rng, in_flight=proposing)
        if not steps:
            return
        insights = [
            i.text
            for i in self.repo.insights(self._insight_family(), self.spec.hardware, INSIGHT_LIMIT, run_id=self.run_id)
        ]
        # The whole graph, so an operator never re-proposes what was tried (after a resume too).
        evaluated = [self.view(n.id, compact=True) for n in self.graph.evaluated()]
        pending = [n.source for n in self.graph.pending() if n.source]
        pending += [src for t in self.waiting if t.stage == "propose" and (src := proposed_source(t))]
        for step in steps:
            task = Task("propose", expansion=step)
            context = self._context(step, task, insights, evaluated, pending)
            parents = [self.view(p) for p in step.parents]
            self._submit(task, self._propose, parents, context)

    def _start_profiles(self) -> None:
        if self.plan is None:
            return
        searching = self.stop_reason is None and len(self.graph) + len(self._proposals()) < self.limits.max_nodes
        while True:
            idle = not self.waiting and self._busy() < self.max_in_flight
            node_id = self.plan.pick(
                self.graph,
                idle=idle,
                searching=searching,
                spent_s=self.ledger.seconds["profiling"],
                elapsed_s=self.elapsed_s,
            )
            if node_id is None:
                return
            self.plan.started(node_id)
            node = self.graph[node_id]
            log.debug("run %s: profiling node %d", self.run_id, node_id)
            self._submit(Task("profile", node_id=node_id), self.profiler.run, node.source, node.evaluation)

    def _context(
        self, step: Expansion, task: Task, insights: list[str], evaluated: list[ParentView], pending: list[str]
    ) -> OperatorContext:
        ancestry = [self.view(i, compact=True) for i in proposals.ancestry(self.graph, step.parents)]

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
        return proposals.parent_view(self.graph, node_id, self.profiles, compact)

    def _submit(self, task: Task, fn, *args) -> None:
        task.seq = next(self._seq)
        pool = self._pools["evaluate" if task.stage in EVALUATOR_STAGES else task.stage]
        self.in_flight[pool.submit(timed, task, fn, *args)] = task

    def _submit_evaluation(self, task: Task) -> None:
        node = self.graph[task.node_id]
        kind = EvaluationKind.RECHECK if task.stage == "recheck" else EvaluationKind.FIRST
        request = EvaluationRequest(self.spec, node.source, self.shapes, node_id=node.id, kind=kind)
        self._submit(task, self.evaluator.run, request)

    # -- worker-side jobs -----------------------------------------------------------------
    def _propose(self, parents: list[ParentView], context: OperatorContext):
        return proposals.propose(self.operator, self.spec, parents, context)

    # -- back on the loop thread ----------------------------------------------------------
    def _complete(self, future: Future, task: Task) -> None:
        if task.stage == "insight":
            error = future.exception()
            if error is not None:
                self.warnings.append(f"insight writer failed: {error}")
                log.warning("run %s: insight writer failed on node %s: %s", self.run_id, task.node_id, error)
            elif future.result():
                family = self._insight_family()
                store_insight(
                    self.repo, self.run_id, task.node_id, family, self.spec, self.insight_writer, future.result()
                )
            return
        if task.stage == "profile":
            self._profiled(task, future)
            return
        if task.stage == "propose":
            task.done = future  # written when a place is free (_launch), in the order proposals came
            self.waiting.append(task)
            return
        self.ledger.add("rechecking" if task.stage == "recheck" else "evaluating", task.seconds)
        error = future.exception()
        if isinstance(error, WorkerLost):
            if task.lost is None:  # the worker died, not the candidate: once more, on a fresh worker
                log.warning("run %s: node %s: %s; evaluating it again", self.run_id, task.node_id, error)
                self._submit_evaluation(replace(task, lost=str(error)))
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
            result.scheduling.worker_lost = task.lost  # retried once: say so with the result
        if task.stage == "recheck":
            self._record(self.graph[task.node_id], recheck.confirmed(task.first, result))
        elif recheck.would_lead(self.graph, result):
            # A new best is evaluated again in a fresh process, with new seeds, before it counts: in the
            # place its first evaluation just left, ahead of the candidates waiting for one.
            self._submit_evaluation(Task("recheck", node_id=task.node_id, first=result))
        else:
            self._record(self.graph[task.node_id], result)

    def _write(self, task: Task) -> None:
        """A finished proposal gets its place: written as a pending node (the first transaction), then
        evaluated; one that holds no kernel is recorded as failed at once."""
        future = task.done
        error = future.exception()
        if error is not None:
            # The tool's error (building the prompt, calling the model), never charged to the model as no_code.
            self.operator_errors += 1
            proposal, trace = proposals.operator_failure(error)
            debug = proposals.debug()  # KERNELEVOLVE_DEBUG=1: the traceback on stderr too; always in the run's log file
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
            self._submit_evaluation(Task("evaluate", node_id=node.id))

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
        if self.plan is not None:
            self.plan.offer(self.graph, node)  # profiled when the plan gets to it (_start_profiles)
        if self.insight_writer is not None:
            child = self.view(node.id)
            parents = [self.view(p) for p in node.parents]
            record = lambda call: self.repo.record_llm_call(self.run_id, None, call)  # noqa: E731
            self._submit(Task("insight", node_id=node.id), self.insight_writer, self.spec, child, parents, record)

    def _emit(self, event: str, node: Node | None) -> None:
        if self.on_event is not None:
            self.on_event(event, self, node)

    def _profiled(self, task: Task, future: Future) -> None:
        """A profile came back: stored with the node, shown in its children's prompts."""
        self.ledger.add("profiling", task.seconds)
        self.plan.finished(task.node_id, task.seconds)
        error = future.exception()
        if error is not None:
            self.warnings.append(f"profiling node {task.node_id} failed: {type(error).__name__}: {error}")
            log.warning("run %s: profiling node %s failed: %s", self.run_id, task.node_id, error)
        else:
            from kernelevolve.search.profiling import store_profile

            profile = future.result()
            self.profiles[task.node_id] = profile
            store_profile(self.repo, self.run_id, task.node_id, profile)
            log.info("run %s: node %d profiled in %.1fs", self.run_id, task.node_id, task.seconds)
        self._save_time()  # the share spent so far stays with the run, even if it is killed later
        if error is None:
            self._emit("profiled", self.graph[task.node_id])
