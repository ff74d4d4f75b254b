"""The harnesses' typed configurations (kernelevolve/harness/runtime/configs.py): what the evaluation side
builds is what the harness reads back, and a configuration that does not fit stops the harness in one
line that names the key."""

import json
import subprocess
import sys

import pytest

from kernelevolve.harness import render
from kernelevolve.harness.runtime.configs import (
    BenchmarkConfig,
    Case,
    ConfigError,
    CorrectnessConfig,
    JudgeConfig,
    PreflightConfig,
    ProbeConfig,
    Tolerance,
)

CASES = (Case("M=4,N=256 float32", {"M": 4, "N": 256}, "float32"), Case("M=2,N=8 bfloat16", {"M": 2}, "bfloat16"))
SIGNALS = dict(result_path="/w/check/result.json", go_path="/w/check/go", stop_path="/w/check/stop", go_timeout_s=30)

CONFIGS = [
    CorrectnessConfig(
        device="interpret",
        candidate_path="/w/candidate.py",
        reference_path="/w/reference.py",
        outputs_dir="/w/check/outputs",
        cases=CASES,
        trials=3,
        seed=7,
        allow_torch_ops=("cumsum",),
        inplace=True,
        import_paths=("/kb/kernels",),
        **SIGNALS,
    ),
    JudgeConfig(
        device="cuda",
        mode="timed",
        reference_path="/w/reference.py",
        outputs_dir="/w/bench/outputs",
        cases=CASES,
        tolerances={"float32": Tolerance(1e-5, 1e-4), "bfloat16": Tolerance(0.02, 0.02, norm_rtol=0.01)},
        trials=3,
        seed=7,
        prepare_path="/w/judge/prepare",
        **SIGNALS,
    ),
    BenchmarkConfig(
        device="cuda",
        mode="candidate",
        candidate_path="/w/candidate.py",
        reference_path="/w/reference.py",
        outputs_dir="/w/bench/outputs",
        cases=CASES,
        seed=7,
        baseline="torch.compile",
        warmup_ms=25,
        rep_ms=100.0,
        **SIGNALS,
    ),
    PreflightConfig(device="interpret", reference_path="/w/reference.py", cases=CASES, seed=3, result_path="/w/r.json"),
    ProbeConfig(
        phase="compile",
        candidate_path="/w/candidate.py",
        reference_path="/w/reference.py",
        case=CASES[0],
        seed=3,
        arch=90,
        **SIGNALS,
    ),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: type(c).__name__)
def test_what_the_evaluator_builds_is_what_the_harness_reads(config):
    text = json.dumps(config.to_dict())  # as the generated script embeds it
    assert type(config).parse(json.loads(text)) == config


def test_a_judge_is_never_told_where_the_candidate_is():
    judge = CONFIGS[1].to_dict()
    assert "candidate_path" not in judge and "import_paths" not in judge
    assert "tolerances" not in CONFIGS[0].to_dict()  # the candidate's own process judges nothing


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda d: d.pop("seed"), "the correctness configuration has no 'seed'"),
        (lambda d: d.update(trails=3), "the correctness configuration has unknown key 'trails'"),
        (lambda d: d.update(trials="3"), "'trials' is '3', not an integer"),
        (lambda d: d.update(device="cpu"), "'device' is 'cpu', not one of 'cuda', 'interpret'"),
        (lambda d: d["cases"][1].pop("dtype"), "'cases'[1] has no 'dtype'"),
        (lambda d: d.pop("result_path"), "the correctness configuration has no 'result_path'"),
    ],
)
def test_a_configuration_that_does_not_fit_is_named_in_one_line(change, words):
    data = CONFIGS[0].to_dict()
    change(data)
    with pytest.raises(ConfigError) as caught:
        CorrectnessConfig.parse(data)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_a_signal_sets_only_what_it_may():
    judge = CONFIGS[1].signalled({"outside_calls": {"0": 16}})
    assert judge.outside_calls == {"0": 16} and judge.seed == 7
    bench = CONFIGS[2].signalled({"profile": True})
    assert bench.profile is True and CONFIGS[2].profile is False  # frozen: a new configuration


def test_a_harness_given_a_configuration_that_does_not_fit_stops_in_one_line(tmp_path):
    """The generated script, run as the sandbox runs it: exit status 2 and one line naming the key."""
    for config, bad, words in [
        (CONFIGS[3].to_dict(), "seed", "harness: the preflight configuration has no 'seed'"),
        (dict(CONFIGS[0].to_dict(), stray=1), None, "harness: the correctness configuration has unknown key 'stray'"),
    ]:
        if bad:
            config.pop(bad)
        tool = "preflight" if "candidate_path" not in config else "correctness"
        script = tmp_path / f"{tool}.py"
        script.write_text(render(tool, config))
        out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 2, out.stderr
        assert out.stderr.strip() == words


def test_render_refuses_another_harnesss_configuration():
    with pytest.raises(ValueError, match="not the 'judge' harness's configuration"):
        render("judge", CONFIGS[0])
