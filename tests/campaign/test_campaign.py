"""Campaigns end to end under the Triton interpreter: `kernelevolve suite` over the twelve
KernelBench-style problems in problems/, with the solution files in solutions/, and over four of them
with a scripted model (a local OpenAI-compatible server), kill -9 and --resume, and `kernelevolve score`.

Expected counts come from the files: solutions/ holds correct kernels for seven problems and a
wrong one (a minimum for a maximum) for max_dim2; four problems have no solution file.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.console import kernelevolve_in_process
from tests.llm.fake_llm_server import FakeLLMServer

HERE = Path(__file__).parent
PROBLEMS, SOLUTIONS = HERE / "problems", HERE / "solutions"
CLI = [sys.executable, "-c", "from kernelevolve.cli import main; main()"]
SOLVED = {"embedding", "gemm_relu_scale", "layernorm", "matmul", "relu", "scale_add", "sum_dim1"}
WRONG = {"max_dim2"}
UNSOLVED = {"bmm", "conv2d", "groupnorm", "mean_dim0"}
LLM_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "KERNELEVOLVE_MODEL",
    "KERNELEVOLVE_DB",
)


def _env(tmp: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in LLM_ENV}
    env.update(KERNELEVOLVE_CACHE_DIR=str(tmp / "cache"), TRITON_INTERPRET="1", COLUMNS="100", **extra)
    return env


def _cli(args, env, timeout=400):
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=timeout)


def _in_process(args, env: dict, monkeypatch):
    """`kernelevolve ARGS` in process with `env`'s KERNELEVOLVE_*, model, Triton and COLUMNS variables."""
    wanted = {
        name: value
        for name, value in env.items()
        if name.startswith(("KERNELEVOLVE_", "OPENAI_", "ANTHROPIC_", "TRITON_")) or name == "COLUMNS"
    }
    return kernelevolve_in_process(args, monkeypatch, wanted, unset=LLM_ENV)


def _kill_after(proc, path: Path, db: str, finished: int) -> tuple[str, list[str]]:
    """SIGKILL the campaign process once `finished` problems are done; (campaign id, problems done)."""
    from kernelevolve.memory import Repository
    from kernelevolve.memory import campaigns as store

    deadline, done, campaign_id = time.monotonic() + 300, [], None
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        if not path.exists():
            continue
        repo = Repository(db)
        rows = store.campaigns(repo)
        if rows:
            campaign_id = rows[0].id
            done = [p.name for p in store.problems(repo, campaign_id) if p.state == store.DONE]
        repo.close()
        if len(done) >= finished:
            break
    assert proc.poll() is None, "the campaign ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return campaign_id, done


def _by_name(score: dict) -> dict:
    return {p["name"]: p for p in score["problems"]}


@pytest.fixture(scope="module")
def solutions_campaign(tmp_path_factory):
    """One uninterrupted --solutions campaign over all twelve problems: (db url, campaign id, score)."""
    tmp = tmp_path_factory.mktemp("solutions")
    db = f"sqlite:///{tmp / 'suite.db'}"
    with pytest.MonkeyPatch.context() as monkeypatch:
        proc = _in_process(
            ["suite", "--solutions", str(SOLUTIONS), str(PROBLEMS), "--device", "interpret", "--db", db, "--json"],
            _env(tmp),
            monkeypatch,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    score = json.loads(proc.stdout)
    return db, score["campaign_id"], score, proc.stderr


@pytest.mark.xdist_group("campaign-solutions")  # its module fixture made once, on one worker
def test_solutions_campaign_counts_passes_failures_and_skips(solutions_campaign):
    db, campaign_id, score, log = solutions_campaign
    assert score["total"] == 12 and score["correct"] == len(SOLVED)
    assert score["failures"] == {"incorrect": 1, "skipped": len(UNSOLVED)}
    problems = _by_name(score)
    assert {n for n, p in problems.items() if p["correct"]} == SOLVED
    assert problems["max_dim2"]["failure"] == "incorrect"
    assert all(problems[n]["failure"] == "skipped: no solution file" for n in UNSOLVED)
    # untimed on the interpreter: correctness only, said so, no fast_p or speedups
    assert not score["timed"] and score["fast_p"] is None and score["geomean_speedup"] is None
    assert "correctness only" in score["note"]
    assert all(p["speedup"] is None for p in problems.values())
    # the shapes used are the scaling rule's, reported per problem (and printed when it started)
    assert (
        problems["matmul"]["shapes"] == "M=32,K=64,N=64"
        and problems["matmul"]["shape_rule"] == "scaled for the interpreter"
    )
    assert "groupnorm: features=16,dim1=16,dim2=16 [scaled for the interpreter]" in log
    # live progress: one line per problem as it ends
    assert re.search(r"\[\d+/12\] max_dim2: max_dim2.py: failed \(incorrect\)", log)
    # `score` reads the same back from the database, as text too (in process: it only reads the database,
    # and the command's start-up would be most of its time)
    from typer.testing import CliRunner

    from kernelevolve.cli import app

    again = CliRunner().invoke(app, ["score", campaign_id, "--db", db, "--json"], env={"COLUMNS": "100"})
    assert again.exit_code == 0 and json.loads(again.stdout) == score, again.output
    text = CliRunner().invoke(app, ["score", campaign_id, "--db", db], env={"COLUMNS": "100"}).stdout
    assert (
        "correct 7/12 (58%)" in text and "untimed (interpreter)" in text and "failures: incorrect 1, skipped 4" in text
    )


@pytest.mark.xdist_group("campaign-solutions")  # its module fixture made once, on one worker
def test_kill_9_mid_campaign_then_resume_scores_as_uninterrupted(tmp_path, solutions_campaign, monkeypatch):
    """A campaign killed with SIGKILL after some problems finished resumes where it stood: finished
    problems are not evaluated again, and its score matches the uninterrupted campaign's."""
    names = ["relu", "max_dim2", "layernorm", "conv2d"]
    db = f"sqlite:///{tmp_path / 'killed.db'}"
    env = _env(tmp_path)
    proc = subprocess.Popen(
        [
            *CLI,
            "suite",
            "--solutions",
            str(SOLUTIONS),
            *(str(PROBLEMS / f"{n}.py") for n in names),
            "--device",
            "interpret",
            "--db",
            db,
            "--parallel",
            "1",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    campaign_id, done = _kill_after(proc, tmp_path / "killed.db", db, finished=1)
    assert 1 <= len(done) < 3, done  # cut off mid-campaign (conv2d has no solution: skipped from the start)

    from kernelevolve.memory import Repository
    from kernelevolve.memory import campaigns as store

    repo = Repository(db)
    nodes_before = {p.name: len(repo.load_graph(p.run_id)) for p in store.problems(repo, campaign_id) if p.run_id}
    resumed = _in_process(["suite", "--resume", campaign_id, "--db", db, "--json"], env, monkeypatch)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    score = json.loads(resumed.stdout)
    for p in store.problems(repo, campaign_id):  # one node each: nothing finished was evaluated twice
        assert p.state in (store.DONE, store.SKIPPED) and (p.run_id is None or len(repo.load_graph(p.run_id)) == 1)
    # A problem whose run was made but whose node was not yet written when killed has 0: never 2.
    assert all(n <= 1 for n in nodes_before.values()), nodes_before
    uninterrupted = _by_name(solutions_campaign[2])
    for name, p in _by_name(score).items():
        same = uninterrupted[name]
        assert (p["correct"], p["failure"], p["best_node"], p["shapes"]) == (
            same["correct"],
            same["failure"],
            same["best_node"],
            same["shapes"],
        ), name
    assert score["correct"] == sum(uninterrupted[n]["correct"] for n in names) == 2
    assert score["failures"] == {"incorrect": 1, "skipped": 1}


class ScriptedModel:
    """A model behind a local OpenAI-compatible server: each problem's draft is answered with that
    problem's solution file, or (no file) with prose and no code. Problems asked are kept."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, api, prompt, body):
        name = re.search(r"- name: (\S+)", prompt).group(1)
        self.asked.append(name)
        path = SOLUTIONS / f"{name}.py"
        if path.exists():
            return 200, f"Change: the {name} kernel\n\n```python\n{path.read_text()}```\n", {}
        return 200, "I cannot write this one.", {}


def _model_env(tmp: Path, server) -> dict:
    return _env(tmp, OPENAI_API_KEY="sk-scripted", OPENAI_BASE_URL=server.url + "/v1", KERNELEVOLVE_LLM_INSIGHTS="0")


SEARCH = ["--model", "openai:scripted", "--budget", "1", "--drafts", "1", "--device", "interpret", "--no-model-check"]


# The search campaign's problems: one of each outcome (a correct draft, a wrong one, no code) and a
# matmul scaled for the interpreter. The solutions campaign above evaluates all twelve problems' files.
SCRIPTED = ["bmm", "matmul", "max_dim2", "relu"]


@pytest.fixture(scope="module")
def scripted_campaign(tmp_path_factory):
    """One uninterrupted search campaign over four of the problems with the scripted model."""
    tmp = tmp_path_factory.mktemp("scripted")
    model = ScriptedModel()
    with FakeLLMServer(model) as server, pytest.MonkeyPatch.context() as monkeypatch:
        proc = _in_process(
            [
                "suite",
                *(str(PROBLEMS / f"{n}.py") for n in SCRIPTED),
                *SEARCH,
                "--parallel",
                "2",
                "--db",
                f"sqlite:///{tmp / 's.db'}",
                "--json",
            ],
            _model_env(tmp, server),
            monkeypatch,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout), model.asked, proc.stderr


@pytest.mark.xdist_group("campaign-scripted")  # its module fixture made once, on one worker
def test_scripted_model_campaign(scripted_campaign):
    score, asked, log = scripted_campaign
    assert sorted(asked) == SCRIPTED  # one draft per problem, nothing else
    assert score["kind"] == "search" and score["total"] == 4 and score["correct"] == 2
    assert score["failures"] == {"incorrect": 1, "no_code": 1}
    problems = _by_name(score)
    assert {n for n, p in problems.items() if p["correct"]} == SOLVED & set(SCRIPTED)
    assert problems["matmul"]["shapes"] == "M=32,K=64,N=64"  # scaled for the interpreter, as with --solutions
    assert all(p["nodes"] == 1 and p["run_id"] for p in problems.values())
    assert re.search(r"\] relu: node 0 draft: correct \(untimed\)", log)  # live progress per node


@pytest.mark.xdist_group("campaign-scripted")  # its module fixture made once, on one worker
def test_kill_9_mid_search_campaign_then_resume(tmp_path, scripted_campaign, monkeypatch):
    """The same with searches: killed after some problems finished, resumed with the model still
    there; the problems' results equal the uninterrupted campaign's."""
    names = ["relu", "max_dim2", "bmm"]
    db = f"sqlite:///{tmp_path / 'killed.db'}"
    model = ScriptedModel()
    with FakeLLMServer(model) as server:
        env = _model_env(tmp_path, server)
        proc = subprocess.Popen(
            [*CLI, "suite", *(str(PROBLEMS / f"{n}.py") for n in names), *SEARCH, "--parallel", "1", "--db", db],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        campaign_id, done = _kill_after(proc, tmp_path / "killed.db", db, finished=1)
        assert 1 <= len(done) < len(names), done
        resumed = _in_process(["suite", "--resume", campaign_id, "--db", db, "--json"], env, monkeypatch)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    score = json.loads(resumed.stdout)
    uninterrupted = _by_name(scripted_campaign[0])
    for name, p in _by_name(score).items():
        same = uninterrupted[name]
        assert (p["correct"], p["failure"], p["nodes"], p["shapes"]) == (
            same["correct"],
            same["failure"],
            same["nodes"],
            same["shapes"],
        ), name
    assert score["correct"] == 1 and score["failures"] == {"incorrect": 1, "no_code": 1}
    assert sorted(set(model.asked)) == sorted(names) and len(model.asked) <= len(names) + 1  # at most one asked again


def test_sigterm_while_problems_wait_for_the_model_exits_at_once_with_the_resume_command(tmp_path):
    """Two problems wait on a model that never answers (file:, an hour's wait): SIGTERM (or Ctrl-C) ends
    the campaign at once with 143 and the resume command, not when the waits run out."""
    model_dir, db = tmp_path / "model", f"sqlite:///{tmp_path / 'waiting.db'}"
    args = ["suite", str(PROBLEMS / "relu.py"), str(PROBLEMS / "scale_add.py"), "--model", f"file:{model_dir}"]
    args += ["--device", "interpret", "--budget", "2", "--parallel", "2", "--db", db, "--no-model-check"]
    proc = subprocess.Popen([*CLI, *args], env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while len(list(model_dir.glob("*.prompt.md"))) < 2 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            time.sleep(0.2)
        assert len(list(model_dir.glob("*.prompt.md"))) == 2  # both problems wait for their first reply
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err.decode()[-2000:]
    assert re.search(r"interrupted: resume with `kernelevolve suite --resume c-\w+", err.decode())


def test_offline_operator_skips_problems_without_a_reference_kernel(tmp_path, capsys, monkeypatch):
    """No model and no reference kernel in the knowledge base: `skipped: needs a model`, not an error
    (in process: nothing is evaluated, the command's start-up would be most of the time)."""
    from kernelevolve.cli import app

    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KERNELEVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    app(
        [
            "suite",
            str(PROBLEMS / "relu.py"),
            str(PROBLEMS / "matmul.py"),
            "--device",
            "interpret",
            "--db",
            f"sqlite:///{tmp_path / 'offline.db'}",
            "--json",
        ],
        standalone_mode=False,
    )
    score = json.loads(capsys.readouterr().out)
    assert score["correct"] == 0 and score["failures"] == {"skipped": 2}
    assert {p["failure"] for p in score["problems"]} == {"skipped: needs a model"}


@pytest.mark.parametrize(
    "args, message",
    [
        (["suite", str(PROBLEMS / "relu.py"), "--shape", "M=4"], "PROBLEM:NAME=VALUE"),
        (["suite", str(PROBLEMS / "relu.py"), "--shape", "nope:dim=4"], "no problem named 'nope'"),
        (["suite", str(PROBLEMS / "relu.py"), "--shape", "relu:rows=4"], "rows"),
        (["suite", str(PROBLEMS / "nothing*.py")], "matches no file"),
        (["suite", "--solutions", "/no/such/dir", str(PROBLEMS)], "no such directory"),
        (["suite"], "at least one PATH"),
        (["suite", "--resume", "c-nope"], "no campaign 'c-nope'"),
        (["score", "c-nope"], "no campaign 'c-nope'"),
        (["score", "c-nope", "--baseline", "fast"], "use eager or torch.compile"),
    ],
)
def test_bad_input_is_one_line(tmp_path, args, message, capsys):
    """In process (the command's start-up is the slow part): exit 2 and one line on stderr."""
    from kernelevolve.cli import app

    device = ["--device", "interpret"] if args[0] == "suite" and "--resume" not in args else []
    with pytest.raises(SystemExit) as exit_:
        app([*args, *device, "--db", f"sqlite:///{tmp_path / 'x.db'}"], standalone_mode=False)
    err = capsys.readouterr().err
    assert exit_.value.code == 2, err
    assert message in err and len(err.strip().splitlines()) == 1, err
