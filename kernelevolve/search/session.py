"""Starting and resuming runs: everything a search needs, rebuilt from the database row."""

from __future__ import annotations

import os
import random
import socket
import threading

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from kernelevolve import paths
from kernelevolve.search.engine import SearchEngine, restore_rng, rng_state
from kernelevolve.search.policies import make_policy
from kernelevolve.spec import Budget


class SessionError(ValueError):
    """A run that cannot be started or resumed as asked; one line."""


class RunSettings(BaseModel):
    """How a run searches, saved as runs.settings (JSON) when it starts and read back by resume."""

    model_config = ConfigDict(extra="ignore", validate_assignment=True)
    policy: str = "greedy"
    policy_options: dict = Field(default_factory=dict)
    limits: Budget = Field(default_factory=Budget)
    device: str = "interpret"
    shapes: list[dict] | None = None
    model: str | None = None
    # Everything the operator was built with (the command line's and the environment's, resolved
    # when the run started): a resume builds it from these alone, whatever the environment says then.
    model_options: dict = Field(default_factory=dict)
    timeout_s: float = 300.0
    seed: int | None = None
    # --parallel: nodes in flight at once (saved as "workers" before it had that name); default: the
    # executor's parallelism. Evaluations beyond it wait for a worker.
    parallel: int | None = Field(default=None, validation_alias=AliasChoices("parallel", "workers"))
    executor: str = "local"  # where evaluations run: local (this host's GPUs) | ray
    ray_address: str | None = None  # --ray-address; None: $RAY_ADDRESS, else a Ray cluster started for the run
    knowledge_base: str | None = None  # --kb / $KERNELEVOLVE_KB when the run started; None: the bundled one
    profile: dict | None = None  # search.profiling.ProfileSettings of promising nodes; None: no profiles
    # Not a setting: where the run's time went (search/timing.TimeSpent), written by the engine when a
    # session ends and after each profile, read back by resume.
    time_spent: dict | None = None


def owner_tag() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def start_run(repo, spec, settings: RunSettings) -> str:
    """Write a new run (nothing searched yet) and return its id."""
    policy = make_policy(settings.policy, **settings.policy_options)  # validates the options now
    settings.policy_options = policy.options()
    if settings.seed is None:
        settings.seed = random.SystemRandom().randrange(2**31)
    source = spec.path if spec.path is not None else spec.reference
    return repo.create_run(
        spec=spec,
        policy=settings.policy,
        device=settings.device,
        settings=settings.model_dump(mode="json"),
        rng_state=rng_state(random.Random(settings.seed)),
        policy_state=policy.state_dict(),
        snapshot=source.read_text(),
        owner=owner_tag(),
    )


def check_resumable(repo, run_id: str, force: bool = False):
    """The run row, or SessionError when it does not exist or another live process holds it."""
    run = repo.run(run_id)
    if run is None:
        known = ", ".join(r.id for r in repo.runs()[:5]) or "none"
        raise SessionError(f"no run {run_id!r} in {repo.display_url} (recent runs: {known})")
    pid = live_owner(run.owner) if run.status == "running" and not force else None
    if pid is not None:
        raise SessionError(f"run {run_id} is being searched by process {pid} on this host (stop it, or pass --force)")
    return run


def live_owner(owner: str | None) -> int | None:
    """The pid in an owner tag (host:pid) when it is another live process on this host, else None."""
    host, _, pid = (owner or "").rpartition(":")
    if host == socket.gethostname() and pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid)):
        return int(pid)
    return None


def load_run_spec(run):
    """The run's spec as it is on disk now; SessionError when it cannot be read or its reference
    changed since the run (its fingerprint differs): the run's results would not hold for it."""
    from kernelevolve.spec import SpecError, load_spec

    try:
        spec = load_spec(run.spec_path)
    except (SpecError, OSError) as e:
        raise SessionError(f"run {run.id}: its spec cannot be loaded any more: {e}") from None
    if spec.fingerprint != run.spec_fingerprint:
        raise SessionError(
            f"run {run.id}: the reference of {run.spec_path} changed since the run started "
            f"(fingerprint {spec.fingerprint} != {run.spec_fingerprint})"
        )
    return spec


def build_engine(
    repo,
    run_id: str,
    *,
    operator=None,
    evaluator=None,
    insight_writer=None,
    on_event=None,
    max_nodes: int | None = None,
    parallel: int | None = None,
    executor: str | None = None,
    ray_address: str | None = None,
    profiler=None,
) -> SearchEngine:
    """An engine positioned where the run stands in the database (a new run: at the start).

    `operator`, `evaluator` and `profiler` default to what the run's settings name; `max_nodes` raises the
    node budget (resume with a bigger budget); `parallel`, `executor` and `ray_address` replace the
    run's (resume --parallel ...), saved with it for later resumes.
    """
    run = repo.run(run_id)
    if run is None:
        raise SessionError(f"no run {run_id!r} in {repo.display_url}")
    settings = RunSettings.model_validate(run.settings)
    # The run's knowledge base (None: the bundled one), whatever --kb or the environment say now.
    paths.use_knowledge_base(settings.knowledge_base or paths.BUNDLED_KNOWLEDGE_BASE)
    changed = False
    if max_nodes is not None and max_nodes != settings.limits.max_nodes:
        settings.limits.max_nodes = max_nodes
        changed = True
    for name, value in (("parallel", parallel), ("executor", executor), ("ray_address", ray_address)):
        if value is not None and value != getattr(settings, name):
            setattr(settings, name, value)
            changed = True
    if executor == "local" and ray_address is None:
        settings.ray_address = None
    if changed:
        repo.update_run(run_id, settings=settings.model_dump(mode="json"))
    spec = load_run_spec(run)
    if operator is None:
        from kernelevolve.operators import OperatorError, resolve_operator

        try:
            operator = resolve_operator(settings.model, **settings.model_options)
        except OperatorError as e:
            raise SessionError(str(e)) from None
    if evaluator is None:
        evaluator = make_executor(repo, run_id, settings)
    if insight_writer is None:
        insight_writer = operator.write_insight
    if profiler is None and settings.profile:
        from kernelevolve.search.profiling import ProfileSettings, Profiler

        profiler = Profiler(
            ProfileSettings.from_dict(settings.profile), spec, settings.device, settings.shapes, evaluator
        )
    policy = make_policy(run.policy, **settings.policy_options)
    policy.load_state_dict(run.policy_state or {})
    repo.update_run(run_id, owner=owner_tag())
    return SearchEngine(
        repo=repo,
        run_id=run_id,
        spec=spec,
        graph=repo.load_graph(run_id),
        policy=policy,
        operator=operator,
        evaluator=evaluator,
        limits=settings.limits,
        rng=restore_rng(run.rng_state),
        device=settings.device,
        shapes=settings.shapes,
        elapsed_s=run.elapsed_s,
        insight_writer=insight_writer,
        on_event=on_event,
        max_in_flight=settings.parallel,
        profiler=profiler,
        time_spent=settings.time_spent,
    )


def make_executor(repo, run_id: str, settings: RunSettings):
    """Where the run's evaluations go: the local Evaluator, or Ray workers (SessionError when Ray is
    missing or its cluster unusable). Baselines go to the run's database either way."""
    if settings.executor == "ray":
        from kernelevolve.evaluation.ray_executor import RayExecutor, RayUnavailable

        try:
            return RayExecutor(
                settings.device,
                db_url=repo.url,
                run_id=run_id,
                address=settings.ray_address,
                timeout_s=settings.timeout_s,
                knowledge_base=settings.knowledge_base,
            )
        except RayUnavailable as e:
            raise SessionError(str(e)) from None
    if settings.executor != "local":
        raise SessionError(f"executor {settings.executor!r}: use local or ray")
    from kernelevolve.evaluation.evaluator import Evaluator
    from kernelevolve.memory.repository import BaselineTable

    evaluator = Evaluator(device=settings.device, timeout_s=settings.timeout_s, baseline_store=BaselineTable(repo))
    evaluator.report = _LocalWorkers(repo, run_id)
    return evaluator


class _LocalWorkers:
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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
