"""One place that turns options into a ready run, and a run's row back into one.

- config.py: `RunConfig`, the typed configuration (policy options per policy, limits, model,
  evaluation, profiling, knowledge base); `resolve` makes it once from the command line over the
  environment; `RunConfig.from_row` / `to_row` read and write the runs table's settings column.
- lifecycle.py: `create`, `start` and `open` a run; `Run.engine`, `Run.search`, `Run.close` own the
  operator's check and replay, the executor (made and closed once), the engine and the log file.

The CLI's `run`, `resume` and `suite`, campaigns and the Ray workers all go through here; the spec
and the knowledge base travel with the run (Run.spec, RunConfig.knowledge_base) to the operator, the
evaluator, the profiler and every worker, never through a process-wide setting.
"""

from kernelevolve.runs.config import (
    POLICY_OPTIONS,
    ConfigError,
    EvaluationConfig,
    EvolutionaryOptions,
    GreedyOptions,
    MctsOptions,
    ModelConfig,
    PolicyOptions,
    RunConfig,
    RunError,
    RunOptions,
    RunSettings,
    policy_options,
    resolve,
)
from kernelevolve.runs.lifecycle import (
    Run,
    check_resumable,
    create,
    live_owner,
    load_run_spec,
    make_executor,
    make_operator,
    open,
    owner_tag,
    start,
)

__all__ = [
    "POLICY_OPTIONS",
    "ConfigError",
    "EvaluationConfig",
    "EvolutionaryOptions",
    "GreedyOptions",
    "MctsOptions",
    "ModelConfig",
    "PolicyOptions",
    "Run",
    "RunConfig",
    "RunError",
    "RunOptions",
    "RunSettings",
    "check_resumable",
    "create",
    "live_owner",
    "load_run_spec",
    "make_executor",
    "make_operator",
    "open",
    "owner_tag",
    "policy_options",
    "resolve",
    "start",
]
