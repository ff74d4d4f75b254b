"""The settings a run started with are the ones its resume uses, whatever the shell's environment
says then (kernelevolve.settings read once; the operator's options saved in runs.settings)."""

import json
import os
import shutil
import subprocess
import sys

from kernelevolve.memory import Repository
from kernelevolve.paths import KNOWLEDGE_BASE, REPO_ROOT
from tests.llm.fake_llm_server import FakeLLMServer

KERNEL = (KNOWLEDGE_BASE / "kernels" / "softmax.py").read_text()


class _Reply:
    """The first request is rate-limited (retried at once), every other gets the reference kernel."""

    def __init__(self):
        self.n = 0

    def __call__(self, api, prompt, body):
        self.n += 1
        if self.n == 1:
            return 429, "slow down", {"retry-after": "0"}
        return 200, f"Change: as the knowledge base has it\n\n```python\n{KERNEL}```\n", {}


def _cli(args, env, cwd):
    return subprocess.run(
        [sys.executable, "-c", "from kernelevolve.cli import main; main()", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_resume_uses_the_runs_settings_not_the_shells(tmp_path):
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELEVOLVE_", "OPENAI_", "ANTHROPIC_"))}
    with FakeLLMServer(_Reply()) as server:
        env = dict(
            base,
            OPENAI_API_KEY="dummy",
            OPENAI_BASE_URL=server.url + "/v1",
            KERNELEVOLVE_MAX_TOKENS="1234",
            KERNELEVOLVE_LLM_INSIGHTS="0",
            KERNELEVOLVE_PRICE="1,2",
            KERNELEVOLVE_MODEL="openai:local-coder",
        )
        started = _cli(
            [
                "run",
                str(REPO_ROOT / "specs" / "softmax.yaml"),
                "--device",
                "interpret",
                "--budget",
                "1",
                "--drafts",
                "1",
                "--db",
                db,
                "--json",
                "--no-preflight",
                "--no-model-check",
            ],
            env,
            tmp_path,
        )
        assert started.returncode == 0, started.stderr[-2000:]
        first = len(server.requests)
        # Another shell: other reply limit, model insights on, another price, no default model.
        env.update(KERNELEVOLVE_MAX_TOKENS="999", KERNELEVOLVE_LLM_INSIGHTS="1", KERNELEVOLVE_PRICE="100,200")
        env.pop("KERNELEVOLVE_MODEL")
        run_id = json.loads(started.stdout)["id"]
        resumed = _cli(["resume", run_id, "--budget", "2", "--db", db, "--json"], env, tmp_path)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        requests = list(server.requests)
    assert first == 2 and len(requests) == 3  # a draft (asked twice), an improve; no insight (insights stayed off)
    assert [r.body.get("max_tokens") for r in requests] == [1234, 1234, 1234]
    assert all(r.body["model"] == "local-coder" for r in requests)
    repo = Repository(db)
    calls = repo.llm_calls(run_id)
    assert len(calls) == 2 and all(c.cost_usd == (1000 * 1 + 500 * 2) / 1e6 for c in calls)  # the run's price
    assert [c.attempts for c in calls] == [2, 1]  # the rate-limited draft took two requests
    saved = repo.run(run_id).settings
    assert saved["model"] == "openai:local-coder"
    assert saved["model_options"] == {
        "max_tokens": 1234,
        "llm_insights": False,
        "use_cache": False,
        "price": [1.0, 2.0],
    }


def test_a_resumed_run_reads_the_knowledge_base_it_started_with(tmp_path, monkeypatch):
    from kernelevolve import paths
    from kernelevolve.runs.session import RunSettings, build_engine, start_run
    from kernelevolve.spec import load_spec

    own = tmp_path / "kb"
    shutil.copytree(KNOWLEDGE_BASE, own)
    repo = Repository(f"sqlite:///{tmp_path / 'kb.db'}")
    spec = load_spec(REPO_ROOT / "specs" / "softmax.yaml")
    run_id = start_run(repo, spec, RunSettings(device="interpret", knowledge_base=str(own)))
    monkeypatch.setenv("KERNELEVOLVE_KB", str(tmp_path / "elsewhere"))
    engine = build_engine(repo, run_id)
    # The run's knowledge base travels with it (its evaluator and its operator); the process's is untouched.
    assert engine.evaluator.knowledge_base == own
    assert engine.operator._knowledge.root == own.resolve()
    assert paths.knowledge_base() == tmp_path / "elsewhere"
