"""The model-driven path as a user meets it: shapes in prompts and cache keys, the
opt-in reply cache and a resumed run's replay, the insight contract, node notes, and a dead
endpoint. Model calls go through the real SDKs to tests/llm/fake_llm_server.py."""

import json
import os
import random
import socket
import subprocess
import sys
import time

import pytest

from kernelevolve.llm.cache import cache_key, clear
from kernelevolve.llm.providers import OpenAIProvider
from kernelevolve.operators import resolve_operator
from kernelevolve.operators.base import LLMCallRecord, OperatorContext, ParentView
from kernelevolve.operators.llm_operator import LLMOperator, insight_problem
from kernelevolve.evaluation.result import EvalResult, ShapeResult
from kernelevolve.paths import KNOWLEDGE_BASE, REPO_ROOT
from kernelevolve.spec import load_spec
from tests.cli.console import kernelevolve_in_process
from tests.llm.fake_llm_server import FakeLLMServer

SOFTMAX = REPO_ROOT / "specs" / "softmax.yaml"
KERNEL = (KNOWLEDGE_BASE / "kernels" / "softmax.py").read_text()
LLM_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "KERNELEVOLVE_MODEL",
    "KERNELEVOLVE_PRICE",
    "KERNELEVOLVE_DB",
    "KERNELEVOLVE_REPLY_CACHE",
)


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch, tmp_path):
    for var in LLM_ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KERNELEVOLVE_CACHE_DIR", str(tmp_path / "cache"))


def _openai(monkeypatch, url: str, **options) -> OpenAIProvider:
    monkeypatch.setenv("OPENAI_BASE_URL", url + "/v1")
    return OpenAIProvider("local-coder", **options)


def _context(spec, shapes=None, calls=None, device="interpret"):
    return OperatorContext(
        spec=spec,
        run_id="r-test",
        device=device,
        rng=random.Random(0),
        record_llm_call=(calls.append if calls is not None else (lambda r: None)),
        kind="draft",
        shapes=shapes,
    )


def _reply(api, prompt, body):
    return 200, f"Change: one program per row, online max\n\n```python\n{KERNEL}```\n", {}


# -- 1. shapes reach the model, and the cache key -------------------------------------------------


def test_shapes_given_with_shape_reach_the_prompt(monkeypatch, tmp_path):
    """Was: every prompt said `shapes evaluated (module constants): default`/the spec's shapes."""
    spec = load_spec(SOFTMAX)
    with FakeLLMServer(_reply) as server:
        op = LLMOperator(_openai(monkeypatch, server.url), llm_insights=False)
        op.draft(spec, _context(spec, shapes=[{"M": 8, "N": 128}, {"M": 2, "N": 4096}]))
        op.draft(spec, _context(spec))
        prompts = [r.prompt for r in server.requests]
    assert (
        "checked now under the Triton interpreter on CPU, correctness only (given with --shape): M=8, N=128 | M=2, N=4096"
        in prompts[0]
    )
    assert "M=4, N=256" not in prompts[0]  # not the spec's interpret_shapes
    assert "correctness only (the spec's interpret_shapes): M=4, N=256 | M=3, N=1000" in prompts[1]
    # The GPU's shapes are named as what will be timed, in both.
    assert all(
        "timed later on the GPU (h200, against torch.compile), so tune for these: M=524288, N=256" in p for p in prompts
    )
    assert (
        "Tolerances: bfloat16: atol 1e-07, rtol 0.01, norm 0.01" in prompts[0]
        and "Triton interpreter on CPU" in prompts[0]
    )  # dtypes, device


def test_derived_constants_are_shown_at_the_evaluated_shape(monkeypatch, tmp_path):
    ref = tmp_path / "ref.py"
    ref.write_text(
        "import torch\nimport torch.nn as nn\nbatch_size = 4\ndim = 1024 * 2\nhidden = dim * 4\n\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        return x\n\n"
        "def get_inputs():\n    return [torch.randn(batch_size, dim)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    spec = load_spec(ref)
    from kernelevolve.operators.contract import shape_lines

    text = "\n".join(shape_lines(spec, "interpret", [{"dim": 64}]))
    assert "(given with --shape): batch_size=4, dim=64, hidden=256" in text
    assert "so tune for these: batch_size=4, dim=2048, hidden=8192" in text


def test_the_cache_key_covers_everything_that_changes_a_reply(monkeypatch):
    """Was: (provider, model, temperature, system, prompt): a dead server's run replayed replies
    cached against another base URL."""
    a = _openai(monkeypatch, "http://127.0.0.1:1").settings()
    b = _openai(monkeypatch, "http://127.0.0.1:2").settings()
    assert a["endpoint"] != b["endpoint"]
    keys = {
        cache_key(a, "p", "s"),
        cache_key(b, "p", "s"),
        cache_key(dict(a, max_tokens=1), "p", "s"),
        cache_key(dict(a, temperature=0.5), "p", "s"),
        cache_key(a, "p2", "s"),
        cache_key(a, "p", "s2"),
    }
    assert len(keys) == 6


# -- 6. the reply cache: off by default, opt-in, cleared; a resumed run replays its own calls -----


def test_reply_cache_is_off_unless_asked_for(monkeypatch):
    """Was: on by default, shared under the user's home, and switched off only by an env var."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    assert resolve_operator("openai:x").cache is None
    assert resolve_operator("openai:x", use_cache=True).cache is not None
    monkeypatch.setenv("KERNELEVOLVE_REPLY_CACHE", "1")
    from kernelevolve.settings import settings

    settings.cache_clear()  # the environment is read once per process: as a new process would
    assert resolve_operator("openai:x", **settings().operator_options()).cache is not None


def test_same_search_twice_asks_the_model_twice_without_the_cache(monkeypatch, tmp_path):
    spec = load_spec(SOFTMAX)
    with FakeLLMServer(_reply) as server:
        for _ in range(2):
            LLMOperator(_openai(monkeypatch, server.url), llm_insights=False).draft(spec, _context(spec))
        assert len(server.requests) == 2
        for _ in range(2):
            LLMOperator(_openai(monkeypatch, server.url), llm_insights=False, use_cache=True).draft(
                spec, _context(spec)
            )
        assert len(server.requests) == 3  # the second opt-in operator took the cached reply
    assert clear() == 1 and clear() == 0  # `kernelevolve cache clear`


def test_a_resumed_run_replays_its_recorded_calls_and_pays_nothing(monkeypatch):
    spec = load_spec(SOFTMAX)
    calls: list[LLMCallRecord] = []
    with FakeLLMServer(_reply) as server:
        first = LLMOperator(_openai(monkeypatch, server.url), llm_insights=False)
        first.draft(spec, _context(spec, calls=calls))
        assert len(server.requests) == 1

        class Row:  # what Repository.llm_calls returns: the call, not yet attached to a node
            def __init__(self, c):
                self.__dict__.update(vars(c), node_id=None)

        again = LLMOperator(_openai(monkeypatch, server.url), llm_insights=False)
        assert again.replay([Row(c) for c in calls]) == 1
        replayed: list[LLMCallRecord] = []
        proposal = again.draft(spec, _context(spec, calls=replayed))
        assert len(server.requests) == 1 and proposal.source and proposal.cost_usd == 0
        assert replayed[0].cached
        again.draft(spec, _context(spec))  # a second, identical request is a new sample: paid
        assert len(server.requests) == 2


# -- 7. one insight contract; replies that break it are dropped ------------------------------------


def _views():
    ok = EvalResult(correct=True, device="interpret", shapes=[ShapeResult("M=4 bfloat16", {"M": 4}, "bfloat16", True)])
    bad = EvalResult.failed("compile", "arange's range must be a power of 2", device="interpret")
    return ParentView(1, KERNEL, "debug", ok, note="power-of-two arange"), [ParentView(0, KERNEL, "draft", bad)]


@pytest.mark.parametrize(
    "reply, kept",
    [
        ("Power-of-two aranges fixed the compile error; keep BLOCK_N a power of two.", True),
        (f"Here is the module:\n```python\n{KERNEL}```", False),
        ("import torch\nclass ModelNew(nn.Module):\n    pass", False),
        ("word " * 200, False),
    ],
)
def test_insight_replies_that_break_the_contract_are_dropped(monkeypatch, reply, kept):
    """Was: the system prompt demanded a module in a code block while the insight prompt asked
    for one sentence, and code blobs were stored as insights and fed to later prompts."""
    spec = load_spec(SOFTMAX)
    child, parents = _views()
    with FakeLLMServer(lambda api, prompt, body: (200, reply, {})) as server:
        op = LLMOperator(_openai(monkeypatch, server.url))
        text = op.write_insight(spec, child, parents)
        system = server.requests[0].body["messages"][0]["content"]
    assert "no code" in system and "code block" not in system.replace("no code blocks", "")
    assert "Change:" not in system and "ModelNew" not in system
    if kept:
        assert text.endswith(reply) and not op.dropped_insights
    else:
        assert op.dropped_insights and (text is None or "```" not in text and "ModelNew" not in text)
        assert insight_problem(reply)


def test_an_untimed_results_insight_prompt_asks_nothing_about_speed(monkeypatch):
    """Under the interpreter a result holds no timing: its insight prompt must not ask which shapes gained
    or regressed (a model then invents numbers), and says that it was not timed."""
    spec = load_spec(SOFTMAX)
    child, parents = _views()
    with FakeLLMServer(lambda api, prompt, body: (200, "Keep BLOCK_N a power of two.", {})) as server:
        LLMOperator(_openai(monkeypatch, server.url)).write_insight(spec, child, parents)
        prompt = server.requests[0].prompt
    assert "not timed" in prompt and "gained or regressed" not in prompt and "speed" in prompt


# -- 8. notes: the model's one-line summary of its change ------------------------------------------


def test_the_change_line_is_the_nodes_note(monkeypatch):
    spec = load_spec(SOFTMAX)
    with FakeLLMServer(_reply) as server:
        proposal = LLMOperator(_openai(monkeypatch, server.url), llm_insights=False).draft(spec, _context(spec))
        prompt = server.requests[0].prompt
    assert "`Change: <one line saying what you did>`" in prompt  # part of the output contract
    assert proposal.note == "one program per row, online max"


# -- 4. a dead endpoint fails fast, with its message where the run is watched ---------------------


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def _cli(args, env, cwd, timeout=120):
    return subprocess.run(
        [sys.executable, "-c", "from kernelevolve.cli import main; main()", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _in_process(args, env, cwd, monkeypatch):
    return kernelevolve_in_process(args, monkeypatch, env, cwd)


def test_a_closed_port_fails_the_model_check_in_seconds(tmp_path):
    """Was: a 3-node run took 8 min 47 s and printed `failed (no_code)`."""
    env = {k: v for k, v in os.environ.items() if k not in LLM_ENV}
    env.update(OPENAI_BASE_URL=_closed_port(), KERNELEVOLVE_CACHE_DIR=str(tmp_path / "cache"))
    start = time.monotonic()
    proc = _cli(
        [
            "run",
            str(SOFTMAX),
            "--model",
            "openai:local-coder",
            "--device",
            "interpret",
            "--budget",
            "3",
            "--db",
            f"sqlite:///{tmp_path / 'r.db'}",
            "--no-preflight",
        ],
        env,
        tmp_path,
    )
    assert time.monotonic() - start < 30
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --model openai:local-coder: the model check failed")
    assert "Connection refused" in lines[0] and "--no-model-check" in lines[0] and "Traceback" not in proc.stderr


@pytest.mark.timeout(120)
def test_a_closed_port_stops_the_run_in_seconds_with_the_error_on_the_progress_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in LLM_ENV}
    env.update(OPENAI_BASE_URL=_closed_port(), KERNELEVOLVE_CACHE_DIR=str(tmp_path / "cache"))
    db = f"sqlite:///{tmp_path / 'r.db'}"
    start = time.monotonic()
    proc = _cli(
        [
            "run",
            str(SOFTMAX),
            "--model",
            "openai:local-coder",
            "--device",
            "interpret",
            "--budget",
            "5",
            "--db",
            db,
            "--no-model-check",
            "--no-preflight",
        ],
        env,
        tmp_path,
    )
    elapsed = time.monotonic() - start
    assert elapsed < 30, elapsed
    assert proc.returncode == 1, proc.stderr
    progress = [ln for ln in proc.stdout.splitlines() if ln.startswith("node ")]
    assert progress and all("Connection refused" in ln and "cannot reach http://127.0.0.1:" in ln for ln in progress)
    assert "finished: operator_error" in proc.stdout and len(progress) == 3  # 3 in a row, then it stops
    # What `show` lists for the run (in process: it only reads the database, start-up would be most of its time).
    from typer.testing import CliRunner

    from kernelevolve.cli import app

    listed = CliRunner().invoke(app, ["runs", "--db", db, "--json"])
    show = CliRunner().invoke(app, ["show", json.loads(listed.stdout)[0]["id"], "--db", db])
    assert "#0 draft: failed (operator): operator error: openai:local-coder" in show.stdout, show.output


def test_the_file_provider_is_not_asked_a_check_question(tmp_path):
    op = resolve_operator(f"file:{tmp_path / 'answers'}")
    start = time.monotonic()
    op.check_endpoint()
    assert time.monotonic() - start < 1 and list((tmp_path / "answers").iterdir()) == []


@pytest.mark.timeout(300)
def test_resume_replays_a_call_the_stopped_run_paid_for(tmp_path, monkeypatch):
    """A run stopped after a reply was recorded but before its node was written: `resume` takes
    the recorded reply instead of asking (and paying) again, without --reply-cache. (`resume` in
    process: the test's own operator only built the prompt, it holds no reply.)"""
    from kernelevolve.memory import Repository
    from kernelevolve.runs.session import RunSettings, start_run
    from kernelevolve.spec import Budget

    spec = load_spec(SOFTMAX)
    db = f"sqlite:///{tmp_path / 'r.db'}"
    repo = Repository(db)
    settings = RunSettings(
        policy="greedy",
        policy_options={"drafts": 1},
        limits=Budget(max_nodes=1),
        device="interpret",
        model="openai:local-coder",
        seed=1,
        model_options={"llm_insights": False},
    )  # a resume reads it here, not from its environment
    run_id = start_run(repo, spec, settings)
    repo.update_run(run_id, status="interrupted", owner="")
    with FakeLLMServer(_reply) as server:
        op = LLMOperator(_openai(monkeypatch, server.url), llm_insights=False)
        prompt = op.builder.draft(spec, _context(spec)).prompt  # what the run's first step asks
        reply = _reply("openai", prompt, {})[1]
        repo.record_llm_call(run_id, None, LLMCallRecord("openai", "local-coder", prompt, reply, 1000, 500, 0.01))
        env = dict(
            OPENAI_BASE_URL=server.url + "/v1",
            KERNELEVOLVE_LLM_INSIGHTS="0",
            KERNELEVOLVE_CACHE_DIR=str(tmp_path / "cache"),
        )
        proc = _in_process(["resume", run_id, "--db", db], env, tmp_path, monkeypatch)
        asked = [r.prompt for r in server.requests]
    assert proc.returncode == 0, proc.stderr
    assert "1 recorded model reply to replay" in proc.stdout
    assert asked == []  # nothing paid twice
    node = repo.load_graph(run_id)[0]
    assert node.correct and node.note == "one program per row, online max" and node.cost_usd == 0


@pytest.mark.timeout(400)
def test_a_run_with_shape_tells_the_model_those_shapes_and_its_reply_cache_is_in_the_database_when_asked(
    tmp_path, monkeypatch
):
    """The reply cache is opt-in: the same search run twice asks the model twice; with --reply-cache the second
    run takes the first one's replies from the experiment database, and nothing goes to files.
    The runs are given --shape: their prompts name those shapes (was: with --shape, every prompt still named
    the spec's shapes)."""
    env = {k: v for k, v in os.environ.items() if k not in LLM_ENV}
    db = f"sqlite:///{tmp_path / 'r.db'}"
    answer = lambda api, prompt, body: (200, "OK", {}) if "single word OK" in prompt else _reply(api, prompt, body)  # noqa: E731
    args = [
        "run",
        str(SOFTMAX),
        "--model",
        "openai:local-coder",
        "--device",
        "interpret",
        "--budget",
        "1",
        "--drafts",
        "1",
        "--seed",
        "1",
        "--shape",
        "M=8,N=128",
        "--shape",
        "M=2,N=64",
        "--db",
        db,
        "--no-preflight",
        "--no-model-check",
    ]
    import sqlite3

    def cached_replies() -> int:
        with sqlite3.connect(tmp_path / "r.db") as conn:
            return conn.execute("SELECT COUNT(*) FROM reply_cache").fetchone()[0]

    asked, cached, tasks = [], [], []
    with FakeLLMServer(answer) as server:
        changed = dict(
            OPENAI_BASE_URL=server.url + "/v1",
            KERNELEVOLVE_LLM_INSIGHTS="0",
            KERNELEVOLVE_CACHE_DIR=str(tmp_path / "cache"),
            KERNELEVOLVE_STATIC_COST="0",  # the replies are the subject: no static cost probe in the three runs
        )
        env.update(changed)
        # Without the flag nothing is stored; with it the reply is stored, then read back instead of asked.
        # The first two in process; the one that must find the stored reply is a new process, which can
        # only have it from the database.
        for extra, fresh in (([], False), (["--reply-cache"], False), (["--reply-cache"], True)):
            before = len(server.requests)
            if fresh:
                proc = _cli(args + extra, env, tmp_path, timeout=240)
            else:
                proc = _in_process(args + extra, changed, tmp_path, monkeypatch)
            assert proc.returncode == 0, proc.stderr
            asked.append(len(server.requests) - before)
            cached.append(cached_replies())
            tasks.append([r.prompt for r in server.requests[before:] if r.prompt.startswith("# Task:")])
    assert asked == [1, 1, 0]
    assert len(tasks[0]) == 1 and "correctness only (given with --shape): M=8, N=128 | M=2, N=64" in tasks[0][0]
    assert "M=4, N=256" not in tasks[0][0]  # the spec's interpret_shapes are not what this run checks
    assert cached[0] == 0 and cached[1] == cached[2] > 0
    assert not (tmp_path / "cache" / "llm_replies").exists()


def test_code_blob_insights_stored_earlier_are_kept_out_of_prompts_and_listings(monkeypatch, tmp_path):
    """Was: code blobs stored as insights were shown by `insights` and fed to later prompts."""
    from typer.testing import CliRunner

    from kernelevolve.cli import app
    from kernelevolve.memory import Repository
    from kernelevolve.operators.context_builder import PromptBuilder

    blob = f"draft #0: Here is the kernel:\n```python\n{KERNEL}```"
    good = "draft #1: one tile per row is correct at every shape; try two-pass for long rows"
    spec = load_spec(SOFTMAX)
    context = _context(spec)
    context.insights = [blob, good]
    prompt = PromptBuilder(knowledge=None).draft(spec, context).prompt
    assert good in prompt and "Here is the kernel" not in prompt
    db = f"sqlite:///{tmp_path / 'i.db'}"
    repo = Repository(db)
    repo.add_insight(None, None, "softmax", "h200", blob)
    out = CliRunner().invoke(app, ["insights", "--db", db])
    assert out.exit_code == 0 and "holds code" in out.output and "@triton.jit" not in out.output
