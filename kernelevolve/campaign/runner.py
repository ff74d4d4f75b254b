"""Starting and resuming campaigns: each problem one run, several problems at once over one evaluator.

A search campaign runs one search engine per problem (kernelevolve.runs), `parallel` of
them at a time on threads; all share one Evaluator, whose slots (one per GPU, one per two CPU cores
under the interpreter) bound how many candidates are evaluated at once. A solutions campaign writes
each problem's solution file as node 0 of a run and evaluates it. Every step is in the database
before the next starts (the problem row, then its run, then the run's nodes), so `resume` after a
kill -9 finishes what was cut off and redoes nothing that was recorded.
"""

from __future__ import annotations

import logging
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from pydantic import BaseModel, ConfigDict, Field

from kernelevolve.campaign.problems import Problem
from kernelevolve.memory import campaigns as store
from kernelevolve.runs import RunConfig, live_owner, owner_tag

if TYPE_CHECKING:
    from kernelevolve.evaluation.executors import Executor

SEARCH, SOLUTIONS = "search", "solutions"
NEEDS_A_MODEL = "needs a model"
log = logging.getLogger(__name__)


class CampaignError(ValueError):
    """A campaign that cannot be started or resumed as asked; one line."""


class CampaignSettings(BaseModel):
    """What a campaign was started with (campaigns.settings); resume reads it back."""

    model_config = ConfigDict(extra="ignore")
    kind: str = SEARCH
    model: str = "offline"
    model_options: dict = Field(default_factory=dict)
    policy: str = "greedy"
    policy_options: dict = Field(default_factory=dict)
    budget: int | None = None  # nodes per problem; None: each spec's budget.nodes
    device: str = "interpret"
    parallel: int = 1  # problems searched at once
    timeout_s: float = 300.0
    seed: int | None = None
    baseline: str | None = None  # eager | torch.compile for every problem; None: each spec's own
    baselines: dict[str, str] = Field(default_factory=dict)  # problem -> the baseline it is timed against
    solutions: str | None = None  # the folder of a solutions campaign
    knowledge_base: str | None = None
    paths: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, template: RunConfig, **campaign) -> "CampaignSettings":
        """A campaign's settings from its problems' run config (kernelevolve.runs.resolve) and its own."""
        kb = template.knowledge_base
        return cls(
            model=template.model.name,
            model_options=template.model.options,
            policy=template.policy.policy,
            policy_options=template.policy.options(),
            timeout_s=template.evaluation.timeout_s,
            knowledge_base=None if kb is None else str(kb),
            **campaign,
        )

    def run_config(self, problem=None, spec=None, model: str | None = None) -> RunConfig:
        """The config of a problem's run (without a problem: what every problem's run shares)."""
        from kernelevolve.runs import EvaluationConfig, ModelConfig, policy_options
        from kernelevolve.spec import Budget

        limits = Budget() if spec is None else spec.budget
        limits = limits.with_overrides(max_nodes=1 if self.kind == SOLUTIONS else self.budget)
        return RunConfig(
            policy=policy_options(self.policy, self.policy_options),
            limits=limits,
            model=ModelConfig(name=model or self.model, options=self.model_options),
            evaluation=EvaluationConfig(
                device=self.device, shapes=None if problem is None else problem.shapes, timeout_s=self.timeout_s
            ),
            knowledge_base=self.knowledge_base,
            seed=None if problem is None else (self.seed or 0) + problem.position,
        )


def create(repo, problems: list[Problem], settings: CampaignSettings, skip: dict[str, str]) -> str:
    """Write the campaign and its problems (those in `skip`, name -> why, are never run); its id."""
    settings.baselines = {p.name: settings.baseline or p.spec.baseline for p in problems}
    if settings.seed is None:
        settings.seed = random.SystemRandom().randrange(2**31)
    rows = [
        {
            "name": p.name,
            "path": str(p.path),
            "shapes": p.shapes,
            "shape_rule": p.shape_rule,
            "solution": None if p.solution is None else str(p.solution.resolve()),
            "state": store.SKIPPED if p.name in skip else store.PENDING,
            "note": skip.get(p.name, ""),
        }
        for p in problems
    ]
    return store.create_campaign(repo, settings.kind, settings.model_dump(mode="json"), rows, owner_tag())


def check_resumable(repo, campaign_id: str, force: bool = False):
    row = store.campaign(repo, campaign_id)
    if row is None:
        known = ", ".join(c.id for c in store.campaigns(repo)[:5]) or "none"
        raise CampaignError(f"no campaign {campaign_id!r} in {repo.display_url} (recent campaigns: {known})")
    pid = live_owner(row.owner) if row.status == "running" and not force else None
    if pid is not None:
        raise CampaignError(
            f"campaign {campaign_id} is being run by process {pid} on this host (stop it, or pass --force)"
        )
    return row


@dataclass
class Event:
    """One line of live progress: a problem's node was evaluated, or the problem ended."""

    problem: str
    text: str
    done: int  # problems finished (or skipped) so far
    total: int


def run(repo, campaign_id: str, on_event: Callable[[Event], None] | None = None) -> None:
    """Run (or resume) every problem of the campaign that has not finished."""
    from kernelevolve.evaluation.evaluator import Evaluator
    from kernelevolve.memory.repository import BaselineTable

    row = store.campaign(repo, campaign_id)
    settings = CampaignSettings.model_validate(row.settings)
    store.update_campaign(repo, campaign_id, status="running", owner=owner_tag())
    problems = store.problems(repo, campaign_id)
    todo = [p for p in problems if p.state in (store.PENDING, store.STARTED)]
    counter = _Counter(campaign_id, len(problems) - len(todo), len(problems), on_event)
    log.info(
        "campaign %s: %d of %d problems to run (%s, %s)",
        campaign_id,
        len(todo),
        len(problems),
        settings.kind,
        settings.device,
    )
    # One evaluator for every problem (made and closed here once), with the campaign's knowledge base.
    evaluator = Evaluator(
        device=settings.device,
        timeout_s=settings.timeout_s,
        baseline_store=BaselineTable(repo),
        knowledge_base=settings.run_config().knowledge_base_path,
    )
    job = _solve if settings.kind == SOLUTIONS else _search
    pool = ThreadPoolExecutor(max_workers=max(1, settings.parallel), thread_name_prefix="campaign")
    try:
        with evaluator:
            futures = [pool.submit(_guarded, job, repo, campaign_id, settings, p, evaluator, counter) for p in todo]
            for f in futures:
                f.result()
    except BaseException:
        # Ctrl-C or SIGTERM: the problems' threads may wait on a model for an hour (file:), so they are not
        # waited for; what they recorded is in the database and the campaign resumes from it.
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    store.update_campaign(repo, campaign_id, status="finished")


class _Counter:
    def __init__(self, campaign_id: str, done: int, total: int, on_event) -> None:
        self.campaign_id, self.done, self.total, self.on_event = campaign_id, done, total, on_event
        self.lock = threading.Lock()

    def say(self, problem: str, text: str, finished: bool = False) -> None:
        with self.lock:
            self.done += finished
            log.info("campaign %s: %s: %s", self.campaign_id, problem, text)
            if self.on_event is not None:
                self.on_event(Event(problem, text, self.done, self.total))


def _guarded(job, repo, campaign_id, settings, problem, evaluator: Executor, counter) -> None:
    """One problem; what goes wrong with it is its note, never the other problems' end."""
    try:
        job(repo, campaign_id, settings, problem, evaluator, counter)
    except Exception as e:  # noqa: BLE001 - recorded on the problem and shown; the campaign goes on
        message = " ".join(str(e).split())[:300] or type(e).__name__
        store.update_problem(repo, campaign_id, problem.position, state=store.ERROR, note=message)
        counter.say(problem.name, f"error: {message}", finished=True)


def _spec(problem, settings: CampaignSettings):
    from kernelevolve.spec import load_spec

    spec = load_spec(problem.path)
    baseline = settings.baselines.get(problem.name)
    return spec if baseline in (None, spec.baseline) else spec.model_copy(update={"baseline": baseline})


def _start_run(repo, campaign_id: str, settings: CampaignSettings, problem, spec, model: str) -> str:
    from kernelevolve import runs

    run_id, _ = runs.create(repo, spec, settings.run_config(problem, spec, model))
    store.update_problem(repo, campaign_id, problem.position, run_id=run_id, state=store.STARTED)
    return run_id


def _search(repo, campaign_id, settings: CampaignSettings, problem, evaluator: Executor, counter: _Counter) -> None:
    from kernelevolve import runs
    from kernelevolve.records.graph import best_nodes
    from kernelevolve.views import fitness_text

    spec = _spec(problem, settings)  # with the campaign's baseline, if it names one
    run_id = problem.run_id or _start_run(repo, campaign_id, settings, problem, spec, settings.model)
    # The operator is given the run's recorded model calls (a resumed run never asks twice for one step).
    run = runs.open(repo, run_id, spec=spec, executor=evaluator)
    if run.row.status != "finished":

        def progress(event, engine, node) -> None:
            if event == "evaluated":
                counter.say(problem.name, f"node {node.id} {engine.graph.kind(node.id)}: {fitness_text(node)}")

        # The evaluator is the campaign's (closed by it when every problem is done); the warm processes of
        # this problem's kernels end with its search.
        run.engine(on_event=progress, release=True)
        run.search(log=False)  # the campaign's log file holds every problem's lines
    graph = repo.load_graph(run_id)
    best = best_nodes(graph, 1)
    store.update_problem(repo, campaign_id, problem.position, state=store.DONE)
    outcome = f"best node {best[0].id}: {fitness_text(best[0])}" if best else "no correct kernel"
    counter.say(
        problem.name, f"finished ({repo.run(run_id).termination_reason}, {len(graph)} nodes): {outcome}", finished=True
    )


def _solve(repo, campaign_id, settings: CampaignSettings, problem, evaluator: Executor, counter: _Counter) -> None:
    """A solutions campaign's problem: its file as node 0 of a run, evaluated once."""
    from pathlib import Path

    from kernelevolve.evaluation.executors import EvaluationRequest
    from kernelevolve.search.random_state import rng_state
    from kernelevolve.records.graph import Node
    from kernelevolve.views import fitness_text

    spec = _spec(problem, settings)
    run_id = problem.run_id or _start_run(repo, campaign_id, settings, problem, spec, "solutions")
    graph = repo.load_graph(run_id)
    state = rng_state(random.Random(0))
    if 0 not in graph:
        source = Path(problem.solution).read_text()
        graph.add(Node(id=0, source=source, note=f"solution file {Path(problem.solution).name}"))
        repo.add_node(run_id, graph[0], rng_state=state, elapsed_s=0.0)
    node = graph[0]
    if node.evaluation is None:
        result = evaluator.run(EvaluationRequest(spec, node.source, problem.shapes, node_id=0))
        repo.record_evaluation(run_id, 0, result, policy_state={}, rng_state=state, elapsed_s=result.duration_s)
        graph.set_evaluation(0, result)
    repo.update_run(run_id, status="finished", termination_reason="solution")
    store.update_problem(repo, campaign_id, problem.position, state=store.DONE)
    counter.say(problem.name, f"{Path(problem.solution).name}: {fitness_text(graph[0])}", finished=True)
