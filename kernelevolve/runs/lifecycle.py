"""A run from its row to its end: created once (`create`), opened for a search (`open`), searched
(`Run.search`) and closed (`Run.close`).

`open` reads the run's row once: its config (RunConfig.from_row, or the caller's), its spec (the
caller's, else the one on disk, checked against the run's fingerprint), its operator (checked,
given the replies it recorded, attached to the database). `Run.engine` makes the executor (the
local Evaluator or Ray workers) once, with the run's knowledge base, and the engine positioned
where the run stands; `Run.close` closes that executor once, unless the caller lent its own (a
campaign shares one evaluator between its problems and closes it itself).
"""

from __future__ import annotations

import os
import random
import socket
import threading
from contextlib import nullcontext
from pathlib import Path
from typing import Callable

from kernelevolve.evaluation.executors import Executor
from kernelevolve.memory.workers import pid_alive
from kernelevolve.runs.config import RunConfig, RunError
from kernelevolve.search.engine import SearchEngine
from kernelevolve.search.random_state import restore_rng, rng_state
from kernelevolve.spec import Spec


def owner_tag() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def live_owner(owner: str | None) -> int | None:
    """The pid in an owner tag (host:pid) when it is another live process on this host, else None."""
    host, _, pid = (owner or "").rpartition(":")
    if host == socket.gethostname() and pid.isdigit() and int(pid) != os.getpid() and pid_alive(int(pid)):
        return int(pid)
    return None


def check_resumable(repo, run_id: str, force: bool = False):
    """The run row, or RunError when it does not exist or another live process holds it."""
    run = repo.run(run_id)
    if run is None:
        known = ", ".join(r.id for r in repo.runs()[:5]) or "none"
        raise RunError(f"no run {run_id!r} in {repo.display_url} (recent runs: {known})")
    pid = live_owner(run.owner) if run.status == "running" and not force else None
    if pid is not None:
        raise RunError(f"run {run_id} is being searched by process {pid} on this host (stop it, or pass --force)")
    return run


def load_run_spec(run) -> Spec:
    """The run's spec as it is on disk now; RunError when it cannot be read or its reference changed
    since the run (its fingerprint differs): the run's results would not hold for it."""
    from kernelevolve.spec import SpecError, load_spec

    try:
        spec = load_spec(run.spec_path)
    except (SpecError, OSError) as e:
        raise RunError(f"run {run.id}: its spec cannot be loaded any more: {e}") from None
    if spec.fingerprint != run.spec_fingerprint:
        raise RunError(
            f"run {run.id}: the reference of {run.spec_path} changed since the run started "
            f"(fingerprint {spec.fingerprint} != {run.spec_fingerprint})"
        )
    return spec


def make_operator(config: RunConfig, spec: Spec | None = None):
    """The run's operator, built from its saved options alone (and the run's knowledge base) and, given
    a spec, checked against it (the offline operator needs a reference kernel); RunError in one line."""
    from kernelevolve.operators import OperatorError, resolve_operator

    name = config.model.name
    try:
        operator = resolve_operator(name, **operator_options(config))
        if spec is not None:
            operator.check(spec)
        return operator
    except OperatorError as e:
        raise RunError(str(e)) from None
    except Exception as e:  # a plugin that fails to import or construct is unusable input too
        raise RunError(f"--model {name!r}: cannot load the operator: {type(e).__name__}: {e}") from None


def operator_options(config: RunConfig) -> dict:
    """The operator's saved options, with the run's knowledge base for the built-in operators (a
    plugin's constructor gets its saved options only)."""
    options = dict(config.model.options)
    if not (config.model.name or "offline").strip().startswith("plugin:"):
        from kernelevolve.knowledge import KnowledgeBase, KnowledgeError

        try:
            options["knowledge"] = KnowledgeBase.load(config.knowledge_base_path)
        except KnowledgeError:
            pass  # the operator meets it itself, and says so as it always has
    return options


def create(repo, spec: Spec, config: RunConfig) -> tuple[str, RunConfig]:
    """Write a new run (nothing searched yet); its id and its config as saved (the seed drawn when
    none was given)."""
    if config.seed is None:
        config = config.model_copy(update={"seed": random.SystemRandom().randrange(2**31)})
    source = spec.path if spec.path is not None else spec.reference
    run_id = repo.create_run(
        spec=spec,
        policy=config.policy.policy,
        device=config.device,
        settings=config.to_row(),
        rng_state=rng_state(random.Random(config.seed)),
        policy_state=config.policy.make().state_dict(),
        snapshot=source.read_text(),
        owner=owner_tag(),
    )
    return run_id, config


def start(repo, spec: Spec, config: RunConfig, *, operator=None, executor: Executor | None = None) -> "Run":
    """A new run, opened: `create` then `open` with the spec and config in hand."""
    run_id, config = create(repo, spec, config)
    return open(repo, run_id, spec=spec, config=config, operator=operator, executor=executor)


def open(  # noqa: A001 (kernelevolve.runs.open: a run, not a file)
    repo,
    run_id: str,
    *,
    spec: Spec | None = None,
    config: RunConfig | None = None,
    operator=None,
    executor: Executor | None = None,
    max_nodes: int | None = None,
    parallel: int | None = None,
    executor_name: str | None = None,
    ray_address: str | None = None,
    prepare_operator: bool = True,
) -> "Run":
    """The run `run_id` ready to search (RunError in one line when it cannot be).

    `spec` and `config` default to the run's own (the spec from disk, checked against its fingerprint;
    a campaign passes its spec with the baseline it names); `operator` to the one its config names
    (checked against the spec), `executor` to one the run makes and closes. `max_nodes`, `parallel`,
    `executor_name` and `ray_address` are a resume's options: saved with the run for later resumes.
    `prepare_operator`: give the operator the run's recorded model calls (a resumed run never asks
    twice) and the database (its reply cache)."""
    row = repo.run(run_id)
    if row is None:
        raise RunError(f"no run {run_id!r} in {repo.display_url}")
    if config is None:
        config = RunConfig.from_row(row.settings)
    resumed = config.resumed(max_nodes=max_nodes, parallel=parallel, executor=executor_name, ray_address=ray_address)
    if resumed != config:
        repo.update_run(run_id, settings={**(row.settings or {}), **resumed.to_row(), "time_spent": _spent(row)})
        config = resumed
    if spec is None:
        spec = load_run_spec(row)
    elif spec.fingerprint != row.spec_fingerprint:  # a caller's spec (a campaign's): the run's reference all the same
        raise RunError(
            f"run {run_id}: the reference of {row.spec_path} changed since the run started "
            f"(fingerprint {spec.fingerprint} != {row.spec_fingerprint})"
        )
    if operator is None:
        operator = make_operator(config)
    replayed = 0
    if prepare_operator:
        replayed = operator.replay(repo.llm_calls(run_id)) or 0
        operator.attach(repo)  # e.g. --reply-cache: kept in the experiment database
    return Run(repo, row, config, spec, operator, executor, replayed)


class Run:
    """One run opened for a search: its row, config, spec and operator; the executor and engine once
    asked for (`engine`); closed once (`close`, or `with run:`)."""

    def __init__(
        self, repo, row, config: RunConfig, spec: Spec, operator, executor: Executor | None, replayed: int
    ) -> None:
        self.repo, self.row, self.config, self.spec, self.operator = repo, row, config, spec, operator
        self.id: str = row.id
        self.replayed = replayed  # model replies recorded by earlier sessions, handed to the operator
        self.executor = executor
        self._owns_executor = executor is None
        self._engine: SearchEngine | None = None
        self._closed = False

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def engine(self, on_event=None, *, insight_writer=None, profiler=None, release: bool = False) -> SearchEngine:
        """The search engine, positioned where the run stands in the database (made once; RunError when
        the executor cannot be made, e.g. Ray missing or its cluster unusable). `release`: the engine
        closes a lent evaluator when its search ends (its warm processes end; it stays usable)."""
        if self._engine is not None:
            return self._engine
        config, repo = self.config, self.repo
        if self.executor is None:
            self.executor = make_executor(repo, self.id, config)
        if profiler is None and config.profile is not None:
            from kernelevolve.search.profiling import Profiler

            profiler = Profiler(
                config.profile,
                self.spec,
                config.device,
                config.evaluation.shapes,
                self.executor,
                knowledge_base=config.knowledge_base_path,
            )
        row = repo.run(self.id)  # as the last session left it
        policy = config.policy.make()
        policy.load_state_dict(row.policy_state or {})
        repo.update_run(self.id, owner=owner_tag())
        self._engine = SearchEngine(
            repo=repo,
            run_id=self.id,
            spec=self.spec,
            graph=repo.load_graph(self.id),
            policy=policy,
            operator=self.operator,
            evaluator=self.executor,
            limits=config.limits,
            rng=restore_rng(row.rng_state),
            device=config.device,
            shapes=config.evaluation.shapes,
            elapsed_s=row.elapsed_s,
            insight_writer=insight_writer or self.operator.write_insight,
            on_event=on_event,
            max_in_flight=config.evaluation.parallel,
            profiler=profiler,
            time_spent=(row.settings or {}).get("time_spent"),
            close_evaluator=release,  # the run closes the executor it made (close), the lender its own
        )
        return self._engine

    def search(self, on_log: Callable[[Path], None] | None = None, *, log: bool = True) -> str:
        """Search until the run stops; its termination reason. `log`: everything logged meanwhile goes
        to the run's own log file too (its path handed to `on_log` first); a campaign keeps one file."""
        from kernelevolve.logs import run_log

        engine = self.engine()
        with run_log(self.id) if log else nullcontext(None) as log_file:
            if on_log is not None and log_file is not None:
                on_log(log_file)
            return engine.run()

    def close(self) -> None:
        """Close the executor the run made (Ray workers retire, a cluster started for the run stops,
        warm processes end); once, however often it is called."""
        if self._closed:
            return
        self._closed = True
        if self._owns_executor and self.executor is not None:
            self.executor.close()


def make_executor(repo, run_id: str, config: RunConfig) -> Executor:
    """Where the run's evaluations go: the local Evaluator, or Ray workers (RunError when Ray is missing
    or its cluster unusable); both with the run's knowledge base. Baselines go to the run's database."""
    ev = config.evaluation
    if ev.executor == "ray":
        from kernelevolve.runs.ray_executor import RayExecutor, RayUnavailable

        try:
            return RayExecutor(
                ev.device,
                db_url=repo.url,
                run_id=run_id,
                address=ev.ray_address,
                timeout_s=ev.timeout_s,
                knowledge_base=config.knowledge_base,  # None: each worker's bundled one
            )
        except RayUnavailable as e:
            raise RunError(str(e)) from None
    if ev.executor != "local":
        raise RunError(f"executor {ev.executor!r}: use local or ray")
    from kernelevolve.evaluation.evaluator import Evaluator
    from kernelevolve.memory.repository import BaselineTable

    evaluator = Evaluator(
        device=ev.device,
        timeout_s=ev.timeout_s,
        baseline_store=BaselineTable(repo),
        knowledge_base=config.knowledge_base_path,
    )
    evaluator.report = LocalWorkers(repo, run_id)
    return evaluator


class LocalWorkers:
    """The local evaluator's places as rows of the workers table (registered when first used)."""

    def __init__(self, repo, run_id: str) -> None:
        self.repo, self.run_id = repo, run_id
        self.workers: dict[int, object] = {}
        self._lock = threading.Lock()

    def __call__(self, place: int, gpu: str, state: str, node_id: int | None, queued: int) -> None:
        from kernelevolve.memory.workers import LiveWorker

        with self._lock:
            worker = self.workers.get(place)
            if worker is None:
                worker = self.workers[place] = LiveWorker.here(self.repo, gpu=gpu, run_id=self.run_id)
        worker.set(state, node_id, queued)

    def close(self) -> None:
        with self._lock:
            workers, self.workers = list(self.workers.values()), {}
        for worker in workers:
            worker.close()


def _spent(row) -> dict | None:
    return (row.settings or {}).get("time_spent")
