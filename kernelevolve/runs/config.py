"""A run's configuration: typed sections, resolved once from the command line over the environment,
saved with the run (the runs table's `settings` column) and read back from it.

`RunConfig` is what the rest of a run reads: the policy's options (one model per policy), the
limits, the model, the evaluation, the profiling and the knowledge base. It is frozen: a resume
that changes a setting (--parallel, --executor, a bigger --budget) makes a new one with
`RunConfig.resumed` and saves it.

`RunSettings` is the column's JSON as every run has written it (flat: `policy`, `policy_options`,
`limits`, `device`, ... , `time_spent`); `RunConfig.from_row` is the one place it is parsed, and
`to_row` writes the same keys, so rows written before this module existed load as they are and
readers of the column (`runs`, `show`, the review pages, `run --json`) see what they always saw.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, field_validator

from kernelevolve.search.policies import POLICIES, make_policy
from kernelevolve.search.profiling import ProfileSettings
from kernelevolve.spec import Budget

EXECUTORS = ("local", "ray")


class RunError(ValueError):
    """A run that cannot be started or resumed as asked; one line (runs.session's SessionError)."""


class ConfigError(RunError):
    """Options (or a stored row) that make no usable run; one line."""


# -- the row: the settings column's JSON ------------------------------------------------------


class RunSettings(BaseModel):
    """How a run searches, as saved in runs.settings (JSON) when it starts and read back by resume.
    Flat, as every run has written it; RunConfig is the typed view (RunConfig.from_row / to_row)."""

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


# -- the sections -----------------------------------------------------------------------------


class PolicyOptions(BaseModel):
    """Options every policy takes (search/policies/base.py); each policy's model subclasses this with its
    `policy: Literal[NAME]` and its own options, and is listed in POLICY_OPTIONS."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    drafts: int
    max_debug_depth: int
    debug_prob: float

    def options(self) -> dict[str, Any]:
        """As the policy's constructor takes them (and as runs.settings["policy_options"] holds them)."""
        return self.model_dump(exclude={"policy"})

    def make(self):
        """A fresh policy with these options (kernelevolve.search.policies)."""
        return make_policy(self.policy, **self.options())


class GreedyOptions(PolicyOptions):
    policy: Literal["greedy"] = "greedy"


class MctsOptions(PolicyOptions):
    policy: Literal["mcts"] = "mcts"
    exploration: float
    branching: int


class EvolutionaryOptions(PolicyOptions):
    policy: Literal["evolutionary"] = "evolutionary"
    population: int
    selection: str
    tournament: int
    crossover_rate: float


# policy name -> its options' model (a new policy: its class in POLICIES and its model here; RunConfig takes
# every model listed here)
POLICY_OPTIONS: dict[str, type[PolicyOptions]] = {
    "greedy": GreedyOptions,
    "mcts": MctsOptions,
    "evolutionary": EvolutionaryOptions,
}
assert set(POLICY_OPTIONS) == set(POLICIES), "every policy needs its options' model here"


def policy_options(name: str, options: dict | None = None) -> PolicyOptions:
    """The policy's full options, validated once by the policy itself (its defaults fill what is not
    given); ConfigError in one line for an unknown policy or a value it refuses."""
    if name not in POLICIES:
        raise ConfigError(f"--policy {name!r}: use one of {', '.join(POLICIES)}")
    try:
        policy = make_policy(name, **(options or {}))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return POLICY_OPTIONS[name].model_validate(policy.options())


class ModelConfig(BaseModel):
    """The operator: `offline`, PROVIDER:MODEL, plugin:PATH.py:CLASS (None: offline, as old rows say);
    `options` are everything it is built with, resolved when the run started."""

    model_config = ConfigDict(frozen=True)
    name: str | None = None
    options: dict = Field(default_factory=dict)


class EvaluationConfig(BaseModel):
    model_config = ConfigDict(frozen=True)
    device: str = "interpret"
    shapes: list[dict] | None = None  # None: the spec's own (or its interpreter shapes)
    timeout_s: float = 300.0  # per candidate phase
    parallel: int | None = None  # nodes in flight at once; None: what the executor takes
    executor: str = "local"
    ray_address: str | None = None


class RunConfig(BaseModel):
    """Everything that decides how a run searches (see the module docstring)."""

    model_config = ConfigDict(frozen=True)
    policy: SerializeAsAny[PolicyOptions] = Field(default_factory=lambda: policy_options("greedy"))
    limits: Budget = Field(default_factory=Budget)
    model: ModelConfig = Field(default_factory=ModelConfig)
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    profile: ProfileSettings | None = None  # profiles of promising nodes; None: none
    knowledge_base: Path | None = None  # the run's own (--kb / $KERNELEVOLVE_KB); None: the bundled one
    seed: int | None = None  # of the run's random stream; drawn when the run is created

    @field_validator("policy", mode="before")
    @classmethod
    def _policy(cls, value: Any) -> Any:
        """A dict of options is read by the model its `policy` names in POLICY_OPTIONS."""
        if isinstance(value, dict):
            return policy_options(value.get("policy", "greedy"), {k: v for k, v in value.items() if k != "policy"})
        return value

    # -- the row ------------------------------------------------------------------------------
    @classmethod
    def from_row(cls, row: dict | None) -> "RunConfig":
        """The config a run was saved with (runs.settings), old rows included; ConfigError when the
        row names something that cannot be used any more (a policy option the policy refuses)."""
        try:
            s = RunSettings.model_validate(row or {})
        except ValidationError as e:
            raise ConfigError(f"the run's settings cannot be read: {_first_error(e)}") from None
        return cls(
            policy=policy_options(s.policy, s.policy_options),
            limits=s.limits,
            model=ModelConfig(name=s.model, options=s.model_options),
            evaluation=EvaluationConfig(
                device=s.device,
                shapes=s.shapes,
                timeout_s=s.timeout_s,
                parallel=s.parallel,
                executor=s.executor,
                ray_address=s.ray_address,
            ),
            profile=None if s.profile is None else ProfileSettings.from_dict(s.profile),
            knowledge_base=None if s.knowledge_base is None else Path(s.knowledge_base),
            seed=s.seed,
        )

    def settings(self) -> RunSettings:
        """As the row's model (flat)."""
        ev = self.evaluation
        return RunSettings(
            policy=self.policy.policy,
            policy_options=self.policy.options(),
            limits=self.limits,
            device=ev.device,
            shapes=ev.shapes,
            model=self.model.name,
            model_options=self.model.options,
            timeout_s=ev.timeout_s,
            seed=self.seed,
            parallel=ev.parallel,
            executor=ev.executor,
            ray_address=ev.ray_address,
            knowledge_base=None if self.knowledge_base is None else str(self.knowledge_base),
            profile=None if self.profile is None else self.profile.to_dict(),
        )

    def to_row(self) -> dict:
        """runs.settings as JSON (time_spent None: the engine writes it)."""
        return self.settings().model_dump(mode="json")

    # -- changes --------------------------------------------------------------------------------
    def resumed(
        self,
        *,
        max_nodes: int | None = None,
        parallel: int | None = None,
        executor: str | None = None,
        ray_address: str | None = None,
    ) -> "RunConfig":
        """This config with a resume's options on top (None: as it was); an executor named without an
        address drops the saved address (--executor local forgets the old cluster)."""
        limits = self.limits
        if max_nodes is not None and max_nodes != limits.max_nodes:
            limits = limits.model_copy(update={"max_nodes": max_nodes})
        ev = {
            k: v
            for k, v in (("parallel", parallel), ("executor", executor), ("ray_address", ray_address))
            if v is not None
        }
        if executor == "local" and ray_address is None:
            ev["ray_address"] = None
        evaluation = self.evaluation.model_copy(update=ev) if ev else self.evaluation
        return self.model_copy(update={"limits": limits, "evaluation": evaluation})

    @property
    def device(self) -> str:
        return self.evaluation.device

    @property
    def knowledge_base_path(self) -> Path:
        """The folder the run reads: its own, else the bundled one (never the process's --kb)."""
        from kernelevolve.paths import BUNDLED_KNOWLEDGE_BASE

        return self.knowledge_base or BUNDLED_KNOWLEDGE_BASE


# -- resolution: the command line over the environment ----------------------------------------


@dataclass(frozen=True)
class RunOptions:
    """A search's command-line options as given (None: not given, the environment's or the default)."""

    policy: str = "greedy"
    budget: int | None = None
    wall_clock: float | None = None
    tokens: int | None = None
    cost: float | None = None
    stall: int | None = None
    target: float | None = None
    timeout: float = 300.0
    drafts: int = 3
    debug_depth: int | None = None  # None: the policy's default
    exploration: float | None = None  # MCTS only; None: its default
    seed: int | None = None
    parallel: int | None = None
    workers: int | None = None  # the old name of --parallel
    executor: str = "local"
    ray_address: str | None = None
    device: str | None = None
    shapes: list[dict] | None = None
    model: str | None = None
    kernel: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    reply_cache: bool = False
    profile_timeout: float | None = None
    knowledge_base: Path | None = None  # None: --kb before the command, else $KERNELEVOLVE_KB, else bundled


def resolve(
    options: RunOptions,
    spec=None,
    env=None,
    *,
    device: Callable[[str | None], str] = lambda d: d or "interpret",
    shapes: Callable[[str], list[dict] | None] | None = None,
    profile: Callable[[str], dict | None] = lambda device: None,
) -> RunConfig:
    """The run's config from its options over the environment (`env`: kernelevolve.settings; read when
    None), every value checked once, in the order the command line lists them; ConfigError in one line.

    `device`, `shapes` and `profile` turn the options' device, shapes and profiling tools into the
    run's (a command's own: they may print notes or probe the GPU); `spec` gives the limits' base."""
    if options.policy not in POLICIES:
        raise ConfigError(f"--policy {options.policy!r}: use one of {', '.join(POLICIES)}")
    for name, value in (
        ("--budget", options.budget),
        ("--timeout", options.timeout),
        ("--drafts", options.drafts),
        ("--wall-clock", options.wall_clock),
        ("--tokens", options.tokens),
        ("--cost", options.cost),
        ("--stall", options.stall),
        ("--target", options.target),
    ):
        positive(name, value)
    parallel = parallel_option(options.parallel, options.workers)
    check_executor(options.executor, options.ray_address)
    positive("--debug-depth", options.debug_depth, allow_zero=True)
    positive("--exploration", options.exploration, allow_zero=True)
    given = {"drafts": options.drafts, "max_debug_depth": options.debug_depth}
    if options.policy == "mcts":
        given["exploration"] = options.exploration
    policy = policy_options(options.policy, {k: v for k, v in given.items() if v is not None})
    if options.temperature is not None and not 0 <= options.temperature <= 2:
        raise ConfigError(f"--temperature {options.temperature}: must be between 0 and 2")
    positive("--max-tokens", options.max_tokens)
    env = _environment() if env is None else env
    model = (options.model or env.model or "offline").strip()
    given = (("temperature", options.temperature), ("max_tokens", options.max_tokens))
    model_options = {k: v for k, v in given if v is not None}
    if not model.startswith(("plugin:", "offline")):  # a model: the environment's settings under the options'
        model_options = {**env.operator_options(), **model_options}
        if options.reply_cache:
            model_options["use_cache"] = True
    if options.kernel is not None:
        if model != "offline":
            raise ConfigError(
                f"--kernel {options.kernel}: only with the offline operator (--model {model} drafts its own kernels)"
            )
        model_options["kernel"] = options.kernel
    # model_options are saved with the run: a resume builds the same operator whatever its environment
    chosen_device = device(options.device)
    chosen_shapes = options.shapes if shapes is None else shapes(chosen_device)
    positive("--profile-timeout", options.profile_timeout)
    profiling = profile(chosen_device)
    base = spec.budget if spec is not None else Budget()
    try:
        limits = base.with_overrides(
            max_nodes=options.budget,
            wall_clock_s=options.wall_clock,
            tokens=options.tokens,
            cost_usd=options.cost,
            stall=options.stall,
            target_fitness=options.target,
        )
    except ValidationError as e:
        raise ConfigError(f"the run's limits: {_first_error(e)}") from None
    return RunConfig(
        policy=policy,
        limits=limits,
        model=ModelConfig(name=model, options=model_options),
        evaluation=EvaluationConfig(
            device=chosen_device,
            shapes=chosen_shapes,
            timeout_s=options.timeout,
            parallel=parallel,
            executor=options.executor,
            ray_address=options.ray_address,
        ),
        profile=None if profiling is None else ProfileSettings.from_dict(profiling),
        knowledge_base=knowledge_base(options.knowledge_base),
        seed=options.seed,
    )


def knowledge_base(given: Path | str | None = None) -> Path | None:
    """The run's knowledge base: `given`, else --kb before the command, else $KERNELEVOLVE_KB, else None
    (the bundled one; saved as None so that the run reads whichever copy is installed)."""
    from kernelevolve.paths import users_knowledge_base

    if given is not None:
        return Path(given).expanduser().resolve()
    return users_knowledge_base()


def positive(name: str, value, allow_zero: bool = False) -> None:
    if value is not None and (value < 0 or (value == 0 and not allow_zero)):
        raise ConfigError(f"{name} {value}: must be {'0 or more' if allow_zero else 'more than 0'}")


def parallel_option(parallel: int | None, workers: int | None) -> int | None:
    """--parallel, or --workers, its earlier name (kept, hidden)."""
    if parallel is not None and workers is not None and parallel != workers:
        raise ConfigError(
            f"--parallel {parallel} and --workers {workers}: --workers is the old name of --parallel; give one"
        )
    value = parallel if parallel is not None else workers
    positive("--parallel", value)
    return value


def check_executor(executor: str | None, ray_address: str | None, saved: str | None = None) -> None:
    """A known executor; Ray installed when it is the one (one line otherwise, before anything is spent)."""
    if executor is not None and executor not in EXECUTORS:
        raise ConfigError(f"--executor {executor!r}: use local or ray")
    if (executor or saved) == "ray":
        from kernelevolve.runs.ray_executor import RayUnavailable, require_ray

        try:
            require_ray()
        except RayUnavailable as e:
            raise ConfigError(str(e)) from None
    elif ray_address is not None:
        raise ConfigError("--ray-address needs --executor ray")


def _environment():
    from kernelevolve.settings import SettingsError, settings

    try:
        return settings()
    except SettingsError as e:
        raise ConfigError(str(e)) from None


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ()))
    return f"{where}: {err['msg']}" if where else err["msg"]
