"""Starting and resuming runs, as the API before kernelevolve.runs had them (once
kernelevolve.search.session; kept for code that builds engines directly: tests, benchmarks, plugins).
New code: kernelevolve.runs.

A compatibility layer only: every name here is kernelevolve.runs's, or a thin wrapper over it.
"""

from __future__ import annotations

from kernelevolve.runs.config import RunConfig, RunError, RunSettings
from kernelevolve.runs.lifecycle import (
    check_resumable,
    create,
    live_owner,
    load_run_spec,
    open,
    owner_tag,
)
from kernelevolve.runs.lifecycle import make_executor as _make_executor
from kernelevolve.search.engine import SearchEngine

SessionError = RunError  # a run that cannot be started or resumed as asked; one line

__all__ = [
    "RunSettings",
    "SessionError",
    "build_engine",
    "check_resumable",
    "live_owner",
    "load_run_spec",
    "make_executor",
    "owner_tag",
    "start_run",
]


def start_run(repo, spec, settings: RunSettings) -> str:
    """Write a new run (nothing searched yet) and return its id; `settings` gets the seed drawn and the
    policy's full options, as saved."""
    run_id, config = create(repo, spec, RunConfig.from_row(settings.model_dump()))
    settings.seed, settings.policy_options = config.seed, config.policy.options()
    return run_id


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
    """An engine positioned where the run stands (kernelevolve.runs.open(...).engine()); the engine
    closes its evaluator when its search ends, as it always did here."""
    run = open(
        repo,
        run_id,
        operator=operator,
        executor=evaluator,
        max_nodes=max_nodes,
        parallel=parallel,
        executor_name=executor,
        ray_address=ray_address,
        prepare_operator=False,
    )
    return run.engine(on_event, insight_writer=insight_writer, profiler=profiler, release=True)


def make_executor(repo, run_id: str, settings: RunSettings):
    """The run's executor for `settings` (kernelevolve.runs.make_executor)."""
    return _make_executor(repo, run_id, RunConfig.from_row(settings.model_dump()))
