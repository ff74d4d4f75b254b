"""kernelevolve.runs.config: the typed run configuration, resolved once from the command line over
the environment, saved in the runs table's settings column and read back, old rows included."""

import json
from pathlib import Path

import pytest

from kernelevolve.memory import Repository
from kernelevolve.runs import (
    ConfigError,
    EvolutionaryOptions,
    GreedyOptions,
    MctsOptions,
    RunConfig,
    RunOptions,
    open as open_run,
    resolve,
)
from kernelevolve.search.profiling import ProfileSettings
from kernelevolve.settings import Settings
from kernelevolve.spec import load_spec

SCALE = Path(__file__).parents[1] / "search" / "fixtures" / "scale.yaml"

# runs.settings exactly as `kernelevolve run` wrote it before kernelevolve.runs existed (the old
# runs.session.RunSettings, once search.session, dumped for an MCTS run with profiles, a model and a --kb).
OLD_ROW = json.loads(
    '{"policy": "mcts", "policy_options": {"drafts": 2, "max_debug_depth": 3, "debug_prob": 0.5, '
    '"exploration": 0.7, "branching": 3}, "limits": {"max_nodes": 7, "wall_clock_s": null, "tokens": null, '
    '"cost_usd": null, "stall": 3, "target_fitness": null}, "device": "interpret", "shapes": [{"N": 64}], '
    '"model": "openai:my-model", "model_options": {"temperature": 0.2, "use_cache": false, "llm_insights": true}, '
    '"timeout_s": 60.0, "seed": 11, "parallel": 2, "executor": "local", "ray_address": null, '
    '"knowledge_base": "/data/my_kb", "profile": {"tools": ["torch"], "within": 0.1, "timeout_s": 300.0, '
    '"roofline_stop": null, "share": 0.1}, "time_spent": null}'
)


def test_an_old_row_loads_into_typed_sections_and_is_written_back_unchanged():
    config = RunConfig.from_row(OLD_ROW)
    assert isinstance(config.policy, MctsOptions)
    assert (config.policy.drafts, config.policy.exploration, config.policy.branching) == (2, 0.7, 3)
    assert config.limits.max_nodes == 7 and config.limits.stall == 3
    assert config.model.name == "openai:my-model" and config.model.options["temperature"] == 0.2
    ev = config.evaluation
    assert (ev.device, ev.shapes, ev.timeout_s, ev.parallel, ev.executor) == (
        "interpret",
        [{"N": 64}],
        60.0,
        2,
        "local",
    )
    assert config.profile == ProfileSettings(tools=["torch"], within=0.1)
    assert config.knowledge_base == Path("/data/my_kb") and config.seed == 11
    assert config.to_row() == OLD_ROW  # readers of the column (runs, show, run --json) see what they saw


def test_older_rows_with_workers_partial_policy_options_or_nothing_still_load():
    oldest = RunConfig.from_row({"policy": "greedy", "policy_options": {"drafts": 2}, "workers": 4})
    assert oldest.evaluation.parallel == 4 and oldest.evaluation.executor == "local"
    assert oldest.policy == GreedyOptions(drafts=2, max_debug_depth=3, debug_prob=0.5)  # the policy's defaults
    assert "workers" not in oldest.to_row() and oldest.to_row()["parallel"] == 4
    empty = RunConfig.from_row({})
    assert isinstance(empty.policy, GreedyOptions) and empty.model.name is None and empty.knowledge_base is None


def test_a_row_the_policy_refuses_is_one_line():
    with pytest.raises(ConfigError, match="drafts must be at least 1"):
        RunConfig.from_row({"policy": "greedy", "policy_options": {"drafts": 0}})
    with pytest.raises(ConfigError, match=r"policy 'greedy': .*unexpected keyword argument 'population'"):
        RunConfig.from_row({"policy": "greedy", "policy_options": {"population": 4}})
    with pytest.raises(ConfigError, match="--policy 'beam': use one of greedy, mcts, evolutionary"):
        RunConfig.from_row({"policy": "beam"})


def test_resolve_puts_the_command_line_over_the_environment():
    env = Settings(temperature=0.3, max_tokens=1000, llm_retries=2, reply_cache=False)
    config = resolve(
        RunOptions(policy="evolutionary", budget=5, drafts=2, model="openai:m", max_tokens=4000, reply_cache=True),
        load_spec(SCALE),
        env,
    )
    assert isinstance(config.policy, EvolutionaryOptions) and config.policy.drafts == 2
    assert config.policy.population == 8  # the policy's own default, validated by the policy once
    assert config.model.options == {
        "temperature": 0.3,
        "max_tokens": 4000,
        "max_retries": 2,
        "llm_insights": True,
        "use_cache": True,
    }
    assert config.limits.max_nodes == 5
    # The offline operator takes none of the model's settings; a plugin neither.
    offline = resolve(RunOptions(kernel="softmax_cute"), None, env)
    assert offline.model.name == "offline" and offline.model.options == {"kernel": "softmax_cute"}


@pytest.mark.parametrize(
    "options, message",
    [
        (RunOptions(policy="beam"), "--policy 'beam': use one of greedy, mcts, evolutionary"),
        (RunOptions(budget=0), "--budget 0: must be more than 0"),
        (RunOptions(parallel=2, workers=3), "--parallel 2 and --workers 3: --workers is the old name"),
        (RunOptions(executor="slurm"), "--executor 'slurm': use local or ray"),
        (RunOptions(ray_address="auto"), "--ray-address needs --executor ray"),
        (RunOptions(debug_depth=-1), "--debug-depth -1: must be 0 or more"),
        (RunOptions(policy="mcts", exploration=-1.0), "--exploration -1.0: must be 0 or more"),
        (RunOptions(temperature=3.0), "--temperature 3.0: must be between 0 and 2"),
        (RunOptions(model="openai:m", kernel="x"), "--kernel x: only with the offline operator"),
    ],
)
def test_resolve_refuses_bad_options_in_one_line(options, message):
    with pytest.raises(ConfigError) as e:
        resolve(options, None, Settings())
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_a_resume_changes_only_what_it_names_and_the_row_keeps_the_rest(tmp_path):
    from kernelevolve.runs import create

    repo = Repository(f"sqlite:///{tmp_path / 'r.db'}")
    spec = load_spec(SCALE)
    run_id, config = create(repo, spec, RunConfig.from_row(dict(OLD_ROW, model="offline", model_options={})))
    repo.update_run(run_id, settings=dict(repo.run(run_id).settings, time_spent={"profiles": 1}))
    run = open_run(repo, run_id, max_nodes=9, parallel=1)
    assert run.config.limits.max_nodes == 9 and run.config.evaluation.parallel == 1
    assert run.config.policy == config.policy and run.config.knowledge_base == config.knowledge_base
    row = repo.run(run_id).settings
    assert row == dict(OLD_ROW, model="offline", model_options={}, limits=dict(OLD_ROW["limits"], max_nodes=9),
                       parallel=1, time_spent={"profiles": 1})  # fmt: skip
    assert RunConfig.from_row(row) == run.config
