"""A `kernelevolve run` under the interpreter, the model played by the scripted local server: the first draft
is a two-pass softmax, the second a one-pass one. Both are correct and untimed; the static estimate makes the
second the run's best (it used to be the first, all untimed nodes tying), the next optimise prompt carries the
estimate as a static fact, and `show` prints it apart from any speedup."""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kernelevolve.llm.base import CHECK_PROMPT
from kernelevolve.memory import Repository
from kernelevolve.paths import KNOWLEDGE_BASE, REPO_ROOT
from tests.llm.fake_llm_server import FakeLLMServer
from tests.llm.test_run_with_llm import LLM_ENV

pytestmark = pytest.mark.static_cost  # the estimate is part of what these tests check

TWO_PASS = (Path(__file__).parents[1] / "search" / "fixtures" / "softmax_two_pass.py").read_text()
ONE_PASS = (KNOWLEDGE_BASE / "kernels" / "softmax.py").read_text()


class Script:
    def __init__(self):
        self.lock = threading.Lock()
        self.drafts = 0

    def __call__(self, api, prompt, body):
        with self.lock:
            if prompt == CHECK_PROMPT:
                return 200, "OK", {}
            if prompt.startswith("You keep the notes"):
                return 200, "Fewer passes over the row move fewer bytes.", {}
            if prompt.startswith("# Task: write"):
                self.drafts += 1
                source = TWO_PASS if self.drafts == 1 else ONE_PASS
                return 200, f"Change: draft {self.drafts}\n\n```python\n{source}```\n", {}
            if prompt.startswith("# Task: make"):
                return 200, "I would fuse the passes.", {}  # no code: recorded at once, nothing to evaluate
            return 400, f"unexpected prompt: {prompt[:80]}", {}


def _clean_env(tmp_path) -> dict[str, str]:
    """This environment without any model provider's settings, with a fresh reply cache."""
    env = {k: v for k, v in os.environ.items() if k not in LLM_ENV}
    env["KERNELEVOLVE_CACHE_DIR"] = str(tmp_path / "cache")
    return env


def _kernelevolve(args, env, cwd):
    return subprocess.run(
        [sys.executable, "-c", "from kernelevolve.cli import main; main()", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_static_estimate_picks_the_best_of_an_untimed_search(tmp_path):
    with FakeLLMServer(Script()) as server:
        env = _clean_env(tmp_path)
        env.update(ANTHROPIC_API_KEY="dummy-key", ANTHROPIC_BASE_URL=server.url)
        db = f"sqlite:///{tmp_path / 'runs.db'}"
        spec = str(REPO_ROOT / "specs" / "softmax.yaml")
        args = ["--model", "anthropic:claude-opus-4-5", "--device", "interpret", "--budget", "3", "--drafts", "2"]
        proc = _kernelevolve(["run", spec, *args, "--workers", "1", "--seed", "1", "--db", db, "--json"], env, tmp_path)
        received = list(server.requests)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads(proc.stdout)
    graph = Repository(db).load_graph(run["id"])
    first, second = graph[0].evaluation, graph[1].evaluation
    assert first.correct and second.correct and not first.timed and not second.timed
    assert first.static["launches"] == 2 and second.static["launches"] == 1
    assert second.static["cost"] < first.static["cost"]
    assert graph.best().id == 1 and run["best"]["id"] == 1
    assert run["best"]["fitness"] is None and run["best"]["text"].startswith("correct (untimed) est. cost ")

    optimise = [r.prompt for r in received if r.prompt.startswith("# Task: make")]
    assert optimise, [r.prompt[:40] for r in received]
    assert "its static estimate (registers, spills, shared memory, launches and bytes moved" in optimise[0]
    assert "- static estimate (its kernels compiled for sm_90 (h200) without running them" in optimise[0]
    assert "not a timing" in optimise[0] and "kernel _row_stats: num_warps 4" in optimise[0]

    shown = _kernelevolve(["show", run["id"], "--db", db], env, tmp_path)
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert f"correct (untimed) est. cost {second.static['cost']:.2f}" in text
    assert f"correct (untimed) est. cost {first.static['cost']:.2f}" in text
